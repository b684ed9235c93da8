"""Topology constructions: Slim Fly over GF(q), Dragonfly, DSN-F (with its expansion and
transformation), the baselines torus, DSN-x and DLN-x, and the SPEC strings that name them."""
