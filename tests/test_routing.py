import dataclasses

import numpy as np
import pytest

from tablegen.routing.build import build_tables, table_lengths
from tablegen.routing.ugal import candidates, ugal_kim, ugal_kim_vch, ugal_yebenes
from tablegen.tables import PathClass
from tablegen.topology import distance_matrix
from tablegen.verify import verify

from conftest import dragonfly, slimfly

RNG = np.random.default_rng(2)


def _triples(n, count):
    s, i, d = RNG.integers(0, n, size=(3, count))
    ok = (s != i) & (i != d) & (s != d)
    return zip(s[ok].tolist(), i[ok].tolist(), d[ok].tolist())


@pytest.mark.parametrize("q", [5, 7, 8, 9])
def test_min_tables_are_shortest_and_alternatives_complete(q):
    t = slimfly(q)
    ts = build_tables(t, "min")
    dist = distance_matrix(t)
    assert np.array_equal(table_lengths(t, ts.tables["min"]), dist.astype(np.int32))
    # every alternative bit is a neighbour one hop closer, and all such neighbours are bits
    n, r = t.adj.shape
    for u in range(0, n, 7):
        for d in range(n):
            if u == d:
                continue
            bits = {j for j in range(r) if int(ts.alternatives[u, d]) >> j & 1}
            closer = {j for j in range(r) if dist[t.adj[u, j], d] == dist[u, d] - 1}
            assert bits == closer and int(ts.tables["min"][u, d]) in bits


def test_slimfly_has_several_minimal_paths_beyond_q5():
    ts = build_tables(slimfly(7), "min")
    pop = np.vectorize(lambda x: bin(int(x)).count("1"))(ts.alternatives)
    assert pop.max() >= 2
    assert build_tables(slimfly(5), "min").alternatives.max() in (1, 2, 4, 8, 16, 32, 64)


@pytest.mark.parametrize("routing,vcs", [("min", 2), ("val", 4), ("val-nta", 4), ("val-3h", 3)])
def test_yebenes_vc_counts(routing, vcs):
    ts = build_tables(slimfly(5), routing)
    rep = verify(ts)
    assert rep.ok, rep.errors
    assert ts.num_vcs == vcs == rep.vcs_used


@pytest.mark.parametrize("q", [5, 7])
def test_val_3h_never_exceeds_three_hops(q):
    ts = build_tables(slimfly(q), "val-3h")
    c = ts.cls("val-3h")
    n = ts.topo.n_switches
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            firsts = {}
            for i in ts.candidates(s, d, c):
                firsts.setdefault(int(ts.tables["min"][s, i]), int(i))
            for i in firsts.values():
                p = ts.walk(s, d, c, i)
                assert len(p["ports"]) <= 3
                assert len(set(p["switches"])) == len(p["switches"])  # no turn-around either
                assert p["vcs"] == list(range(len(p["ports"])))


@pytest.mark.parametrize("q", [5, 7, 8])
def test_val_nta_never_revisits_a_switch_while_val_does(q):
    nta = build_tables(slimfly(q), "val-nta")
    ori = build_tables(slimfly(q), "val")
    revisits = 0
    for s, i, d in _triples(nta.topo.n_switches, 6000):
        p = nta.walk(s, d, "val-nta", i)
        assert len(set(p["switches"])) == len(p["switches"]), p
        assert len(p["ports"]) <= 4
        o = ori.walk(s, d, "val", i)
        revisits += len(set(o["switches"])) != len(o["switches"])
        # the nta path is the original path with its loop cut out
        if len(set(o["switches"])) == len(o["switches"]):
            assert p == o
    assert revisits > 0  # the turn-around problem exists and the cut removes it


def test_dragonfly_min_is_hierarchical_and_val_is_group_level(df72):
    ts = build_tables(df72, "min")
    t = df72
    glob = t.kind_names.index("global")
    for s in range(t.n_switches):
        for d in range(t.n_switches):
            p = ts.walk(s, d)
            kinds = [t.link_kind[u, t.port_index(u, port)] for u, port in zip(p["switches"], p["ports"])]
            assert kinds.count(glob) == (t.group[s] != t.group[d])
            assert len(kinds) <= 3
            # Kim et al. Fig. 7 for MIN alone: VC 0 up to and including the global hop, 1 after
            after = False
            for k, vc in zip(kinds, p["vcs"]):
                assert vc == int(after)
                after |= k == glob
    val = build_tables(df72, "val")
    assert [c.name for c in val.classes] == ["val-group"] and val.num_vcs == 3
    p = val.walk(0, 35, "val-group", 4)
    groups = [int(t.group[u]) for u in p["switches"]]
    assert 4 in groups and groups[-1] == 8 and len(p["ports"]) <= 5


def test_dragonfly_val_on_two_vcs_is_rejected_with_the_cycle(df72):
    rep = verify(build_tables(df72, "val", vcs=2))
    assert not rep.ok
    assert rep.cycle and any("cycle" in e for e in rep.errors)
    # the printed cycle is a real closed walk of channels on VC 1
    hops = rep.cycle
    for a, b in zip(hops, hops[1:] + hops[:1]):
        assert a["to"] == b["switch"]
    assert {h["vc"] for h in hops} == {1}
    assert verify(build_tables(df72, "val")).ok


