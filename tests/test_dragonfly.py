import numpy as np
import pytest

from tablegen.errors import TopologyError
from tablegen.topologies.dragonfly import build_dragonfly, global_targets

from conftest import dragonfly


def test_paper_example_72_endpoints_radix_7(df72):
    t = df72
    assert (t.n_switches, t.n_hosts) == (36, 72)
    assert int(t.degree.max()) + t.params["p"] == 7
    assert (t.degree == 5).all()


def test_absolute_and_relative_arrangements():
    a, h = 4, 2
    g = a * h + 1
    ab = global_targets(a, h, g, "absolute")
    rel = global_targets(a, h, g, "relative")
    for G in range(g):
        assert ab[G] == [j if j < G else j + 1 for j in range(a * h)]
        assert rel[G] == [(G + j + 1) % g for j in range(a * h)]
    for arr in ("absolute", "relative"):
        t = dragonfly(arrangement=arr)
        pairs = {tuple(sorted((int(t.group[u]), int(t.group[v])))) for u, _, v, _ in t.links
                 if t.group[u] != t.group[v]}
        assert len(pairs) == g * (g - 1) // 2  # one global link per pair of groups


@pytest.mark.parametrize("g", [2, 3, 4, 5, 6, 7, 8])
def test_smaller_g_spreads_spare_ports(g):
    a, h = 4, 2
    t = build_dragonfly(2, a, h, g=g)
    counts = {}
    for u, _, v, _ in t.links:
        G, T = sorted((int(t.group[u]), int(t.group[v])))
        if G != T:
            counts[(G, T)] = counts.get((G, T), 0) + 1
    assert len(counts) == g * (g - 1) // 2
    assert min(counts.values()) >= (a * h + 1) // g
    assert max(counts.values()) - min(counts.values()) <= 1
    unused = int((t.adj < 0).sum())
    assert unused <= g  # at most one idle global port per group (odd spare count, odd g)


def test_bad_parameters():
    with pytest.raises(TopologyError, match="g=10; expected 2 <= g <= a\\*h\\+1 = 9"):
        build_dragonfly(2, 4, 2, g=10)
    with pytest.raises(TopologyError, match="arrangement"):
        build_dragonfly(2, 4, 2, arrangement="spiral")


def test_router_ids_and_ports(df72):
    t = df72
    a = 4
    assert np.array_equal(t.labels[:, 0] * a + t.labels[:, 1], np.arange(t.n_switches))
    for s in range(t.n_switches):
        kinds = [t.kind_names[k] for k in t.link_kind[s]]
        assert kinds == ["local"] * (a - 1) + ["global"] * 2
