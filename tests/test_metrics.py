"""The controller's Prometheus metrics (controller/openflow/metrics.py) built from a Fabric
and its decisions without a switch: the exposition is rendered with prometheus_client and
parsed back, and every series checked against the state it was read from."""

from __future__ import annotations

import functools
import time
from types import SimpleNamespace

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.openflow.fabric import Diff, Fabric
from controller.openflow.metrics import Metrics, View, snapshot
from controller.openflow.update import Links
from tablegen.routing.adaptive import AdaptiveParams
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build


@functools.lru_cache(maxsize=None)
def tables(spec: str, routing: str):
    return build_tables(build(spec), routing)


def port_stats(topo, u, sent, dropped=None):
    """``OFPPortStats`` of every port of switch ``u`` (hosts' too): ``sent[j]`` bytes out of
    network port index ``j``, half as many in; host ports 7 bytes each way."""
    dropped = np.zeros(topo.radix) if dropped is None else dropped
    hs = int(topo.hosts[u])
    out = [SimpleNamespace(port_no=p, tx_bytes=7, rx_bytes=7, tx_packets=1, rx_packets=1,
                           tx_dropped=0, rx_dropped=0) for p in range(1, hs + 1)]
    out += [SimpleNamespace(port_no=hs + 1 + j, tx_bytes=int(sent[j]),
                            rx_bytes=int(sent[j]) // 2, tx_packets=int(sent[j]) // 1000,
                            rx_packets=int(sent[j]) // 2000, tx_dropped=int(dropped[j]),
                            rx_dropped=3)
            for j in range(topo.radix) if topo.adj[u, j] >= 0]
    out.append(SimpleNamespace(port_no=0xFFFFFFFE, tx_bytes=1, rx_bytes=1, tx_packets=1,
                               rx_packets=1, tx_dropped=0, rx_dropped=0))      # LOCAL
    return out


