"""Adaptive UGAL-L for real: the controller (os-ken) decides from Open vSwitch's statistics
while the emulated hosts load shaped links (Mininet, userspace datapath).

One Dragonfly p=2, a=4, h=2 (36 switches, 72 hosts, links shaped to 1 Mbit/s): a uniform
phase, then the worst case (group i -> i + 1).  The non-minimal share of the worst case's
flows must rise within three polls of the switch and its goodput beat MIN's (the same tables
with --static: every flow minimal) by half again; no frame misrouted, every decision read
back equal, no switch failed.  The adaptive run is on switches wired like real ones (random
datapath ids, every switch's ports permuted, given to the controller as ``--fabric``): the
estimator reads each port's statistics under the switch's own number (issue 26).  A real
Prometheus scrapes the controller's /metrics meanwhile: the shares it stored are those of the
decision log (issue 28)."""

import functools

import pytest

from emulation.mininet.ctl import free_port
from emulation.mininet.loadrun import run_load
from emulation.mininet.topo import random_wiring
from emulation.prometheus import Prometheus, values
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

SPEC = "dragonfly:p=2,a=4,h=2"
ADAPTIVE = {"poll": 1.0, "split_bits": 3, "hysteresis": 0.25}


def quiet(*_a, **_k):
    pass


@functools.lru_cache(maxsize=None)
def ugal():
    return build_tables(build(SPEC), "ugal-l")


def test_the_controller_moves_the_worst_case_off_the_minimal_paths(tmp_path):
    phases = [("uniform", 5.0), ("worst-case", 10.0)]
    wiring = random_wiring(ugal().topo, seed=3, leave_out=0)
    assert any(p != q for ports in wiring.ports for p, q in ports.items())
    mport = free_port()
    with Prometheus([f"127.0.0.1:{mport}"], tmp_path / "prometheus", free_port(), 0.5) as prom:
        prom.wait_ready()
        rep = run_load(ugal(), phases, load=0.6, link_mbit=1.0, adaptive=ADAPTIVE,
                       wiring=wiring, log=quiet,
                       controller_extra=("--metrics", f"127.0.0.1:{mport}"))
        stored = {q: values(prom.query(f"max_over_time({q}[30m])")) for q in (
            "fabroute_ugal_share_mean_ratio", "fabroute_ugal_destination_share_ratio",
            "fabroute_ugal_share_ratio", "fabroute_ugal_rounds_total")}
    assert prom.proc.returncode is not None
    ctl = rep["controller"]
    assert rep["misrouted"] == 0 and ctl["failed"] == 0 and ctl["rounds_differing"] == 0
    assert ctl["rounds_verified"] > 0 and ctl["decision_flow_mods"] > 0
    uni, wc = rep["phases"]
    assert uni["share"] < 0.1, "uniform traffic stays minimal"
    (r,) = rep["reaction"]
    # counted in the controller's rounds, not seconds: a loaded host stretches a poll period
    assert r["rises_rounds"] is not None and r["rises_rounds"] <= 3, r
    assert wc["share"] > 0.3
    # what Prometheus stored of the shares (docs/operations.md) is what the decision log says
    assert stored["fabroute_ugal_share_mean_ratio"] == [
        pytest.approx(max(r["share"] for r in rep["decisions"]), abs=0.02)]
    by_dst = stored["fabroute_ugal_destination_share_ratio"]
    assert len(by_dst) == ugal().topo.n_groups and max(by_dst) > 0
    assert 0.3 < max(stored["fabroute_ugal_share_ratio"]) <= 1.0
    assert stored["fabroute_ugal_rounds_total"][0] >= ctl["rounds"] - 2
    static = run_load(ugal(), [("worst-case", 6.0)], load=0.6, link_mbit=1.0, adaptive=None,
                      log=quiet)
    assert static["misrouted"] == 0 and not static["decisions"]
    assert wc["accepted_load"] >= 1.5 * static["accepted_load"], (wc, static)
