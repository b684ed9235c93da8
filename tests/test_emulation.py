"""The data plane end to end on real Open vSwitch (userspace datapath) + Mininet hosts:
tables from ``fabroute tables`` installed from the exported files (``ovs-ofctl bundle``) or by
``fabroute controller`` (os-ken, OpenFlow 1.3 over TCP), scapy probes between every host pair,
exact switch paths and VCs from per-flow packet counters (``emulation/mininet/pathcheck.py``), and a
negative control.  One net per fabric (class-scoped), torn down at the end of its class.

Fabrics: Slim Fly q=5 with p=2 hosts per switch (``slimfly:q=5,p=2``: 50 switches, 175
links, 100 hosts, 9,900 ordered pairs), Dragonfly ``dragonfly:p=2,a=4,h=2`` (36 switches,
72 hosts), DSN-F ``dsnf:n=32`` (32 switches, 32 hosts).  docs/emulation.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import emulate, install_from_files, netns
from emulation.mininet.pathcheck import PathChecker, corrupt_forwarding, restore_flow, sample_pairs
from emulation.mininet.probes import Prober
from emulation.mininet.topo import host_ip
from tablegen.errors import RunFailed
from tablegen.exports.files import load_table_dir
from tablegen.exports.openflow import dpid, host_macs, mac_str
from tablegen.topologies.spec import build

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

FABROUTE = str(Path(sys.executable).parent / "fabroute")
SF5, DF, DSNF = "slimfly:q=5,p=2", "dragonfly:p=2,a=4,h=2", "dsnf:n=32"


def tables(tmp: Path, spec: str, routing: str) -> Path:
    out = tmp / routing
    r = subprocess.run([FABROUTE, "tables", spec, "--routing", routing, "--formats",
                        "json,openflow", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


class Fabric:
    def __init__(self, spec, tmp):
        self.spec, self.tmp = spec, tmp
        self.topo = build(spec)
        self.port = free_port()
        self.ctl = None

    def use_controller(self, routing: str) -> tuple:
        """Serve ``routing``'s tables with ``fabroute controller``; wait until every switch
        is verified."""
        d = tables(self.tmp, self.spec, routing)
        self.stop_controller()
        self.ctl = Controller(d, self.port, self.tmp, name=f"ctl-{routing}")
        secs = self.ctl.wait_verified(self.topo.n_switches)
        st = self.ctl.status()
        record(f"{self.spec} {routing} controller", verified_after=secs,
               flow_mods=sum(v.get("flow_mods", 0) for v in st["per_switch"].values()))
        return load_table_dir(d), secs

    def stop_controller(self):
        if self.ctl is not None:
            self.ctl.stop()
            self.ctl = None


@pytest.fixture(scope="class")
def fabric(request, tmp_path_factory):
    fab = Fabric(request.cls.SPEC, tmp_path_factory.mktemp("emu"))
    with emulate(fab.topo, controller_port=fab.port, prefix="t") as fnet:
        fab.fnet = fnet
        record(f"{fab.spec} build", **{k: float(v) for k, v in fnet.times.items()})
        with Prober(fnet) as prober:
            fab.prober = prober
            try:
                yield fab
            finally:
                fab.stop_controller()


def record(what: str, **kv):
    """Measured times, printed (pytest -s shows them; docs/emulation.md quotes them)."""
    print(f"\nEMU-TIME {what} " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else
                                            f"{k}={v}" for k, v in kv.items()))


def all_pairs_delivered(fab):
    rep = fab.prober.all_pairs()
    record(f"{fab.spec} all-pairs", pairs=rep.pairs, delivered=rep.delivered, lost=rep.lost,
           resent=rep.resent, seconds=rep.seconds)
    n = len(fab.fnet.host_ids)
    assert rep.pairs == n * (n - 1)
    assert rep.lost == 0 and rep.delivered == rep.pairs, rep.to_dict()
    assert rep.misdelivered == 0 and rep.duplicates == 0, rep.to_dict()
    return rep


def check_paths(fab, ts, n_pairs=12, targets_per_pair=3, seed=1):
    """Exact paths for sampled pairs (Valiant: several intermediates per pair, chosen by
    udp_src); returns the results."""
    out = []
    with PathChecker(fab.fnet, ts, fab.prober) as pc:
        for s, d in sample_pairs(fab.fnet, n_pairs, seed=seed):
            if pc.choice is None:
                out.append(pc.check(s, d))
                continue
            s0 = fab.topo.host_of(s)[0]
            tg = pc.targets(s0)
            pick = np.random.default_rng(s * 7 + d).choice(len(tg), min(targets_per_pair,
                                                                        len(tg)), replace=False)
            for i in pick.tolist():
                r = pc.check(s, d, target=tg[i])
                assert r.target == tg[i]
                out.append(r)
    record(f"{fab.spec} {ts.routing} path checks", probes=len(out),
           per_probe=float(np.mean(pc.times)))
    bad = [r.to_dict() for r in out if not r.ok]
    assert not bad, [(b["src"], b["dst"], b["udp_src"], b["problems"]) for b in bad[:3]]
    return out


# ---------------------------------------------------------------------------------------------
class TestSlimFly:
    SPEC = SF5

    def test_ports_dpids_addresses(self, fabric):
        fnet, topo = fabric.fnet, fabric.topo
        out = subprocess.run(["ovs-vsctl", "--columns=name,other_config,datapath_type",
                              "--format=csv", "list", "Bridge"], capture_output=True,
                             text=True).stdout
        for s in (0, 17, 49):
            line = next(x for x in out.splitlines() if x.startswith(f"{fnet.bridges[s]},"))
            assert f"{dpid(s):016x}" in line and "netdev" in line
            ports = fnet.ofctl("show", fnet.bridges[s])
            for a, pa, b, pb in topo.links.tolist():
                if a == s:
                    assert f" {pa}({fnet.bridges[s]}-eth{pa})" in ports
        macs = mac_str(host_macs(topo))
        for h in (0, 1, 57, 99):
            with netns(fnet.host_pid[h]):
                v6 = open("/proc/sys/net/ipv6/conf/all/disable_ipv6").read().strip()
            assert v6 == "1"
            r = subprocess.run(["mnexec", "-a", str(fnet.host_pid[h]), "ip", "-o", "link", "show",
                                fnet.host_ifname(h)], capture_output=True, text=True).stdout
            assert macs[h] in r and "mtu 1500" in r
            r = subprocess.run(["mnexec", "-a", str(fnet.host_pid[h]), "ip", "neigh"],
                               capture_output=True, text=True).stdout
            assert len(r.splitlines()) == 99 and host_ip(98 if h == 99 else 99) in r
        pr = fabric.prober
        for s, d, u in ((0, 99, 49152), (57, 3, 61234)):
            assert pr.fast_frame(s, d, u, 12345) == pr.frame(s, d, u, 12345)

    def test_min_from_files_all_pairs_and_paths(self, fabric):
        d = tables(fabric.tmp, self.SPEC, "min")
        fabric.stop_controller()
        info = install_from_files(fabric.fnet, d)
        record(f"{self.SPEC} min install_from_files", flows=info["flows"], seconds=info["seconds"])
        assert info["flows"] > 0
        all_pairs_delivered(fabric)
        res = check_paths(fabric, load_table_dir(d), n_pairs=24)
        assert max(r.hops for r in res) <= 2               # Slim Fly diameter

    def test_negative_control_wrong_forwarding_entry(self, fabric):
        d = fabric.tmp / "min"
        if not (d / "tables.npz").exists():
            d = tables(fabric.tmp, self.SPEC, "min")
        fabric.stop_controller()
        install_from_files(fabric.fnet, d)
        ts = load_table_dir(d)
        with PathChecker(fabric.fnet, ts, fabric.prober) as pc:
            src, dst = 0, 99
            assert pc.check(src, dst).ok
            f, orig, bad = corrupt_forwarding(pc, src, dst)
            s0 = fabric.topo.host_of(src)[0]
            try:
                r = pc.check(src, dst)
                assert not r.ok, r.to_dict()
                assert any("path differs" in p for p in r.problems), r.problems
                assert r.measured["ports"][0] != r.expected["ports"][0]
            finally:
                restore_flow(pc, s0, orig)
            assert pc.check(src, dst).ok

    def test_val3h_controller(self, fabric):
        ts, secs = fabric.use_controller("val-3h")
        all_pairs_delivered(fabric)
        res = check_paths(fabric, ts, n_pairs=10, targets_per_pair=3)
        assert max(r.hops for r in res) <= 3
        assert all(r.measured["switches"][1] == r.target for r in res
                   if r.hops and r.target in fabric.topo.adj[r.measured["switches"][0]])

    def test_valnta_controller(self, fabric):
        ts, secs = fabric.use_controller("val-nta")
        all_pairs_delivered(fabric)
        res = check_paths(fabric, ts, n_pairs=10, targets_per_pair=3)
        for r in res:
            sw = r.measured["switches"]
            assert len(set(sw)) == len(sw), r.to_dict()


class TestDragonfly:
    SPEC = DF

    def test_min_controller(self, fabric):
        ts, secs = fabric.use_controller("min")
        all_pairs_delivered(fabric)
        check_paths(fabric, ts, n_pairs=16)

    def test_val_controller(self, fabric):
        ts, secs = fabric.use_controller("val")
        all_pairs_delivered(fabric)
        res = check_paths(fabric, ts, n_pairs=10, targets_per_pair=3)
        # group-level Valiant: the intermediate group the udp_src chose is on the path
        grp = fabric.topo.group
        for r in res:
            if r.hops:
                assert r.target in {int(grp[u]) for u in r.measured["switches"]}, r.to_dict()

    def test_controller_restart_while_traffic_flows(self, fabric):
        """Probes flow without pause from before the controller stops until after its
        successor verified every switch; each probe's send and arrival time is kept, so the
        test sees traffic delivered with no controller, while the new one connects and reads
        the tables, and after.  The new controller re-verifies without a single mod."""
        fabric.use_controller("min")
        all_pairs_delivered(fabric)                  # datapath caches warm
        d, n, pr = fabric.ctl.table_dir, fabric.topo.n_switches, fabric.prober
        hosts = fabric.fnet.host_ids
        pairs = [(s, t) for s in hosts for t in hosts if s != t]
        np.random.default_rng(4).shuffle(pairs)
        sent, arrived, wrong, done = {}, {}, [], threading.Event()   # seq -> monotonic time

        def take(arrivals):
            now = time.monotonic()
            for h, p in arrivals:
                if p is not None and p.seq in sent:
                    if h != p.dst:
                        wrong.append(p)
                    arrived.setdefault(p.seq, now)

        def probe():
            i = 0
            while not done.is_set():
                # at most ~2,500 probes/s: the userspace datapath drops new flows' upcalls
                # beyond a few thousand a second on these 2 cores
                for s, t in pairs[i:i + 50]:
                    sent[pr.send(s, t, fast=True).seq] = time.monotonic()
                i = (i + 50) % len(pairs)
                take(pr.receive(0.005))
                done.wait(0.02)
            deadline = time.monotonic() + 10
            while len(arrived) < len(sent) and time.monotonic() < deadline:
                take(pr.receive(0.2))

        probing = threading.Thread(target=probe)
        probing.start()
        try:
            time.sleep(1.0)
            fabric.stop_controller()
            t_stop = time.monotonic()
            time.sleep(3.0)                          # fail-mode secure: forwarding goes on
            fabric.ctl = Controller(d, fabric.port, fabric.tmp, name="ctl-restart")
            t_new = time.monotonic()
            fabric.ctl.wait_for(lambda st: st["connected"] == n, what="every switch connected")
            t_conn = time.monotonic()
            fabric.ctl.wait_verified(n)
            t_verified = time.monotonic()
            time.sleep(1.0)
        finally:
            done.set()
            probing.join()
        record(f"{self.SPEC} restart", probes=len(sent), no_controller=t_new - t_stop,
               connected=t_conn - t_new, verified=t_verified - t_new)
        lost = sorted(set(sent) - set(arrived))
        assert not lost and not wrong, (len(lost), [sent[q] - t_stop for q in lost[:5]],
                                        wrong[:3])
        times = sorted(sent.values())
        assert times[0] < t_stop and times[-1] > t_verified
        # coverage, not speed: no pause long enough to hide a loss window of the restart
        assert max(b - a for a, b in zip(times, times[1:])) < (t_verified - t_stop) / 4, \
            "no long pause in the traffic"
        both = [(sent[q], arrived[q]) for q in sent]
        assert sum(t_stop < a and b < t_new for a, b in both) >= 100, \
            "sent and delivered while no controller ran"
        assert sum(t_new < a and b < t_verified for a, b in both) >= 100, \
            "sent and delivered while the new controller started, connected and read"
        assert sum(a > t_conn for a, _ in both) >= 100, "sent after every switch connected"
        per = fabric.ctl.status()["per_switch"]
        assert all(v["flow_mods"] == v["group_mods"] == v["repairs"] == 0
                   for v in per.values()) and len(per) == n
        log = fabric.ctl.log_path.read_text()
        for s in range(n):
            assert re.search(rf"switch {s} verified: \d+ flows, \d+ groups; sent 0 flow-mods, "
                             r"0 group-mods", log), s
        assert "differs from its program" not in log


class TestDSNF:
    SPEC = DSNF

    def test_dsnf_controller(self, fabric):
        ts, secs = fabric.use_controller("dsnf")
        all_pairs_delivered(fabric)
        check_paths(fabric, ts, n_pairs=20)

    def test_tables_of_another_fabric_are_refused(self, fabric):
        d = tables(fabric.tmp, "dsnf:n=16", "dsnf")
        with pytest.raises(RunFailed, match="tables for dsnf"):
            install_from_files(fabric.fnet, d)


def test_cli_emulate_prints_the_report():
    """`fabroute emulate --tls` end to end (its own net, prefix "e", after the class nets):
    Open vSwitch connects over TLS with the certificate made for the run, the controller
    checks it, and OVS's TLS settings are removed with the net."""
    r = subprocess.run([FABROUTE, "emulate", DSNF, "--routing", "dsnf", "--tls", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert rep["pairs"] == rep["delivered"] == 32 * 31 and rep["path_mismatches"] == 0
    assert rep["path_checks"] == 12 and rep["ok"] and rep["max_hops"] <= rep["hop_bound"]
    assert rep["tls"] is True
    assert subprocess.run(["ovs-vsctl", "br-exists", "es0"]).returncode == 2, "torn down"
    ssl = subprocess.run(["ovs-vsctl", "get-ssl"], capture_output=True, text=True).stdout
    others = subprocess.run("ps -eo pid,etimes,args | grep -E 'fabroute|emulat' | grep -v grep",
                            shell=True, capture_output=True, text=True).stdout
    assert "Private key" not in ssl, (ssl, r.stderr[-1500:], others[-3000:])


def test_cli_emulate_keep_serves_metrics_and_map_until_ctrl_c():
    """`fabroute emulate --keep --metrics --web` leaves the net and the controller up for a
    look: while it stays up, /metrics shows every switch verified and the map's state the
    same; Ctrl-C ends it (the run's own exit status: 0) and tears the net down."""
    import signal
    import urllib.request

    addr, web = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([FABROUTE, "emulate", "slimfly:q=3", "--routing", "min",
                             "--check", "sample", "--samples", "2", "--keep", "--json",
                             "--metrics", addr, "--web", web], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        rep = json.loads(proc.stdout.readline())     # printed before --keep waits
        assert rep["ok"] and rep["switches"] == 18
        body = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
        verified = [float(x.rsplit(" ", 1)[1]) for x in body.splitlines()
                    if x.startswith("fabroute_switch_verified{")]
        assert len(verified) == 18 and all(v == 1.0 for v in verified), body[:2000]
        state = json.loads(urllib.request.urlopen(f"http://{web}/state.json", timeout=10).read())
        assert [s["verified"] for s in state["switches"]] == [True] * 18, state["switches"]
        page = urllib.request.urlopen(f"http://{web}/", timeout=10).read().decode()
        assert "<svg" in page or "map.js" in page
        assert subprocess.run(["ovs-vsctl", "br-exists", "es0"]).returncode == 0, "still up"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert subprocess.run(["ovs-vsctl", "br-exists", "es0"]).returncode == 2, "torn down"


def test_demo_runs_every_part(tmp_path, capsys):
    """The README's `make demo`: three routings exported; VAL_3h on LMC 2 through real OpenSM +
    ibsim with zero mismatches; VAL_3h installed by the controller into Open vSwitch under
    Mininet with every host pair delivered.  (Last in this file: it builds its own net.)"""
    from fabroute.cli import main

    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    for routing in ("min", "val-3h", "ugal-l"):
        assert (tmp_path / "demo" / routing / "openflow" / "manifest.json").exists()
    g = json.loads((tmp_path / "demo" / "ib-val-3h" / "guids.json").read_text())
    assert g["lmc"] == 2 and g["ib"]["sls_used"] == 2
    err = capsys.readouterr().err                       # rich console: stderr
    assert re.search(r"│ path_sl\s*│\s*169200\s*│\s*0\s*│", err), err[-1500:]
    assert re.search(r"│\s*39800\s*│\s*39800\s*│\s*24\s*│\s*0\s*│", err), err[-1500:]
    assert "over TLS on Open vSwitch" in err
    assert re.search(r"the live fabric map on http://127\.0\.0\.1:\d+/ and Prometheus metrics "
                     r"on http://127\.0\.0\.1:\d+/metrics", " ".join(err.split())), err[:1500]
