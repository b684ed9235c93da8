"""``ugal-sdn`` in the simulator (simulator/sdn.py): the adaptive controller's estimator and
decision (tablegen/routing/adaptive.py) fed with the simulator's port counters."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

import simulator.sdn as sdn
from simulator.cli import add_parsers
from simulator.config import FLOAT_RANGES, INT_RANGES, SimConfig
from simulator.run import simulate, tables_for
from tablegen.errors import BadInput
from tablegen.routing.adaptive import PARAM_RANGES, AdaptiveParams
from tablegen.topologies.spec import build

DF = "dragonfly:p=2,a=4,h=2"          # 36 switches, 72 hosts, 9 groups; MIN worst case: 1/8
FAST = dict(speedup=2, warmup_cycles=500, warmup_max_periods=3, measure_cycles=1000,
            drain_max_cycles=1500, poll_cycles=100)


@pytest.fixture(scope="module")
def df():
    return build(DF)


def test_worst_case_shares_rise_and_beat_min(df):
    """Dragonfly worst case (group i -> i+1) at 0.4, three times MIN's 1/8: the controller
    starts all-minimal, its mean share rises within a few polls, and ugal-sdn carries far
    more than MIN (most packets non-minimal)."""
    mn = simulate(tables_for(df, "min")[0], SimConfig(**FAST), "worst-case", 0.4, seed=1)
    ts, over = tables_for(df, "ugal-sdn")
    r = simulate(ts, SimConfig(**FAST, **over), "worst-case", 0.4, seed=1)
    s = r["sdn"]
    assert r["routing"] == "ugal-sdn(val-group)" and s["keys"] == "group"
    assert s["poll_t"][:3] == [0, 100, 200] and s["decision_delay_cycles"] == 50
    assert s["share_mean"][0] == 0.0 and max(s["share_mean"][:5]) > 0.05
    assert mn["accepted"] == pytest.approx(1 / 8, abs=0.01)
    assert r["accepted"] > 2.5 * mn["accepted"] and r["nonmin_share"] > 0.5
    assert simulate(ts, SimConfig(**FAST, **over), "worst-case", 0.4, seed=1) == r, "pure"


@pytest.mark.parametrize("spec,routing,load", [(DF, "ugal-sdn", 0.3), (DF, "ugal-sdn", 0.6),
                                               ("slimfly:q=5", "ugal-sdn-3h", 0.4)])
def test_uniform_stays_near_min(spec, routing, load):
    """Uniform traffic loads every port alike: the shares stay (almost) minimal and ugal-sdn
    accepts what MIN accepts, at MIN's latency."""
    topo = build(spec)
    mn = simulate(tables_for(topo, "min")[0], SimConfig(**FAST), "uniform", load, seed=2)
    ts, over = tables_for(topo, routing)
    r = simulate(ts, SimConfig(**FAST, **over), "uniform", load, seed=2)
    assert r["nonmin_share"] < 0.05 and max(r["sdn"]["share_mean"]) < 0.05
    assert r["accepted"] == pytest.approx(mn["accepted"], rel=0.03)
    assert r["latency_avg"] < 1.1 * mn["latency_avg"]


def test_decision_delay_is_honoured(df, monkeypatch):
    """The shares in effect at every engine chunk are those of the last poll at least
    ``decision_delay_cycles`` old (all minimal before), and no chunk runs across the time a
    decision takes effect — with a delay longer than the poll period (decisions queue)."""
    decided, chunks = [], []

    class Recording(sdn.SdnLoop):
        def __init__(self, ts, cfg, st):
            super().__init__(ts, cfg, st)
            run = st.run

            def recorded(t, t_end, *a):
                chunks.append((t, t_end, st.sdn_share.copy()))
                return run(t, t_end, *a)
            st.run = recorded

        def _poll(self, t):
            super()._poll(t)
            decided.append((t, self.ugal.share.copy()))

    monkeypatch.setattr(sdn, "SdnLoop", Recording)
    ts, over = tables_for(df, "ugal-sdn")
    delay = 250
    simulate(ts, SimConfig(**{**FAST, "decision_delay_cycles": delay}, **over), "worst-case",
             0.4, seed=1)
    installs = [t + delay for t, _ in decided]
    assert len(decided) > 20 and any(s.any() for _, s in decided)
    for t, t_end, active in chunks:
        due = [s for p, s in decided if p + delay <= t]
        assert np.array_equal(active, due[-1] if due else np.zeros_like(active)), t
        assert not any(t < i < t_end for i in installs), (t, t_end)


def test_counters_without_wait_see_only_the_gateways(df):
    """``sdn_counters = "tx"``: a lossless fabric's sent flits alone do not show the
    backpressure on the local hop toward a saturated global channel, so only the switches
    that own the global channel (one per group and destination group) move."""
    ts, over = tables_for(df, "ugal-sdn")
    r = simulate(ts, SimConfig(**FAST, **over, sdn_counters="tx"), "worst-case", 0.4, seed=1)
    w = simulate(ts, SimConfig(**FAST, **over), "worst-case", 0.4, seed=1)
    assert max(r["sdn"]["share_mean"]) < max(w["sdn"]["share_mean"]) / 2
    assert r["accepted"] < w["accepted"]


