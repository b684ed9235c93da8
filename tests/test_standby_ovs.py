"""Two real controllers on real Open vSwitch bridges (userspace datapath) under Mininet: the
master killed with SIGKILL under the probe stream, the standby taking over without a lost
probe or a flow-mod, a link then repaired by the new master, and the old master, started
again with its old generation, refused by every switch it claims as stale, and at last
started as the new master's standby (``emulation/mininet/standbyrun.py``; docs/openflow.md,
*Standby controller*)."""

from __future__ import annotations

import pytest

from emulation.mininet.standbyrun import TAKEOVER_LIMIT_S, run_standby
from tablegen.routing.build import build_tables
from tablegen.topologies.slimfly import build_slimfly

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]


def test_standby_takes_over_from_a_killed_master_and_repairs_a_link():
    ts = build_tables(build_slimfly(3), "min")
    rep = run_standby(ts, (0, 1), log=lambda *a, **k: None)
    n = ts.topo.n_switches
    # the takeover under the stream: nothing lost, nothing misrouted, nothing rewritten
    assert rep["probes_sent"] > 1000
    assert rep["lost"] == rep["misrouted"] == rep["duplicated"] == 0
    assert 0 < rep["takeover_s"] < TAKEOVER_LIMIT_S
    assert rep["takeover_by"] == "connection closed"
    assert rep["generation"] == {"master": 1, "standby": 2}
    assert rep["flow_mods_after_takeover"] == 0
    assert rep["switches_repaired_after_takeover"] == 0
    # the new master routes around the cable and puts the tables back
    r = rep["repair"]
    assert r["ok"] and r["restored"] and r["misrouted"] == 0
    assert r["reason"].endswith("down") and r["in_force_ms"] is not None
    assert r["prepared"]          # made ready by the standby while it only read
    # the old master with generation 1: refused as stale, steps down, writes nothing
    d = rep["deposed_master"]
    assert d["state"] == "deposed" and d["switches"] == {"slave": n}
    assert d["stale_refusals"] >= 1 and d["stale_errors_logged"] == d["stale_refusals"]
    assert d["flow_mods"] == 0
    # started again as the standby of the new master (its --serve-peer): SLAVE, no write
    s = rep["new_standby"]
    assert s["state"] == "standby" and s["master_heard"] and s["known"] == 2
    assert s["switches"] == {"slave": n} and s["verified"] == n and s["flow_mods"] == 0
    assert rep["controller"]["verified"] == n and rep["controller"]["openflow_errors"] == 0
    assert rep["ok"]
