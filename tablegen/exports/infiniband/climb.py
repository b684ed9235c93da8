"""The ``ib-climb`` variant: near-minimal destination trees whose VLs climb at order breaks.

Where a routing's own paths do not fit InfiniBand's 8 data VLs, the ``ib-native`` variant
(:mod:`~tablegen.exports.infiniband.native`) keeps one VL per destination and pays with
up*/down* escape trees (uniform bound 0.039 on DSN-F n = 1,024).  This variant keeps
shortest paths (a detour of at most ``SLACK`` hops where none fits, never more than
``MAX_HOPS``) and uses what the SL2VL table offers instead: the VL of a hop is chosen per
``(switch, in port, out port, SL)``, so a path may change VL at any turn, and the SL is
chosen per (source switch, destination).

* **A global channel order** ``rho``: Eades, Lin and Smyth's feedback-arc-set heuristic
  (1993) on the dependencies of the deterministic shortest-path trees, weighted by the number
  of paths that take them (sinks last, sources first, else the channel of most out- minus
  in-weight first).  A dependency that goes down in ``rho`` is a *break*; on DSN-F n = 1,024
  no shortest path makes more than 4 (average 1.05), against up to 9 dependencies a path has.
* **The CDG over (channel, VL 1 .. V-1)** starts ranked by ``(VL, rho)``: a dependency that
  rises in VL, or stays on one VL and rises in ``rho``, is free; a path of ``b`` breaks fits
  ``b + 1`` VLs.  When nothing fits freely, a dependency is inserted by Pearce and Kelly's
  dynamic topological order (:func:`~tablegen.exports.infiniband.dynorder.insert_dependency`),
  which may re-rank.
* **Turn labels** ``lam[u, in slot, out port, SL]`` as in
  :mod:`~tablegen.exports.infiniband.turns`: one VL per turn and SL, shared by every path of
  that SL through the turn — what the SL2VL table can hold.
* **Trees, per destination** ``d`` in id order: switches attach in the order of their
  distance to ``d``, each to a neighbour already in the tree.  For every candidate parent
  (shortest first; then up to ``SLACK`` extra hops) and SL, the path ``z -> parent -> ... ->
  d`` is walked: a labelled turn gives its VL, an unlabelled one the lowest VL whose
  dependency is free (*as soon as possible*: this only tests).  The candidate kept: fewest
  extra hops, then fewest new labels (shared labels leave room), then least loaded first
  channel (DFSSSP's balancing).  Its unlabelled turns are then labelled *as late as
  possible* — the highest VL that keeps every dependency free: a turn labelled high takes
  later paths arriving on any VL up to it, one labelled low only those arriving low
  (measured: a tenth of the failures of labelling as soon as possible).  Switches that fit
  no candidate with free dependencies get one more pass in which a dependency may be
  inserted (Pearce–Kelly), once nothing else attaches.
* **Restarts**: destinations whose tree did not span every switch go first in the next
  run (at most ``RESTARTS`` more).  A run in which more than ``GIVE_UP`` of the
  destinations fail stops there and the variant gives up: restarts mend a few failures,
  and a run that fails many only fails more slowly (the insertions search an ever larger
  graph).
* **The SLs are written as a matrix** (``path-sl.txt``'s ``group`` and ``row`` lines, one
  hex digit per switch pair): per-path lines would take one per (HCA, destination port).

Deadlock freedom: every dependency is added to one acyclic graph over (channel, VL 1 .. 7),
free ones rising in its topological order, the others by Pearce–Kelly insertion that refuses
a cycle; VL 0 (the hop from a host) has no incoming dependency.  ``verify_ib`` proves the
SL2VL array again, ``fabroute verify`` the written files.

What it cannot do: promise a fit.  The construction is greedy; a failed run proves nothing
(it raises :class:`NotExpressible`).  Its label space does not grow with the paths: 16 SLs
of one label per turn serve N^2 paths through N R^2 turns, and on DSN-F the fit runs out
between n = 1,024 (fits) and 2,048 (more than 2 % of the destinations fail within the first
889; docs/ib-routing.md).  Paths are near-minimal only up to ``SLACK`` extra hops
and bounded by ``MAX_HOPS``: a fabric whose diameter exceeds ``MAX_HOPS`` is refused.  16 SLs
× 7 VLs per turn is the whole label space; a fabric whose breaks per path exceed 6 cannot be
served by the free order at all.

Complexity: per destination and switch, one walk of at most ``MAX_HOPS`` hops per candidate
parent and SL — ``O(N^2 R S H)`` — plus the Pearce–Kelly searches of inserted dependencies;
the order ``O((N R)^2)``.  Memory: ``N (R + 1) R 16`` bytes of labels, ``N R (V - 1)`` nodes
of ``R (V - 1)`` bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.dynorder import channel_graph, insert_dependency
from tablegen.exports.infiniband.layers import IbLayers, checked_lengths
from tablegen.exports.infiniband.limits import IB_DATA_VLS, NUM_SLS
from tablegen.exports.infiniband.turns import turn_sl2vl
from tablegen.tables import TableSet

CLIMB = "ib-climb"
MAX_HOPS = 12       # hop bound of every path (the bound for DSN-F n = 1,024)
SLACK = 4           # extra hops over the shortest a switch may take when nothing shorter fits
RESTARTS = 8        # runs after the first, each with the destinations that failed first
GIVE_UP = 0.02      # a run stops once this share of destinations failed: restarts mend a few


def climb_layers(ts: TableSet, vls: int = IB_DATA_VLS) -> IbLayers:
    """The ``ib-climb`` variant of ``ts``'s fabric: one layer of near-minimal destination
    trees, an SL per (source switch, destination) and a per-turn SL2VL within ``vls`` VLs
    (module docstring).  Deterministic: the files' verification rebuilds it from the table
    set alone.  Raises :class:`NotExpressible` when it finds no fit."""
    topo = ts.topo
    n, r = topo.adj.shape
    adj = topo.adj.astype(np.int64)
    peer = topo.peer.astype(np.int64)
    dist = _distances(adj)
    if dist.max() > MAX_HOPS:
        raise NotExpressible(f"the {CLIMB} variant bounds paths by {MAX_HOPS} hops; "
                             f"{topo.name()} has diameter {int(dist.max())}")
    if vls < 3:
        raise NotExpressible(f"--vls {vls}: the {CLIMB} variant needs at least 3 VLs")
    rho = _channel_order(_shortest_tree(adj, dist), adj)
    dorder = np.arange(n, dtype=np.int64)
    limit = max(8, int(GIVE_UP * n))
    for _ in range(RESTARTS + 1):
        nxt = np.full((n, n), -1, dtype=np.int16)
        sl = np.zeros((n, n), dtype=np.uint8)
        lam = np.full((n, r + 1, r, NUM_SLS), -1, dtype=np.int8)
        fails = np.zeros(n, dtype=np.int64)
        done = _trees(dist, adj, peer, rho, dorder, NUM_SLS, vls, MAX_HOPS, SLACK, nxt, sl,
                      lam, np.zeros(n * r, dtype=np.int64), fails, limit)
        if not fails.any():
            break
        if done < n:
            raise NotExpressible(
                f"the {CLIMB} variant found no fit of {NUM_SLS} SLs in {vls} VLs on "
                f"{topo.name()}: {int((fails > 0).sum())} destinations' trees left switches "
                f"out within the first {done} of {n} (restarts mend a few, not that many; "
                f"docs/ib-routing.md); "
                + ("on a DSN-F the ib-phase variant (--ib-phase) takes its place, and "
                   if topo.kind == "dsnf" else "")
                + "the IB-native variant (--ib-native) fits any connected fabric")
        bad = np.isin(dorder, np.flatnonzero(fails))
        dorder = np.concatenate([dorder[bad], dorder[~bad]])
    else:
        raise NotExpressible(f"the {CLIMB} variant found no fit of {NUM_SLS} SLs in {vls} VLs "
                             f"on {topo.name()}: {int((fails > 0).sum())} destinations' trees "
                             f"left {int(fails.sum())} switches out after {RESTARTS + 1} runs")
    nxt3 = nxt[None]
    layers = IbLayers(ts=ts, lmc=0, kinds=[f"min-{CLIMB}"], bounds=[MAX_HOPS], nxt=nxt3,
                      target=np.full((1, n), -1, dtype=np.int32), sl=sl[None].copy(),
                      hops=checked_lengths(topo, nxt3), info={"seed": 1, "variant": CLIMB})
    layers.sl2vl = turn_sl2vl(lam)
    layers.scheme = "turn"
    return layers


def _distances(adj: np.ndarray) -> np.ndarray:
    """``int64[N, N]`` switch hops between every pair (BFS); :class:`NotExpressible` for a
    disconnected fabric."""
    n, _ = adj.shape
    u, j = np.nonzero(adj >= 0)
    g = csr_matrix((np.ones(len(u), dtype=np.int8), (u, adj[u, j])), shape=(n, n))
    dist = np.empty((n, n), dtype=np.int64)
    for lo in range(0, n, 512):          # 512 BFS rows at a time bound the float memory
        d = shortest_path(g, unweighted=True, indices=np.arange(lo, min(n, lo + 512)))
        if np.isinf(d).any():
            raise NotExpressible("the fabric is not connected; expected a connected fabric")
        dist[lo:lo + 512] = d
    return dist


def _shortest_tree(adj: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """``int64[N, N]``: at ``u`` toward ``d`` the lowest port to a neighbour one hop closer."""
    return _lowest_closer(adj, dist)


@njit(cache=True)
def _lowest_closer(adj, dist):
    """:func:`_shortest_tree` compiled: one pass over each switch's row of ``dist``."""
    n, R = adj.shape
    nxt = np.full((n, n), -1, dtype=np.int64)
    for u in range(n):
        for j in range(R - 1, -1, -1):       # the lowest port is written last
            v = adj[u, j]
            if v < 0:
                continue
            for d in range(n):
                if dist[v, d] == dist[u, d] - 1:
                    nxt[u, d] = j
    return nxt


