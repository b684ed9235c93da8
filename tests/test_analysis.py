"""Tests of the distance and cable metrics."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from tablegen.analysis.layout import analyze, cabinet_layout, cable_lengths
from tablegen.topologies.baselines import build_dln, build_dsn, build_torus
from tablegen.topology import UNREACHABLE, TopologyBuilder, distance_matrix


def _nx_distances(t):
    g = nx.Graph(t.to_networkx())
    n = t.n_switches
    d = np.full((n, n), UNREACHABLE, dtype=np.uint8)
    for u, row in nx.all_pairs_shortest_path_length(g):
        for v, k in row.items():
            d[u, v] = k
    return d


def _two_rings(n1, n2, cabinet=None):
    """Two disjoint rings, as a topology with no path between them."""
    n = n1 + n2
    b = TopologyBuilder(n, 1, ("ring",))
    for base, m in ((0, n1), (n1, n2)):
        for k in range(m):
            b.put(base + k, 1, base + (k + 1) % m, 0, "ring")
    return b.build(kind="rings", params={}, label_names=("i",), labels=np.arange(n)[:, None],
                   cabinet=cabinet)


@pytest.mark.parametrize("topo", [
    build_torus(5, 3), build_torus(2, 2), build_torus(6, 4),
    build_dsn(10), build_dsn(37), build_dsn(130, 3),
    build_dln(30, 5, seed=9), build_dln(65, 4, seed=1),
    _two_rings(5, 7),
], ids=lambda t: t.name())
def test_distance_matrix_matches_networkx(topo):
    d = distance_matrix(topo)
    assert d.dtype == np.uint8 and d.shape == (topo.n_switches,) * 2
    assert np.array_equal(d, _nx_distances(topo))


def test_distance_matrix_word_boundaries():
    # 63, 64, 65 and 130 switches straddle the 64-bit words of the bit sets.
    for n in (63, 64, 65, 130):
        t = build_dln(n, 3, seed=n)
        assert np.array_equal(distance_matrix(t), _nx_distances(t))


def test_distance_matrix_overflow_raises():
    with pytest.raises(ValueError, match="uint8"):
        distance_matrix(build_dln(600, 2))  # a bare ring of 600: diameter 300


def test_analyze_torus_8x8():
    a = analyze(build_torus(8, 8, hosts=3))
    # Each ring of 8 contributes 0+1+2+3+4+3+2+1 = 16 per source over the 8 offsets.
    total = 64 * (8 * 16 + 8 * 16)
    assert a["switches"] == 64 and a["hosts"] == 192 and a["links"] == 128
    assert a["connected"] is True and a["diameter"] == 8
    assert a["aspl"] == pytest.approx(total / (64 * 63))
    assert a["aspl"] == pytest.approx(
        nx.average_shortest_path_length(build_torus(8, 8).to_networkx()))
    assert a["degree"] == {"min": 4, "max": 4, "mean": 4.0}


def test_analyze_two_cabinets_hand_computed():
    # 4x8 torus, 32 switches: cabinet 0 holds rows j = 0..3, cabinet 1 rows j = 4..7.
    # c = 2: rows = ceil(sqrt 2) = 2, per_row = 1, so the cabinets are one row pitch apart.
    # X links (32) stay in their cabinet; Y links cross between j = 3|4 and j = 7|0 (4 each).
    # 56 intra cables * 2 m + 8 inter cables * (2.1 m + 2 m) = 112 + 32.8 = 144.8 m.
    a = analyze(build_torus(4, 8))
    c = a["cables"]
    assert c["cabinets"] == 2 and c["rows"] == 2 and c["per_row"] == 1
    assert c["count"] == 64
    assert c["total_length_m"] == pytest.approx(144.8)
    assert c["average_length_m"] == pytest.approx(144.8 / 64)


def test_cable_lengths_five_cabinet_grid():
    # c = 5: rows = 3, per_row = 2 -> cabinets at (pos,row) 0:(0,0) 1:(1,0) 2:(0,1) 3:(1,1)
    # 4:(0,2).  Switch s sits in cabinet s (one per cabinet), plus switch 5 in cabinet 0.
    b = TopologyBuilder(6, 1, ("l",))
    b.add(0, 5, "l")  # same cabinet: 2 m
    b.add(0, 1, "l")  # 0.6 + 2
    b.add(1, 4, "l")  # 0.6 + 2*2.1 + 2 = 6.8
    b.add(2, 3, "l")  # 0.6 + 2
    b.add(0, 2, "l")  # 2.1 + 2
    t = b.build(kind="hand", params={}, label_names=("i",), labels=np.arange(6)[:, None],
                cabinet=[0, 1, 2, 3, 4, 0])
    rows, per_row, xy = cabinet_layout(5)
    assert (rows, per_row) == (3, 2)
    assert np.allclose(xy, [[0, 0], [0.6, 0], [0, 2.1], [0.6, 2.1], [0, 4.2]])
    lengths = dict(zip(map(tuple, t.links[:, [0, 2]].tolist()), cable_lengths(t)))
    assert lengths == pytest.approx({(0, 5): 2.0, (0, 1): 2.6, (1, 4): 6.8, (2, 3): 2.6,
                                     (0, 2): 4.1})
    a = analyze(t)
    assert a["cables"]["total_length_m"] == pytest.approx(2.0 + 2.6 + 6.8 + 2.6 + 4.1)
    assert a["cables"]["count"] == 5 and a["links"] == 5


@pytest.mark.parametrize("c,rows,per_row", [(1, 1, 1), (2, 2, 1), (3, 2, 2), (4, 2, 2),
                                            (10, 4, 3), (256, 16, 16), (257, 17, 16)])
def test_cabinet_layout_sizes(c, rows, per_row):
    r, y, xy = cabinet_layout(c)
    assert (r, y) == (rows, per_row) and xy.shape == (c, 2)


def test_analyze_disconnected():
    a = analyze(_two_rings(4, 6))
    assert a["connected"] is False
    assert a["diameter"] is None and a["aspl"] is None
    assert a["switches"] == 10 and a["links"] == 10


def test_analyze_single_cabinet_and_json():
    import json

    a = analyze(build_dsn(16))
    assert a["cables"]["cabinets"] == 1
    assert a["cables"]["average_length_m"] == pytest.approx(2.0)
    assert a["degree"]["min"] == 3 and a["degree"]["max"] == 4
    json.dumps(a)
