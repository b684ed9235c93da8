"""Bisection of a fabric's switch graph with METIS (pymetis), as the Slim Fly paper
approximates bisection bandwidth ("BB approximated with the Metis partitioner").

METIS was chosen over KaHIP by measurement (docs/design.md, "Bisection"): the best of
:data:`TRIES` seeded METIS runs comes within 6 % of KaHIP's "strong" cut on every fabric
measured (better on one), in 1/10 to 1/100 of the time.
"""

from __future__ import annotations

import numpy as np

from tablegen.topology import Topology

__all__ = ["TRIES", "csr", "bisection"]

#: Seeded METIS runs per bisection; the smallest cut is kept.
TRIES = 16


def csr(topo: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(xadj, adjncy, eweights)``: the switch graph in compressed rows, parallel links
    merged into one edge whose weight is their number.  O(L log L)."""
    n = topo.n_switches
    l = topo.links
    a, b = l[:, 0], l[:, 2]
    keep = a != b
    a, b = a[keep], b[keep]
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    key = np.unique(src * n + dst, return_counts=True)
    pairs, weight = key
    src, dst = pairs // n, pairs % n
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.add.at(xadj, src + 1, 1)
    return np.cumsum(xadj), dst.astype(np.int64), weight.astype(np.int64)


def bisection(topo: Topology, seed: int = 1, tries: int = TRIES) -> dict:
    """Cut the switches into two halves of (nearly) equal endpoint count with METIS (seeds
    ``seed .. seed + tries - 1``, the smallest cut kept) and count the cables across.

    Returns ``{"cut_cables", "fraction", "method", "tries"}``: ``fraction`` is the cut's
    bandwidth over that of ``N/2`` endpoint links (``cut_cables / (N / 2)``, every cable and endpoint link
    of the same rate): 1.0 means any half of the endpoints can send to the other half at full
    rate, as a full-bisection fat tree.  ``None`` when the fabric has under two endpoints.
    Vertex weights are the endpoints per switch (a switch without endpoints weighs 1, so that
    METIS still balances the switches of a fat tree's upper levels).

    METIS is a heuristic: the cut is an upper bound on the minimum bisection.  Seeded,
    deterministic.  O(tries * L log N) expected."""
    import pymetis

    n = topo.n_switches
    if n < 2 or topo.n_hosts < 2:
        return {"cut_cables": 0, "fraction": None, "method": "metis", "tries": 0}
    xadj, adjncy, ew = csr(topo)
    vw = np.maximum(topo.hosts.astype(np.int64), 1)
    l = topo.links
    best = None
    for s in range(seed, seed + tries):
        _, parts = pymetis.part_graph(2, adjacency=pymetis.CSRAdjacency(xadj, adjncy),
                                      vweights=vw, eweights=ew,
                                      options=pymetis.Options(seed=s))
        parts = np.asarray(parts)
        crossing = int((parts[l[:, 0]] != parts[l[:, 2]]).sum())
        best = crossing if best is None else min(best, crossing)
    return {"cut_cables": best, "fraction": best / (topo.n_hosts / 2), "method": "metis",
            "tries": tries}