def test_dragonfly_ugal_uses_kim_vc_levels(df72):
    ts = build_tables(df72, "ugal-l")
    assert [c.name for c in ts.classes] == ["min", "val-group"]
    assert ts.cls("min").vc_base == 1 and ts.num_vcs == 3
    assert verify(ts).ok


def test_ugal_rules():
    assert ugal_kim(3, 2, 2, 3) and not ugal_kim(4, 2, 2, 3)
    assert ugal_yebenes(10, 3, 4) and not ugal_yebenes(11, 3, 4)
    assert ugal_kim_vch(9, 1, 1, 9, 1, 1, same_port=True) is True
    assert ugal_kim_vch(9, 1, 1, 9, 1, 1, same_port=False) is False


def test_ugal_candidates_carry_hops_and_first_ports(sf5):
    ts = build_tables(sf5, "ugal-l")
    cands = candidates(ts, 0, 49)
    mins = [c for c in cands if c.cls == "min"]
    assert len(mins) == 1 and mins[0].hops == 2
    nonmin = [c for c in cands if c.cls == "val-3h"]
    assert nonmin and all(2 <= c.hops <= 3 for c in nonmin)
    assert {c.port for c in nonmin} >= {mins[0].port} or len({c.port for c in nonmin}) > 1


@pytest.mark.parametrize("routing", ["min", "val", "val-nta", "val-3h", "ugal-l"])
@pytest.mark.parametrize("topo", ["sf7", "sf8", "df", "df-g5"])
def test_every_table_set_verifies(routing, topo):
    t = {"sf7": lambda: slimfly(7), "sf8": lambda: slimfly(8), "df": lambda: dragonfly(),
         "df-g5": lambda: dragonfly(g=5)}[topo]()
    rep = verify(build_tables(t, routing))
    assert rep.ok, rep.errors
    assert not rep.cycle


def test_forcing_too_few_hop_vcs_is_caught(sf5):
    rep = verify(build_tables(sf5, "val", vcs=1))
    assert not rep.ok and rep.cycle


def test_path_class_is_serialisable():
    c = PathClass("val", table1="min", table0="min", target0="switch", inter="switch")
    assert PathClass(**c.__dict__) == c


def test_dsnf_routing_needs_two_vcs_and_two_suffice_for_n32():
    from tablegen.topologies.dsnf import build_dsnf

    t = build_dsnf(32)
    ts = build_tables(t, "dsnf")
    rep = verify(ts)
    assert rep.ok and rep.vcs_used == 2  # the dateline scheme
    one = verify(build_tables(t, "dsnf", vcs=1))
    assert not one.ok and one.cycle  # one VC has a cycle: 2 is the minimum
    assert ts.walk(24, 7)["switches"] == [24, 0, 1, 8, 7]


@pytest.mark.parametrize("n", [64, 100, 200, 512])
def test_dsnf_routing_verifies_within_theorem_1(n):
    from tablegen.topologies.dsnf import build_dsnf, p_for

    t = build_dsnf(n)
    rep = verify(build_tables(t, "dsnf"))
    p = p_for(n)
    k = -(-n // (p * 2**p))
    assert rep.ok and rep.classes["dsnf"]["max_hops"] <= 2 * (p + k - 1)
    assert rep.vcs_used <= 4


def test_compiled_val_histogram_counts_every_triple(sf5):
    rep = verify(build_tables(sf5, "val"))
    n = sf5.n_switches
    assert sum(rep.classes["val"]["hist"].values()) == n * (n - 1) * (n - 2)


def test_torus_dor_uses_three_dateline_vcs():
    from tablegen.topologies.baselines import build_torus

    rep = verify(build_tables(build_torus(8, 8), "min"))
    assert rep.ok and rep.vcs_used == 3 and rep.classes["min"]["max_hops"] == 8


def test_verify_checks_min_against_the_graph_not_the_tables(sf5):
    """A MIN table that takes a detour is rejected although it delivers, is loop-free and
    stays within a bound the tables themselves would give (Hoffman-Singleton: 0 -> m -> y ->
    d for a d at distance 2 from 0, m a neighbour of 0 off the shortest path)."""
    ts = build_tables(sf5, "min")
    assert verify(ts).ok
    t, adj = ts.tables["min"], sf5.adj
    dist = distance_matrix(sf5)
    d = int(np.flatnonzero(dist[0] == 2)[0])
    j = next(j for j in range(adj.shape[1]) if adj[0, j] >= 0 and j != t[0, d])
    t[0, d] = j
    ts.classes = [dataclasses.replace(ts.classes[0], max_hops=3)]
    rep = verify(ts)
    assert not rep.ok and len(rep.errors) == 1
    assert rep.errors[0].startswith(f"class min: 1 table paths are not shortest, e.g. 0 -> {d} "
                                    "takes 3 hops, the topology 2")
