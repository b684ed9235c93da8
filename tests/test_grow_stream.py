"""The building blocks of live table updates on real Open vSwitch + Mininet: a probe stream that
runs across a change (``emulation/mininet/stream.py``), growing a running net and taking links
down (``emulation/mininet/grow.py``).  The tables come from files (``fabroute tables`` →
``install_from_files``, one atomic ``ovs-ofctl bundle`` per bridge): the controller-free
baseline.  One DSN-F n=16 net for the whole module (prefix ``gs``), grown to n=18 by the last
test.  docs/emulation.md, *Growing a running net, link failures, probe streams*.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulation.mininet.grow import add_cables, add_switches, cables_between, set_link
from emulation.mininet.net import emulate, install_from_files
from emulation.mininet.stream import STREAM_PORT, ProbeStream, default_pairs, reachable_after
from tablegen.errors import BadInput, RunFailed
from tablegen.exports.files import load_table_dir
from tablegen.exports.openflow import dpid
from tablegen.topologies.dsnf import add_nodes
from tablegen.topologies.spec import build

pytestmark = [pytest.mark.ovs, pytest.mark.xdist_group("ovs")]

FABROUTE = str(Path(sys.executable).parent / "fabroute")
PREFIX = "gs"
RATE = 200.0                                  # probes/s per pair


def tables(out: Path, spec: str) -> Path:
    r = subprocess.run([FABROUTE, "tables", spec, "--routing", "dsnf", "--formats",
                        "json,openflow", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def record(what: str, **kv):
    """Measured values, printed (pytest -s shows them; docs/emulation.md quotes them)."""
    print(f"\nEMU-TIME {what} " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else
                                            f"{k}={v}" for k, v in kv.items()))


@pytest.fixture(scope="module")
def fab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grow")
    t16, t18 = tables(tmp / "t16", "dsnf:n=16"), tables(tmp / "t18", "dsnf:n=18")
    topo = build("dsnf:n=16")
    with emulate(topo, prefix=PREFIX) as fnet:
        install_from_files(fnet, t16)
        yield {"fnet": fnet, "topo": topo, "t16": t16, "t18": t18}


def ofports() -> dict[str, int]:
    out = subprocess.run(["ovs-vsctl", "--format=json", "--columns=name,ofport", "list",
                          "Interface"], capture_output=True, text=True, check=True).stdout
    return {row[0]: row[1] for row in json.loads(out)["data"]}


def bridge_ports(fnet, s: int) -> set[str]:
    out = subprocess.run(["ovs-vsctl", "list-ports", fnet.bridges[s]], capture_output=True,
                         text=True, check=True).stdout
    return set(out.split())


def bridge_row(name: str) -> dict:
    out = subprocess.run(["ovs-vsctl", "--format=json", "--columns=datapath_type,fail_mode,"
                          "protocols,controller,other_config", "list", "Bridge", name],
                         capture_output=True, text=True, check=True).stdout
    return dict(zip(json.loads(out)["headings"], json.loads(out)["data"][0]))


def path_links(ts, topo, src: int, dst: int) -> set[tuple[int, int]]:
    sw = ts.walk(topo.host_of(src)[0], topo.host_of(dst)[0])["switches"]
    return {(min(a, b), max(a, b)) for a, b in zip(sw, sw[1:])}


# ---------------------------------------------------------------------------------------------
def test_static_stream_loses_nothing(fab):
    fnet = fab["fnet"]
    with ProbeStream(fnet, rate=RATE) as st:
        time.sleep(3.0)
    rep = st.report()
    record("dsnf:n=16 static stream", sent=rep["probes_sent"], lost=rep["lost"],
           max_gap_ms=rep["max_gap_ms"], p99_ms=rep["latency_ms"]["p99"])
    assert rep["pairs"] == 16
    assert rep["probes_sent"] >= 0.8 * 3.0 * RATE * 16, rep
    assert rep["send_errors"] == 0
    assert (rep["lost"], rep["misrouted"], rep["duplicated"]) == (0, 0, 0), rep
    assert rep["delivered"] == rep["probes_sent"] and rep["loss_spans"] == []
    # coverage, not speed: "lost 0" says something only if the sender never paused for a
    # large part of the window (a loaded CI host has paused it for 0.4 s)
    assert rep["max_gap_ms"] < 3000.0 / 3, rep


def test_stream_sees_a_misdelivery(fab):
    """Negative control: a flow that sends one pair's probes back out of the source's own host
    port (``in_port``) delivers them to the source host, whose MAC they do not carry — the
    stream's raw receivers see them (``PACKET_OTHERHOST``) as misrouted, and lost."""
    fnet, topo = fab["fnet"], fab["topo"]
    src, dst = default_pairs(fnet.host_ids)[3]
    s, port = topo.host_of(src)
    match = f"table=0,priority=300,in_port={port},udp,tp_dst={STREAM_PORT}"
    with ProbeStream(fnet, rate=RATE) as st:
        time.sleep(0.5)
        fnet.ofctl("add-flow", fnet.bridges[s], f"{match},actions=in_port")
        time.sleep(0.5)
        fnet.ofctl("--strict", "del-flows", fnet.bridges[s], match)
        time.sleep(0.5)
    rep = st.report()
    assert rep["misrouted"] > 0.5 * 0.5 * RATE, rep
    assert rep["lost"] == rep["misrouted"] and rep["duplicated"] == 0, rep
    assert {(x["src"], x["dst"], x["at"]) for x in rep["misrouted_examples"]} == {
        (src, dst, src)}
    assert [(p["src"], p["dst"]) for p in rep["lost_by_pair"]] == [(src, dst)]


