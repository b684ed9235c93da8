"""fabroute's table model and everything that computes or proves it: topologies, routing,
tables, verification, exports (docs/architecture.md)."""
