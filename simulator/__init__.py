"""fabroute flit-level simulator: runs fabroute's own TableSet (see docs/simulator.md).

Modules: config (SimConfig), engine (compiled core), traffic, run (simulate), sweep, cli.
"""