def test_link_down_loses_only_after_the_event(fab):
    fnet, topo = fab["fnet"], fab["topo"]
    ts = load_table_dir(fab["t16"])
    pairs = default_pairs(fnet.host_ids)
    a, b = sorted(path_links(ts, topo, *pairs[0]))[0]
    hit = {p for p in pairs if (a, b) in path_links(ts, topo, *p)}
    (x, px, y, py), = cables_between(fnet, a, b)
    with ProbeStream(fnet, pairs, rate=RATE) as st:
        time.sleep(1.0)
        t_call = time.monotonic()
        t_down = set_link(fnet, a, b, False)
        time.sleep(0.3)
        states = {subprocess.run(["ovs-vsctl", "get", "Interface", name, "link_state"],
                                 capture_output=True, text=True).stdout.strip()
                  for name in (f"{fnet.bridges[x]}-eth{px}", f"{fnet.bridges[y]}-eth{py}")}
        time.sleep(0.7)
        t_up = set_link(fnet, a, b, True)
        time.sleep(1.0)
    rep = st.report(t_down)
    record("dsnf:n=16 link down", link=f"{a}:{b}", pairs_hit=len(hit), lost=rep["lost"],
           set_link_ms=(t_down - t_call) * 1e3, first_lost_ms=rep["first_lost_ms"],
           last_lost_ms=rep["last_lost_ms"], up_ms=(t_up - t_down) * 1e3)
    assert states == {"down"}                 # ovs-vswitchd saw it (port status to controllers)
    assert rep["misrouted"] == 0 and rep["duplicated"] == 0, rep
    assert {(p["src"], p["dst"]) for p in rep["lost_by_pair"]} == hit
    # every lost probe was sent after set_link was called (less the ~ms one spends in
    # flight) and before the link came back (plus the port's bring-up in the datapath after
    # the command returned: a probe 0.6 ms after it was seen lost); the stream went on
    in_flight, bring_up = 10.0, 50.0
    assert rep["first_lost_ms"] >= (t_call - t_down) * 1e3 - in_flight, rep
    assert rep["last_lost_ms"] <= (t_up - t_down) * 1e3 + bring_up, rep
    assert all(s_["from_ms"] >= (t_call - t_down) * 1e3 - in_flight for s_ in rep["loss_spans"])
    assert rep["lost"] >= 0.7 * len(hit) * RATE * (t_up - t_down), rep
    assert rep["max_gap_ms"] < (t_up - t_down) * 1e3 / 2, rep   # coverage of the outage
    with pytest.raises(BadInput):
        set_link(fnet, 0, next(s for s in range(16) if s and s not in topo.adj[0]), False)