def parse(metrics: Metrics) -> dict:
    """``{sample name: {frozenset(labels): value}}`` of the rendered exposition."""
    out: dict = {}
    for fam in text_string_to_metric_families(metrics.render().decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


def one(series: dict, **labels):
    want = frozenset((k, str(v)) for k, v in labels.items())
    hits = [v for k, v in series.items() if want <= k]
    assert len(hits) == 1, (labels, hits)
    return hits[0]


def test_metrics_read_switches_ports_shares_and_failures_at_scrape_time():
    ts = tables("dragonfly:p=2,a=4,h=2", "ugal-l")
    topo = ts.topo
    fab = Fabric(ts)
    fab.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)        # 1 MB/s per port
    dec = fab.decisions
    for d in (1, 2, 3):
        fab.connected(d, conn=object())
    fab.verdict(1, Diff())
    fab.switches[1].read_at = 1234.5
    fab.verdict(2, Diff(extra_groups=[7]))                      # one repair round
    u, key = 0, 5
    j = int(dec.ugal.j_min[u, key])
    ports = {}
    for t, scale in ((0.0, 0), (1.0, 1)):
        for s in range(topo.n_switches):
            sent = np.full(topo.radix, 100_000.0) * scale
            drops = np.zeros(topo.radix)
            if s == u:
                sent[j], drops[j] = 1_000_000 * scale, 500 * scale     # 1.5x offered
            st = port_stats(topo, s, sent, drops)
            dec.stats(s, t, st)
            ports[fab.dpid_of(s)] = (100.0 + t, st)
    dec.decide(1.0)
    assert dec.ugal.share[u, key] > 0
    links = Links(ts)
    a_port = int(topo.hosts[3]) + 1 + 0
    b = int(topo.adj[3, 0])
    assert links.port(3, a_port, False)
    view = View(fabric=fab, links=links, ports={1: ports[1]}, updates=2,
                update={"mode": "ordered", "ok": True, "t_start": 10.0, "t_verified": 10.5,
                        "phases": [{"name": "add", "seconds": 0.2}]})
    m = Metrics(lambda: view)
    got = parse(m)
    # per switch: state, verified, flows, digest, read-back time, repairs
    assert one(got["fabroute_switch_verified"], switch=0, dpid=f"{1:016x}") == 1
    assert one(got["fabroute_switch_verified"], switch=1) == 0
    assert len(got["fabroute_switch_verified"]) == 3
    assert one(got["fabroute_switch_repairs_total"], switch=1) == 1
    assert one(got["fabroute_switch_flows"], switch=2) == len(fab.switches[3].program.flows)
    assert one(got["fabroute_switch_last_readback_timestamp_seconds"], switch=0) == 1234.5
    info = got["fabroute_switch_program_info"]
    digests = {dict(k)["switch"]: dict(k)["digest"] for k in info}
    assert len(set(digests.values())) == 3, "each switch's program has its own digest"
    assert one(info, switch=1, state="repairing") == 1
    # per port of switch 0 (dpid 1): counters as the switch reported them, peers by the plan
    hs = int(topo.hosts[0])
    p = hs + 1 + j
    v = int(topo.adj[0, j])
    peer = f"s{v}:{int(topo.hosts[v]) + 1 + int(topo.peer[0, j])}"
    assert one(got["fabroute_port_transmitted_bytes_total"], switch=0, port=p,
               peer=peer) == 1_000_000
    assert one(got["fabroute_port_received_bytes_total"], switch=0, port=p) == 500_000
    assert one(got["fabroute_port_transmit_dropped_packets_total"], switch=0, port=p) == 500
    assert one(got["fabroute_port_received_packets_total"], switch=0, port=1,
               peer="h0") == 1
    assert not any(dict(k)["port"] == str(0xFFFFFFFE)
                   for k in got["fabroute_port_transmitted_bytes_total"]), "no LOCAL port"
    assert len(got["fabroute_port_transmitted_bytes_total"]) == hs + int(
        (topo.adj[0] >= 0).sum())
    assert one(got["fabroute_port_load_ratio"], switch=0, port=p) == pytest.approx(
        float(dec.est.rho[0, j]))
    assert one(got["fabroute_port_load_ratio"], switch=0, port=p) == pytest.approx(1.5,
                                                                                   rel=0.3)
    assert "fabroute_port_load_ratio" in got and all(
        dict(k)["peer"].startswith("s") for k in got["fabroute_port_load_ratio"])
    # UGAL-L: every valid (source, destination) share, its mean per destination, rounds
    shares = got["fabroute_ugal_share_ratio"]
    assert len(shares) == int(dec.ugal.valid.sum())
    assert one(shares, switch=u, destination=key) == dec.ugal.share[u, key] / dec.ugal.slots
    assert one(got["fabroute_ugal_destination_share_ratio"], destination=key) == \
        pytest.approx(float(dec.ugal.by_destination()[key]))
    assert got["fabroute_ugal_rounds_total"][frozenset()] == 1
    assert got["fabroute_ugal_changed_shares"][frozenset()] == dec.last["changed"] > 0
    # failures and updates
    assert got["fabroute_cables_down"][frozenset()] == 1
    assert one(got["fabroute_cable_down"], switch_a=min(3, b), switch_b=max(3, b)) == 1
    assert got["fabroute_updates_total"][frozenset()] == 2
    assert one(got["fabroute_last_update_seconds"], mode="ordered") == pytest.approx(0.5)
    assert one(got["fabroute_last_update_phase_seconds"], phase="add") == 0.2
    assert one(got["fabroute_role_info"], role="single", state="master") == 1
    assert one(got["fabroute_fabric_info"], routing="ugal-l") == 1
    assert got["fabroute_switches_verified"][frozenset()] == 1
    # the state is read at scrape time: a switch verified later shows at the next scrape
    fab.verdict(3, Diff())
    assert one(parse(m)["fabroute_switch_verified"], switch=2) == 1


def test_repair_and_update_histograms_count_what_happened():
    ts = tables("slimfly:q=5", "min")
    m = Metrics(lambda: View(fabric=Fabric(ts)))
    t = time.time()
    m.update_done("links", {"mode": "ordered", "reason": "switch 0 port 5 down", "t_event": t,
                            "t_start": t + 0.01, "t_in_force": t + 0.03,
                            "t_verified": t + 0.2})
    m.update_done("links", {"mode": "ordered", "reason": "switch 0 port 5 up", "t_event": t,
                            "t_start": t, "t_in_force": t + 2.0, "t_verified": t + 2.1})
    m.update_done("load", {"mode": "none", "reason": "load x", "changed": False})
    got = parse(m)
    assert one(got["fabroute_repair_seconds_count"], event="down") == 1
    assert one(got["fabroute_repair_seconds_sum"], event="down") == pytest.approx(0.03)
    assert one(got["fabroute_repair_seconds_bucket"], event="down", le="0.05") == 1
    assert one(got["fabroute_repair_seconds_bucket"], event="up", le="1.0") == 0
    assert one(got["fabroute_update_seconds_count"], kind="links", mode="ordered") == 2
    assert not any(dict(k).get("kind") == "load" for k in got["fabroute_update_seconds_count"])
    # a static routing: no UGAL-L series, and no port series without statistics
    assert "fabroute_ugal_rounds_total" not in got
    assert not got.get("fabroute_port_transmitted_bytes_total")
    assert got["fabroute_switches"][frozenset()] == 50


