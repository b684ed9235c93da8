"""Backup ports for fast failover: where a switch sends a packet when the cable its table
chose has just failed, before any table changes.

For a cable ``u -- v`` and every destination ``d`` that ``u``'s minimal table sends over it,
the backup is the port of ``u`` toward a neighbour ``w`` whose own (unchanged) table path to
``d`` never comes back to ``u`` — so it cannot use the failed cable either — the shortest such
detour, ties to the lowest port; the same at ``v``.  Those entries, with every other switch
unchanged, are what the data plane forwards by once the cable is down (OpenFlow
FAST_FAILOVER groups switch to the backup bucket when the watched port goes down), and that
*patched* table set is proven like any other: every pair delivered over the remaining
cables, no loop, and an acyclic channel dependency graph on the installed VCs
(:func:`tablegen.verify.verify`).  A cable whose patched set fails (a detour the installed VCs
cannot carry deadlock-free, or a destination without a detour) gets no backups: the
controller's repair covers it.

Only single-class minimal tables (``min``): Valiant classes and DSN-F's two-phase tables are
repaired by the controller alone.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tablegen.tables import TableSet

__all__ = ["MAX_SWITCHES_FF", "fast_failover"]

MAX_SWITCHES_FF = 256      # one proof per cable: O(L N^2) walks; larger fabrics get none


def _avoids(adj: np.ndarray, table: np.ndarray, w: int, u: int) -> tuple[np.ndarray, np.ndarray]:
    """Per destination ``d``: whether ``table``'s path from ``w`` to ``d`` stays away from
    ``u``, and its hops.  O(N D)."""
    n = table.shape[0]
    d = np.arange(n)
    pos = np.full(n, w)
    ok = np.full(n, w != u)
    hops = np.zeros(n, dtype=np.int64)
    for _ in range(n):
        moving = pos != d
        if not moving.any():
            break
        nxt = adj[pos[moving], table[pos[moving], d[moving]]]
        pos[moving] = nxt
        hops[moving] += 1
        ok &= pos != u
    return ok & (pos == d), hops


def _end(ts: TableSet, u: int, j: int, entry: np.ndarray) -> dict[int, int] | None:
    """Backup port of ``u`` per destination that ``u`` sends over port ``j``: one per
    forwarding entry (``entry[d]``: destinations with equal ids share one, as a group entry
    does), valid for all its destinations, the shortest longest detour; ``None`` when some
    entry has none."""
    topo, table = ts.topo, ts.tables["min"]
    adj = topo.adj
    dests = np.flatnonzero(table[u] == j)
    ids, inv = np.unique(entry[dests], return_inverse=True)
    big = np.iinfo(np.int64).max
    best_cost = np.full(len(ids), big)
    best = np.full(len(ids), -1)
    for b in np.flatnonzero(adj[u] >= 0).tolist():
        if b == j or adj[u, b] == adj[u, j]:
            continue                      # the failed cable, or one parallel to it
        ok, hops = _avoids(adj, table, int(adj[u, b]), u)
        bad = np.bincount(inv, weights=~ok[dests], minlength=len(ids)) > 0
        cost = np.zeros(len(ids), dtype=np.int64)
        np.maximum.at(cost, inv, hops[dests] + 1)
        cost[bad] = big
        better = cost < best_cost
        best_cost[better], best[better] = cost[better], b
    if (best < 0).any():
        return None
    return dict(zip(dests.tolist(), best[inv].tolist()))


def fast_failover(ts: TableSet, entry: np.ndarray | None = None) -> dict[tuple[int, int], dict]:
    """Verified backups: ``{(u, v): {u: {d: port index}, v: {d: port index}}}`` for every
    cable ``u -- v`` (``u < v``) whose patched table set is proven (module doc); ``{}`` for
    table sets other than single-class ``min`` or above :data:`MAX_SWITCHES_FF` switches.
    ``entry[u, d]``: the forwarding entry of ``u`` that serves ``d`` (equal ids: one entry,
    e.g. an OpenFlow group entry, which gets one backup); default one per destination.

    Complexity: per cable O(R N D) walks plus one :func:`~tablegen.verify.verify` of the
    patched set (O(N^2 D) and the CDG)."""
    from tablegen.topologies.failures import without_links
    from tablegen.verify import verify

    topo = ts.topo
    if (len(ts.classes) != 1 or ts.classes[0].table0 is not None or "min" not in ts.tables
            or topo.n_switches > MAX_SWITCHES_FF):
        return {}
    cls = ts.classes[0]
    if entry is None:
        entry = np.broadcast_to(np.arange(topo.n_switches), (topo.n_switches,) * 2)
    out = {}
    for u, v in sorted(topo.edge_set()):
        ends = {}
        for a, b in ((u, v), (v, u)):
            js = np.flatnonzero(topo.adj[a] == b)
            backup = {}
            for j in js.tolist():
                got = _end(ts, a, j, entry[a])
                if got is None:
                    backup = None
                    break
                backup.update(got)
            ends[a] = backup
        if any(e is None for e in ends.values()):
            continue
        try:
            deg = without_links(topo, [(u, v)])
        except Exception:       # the cable is a bridge of the graph: nothing to fail over to
            continue
        table = ts.tables["min"].copy()
        for a, per in ends.items():
            for d, b in per.items():
                table[a, d] = b
        patched = replace(ts, topo=deg, tables={**ts.tables, "min": table},
                          classes=[replace(cls, name="min-backup", max_hops=topo.n_switches)],
                          _on_path={})
        if verify(patched).ok:
            out[(u, v)] = ends
    return out
