"""Compiled walk of deterministic table classes (MIN, DSN-F) for :mod:`tablegen.verify`.

Those classes fan out nowhere, so every (source, destination) pair is one path; walking them
one by one in compiled code beats any vectorised formulation (O(N^2 L) simple steps).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DEAD_END, TOO_LONG = 1, 2


@njit(cache=True)
def walk_all_pairs(adj, t0, t1, two_phase, exit_port, vc_inc, n_vcs, vc_base, max_hops,
                   deps, hist, vc_seen):
    """Walk every (s, d) path.  Marks ``deps[in_channel, out_port * V + out_vc]`` and
    ``vc_seen``, counts path lengths in ``hist``; returns ``(status, switch, destination)``
    with status 0, :data:`DEAD_END` or :data:`TOO_LONG`."""
    n, r = adj.shape
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            u, ph, vc, inch, hops = s, 0 if two_phase else 1, vc_base, -1, 0
            while u != d:
                if hops == max_hops:
                    return TOO_LONG, u, d
                j = t0[u, d] if ph == 0 else t1[u, d]
                if j < 0:
                    return DEAD_END, u, d
                if ph == 0 and exit_port[u, j]:
                    ph = 1
                vc_seen[vc] = True
                if inch >= 0:
                    deps[inch, j * n_vcs + vc] = True
                inch = (u * r + j) * n_vcs + vc
                vc = min(vc + vc_inc[u, j], n_vcs - 1)
                u = adj[u, j]
                hops += 1
            hist[hops] += 1
    return 0, -1, -1


def run(ts, c, deps, vc_seen):
    """Walk class ``c`` of ``ts``; returns ``(hist dict, error message or None)``."""
    topo = ts.topo
    two = c.table0 is not None
    t1 = ts.tables[c.table1]
    t0 = ts.tables[c.table0] if two else t1
    ep = ts.exit_port if (two and c.exit == "port") else np.zeros(topo.adj.shape, dtype=bool)
    hist = np.zeros(c.max_hops + 1, dtype=np.int64)
    status, u, d = walk_all_pairs(topo.adj, t0, t1, two, ep, ts.vc_inc.astype(np.int64),
                                  ts.num_vcs, c.vc_base, c.max_hops, deps, hist, vc_seen)
    err = None
    if status == DEAD_END:
        err = f"class {c.name}: no table entry at switch {u} for destination {d}"
    elif status == TOO_LONG:
        err = (f"class {c.name}: a path is longer than {c.max_hops} hops (loop?) — e.g. a "
               f"packet at switch {u} toward {d}")
    return {int(h): int(k) for h, k in enumerate(hist) if k}, err