def test_config_keys_are_the_controller_knobs_and_are_checked(capsys):
    """The sdn_* defaults and ranges are AdaptiveParams' and PARAM_RANGES'; a value out of
    range is a one-line error, and exit code 2 from the command line."""
    d, p = SimConfig(), AdaptiveParams()
    assert (d.split_bits, d.sdn_alpha, d.sdn_hysteresis, d.sdn_floor, d.sdn_gain) == (
        p.split_bits, p.alpha, p.hysteresis, p.floor, p.gain)
    assert INT_RANGES["split_bits"] == PARAM_RANGES["split_bits"]
    assert tuple(map(float, INT_RANGES["sdn_buffer"])) == PARAM_RANGES["buffer"]
    for k in ("alpha", "hysteresis", "floor", "gain"):
        assert FLOAT_RANGES[f"sdn_{k}"] == PARAM_RANGES[k]
    assert d.decision_delay == 500 and d.replace(decision_delay_cycles=0).decision_delay == 0
    for bad in ({"poll_cycles": 5}, {"poll_cycles": 10.0}, {"split_bits": 7},
                {"decision_delay_cycles": -1}, {"sdn_alpha": 0}, {"sdn_gain": 11},
                {"sdn_buffer": 0}, {"sdn_counters": "drops"}, {"ugal": "sdn2"}):
        with pytest.raises(ValueError) as e:
            SimConfig(**bad)
        msg = str(e.value)
        assert len(msg.splitlines()) == 1 and next(iter(bad)) in msg, msg
    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["simulate", DF, "-r", "ugal-sdn", "--load", "0.1", "--set",
                       "split_bits=9"])
    with pytest.raises(BadInput) as e:
        a.func(a)
    assert e.value.exit_code == 2 and "split_bits=9" in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_poll_period_experiment_on_a_small_fabric(tmp_path, capsys):
    """``vary``/``values``/``references`` in an experiment file: one point per (value, load),
    the references once per load; JSON and PNG written; a bad value is refused before any
    run (one line, exit code 2)."""
    cfg = {k: v for k, v in FAST.items() if k != "poll_cycles"}
    exp = tmp_path / "e.toml"
    exp.write_text(f'spec = "{DF}"\nroutings = ["ugal-sdn"]\ntraffic = "worst-case"\n'
                   'loads = [0.3]\nvary = "poll_cycles"\nvalues = [100, 1000]\n'
                   'references = ["min"]\n[config]\n'
                   + "".join(f"{k} = {v}\n" for k, v in cfg.items()))
    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["sweep", "-e", str(exp), "-j", "1", "-q", "-o", str(tmp_path / "v"),
                       "--json"])
    assert a.func(a) == 0
    out = json.loads(capsys.readouterr().out)["points"]
    assert [(p["routing"], p["poll_cycles"]) for p in out] == [
        ("ugal-sdn", 100), ("ugal-sdn", 1000), ("min", None)]
    res = json.loads((tmp_path / "v.json").read_text())
    assert [p["config"]["poll_cycles"] for p in res["points"]] == [100, 1000, 1000]
    assert (tmp_path / "v.png").stat().st_size > 1000
    exp.write_text(exp.read_text().replace("[100, 1000]", "[100, 5]"))
    with pytest.raises(BadInput, match="poll_cycles=5"):
        a.func(a)


def test_other_routings_unchanged_by_the_counters(df):
    """Only ugal-sdn counts blocked cycles; the window's channel utilisation is still the
    window's (the flit counters now run over the whole run)."""
    ts, over = tables_for(df, "ugal-l")
    r = simulate(ts, SimConfig(**FAST, **over), "uniform", 0.3, seed=1)
    assert "sdn" not in r and r["routing"] == "ugal-l(val-group)"
    hops = r["hops_avg"] * r["delivered"]          # labelled packets, one flit each
    util = r["channel_util"]["avg"] * FAST["measure_cycles"] * int((df.adj >= 0).sum())
    assert util == pytest.approx(hops, rel=0.1)


def test_port_buffer_is_what_a_port_holds(df):
    """M/M/1/B's B: the downstream input VCs and the output queue of a port, in packets
    (Kim's UGAL-L reads the same quantity), unless ``sdn_buffer`` says otherwise."""
    ts = tables_for(df, "ugal-sdn")[0]
    assert ts.num_vcs == 3
    assert sdn.port_buffer(ts, SimConfig(speedup=2)) == 3 * 16 + 2 * 16
    assert sdn.port_buffer(ts, SimConfig(packet_size=4, buffer_depth=8)) == (3 * 8 + 4) / 4
    assert sdn.params(ts, SimConfig(sdn_buffer=7, split_bits=2)) == AdaptiveParams(
        split_bits=2, buffer=7.0)
