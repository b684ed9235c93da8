"""Link capacities and paced traffic in the emulation (``emulation/mininet/shaping.py``,
``emulation/mininet/traffic.py``; docs/emulation.md, *Traffic and link capacities*).

The pure parts (rate arithmetic, frames and payloads, patterns restricted to the emulated
hosts, the receivers' counting) run anywhere; the ``ovs`` test shapes every switch port of a
real Dragonfly p=2,a=4,h=2 on Open vSwitch + Mininet, installs MIN and VAL from files and runs
worst-case and uniform traffic through it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from emulation.mininet.traffic import (
    FRAME_OVERHEAD,
    HEADER,
    MAGIC,
    TRAFFIC_PORT,
    Phase,
    Traffic,
    _Counts,
    decode,
    destinations,
    frame_bytes,
    packets_per_second,
)
from tablegen.errors import BadInput
from tablegen.topologies.spec import build

FABROUTE = str(Path(sys.executable).parent / "fabroute")
DF = "dragonfly:p=2,a=4,h=2"
DATA = Path(__file__).parent / "data"


# -- pure parts --------------------------------------------------------------------------------
def test_rate_arithmetic():
    assert FRAME_OVERHEAD == 14 + 20 + 8
    assert frame_bytes(1000) == 1042
    # 2 Mbit/s of 1,042-byte frames: 239.9 frames/s; load scales it linearly
    assert packets_per_second(1.0, 2.0, 1000) == pytest.approx(2e6 / (8 * 1042))
    assert packets_per_second(0.5, 2.0, 1000) == pytest.approx(packets_per_second(1, 1, 1000))
    assert packets_per_second(1.0, 1.0, 1472) * frame_bytes(1472) * 8 == pytest.approx(1e6)


def _offline(topo, hosts=None):
    """A Traffic without sockets: enough for frames and counting."""
    ids = list(range(topo.n_hosts)) if hosts is None else hosts
    from emulation.mininet.topo import host_ip
    from tablegen.exports.openflow import host_macs, mac_str

    fnet = SimpleNamespace(host_ids=[], topo=topo, ip=[host_ip(h) for h in range(topo.n_hosts)],
                           mac=mac_str(host_macs(topo)))
    tr = Traffic(fnet, payload=200)
    tr.hosts = ids
    return tr


def test_frame_is_a_valid_udp_datagram_with_our_payload():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    topo = build(DF)
    tr = _offline(topo)
    raw = tr.frame(5, 70, 54321, 2, 7, 123.25)
    assert len(raw) == frame_bytes(200)
    pkt = Ether(raw)
    assert pkt[Ether].src == tr.fnet.mac[5] and pkt[Ether].dst == tr.fnet.mac[70]
    assert pkt[IP].src == tr.fnet.ip[5] and pkt[IP].dst == tr.fnet.ip[70]
    assert pkt[IP].len == 20 + 8 + 200 and pkt[IP].ttl == 64 and pkt[IP].flags == "DF"
    again = pkt[IP].copy()
    del again.chksum
    assert IP(bytes(again)).chksum == pkt[IP].chksum, "IPv4 header checksum"
    assert pkt[UDP].sport == 54321 and pkt[UDP].dport == TRAFFIC_PORT and pkt[UDP].chksum == 0
    assert decode(bytes(pkt[UDP].payload)) == (5, 70, 2, 7, 123.25)
    assert decode(b"FBTX" + bytes(HEADER.size)) is None and decode(MAGIC) is None
    with pytest.raises(BadInput):
        Traffic(tr.fnet, payload=HEADER.size - 1)
    with pytest.raises(BadInput):
        Traffic(tr.fnet, payload=1473)


def test_patterns_restricted_to_the_emulated_hosts():
    topo = build(DF)                               # 9 groups of 4 switches, 2 hosts each
    everyone = list(range(topo.n_hosts))
    wc = destinations(topo, everyone, "worst-case", 1)
    assert sorted(wc) == everyone
    for s, d in wc.items():                        # group g -> every host of group g + 1
        g = topo.group[topo.host_of(s)[0]]
        assert {int(topo.group[topo.host_of(x)[0]]) for x in d} == {(g + 1) % 9}
        assert len(d) == 8
    half = [h for h in everyone if h % 2 == 0]     # hosts_per_switch=1: the first of each
    wc1 = destinations(topo, half, "worst-case", 1)
    assert sorted(wc1) == half and all(len(d) == 4 and set(d.tolist()) <= set(half)
                                       for d in wc1.values())
    uni = destinations(topo, half, "uniform", 1)
    assert all(s not in d and len(d) == len(half) - 1 for s, d in uni.items())
    # an explicit permutation; a host sent to itself or to a host not emulated stays idle
    ex = destinations(topo, half, {0: 2, 2: 2, 4: 5}, 1)
    assert {s: d.tolist() for s, d in ex.items()} == {0: [2]}
    sf = build("slimfly:q=5")
    adv = destinations(sf, list(range(sf.n_hosts)), "adversarial", 1)
    assert all(len(d) == 1 and sf.host_of(int(d[0]))[0] != sf.host_of(s)[0]
               for s, d in adv.items())
    with pytest.raises(ValueError, match="worst-case is defined for a dragonfly"):
        destinations(sf, [0, 1], "worst-case", 1)


def test_receivers_count_received_late_misrouted_and_loss():
    topo = build(DF)
    tr = _offline(topo, hosts=[0, 1, 2, 3])
    c = _Counts(tr, P=2, bin_seconds=0.5, drain=0.5, on_bin=None)
    c.start(100.0)
    c.begin_phase(0, 110.0, 4)
    c.begin_phase(1, 120.0, 4)
    c.sent[0, 0, 1] = 3          # pair (0, 1) in phase 0: 3 sent
    c.sent[1, 2, 3] = 2
    # (host, arrival, src, dst, phase, seq, send time)
    c._pending = [(1, 101.0, 0, 1, 0, 1, 100.9),            # received
                  (1, 110.4, 0, 1, 0, 2, 109.0),            # within the drain: received
                  (1, 110.6, 0, 1, 0, 3, 109.0),            # after the drain: late
                  (2, 111.0, 2, 3, 1, 1, 110.99),           # at host 2, for host 3: misrouted
                  (3, 111.0, 2, 3, 1, 2, 110.98),
                  (3, 111.0, 9, 3, 1, 2, 110.98)]           # a source not emulated: ignored
    c._count()
    assert c.received[0, 0, 1] == 2 and c.late[0, 0, 1] == 1 and c.received[1, 2, 3] == 1
    assert c.misrouted.tolist() == [0, 1]
    assert c.misrouted_examples == [{"src": 2, "dst": 3, "at": 2, "phase": 1}]
    rep = c.report([Phase("uniform", 10.0), Phase({2: 3}, 10.0, 0.2)], [0.5, 0.2], 2.0)
    assert (rep["sent"], rep["received"], rep["late"], rep["lost"], rep["misrouted"]) == \
        (5, 3, 1, 1, 1)
    p0, p1 = rep["phases"]
    assert (p0["traffic"], p0["received"], p0["late"], p0["lost"]) == ("uniform", 2, 1, 0)
    assert (p1["traffic"], p1["load"], p1["received"], p1["lost"]) == ("explicit", 0.2, 1, 1)
    # goodput: what arrived by the phase's end (the frame in the drain is received, not goodput)
    assert p0["delivered_mbps"] == pytest.approx(1 * 242 * 8 / 10 / 1e6, abs=1e-4)
    assert rep["worst_pairs"] == [{"src": 2, "dst": 3, "sent": 2, "received": 1, "loss": 0.5},
                                  {"src": 0, "dst": 1, "sent": 3, "received": 2,
                                   "loss": 0.3333}]
    assert p0["latency_ms"]["max"] == pytest.approx(1400.0)
    json.dumps(rep)                                   # JSON-ready


def test_recorded_counters_say_which_counter_counts_the_drops():
    """The fixtures of ``benchmarks/bench_traffic.py counters``: under overload the port's
    tx rate is the capacity, its queue's ``tx_errors`` count the drops (= tc), the port's
    ``tx_dropped`` stays 0; an idle port stays idle."""
    for name in ("counters-overload.json", "counters-step.json"):
        doc = json.loads((DATA / name).read_text())
        s = doc["samples"]
        first, last = s[0], s[-1]
        assert last["queues"]["3"]["tx_errors"] > 100
        assert last["queues"]["3"]["tx_errors"] == last["tc"]["3"]["dropped"]
        assert last["ports"]["3"]["tx_packets"] == last["tc"]["3"]["sent_packets"]
        assert all(x["ports"]["3"]["tx_dropped"] == x["ports"]["3"]["tx_errors"] == 0
                   for x in s)
        assert last["ports"]["5"]["tx_packets"] == first["ports"]["5"]["tx_packets"]
        # steady overload: tx bytes grow at the capacity (tagged frames)
        busy = [x for x in s if x["tc"]["3"]["backlog_packets"] >= doc["queue_packets"] - 3]
        a, b = busy[1], busy[-1]
        rate = (b["ports"]["3"]["tx_bytes"] - a["ports"]["3"]["tx_bytes"]) * 8 / (b["t"] - a["t"])
        assert rate == pytest.approx(doc["capacity_bps"], rel=0.05)


# -- the real thing ----------------------------------------------------------------------------
def tables(tmp: Path, routing: str) -> Path:
    out = tmp / routing
    r = subprocess.run([FABROUTE, "tables", DF, "--routing", routing, "--formats",
                        "json,openflow", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def kernel_udp(fnet, src: int, dst: int, n: int = 20) -> int:
    """Datagrams of ``n`` sent by a kernel UDP socket in host ``src`` that a kernel UDP
    socket in host ``dst`` receives."""
    from emulation.mininet.net import netns

    with netns(fnet.host_pid[dst]):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.bind(("0.0.0.0", 40002))
    with netns(fnet.host_pid[src]):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        for i in range(n):
            tx.sendto(b"x" * 100, (fnet.ip[dst], 40002))
        rx.settimeout(1.0)
        got = 0
        with contextlib.suppress(TimeoutError):
            while got < n:
                rx.recv(2048)
                got += 1
        return got


@pytest.mark.ovs
@pytest.mark.xdist_group("ovs")
def test_shaped_dragonfly_min_vs_val_under_worst_case(tmp_path):
    """Every switch port capped at LINK Mbit/s (20-packet queues; the recommended defaults
    for this fabric).  Worst-case traffic (group g -> g + 1) at load 0.8: under MIN each
    group's 8 hosts share its one global link to the next group, so 9 links carry
    everything — delivered at most 9 × LINK, the rest dropped at the queues; VAL spreads over
    the other groups and delivers several times more.  Uniform traffic at load 0.2 loses
    nothing.  Kernel UDP sockets need the hosts' checksum offload off.  No QoS row and no
    raised OVS send buffer outlive the net."""
    from emulation.mininet.net import emulate, install_from_files
    from emulation.mininet.shaping import htb_limits, qos_rows, send_buffer_size
    from emulation.mininet.traffic import run_traffic

    LINK, PAYLOAD = 1.0, 1400
    topo = build(DF)
    d_min, d_val = tables(tmp_path, "min"), tables(tmp_path, "val")
    bins = []
    # OVS opens its send socket at its first send, with net.core.wmem_default
    sndbuf = send_buffer_size() or int(Path("/proc/sys/net/core/wmem_default").read_text())
    with emulate(topo, prefix="q", link_mbit=LINK, queue_packets=20) as fnet:
        assert qos_rows("q") != {"QoS": [], "Queue": []}
        assert send_buffer_size() > 252 * 20 * 4096, "room for every queue full"
        tc = htb_limits("qs0-eth3")
        assert any("pfifo" in q and "limit 20p" in q for q in tc["qdiscs"]), tc
        assert any("rate 1Mbit ceil 1Mbit" in c for c in tc["classes"]), tc
        install_from_files(fnet, d_min)
        assert kernel_udp(fnet, 0, 40) == 0, "checksum left to the absent hardware: dropped"
        subprocess.run(["mnexec", "-a", str(fnet.host_pid[0]), "ethtool", "-K",
                        fnet.host_ifname(0), "tx", "off"], check=True, capture_output=True)
        assert kernel_udp(fnet, 0, 40) == 20
        low = run_traffic(fnet, [("uniform", 3.0)], load=0.2, payload=PAYLOAD)
        mn = run_traffic(fnet, [("worst-case", 5.0)], load=0.8, payload=PAYLOAD,
                         on_bin=bins.append)
        install_from_files(fnet, d_val)
        val = run_traffic(fnet, [("worst-case", 5.0)], load=0.8, payload=PAYLOAD)
    print("\nTRAFFIC", json.dumps({k: {x: r[x] for x in ("offered_mbps", "delivered_mbps",
                                                         "sent", "lost", "late", "queue_drops",
                                                         "other_drops", "latency_ms")}
                                   for k, r in (("uniform", low), ("min", mn), ("val", val))}))
    assert qos_rows("q") == {"QoS": [], "Queue": []}, "no QoS leftovers"
    assert send_buffer_size() == sndbuf
    for r in (low, mn, val):
        assert r["misrouted"] == 0 and r["duplicates"] == 0 and r["send_errors"] == 0, r
    assert low["lost"] == 0 and low["late"] == 0
    assert low["delivered_mbps"] == pytest.approx(72 * 0.2 * LINK, rel=0.02)
    # MIN: bounded by the 9 global links at LINK each (4 tag bytes per frame there); traffic
    # entering a group crosses its saturated local links too and loses some more
    assert mn["offered_mbps"] == pytest.approx(72 * 0.8 * LINK, rel=0.02)
    bound = 9 * LINK * 1442 / 1446
    assert 0.8 * bound < mn["delivered_mbps"] < 1.02 * bound
    assert mn["lost"] > 0.7 * mn["sent"]
    assert len(mn["drops_by_port"]) >= 9
    assert val["delivered_mbps"] > 2.5 * mn["delivered_mbps"]
    for r in (mn, val):           # the links drop, not the datapath (tc's count is ~exact)
        assert abs(r["other_drops"]) <= 0.03 * r["lost"], r
    assert len(bins) >= 9 and all(b["offered_mbps"] > 0 for b in bins[1:9])
