"""DSN-F's custom routing: two-phase destination tables with dateline virtual channels.

The readings chosen where the paper is ambiguous are listed in ``docs/dsnf.md``; the port slots
are those of :mod:`tablegen.topologies.dsnf`.

References
----------
.. [DSNF] N. T. Truong, V. K. Nguyen, N. T. X. Le, I. Fujiwara, F. Chaix, M. Koibuchi,
   "Layout-aware Expandable Low-degree Topology", Section III-B (routing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tablegen.errors import TopologyError
from tablegen.topologies.dsnf import (
    LAYER_DOWN,
    LAYER_UP,
    LOCAL_PRED,
    LOCAL_SUCC,
    RADIX,
    SHORTCUT_OUT,
    SUCC,
)
from tablegen.topology import Topology

__all__ = ["DsnfTables", "dsnf_tables"]


@dataclass
class DsnfTables:
    """Two-phase DSN-F routing tables (see :func:`dsnf_tables`).

    Attributes
    ----------
    pre : numpy.ndarray
        ``int16[N, N]``: network port index at switch ``u`` towards switch ``d`` in phase 0
        (PRE-WORK); ``-1`` on the diagonal.
    main : numpy.ndarray
        ``int16[N, N]``: the same for phase 1 (MAIN-PROCESS and FINISH).
    exit_port : numpy.ndarray
        ``bool[N, 8]``: leaving on such a port in phase 0 switches the packet to phase 1
        (connected Succ and Shortcut-out slots).
    vc_inc : numpy.ndarray
        ``uint8[N, 8]``: 1 on dateline ports; a hop's VC is the number of dateline ports the
        packet left through before it.
    """

    pre: np.ndarray
    main: np.ndarray
    exit_port: np.ndarray
    vc_inc: np.ndarray


def _toward(lu: np.ndarray, target: np.ndarray, p: int) -> np.ndarray:
    """Local slot from level ``lu`` towards ``target`` (``!= lu``) along a complete ring."""
    if p <= 2:  # no wrap link exists: move straight
        return np.where(target > lu, LOCAL_SUCC, LOCAL_PRED)
    fwd = (target - lu) % p
    return np.where(fwd <= p - fwd, LOCAL_SUCC, LOCAL_PRED)  # tie -> Local_Succ


def _same_supernode(l: np.ndarray, k: np.ndarray, p: int) -> np.ndarray:
    """Block of slots between the members of one super-node (Δ = 0 and FINISH)."""
    lu, ld, ku, kd = l[:, None], l[None, :], k[:, None], k[None, :]
    blk = np.where(
        lu == ld, np.where(ku > kd, LAYER_UP, LAYER_DOWN),
        np.where(ku > 0, LAYER_UP, _toward(lu, ld, p)),
    ).astype(np.int16)
    np.fill_diagonal(blk, -1)
    return blk


def dsnf_tables(topo: Topology) -> DsnfTables:
    """Routing tables of the DSN-F custom routing ([DSNF] Fig. 2, §III-B).

    With ``Δ = (s_d - s_u) mod 2^p`` the shortcut level is ``l* = p - floor(log2 Δ)``: the
    largest jump ``2^(p - l*)`` not overshooting (level ``p``'s jump is its Succ link).  This
    is the reading under which the paper's worked example (``n = 32``: 24 -> 0 -> 1 -> 8 -> 7)
    holds; the pseudo-code's ``floor(log(2^p/Δ)) + 1`` and "Succ at level ``p - 1``" do not.

    * phase 0, ``s_u != s_d`` (PRE-WORK): layer ``k_u > 0``: Layer up; ``l_u != l*``: along
      the layer-0 ring the shorter way (tie: Local_Succ); else Shortcut out (Succ if
      ``l* = p``), which enters phase 1.
    * phase 1, ``s_u != s_d`` (MAIN-PROCESS): ``l_u == l*``: Shortcut out / Succ; ``l_u < l*``:
      Local_Succ.  Levels only increase: a jump from level ``l`` leaves ``Δ < 2^(p-l)``, so
      ``l* >= l + 1``; entries with ``l_u > l*`` or ``k_u > 0`` are unreachable and copy phase 0.
    * ``s_u == s_d``, either phase (FINISH, and the Δ = 0 case the paper leaves open):
      ``l_u == l_d``: straight along the layer links; else up to layer 0, the shorter way along
      the ring (tie: Local_Succ) to ``l_d``, then down to ``k_d``.  For ``p = 2`` the
      single local link is taken whichever way it goes.

    Path length <= ``2(K - 1) + p + 2 floor(p/2) <= 2(p + K - 1)`` (Theorem 1 b), no switch
    is visited twice.

    Datelines (``vc_inc``): the Succ port of ``{p, 0, 2^p - 1}`` and every Shortcut-out port
    whose target super-node id is smaller than its own (the two ways a packet wraps around
    the super-node ring, at most once per route); for ``p >= 4`` also the layer-0 local wrap
    ports (slot 1 of level ``p``, slot 0 of level 1), where PRE-WORK / FINISH can walk up to
    ``p/2`` local hops.  For ``p <= 3`` they walk at most one local hop, followed by an exit
    or a layer-down hop, and MAIN never wraps, so no local dateline is needed.

    Parameters
    ----------
    topo : Topology
        A network built by :func:`build_dsnf` (``kind == "dsnf"``, fixed slots).

    Returns
    -------
    DsnfTables

    Notes
    -----
    ``O(N^2)`` time and memory (two ``int16[N, N]`` tables), vectorised: the inter-super-node
    part depends only on ``(u, s_d)`` and is computed as an ``N x 2^p`` array and expanded by
    column indexing; the ``2^p`` diagonal super-node blocks are filled one super-node at a time.
    """
    if topo.kind != "dsnf":
        raise TopologyError(f"dsnf: cannot route {topo.name()}; expected a dsnf topology")
    p = int(topo.params["p"])
    n, n_super = topo.n_switches, 1 << p
    l, k, s = (topo.labels[:, c].astype(np.int64) for c in range(3))

    # floor(log2 Δ) exactly, via the binary exponent; Δ = 0 columns are overwritten below.
    flog = np.zeros(n_super, dtype=np.int64)
    flog[1:] = np.frexp(np.arange(1, n_super, dtype=np.float64))[1] - 1
    delta = (np.arange(n_super)[None, :] - s[:, None]) % n_super  # (n, 2^p)
    lstar = p - flog[delta]
    lu, ku = l[:, None], k[:, None]
    jump = np.where(lstar == p, SUCC, SHORTCUT_OUT)
    x0 = np.where(ku > 0, LAYER_UP, np.where(lu != lstar, _toward(lu, lstar, p), jump))
    x1 = np.where(ku > 0, x0, np.where(lu < lstar, LOCAL_SUCC, np.where(lu == lstar, jump, x0)))
    # np.take keeps the result C-ordered (x[:, s] would be Fortran-ordered), so that the row
    # of a switch -- what a table writer reads -- is contiguous.
    pre = np.take(x0.astype(np.int16), s, axis=1)
    main = np.take(x1.astype(np.int16), s, axis=1)

    order = np.argsort(s, kind="stable")
    bounds = np.searchsorted(s[order], np.arange(n_super + 1))
    for t in range(n_super):
        idx = order[bounds[t]:bounds[t + 1]]
        blk = _same_supernode(l[idx], k[idx], p)
        ix = np.ix_(idx, idx)
        pre[ix] = blk
        main[ix] = blk

    adj = topo.adj
    exit_port = np.zeros((n, RADIX), dtype=bool)
    exit_port[:, SUCC] = adj[:, SUCC] >= 0
    exit_port[:, SHORTCUT_OUT] = adj[:, SHORTCUT_OUT] >= 0

    vc_inc = np.zeros((n, RADIX), dtype=np.uint8)
    vc_inc[(k == 0) & (l == p) & (s == n_super - 1), SUCC] = 1
    has_sc = adj[:, SHORTCUT_OUT] >= 0
    wraps = np.zeros(n, dtype=bool)
    wraps[has_sc] = s[adj[has_sc, SHORTCUT_OUT]] < s[has_sc]
    vc_inc[wraps, SHORTCUT_OUT] = 1
    if p >= 4:
        vc_inc[(k == 0) & (l == p), LOCAL_SUCC] = 1
        vc_inc[(k == 0) & (l == 1), LOCAL_PRED] = 1
    return DsnfTables(pre=pre, main=main, exit_port=exit_port, vc_inc=vc_inc)
