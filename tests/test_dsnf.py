"""Tests of DSN-F: labels, links, expansion, transformation and the two-phase tables."""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from tablegen.errors import TopologyError
from tablegen.routing.dsnf import dsnf_tables
from tablegen.topologies.dsnf import (
    LAYER_UP,
    LOCAL_PRED,
    LOCAL_SUCC,
    PRED,
    SHORTCUT_IN,
    SHORTCUT_OUT,
    SUCC,
    _paper_state_transform,
    add_nodes,
    build_dsnf,
    label,
    p_for,
    transform,
)
from tablegen.topology import Topology

SMALL = list(range(2, 200))
LARGE = [512, 1024, 2048, 4096]
TRANSFORM_POINTS = [8, 24, 64, 160, 384, 896, 2048]


def _node(l, k, s, p):
    return k * (p << p) + s * p + l - 1


def _walk(topo: Topology, tables, srcs: np.ndarray):
    """Walk the tables for every (src in srcs, dst) pair at once.

    Returns ``(dst, paths, ports, phases)``: ``paths[r]`` is the switch sequence padded with
    -1, ``ports[r, h]`` / ``phases[r, h]`` the slot and phase of hop ``h`` (-1 after delivery).
    """
    n = topo.n_switches
    src = np.repeat(srcs, n)
    dst = np.tile(np.arange(n), len(srcs))
    rows = len(src)
    pre, main = tables.pre.ravel(), tables.main.ravel()
    adj, exits = topo.adj.ravel(), tables.exit_port.ravel()
    width = topo.radix
    small = np.int16 if n < 2 ** 15 else np.int64

    def column(values, at):
        col = np.full(rows, -1, dtype=small)
        col[at] = values
        return col

    paths, ports, phases = [src.astype(small)], [], []
    # Only undelivered pairs are carried from hop to hop.
    idx = np.flatnonzero(src != dst)
    cur, d, phase = src[idx], dst[idx], np.zeros(len(idx), dtype=bool)
    while len(idx):
        assert len(ports) < n, "routing loop"
        flat = cur * n + d
        j = np.where(phase, main[flat], pre[flat]).astype(np.int64)
        assert np.all(j >= 0)
        nxt = adj[cur * width + j]
        assert np.all(nxt >= 0), "table points at an unconnected port"
        ports.append(column(j, idx))
        phases.append(column(phase, idx))
        paths.append(column(nxt, idx))
        phase |= exits[cur * width + j]
        go = nxt != d
        idx, cur, d, phase = idx[go], nxt[go], d[go], phase[go]
    empty = np.empty((rows, 0), dtype=small)
    return (dst, np.stack(paths, 1), np.stack(ports, 1) if ports else empty,
            np.stack(phases, 1) if phases else empty)


def _check_routes(n: int, chunk: int = 256) -> int:
    """All-pairs checks of the tables of DSN-F(n); returns the longest route."""
    t = build_dsnf(n)
    tb = dsnf_tables(t)
    p = t.params["p"]
    K = math.ceil(n / (p << p))
    l, k, s = t.labels.T.astype(np.int64)
    longest = 0
    for lo in range(0, n, chunk):
        dst, paths, ports, phases = _walk(t, tb, np.arange(lo, min(n, lo + chunk)))
        hops = (paths >= 0).sum(1) - 1
        longest = max(longest, int(hops.max()))
        assert hops.max() <= 2 * (p + K - 1)  # Theorem 1 (b)
        srt = np.sort(paths, axis=1)
        assert not np.any((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)), "switch revisited"
        # MAIN-PROCESS only climbs levels: away from the destination super-node, phase-1 hops
        # are layer-0 Local_Succ without the wrap, shortcuts or Succ.
        u = paths[:, :-1]
        m = (phases == 1) & (u >= 0)
        uu, jj, dd = u[m], ports[m], np.broadcast_to(dst[:, None], u.shape)[m]
        away = s[uu] != s[dd]
        assert np.all(k[uu[away]] == 0)
        assert np.all(np.isin(jj[away], [LOCAL_SUCC, SHORTCUT_OUT, SUCC]))
        assert np.all(l[uu[away & (jj == LOCAL_SUCC)]] < p)
    return longest


