"""The 3-level fat tree (tablegen.topologies.fattree) and its up*/down* MIN tables in one VC
(tablegen.routing.fattree): construction invariants, SPEC round trip, bad input, the proof,
the spread of the up ports and the simulator running it beside a Slim Fly."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from fabroute.cli import main
from simulator.bound import throughput_bound
from simulator.config import SimConfig
from simulator.run import simulate, tables_for
from tablegen.routing.build import build_tables, graph_min
from tablegen.routing.walk import data_destinations
from tablegen.topologies.fattree import build_fattree
from tablegen.topologies.spec import build
from tablegen.topology import distance_matrix
from tablegen.verify import verify


@pytest.mark.parametrize("k", [4, 6, 8])
def test_counts_degrees_hosts_and_diameter(k):
    t = build_fattree(k)
    h = k // 2
    level = t.labels[:, 0]
    assert t.n_switches == 5 * k * k // 4 and t.radix == k
    assert np.bincount(level).tolist() == [k * h, k * h, h * h]
    assert t.n_hosts == k ** 3 // 4
    assert np.all(t.hosts[level == 0] == h) and np.all(t.hosts[level > 0] == 0)
    assert np.all(t.degree[level == 0] == h) and np.all(t.degree[level > 0] == k)
    assert len(t.links) == k ** 3 // 2          # k^3/4 edge-aggregation + k^3/4 aggregation-core
    d = distance_matrix(t)
    edges = np.flatnonzero(level == 0)
    assert int(d[np.ix_(edges, edges)].max()) == 4          # edge to edge: up 2, down 2
    # every edge switch of a pod has every aggregation switch of its pod; aggregation i of
    # every pod has the k/2 cores of group i, on the documented slots
    nb_level = level[np.maximum(t.adj, 0)]
    for s in np.flatnonzero(level == 1):
        pod, i = t.labels[s, 1], t.labels[s, 2]
        assert t.labels[t.adj[s, :h], 1].tolist() == [pod] * h
        assert np.all(nb_level[s, :h] == 0) and np.all(nb_level[s, h:] == 2)
        assert t.labels[t.adj[s, h:], 1].tolist() == [i] * h
    # a core (i, j) reaches pod p's aggregation switch i on index p
    for s in np.flatnonzero(level == 2):
        assert t.labels[t.adj[s], 1].tolist() == list(range(k))
        assert set(t.labels[t.adj[s], 2].tolist()) == {t.labels[s, 1]}


def test_is_the_al_fares_graph():
    """k = 4 against an independent construction by names."""
    t = build_fattree(4)
    g = nx.Graph()
    for pod in range(4):
        for e in range(2):
            for a in range(2):
                g.add_edge(("e", pod, e), ("a", pod, a))
        for a in range(2):
            for j in range(2):
                g.add_edge(("a", pod, a), ("c", a, j))
    assert nx.is_isomorphic(t.to_networkx(), g)


def test_hosts_lowered_and_round_trip():
    t = build("fattree:k=8,hosts=3")
    assert t.name() == "fattree:k=8,hosts=3" and t.n_hosts == 8 * 4 * 3
    assert build("fattree:k=8").name() == "fattree:k=8"     # the default k/2 is not named
    for spec in ("fattree:k=8,hosts=3", "fattree:k=6", "fattree:k=4,fail=0-8"):
        t = build(spec)
        again = build(t.name())
        assert again.name() == t.name()
        assert np.array_equal(again.adj, t.adj) and np.array_equal(again.hosts, t.hosts)


@pytest.mark.parametrize("k", [4, 8])
def test_min_is_up_down_in_one_vc_and_proven(k):
    t = build_fattree(k)
    ts = build_tables(t, "min")
    assert ts.num_vcs == 1 and ts.vc_scheme == "updown" and not ts.vc_inc.any()
    rep = verify(ts)
    assert rep.ok and rep.vcs_used == 1 and rep.cdg["dependencies"] > 0, rep.errors
    assert rep.classes["min"]["max_hops"] == 4
    # every path toward an edge switch goes up, then down (levels rise, then fall)
    level = t.labels[:, 0]
    edges = np.flatnonzero(level == 0)
    for s in range(t.n_switches):
        for d in edges[::3]:
            if s == d:
                continue
            lv = [int(level[u]) for u in ts.walk(int(s), int(d))["switches"]]
            top = lv.index(max(lv))
            assert lv[:top + 1] == sorted(lv[:top + 1]) and lv[top:] == sorted(lv[top:])[::-1]


def test_hostless_destinations_are_routed_but_carry_no_data():
    """Toward an aggregation or core switch some shortest paths turn down, then up: with
    them the one-VC CDG is cyclic; they are still walked for delivery and minimality."""
    t = build_fattree(4)
    assert data_destinations(t).tolist() == (t.labels[:, 0] == 0).tolist()
    ts = build_tables(t, "min")
    everyone = type(t)(**{**t.__dict__, "hosts": np.ones_like(t.hosts), "memo": {}})
    everyone._links = None
    rep = verify(type(ts)(**{**ts.__dict__, "topo": everyone}))
    assert not rep.ok and rep.cycle                       # the down-up turns close a cycle
    assert verify(ts).ok
    # a fabric without hosts at all is checked as if every switch had them
    bare = build("torus:x=4,y=4,hosts=0")
    assert data_destinations(bare).all()


def test_up_ports_spread_by_source_and_destination():
    """Per destination switch alone, every packet from another pod would come down one
    cable into the destination (load k/2 times the fair share); the source-and-destination
    choice keeps every cable within one destination switch's traffic of the fair share:
    the bound is 1 - 1/hosts."""
    for k in (4, 8):
        t = build_fattree(k)
        ts = build_tables(t, "min")
        b = throughput_bound(ts, "uniform")["classes"]["min"]
        assert b["bound_uncapped"] == pytest.approx(1 - 1 / t.n_hosts)
        g, _ = graph_min(t, distance_matrix(t))
        by_dst = type(ts)(**{**ts.__dict__, "tables": {"min": g}})
        worse = throughput_bound(by_dst, "uniform")["classes"]["min"]["bound_uncapped"]
        assert worse < 0.6 * b["bound_uncapped"]


def test_valiant_uses_hop_vcs_and_verifies():
    ts = build_tables(build_fattree(4), "ugal-l")
    assert ts.vc_scheme == "hop" and ts.num_vcs == 8
    assert verify(ts).ok


def test_tables_cli_and_verify(tmp_path, capsys):
    out = tmp_path / "ft"
    assert main(["tables", "fattree:k=4", "--routing", "min", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--json"]) == 0
    assert '"num_vcs": 1' in capsys.readouterr().out


def test_simulator_runs_fat_tree_beside_slim_fly():
    """Fat tree k = 4 (16 hosts, MIN in 1 VC) and Slim Fly q = 3 (18 switches, MIN in 2 VCs)
    at the same offered load: both deliver it."""
    fast = dict(warmup_cycles=500, warmup_max_periods=3, measure_cycles=1000,
                drain_max_cycles=1500)
    for spec, vcs in (("fattree:k=4", 1), ("slimfly:q=3", 2)):
        ts, over = tables_for(build(spec), "min")
        assert ts.num_vcs == vcs
        r = simulate(ts, SimConfig(speedup=2, **fast, **over), "uniform", 0.4, seed=3)
        assert r["status"] == "ok" and r["drained"] and not r["saturated"], spec
        assert r["accepted"] == pytest.approx(0.4, abs=0.03), spec
        assert r["delivered"] == r["labelled"] > 1000
