"""The controller's /metrics scraped by a real Prometheus (Debian's ``prometheus``, started
here on loopback with a generated config, ended by PID): Slim Fly q = 5 with adaptive
UGAL-L under Mininet + Open vSwitch.  Before any switch connects Prometheus already scrapes
the controller; then every switch shows verified, a cable taken down shows down and its
repair time (port event to the new tables in force) arrives; and every panel of the
Grafana dashboard (docs/grafana/fabroute-dashboard.json) returns data.  The UGAL-L shares
Prometheus stores under the worst case are checked in tests/test_adaptive_ovs.py, on its
run.  docs/operations.md."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.grow import set_link
from emulation.mininet.net import emulate, ensure_ovs
from emulation.prometheus import Prometheus, values
from tablegen.exports.files import write_table_set
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from tablegen.verify import verify

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

PREFIX = "pm"
DASHBOARD = Path(__file__).parent.parent / "docs" / "grafana" / "fabroute-dashboard.json"


def dashboard_exprs() -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every target of every panel of the dashboard."""
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", ())]


def test_dashboard_targets_are_promql_of_fabroute_series():
    exprs = dashboard_exprs()
    assert len(exprs) >= 20
    assert all("fabroute_" in e for _, e in exprs)
    assert len({t for t, _ in exprs}) == len(
        [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"])


def test_prometheus_sees_switches_a_cable_down_and_its_repair(tmp_path):
    ensure_ovs()
    topo = build("slimfly:q=5")
    ts = build_tables(topo, "ugal-l")
    write_table_set(ts, verify(ts), tmp_path / "tables", ("openflow",))
    mport = free_port()
    ctl = Controller(tmp_path / "tables", free_port(), tmp_path,
                     args=("--metrics", f"127.0.0.1:{mport}"))
    prom = Prometheus([f"127.0.0.1:{mport}"], tmp_path / "prometheus", free_port(), 0.5)
    try:
        prom.wait_ready()
        # scraped before any switch: the controller serves /metrics as soon as it listens
        got = prom.wait_for('fabroute_switches{job="fabroute"}', bool, 60)
        assert values(got) == [50.0]
        assert values(prom.query("fabroute_switches_connected")) == [0.0]
        with emulate(topo, controller_port=ctl.port, prefix=PREFIX) as fnet:
            ctl.wait_verified(50, timeout=240)
            prom.wait_for("fabroute_switches_verified == 50", bool, 30)
            assert len(prom.wait_for("fabroute_switch_verified == 1",
                                     lambda r: len(r) == 50, 30)) == 50
            # every switch's ports with statistics, its network ports named by their peer
            ports = prom.wait_for('fabroute_port_transmitted_bytes_total{peer=~"s.*"}',
                                  lambda r: len(r) == int((topo.adj >= 0).sum()), 30)
            assert all(r["metric"]["peer"].count(":") == 1 for r in ports)
            a, b = 0, int(topo.adj[0][topo.adj[0] >= 0][0])
            set_link(fnet, a, b, False)
            got = prom.wait_for(f'fabroute_cable_down{{switch_a="{a}",switch_b="{b}"}}',
                                bool, 30)
            assert values(got) == [1.0]
            assert values(prom.query("fabroute_cables_down")) == [1.0]
            got = prom.wait_for('fabroute_repair_seconds_count{event="down"}', bool, 60)
            assert values(got) == [1.0]
            (repair,) = values(prom.query('fabroute_repair_seconds_sum{event="down"}'))
            assert 0 < repair < 30
            st = ctl.wait_for(lambda s: (s.get("update") or {}).get("t_in_force"), 30,
                              "the repair's report")
            rep = st["update"]
            assert repair == pytest.approx(rep["t_in_force"] - rep["t_event"], abs=1e-3)
            prom.wait_for("fabroute_switches_verified == 50", bool, 60)
            # every panel of the dashboard has data now (rates need two scrapes: waited)
            empty = []
            for title, expr in dashboard_exprs():
                try:
                    res = prom.wait_for(expr, bool, 15)
                except Exception as e:          # noqa: BLE001  (collected, reported below)
                    empty.append((title, expr, str(e)[:200]))
                    continue
                if not any(math.isfinite(v) for v in values(res)):
                    empty.append((title, expr, "no finite value"))
            assert not empty, empty
    finally:
        prom.stop()
        ctl.stop()
    assert prom.proc.returncode is not None
