"""Per-hop virtual lanes: the VL of a hop chosen per (switch, in port, out port, SL).

An InfiniBand switch picks a packet's VL from its SL2VL table, indexed by the packet's
SL, the port it came in on and the port it leaves by.  The *path* scheme
(:func:`tablegen.exports.infiniband.sls.assign_sls`) keeps one VL for a path's whole life
(``1 + SL`` after the first hop), so a routing needs as many SLs as layers of acyclic
dependencies, and InfiniBand has 8 data VLs.  Here a path may change VL at any switch: each
SL ``s`` has its own *turn labels* ``lam[u, in slot, out port, s]``, the VL every packet of
SL ``s`` that turns from that in port to that out port at ``u`` takes.  Packets of different
SLs share the VLs, so 16 SLs can separate paths that would need different VLs at a shared
turn while the fabric still uses at most 8 VLs.

Every hop that enters a switch from a host (or from its management port 0) takes VL 0, as
in the path scheme: such a node of the channel dependency graph (CDG) has no incoming edge,
so it closes no cycle, and VLs ``1 .. V-1`` carry the rest.

**Assignment** (:func:`assign_turn_vls`): first fit, longest paths first, ties in
``(layer, source, destination)`` order.  A path tries the SL of the last path that shared
its layer, second switch and destination (the same hops after the first, so likely the same
labels), then SLs 0 .. 15.  With SL ``s`` it walks its hops; a hop whose turn is already
labelled takes that VL, an unlabelled one the first VL, starting from the previous hop's
(from ``1 + s mod (V-1)`` on the first labelled hop, so that SLs start on different VLs as in
the path scheme), whose dependency keeps the one CDG over ``(channel, VL)`` acyclic
(:func:`~tablegen.exports.infiniband.dynorder.insert_dependency`).  A path that fits no SL
undoes its edges and labels and the run stops there; the next run starts with the paths
that stopped earlier runs (at most :data:`RESTARTS` more runs).  The CDG stays acyclic by
construction; :func:`~tablegen.exports.infiniband.sls.verify_ib` proves the result again
from the SL2VL array the files are written from.

Complexity: O(P H) for P paths of H hops plus one incremental order update per new
dependency (Pearce and Kelly); memory ``N (R+1) R 16`` bytes of labels and ``N R (V-1)``
nodes of ``R (V-1)`` bits for N switches of R network ports.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tablegen.exports.infiniband.dynorder import channel_graph, insert_dependency
from tablegen.exports.infiniband.layers import IbLayers
from tablegen.exports.infiniband.limits import NUM_SLS

RESTARTS = 8        # runs after the first, each with the paths that stopped a run first


def assign_turn_vls(layers: IbLayers, vls: int, restarts: int = RESTARTS) -> bool:
    """Give every path of ``layers`` an SL and every used turn a VL below ``vls`` (VL 0
    included) so that the CDG is acyclic; on success set ``layers.sl`` and
    ``layers.sl2vl`` (scheme ``turn``) and return True, else leave them and return False.

    A run that stops at a path starts again with the paths it stopped at first, up to
    ``restarts`` times: a greedy first fit places early paths freely, and the ones that did
    not fit late often fit early (DSN-F n = 384 with MIN: the second run fits)."""
    topo = layers.ts.topo
    n, r = topo.adj.shape
    L = layers.num_layers
    same = np.array([next(i for i in range(k + 1)
                          if np.array_equal(layers.nxt[i], layers.nxt[k])) for k in range(L)],
                    dtype=np.int64)
    flat = layers.hops.ravel()
    order = np.argsort(-flat.astype(np.int64), kind="stable")
    order = order[flat[order] >= 2]           # one-hop paths have no dependency
    sl = np.zeros(flat.size, dtype=np.uint8)
    lam = np.empty((n, r + 1, r, NUM_SLS), dtype=np.int8)
    front: list[int] = []
    for _ in range(restarts + 1 if vls >= 2 else 0):
        lam[:] = -1
        sl[:] = 0
        bad = _turn_fit(layers.nxt, flat, order, topo.adj.astype(np.int64),
                        topo.peer.astype(np.int64), same, NUM_SLS, vls, sl, lam)
        if bad < 0:
            layers.sl = sl.reshape(layers.nxt.shape)
            layers.sl2vl = turn_sl2vl(lam)
            layers.scheme = "turn"
            return True
        front.append(int(order[bad]))
        first = np.array(front, dtype=np.int64)
        order = np.concatenate([first, order[~np.isin(order, first)]])
    return False


def turn_sl2vl(lam: np.ndarray) -> np.ndarray:
    """``uint8[N, R + 1, R + 1, 16]`` SL2VL array (slot 0: host or management port, ``1 + j``
    network port ``j``) of turn labels ``lam[u, in slot, j, SL]``: VL 0 from slot 0 and
    toward hosts; a turn no path takes maps to VL 1 (any VL would do: nothing uses it)."""
    n, rin, r, s = lam.shape
    out = np.zeros((n, rin, r + 1, s), dtype=np.uint8)
    out[:, 1:, 1:, :] = np.where(lam[:, 1:] < 0, 1, lam[:, 1:])
    return out


@njit(cache=True)
def _turn_fit(nxt, flat, order, adj, peer, same, S, V, sl, lam):
    """First fit of SLs and turn labels (module docstring) of the paths ``order`` (flat
    ``(layer, source, destination)`` indices) into ``sl`` and ``lam``; returns -1, or the
    position in ``order`` of the first path that fits no SL.

    CDG node of channel ``c = u * R + j`` on VL ``v >= 1``: ``c * W + v - 1`` with
    ``W = V - 1``; its edges are bits ``j' * W + v' - 1`` over the nodes of the switch behind
    (:mod:`~tablegen.exports.infiniband.dynorder`'s layout with ``R * W`` bits per node)."""
    L, n, _ = nxt.shape
    R = adj.shape[1]
    W = V - 1
    RW = R * W
    C = n * RW
    g = np.zeros((C, (RW + 7) // 8), dtype=np.uint8)
    rank = np.arange(C).astype(np.int32)
    out, into, seen, work, fwd, back = channel_graph(adj, peer, W)
    memo = np.full((L, n, n), -1, dtype=np.int8)
    chans = np.empty(n + 1, dtype=np.int64)
    slots = np.empty(n + 1, dtype=np.int64)
    added = np.empty(n + 1, dtype=np.int64)
    labelled = np.empty(n + 1, dtype=np.int64)
    tick = 0
    for oi in range(order.shape[0]):
        p = order[oi]
        length = flat[p]
        k, x, d = p // (n * n), p // n % n, p % n
        slot = 0
        for m in range(length):
            j = nxt[k, x, d]
            chans[m] = x * R + j
            slots[m] = slot
            slot = peer[x, j] + 1
            x = adj[x, j]
        v2 = chans[1] // R
        first = memo[same[k], v2, d]
        placed = False
        for t in range(S + 1):
            s = first if t == 0 else t - 1
            if s < 0 or (t > 0 and s == first):
                continue
            na, nl, ok = 0, 0, True
            prev, pv = -1, 1 + s % W          # prev: node of the last hop (-1: VL 0)
            for i in range(1, length):
                u, j = chans[i] // R, chans[i] % R
                lv = lam[u, slots[i], j, s]
                got = -1
                for ci in range(1 if lv >= 0 else W):
                    vv = lv if lv >= 0 else 1 + (pv - 1 + ci) % W
                    b = (j * W + vv - 1)
                    if prev < 0 or g[prev, b >> 3] & (1 << (b & 7)):
                        got = vv
                        break
                    tick += 1
                    if insert_dependency(g, rank, out, into, prev, b, seen, tick, work,
                                         fwd, back):
                        added[na] = prev * RW + b
                        na += 1
                        got = vv
                        break
                if got < 0:
                    ok = False
                    break
                if lv < 0:
                    lam[u, slots[i], j, s] = got
                    labelled[nl] = (u * (R + 1) + slots[i]) * R + j
                    nl += 1
                prev, pv = chans[i] * W + got - 1, got
            if ok:
                sl[p] = s
                if first < 0:
                    memo[same[k], v2, d] = s
                placed = True
                break
            for q in range(na):       # removing edges keeps the order topological
                a, b = added[q] // RW, added[q] % RW
                g[a, b >> 3] &= ~np.uint8(1 << (b & 7))
            for q in range(nl):
                e = labelled[q]
                lam[e // ((R + 1) * R), e // R % (R + 1), e % R, s] = -1
        if not placed:
            return oi
    return -1
