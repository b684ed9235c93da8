"""Live updates by the real controller on real Open vSwitch + Mininet under a probe stream
(``emulation/mininet/liverun.py``, ``controller/openflow/update.py``): DSN-F growth applied
as an ordered update, a link failure routed around (two-phase) and restored, and a table
directory of another fabric refused by ``fabroute load``.  docs/updates.md."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.liverun import run_expand, run_fail, run_transform
from emulation.mininet.net import emulate, ensure_ovs
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

FABROUTE = str(Path(sys.executable).parent / "fabroute")


def quiet(*_a, **_k):
    pass


def test_dsnf_growth_under_traffic_loses_nothing():
    ts = build_tables(build("dsnf:n=16"), "dsnf")
    rep = run_expand(ts, 3, log=quiet)
    print("\nLIVE expand", json.dumps({k: rep[k] for k in (
        "probes_sent", "lost", "misrouted", "duplicated", "new_hosts_reachable_s", "times")}))
    assert rep["update"]["mode"] == "ordered" and rep["update"]["ok"]
    assert rep["probes_sent"] > 1000 and rep["delivered"] == rep["probes_sent"]
    assert rep["lost"] == rep["misrouted"] == rep["duplicated"] == 0
    # every switch, old and new, read back equal to the grown program
    assert rep["controller"]["verified"] == 19 and rep["controller"]["topology"] == "dsnf:n=19,p=2"
    assert rep["new_hosts"] == 3 and rep["ovs"].get("table_misses", 0) == 0


def test_link_failure_is_routed_around_and_restored():
    ts = build_tables(build("dsnf:n=16"), "min")
    rep = run_fail(ts, [(0, 1)], down_s=1.0, log=quiet)
    print("\nLIVE fail", json.dumps({k: rep[k] for k in (
        "probes_sent", "lost", "misrouted", "duplicated", "receiver_drops", "ovs",
        "latency_ms", "loss_window")}))
    assert rep["update"]["mode"] == "two-phase" and rep["update"]["ok"]
    assert rep["update"]["to"].endswith("fail=0-1") and rep["restore_update"]["ok"]
    assert rep["lost"] > 0, "probes crossing the link were lost until the repair"
    assert rep["misrouted"] == rep["duplicated"] == 0
    w = rep["loss_window"]
    assert w["port_status_ms"] < w["in_force_ms"] and rep["loss_spans"]
    assert rep["degraded"]["verified"] and rep["degraded"]["cdg_acyclic"]
    assert rep["restored"] and rep["controller"]["version"] == 0
    # no packet met a table without an entry for it, at any switch, at any time (the loss
    # window itself is timing: a loaded machine stretches it; docs/updates.md)
    assert rep["ovs"].get("table_misses", 0) == 0


def test_fast_failover_repairs_without_the_controller():
    """The controller leaves the tables alone (``--no-link-repair``): with the link down for
    2 s, the FAST_FAILOVER groups alone carry the probes that crossed it."""
    from controller.openflow.fabric import Fabric

    ts = build_tables(build("dsnf:n=16"), "min")
    link = tuple(Fabric(ts, fast_failover=True).plan_.ff["cables"][0])
    rep = run_fail(ts, [link], down_s=2.0, fast_failover=True, repair=False, log=quiet)
    w = rep["loss_window"]
    print("\nLIVE fail+ff", json.dumps({k: rep[k] for k in (
        "probes_sent", "lost", "misrouted", "duplicated", "ovs", "loss_window", "link_up_ms")}))
    assert rep["fast_failover"]["entries"] > 0 and rep["controller"]["topology"] == "dsnf:n=16,p=2"
    assert rep["misrouted"] == rep["duplicated"] == 0
    assert rep["ovs"].get("table_misses", 0) == 0
    # losses (if any) stopped while the link was still down, with no table changed
    assert w["lost_to_ms"] is None or w["lost_to_ms"] < rep["link_up_ms"] / 2


def test_load_refuses_another_fabric_and_keeps_serving(tmp_path):
    ensure_ovs()
    d16, other = tmp_path / "d16", tmp_path / "other"
    for spec, out in (("dsnf:n=16", d16), ("slimfly:q=5", other)):
        subprocess.run([FABROUTE, "tables", spec, "--routing", "min", "--formats",
                        "json,openflow", "--out", str(out)], check=True, capture_output=True)
    sock = tmp_path / "ctl.sock"
    port = free_port()
    with tempfile.TemporaryDirectory() as work, \
            Controller(d16, port, work, args=("--control", str(sock))) as ctl:
        with emulate(build("dsnf:n=16"), controller_port=port, prefix="lu") as fnet:
            assert fnet is not None
            ctl.wait_verified(16)
            before = ctl.status()["cookie"]
            r = subprocess.run([FABROUTE, "load", str(sock), str(other)],
                               capture_output=True, text=True)
            assert r.returncode == 2 and "expected two table sets of one fabric" in r.stderr
            assert len(r.stderr.strip().splitlines()) == 1
            (d16 / "verify.json").write_text("{}")         # no longer what was proven
            r = subprocess.run([FABROUTE, "load", str(sock), str(d16)],
                               capture_output=True, text=True)
            assert r.returncode == 2 and "fails verification" in r.stderr
            time.sleep(0.2)
            st = ctl.status()
            assert st["cookie"] == before and st["verified"] == 16 and st["updates"] == 0
            # a grown set of this fabric: applied live (the new switches never come here)
            d18 = tmp_path / "d18"
            subprocess.run([FABROUTE, "tables", "dsnf:n=18", "--routing", "min", "--formats",
                            "json,openflow", "--out", str(d18)], check=True,
                           capture_output=True)
            r = subprocess.run([FABROUTE, "load", str(sock), str(d18), "--json"],
                               capture_output=True, text=True)
            rep = json.loads(r.stdout)
            assert r.returncode == 0 and rep["ok"] and rep["to"] == "dsnf:n=18,p=2"
            assert rep["verified"] == 16 and rep["mode"] in ("ordered", "two-phase")
            st = ctl.status()
            assert st["topology"] == "dsnf:n=18,p=2" and st["updates"] == 1


def test_transformation_under_traffic_moves_cables_while_nothing_is_in_flight():
    """DSN-F n = 24, p = 2 -> 3 on the running net: the controller installs the new version,
    holds, the cables move (switches keep bridges and datapaths, hosts their addresses), it
    flips.  Nothing misrouted or duplicated, no packet without a matching entry, every switch
    verified against the renumbered program, and the loss confined to the hold."""
    from tablegen.topologies.dsnf import build_dsnf, transform
    from tablegen.verify import tighten, verify

    ts = build_tables(build_dsnf(24, p=2), "dsnf")
    tighten(ts, verify(ts))
    rep = run_transform(ts, rate=100.0, log=quiet)
    w = rep["loss_window"]
    print("\nLIVE transform", json.dumps({k: rep[k] for k in (
        "probes_sent", "lost", "misrouted", "duplicated", "ovs", "cables", "loss_window")}))
    _, cd, _ = transform(24)
    assert rep["cables"] == {"removed": len(cd.removed) + len(cd.replugged),
                             "added": len(cd.added) + len(cd.replugged)}
    assert rep["update"]["mode"] == "rewire" and rep["update"]["ok"]
    assert rep["controller"]["topology"] == "dsnf:n=24,p=3" and rep["controller"]["verified"] == 24
    assert rep["misrouted"] == rep["duplicated"] == 0
    assert rep["ovs"].get("table_misses", 0) == 0
    assert rep["lost"] > 0 and w["held_ms"] <= w["resumed_ms"] <= w["in_force_ms"]
