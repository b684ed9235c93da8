"""The ``ib-phase`` variant: DSN-F trees whose VLs follow the ring direction, datelines by SL.

The ``ib-climb`` variant (:mod:`~tablegen.exports.infiniband.climb`) searches turn labels
and runs out of them between DSN-F n = 1,024 and 2,048.  This one needs no search over
labels: the VL of a hop is a fixed function of the kinds of its two channels, the switch's
ring position and one threshold per SL.

* **Ring positions** ``pos = supernode * p + level - 1`` ([DSNF] §III-B's labels; a switch
  of a layer >= 1 sits at its layer-0 twin's position), ``N = p * 2^p`` positions.  A
  channel is **W** when it raises the position (the signed displacement around the ring is
  positive), **C** when it lowers it, *down* / *up* for layer links.
* **Groups by turn** (``GROUP[in kind, out kind]``): W after W or down: group W; C after
  anything but up: group C (W -> C enters it); W after C: the path's last W hop, group Z;
  an up link only enters the destination (group Z).  A path is valid when its groups never
  fall: ``W* C* W?`` after its first hop, which is VL 0 (it comes from a host).
* **VLs**: VL 0 from a host; group W: VL 1 at a switch with ``pos >= k``, VL 2 below;
  group C: VL 3 at ``pos <= k``, VL 4 above; group Z: VL 5.  ``k = SL * N / 16``.
* **Deadlock freedom**: within VL 1 and 2 every dependency rises in ``(pos, layer 0
  last)`` — a W hop raises the position, a down hop keeps it and leaves the upper layer —
  except the ring's wrap ``N - 1 -> 0``, and a path whose W positions avoid ``k`` wraps
  from VL 1 into VL 2, never back.  C mirrors it on VLs 3 and 4.  Groups only rise
  (0 < W < C < Z), and Z's hops lead into the destination only.  So the CDG is acyclic when
  every path's SL has its threshold outside the positions of the path's switches after the
  first — a span shorter than ``N - N / 16``: the trees bound it (``SPAN``), and the SL is
  the first of the 16 thresholds outside it.  ``verify_ib`` proves the result again.
* **Trees**, per destination ``d`` in id order: a Dijkstra from ``d`` whose switches commit
  to the cheapest valid path through a committed neighbour, a hop costing ``1 + BETA *
  (load / mean load)^2`` (DFSSSP's balancing, squared so that the hottest channels repel);
  then ``PASSES`` passes that route each destination again against every other's load.  A
  switch no committed neighbour accepts attaches through a leaf neighbour that changes its
  own path for it (a leaf carries no other path).

What it cannot do: any fabric but DSN-F (the positions are its labels), and promise a
tree — a switch that even the leaf repair cannot attach makes it give up
(:class:`NotExpressible`).  Its paths are not minimal: the ``W* C* W?`` pattern and the
balancing lengthen them (DSN-F n = 4,096: 33 / 9.55 hops against the shortest 12 / 8.27).

Complexity: per pass and destination a Dijkstra over ``N`` switches of ``R`` ports,
``O(N R log N)``, so ``O((PASSES + 1) N^2 R log N)`` in all; the SLs one walk per path,
``O(N^2 H)``.  Memory: the ``N x N`` next hops and lengths.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.layers import IbLayers, checked_lengths
from tablegen.exports.infiniband.limits import NUM_SLS
from tablegen.exports.infiniband.turns import turn_sl2vl
from tablegen.tables import TableSet

PHASE = "ib-phase"
BETA = 1.0          # weight of a channel's squared relative load in a hop's cost
PASSES = 4          # passes after the first, each routing every destination again
W_KIND, C_KIND, DOWN, UP = 0, 1, 2, 3
#: GROUP[in kind, out kind]: 1 W, 2 C, 3 Z (the last hops), -1 a turn no valid path takes
GROUP = np.array([[1, 2, 1, 3],
                  [3, 2, 2, 3],
                  [1, 2, -1, -1],
                  [-1, -1, -1, -1]], dtype=np.int64)
VL_Z = 5
_INF = 1 << 30


def phase_layers(ts: TableSet) -> IbLayers:
    """The ``ib-phase`` variant of ``ts``'s DSN-F fabric: one layer of destination trees, an
    SL per (source switch, destination) and the SL2VL of the module docstring.
    Deterministic: the files' verification rebuilds it from the table set alone.  Raises
    :class:`NotExpressible` for another fabric or when a tree leaves a switch out."""
    topo = ts.topo
    if topo.kind != "dsnf":
        raise NotExpressible(f"the {PHASE} variant numbers DSN-F's ring; {topo.name()} is "
                             f"{topo.kind}")
    n = topo.n_switches
    pos, ring = ring_positions(topo)
    adj = topo.adj.astype(np.int64)
    peer = topo.peer.astype(np.int64)
    kind, delta = channel_kinds(adj, pos, topo.labels[:, 1].astype(np.int64), ring)
    span = ring - (ring + NUM_SLS - 1) // NUM_SLS - 1
    nxt = np.full((n, n), -1, dtype=np.int64)
    dist = np.zeros((n, n), dtype=np.int64)
    load = np.zeros(adj.shape, dtype=np.float64)
    left = 0
    for again in range(PASSES + 1):
        left = _trees(adj, peer, kind, delta, nxt, dist, load, BETA, span, again > 0)
    if left:
        raise NotExpressible(f"the {PHASE} variant left {left} (switch, destination) pairs "
                             f"without a tree path on {topo.name()}; the IB-native variant "
                             f"(--ib-native) fits any connected fabric")
    thresholds = (np.arange(NUM_SLS, dtype=np.int64) * ring) // NUM_SLS
    sl = _sls(adj, delta, pos, nxt, thresholds, ring)
    nxt3 = np.ascontiguousarray(nxt.T, dtype=np.int16)[None]      # [layer, switch, destination]
    hops = checked_lengths(topo, nxt3)
    layers = IbLayers(ts=ts, lmc=0, kinds=[f"min-{PHASE}"], bounds=[int(hops.max())],
                      nxt=nxt3, target=np.full((1, n), -1, dtype=np.int32), sl=sl[None],
                      hops=hops, info={"seed": 1, "variant": PHASE})
    layers.sl2vl = turn_sl2vl(_labels(adj, peer, kind, pos, thresholds))
    layers.scheme = "turn"
    return layers


def ring_positions(topo) -> tuple[np.ndarray, int]:
    """``int64[N]`` ring position of every DSN-F switch and the ring's length ``p * 2^p``."""
    p = int(topo.params["p"])
    level, supernode = topo.labels[:, 0].astype(np.int64), topo.labels[:, 2].astype(np.int64)
    return supernode * p + level - 1, p << p


