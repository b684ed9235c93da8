"""An acyclic dependency graph kept in topological order while edges are added.

Pearce and Kelly, "A dynamic topological sort algorithm for directed acyclic graphs", ACM
JEA 11 (2006): an edge ``a -> b`` with ``rank[a] < rank[b]`` costs nothing; otherwise only
the nodes ranked between the two ends are searched and re-ranked.  Both SL assignments of
the InfiniBand export use it (:mod:`~tablegen.exports.infiniband.sls`: one graph per SL;
:mod:`~tablegen.exports.infiniband.turns`: one graph over (channel, VL)).

The graph is a bit set ``gs[node, byte]``: bit ``j`` of node ``a`` is the edge to node
``out[a] + j`` (the ``j``-th node behind ``a``); ``into[x // r, j]`` lists the nodes that can
have an edge into the block of ``x`` (``r`` = bits per node).  Bits and 32-bit ranks keep a
search's data in the core's cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def insert_dependency(gs, rank, out, into, a, j, seen, tick, work, fwd, back):
    """Add the edge from node ``a`` to the ``j``-th node behind it (``b = out[a] + j``) to the
    acyclic graph ``gs`` unless ``b`` reaches ``a`` (then return False).  Keeps ``rank``
    topological as Pearce and Kelly (2006) do: only when ``rank[b] < rank[a]`` is anything
    searched — forward from ``b`` and backward from ``a``, within the ranks between — and
    the nodes found take the ranks they held, the backward ones first, each set in its
    old order."""
    b = out[a] + j
    lo, hi = rank[b], rank[a]
    if lo < hi:
        nf = search(gs, rank, out, into, b, hi, True, seen, tick, work, fwd)
        if nf < 0:
            return False
        nb = search(gs, rank, out, into, a, lo, False, seen, tick, work, back)
        C = rank.shape[0]
        kf = np.empty(nf, dtype=np.int64)         # rank and channel in one sortable key
        for i in range(nf):
            kf[i] = np.int64(rank[fwd[i]]) * C + fwd[i]
        kb = np.empty(nb, dtype=np.int64)
        for i in range(nb):
            kb[i] = np.int64(rank[back[i]]) * C + back[i]
        kf.sort()
        kb.sort()
        # merge the two rank lists into the free slots; work and fwd hold the new ranks
        i = f = 0
        for t in range(nb + nf):
            if f == nf or (i < nb and kb[i] < kf[f]):
                slot = kb[i] // C
                i += 1
            else:
                slot = kf[f] // C
                f += 1
            x = kb[t] % C if t < nb else kf[t - nb] % C
            work[t] = x
            fwd[t] = slot
        for t in range(nb + nf):
            rank[work[t]] = fwd[t]
    gs[a, j >> 3] |= np.uint8(1 << (j & 7))
    return True


BIT_INDEX = np.zeros(129, dtype=np.int64)     # bit number of a one-bit byte
BIT_INDEX[1 << np.arange(8)] = np.arange(8)


@njit(cache=True)
def search(gs, rank, out, into, start, bound, forward, seen, tick, work, found):
    """Nodes reachable from ``start`` (forward: along edges, ranks below ``bound``;
    backward: against them, ranks above ``bound``) into ``found``; returns their number, or
    -1 when a forward search meets the node ranked ``bound``."""
    r = into.shape[1]
    work[0], top, nfound = start, 1, 0
    seen[start] = tick
    while top:
        top -= 1
        x = work[top]
        found[nfound] = x
        nfound += 1
        if forward:
            for byte in range(gs.shape[1]):     # only the set bits: most bytes are 0
                bits = np.int64(gs[x, byte])
                while bits:
                    low = bits & -bits
                    bits ^= low
                    y = out[x] + byte * 8 + BIT_INDEX[low]
                    if rank[y] == bound:
                        return -1
                    if rank[y] < bound and seen[y] != tick:
                        seen[y] = tick
                        work[top] = y
                        top += 1
        else:
            i = x % r
            for j in range(r):              # the nodes that can have an edge into x
                y = into[x // r, j]
                if (y >= 0 and gs[y, i >> 3] & (1 << (i & 7)) and rank[y] > bound
                        and seen[y] != tick):
                    seen[y] = tick
                    work[top] = y
                    top += 1
    return nfound


@njit(cache=True)
def channel_graph(adj, peer, W):
    """The layout of a dependency graph over the ``W`` lanes of every channel: node
    ``(u * R + j) * W + w`` is lane ``w`` of the channel leaving switch ``u`` on network port
    ``j``; its edges are bits ``j' * W + w'`` over the nodes of the switch behind it.  Returns
    ``out`` and ``into`` (module docstring) and the buffers ``seen``, ``work``, ``fwd``,
    ``back`` that :func:`insert_dependency` searches with."""
    n, R = adj.shape
    RW = R * W
    C = n * RW
    out = np.full(C, -1, dtype=np.int32)
    into = np.full((n, RW), -1, dtype=np.int32)
    for u in range(n):
        for j in range(R):
            if adj[u, j] >= 0:
                for w in range(W):
                    out[(u * R + j) * W + w] = adj[u, j] * RW
                    into[u, j * W + w] = (adj[u, j] * R + peer[u, j]) * W + w
    return (out, into, np.zeros(C, dtype=np.int64), np.empty(C, dtype=np.int32),
            np.empty(C, dtype=np.int32), np.empty(C, dtype=np.int32))