def _channel_order(nxt: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """``int64[N R]`` rank of every channel: the Eades–Lin–Smyth order of the dependencies
    (from the second hop on; the first leaves a host on VL 0) of the trees ``nxt``."""
    return _els(_dependency_weights(np.ascontiguousarray(nxt.T), adj), adj)


@njit(cache=True)
def _dependency_weights(nxt_t, adj):
    """``w[c, j]``: paths of ``nxt_t[d, u]`` (destination-major, so that a destination's
    walks stay in one cached row) whose hop on channel ``c`` (not their first) is followed
    by the switch behind's port ``j``."""
    n, R = adj.shape
    w = np.zeros((n * R, R), dtype=np.int64)
    for d in range(n):
        row = nxt_t[d]
        for x0 in range(n):
            x, prev, i = x0, -1, 0
            while x != d:
                j = row[x]
                if i >= 2:
                    w[prev, j] += 1
                prev = x * R + j
                x = adj[x, j]
                i += 1
    return w


@njit(cache=True)
def _els(w, adj):
    """Eades, Lin and Smyth's order of the channels (rank 0 first): repeatedly move sinks to
    the back and sources to the front, else the channel of largest out- minus in-weight to
    the front; channels without a link go last."""
    n, R = adj.shape
    C = n * R
    outw = np.zeros(C, dtype=np.int64)
    inw = np.zeros(C, dtype=np.int64)
    alive = np.zeros(C, dtype=np.bool_)
    for c in range(C):
        v = adj[c // R, c % R]
        if v < 0:
            continue
        alive[c] = True
        for j in range(R):
            outw[c] += w[c, j]
            inw[v * R + j] += w[c, j]
    front = np.empty(C, dtype=np.int64)
    back = np.empty(C, dtype=np.int64)
    nf, nb = 0, 0
    left = alive.sum()
    while left:
        changed = True
        while changed:
            changed = False
            for c in range(C):
                if alive[c] and (outw[c] == 0 or inw[c] == 0):
                    if outw[c] == 0:
                        back[nb] = c
                        nb += 1
                    else:
                        front[nf] = c
                        nf += 1
                    _drop(c, w, adj, outw, inw, alive)
                    left -= 1
                    changed = True
        if left:
            best, bd = -1, np.int64(-(1 << 62))
            for c in range(C):
                if alive[c] and outw[c] - inw[c] > bd:
                    best, bd = c, outw[c] - inw[c]
            front[nf] = best
            nf += 1
            _drop(best, w, adj, outw, inw, alive)
            left -= 1
    rank = np.full(C, -1, dtype=np.int64)
    k = 0
    for i in range(nf):
        rank[front[i]] = k
        k += 1
    for i in range(nb - 1, -1, -1):
        rank[back[i]] = k
        k += 1
    for c in range(C):
        if rank[c] < 0:
            rank[c] = k
            k += 1
    return rank


@njit(cache=True)
def _drop(c, w, adj, outw, inw, alive):
    """Remove channel ``c`` from the weighted dependency graph of :func:`_els`."""
    n, R = adj.shape
    alive[c] = False
    u, v = c // R, adj[c // R, c % R]
    for j in range(R):
        if alive[v * R + j]:
            inw[v * R + j] -= w[c, j]
    for jj in range(R):          # the channels into u: from each neighbour t, its port to u
        t = adj[u, jj]
        if t < 0:
            continue
        for j0 in range(R):
            if adj[t, j0] == u and alive[t * R + j0]:
                outw[t * R + j0] -= w[t * R + j0, c % R]


@njit(cache=True)
def _free(g, rank, out, a, b):
    """Whether dependency ``a -> out[a] + b`` is in ``g`` or rises in its order."""
    return bool(g[a, b >> 3] & (1 << (b & 7))) or rank[a] < rank[out[a] + b]


@njit(cache=True)
def _walk(z, j, d, adj, peer, par, ch, slots):
    """The path ``z -(j)-> ... -> d`` along ``par`` into ``ch`` (channels ``u * R + j``) and
    ``slots`` (in slot per hop: 0 from a host, ``1 + j'`` from network port ``j'``)."""
    R = adj.shape[1]
    ch[0], slots[0] = z * R + j, 0
    slot, w, m = peer[z, j] + 1, adj[z, j], 1
    while w != d:
        ch[m], slots[m] = w * R + par[w], slot
        slot = peer[w, par[w]] + 1
        w = adj[w, par[w]]
        m += 1
    return m


@njit(cache=True)
def _asap(H, s, ch, slots, lam, g, rank, out, W, R, vals):
    """Fit the path of ``H`` hops with SL ``s`` by free dependencies only, each unlabelled
    turn on its lowest free VL, into ``vals``; returns the number of labelled turns it
    shares, or -1."""
    prev, score = -1, 0
    for i in range(1, H):
        u, j = ch[i] // R, ch[i] % R
        lv = lam[u, slots[i], j, s]
        got = -1
        if lv >= 0:
            if prev < 0 or _free(g, rank, out, prev, j * W + lv - 1):
                got = lv
                score += 1
        else:
            for v in range(1, W + 1):
                if prev < 0 or _free(g, rank, out, prev, j * W + v - 1):
                    got = v
                    break
        if got < 0:
            return -1
        vals[i] = got
        prev = ch[i] * W + got - 1
    return score


@njit(cache=True)
def _alap(H, s, ch, slots, lam, g, rank, out, W, R, asap, vals):
    """From the feasible ``asap``: every unlabelled turn on the highest VL whose dependencies
    from ``asap``'s VL before it and to the VL chosen after it stay free (``asap`` itself
    always qualifies), into ``vals``."""
    for i in range(H - 1, 0, -1):
        u, j = ch[i] // R, ch[i] % R
        if lam[u, slots[i], j, s] >= 0:
            vals[i] = asap[i]
            continue
        got = asap[i]
        for v in range(W, asap[i], -1):
            if i > 1 and not _free(g, rank, out, ch[i - 1] * W + asap[i - 1] - 1, j * W + v - 1):
                continue
            if i < H - 1 and not _free(g, rank, out, ch[i] * W + v - 1,
                                       (ch[i + 1] % R) * W + vals[i + 1] - 1):
                continue
            got = v
            break
        vals[i] = got


@njit(cache=True)
def _insert(H, s, ch, slots, lam, g, rank, out, into, W, R, vals, seen, tick, work, fwd, back,
            added, labelled):
    """Fit the path with SL ``s`` allowing Pearce–Kelly insertions: each turn on its lowest
    VL whose dependency is free, else the lowest that can be inserted.  On success the
    labels and edges stay (returns the tick); on failure they are undone (returns -tick)."""
    RW = R * W
    prev, na, nl = -1, 0, 0
    for i in range(1, H):
        u, j = ch[i] // R, ch[i] % R
        lv = lam[u, slots[i], j, s]
        lo, hi = (lv, lv) if lv >= 0 else (1, W)
        got = -1
        for v in range(lo, hi + 1):
            if prev < 0 or _free(g, rank, out, prev, j * W + v - 1):
                got = v
                b = j * W + v - 1
                if prev >= 0 and not g[prev, b >> 3] & (1 << (b & 7)):
                    # in the graph now: a later insertion of this path must not re-rank it
                    g[prev, b >> 3] |= np.uint8(1 << (b & 7))
                    added[na] = prev * RW + b
                    na += 1
                break
        if got < 0:
            for v in range(lo, hi + 1):
                tick += 1
                if insert_dependency(g, rank, out, into, prev, j * W + v - 1, seen, tick, work,
                                     fwd, back):
                    added[na] = prev * RW + j * W + v - 1
                    na += 1
                    got = v
                    break
        if got < 0:
            for q in range(na):       # removing edges keeps the order topological
                a, b = added[q] // RW, added[q] % RW
                g[a, b >> 3] &= ~np.uint8(1 << (b & 7))
            for q in range(nl):
                lam[labelled[q, 0], labelled[q, 1], labelled[q, 2], s] = -1
            return -tick
        if lv < 0:
            lam[u, slots[i], j, s] = got
            labelled[nl, 0], labelled[nl, 1], labelled[nl, 2] = u, slots[i], j
            nl += 1
        vals[i] = got
        prev = ch[i] * W + got - 1
    _commit(H, s, ch, slots, lam, g, W, R, vals)
    return tick


@njit(cache=True)
def _commit(H, s, ch, slots, lam, g, W, R, vals):
    """Label the path's turns with ``vals`` and add its dependencies (all free or inserted)."""
    for i in range(1, H):
        u, j = ch[i] // R, ch[i] % R
        lam[u, slots[i], j, s] = vals[i]
        if i > 1:
            a, b = ch[i - 1] * W + vals[i - 1] - 1, j * W + vals[i] - 1
            g[a, b >> 3] |= np.uint8(1 << (b & 7))


@njit(cache=True)
def _trees(dist, adj, peer, rho, dorder, S, V, maxh, slack, nxt, sl, lam, load, fails, limit):
    """Grow every destination's tree (module docstring) into ``nxt[u, d]``, ``sl[u, d]`` and
    the labels ``lam``; ``fails[d]``: switches left out of ``d``'s tree.  Returns the number
    of destinations grown: fewer than all once more than ``limit`` failed."""
    n, R = adj.shape
    W = V - 1
    C = n * R * W
    g = np.zeros((C, (R * W + 7) // 8), dtype=np.uint8)
    rank = np.empty(C, dtype=np.int32)
    for c in range(n * R):
        for w in range(W):
            rank[c * W + w] = w * n * R + rho[c]
    out, into, seen, work, fwd, back = channel_graph(adj, peer, W)
    tick = 0
    depth = np.empty(n, dtype=np.int64)
    par = np.empty(n, dtype=np.int64)
    todo = np.empty(n, dtype=np.int64)
    ch = np.empty(maxh + 1, dtype=np.int64)
    slots = np.empty(maxh + 1, dtype=np.int64)
    asap = np.empty(maxh + 1, dtype=np.int64)
    vals = np.empty(maxh + 1, dtype=np.int64)
    added = np.empty(maxh + 1, dtype=np.int64)
    labelled = np.empty((maxh + 1, 3), dtype=np.int64)
    bad, k = 0, 0
    for d in dorder:
        k += 1
        depth[:] = -1
        par[:] = -1
        depth[d] = 0
        idx = np.argsort(dist[:, d], kind="mergesort")
        nt = 0
        for i in range(n):
            if idx[i] != d:
                todo[nt] = idx[i]
                nt += 1
        for stage in range(slack + 2):
            # stages 0 .. slack: that many extra hops, free dependencies only; then one more
            # with insertions, tried only once nothing else attaches (they search the graph)
            extra = min(stage, slack)
            progress = True
            while nt and progress:
                progress, keep = False, 0
                for ti in range(nt):
                    z = todo[ti]
                    bj, bs, bkey = -1, -1, np.int64(1) << 62
                    for j in range(R):
                        y = adj[z, j]
                        if y < 0 or depth[y] < 0:
                            continue
                        H = depth[y] + 1
                        if H > maxh or H > dist[z, d] + extra:
                            continue
                        _walk(z, j, d, adj, peer, par, ch, slots)
                        for s in range(S):
                            score = _asap(H, s, ch, slots, lam, g, rank, out, W, R, vals)
                            if score < 0:
                                continue
                            key = (((H - dist[z, d]) << 40) + ((H - 1 - score) << 32)
                                   + load[z * R + j])
                            if key < bkey:
                                bj, bs, bkey = j, s, key
                            if score == H - 1:
                                break
                    if bj >= 0:
                        H = _walk(z, bj, d, adj, peer, par, ch, slots)
                        _asap(H, bs, ch, slots, lam, g, rank, out, W, R, asap)
                        _alap(H, bs, ch, slots, lam, g, rank, out, W, R, asap, vals)
                        _commit(H, bs, ch, slots, lam, g, W, R, vals)
                    elif stage > slack:      # nothing fits freely: try inserting
                        for j in range(R):
                            y = adj[z, j]
                            if bj >= 0 or y < 0 or depth[y] < 0 or depth[y] + 1 > maxh:
                                continue
                            H = _walk(z, j, d, adj, peer, par, ch, slots)
                            for s in range(S):
                                tick = _insert(H, s, ch, slots, lam, g, rank, out, into, W,
                                               R, vals, seen, tick, work, fwd, back, added,
                                               labelled)
                                if tick > 0:
                                    bj, bs = j, s
                                    break
                                tick = -tick
                    if bj < 0:
                        todo[keep] = z
                        keep += 1
                        continue
                    H = _walk(z, bj, d, adj, peer, par, ch, slots)
                    for i in range(H):
                        load[ch[i]] += 1
                    par[z] = bj
                    depth[z] = H
                    nxt[z, d] = bj
                    sl[z, d] = bs
                    progress = True
                nt = keep
        fails[d] = nt
        if nt:
            bad += 1
            if bad > limit:
                return k
    return k
