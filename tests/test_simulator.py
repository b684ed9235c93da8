"""Flit-level simulator (issue 5, phase 1): compiled step, method, throughput, deadlock."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from simulator import engine as E
from simulator.cli import add_parsers
from simulator.config import SimConfig, load_experiment
from simulator.run import simulate, tables_for
from simulator.traffic import pattern
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from tablegen.verify import verify

DF = "dragonfly:p=2,a=4,h=2"          # 36 switches, 72 hosts, 9 groups
FAST = dict(warmup_cycles=500, warmup_max_periods=3, measure_cycles=1000,
            drain_max_cycles=1500)


@pytest.fixture(scope="module")
def df():
    return build(DF)


def _walks_agree(ts, pairs_inters):
    pk = E.Packed(ts)
    topo = ts.topo
    n = 0
    for ci, c in enumerate(ts.classes):
        for s, d, i in pairs_inters(ts, c):
            ref = ts.walk(s, d, c, i)
            got = pk.walk(s, d, ci, i)
            assert got["switches"] == ref["switches"], (c.name, s, d, i)
            assert got["vcs"] == ref["vcs"], (c.name, s, d, i)
            assert [topo.port_number(u, j) for u, j in zip(got["switches"], got["ports"])] \
                == ref["ports"]
            n += 1
    return n


def _all_triples(ts, c):
    n = ts.topo.n_switches
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            inters = ts.candidates(s, d, c) if c.inter != "none" else [-1]
            for i in inters:
                yield s, d, int(i)


@pytest.mark.parametrize("spec,routing,nonmin", [
    (DF, "min", None), (DF, "val", None), (DF, "ugal-l", None),
    ("slimfly:q=3", "val", None), ("slimfly:q=3", "val-nta", None),
    ("slimfly:q=3", "ugal-l", "val-3h"), ("dsnf:n=32", "dsnf", None),
    ("torus:x=4,y=4", "min", None),
])
def test_compiled_step_agrees_with_tableset(spec, routing, nonmin):
    """step_c (the compiled twin of TableSet.step) walks exactly TableSet.walk's switches,
    ports and VCs for every (src, dst, intermediate) of small fabrics."""
    ts = build_tables(build(spec), routing, nonmin=nonmin)
    assert _walks_agree(ts, _all_triples) > 100


def test_compiled_step_header_state():
    """Hop by hop, step_c returns the same (port, vc, header) as TableSet.step."""
    ts = build_tables(build("slimfly:q=3"), "val-nta")
    pk = E.Packed(ts)
    c = ts.classes[0]
    n = ts.topo.n_switches
    for s in range(n):
        for d in range(0, n, 3):
            for i in ts.candidates(s, d, c)[::4] if s != d else []:
                h = ts.start(s, d, c, int(i))
                u = s
                while True:
                    j, vc, h2 = ts.step(u, h, c)
                    got = E.step_c(u, h.dst, h.phase, h.inter, h.vc, 0, *pk.step_args())
                    assert got == ((j if j >= 0 else E.DELIVER), vc, h2.phase, h2.vc)
                    if j < 0:
                        break
                    u, h = int(ts.topo.adj[u, j]), h2


def test_val3h_intermediates_match_candidates():
    ts = build_tables(build("slimfly:q=5"), "val-3h")
    pk = E.Packed(ts)
    c = ts.classes[0]
    E.seed_rng(3)
    for s, d in [(0, 7), (3, 40), (12, 13), (49, 1)]:
        got = {E.sample_inter(s, d, E.INTER_3H, 50, 50, pk.group, pk.adj, pk.T[pk.cls_t0[0]],
                              pk.bad3h) for _ in range(3000)}
        assert got == set(ts.candidates(s, d, c).tolist())


def test_conservation_and_reproducibility(df):
    ts, over = tables_for(df, "ugal-l")
    cfg = SimConfig(speedup=2, **FAST, **over)
    r = simulate(ts, cfg, "uniform", 0.5, seed=7)
    assert r["status"] == "ok" and r["drained"] and not r["saturated"]
    assert r["labelled"] > 10000 and r["delivered"] == r["labelled"]
    assert abs(r["accepted"] - 0.5) < 0.03
    assert json.loads(json.dumps(r)) == r                      # serialisable
    assert simulate(ts, cfg, "uniform", 0.5, seed=7) == r      # reproducible
    assert simulate(ts, cfg, "uniform", 0.5, seed=8) != r


def _mean_table_hops(ts, lo, hi):
    """Mean switch hops of MIN packets under a pattern, from the tables (independent of the
    simulator): every host pair weighted by the probability the pattern picks it."""
    topo = ts.topo
    sw = np.repeat(np.arange(topo.n_switches), topo.hosts)
    L = np.zeros((topo.n_switches, topo.n_switches))
    for s in range(topo.n_switches):
        for d in range(topo.n_switches):
            L[s, d] = len(ts.walk(s, d)["ports"]) if s != d else 0
    tot = 0.0
    for h in range(topo.n_hosts):
        dsts = np.array([x for x in range(lo[h], hi[h]) if x != h or hi[h] - lo[h] == 1])
        tot += L[sw[h], sw[dsts]].mean()
    return tot / topo.n_hosts


def test_zero_load_latency(df):
    """latency = 2 * terminal + (hops + 1) * router_delay + hops * channel + (size - 1) at a
    near-zero load, with the hop count computed from the tables."""
    ts, _ = tables_for(df, "min")
    cfg = SimConfig(router_delay=2, channel_latency=3, terminal_latency=1, packet_size=4,
                    buffer_depth=16, warmup_cycles=500, warmup_max_periods=1,
                    measure_cycles=30000)
    r = simulate(ts, cfg, "uniform", 0.004, seed=2)
    lo, hi = pattern(df, "uniform")
    H = _mean_table_hops(ts, lo, hi)
    expect = 2 * 1 + (H + 1) * 2 + H * 3 + (4 - 1)
    assert r["delivered"] > 1000
    assert r["hops_avg"] == pytest.approx(H, rel=0.03)
    assert r["latency_avg"] == pytest.approx(expect, rel=0.01)
    assert r["latency_p50"] in {2 + (k + 1) * 2 + k * 3 + 3 for k in range(4)}


def _channel_bound(ts, lo, hi):
    """1 / (max expected channel load per unit injection), by walking the tables; Valiant
    classes average over their intermediates."""
    topo = ts.topo
    n = topo.n_switches
    c = ts.classes[-1]
    load = np.zeros(topo.adj.shape)
    sw = np.repeat(np.arange(n), topo.hosts)
    pair = np.zeros((n, n))
    for h in range(topo.n_hosts):
        dsts = [x for x in range(lo[h], hi[h]) if x != h or hi[h] - lo[h] == 1]
        for x in dsts:
            pair[sw[h], sw[x]] += 1 / len(dsts)
    for s, d in zip(*np.nonzero(pair)):
        if s == d:
            continue
        inters = ts.candidates(s, d, c) if c.inter != "none" else [-1]
        for i in inters:
            p = ts.walk(int(s), int(d), c, int(i))
            for u, port in zip(p["switches"], p["ports"]):
                load[u, topo.port_index(u, port)] += pair[s, d] / len(inters)
    return 1 / load.max()


def test_min_and_val_uniform_throughput(df):
    """Uniform random on the small Dragonfly: MIN with speedup 2 reaches its analytic bound
    (here the injection bandwidth) within 6 %; without speedup head-of-line blocking holds it
    below 0.75 (BookSim's ~0.70); VAL reaches about half, within 12 % of its bound."""
    lo, hi = pattern(df, "uniform")
    mn, _ = tables_for(df, "min")
    val, _ = tables_for(df, "val")
    b_min = min(1.0, _channel_bound(mn, lo, hi))
    b_val = min(1.0, _channel_bound(val, lo, hi))
    assert b_min > 0.99 and 0.5 < b_val < 0.6
    r2 = simulate(mn, SimConfig(speedup=2, **FAST), "uniform", 1.0, seed=1)
    r1 = simulate(mn, SimConfig(speedup=1, **FAST), "uniform", 1.0, seed=1)
    rv = simulate(val, SimConfig(speedup=2, **FAST), "uniform", 1.0, seed=1)
    assert r2["accepted"] >= 0.94 * b_min
    assert r1["accepted"] < 0.75 and r1["saturated"]
    assert rv["accepted"] == pytest.approx(b_val, rel=0.12)
    assert rv["nonmin_share"] == 1.0


def test_min_worst_case_is_one_over_ah(df):
    """Dragonfly worst case (group i -> group i+1): MIN saturates at 1/(a*h) = 1/8 (±0.01)."""
    ts, _ = tables_for(df, "min")
    r = simulate(ts, SimConfig(speedup=2, **FAST), "worst-case", 0.3, seed=1)
    assert r["saturated"]
    assert r["accepted"] == pytest.approx(1 / 8, abs=0.01)


def test_ugal_worst_case(df):
    """UGAL-L and UGAL-G route most packets non-minimally under worst-case traffic and carry
    loads far above MIN's 1/8; under uniform low load Kim's rule (q*H, no threshold: one flit
    in the minimal queue against an empty non-minimal one sends a packet non-minimally) stays
    mostly minimal at MIN's latency, and Yébenes' rule with its threshold stays minimal."""
    mn = simulate(tables_for(df, "min")[0], SimConfig(speedup=2, **FAST), "uniform", 0.1, 1)
    for name in ("ugal-l", "ugal-g"):
        ts, over = tables_for(df, name)
        r = simulate(ts, SimConfig(speedup=2, **FAST, **over), "worst-case", 0.4, seed=1)
        assert not r["saturated"] and r["nonmin_share"] > 0.5, name
        u = simulate(ts, SimConfig(speedup=2, **FAST, **over), "uniform", 0.1, seed=1)
        assert u["nonmin_share"] < 0.3 and u["latency_avg"] < 1.2 * mn["latency_avg"], name
    ts, over = tables_for(df, "ugal-l")
    y = simulate(ts, SimConfig(speedup=2, ugal_rule="yebenes", **FAST, **over), "uniform", 0.1,
                 seed=1)
    assert y["nonmin_share"] < 0.01


def test_deadlock_detected_with_too_few_vcs(df):
    ts = build_tables(df, "val", vcs=2)
    assert not verify(ts).ok                       # the CDG has a cycle on VC 1
    cfg = SimConfig(buffer_depth=4, speedup=2, deadlock_cycles=300, **{
        k: v for k, v in FAST.items() if k != "drain_max_cycles"})
    r = simulate(ts, cfg, "uniform", 1.0, seed=1)
    assert r["status"] == "deadlock" and r["saturated"]
    assert r["deadlock"]["vc_scheme"] == "global" and r["deadlock"]["num_vcs"] == 2
    assert "VC scheme" in r["deadlock"]["message"]
    assert r["cycles"] < 500 * 3 + 1000 + 300 + 10
    ok = simulate(build_tables(df, "val"), cfg, "uniform", 1.0, seed=1)
    assert ok["status"] == "ok" and ok["deadlock"] is None


def test_traffic_patterns(df):
    topo = build("dsnf:n=32")
    for name in ("transpose", "bitrev", "bitcomp", "shuffle", "shift", "randperm"):
        lo, hi = pattern(topo, name, seed=3)
        assert sorted(lo) == list(range(32)) and (hi == lo + 1).all(), name
    lo, hi = pattern(topo, "transpose")
    assert lo[0b00011] == 0b01100 and lo[0b10000] == 0b00010
    lo, hi = pattern(df, "worst-case")
    assert lo[0] == 8 and hi[0] == 16 and lo[71] == 0 and hi[71] == 8
    sf = build("slimfly:q=5")
    from tablegen.topology import distance_matrix

    lo, _ = pattern(sf, "adversarial")
    p = int(sf.hosts[0])
    assert (distance_matrix(sf)[np.arange(sf.n_hosts) // p, lo // p] == 2).all()
    assert sorted(lo) == list(range(sf.n_hosts))


def test_config_files_and_cli(tmp_path, capsys):
    (tmp_path / "c.toml").write_text("speedup = 2\nbuffer_depth = 8\nmeasure_cycles = 500\n"
                                     "warmup_cycles = 300\nwarmup_max_periods = 1\n")
    cfg = SimConfig.load(tmp_path / "c.toml")
    assert cfg.speedup == 2 and cfg.buffer_depth == 8
    (tmp_path / "c.json").write_text(json.dumps(cfg.to_dict()))
    assert SimConfig.load(tmp_path / "c.json") == cfg
    with pytest.raises(ValueError):
        SimConfig.from_dict({"bufer_depth": 3})
    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["simulate", DF, "--routing", "ugal-g", "--traffic", "worst-case",
                       "--load", "0.2", "--config", str(tmp_path / "c.toml"), "--seed", "4",
                       "--json"])
    assert a.func(a) == 0
    r = json.loads(capsys.readouterr().out)
    assert {"offered", "accepted", "latency_avg", "saturated"} <= r.keys()
    assert r["routing"].startswith("ugal-g") and r["seed"] == 4
    a = ap.parse_args(["sweep", DF, "-r", "min", "val", "-t", "uniform", "--loads", "0.1,0.3",
                       "-c", str(tmp_path / "c.toml"), "-j", "1", "-q",
                       "-o", str(tmp_path / "sw"), "--json"])
    assert a.func(a) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["points"]) == 4
    assert (tmp_path / "sw.png").stat().st_size > 1000
    assert len(json.loads((tmp_path / "sw.json").read_text())["points"]) == 4


def test_experiment_files_load():
    from pathlib import Path

    files = sorted(Path(__file__).resolve().parents[1].glob("simulator/experiments/*.toml"))
    assert len(files) >= 5
    for f in files:
        exp, cfg = load_experiment(f)
        assert {"spec", "routings", "traffic", "loads"} <= exp.keys(), f
        build(exp["spec"])
        pattern(build(exp["spec"]), exp["traffic"])


# ---------------------------------------------------------------------------------------------
# analytic throughput bound (simulator/bound.py)
# ---------------------------------------------------------------------------------------------
from simulator.bound import throughput_bound  # noqa: E402


@pytest.mark.parametrize("spec,routing,traffic", [
    (DF, "val", "worst-case"), (DF, "ugal-l", "uniform"), ("slimfly:q=3", "val-3h", "uniform"),
    ("slimfly:q=3", "val-nta", "randperm"), ("dsnf:n=32", "dsnf", "transpose"),
    ("torus:x=4,y=4", "val", "bitrev"),
])
def test_bound_matches_python_walks(spec, routing, traffic):
    """The compiled bound equals a pure-Python one over TableSet.walk and
    TableSet.candidates (every class)."""
    topo = build(spec)
    ts, _ = tables_for(topo, routing)
    lo, hi = pattern(topo, traffic, seed=1)
    b = throughput_bound(ts, traffic, seed=1)
    for c in ts.classes:
        sub = type(ts)(**{**ts.__dict__, "classes": [c]}) if len(ts.classes) > 1 else ts
        ref = _channel_bound(sub, lo, hi)
        assert b["classes"][c.name]["bound_uncapped"] == pytest.approx(ref, rel=1e-9), c.name


def test_bound_hand_computed():
    """Hand-computed values: Dragonfly p=h=2, a=4 MIN worst case: the one global channel
    between groups i and i+1 carries the a*p = 8 hosts of group i: 1/8 (local channels 4).
    4x4 torus, DOR (X then Y, ties positive), uniform over the 15 other hosts: the X+ channel
    of a ring carries, per source, 4 destinations at +1 (1 hop) and 4 at +2 (2 hops), and by
    symmetry each X+ channel (4+8)/15 = 0.8; X- 4/15; the bound is capped at 1 (injection).
    Transpose on the 4x4 torus: every X+ ring channel carries 2 flows: 1/2."""
    b = throughput_bound(tables_for(build(DF), "min")[0], "worst-case")
    m = b["classes"]["min"]
    assert b["bound"] == pytest.approx(1 / 8) and m["max_load"] == pytest.approx(8)
    assert m["by_kind"]["global"]["max_load"] == pytest.approx(8)
    assert m["by_kind"]["local"]["max_load"] == pytest.approx(4)
    assert m["bottleneck"]["kind"] == "global" and m["limited_by"] == "channel"
    t = throughput_bound(tables_for(build("torus:x=4,y=4"), "min")[0], "uniform")
    m = t["classes"]["min"]
    assert m["max_load"] == pytest.approx(12 / 15) and t["bound"] == 1.0
    assert m["bound_uncapped"] == pytest.approx(15 / 12) and m["limited_by"] == "injection"
    assert m["by_kind"]["x"]["max_load"] == pytest.approx(0.8)
    assert m["by_kind"]["y"]["max_load"] == pytest.approx(0.8)
    assert m["avg_load"] == pytest.approx((12 + 4) / 15 / 2)
    assert m["hops_avg"] == pytest.approx(2 * (4 * 1 + 4 * 2 + 4 * 1) / 15)   # per dimension
    tr = throughput_bound(tables_for(build("torus:x=4,y=4"), "min")[0], "transpose")
    assert tr["bound"] == pytest.approx(0.5)
    # UGAL: each class, and the best fixed split
    u = throughput_bound(tables_for(build(DF), "ugal-l")[0], "worst-case")
    assert u["bound"] is None and set(u["classes"]) == {"min", "val-group"}
    assert u["classes"]["min"]["bound"] == pytest.approx(1 / 8)
    assert u["mix"]["bound"] >= u["classes"]["val-group"]["bound"]
    assert json.loads(json.dumps(u)) == u


# (spec, routing, traffic): uniform and an adversarial pattern on small fabrics
CROSS = [(DF, "min", "worst-case"), (DF, "val", "uniform"), (DF, "val", "worst-case"),
         ("slimfly:q=5", "min", "adversarial"), ("slimfly:q=5", "val-3h", "adversarial"),
         ("slimfly:q=5", "min", "adversarial:A=13,B=12"), ("torus:x=4,y=4", "min", "transpose")]


@pytest.mark.parametrize("spec,routing,traffic", CROSS)
def test_simulated_saturation_agrees_with_bound(spec, routing, traffic):
    """The built-in cross-check: with speedup 4 (routers not the bottleneck) the simulated
    saturation throughput of MIN and VAL lies within 10 % of the analytic bound:
    at 0.9 x bound the run is not saturated and accepts the offered load (within 3 %), at
    1.1 x bound it is saturated."""
    ts, _ = tables_for(build(spec), routing)
    b = throughput_bound(ts, traffic)["bound"]
    assert b < 0.9
    cfg = SimConfig(speedup=4, **FAST)
    below = simulate(ts, cfg, traffic, 0.9 * b, seed=1)
    above = simulate(ts, cfg, traffic, 1.1 * b, seed=1)
    assert not below["saturated"] and below["accepted"] == pytest.approx(0.9 * b, rel=0.03)
    assert above["saturated"]


def test_simulated_uniform_min_reaches_injection_bound(df):
    """Where the bound is the injection bandwidth (MIN, uniform): >= 0.95 of it with speedup 4."""
    ts, _ = tables_for(df, "min")
    assert throughput_bound(ts, "uniform")["bound"] == 1.0
    r = simulate(ts, SimConfig(speedup=4, **FAST), "uniform", 1.0, seed=1)
    assert r["accepted"] >= 0.95


def test_slimfly_adversarial_min_one_over_p():
    """Slim Fly q=5 (p=4) with an Algorithm-2 permutation whose 2-hop flows share no channel
    (A=13, B=12): MIN's bound is 1/p and the simulation saturates there (±10 %, speedup 2 as
    the paper's experiments); Table III-style A, B on our numbering (q=5: 2, 3; also q=7's
    4, 3) make two flows share a channel: 1/(2p).  VAL_3h (bound 0.343) and UGAL-L_3h carry
    1.2/p unsaturated."""
    topo = build("slimfly:q=5")
    p = int(topo.hosts[0])
    mn, _ = tables_for(topo, "min")
    adv = "adversarial:A=13,B=12"
    assert throughput_bound(mn, adv)["bound"] == pytest.approx(1 / p)
    assert throughput_bound(mn, "adversarial")["bound"] == pytest.approx(1 / (2 * p))
    cfg = SimConfig(speedup=2, **FAST)
    assert not simulate(mn, cfg, adv, 0.9 / p, seed=1)["saturated"]
    r = simulate(mn, cfg, adv, 1.1 / p, seed=1)
    assert r["saturated"] and r["accepted"] == pytest.approx(1 / p, rel=0.1)
    for name in ("val-3h", "ugal-l-3h"):
        ts, over = tables_for(topo, name)
        x = simulate(ts, SimConfig(speedup=2, **FAST, **over), adv, 1.2 / p, seed=1)
        # at least 1 - (1/p) / (1.2/p) = 1/6 of the packets must leave the minimal paths
        assert not x["saturated"] and x["nonmin_share"] > 0.15, name


def test_val_about_half_of_min_uniform_slimfly():
    """Uniform random on Slim Fly q=5: VAL's bound and simulated saturation are about half of
    MIN's (bounds: MIN 1.0 (capped), VAL 0.48; simulated at load 1, speedup 4)."""
    topo = build("slimfly:q=5")
    cfg = SimConfig(speedup=4, **FAST)
    acc = {}
    for name in ("min", "val"):
        ts, _ = tables_for(topo, name)
        acc[name] = simulate(ts, cfg, "uniform", 1.0, seed=1)["accepted"]
        b = throughput_bound(ts, "uniform")["bound"]
        assert acc[name] == pytest.approx(b, rel=0.1), name
    assert 0.4 < acc["val"] / acc["min"] < 0.6


def test_islip_allocator(df):
    """iSLIP: the same zero-load latency and conservation as the round-robin allocator, and
    with speedup 1 and several VCs (VAL, 3 VCs) more throughput: every input requests every
    output it has a ready head for, so fewer outputs idle (3 iterations: +10 % or more)."""
    ts, _ = tables_for(df, "val")
    rr = simulate(ts, SimConfig(**FAST), "uniform", 1.0, seed=1)
    i3 = simulate(ts, SimConfig(allocator="islip", islip_iterations=3, **FAST), "uniform", 1.0,
                  seed=1)
    assert i3["accepted"] > 1.1 * rr["accepted"]
    mn, _ = tables_for(df, "min")
    a = simulate(mn, SimConfig(allocator="islip", **FAST), "uniform", 0.3, seed=2)
    b = simulate(mn, SimConfig(**FAST), "uniform", 0.3, seed=2)
    assert a["drained"] and a["delivered"] == a["labelled"] and not a["saturated"]
    assert a["latency_avg"] == pytest.approx(b["latency_avg"], rel=0.05)
    with pytest.raises(ValueError):
        SimConfig(allocator="wavefront")


@pytest.mark.parametrize("spec,traffic", [("slimfly:q=5", "uniform"), ("slimfly:q=7", "shift"),
                                          ("torus:x=4,y=4", "bitrev"), ("dsnf:n=32", "randperm")])
def test_bound_val_decomposition(spec, traffic):
    """Switch VAL (reach exit): the O(N^2 L) two-phase decomposition equals walking every
    (pair, intermediate)."""
    from simulator.bound import channel_load, demand

    topo = build(spec)
    ts, _ = tables_for(topo, "val")
    D, _ = demand(topo, traffic)
    a, ha = channel_load(ts, D, 0)
    b, hb = channel_load(ts, D, 0, decompose=False)
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12) and ha == pytest.approx(hb, rel=1e-9)