def channel_kinds(adj: np.ndarray, pos: np.ndarray, layer: np.ndarray, ring: int):
    """``int64[N, R]`` kind of every channel (W, C, down, up; -1 unconnected) and its signed
    ring displacement in ``(-ring / 2, ring / 2]``."""
    to = np.maximum(adj, 0)
    delta = (pos[to] - pos[:, None]) % ring
    delta[delta > ring // 2] -= ring
    kind = np.where(delta > 0, W_KIND, np.where(delta < 0, C_KIND,
                    np.where(layer[to] < layer[:, None], DOWN, UP)))
    kind[adj < 0] = -1
    delta[adj < 0] = 0
    return kind.astype(np.int64), delta.astype(np.int64)


@njit(cache=True)
def _via(m, dl, w, d, t1, g2, flo, fhi, span):
    """Whether a path entering the committed switch ``w`` by a hop of kind ``m`` and ring
    displacement ``dl`` is valid; the group of ``w``'s first hop in it and the range of the
    new path's positions (relative to its own switch, unwrapped, from its second switch on)."""
    if w == d:
        return True, 4, 0, 0
    if m == UP:
        return False, 0, 0, 0
    x = GROUP[m, t1[w]]
    if x < 0 or x > g2[w] or fhi[w] - flo[w] > span:
        return False, 0, 0, 0
    return True, x, min(0, dl + flo[w]), max(0, dl + fhi[w])


@njit(cache=True)
def _repair(d, adj, kind, delta, D, nx, t1, g2, flo, fhi, span):
    """Attach every switch the Dijkstra left out: to a committed neighbour that accepts it,
    or through a leaf neighbour that takes another path for it.  Returns how many stay out."""
    n, r = adj.shape
    kids = np.zeros(n, np.int64)
    for u in range(n):
        if u != d and D[u] < _INF:
            kids[adj[u, nx[u]]] += 1
    progress = True
    while progress:
        progress = False
        for u in range(n):
            if u == d or D[u] < _INF:
                continue
            best = _INF
            bj = -1
            bjv = -1
            bx = blo = bhi = vx = vlo = vhi = 0
            for ju in range(r):
                v = adj[u, ju]
                if v < 0 or D[v] >= _INF:
                    continue
                m = kind[u, ju]
                ok, x, lo, hi = _via(m, delta[u, ju], v, d, t1, g2, flo, fhi, span)
                if ok and D[v] + 1 < best:
                    best, bj, bjv, bx, blo, bhi = D[v] + 1, ju, -1, x, lo, hi
                if v == d or kids[v] > 0 or m == UP:
                    continue
                for jv in range(r):
                    w = adj[v, jv]
                    if w < 0 or w == u or D[w] >= _INF:
                        continue
                    okv, xv, lov, hiv = _via(kind[v, jv], delta[v, jv], w, d, t1, g2, flo,
                                             fhi, span)
                    x2 = GROUP[m, kind[v, jv]]
                    if not okv or x2 < 0 or x2 > xv or hiv - lov > span or D[w] + 2 >= best:
                        continue
                    best, bj, bjv, bx = D[w] + 2, ju, jv, x2
                    blo, bhi = min(0, delta[u, ju] + lov), max(0, delta[u, ju] + hiv)
                    vx, vlo, vhi = xv, lov, hiv
            if bj < 0:
                continue
            v = adj[u, bj]
            if bjv >= 0:
                w = adj[v, bjv]
                kids[adj[v, nx[v]]] -= 1
                kids[w] += 1
                nx[v], t1[v], D[v], g2[v], flo[v], fhi[v] = bjv, kind[v, bjv], D[w] + 1, vx, vlo, vhi
            nx[u], t1[u], D[u], g2[u], flo[u], fhi[u] = bj, kind[u, bj], D[v] + 1, bx, blo, bhi
            kids[v] += 1
            progress = True
    left = 0
    for u in range(n):
        if u != d and D[u] >= _INF:
            left += 1
    return left


@njit(cache=True)
def _trees(adj, peer, kind, delta, nxt, dist, load, beta, span, again):
    """One pass over every destination (module docstring): its tree into ``nxt``/``dist``,
    its pairs per channel into ``load`` (taken out first when ``again``).  Returns the
    (switch, destination) pairs left without a path."""
    n, r = adj.shape
    t1 = np.empty(n, np.int64)
    g2 = np.empty(n, np.int64)
    flo = np.zeros(n, np.int64)
    fhi = np.zeros(n, np.int64)
    cost = np.empty(n, np.float64)
    done = np.zeros(n, np.bool_)
    cj = np.empty(n, np.int64)
    ch = np.empty(n, np.int64)
    cg = np.empty(n, np.int64)
    clo = np.empty(n, np.int64)
    chi = np.empty(n, np.int64)
    cnt = np.empty(n, np.int64)
    channels = 0
    for u in range(n):
        for j in range(r):
            if adj[u, j] >= 0:
                channels += 1
    total = load.sum()
    left = 0
    for d in range(n):
        D = dist[d]
        nx = nxt[d]
        if again:
            order = np.argsort(-D)
            cnt[:] = 1
            for u in order:
                if u != d:
                    load[u, nx[u]] -= cnt[u]
                    total -= cnt[u]
                    cnt[adj[u, nx[u]]] += cnt[u]
        scale = total / channels + 1.0
        D[:] = _INF
        nx[:] = -1
        cost[:] = 1e300
        done[:] = False
        cost[d] = 0.0
        D[d] = 0
        t1[d] = -1
        g2[d] = 4
        flo[d] = fhi[d] = 0
        heap = [(0.0, d)]
        while heap:
            c, v = heapq.heappop(heap)
            if done[v] or c > cost[v]:
                continue
            done[v] = True
            if v != d:
                D[v], nx[v], t1[v] = ch[v], cj[v], kind[v, cj[v]]
                g2[v], flo[v], fhi[v] = cg[v], clo[v], chi[v]
            for j in range(r):
                u = adj[v, j]
                if u < 0 or done[u]:
                    continue
                ju = peer[v, j]
                ok, x, lo, hi = _via(kind[u, ju], delta[u, ju], v, d, t1, g2, flo, fhi, span)
                if not ok:
                    continue
                rel = load[u, ju] / scale
                cc = c + 1.0 + beta * rel * rel
                if cc < cost[u]:
                    cost[u], cj[u], ch[u], cg[u], clo[u], chi[u] = cc, ju, D[v] + 1, x, lo, hi
                    heapq.heappush(heap, (cc, u))
        left += _repair(d, adj, kind, delta, D, nx, t1, g2, flo, fhi, span)
        order = np.argsort(-D)
        cnt[:] = 1
        for u in order:
            if u == d or D[u] >= _INF:
                continue
            load[u, nx[u]] += cnt[u]
            total += cnt[u]
            cnt[adj[u, nx[u]]] += cnt[u]
    return left


@njit(cache=True)
def _sls(adj, delta, pos, nxt, thresholds, ring):
    """``uint8[N, N]`` SL of every path: the first threshold outside the ring positions of
    its switches after the first (the trees keep that span below ``ring - ring / 16``)."""
    n = adj.shape[0]
    sl = np.zeros((n, n), np.uint8)
    for d in range(n):
        for s in range(n):
            if s == d:
                continue
            v = adj[s, nxt[d, s]]
            x = lo = hi = 0
            u = v
            while u != d:
                j = nxt[d, u]
                x += delta[u, j]
                u = adj[u, j]
                if u != d:
                    lo = min(lo, x)
                    hi = max(hi, x)
            for i in range(thresholds.size):
                if (thresholds[i] - pos[v] - lo) % ring > hi - lo:
                    sl[s, d] = i
                    break
    return sl


def _labels(adj, peer, kind, pos, thresholds) -> np.ndarray:
    """``int8[N, R + 1, R, 16]`` VL of every turn (in slot ``1 + j``, out port) and SL, as the
    module docstring gives it; a turn no valid path takes (group -1) maps to VL Z."""
    n, r = adj.shape
    came = np.full((n, r), -1, dtype=np.int64)       # kind of the channel arriving on port j
    ok = adj >= 0
    came[ok] = kind[adj[ok], peer[ok]]
    grp = GROUP[np.maximum(came, 0)[:, :, None], np.maximum(kind, 0)[:, None, :]]
    high = pos[:, None] < thresholds[None, :]           # group W: VL 2 below the threshold
    low_c = pos[:, None] <= thresholds[None, :]         # group C: VL 3 at or below it
    vl_w = np.where(high, 2, 1)[:, None, None, :]
    vl_c = np.where(low_c, 3, 4)[:, None, None, :]
    g = grp[:, :, :, None]
    lam = np.where(g == 1, vl_w, np.where(g == 2, vl_c, VL_Z))
    out = np.full((n, r + 1, r, NUM_SLS), -1, dtype=np.int8)
    out[:, 1:, :, :] = lam
    return out
