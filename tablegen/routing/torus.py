"""Dimension-order routing of the 2-D torus baseline, with dateline virtual channels.

References
----------
.. [DOR] W. J. Dally, C. L. Seitz, "Deadlock-free message routing in multiprocessor
   interconnection networks", IEEE Trans. Computers, 1987 (dateline virtual channels).
"""

from __future__ import annotations

import numpy as np

from tablegen.errors import TopologyError
from tablegen.topologies.baselines import TORUS_MINUS_X, TORUS_MINUS_Y, TORUS_PLUS_X, TORUS_PLUS_Y
from tablegen.topology import Topology

__all__ = ["torus_dor_tables"]


def torus_dor_tables(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Dimension-order (X then Y) minimal routing tables with dateline virtual channels.

    In each dimension the packet takes the shorter way round; a tie (the destination exactly
    half a ring away) goes in the positive direction.

    Parameters
    ----------
    topo : Topology
        A torus from :func:`build_torus`.

    Returns
    -------
    next_port : int16[N, N]
        ``next_port[u, d]`` is the network port INDEX (0..3) that ``u`` forwards to for
        destination switch ``d``; ``-1`` when ``u == d``.
    vc_inc : uint8[N, 4]
        1 on the dateline (wrap-around) ports: ``+x`` of ``i = x-1``, ``-x`` of ``i = 0``,
        ``+y`` of ``j = y-1``, ``-y`` of ``j = 0``; else 0.  The virtual channel of a hop is
        the number of dateline ports crossed before it, so X uses VC 0/1 and Y continues from
        there: at most 3 VCs.  The dateline breaks the cyclic dependency of each ring and
        X-before-Y removes turn cycles, so the channel dependency graph is acyclic [DOR]_.

    Complexity: O(N^2) time and memory, vectorised.
    """
    if topo.kind != "torus":
        raise TopologyError(f"topology kind={topo.kind!r}: expected 'torus'")
    x, y = int(topo.params["x"]), int(topo.params["y"])
    n = topo.n_switches
    i = topo.labels[:, 0]
    j = topo.labels[:, 1]

    def ring_ports(k: int, plus: int, minus: int) -> np.ndarray:
        off = (np.arange(k)[None, :] - np.arange(k)[:, None]) % k  # clockwise, [from, to]
        # 2*off <= k sends ties (off == k/2) the positive way.
        return np.where(off == 0, -1, np.where(2 * off <= k, plus, minus)).astype(np.int16)

    # The X hop depends only on (i_u, i_d) and the Y hop on (j_u, j_d): route on the x*x and
    # y*y ring tables and broadcast to [j_u, i_u, j_d, i_d], which is [u, d] for id j*x + i.
    px = ring_ports(x, TORUS_PLUS_X, TORUS_MINUS_X)[None, :, None, :]
    py = ring_ports(y, TORUS_PLUS_Y, TORUS_MINUS_Y)[:, None, :, None]
    next_port = np.where(px >= 0, px, py).reshape(n, n)

    vc_inc = np.zeros((n, 4), dtype=np.uint8)
    vc_inc[i == x - 1, TORUS_PLUS_X] = 1
    vc_inc[i == 0, TORUS_MINUS_X] = 1
    vc_inc[j == y - 1, TORUS_PLUS_Y] = 1
    vc_inc[j == 0, TORUS_MINUS_Y] = 1
    return next_port, vc_inc
