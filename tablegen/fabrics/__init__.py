"""Fabrics as they are cabled (issue 26): the fabric file and its readers, and the match of a
cabled fabric onto the planned topology.  Beside :mod:`tablegen.topologies` (the plans)."""