def test_snapshot_without_a_fabric_is_role_and_updates_only():
    snap = snapshot(View(fabric=None, roles=SimpleNamespace(role="standby", state="standby",
                                                            generation=None)))
    assert snap["fabric"] is None and snap["switches"] == [] and snap["ports"] == []
    assert snap["role"]["state"] == "standby"
    got = parse(Metrics(lambda: View(fabric=None)))
    assert one(got["fabroute_master"]) == 1 and "fabroute_switches" not in got


def test_reversals_count_moves_against_the_last_one():
    ts = tables("dragonfly:p=2,a=4,h=2", "ugal-l")
    topo = ts.topo
    fab = Fabric(ts)
    fab.adapt(AdaptiveParams(alpha=1.0), poll=1.0, link_bps=8e6)      # 1 MB/s per port
    dec = fab.decisions
    u, key = 0, 5
    j = int(dec.ugal.j_min[u, key])
    sent = np.zeros((topo.n_switches, topo.radix))
    drops = np.zeros(topo.radix)
    seen = []
    for t, hot in enumerate((0, 1, 1, 0, 0)):       # port j of switch 0 offered 1.5x, then not
        for s in range(topo.n_switches):
            sent[s] += 100_000
            if s == u and hot:
                sent[s, j] += 900_000
                drops[j] += 500
            dec.stats(s, float(t), port_stats(topo, s, sent[s],
                                              drops if s == u else None))
        dec.decide(float(t))
        seen.append((int(dec.ugal.share[u, key]), dec.last["changed"], dec.reversals))
    # up twice (no reversal: a trend), then back: the first move back reverses every
    # share that moved up, the next ones continue the way back
    assert seen[1][0] < seen[2][0] > seen[3][0] > seen[4][0]
    assert [r for _, _, r in seen] == [0, 0, 0, seen[3][1], 0] and seen[3][1] > 0
    assert dec.reversals_total == seen[3][1]
    assert dec.last["reversals"] == 0


@pytest.mark.parametrize("opt, value, words", [
    ("--metrics", "10.1.2.3:9108", "--metrics 10.1.2.3:9108: plain HTTP shows the fabric's state"),
    ("--metrics", "9108", "--metrics '9108'; expected HOST:PORT"),
    ("--metrics", "127.0.0.1:0", "--metrics '127.0.0.1:0'; expected HOST:PORT"),
    ("--web", "10.1.2.3:8080", "--web 10.1.2.3:8080: plain HTTP shows the fabric's state"),
    ("--web", "8080", "--web '8080'; expected HOST:PORT, e.g. 127.0.0.1:8080"),
])
def test_served_address_is_refused_off_loopback_or_malformed(opt, value, words, capsys,
                                                             tmp_path):
    """``--metrics`` and ``--web`` share one check of their HOST:PORT."""
    from fabroute.cli import main

    assert main(["controller", str(tmp_path), opt, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_metrics_port_in_use_is_refused_before_anything_listens():
    from controller.openflow.launcher import bind
    from tablegen.errors import BadInput

    s = bind("127.0.0.1", 0)
    try:
        with pytest.raises(BadInput, match=r"--metrics 127\.0\.0\.1:\d+: the port is in use"):
            bind("127.0.0.1", s.getsockname()[1], "--metrics")
    finally:
        s.close()


def test_exposition_parses_as_the_librarys_without_created():
    from prometheus_client import generate_latest

    ts = tables("dragonfly:p=2,a=4,h=2", "ugal-l")
    fab = Fabric(ts)
    fab.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)
    fab.connected(1, conn=object())
    stats = port_stats(ts.topo, 0, np.full(ts.topo.radix, 5e4))
    stats[0].tx_bytes = float("nan")      # never from a switch; the format must still hold
    odd = SimpleNamespace(role='a "quoted"\\ role\nline', state="standby", generation=3)
    m = Metrics(lambda: View(fabric=fab, links=Links(ts), roles=odd,
                             ports={1: (1.0, stats)}))
    m.update_done("links", {"mode": "ordered", "reason": "switch 0 port 5 up",
                            "t_event": 0.0, "t_start": 0.0, "t_in_force": 0.5,
                            "t_verified": 1.0})

    def samples(text):
        return sorted((s.name, tuple(sorted(s.labels.items())), repr(s.value))
                      for f in text_string_to_metric_families(text) for s in f.samples
                      if not s.name.endswith("_created"))

    ours = samples(m.render().decode())
    assert ours == samples(generate_latest(m.registry).decode())
    assert len(ours) > 300
    assert ("fabroute_port_transmitted_bytes_total", (("dpid", f"{1:016x}"), ("peer", "h0"),
            ("port", "1"), ("switch", "0")), "nan") in ours
    assert ("fabroute_role_info", (("role", odd.role), ("state", "standby")), "1.0") in ours


def test_no_state_of_the_app_shadows_one_of_its_methods():
    """An attribute assigned on the app under a method's name replaces it on the instance:
    os-ken then finds no handler (a ``self._port_stats = {}`` once silenced every
    statistics reply).  Read from the sources of the app and its mixins."""
    import ast
    from pathlib import Path

    root = Path(__file__).parent.parent / "controller" / "openflow"
    methods, assigned = set(), set()
    for name in ("app.py", "roleapp.py", "lldpapp.py"):
        for cls in ast.walk(ast.parse((root / name).read_text())):
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef):
                    methods.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                        and isinstance(node.value, ast.Name) and node.value.id == "self":
                    assigned.add(node.attr)
    assert {"_port_stats", "_gather", "metrics_view"} <= methods
    assert {"_counters", "metrics", "fabric"} <= assigned
    assert not methods & assigned, methods & assigned


