"""IB-native variants: destination trees chosen on the channel dependency graph.

Where neither SL scheme fits a routing's own paths into InfiniBand's 8 data VLs (DSN-F
n = 1,024 and 4,096 with ``dsnf`` and ``min``: both first fits stop at a path that fits no
SL; a failed greedy proves no impossibility, it only finds no fit), fabroute offers the
routing's nearest *IB-native variant*, in the manner of Nue (Domke, Hoefler, Matsuoka,
HPDC 2016): the paths are chosen on the CDG instead of fitted to it afterwards.

* One layer (LMC 0); every destination switch ``d`` gets one tree and one SL, and its paths
  the path scheme's VLs: VL 0 on the hop from a host, VL ``1 + SL`` after it.
* SLs ``0 .. K-2`` (*regular layers*): per destination, first fit; destinations in the
  up*/down* rank order below (from the centre out).  The tree of ``d`` in layer ``l`` grows
  from ``d``, switches taken in the order of their hop count toward ``d`` on the routing's
  own tree (layer 0 of :func:`~tablegen.exports.infiniband.layers.build_layers`).  A switch
  attaches to a tree neighbour, candidates in the order: its own next hop, then by depth —
  first to one whose dependency exists already, else to the first whose new dependency keeps
  layer ``l``'s CDG acyclic (:func:`~tablegen.exports.infiniband.dynorder.insert_dependency`).
  Only a switch's *first child* creates one: ``(y -> parent(y)) -> (parent(y) -> ...)``;
  a leaf's only hop is its first, on VL 0.  A destination whose tree does not span every
  switch in a layer undoes that layer's new dependencies and tries the next.
* SL ``K-1`` (*escape layer*): an up*/down* tree (Schroeder et al., Autonet, 1991) toward
  ``d``, ranks by BFS level from a centre switch: a switch whose down-only path to ``d`` is
  shortest keeps it, every other goes up first (shortest such path); ties go to the channel
  fewest earlier trees load.  No path turns from down to up, so the escape layer's CDG is
  acyclic whatever the destinations.

Both orders were chosen by measurement on DSN-F n = 1,024 (docs/ib-routing.md): reusing
dependencies leaves room for later destinations (fewer escape trees), and placing the
destinations near the centre first leaves the escape trees to the outer ones, whose
up*/down* paths crowd the root less — the uniform-traffic bound rises by half.

So the variant is deadlock-free by construction;
:func:`~tablegen.exports.infiniband.sls.verify_ib` proves it again, and ``verify`` proves
the files.  What it costs is path length: a tree
off the routing's own path is longer (the measurements are in ``docs/ib-routing.md``).

Complexity: per destination and layer tried, O(N R) to grow the tree plus one
incremental order update per first child (Pearce and Kelly 2006); the escape tree O(N R).
Memory: ``(K-1) N R ceil(R/8)`` bytes of dependency bits for N switches of R network ports.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.dynorder import channel_graph, insert_dependency
from tablegen.exports.infiniband.layers import (IbLayers, build_layers, checked_lengths,
                                                sl2vl_array)
from tablegen.exports.infiniband.limits import IB_DATA_VLS
from tablegen.tables import TableSet

VARIANT = "ib-native"


def native_layers(ts: TableSet, vls: int = IB_DATA_VLS) -> IbLayers:
    """The IB-native variant of ``ts``'s routing: one layer of destination trees with SLs
    and a path-scheme SL2VL within ``vls`` VLs (module docstring).  Deterministic: the
    files' verification rebuilds it from the table set alone.  Raises
    :class:`NotExpressible` when ``vls < 3`` (a regular and the escape layer need VLs 1 and 2)."""
    if vls < 3:
        raise NotExpressible(f"--vls {vls}: the IB-native variant needs at least 3 VLs (VL 0, "
                             "one regular layer, the escape layer)")
    topo = ts.topo
    n, _ = topo.adj.shape
    base = build_layers(ts, 0)
    adj = topo.adj.astype(np.int64)
    root = _centre(adj)
    udr = _updown_ranks(adj, root)
    K = vls - 1
    nxt = np.full((n, n), -1, dtype=np.int16)
    sl = np.zeros(n, dtype=np.uint8)
    _trees(base.nxt[0].astype(np.int64), base.hops[0].astype(np.int64), adj,
           topo.peer.astype(np.int64), K, udr, nxt, sl)
    nxt3 = nxt[None]
    layers = IbLayers(ts=ts, lmc=0, kinds=[f"{base.kinds[0]}-{VARIANT}"], bounds=[n - 1],
                      nxt=nxt3, target=np.full((1, n), -1, dtype=np.int32),
                      sl=np.broadcast_to(sl[None, None, :], (1, n, n)).copy(),
                      hops=checked_lengths(topo, nxt3),
                      info={"seed": 1, "variant": VARIANT, "escape_root": root,
                            "escape_destinations": int((sl == K - 1).sum())})
    layers.sl2vl = sl2vl_array(topo, layers.num_sls)
    layers.scheme = "path"
    return layers


def _centre(adj: np.ndarray) -> int:
    """A switch of least eccentricity (the lowest id among them): up*/down* paths through a
    root near the middle are shorter."""
    n, _ = adj.shape
    u, j = np.nonzero(adj >= 0)
    g = csr_matrix((np.ones(len(u), dtype=np.int8), (u, adj[u, j])), shape=(n, n))
    ecc = np.empty(n, dtype=np.int64)
    for lo in range(0, n, 256):          # 256 BFS rows at a time bound the memory
        rows = np.arange(lo, min(n, lo + 256))
        ecc[lo:lo + 256] = shortest_path(g, unweighted=True, indices=rows).max(axis=1)
    return int(np.argmin(ecc))


def _updown_ranks(adj: np.ndarray, root: int) -> np.ndarray:
    """``int64[N]``: BFS level from ``root`` then id, as one rank; a hop toward a lower rank
    goes up."""
    n, _ = adj.shape
    level = np.full(n, -1, dtype=np.int64)
    level[root] = 0
    front = np.array([root])
    while len(front):
        nb = adj[front].ravel()
        nb = np.unique(nb[nb >= 0])
        nb = nb[level[nb] < 0]
        level[nb] = level[front[0]] + 1
        front = nb
    if (level < 0).any():
        raise NotExpressible(f"switch {int(np.flatnonzero(level < 0)[0])} is not connected to "
                             f"switch {root}; expected a connected fabric")
    return level * n + np.arange(n)


@njit(cache=True)
def _no_new_dependency(g, adj, par, child, d, y, R):
    """Whether a new child of tree node ``y`` adds no dependency to layer CDG ``g``: ``y`` is
    the destination, already has a child, or its own out-channel pair is in ``g``."""
    if y == d or child[y] or adj[y, par[y]] == d:
        return True
    jj = par[adj[y, par[y]]]
    return bool(g[y * R + par[y], jj >> 3] & (1 << (jj & 7)))


@njit(cache=True)
def _trees(pref, phops, adj, peer, K, udr, nxt, sl):
    """Fill ``nxt[u, d]`` (port toward ``d``) and ``sl[d]`` for every destination: regular
    layers ``0 .. K-2`` by first fit on their CDGs, else the up*/down* tree on SL ``K-1``."""
    n, R = adj.shape
    C = n * R
    g = np.zeros((K - 1, C, (R + 7) // 8), dtype=np.uint8)
    rank = np.empty((K - 1, C), dtype=np.int32)
    for s in range(K - 1):
        rank[s] = np.arange(C)
    out, into, seen, work, fwd, back = channel_graph(adj, peer, 1)
    par = np.empty(n, dtype=np.int64)
    depth = np.empty(n, dtype=np.int64)
    child = np.empty(n, dtype=np.bool_)
    added = np.empty(n, dtype=np.int64)
    todo = np.empty(n, dtype=np.int64)
    cand = np.empty(R, dtype=np.int64)
    load = np.zeros(C, dtype=np.int64)     # sources routed over each channel so far
    tick = 0
    for d in np.argsort(udr):
        ordr = np.argsort(phops[:, d], kind="mergesort")
        placed = False
        for lay in range(K - 1):
            par[:] = -1
            depth[:] = -1
            child[:] = False
            depth[d] = 0
            na, nt = 0, 0
            for i in range(n):
                if ordr[i] != d:
                    todo[nt] = ordr[i]
                    nt += 1
            progress = True
            while nt and progress:
                progress = False
                keep = 0
                for ti in range(nt):
                    z = todo[ti]
                    # candidates: the routing's own next hop, then tree neighbours by depth
                    nc = 0
                    jp = pref[z, d]
                    if depth[adj[z, jp]] >= 0:
                        cand[nc] = jp
                        nc += 1
                    lo = nc
                    for j in range(R):
                        y = adj[z, j]
                        if j != jp and y >= 0 and depth[y] >= 0:
                            k = nc
                            while k > lo and depth[adj[z, cand[k - 1]]] > depth[y]:
                                cand[k] = cand[k - 1]
                                k -= 1
                            cand[k] = j
                            nc += 1
                    got = -1
                    for c in range(nc):     # first a parent that needs no new dependency
                        if _no_new_dependency(g[lay], adj, par, child, d, adj[z, cand[c]], R):
                            got = cand[c]
                            break
                    for c in range(nc):     # else the first whose dependency keeps g acyclic
                        if got >= 0:
                            break
                        y = adj[z, cand[c]]
                        a = y * R + par[y]
                        jj = par[adj[y, par[y]]]
                        tick += 1
                        if insert_dependency(g[lay], rank[lay], out, into, a, jj, seen, tick,
                                             work, fwd, back):
                            added[na] = a * R + jj
                            na += 1
                            got = cand[c]
                    if got >= 0:
                        y = adj[z, got]
                        par[z] = got
                        depth[z] = depth[y] + 1
                        child[y] = True
                        progress = True
                    else:
                        todo[keep] = z
                        keep += 1
                nt = keep
            if nt == 0:
                for u in range(n):
                    if u != d:
                        nxt[u, d] = par[u]
                _add_load(adj, par, depth, d, load, todo, work)
                sl[d] = lay
                placed = True
                break
            for q in range(na):            # removing edges keeps the order topological
                a, jj = added[q] // R, added[q] % R
                g[lay, a, jj >> 3] &= ~np.uint8(1 << (jj & 7))
        if not placed:
            _escape_tree(adj, udr, d, par, depth, todo, load)
            _add_load(adj, par, depth, d, load, todo, work)
            for u in range(n):
                if u != d:
                    nxt[u, d] = par[u]
            sl[d] = K - 1


@njit(cache=True)
def _add_load(adj, par, depth, d, load, order, count):
    """Add to ``load[u * R + j]`` the number of sources whose path toward ``d`` takes that
    channel (subtree sizes, deepest switches first)."""
    n, R = adj.shape
    m = 0
    for u in range(n):
        if u != d:
            order[m] = u
            m += 1
    keys = np.empty(m, dtype=np.int64)
    for i in range(m):
        keys[i] = -depth[order[i]]
    idx = np.argsort(keys, kind="mergesort")
    for u in range(n):
        count[u] = 1
    for i in range(m):
        u = order[idx[i]]
        load[u * R + par[u]] += count[u]
        count[adj[u, par[u]]] += count[u]


@njit(cache=True)
def _escape_tree(adj, udr, d, par, depth, q, load):
    """Up*/down* tree toward ``d`` into ``par`` (port toward the parent): the switches whose
    down-only path is shortest (BFS from ``d`` against down hops) keep it; the others take
    the shortest path that goes up first, found by a BFS that merges the down-only switches
    (in order of their depth) with the ones it reaches going up.  Among parents of equal
    depth a switch takes the channel with the least ``load`` (up*/down* gathers paths near
    the root; spreading ties spreads them)."""
    n, R = adj.shape
    down = np.zeros(n, dtype=np.bool_)
    par[:] = -1
    depth[:] = -1
    depth[d] = 0
    down[d] = True
    q[0] = d
    h, t = 0, 1
    while h < t:                      # down-only: u -> v goes down when u ranks lower
        v = q[h]
        h += 1
        for j in range(R):
            u = adj[v, j]
            if u >= 0 and depth[u] < 0 and udr[u] < udr[v]:
                depth[u] = depth[v] + 1
                down[u] = True
                q[t] = u
                t += 1
    na = t
    ia, ib, tb = 0, na, na            # merge q[0:na] (down-only) and q[na:tb] (up first)
    while ia < na or ib < tb:
        if ib == tb or (ia < na and depth[q[ia]] <= depth[q[ib]]):
            v = q[ia]
            ia += 1
        else:
            v = q[ib]
            ib += 1
        for j in range(R):
            u = adj[v, j]
            if u >= 0 and depth[u] < 0 and udr[u] > udr[v]:   # u -> v goes up
                depth[u] = depth[v] + 1
                q[tb] = u
                tb += 1
    for u in range(n):                # the least loaded parent one hop closer
        if u == d:
            continue
        best = -1
        for j in range(R):
            v = adj[u, j]
            if v < 0 or depth[v] != depth[u] - 1:
                continue
            if down[u] and not (down[v] and udr[u] < udr[v]):
                continue              # a down-only path continues down-only
            if not down[u] and udr[u] < udr[v] and not down[v]:
                continue              # going down, then only down
            if best < 0 or load[u * R + j] < load[u * R + best]:
                best = j
        par[u] = best