# ---------------------------------------------------------------------------------------------
# labels and construction
# ---------------------------------------------------------------------------------------------
def test_p_for_ranges_and_errors():
    for p in range(1, 12):
        lo, hi = p * 2 ** p, (p + 1) * 2 ** (p + 1)
        assert p_for(lo) == p and p_for(hi - 1) == p and p_for(hi) == p + 1
    for bad in (1, 0, -3):
        with pytest.raises(TopologyError, match=f"n={bad} is too small; expected n >= 2"):
            p_for(bad)
    with pytest.raises(TopologyError, match="expected p=3"):
        build_dsnf(40, p=2)
    with pytest.raises(TopologyError, match="expected p=4 or p=3"):
        build_dsnf(64, p=2)
    assert build_dsnf(64, p=3).params == {"n": 64, "p": 3}


def test_labels_n32_match_paper():
    assert p_for(32) == 3
    assert label(0, 32) == (1, 0, 0)
    assert label(24, 32) == (1, 1, 0)
    assert label(7, 32) == (2, 0, 2)
    assert label(23, 32) == (3, 0, 7)
    assert label(13, 32) == (2, 0, 4)
    t = build_dsnf(32)
    assert t.kind == "dsnf" and t.params == {"n": 32, "p": 3}
    assert t.label_names == ("level", "layer", "supernode")
    assert [t.label(i) for i in range(32)] == [label(i, 32) for i in range(32)]
    assert np.array_equal(t.group, t.labels[:, 2])
    assert t.radix == 8
    assert sorted(int(v) for v in t.adj[0] if v >= 0) == [1, 2, 13, 23, 24]
    # Node 0's slots: Local_Pred 2 (wrap), Local_Succ 1, Layer down 24, Pred 23, Shortcut 13.
    assert t.adj[0].tolist() == [2, 1, -1, 24, 23, -1, 13, -1]
    assert t.port_number(0, LOCAL_PRED) == 2  # one host port first
    with pytest.raises(TopologyError):
        label(32, 32)


@pytest.mark.parametrize("n", [5, 8, 20, 32, 63, 100, 1000])
def test_links_follow_definition(n):
    t = build_dsnf(n, hosts=2)
    p = t.params["p"]
    S, N = 2 ** p, p * 2 ** p
    ids = set(range(n))
    expected = Counter()
    for i in range(n):
        l, k, s = label(i, n)
        layer = {_node(m, k, s, p) for m in range(1, p + 1)} & ids
        if l < p and _node(l + 1, k, s, p) in ids:
            expected[(i, _node(l + 1, k, s, p), "local")] += 1
        if l == p and p >= 3 and len(layer) == p:
            expected[(i, _node(1, k, s, p), "local")] += 1
        if k >= 1:
            expected[(i, i - N, "layer")] += 1
        elif l == p:
            expected[(i, _node(1, 0, (s + 1) % S, p), "ring")] += 1
        else:
            expected[(i, _node(l + 1, 0, (s + 2 ** (p - l)) % S, p), "shortcut")] += 1
    got = Counter()
    for a, pa, b, pb in t.links.tolist():
        ja = t.port_index(a, pa)
        kind = t.kind_names[t.link_kind[a, ja]]
        # orient every cable from the end that owns it (Succ / Local_Succ / Shortcut out / up)
        if ja in (LOCAL_SUCC, SUCC, SHORTCUT_OUT, LAYER_UP):
            got[(a, b, kind)] += 1
        else:
            got[(b, a, kind)] += 1
    assert got == expected
    t.check()