def test_a_live_update_keeps_the_port_speeds_the_estimator_measures_against():
    """Port speeds come from the port descriptions of a connecting switch; after a live
    update (here: a cable down, routed around) the switches do not connect again, so the
    new fabric's decisions take them over (else no load was estimated any more)."""
    ts = tables("dragonfly:p=2,a=4,h=2", "ugal-l")
    topo = ts.topo
    old = Fabric(ts)
    old.adapt(AdaptiveParams(alpha=1.0), poll=1.0)           # speeds from the switches
    hs = int(topo.hosts[0])
    old.decisions.port_speeds(0, [SimpleNamespace(port_no=hs + 1 + j, curr_speed=10_000)
                                  for j in range(topo.radix)])
    assert (old.decisions.capacity[0][topo.adj[0] >= 0] == 10_000 * 1000 / 8).all()
    links = Links(ts)
    v = int(topo.adj[0, 0])
    assert links.port(0, hs + 1, False)
    new = Fabric(links.target())
    new.adapt(*old.adapted)
    assert not new.decisions.capacity.any(), "no switch told the new fabric its speeds"
    new.decisions.inherit(old.decisions)
    cap = new.decisions.capacity
    assert cap[0, 0] == 0, f"the cable to {v} is down: no capacity"
    assert (cap[0][new.topo.adj[0] >= 0] == 1_250_000).all()
    assert not cap[1:].any()
    for t in (0.0, 1.0):
        new.decisions.stats(0, t, port_stats(topo, 0, np.full(topo.radix, 625_000.0 * t)))
    load = new.decisions.est.rho[0]
    assert load[new.topo.adj[0] >= 0] == pytest.approx(0.5)


def test_a_scrape_lets_the_hub_run_between_families_and_shows_one_moment():
    """``render(pause)`` calls ``pause`` between families (the hub runs there), and what
    runs then shows in the next scrape, never half-way through this one."""
    ts = tables("dragonfly:p=2,a=4,h=2", "min")
    fab = Fabric(ts)
    for d in (1, 2):
        fab.connected(d, conn=object())
    m = Metrics(lambda: View(fabric=fab))
    calls = []

    def pause():
        calls.append(1)
        fab.verdict(1 + len(calls) % 2, Diff())       # an event changes the state meanwhile

    got = {}
    for fam in text_string_to_metric_families(m.render(pause).decode()):
        for s in fam.samples:
            got.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    assert len(calls) > 10
    shown = sum(got["fabroute_switch_verified"].values())
    assert shown == got["fabroute_switches_verified"][frozenset()] < 2, "one moment"
    assert sorted(parse(m)["fabroute_switch_verified"].values()) == [1, 1]
