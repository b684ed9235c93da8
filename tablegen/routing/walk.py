"""Compiled walk of deterministic table classes (MIN, DSN-F) for :mod:`tablegen.verify`.

Those classes fan out nowhere, so every (source, destination) pair is one path; walking them
one by one in compiled code beats any vectorised formulation (O(N^2 L) simple steps).
Beside the walks, the one other compiled pass over whole tables that several layers share:
the majority port toward each group (:func:`group_majority`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tablegen.topology import Topology

DEAD_END, TOO_LONG = 1, 2


def by_dst(table: np.ndarray) -> np.ndarray:
    """``table.T`` in C order (a destination's entries in one row), copied in cache-sized
    tiles: twice as fast as NumPy's copy of a transposed view at N = 4096."""
    out = np.empty(table.shape[::-1], dtype=table.dtype)
    _transpose(table, out)
    return out


@njit(cache=True)
def _transpose(a, out):
    n, m = a.shape
    for i0 in range(0, n, 64):
        for j0 in range(0, m, 64):
            for i in range(i0, min(i0 + 64, n)):
                for j in range(j0, min(j0 + 64, m)):
                    out[j, i] = a[i, j]


@njit(cache=True, inline="always")
def _hop(adj, vc_inc, n_vcs, vc_seen, u, j, vc):
    """Leave ``u`` on network port ``j`` on VC ``vc``: ``(next switch, channel, next VC)``."""
    vc_seen[vc] = True
    return adj[u, j], (u * adj.shape[1] + j) * n_vcs + vc, min(vc + vc_inc[u, j], n_vcs - 1)


@njit(cache=True)
def _dest_hist(len1, group, by_group, lmax):
    """``h[x, L]``: destinations a packet entering phase 1 at ``x`` may have (not ``x``, not
    in its group for group-level Valiant) that are ``L`` hops away."""
    n = len1.shape[0]
    h = np.zeros((n, lmax), dtype=np.int64)
    for x in range(n):
        for d in range(n):
            if d != x and not (by_group and group[d] == group[x]):
                h[x, len1[x, d]] += 1
    return h


@njit(cache=True)
def walk_all_pairs(adj, t0_by_dst, t1_by_dst, two_phase, exit_port, vc_inc, n_vcs, vc_base,
                   max_hops, deps, hist, vc_seen, len_by_dst, carries):
    """Walk every (s, d) path; the tables come transposed (``t[d, u]``: a destination's
    entries in one cached row).  Marks ``deps[in_channel, out_port * V + out_vc]`` for the
    destinations ``d`` with ``carries[d]`` and ``vc_seen``, counts path lengths in ``hist``
    and, unless it is empty, writes them into ``len_by_dst[d, s]``; returns ``(status,
    switch, destination)`` with status 0, :data:`DEAD_END` or :data:`TOO_LONG`.

    Paths toward one destination merge: once a walk enters a state ``(switch, phase, VC)``
    an earlier walk toward the same destination passed, the rest of it (its hops, their
    dependencies and VCs, its length ``rem``) is known, so each state is walked once per
    destination: O(N^2 P V) for P phases and V VCs instead of O(N^2 L)."""
    n, r = adj.shape
    keep_len = len_by_dst.shape[0] > 0
    stamp = np.full((n, 2, n_vcs), -1, dtype=np.int32)   # destination that walked the state
    rem = np.empty((n, 2, n_vcs), dtype=np.int32)         # its hops to that destination
    path = np.empty((max_hops + 1, 3), dtype=np.int64)
    for d in range(n):
        row0, row1 = t0_by_dst[d], t1_by_dst[d]
        dep = carries[d]
        for s in range(n):
            if s == d:
                continue
            u, ph, vc, inch, hops = s, 0 if two_phase else 1, vc_base, -1, 0
            while u != d and stamp[u, ph, vc] != d:
                if hops == max_hops:
                    return TOO_LONG, u, d
                path[hops, 0], path[hops, 1], path[hops, 2] = u, ph, vc
                j = row0[u] if ph == 0 else row1[u]
                if j < 0:
                    return DEAD_END, u, d
                if ph == 0 and exit_port[u, j]:
                    ph = 1
                if inch >= 0 and dep:
                    deps[inch, j * n_vcs + vc] = True
                u, inch, vc = _hop(adj, vc_inc, n_vcs, vc_seen, u, j, vc)
                hops += 1
            total = hops
            if u != d:                     # joined an earlier walk: one more dependency
                total += rem[u, ph, vc]
                if total > max_hops:
                    return TOO_LONG, u, d
                j = row0[u] if ph == 0 else row1[u]
                if inch >= 0 and dep:
                    deps[inch, j * n_vcs + vc] = True
            for k in range(hops):
                x, p, v = path[k, 0], path[k, 1], path[k, 2]
                stamp[x, p, v] = d
                rem[x, p, v] = total - k
            hist[total] += 1
            if keep_len:
                len_by_dst[d, s] = total
    return 0, -1, -1


def data_destinations(topo: Topology) -> np.ndarray:
    """``bool[N]``: the switches data packets are addressed to, those with hosts (a fat
    tree's aggregation and core switches receive only management traffic; in OpenFlow none,
    the controller is out of band; InfiniBand's own proof, ``verify`` of the IB files, walks
    the switch LIDs as well).  A fabric without any host is checked as if every switch were
    an endpoint.  O(N)."""
    has = np.asarray(topo.hosts) > 0
    return has if has.any() else np.ones_like(has)


def run(ts, c, deps, vc_seen, len_by_dst=None):
    """Walk class ``c`` of ``ts``; returns ``(hist dict, error message or None)``.  Given
    ``len_by_dst`` (``int16[N, N]``), the length of every path ``s -> d`` goes into
    ``len_by_dst[d, s]``.  Every path is checked for delivery and length; only those toward
    a switch with hosts add channel dependencies (:func:`data_destinations`)."""
    topo = ts.topo
    two = c.table0 is not None
    t1 = ts.tables[c.table1]
    t0 = ts.tables[c.table0] if two else t1
    ep = ts.exit_port if (two and c.exit == "port") else np.zeros(topo.adj.shape, dtype=bool)
    hist = np.zeros(c.max_hops + 1, dtype=np.int64)
    t1_by_dst = by_dst(t1)
    t0_by_dst = by_dst(t0) if two else t1_by_dst
    status, u, d = walk_all_pairs(topo.adj, t0_by_dst, t1_by_dst, two, ep,
                                  ts.vc_inc.astype(np.int64),
                                  ts.num_vcs, c.vc_base, c.max_hops, deps, hist, vc_seen,
                                  np.empty((0, 0), dtype=np.int16) if len_by_dst is None
                                  else len_by_dst, data_destinations(topo))
    err = None
    if status == DEAD_END:
        err = f"class {c.name}: no table entry at switch {u} for destination {d}"
    elif status == TOO_LONG:
        err = (f"class {c.name}: a path is longer than {c.max_hops} hops (loop?) — e.g. a "
               f"packet at switch {u} toward {d}")
    return {int(h): int(k) for h, k in enumerate(hist) if k}, err


@njit(cache=True)
def _walk_from(x, d, vc, adj, t1, vc_inc, n_vcs, deps, vc_seen, visited):
    """Phase-1 walk x -> d from VC ``vc``; stops where an earlier walk already went on."""
    inch = -1
    while x != d:
        j = t1[x, d]
        if inch >= 0:
            deps[inch, j * n_vcs + vc] = True
        if visited[x, d, vc]:
            return
        visited[x, d, vc] = True
        x, inch, vc = _hop(adj, vc_inc, n_vcs, vc_seen, x, j, vc)


@njit(cache=True)
def walk_reach(adj, t0, t1, group, by_group, n_targets, vc_inc, n_vcs, vc_base, len1,
               deps, hist, vc_seen):
    """Valiant classes whose phase 0 ends on reaching the intermediate switch (or group).

    Phase 0 is walked for every (source, intermediate); the channels that arrive at an
    intermediate are collected, and phase 1 is walked once per (arrival switch, destination,
    VC) — never per (source, intermediate, destination) triple.  ``len1`` holds the phase-1
    table lengths, so the path-length histogram over the triples is exact:
    ``hist[len0 + len1[x, d]]`` summed over every (source, intermediate) and allowed ``d``
    (``d`` not the intermediate, nor in the intermediate group, nor the source).
    Returns ``(status, switch, target)`` as :func:`walk_all_pairs`.
    """
    n, r = adj.shape
    arrived = np.zeros(n * r * n_vcs, dtype=np.bool_)
    lmax = hist.shape[0]
    h1 = _dest_hist(len1, group, by_group, lmax)
    for s in range(n):
        for tgt in range(n_targets):
            if (by_group and group[s] == tgt) or (not by_group and s == tgt):
                continue
            u, vc, inch, hops = s, vc_base, -1, 0
            while (group[u] if by_group else u) != tgt:
                if hops > n:
                    return TOO_LONG, u, tgt
                j = t0[u, tgt]
                if j < 0:
                    return DEAD_END, u, tgt
                if inch >= 0:
                    deps[inch, j * n_vcs + vc] = True
                u, inch, vc = _hop(adj, vc_inc, n_vcs, vc_seen, u, j, vc)
                hops += 1
            arrived[inch] = True
            for L in range(lmax - hops):
                hist[hops + L] += h1[u, L]
            if not (by_group and group[s] == group[u]) and s != u:
                hist[hops + len1[u, s]] -= 1  # the source is no destination of its own packet
    _from_arrivals(arrived, adj, t1, group, by_group, vc_inc, n_vcs, deps, vc_seen,
                   np.zeros((n, n, n_vcs), dtype=np.bool_))
    return 0, -1, -1


@njit(cache=True)
def _from_arrivals(arrived, adj, t1, group, by_group, vc_inc, n_vcs, deps, vc_seen, visited):
    """Phase 1 after phase 0 ended at the far end of each arrival channel: every destination
    outside the intermediate (group), once per (switch, destination, VC)."""
    n, r = adj.shape
    for c in range(arrived.shape[0]):
        if not arrived[c]:
            continue
        u = c // (r * n_vcs)
        j = (c // n_vcs) % r
        x = adj[u, j]
        vc = min(c % n_vcs + vc_inc[u, j], n_vcs - 1)
        for d in range(n):
            if d == x or (by_group and group[d] == group[x]):
                continue
            deps[c, t1[x, d] * n_vcs + vc] = True
            _walk_from(x, d, vc, adj, t1, vc_inc, n_vcs, deps, vc_seen, visited)


@njit(cache=True)
def walk_nta(adj, t1, vc_inc, n_vcs, vc_base, len1, jump_off, jump_dst, deps, hist,
             vc_seen):
    """VAL_nta: phase 0 toward I for every (S, I); at each switch u on the way the
    destinations D with u on the table path I -> D (``jump_dst[jump_off[u*n+I] :
    jump_off[u*n+I+1]]``) jump to phase 1 there, each D at the first such u.  ``hist`` counts
    (S, I, D) paths exactly; dependencies are recorded per jump and once per arrival channel,
    phase-1 continuations once per (switch, destination, VC)."""
    n, r = adj.shape
    lmax = hist.shape[0]
    no_group = np.zeros(n, dtype=np.int64)
    h1 = _dest_hist(len1, no_group, False, lmax)
    arrived = np.zeros(n * r * n_vcs, dtype=np.bool_)
    visited = np.zeros((n, n, n_vcs), dtype=np.bool_)
    mark = np.full(n, -1, dtype=np.int64)
    consumed = np.empty(n, dtype=np.int64)
    gen = 0
    for s in range(n):
        for i in range(n):
            if i == s:
                continue
            gen += 1
            mark[s] = gen  # the source is no destination of its own packet
            u, vc, inch, hops, nc = s, vc_base, -1, 0, 0
            while u != i:
                if hops > n:
                    return TOO_LONG, u, i
                for k in range(jump_off[u * n + i], jump_off[u * n + i + 1]):
                    d = jump_dst[k]
                    if mark[d] == gen:
                        continue
                    mark[d] = gen
                    consumed[nc] = d
                    nc += 1
                    hist[hops + len1[u, d]] += 1
                    if d != u:
                        vc_seen[vc] = True
                        if inch >= 0:
                            deps[inch, t1[u, d] * n_vcs + vc] = True
                        _walk_from(u, d, vc, adj, t1, vc_inc, n_vcs, deps, vc_seen, visited)
                j = t1[u, i]
                if j < 0:
                    return DEAD_END, u, i
                if inch >= 0:
                    deps[inch, j * n_vcs + vc] = True
                u, inch, vc = _hop(adj, vc_inc, n_vcs, vc_seen, u, j, vc)
                hops += 1
            arrived[inch] = True
            for L in range(lmax - hops):
                hist[hops + L] += h1[i, L]
            for k in range(nc):
                hist[hops + len1[i, consumed[k]]] -= 1
            hist[hops + len1[i, s]] -= 1
    _from_arrivals(arrived, adj, t1, no_group, False, vc_inc, n_vcs, deps, vc_seen, visited)
    return 0, -1, -1


def run_nta(ts, c, deps, vc_seen):
    """Walk a VAL_nta class; returns ``(hist dict, error or None)``."""
    topo = ts.topo
    n = topo.n_switches
    t1 = ts.tables[c.table1]
    try:
        len1 = table_lengths(topo, t1)
    except RuntimeError as e:
        return {}, f"class {c.name}: {e}"
    u, i, d = ts.on_path_triples()
    keep = u != i
    u, i, d = u[keep], i[keep], d[keep]
    jump_off = np.zeros(n * n + 1, dtype=np.int64)
    np.cumsum(np.bincount(u.astype(np.int64) * n + i, minlength=n * n), out=jump_off[1:])
    hist = np.zeros(2 * int(len1.max()) + 2, dtype=np.int64)
    status, a, b = walk_nta(topo.adj, t1, ts.vc_inc.astype(np.int64), ts.num_vcs, c.vc_base,
                            len1, jump_off, d.astype(np.int64), deps, hist, vc_seen)
    err = None
    if status == DEAD_END:
        err = f"class {c.name}: no table entry at switch {a} for intermediate {b}"
    elif status == TOO_LONG:
        err = f"class {c.name}: phase 0 loops at switch {a} toward intermediate {b}"
    return {int(h): int(k) for h, k in enumerate(hist) if k}, err


def run_reach(ts, c, deps, vc_seen):
    """Walk a ``reach`` Valiant class; returns ``(hist dict, error or None)``."""
    topo = ts.topo
    t1 = ts.tables[c.table1]
    by_group = c.target0 == "group"
    try:
        len1 = table_lengths(topo, t1)
    except RuntimeError as e:
        return {}, f"class {c.name}: phase-1 {e}"
    hist = np.zeros(c.max_hops + int(len1.max()) + 2, dtype=np.int64)
    n_targets = topo.n_groups if by_group else topo.n_switches
    status, u, t = walk_reach(topo.adj, ts.tables[c.table0], t1, topo.group.astype(np.int64),
                              by_group, n_targets, ts.vc_inc.astype(np.int64), ts.num_vcs,
                              c.vc_base, len1, deps, hist, vc_seen)
    err = None
    if status == DEAD_END:
        err = f"class {c.name}: no table entry at switch {u} for intermediate {t}"
    elif status == TOO_LONG:
        err = f"class {c.name}: phase 0 loops at switch {u} toward intermediate {t}"
    return {int(h): int(k) for h, k in enumerate(hist) if k}, err


@njit(cache=True)
def walk_3h(adj, t0, t1, vc_inc, n_vcs, vc_base, len1, deps, hist, vc_seen, visited):
    """VAL_3h: for every (S, D) the first hops are the ports of S that some intermediate
    I not in {S, D} leads to, less the turn-around hops (the table path from the first hop N
    back to D passes S) when S has another; then the phase-1 walk N -> D, once per (N, D).
    ``hist`` counts (S, first hop, D) paths by length.  It goes destination by destination,
    so ``t0``, ``t1``, ``len1`` and ``visited[x, d, vc]`` are best transposed views of
    destination-major arrays (a destination's entries in one cached row)."""
    n, r = adj.shape
    count = np.zeros((n, r), dtype=np.int64)        # intermediates behind each first hop
    for s in range(n):
        for i in range(n):
            if t0[s, i] >= 0:
                count[s, t0[s, i]] += 1
    ok = np.zeros(r, dtype=np.bool_)
    back = np.zeros(r, dtype=np.bool_)
    for d in range(n):
        for s in range(n):
            if d == s:
                continue
            any_fine = False
            for j in range(r):
                nb = adj[s, j]
                ok[j] = nb >= 0 and count[s, j] - (1 if t0[s, d] == j else 0) > 0
                back[j] = False
                if ok[j]:
                    # s on the path nb -> d makes that path s's path plus some hops
                    x = nb if len1[nb, d] > len1[s, d] else d
                    while x != d:
                        if x == s:
                            back[j] = True
                            break
                        x = adj[x, t1[x, d]]
                    any_fine = any_fine or not back[j]
            for j in range(r):
                if not ok[j] or (back[j] and any_fine):
                    continue
                nb = adj[s, j]
                hist[1 + len1[nb, d]] += 1
                vc_seen[vc_base] = True
                if nb != d:
                    vc = min(vc_base + vc_inc[s, j], n_vcs - 1)
                    deps[(s * r + j) * n_vcs + vc_base, t1[nb, d] * n_vcs + vc] = True
                    _walk_from(nb, d, vc, adj, t1, vc_inc, n_vcs, deps, vc_seen, visited)


def run_3h(ts, c, deps, vc_seen):
    """Walk a VAL_3h class; returns ``(hist dict, error or None)``."""
    try:
        len1 = table_lengths(ts.topo, ts.tables[c.table1])
    except RuntimeError as e:
        return {}, f"class {c.name}: {e}"
    hist = np.zeros(int(len1.max()) + 2, dtype=np.int64)
    n = ts.topo.n_switches
    visited = np.zeros((n, n, ts.num_vcs), dtype=np.bool_).transpose(1, 0, 2)
    walk_3h(ts.topo.adj, by_dst(ts.tables[c.table0]).T, by_dst(ts.tables[c.table1]).T,
            ts.vc_inc.astype(np.int64), ts.num_vcs, c.vc_base, by_dst(len1).T, deps, hist,
            vc_seen, visited)
    return {int(h): int(k) for h, k in enumerate(hist) if k}, None


@njit(cache=True)
def lengths(adj, by_target, out):
    """``out[t, u]`` = hops from u to target switch t following ``by_target[t, u]`` (a
    table transposed: one target's entries in one cached row); returns ``(u, t)`` of an
    entry that loops or dead-ends, or ``(-1, -1)``.  O(N^2) amortised."""
    m, n = by_target.shape
    stack = np.empty(n + 1, dtype=np.int64)
    for t in range(m):
        row, hops = by_target[t], out[t]
        hops[:] = -1
        hops[t] = 0
        for u in range(n):
            top = 0
            x = u
            while hops[x] < 0:
                if top > n:
                    return u, t
                stack[top] = x
                top += 1
                j = row[x]
                if j < 0 or adj[x, j] < 0:
                    return x, t
                x = adj[x, j]
            base = hops[x]
            for k in range(top - 1, -1, -1):
                base += 1
                hops[stack[k]] = base
    return -1, -1

def table_lengths(topo: Topology, table: np.ndarray) -> np.ndarray:
    """Hops from ``u`` to target ``t`` following ``table`` (targets are switches); raises
    ``RuntimeError`` if some entry loops or dead-ends.  O(N^2) (compiled)."""
    out = np.empty(table.shape[::-1], dtype=np.int32)
    u, t = lengths(topo.adj, by_dst(table), out)
    if u >= 0:
        raise RuntimeError(f"table loops or dead-ends at switch {u} toward {t}")
    return by_dst(out)


def group_majority(table: np.ndarray, group: np.ndarray, n_groups: int):
    """``(maj, best)``, ``int64[N, G]`` each: ``maj[u, G]`` the port ``u``'s table uses most
    toward group ``G``'s switches (the lowest such port on a tie; 0 when none), ``best[u, G]``
    how often.  The OpenFlow export's group entries and adaptive UGAL-L's minimal port toward
    a Dragonfly group both take it.  O(N^2 + N G R), compiled."""
    n = table.shape[0]
    maj = np.empty((n, n_groups), dtype=np.int64)
    best = np.empty((n, n_groups), dtype=np.int64)
    _majority(table, np.asarray(group, dtype=np.int64), int(table.max(initial=0)) + 1, maj,
              best)
    return maj, best


@njit(cache=True)
def _majority(table, grp, R, maj, best):
    """``maj[u, G]``: the port ``u``'s table uses most toward group ``G``'s switches (the
    lowest such port on a tie; 0 when none), ``best[u, G]`` how often.  O(N^2 + N G R)."""
    n, m = table.shape
    counts = np.zeros((maj.shape[1], R), dtype=np.int64)
    for u in range(n):
        counts[:] = 0
        for d in range(m):
            if table[u, d] >= 0:
                counts[grp[d], table[u, d]] += 1
        for g in range(maj.shape[1]):
            k = 0
            for p in range(1, R):
                if counts[g, p] > counts[g, k]:
                    k = p
            maj[u, g], best[u, g] = k, counts[g, k]