def test_grow_16_to_18_under_the_stream(fab):
    fnet, topo = fab["fnet"], fab["topo"]
    new, diff = add_nodes(topo, 2)
    old_ports = {s: bridge_ports(fnet, s) for s in range(topo.n_switches)}
    old_hosts = fnet.host_ids
    with ProbeStream(fnet, rate=RATE) as st:
        time.sleep(0.5)
        t0 = time.monotonic()
        steps = add_switches(fnet, new, diff)
        # the new bridges hold only their host ports; the old ones are untouched
        for s in (16, 17):
            assert bridge_ports(fnet, s) == {f"{fnet.bridges[s]}-eth1"}
        assert {s: bridge_ports(fnet, s) for s in range(16)} == old_ports
        with pytest.raises(RunFailed):            # no cables, no tables: silent
            reachable_after(fnet, [16, 17], time.monotonic(), timeout=0.3)
        cables = add_cables(fnet, diff.added)
        inst = install_from_files(fnet, fab["t18"])
        t_inst = time.monotonic()
        reach = reachable_after(fnet, [16, 17], t_inst, sources=[0, 9], timeout=5.0)
        time.sleep(0.5)
    rep = st.report(t0)
    record("dsnf:n=16->18 grow", **{f"{k}_ms": (v - t0) * 1e3 for k, v in steps.items()},
           **{f"cables_{k}_ms": (v - steps["neighbours"]) * 1e3 for k, v in cables.items()},
           install_s=inst["seconds"], reachable_s=reach, lost=rep["lost"],
           max_gap_ms=rep["max_gap_ms"])
    assert list(steps) == ["hosts", "bridges", "neighbours"]
    assert t0 < steps["hosts"] <= steps["bridges"] <= steps["neighbours"] <= cables["veths"] \
        <= cables["ports"]
    assert reach > 0            # reachable_after raises if the new hosts never answer
    # the paths of the old pairs are the same in both table sets and each bridge's bundle is
    # atomic: the stream between old hosts loses nothing across the growth
    assert rep["probes_sent"] > 0 and rep["send_errors"] == 0
    assert (rep["lost"], rep["misrouted"], rep["duplicated"]) == (0, 0, 0), rep
    # the grown net: topology, hosts, plans, every bridge with exactly its ports and numbers
    assert fnet.topo is new and fnet.host_ids == old_hosts + [16, 17]
    assert len(fnet.bridges) == 18 and fnet.mac[17] == "02:00:00:00:05:00"
    got = ofports()
    for s in range(18):
        want = {f"{fnet.bridges[s]}-eth{p}": p for p in fnet.switch_ports(s)}
        assert bridge_ports(fnet, s) == set(want), s
        assert {n: got[n] for n in want} == want
    assert sum(len(bridge_ports(fnet, s)) for s in range(18)) == 18 + 2 * len(new.links)
    # the new bridges are configured like the old ones (datapath id = switch + 1)
    r0, r17 = bridge_row(fnet.bridges[0]), bridge_row(fnet.bridges[17])
    for k in ("datapath_type", "fail_mode", "protocols", "controller"):
        assert r17[k] == r0[k], k
    assert dict(r17["other_config"][1])["datapath-id"] == f"{dpid(17):016x}"
    with pytest.raises(BadInput):              # nothing left to add
        add_switches(fnet, new, diff)