def test_fixed_slots_and_degenerate_rings():
    # p = 1: two super-nodes joined by two distinct parallel ring cables, no local links.
    t = build_dsnf(4)
    assert t.params["p"] == 1
    assert t.adj[0, SUCC] == 1 and t.adj[1, PRED] == 0
    assert t.adj[1, SUCC] == 0 and t.adj[0, PRED] == 1
    assert t._has_parallel() and len(t.links) == 4
    assert np.all(t.adj[:, [LOCAL_PRED, LOCAL_SUCC, SHORTCUT_OUT, SHORTCUT_IN]] == -1)
    # p = 2: the local ring is a single link 1-2 on Local_Succ of level 1 / Local_Pred of 2.
    t = build_dsnf(16)
    assert t.params["p"] == 2
    for i in range(16):
        l, _, _ = t.label(i)
        if l == 1:
            assert t.adj[i, LOCAL_SUCC] == i + 1 and t.adj[i, LOCAL_PRED] == -1
        else:
            assert t.adj[i, LOCAL_PRED] == i - 1 and t.adj[i, LOCAL_SUCC] == -1
    assert not t._has_parallel()
    # Every slot holds its documented kind.
    t = build_dsnf(100)
    kinds = ["local", "local", "layer", "layer", "ring", "ring", "shortcut", "shortcut"]
    for j, kind in enumerate(kinds):
        used = t.link_kind[:, j] >= 0
        assert {t.kind_names[v] for v in t.link_kind[used, j]} <= {kind}
    # Shortcut in receives exactly the shortcuts sent out.
    out = t.adj[:, SHORTCUT_OUT]
    assert np.array_equal(t.peer[out >= 0, SHORTCUT_OUT], np.full((out >= 0).sum(), SHORTCUT_IN))


def test_partial_layer_is_open_chain():
    t = build_dsnf(24 * 1 + 2 + 24)  # p = 3, layer 2 partial: super-node 0 holds levels 1, 2
    assert t.params["p"] == 3
    a, b = 48, 49
    assert t.label(a) == (1, 2, 0) and t.label(b) == (2, 2, 0)
    assert t.adj[a, LOCAL_SUCC] == b and t.adj[a, LOCAL_PRED] == -1
    assert t.adj[b, LOCAL_SUCC] == -1


