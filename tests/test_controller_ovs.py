"""The real controller (``fabroute controller``, os-ken) against real Open vSwitch bridges
(userspace datapath): install + read back + compare, repair of a tampered table, restart
without flushing, disconnect/reconnect, an unknown datapath, tables of another fabric and
OpenFlow error replies.  The bridges are a whole fabric: one per switch, patch ports as links,
dangling patch ports as host ports, every port at our port number.  Traffic through
Mininet hosts is tests/test_emulation.py."""

import os
import subprocess
from types import SimpleNamespace

import pytest

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import ensure_ovs
from fabroute.cli import main
from tablegen.exports.openflow import T_EGRESS, T_FWD, dpid
from tablegen.topologies.spec import build

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

def run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class BridgeFabric:
    """One OVS bridge per switch of ``topo``, named ``<tag><id>``."""

    def __init__(self, topo, tag: str, port: int, dpid_of=dpid):
        self.topo, self.tag = topo, tag
        self.names = [f"{tag}{s}" for s in range(topo.n_switches)]
        cmd = ["ovs-vsctl"]
        for s, br in enumerate(self.names):
            cmd += ["--", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
                    "protocols=OpenFlow13", "fail-mode=secure",
                    f"other-config:datapath-id={dpid_of(s):016x}",
                    "--", "set-controller", br, f"tcp:127.0.0.1:{port}"]
            hs = int(topo.hosts[s])
            for e in range(hs):
                cmd += self._patch(br, f"{br}h{e + 1}", "nowhere", e + 1)
            for j in (topo.adj[s] >= 0).nonzero()[0].tolist():
                t, pj = int(topo.adj[s, j]), int(topo.peer[s, j])
                cmd += self._patch(br, f"{br}p{j}", f"{tag}{t}p{pj}", hs + 1 + j)
        run(*cmd)

    @staticmethod
    def _patch(br, name, peer, ofport):
        return ["--", "add-port", br, name, "--", "set", "interface", name, "type=patch",
                f"options:peer={peer}", f"ofport_request={ofport}"]

    def flows(self, s: int) -> list[str]:
        out = run("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", self.names[s]).stdout
        return [line for line in out.splitlines() if "table=" in line]

    def reconnect(self, s: int, port: int, ctl):
        """Drop the switch's OpenFlow connection and restore it.  (Not with del-controller:
        OVS flushes a secure bridge's flows when its last controller is removed.)"""
        run("ovs-vsctl", "set-controller", self.names[s], f"tcp:127.0.0.1:{free_port()}")
        ctl.wait_for(lambda st: str(s) not in st["per_switch"], what=f"switch {s} disconnected")
        run("ovs-vsctl", "set-controller", self.names[s], f"tcp:127.0.0.1:{port}")

    def close(self):
        cmd = ["ovs-vsctl"]
        for br in self.names:
            cmd += ["--", "--if-exists", "del-br", br]
        run(*cmd, check=False)


@pytest.fixture(scope="module")
def sf5(tmp_path_factory):
    ensure_ovs()
    d = tmp_path_factory.mktemp("ctl")
    assert main(["tables", "slimfly:q=5", "--routing", "val-3h", "--formats", "json",
                 "--out", str(d / "sf5")]) == 0
    port = free_port()
    env = SimpleNamespace(fab=BridgeFabric(build("slimfly:q=5"), f"c{os.getpid() % 1000}s", port),
                          dir=d, port=port)
    env.ctl = Controller(d / "sf5", port, d, "ctl")
    try:
        yield env
    finally:
        env.ctl.stop()
        env.fab.close()


def test_every_switch_is_installed_read_back_and_verified(sf5):
    fab, ctl = sf5.fab, sf5.ctl
    st = ctl.wait_for(lambda s: s["verified"] == 50, what="50 verified switches")
    assert st["failed"] == 0 and st["refused"] == []
    per = st["per_switch"]
    for s in (0, 17, 49):
        assert len(fab.flows(s)) == per[str(s)]["flows"] == per[str(s)]["flow_mods"]
        assert per[str(s)]["group_mods"] == 1, "VAL_3h: the source choice's SELECT group"
        assert all(f"cookie={st['cookie']}" in line for line in fab.flows(s))
    assert "switch 49 verified" in ctl.log_path.read_text()


