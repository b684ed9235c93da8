"""The ``standard`` OpenFlow profile end to end on Open vSwitch (userspace datapath) + Mininet
hosts, Slim Fly q = 5 (50 switches, 200 hosts): ``fabroute tables --openflow-profile
standard`` written and verified, served by ``fabroute controller`` (which reads the profile
from the manifest), every switch read back and verified, no group and no Nicira action or
masked L4 port on any bridge, every ordered host pair delivered, and sampled probes proven on
the exact switch path and VCs the tables promise for the intermediate the program's
source choice gives them (``emulation/mininet/pathcheck.py``).

The same on a strict OpenFlow 1.3 switch, CPqD's ofsoftswitch13 (``datapath="ofss"``,
:mod:`emulation.mininet.ofss`), with no OpenFlow error from any switch; skipped when its
``ofdatapath``/``ofprotocol``/``dpctl`` are not on ``PATH`` (CI cannot build it; the build
and the two ofsoftswitch13 bug fixes it needs: docs/openflow.md, *On a strict OpenFlow 1.3
switch*)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emulation.mininet import ofss
from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import emulate
from emulation.mininet.pathcheck import PathChecker, sample_pairs
from emulation.mininet.probes import Prober
from tablegen.exports.files import load_table_dir
from tablegen.topologies.spec import build

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

FABROUTE = str(Path(sys.executable).parent / "fabroute")
SPEC = "slimfly:q=5"
PATH_PAIRS = 40


@pytest.fixture(scope="module", params=["ovs", "ofss"])
def net(request, tmp_path_factory):
    if request.param == "ofss" and ofss.available():
        pytest.skip(ofss.available())
    topo = build(SPEC)
    port = free_port()
    with emulate(topo, controller_port=port, prefix="q", datapath=request.param) as fnet:
        with Prober(fnet) as prober:
            yield fnet, prober, port, tmp_path_factory.mktemp("std")


@pytest.mark.parametrize("routing", ["min", "val", "val-nta", "val-3h", "ugal-l"])
def test_standard_profile_delivers_every_pair_on_its_promised_path(net, routing):
    fnet, prober, port, tmp = net
    out = tmp / routing
    r = subprocess.run([FABROUTE, "tables", SPEC, "--routing", routing, "--formats",
                        "json,openflow", "--openflow-profile", "standard", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    ctl = Controller(out, port, tmp, name=f"ctl-{routing}")
    try:
        ctl.wait_verified(50)
        st = ctl.status()
        assert st["failed"] == 0
        assert sum(v["group_mods"] for v in st["per_switch"].values()) == 0
        # a strict switch refused nothing (OpenFlow errors are counted per switch)
        assert sum(v["errors"] for v in st["per_switch"].values()) == 0
        for s in (0, 31) if fnet.datapath == "ovs" else ():
            dump = fnet.ofctl("dump-flows", fnet.bridges[s])
            assert "table=0" in dump and "resubmit" not in dump and "tp_src" not in dump
            assert "group_id" not in fnet.ofctl("dump-groups", fnet.bridges[s])
        rep = prober.all_pairs()
        assert rep.pairs == 200 * 199
        assert rep.delivered == rep.pairs and rep.misdelivered == 0 and rep.duplicates == 0, \
            rep.to_dict()
        ts = load_table_dir(out)
        with PathChecker(fnet, ts, prober, profile="standard") as pc:
            results = [pc.check(s, d) for s, d in sample_pairs(fnet, PATH_PAIRS, seed=26)]
        bad = [(x.src, x.dst, x.problems) for x in results if not x.ok]
        assert not bad, bad[:3]
        if pc.choice is not None:       # each probe's intermediate came from table 1's IPv4 bits
            assert all(x.target is not None and x.expected is not None for x in results)
            assert len({x.target for x in results}) > 5
    finally:
        ctl.stop()
