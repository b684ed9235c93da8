"""Tests of the baseline topologies (torus + DOR, DSN-x, DLN-x)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from tablegen.errors import TopologyError
from tablegen.routing.torus import torus_dor_tables
from tablegen.topologies.baselines import SWITCHES_PER_CABINET, build_dln, build_dsn, build_torus
from tablegen.topology import distance_matrix

TORI = [(4, 4), (5, 3), (8, 8)]


# ---------------------------------------------------------------------------------------------
# torus
# ---------------------------------------------------------------------------------------------
def test_torus_8x8_regular_diameter_and_isomorphic_to_periodic_grid():
    t = build_torus(8, 8)
    assert t.kind == "torus" and t.params == {"x": 8, "y": 8}
    assert t.n_switches == 64 and t.radix == 4
    assert np.all(t.degree == 4)
    assert int(distance_matrix(t).max()) == 8

    g = t.to_networkx()
    ref = nx.grid_2d_graph(8, 8, periodic=True)
    assert nx.is_isomorphic(g, ref)
    # The explicit map (i, j) -> j*x + i is an isomorphism, i.e. the ids are as documented.
    mapped = nx.relabel_nodes(ref, {(i, j): j * 8 + i for i, j in ref.nodes})
    assert {frozenset(e) for e in mapped.edges} == {frozenset(e) for e in g.edges}


@pytest.mark.parametrize("x,y", TORI)
def test_torus_ports_and_labels(x, y):
    t = build_torus(x, y, hosts=2)
    ids = np.arange(x * y)
    i, j = ids % x, ids // x
    assert np.array_equal(t.labels, np.stack([i, j], 1))
    assert t.label_names == ("i", "j")
    assert np.array_equal(t.adj[:, 0], j * x + (i + 1) % x)
    assert np.array_equal(t.adj[:, 1], j * x + (i - 1) % x)
    assert np.array_equal(t.adj[:, 2], ((j + 1) % y) * x + i)
    assert np.array_equal(t.adj[:, 3], ((j - 1) % y) * x + i)
    assert [t.kind_names[k] for k in t.link_kind[0]] == ["x", "x", "y", "y"]
    assert np.array_equal(t.peer, np.tile([1, 0, 3, 2], (x * y, 1)))
    assert t.port_number(0, 0) == 3  # two host ports first
    assert np.array_equal(t.cabinet, ids // SWITCHES_PER_CABINET)
    assert np.array_equal(t.group, ids)


def test_torus_ring_of_two_keeps_parallel_links():
    t = build_torus(2, 3)
    assert np.all(t.degree == 4)
    assert len(t.links) == 2 * 6
    assert np.array_equal(t.adj[:, 0], t.adj[:, 1])  # +x and -x reach the same switch
    assert isinstance(t.to_networkx(), nx.MultiGraph)


@pytest.mark.parametrize("x,y,bad", [(1, 4, "x=1"), (4, 0, "y=0"), (2.5, 3, "x=2.5")])
def test_torus_rejects_small_rings(x, y, bad):
    with pytest.raises(TopologyError, match=bad) as e:
        build_torus(x, y)
    assert "\n" not in str(e.value) and "expected" in str(e.value)


def _torus_dist(x, y):
    n = x * y
    i, j = np.arange(n) % x, np.arange(n) // x
    dx = (i[None, :] - i[:, None]) % x
    dy = (j[None, :] - j[:, None]) % y
    return np.minimum(dx, x - dx) + np.minimum(dy, y - dy)


def _dor_paths(t, next_port, vc_inc):
    """Every path as a list of channels ``(switch, port, vc)``, walking the tables."""
    n = t.n_switches
    paths = {}
    for s in range(n):
        for d in range(n):
            u, vc, path = s, 0, []
            while u != d:
                p = int(next_port[u, d])
                path.append((u, p, vc))
                vc += int(vc_inc[u, p])
                u = int(t.adj[u, p])
                assert len(path) <= n
            paths[s, d] = path
    return paths


@pytest.mark.parametrize("x,y", TORI + [(2, 3), (6, 2)])
def test_dor_walk_is_minimal_and_x_before_y(x, y):
    t = build_torus(x, y)
    next_port, vc_inc = torus_dor_tables(t)
    n = x * y
    assert next_port.shape == (n, n) and next_port.dtype == np.int16
    assert vc_inc.shape == (n, 4) and vc_inc.dtype == np.uint8
    assert np.all(np.diag(next_port) == -1)
    assert np.all(next_port[~np.eye(n, dtype=bool)] >= 0)

    # Walk all pairs at once.
    src, dst = np.divmod(np.arange(n * n), n)
    cur, hops = src.copy(), np.zeros(n * n, int)
    seen_y = np.zeros(n * n, bool)
    x_dir = np.full(n * n, -1)
    y_dir = np.full(n * n, -1)
    for _ in range(x + y):
        p = next_port[cur, dst].astype(int)
        moving = p >= 0
        is_x = moving & (p < 2)
        is_y = moving & (p >= 2)
        assert not np.any(is_x & seen_y), "an X hop after a Y hop"
        # A dimension is travelled in one direction only.
        assert not np.any(is_x & (x_dir >= 0) & (x_dir != p))
        assert not np.any(is_y & (y_dir >= 0) & (y_dir != p))
        x_dir = np.where(is_x, p, x_dir)
        y_dir = np.where(is_y, p, y_dir)
        seen_y |= is_y
        cur = np.where(moving, t.adj[cur, np.maximum(p, 0)], cur)
        hops += moving
    assert np.array_equal(cur, dst)
    assert np.array_equal(hops.reshape(n, n), _torus_dist(x, y))


def test_dor_ties_go_positive():
    t = build_torus(4, 6)
    next_port, _ = torus_dor_tables(t)
    assert next_port[0, 2] == 0  # (0,0) -> (2,0): half the X ring, +x
    assert next_port[0, 3 * 4] == 2  # (0,0) -> (0,3): half the Y ring, +y
    assert next_port[0, 3] == 1  # (0,0) -> (3,0): one hop -x
    assert next_port[0, 5 * 4] == 3  # (0,0) -> (0,5): one hop -y


def test_dor_dateline_ports():
    t = build_torus(5, 3)
    _, vc_inc = torus_dor_tables(t)
    i, j = t.labels[:, 0], t.labels[:, 1]
    expect = np.stack([i == 4, i == 0, j == 2, j == 0], 1).astype(np.uint8)
    assert np.array_equal(vc_inc, expect)
    # A dateline port is exactly a port whose link wraps around.
    ni, nj = i[t.adj], j[t.adj]
    wraps = np.stack([ni[:, 0] < i, ni[:, 1] > i, nj[:, 2] < j, nj[:, 3] > j], 1)
    assert np.array_equal(vc_inc.astype(bool), wraps)


def _cdg(paths, single_vc=False):
    g = nx.DiGraph()
    for path in paths.values():
        ch = [(u, p, 0 if single_vc else vc) for u, p, vc in path]
        g.add_nodes_from(ch)
        g.add_edges_from(zip(ch, ch[1:]))
    return g


@pytest.mark.parametrize("x,y", TORI)
def test_dor_dateline_cdg_acyclic_and_needs_vcs(x, y):
    t = build_torus(x, y)
    next_port, vc_inc = torus_dor_tables(t)
    paths = _dor_paths(t, next_port, vc_inc)
    assert max(vc for path in paths.values() for _, _, vc in path) <= 2
    assert nx.is_directed_acyclic_graph(_cdg(paths))
    with pytest.raises(nx.NetworkXNoCycle):
        nx.find_cycle(_cdg(paths))
    assert not nx.is_directed_acyclic_graph(_cdg(paths, single_vc=True))


def test_dor_rejects_other_kinds():
    with pytest.raises(TopologyError, match="torus"):
        torus_dor_tables(build_dsn(16))


# ---------------------------------------------------------------------------------------------
# DSN-x
# ---------------------------------------------------------------------------------------------
def _shortcuts(t):
    # A node of level <= x sends its shortcut from port index 2.
    src = np.flatnonzero(t.labels[:, 1] <= t.params["x"])
    return {(int(u), int(t.adj[u, 2])) for u in src}


def test_dsn_16_hand_worked():
    # n = 16: p = 4, levels 1,2,3,4,1,2,...; default x = 3.
    # level 1 -> level 2 at distance >= 8, level 2 -> 3 at >= 4, level 3 -> 4 at >= 2.
    t = build_dsn(16)
    assert t.params == {"n": 16, "x": 3}
    assert list(t.labels[:8, 1]) == [1, 2, 3, 4, 1, 2, 3, 4]
    assert _shortcuts(t) == {
        (0, 9), (4, 13), (8, 1), (12, 5),
        (1, 6), (5, 10), (9, 14), (13, 2),
        (2, 7), (6, 11), (10, 15), (14, 3),
    }
    assert len(t.links) == 16 + 12
    # Level-4 nodes have no outgoing shortcut: their incoming one takes index 2.
    assert t.radix == 4
    assert t.adj[3].tolist() == [2, 4, 14, -1]
    assert t.adj[1].tolist() == [0, 2, 6, 8]  # pred, succ, out, in
    assert t.adj[0].tolist() == [15, 1, 9, -1]  # level 1: nothing comes in


def test_dsn_10_hand_worked_ports():
    # n = 10: p = 4, levels 1,2,3,4,1,2,3,4,1,2; x = 3.
    # level 1 (0,4,8) -> level 2 at >= 5: 0->5, 4->9, 8->5 (dist 7: 3,4 are levels 4,1)
    # level 2 (1,5,9) -> level 3 at >= 2: 1->6, 5->2 (dist 7), 9->2 (dist 3)
    # level 3 (2,6)   -> level 4 at >= 1: 2->3, 6->7 (parallel to the ring links)
    t = build_dsn(10)
    expect = [
        [9, 1, 5],          # 0: pred, succ, out
        [0, 2, 6],          # 1
        [1, 3, 3, 5, 9],    # 2: out to 3, in from 5, 9
        [2, 4, 2],          # 3: level 4, in from 2
        [3, 5, 9],          # 4
        [4, 6, 2, 0, 8],    # 5: out to 2, in from 0, 8
        [5, 7, 7, 1],       # 6: out to 7, in from 1
        [6, 8, 6],          # 7: in from 6
        [7, 9, 5],          # 8
        [8, 0, 2, 4],       # 9: out to 2, in from 4
    ]
    for s, row in enumerate(expect):
        assert [int(v) for v in t.adj[s] if v >= 0] == row, s
    kinds = [[t.kind_names[k] for k in t.link_kind[s] if k >= 0] for s in range(10)]
    assert kinds[5] == ["ring", "ring", "shortcut", "shortcut", "shortcut"]
    assert isinstance(t.to_networkx(), nx.MultiGraph)


@pytest.mark.parametrize("n,x", [(4, None), (5, None), (16, 1), (37, None), (37, 2),
                                 (100, None), (1000, 5)])
def test_dsn_follows_definition(n, x):
    t = build_dsn(n, x)
    p = math.ceil(math.log2(n))
    xx = p - 1 if x is None else x
    assert t.params == {"n": n, "x": xx}
    level = np.arange(n) % p + 1
    assert np.array_equal(t.labels[:, 1], level)
    assert np.array_equal(t.adj[:, 0], (np.arange(n) - 1) % n)
    assert np.array_equal(t.adj[:, 1], (np.arange(n) + 1) % n)
    sc = t.kind_names.index("shortcut")
    n_short = 0
    for i in range(n):
        lv = level[i]
        ins = [int(t.adj[i, k]) for k in range(t.radix) if t.link_kind[i, k] == sc]
        if lv <= xx:
            j = ins.pop(0)
            assert t.link_kind[i, 2] == sc and t.adj[i, 2] == j
            dist = (j - i) % n
            assert level[j] == lv + 1 and dist >= n >> lv
            closer = (i + np.arange(n >> lv, dist)) % n
            assert not np.any(level[closer] == lv + 1)
            n_short += 1
        assert ins == sorted(ins)  # incoming shortcuts in increasing source id
        assert all(level[s] == lv - 1 for s in ins)
    assert n_short == int((level <= xx).sum())
    assert len(t.links) == n + n_short
    assert np.all((distance_matrix(t) < 255))


@pytest.mark.parametrize("n,x,bad", [(3, None, "n=3"), (16, 0, "x=0"), (16, 4, "x=4"),
                                     (1000, 10, "x=10")])
def test_dsn_validation(n, x, bad):
    with pytest.raises(TopologyError, match=bad):
        build_dsn(n, x)


def test_dsn_cabinets():
    t = build_dsn(40)
    assert np.array_equal(t.cabinet, np.arange(40) // 16)
    assert t.kind == "dsn"


# ---------------------------------------------------------------------------------------------
# DLN-x
# ---------------------------------------------------------------------------------------------
def _is_simple(t):
    l = t.links
    pairs = np.sort(l[:, [0, 2]], axis=1)
    return np.all(pairs[:, 0] != pairs[:, 1]) and len(np.unique(pairs, axis=0)) == len(pairs)


@pytest.mark.parametrize("n,x", [(4, 3), (16, 4), (64, 4), (64, 6), (128, 5), (1024, 4)])
def test_dln_even_n_regular_connected_simple(n, x):
    t = build_dln(n, x, seed=7)
    assert t.kind == "dln" and t.params == {"n": n, "x": x, "seed": 7}
    assert np.all(t.degree == x)
    assert _is_simple(t)
    assert nx.is_connected(t.to_networkx())
    assert np.array_equal(t.adj[:, 0], (np.arange(n) - 1) % n)
    assert np.array_equal(t.adj[:, 1], (np.arange(n) + 1) % n)
    ring = t.kind_names.index("ring")
    assert np.all(t.link_kind[:, :2] == ring) and np.all(t.link_kind[:, 2:] != ring)
    assert np.array_equal(t.cabinet, np.arange(n) // 16)


def test_dln_deterministic_per_seed():
    a, b, c = build_dln(200, 4, seed=3), build_dln(200, 4, seed=3), build_dln(200, 4, seed=4)
    assert np.array_equal(a.adj, b.adj) and np.array_equal(a.peer, b.peer)
    assert not np.array_equal(a.adj, c.adj)
    assert build_dln(50).params == {"n": 50, "x": 4, "seed": 1}


def test_dln_odd_n():
    # n odd, x - 2 even: the node left over by one round is matched twice by the next.
    t = build_dln(51, 6, seed=2)
    assert np.all(t.degree == 6) and _is_simple(t)
    # n * (x - 2) odd: exactly one node is one short.
    t = build_dln(51, 5, seed=2)
    assert sorted(np.bincount(t.degree).nonzero()[0]) == [4, 5]
    assert int((t.degree == 4).sum()) == 1
    assert _is_simple(t) and nx.is_connected(t.to_networkx())
    # The complete graph K5 is reachable through the retry loop.
    t = build_dln(5, 4, seed=0)
    assert np.all(t.degree == 4) and _is_simple(t)


def test_dln_ring_only_and_validation():
    t = build_dln(10, 2)
    assert len(t.links) == 10 and np.all(t.degree == 2)
    with pytest.raises(TopologyError, match="x=10"):
        build_dln(10, 10)
    with pytest.raises(TopologyError, match="n=3"):
        build_dln(3, 2)
    with pytest.raises(TopologyError, match="seed=-1"):
        build_dln(10, 4, seed=-1)