def test_tampered_flow_is_repaired_after_reconnect(sf5):
    fab, ctl, port = sf5.fab, sf5.ctl, sf5.port
    ctl.wait_for(lambda s: s["verified"] == 50, what="50 verified switches")
    before = len(fab.flows(3))
    run("ovs-ofctl", "-O", "OpenFlow13", "mod-flows", fab.names[3],
        f"table={T_EGRESS},metadata=6,dl_vlan_pcp=0,actions=output:7")
    run("ovs-ofctl", "-O", "OpenFlow13", "add-flow", fab.names[3],
        f"table={T_FWD},priority=999,dl_vlan=0,actions=drop")
    fab.reconnect(3, port, ctl)
    ctl.wait_for(lambda s: s["per_switch"].get("3", {}).get("repairs", 0) >= 1
             and s["per_switch"]["3"]["state"] == "verified", what="switch 3 repaired")
    log = ctl.log_path.read_text()
    assert "switch 3 (dpid 0000000000000004) disconnected" in log
    assert ("switch 3 differs from its program (round 1): {'missing_flows': 2, "
            "'extra_flows': 1") in log
    assert not any("priority=999" in line for line in fab.flows(3))
    assert len(fab.flows(3)) == before
    assert not any("output:7" in line and f"table={T_EGRESS}" in line and "metadata=0x6" in line
                   for line in fab.flows(3))


def test_restarted_controller_verifies_without_flushing(sf5, tmp_path):
    sf5.ctl.wait_for(lambda s: s["verified"] == 50, what="50 verified switches")
    sf5.ctl.stop()
    assert len(sf5.fab.flows(10)) > 0, "fail-mode secure: the switch keeps its flows"
    sf5.ctl = Controller(sf5.dir / "sf5", sf5.port, tmp_path, "restart")
    st = sf5.ctl.wait_for(lambda s: s["verified"] == 50, what="re-verified")
    assert all(v["flow_mods"] == v["group_mods"] == v["repairs"] == 0
               for v in st["per_switch"].values())


def test_unknown_datapath_and_another_fabric_are_refused(sf5, tmp_path):
    ctl, port = sf5.ctl, sf5.port
    ctl.wait_for(lambda s: s["verified"] == 50, what="50 verified switches")
    # a datapath id the fabric does not have
    odd = BridgeFabric(build("dsnf:n=32"), f"u{os.getpid() % 1000}s", port,
                       dpid_of=lambda s: 0x7000 + s)
    try:
        st = ctl.wait_for(lambda s: any("0000000000007000" in r for r in s["refused"]),
                      what="unknown dpid refused")
        assert any("not a switch of slimfly:q=5" in r for r in st["refused"])
    finally:
        odd.close()
    # a fabric whose switches have the right ids but other ports: tables of another fabric
    other = BridgeFabric(build("dsnf:n=32"), f"o{os.getpid() % 1000}s", free_port())
    other_port = free_port()
    ctl2 = None
    try:
        for br in other.names:
            run("ovs-vsctl", "set-controller", br, f"tcp:127.0.0.1:{other_port}")
        ctl2 = Controller(sf5.dir / "sf5", other_port, tmp_path, "other")
        st = ctl2.wait_for(lambda s: any(r.startswith("refused datapath 0000000000000001:")
                                     for r in s["refused"]), what="foreign switch 0 refused")
        assert st["verified"] == 0
        assert any("tables of another fabric?" in r for r in st["refused"])
        assert ("refused datapath 0000000000000001: switch 0 of slimfly:q=5"
                in ctl2.log_path.read_text())
    finally:
        if ctl2:
            ctl2.stop()
        other.close()


def test_openflow_errors_are_logged_and_the_switch_fails(tmp_path):
    ensure_ovs()
    assert main(["tables", "dsnf:n=32", "--routing", "dsnf", "--formats", "json",
                 "--out", str(tmp_path / "t")]) == 0
    port = free_port()
    fab = BridgeFabric(build("dsnf:n=32"), f"e{os.getpid() % 1000}s", port)
    # switch 5's forwarding table refuses more than 3 flows
    run("ovs-vsctl", "--", "--id=@t", "create", "flow_table", "flow_limit=3",
        "overflow_policy=refuse", "--", "set", "bridge", fab.names[5], f"flow_tables:{T_FWD}=@t")
    ctl = Controller(tmp_path / "t", port, tmp_path, "ctl")
    try:
        st = ctl.wait_for(lambda s: s["verified"] == 31 and s["failed"] == 1, what="31 + 1 failed")
        assert st["per_switch"]["5"]["errors"] > 0
        log = ctl.log_path.read_text()
        assert ("switch 5 (dpid 0000000000000006) OpenFlow error type=5 code=1 "
                "(OFPET_FLOW_MOD_FAILED/OFPFMFC_TABLE_FULL)") in log
        assert "switch 5 still differs after 3 repairs" in log
    finally:
        ctl.stop()
        fab.close()