def test_bound_cli_helpers():
    """add_bound_args / cmd_bound: what `fabroute analyze SPEC --throughput-bound` runs."""
    from simulator.bound import cmd_bound
    from simulator.cli import add_bound_args

    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    add_bound_args(ap)
    a = ap.parse_args([DF, "--routing", "min", "--traffic", "worst-case"])
    assert cmd_bound(a)["bound"] == pytest.approx(1 / 8)
    a = ap.parse_args([DF, "-r", "ugal-g", "-t", "uniform", "--class", "val-group"])
    r = cmd_bound(a)
    assert set(r["classes"]) == {"val-group"} and r["bound"] == pytest.approx(0.5071, abs=1e-3)
    with pytest.raises(ValueError):
        cmd_bound(ap.parse_args([DF, "-r", "min", "--class", "val"]))


@pytest.mark.parametrize("name", ["ugal-g-bh", "ugal-g-b", "ugal-g-c"])
def test_ugal_g_readings_close_to_val(df, name):
    """Every named UGAL-G reading carries 0.9 x the VAL bound of the small Dragonfly's worst
    case (0.4375) unsaturated, at no more than VAL's latency (+10 %)."""
    b = throughput_bound(tables_for(df, "val")[0], "worst-case")["bound"]
    val = simulate(tables_for(df, "val")[0], SimConfig(speedup=2, **FAST), "worst-case",
                   0.9 * b, seed=1)
    ts, over = tables_for(df, name)
    assert over["ugal"] == "global" and over["ugal_g_reading"] == {
        "ugal-g-bh": "backlog-hops", "ugal-g-b": "backlog", "ugal-g-c": "credits-hops"}[name]
    r = simulate(ts, SimConfig(speedup=2, **FAST, **over), "worst-case", 0.9 * b, seed=1)
    # MIN carries at most 1/8: at least 1 - 0.125 / 0.394 = 68 % must go non-minimally
    assert not r["saturated"] and r["nonmin_share"] > 0.6
    assert r["latency_avg"] <= 1.1 * val["latency_avg"]


