"""Analysis of topologies: graph and floor-layout metrics, cable lengths, and the DSN-F paper's
comparison with torus, DSN-x and DLN-x (Figs. 4-7)."""
