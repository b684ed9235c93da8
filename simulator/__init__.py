"""fabroute flit-level simulator: runs fabroute's own TableSet (see docs/simulator.md).

Modules: config (SimConfig), engine (compiled core), traffic, run (simulate), sdn (the
adaptive controller's loop for ``ugal-sdn``), sweep, vary (sweeps of one config key), bound,
cli.
"""