# -- wormhole flow control --------------------------------------------------------------------

def test_wormhole_equals_vct_for_single_flit_packets(df):
    """With one-flit packets the two flow controls are the same protocol: every result of the
    run (latencies, throughput, non-minimal share, channel use) must be identical."""
    for name in ("val", "ugal-l"):
        ts, over = tables_for(df, name)
        cfg = SimConfig(speedup=2, **FAST, **over)
        for load in (0.3, 0.9):
            a = simulate(ts, cfg, "uniform", load, seed=3)
            b = simulate(ts, cfg.replace(flow_control="wormhole"), "uniform", load, seed=3)
            a.pop("config"), b.pop("config")
            assert a == b, (name, load)


@pytest.mark.parametrize("depth", [4, 8, 16])
def test_wormhole_zero_load_latency_and_short_buffers(df, depth):
    """Wormhole pipelines a packet's flits through the routers: at zero load it has the same
    latency as virtual cut-through once a VC's buffer covers the credit round trip
    (channel 3 + router 2 + credit 3 = 8 cycles), also with buffers shorter than a packet
    (which VCT refuses); a 4-flit buffer halves the rate a flit stream can flow at, so the
    packet arrives later.  Flits and packets are conserved."""
    ts, _ = tables_for(df, "min")
    size = 8
    cfg = SimConfig(router_delay=2, channel_latency=3, terminal_latency=1, packet_size=size,
                    buffer_depth=depth, flow_control="wormhole", warmup_cycles=500,
                    warmup_max_periods=1, measure_cycles=30000)
    r = simulate(ts, cfg, "uniform", 0.004, seed=2)
    lo, hi = pattern(df, "uniform")
    H = _mean_table_hops(ts, lo, hi)
    assert r["status"] == "ok" and r["drained"] and r["delivered"] == r["labelled"] > 1000
    assert r["flit_hops"] % size == 0
    zero = 2 + (H + 1) * 2 + H * 3 + size - 1
    if depth >= 8:
        assert r["latency_avg"] == pytest.approx(zero, rel=0.01)
        assert r["latency_p50"] in {2 + (k + 1) * 2 + k * 3 + size - 1 for k in range(4)}
    else:
        assert r["latency_avg"] > zero + 2
    with pytest.raises(ValueError, match="virtual cut-through needs a whole packet"):
        SimConfig(packet_size=size, buffer_depth=4)