def test_floor_layout_is_supernode_major():
    t = build_dsnf(4096)
    assert np.all(np.bincount(t.cabinet) == 16)
    # p = 8, two layers: each super-node's 16 switches share exactly one cabinet.
    for s in range(256):
        assert len(np.unique(t.cabinet[t.group == s])) == 1
    t = build_dsnf(100)
    order = np.lexsort((t.labels[:, 0], t.labels[:, 1], t.labels[:, 2]))
    assert np.array_equal(t.cabinet[order], np.arange(100) // 16)


@pytest.mark.parametrize("n", list(range(8, 200)) + LARGE)
def test_degrees_theorem1(n):
    t = build_dsnf(n)
    p = t.params["p"]
    N = p * 2 ** p
    deg, k = t.degree, t.labels[:, 1]
    assert deg.max() <= 5
    assert np.all(deg[k == 0] <= 5) and np.all(deg[k > 0] <= 4)
    if n % N == 0 and p >= 3:
        assert deg.sum() == 4 * n  # average degree exactly 4 (also for K = 1)
    nx_graph = t.to_networkx()
    assert nx.is_connected(nx_graph)


def test_average_degree_not_4_for_degenerate_rings():
    # Theorem 1 (a)'s counting assumes two local links per node; p = 2 has one.
    assert build_dsnf(16).degree.mean() == 3.0  # p = 2, K = 2
    assert build_dsnf(32).degree.mean() != 4.0  # partial layer


# ---------------------------------------------------------------------------------------------
# routing tables
# ---------------------------------------------------------------------------------------------
def test_paper_example_route_24_to_7():
    t = build_dsnf(32)
    tb = dsnf_tables(t)
    u, d, phase, path = 24, 7, 0, [24]
    while u != d:
        j = int((tb.main if phase else tb.pre)[u, d])
        if phase == 0 and tb.exit_port[u, j]:
            phase = 1
        u = int(t.adj[u, j])
        path.append(u)
    assert path == [24, 0, 1, 8, 7]
    from tablegen.routing.build import build_tables

    assert build_tables(t, "dsnf").walk(24, 7)["switches"] == path


def test_table_shapes_and_diagonal():
    t = build_dsnf(100)
    tb = dsnf_tables(t)
    assert tb.pre.dtype == np.int16 and tb.main.dtype == np.int16
    assert tb.pre.shape == tb.main.shape == (100, 100)
    assert tb.pre.flags.c_contiguous and tb.main.flags.c_contiguous  # rows are read per switch
    assert np.all(np.diag(tb.pre) == -1) and np.all(np.diag(tb.main) == -1)
    assert tb.exit_port.dtype == bool and tb.exit_port.shape == (100, 8)
    assert set(np.flatnonzero(tb.exit_port.any(0))) == {SUCC, SHORTCUT_OUT}
    assert tb.vc_inc.dtype == np.uint8 and tb.vc_inc.shape == (100, 8)
    # Phase 1 only differs on layer-0 rows outside the destination super-node.
    diff = tb.pre != tb.main
    r, c = np.nonzero(diff)
    assert np.all(t.labels[r, 1] == 0) and np.all(t.group[r] != t.group[c])


@pytest.mark.parametrize("n", SMALL)
def test_routes_small(n):
    _check_routes(n)


@pytest.mark.parametrize("n", LARGE)
def test_routes_large(n):
    p = p_for(n)
    K = math.ceil(n / (p << p))
    assert _check_routes(n) <= 2 * (p + K - 1)


def test_vc_datelines_acyclic():
    for n in (8, 32, 64, 100, 200):
        t = build_dsnf(n)
        tb = dsnf_tables(t)
        p = t.params["p"]
        dst, paths, ports, _ = _walk(t, tb, np.arange(n))
        u = paths[:, :-1]
        live = ports >= 0
        inc = np.where(live, tb.vc_inc[np.maximum(u, 0), np.maximum(ports, 0)], 0)
        vc = np.cumsum(inc, axis=1) - inc  # datelines crossed before each hop
        assert vc.max() <= (3 if p >= 4 else 1)
        ch = np.where(live, (u * 8 + ports) * 4 + vc, -1)
        a, b = ch[:, :-1].ravel(), ch[:, 1:].ravel()
        keep = (a >= 0) & (b >= 0)
        g = nx.DiGraph()
        g.add_edges_from(set(zip(a[keep].tolist(), b[keep].tolist())))
        assert nx.is_directed_acyclic_graph(g), n


@pytest.mark.parametrize("n,p", [(64, 4), (200, 5), (1024, 7)])
def test_four_vcs_are_the_least_the_datelines_allow(n, p):
    """With a VC fewer, the third dateline crossing shares the last VC and verify finds a
    cycle on it; with four it proves the routing deadlock-free."""
    from tablegen.routing.build import build_tables
    from tablegen.verify import verify

    topo = build_dsnf(n)
    assert topo.params["p"] == p
    three = verify(build_tables(topo, "dsnf", vcs=3))
    assert not three.ok and three.cycle and "(vc2)" in three.errors[0]
    four = verify(build_tables(topo, "dsnf"))
    assert four.ok and four.num_vcs == 4


def test_vc_inc_ports():
    t = build_dsnf(64)  # p = 4
    tb = dsnf_tables(t)
    N = 64
    assert tb.vc_inc[N - 1, SUCC] == 1 and tb.vc_inc[:, SUCC].sum() == 1
    src = np.flatnonzero(tb.vc_inc[:, SHORTCUT_OUT])
    assert np.all(t.group[t.adj[src, SHORTCUT_OUT]] < t.group[src])
    assert tb.vc_inc[:, SHORTCUT_OUT].sum() == sum(2 ** (4 - l) for l in range(1, 4))
    assert tb.vc_inc[:, LOCAL_SUCC].sum() == 16 and tb.vc_inc[:, LOCAL_PRED].sum() == 16
    assert dsnf_tables(build_dsnf(32)).vc_inc[:, :2].sum() == 0  # p = 3: no local datelines


def test_tables_4096():
    """The largest supported size builds (its time: benchmarks/bench_tablegen.py dsnf4096)."""
    t = build_dsnf(4096)
    tb = dsnf_tables(t)
    assert tb.pre.shape == (4096, 4096)


# ---------------------------------------------------------------------------------------------
# expansion and transformation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(8, 300))
def test_add_one_node_only_adds_cables(n):
    old = build_dsnf(n)
    new, diff = add_nodes(old, 1)
    assert diff.removed == []
    assert set(map(tuple, old.links.tolist())) <= set(map(tuple, new.links.tolist()))
    assert sorted(diff.added + diff.kept) == sorted(map(tuple, new.links.tolist()))
    p = old.params["p"]
    if p_for(n + 1) == p:
        assert np.array_equal(new.links, build_dsnf(n + 1).links)
    else:  # n + 1 is the transformation point: p is kept, further growth needs transform
        assert new.params == {"n": n + 1, "p": p}
        with pytest.raises(TopologyError, match="transform"):
            add_nodes(new, 1)


def test_add_nodes_from_int_and_errors():
    new, diff = add_nodes(100, 60)
    assert new.params == {"n": 160, "p": 4} and diff.removed == []
    with pytest.raises(TopologyError, match=r"transform\(160\)"):
        add_nodes(100, 61)
    with pytest.raises(TopologyError):
        add_nodes(100, -1)


@pytest.mark.parametrize("n", TRANSFORM_POINTS)
def test_transform_reproduces_build(n):
    new, diff, relabel = transform(n)
    p = p_for(n) - 1
    ref = build_dsnf(n)
    assert new.params == {"n": n, "p": p + 1}
    assert np.array_equal(new.links, ref.links)
    assert np.array_equal(np.sort(relabel), np.arange(n))
    old = build_dsnf(n, p=p)

    def pairs(topo, ids):
        return Counter((min(ids[a], ids[b]), max(ids[a], ids[b])) for a, _, b, _ in topo.links)

    old_pairs = pairs(old, relabel)
    new_pairs = pairs(ref, np.arange(n))
    kept = Counter((a, b) for a, b, _ in diff.kept)
    assert kept + Counter((a, b) for a, b, _ in diff.removed) == old_pairs
    assert kept + Counter((a, b) for a, b, _ in diff.added) == new_pairs
    # Layer 0 of S -> S_A = 2S, layer 1 -> S_B = 2S + 1, levels unchanged.
    l, k, s = old.labels.T
    nl, _, ns = new.labels[relabel].T
    low = k <= 1
    assert np.array_equal(ns[low], 2 * s[low] + k[low]) and np.array_equal(nl[low], l[low])
    assert np.all(nl[~low] == p + 1)


def test_transform_counts():
    per_sn = {}
    for n in TRANSFORM_POINTS:
        _, diff, _ = transform(n)
        p = p_for(n) - 1
        c = diff.counts
        per_sn[p] = (c["added"], c["removed"], c["replugged"])
    # Measured on the id-order networks (docs/dsnf.md); pinned so that changes are noticed.
    assert per_sn[1] == (10, 6, 2)
    assert per_sn[2] == (28, 16, 8)
    assert per_sn[3] == (74, 73, 6)
    assert per_sn[4] == (168, 168, 8)
    # Cables plugged into a new position (added + re-plugged) are the paper's p + 7 per
    # super-node for every p >= 2, whatever the fill; p = 1 has degenerate rings.
    for p, (added, _, replugged) in per_sn.items():
        assert (added + replugged) / 2 ** p == (p + 7 if p >= 2 else 6)
    # The paper's idealised state: p + 6 added, p + 5 removed and 1 re-plugged per super-node;
    # added + re-plugged = p + 7, the paper's "rewired" count.
    for p in range(3, 9):
        old, diff, relabel = _paper_state_transform(p)
        S = 2 ** p
        c = diff.counts
        assert (c["added"], c["removed"], c["replugged"]) == ((p + 6) * S, (p + 5) * S, S)
        assert (c["added"] + c["replugged"]) // S == p + 7
        assert len(old.links) == (4 * p + 3) * S  # paper: 4p + 4 (two-node ring counted twice)
    # For p <= 2 the id-order network is the paper's state.
    for p, n in ((1, 8), (2, 24)):
        assert _paper_state_transform(p)[1].counts == transform(n)[1].counts


def test_transform_rejects_other_sizes():
    for n in (2, 7, 9, 23, 25, 100):
        with pytest.raises(TopologyError, match="not a transformation point"):
            transform(n)


def test_expansion_chain_through_transform():
    # Grow 24 -> 64 with p = 3, transform to p = 4, keep growing.
    t, diff = add_nodes(build_dsnf(24), 40)
    assert t.params == {"n": 64, "p": 3} and diff.removed == []
    new, _, _ = transform(64)
    more, diff = add_nodes(new, 10)
    assert more.params == {"n": 74, "p": 4} and diff.removed == []