def test_wormhole_blocking_costs_throughput(df):
    """Under load a blocked wormhole packet holds its VCs in several routers: with the same
    8-flit buffers as its 8-flit packets it accepts less than VCT near saturation, and with
    4-flit buffers less again; the tables' VCs keep it deadlock-free (Dally-Seitz: an acyclic
    CDG suffices for wormhole), while VAL on 2 VCs deadlocks."""
    ts, _ = tables_for(df, "val")
    base = SimConfig(packet_size=8, buffer_depth=8, speedup=2, **FAST)
    vct = simulate(ts, base, "uniform", 0.6, seed=1)
    wh8 = simulate(ts, base.replace(flow_control="wormhole"), "uniform", 0.6, seed=1)
    wh4 = simulate(ts, base.replace(flow_control="wormhole", buffer_depth=4), "uniform", 0.6,
                   seed=1)
    for r in (vct, wh8, wh4):
        assert r["status"] == "ok", r["status"]
    assert wh4["accepted"] < wh8["accepted"] < vct["accepted"]
    low = simulate(ts, base.replace(flow_control="wormhole", buffer_depth=4), "uniform", 0.1,
                   seed=1)
    assert not low["saturated"] and low["accepted"] == pytest.approx(0.1, rel=0.05)
    bad = build_tables(df, "val", vcs=2)
    cfg = base.replace(flow_control="wormhole", buffer_depth=4, deadlock_cycles=300,
                       drain_max_cycles=0)
    r = simulate(bad, cfg, "uniform", 1.0, seed=1)
    assert r["status"] == "deadlock" and "VC scheme" in r["deadlock"]["message"]
