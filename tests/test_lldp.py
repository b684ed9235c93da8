"""Real switches without a switch (issue 26): LLDP frames, the cabling they teach, the map of
a cabled fabric onto the plan, programs renumbered onto a switch's own ports, and the
learner's decisions.  tests/test_lldp_ovs.py runs it all against Open vSwitch."""

from __future__ import annotations

import functools

import pytest
from os_ken.lib.packet import ethernet, lldp, packet
from os_ken.ofproto import ofproto_v1_3 as ofp

from controller.openflow import messages as msg
from controller.openflow.fabric import Fabric
from controller.openflow.learn import Learner
from controller.openflow.lldp import DISCOVER_FLOW, LLDP_FLOW, Cabling, frame, parse
from controller.openflow.portmap import assign, translate
from controller.openflow.update import Links, Update
from tablegen.exports.openflow import T_EGRESS, T_INGRESS, host_macs, plan, program
from tablegen.fabrics.cabled import cabled
from tablegen.fabrics.fabric import Fabric as Cabled
from tablegen.fabrics.fabric import norm_id
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from clock import Clock
from refusal import refusal
from test_controller import stats_of


@functools.lru_cache(maxsize=None)
def sf5():
    topo = build("slimfly:q=5")
    return topo, build_tables(topo, "min")


def with_plan_macs(c, topo):
    """The cabled fabric ``c`` with every host named by its planned MAC (hosts configured
    from the plan, as ``fabroute emulate`` makes them)."""
    macs = host_macs(topo).tolist()
    f = c.fabric
    return Cabled("t", f.switches, {norm_id(int(macs[c.host[h]])): d for h, d in
                                    f.hosts.items()}, f.cables)


# -- frames --------------------------------------------------------------------------------------
def test_lldp_frame_names_its_datapath_and_port():
    f = frame(0xFEDCBA9876543210, 254, "02:aa:bb:cc:dd:ee")
    assert parse(f) == (0xFEDCBA9876543210, 254)
    eth = packet.Packet(f).get_protocol(ethernet.ethernet)
    assert eth.dst == lldp.LLDP_MAC_NEAREST_BRIDGE and eth.ethertype == 0x88CC
    assert parse(f[:20]) is None and parse(b"\0" * 60) is None
    # another speaker's LLDP (chassis id a MAC) is not one of ours
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(lldp.LLDP_MAC_NEAREST_BRIDGE, "02:00:00:00:00:01",
                                       0x88CC))
    pkt.add_protocol(lldp.lldp((lldp.ChassisID(subtype=lldp.ChassisID.SUB_MAC_ADDRESS,
                                               chassis_id=b"\x02\0\0\0\0\x01"),
                                lldp.PortID(subtype=lldp.PortID.SUB_INTERFACE_NAME,
                                            port_id=b"eth0"),
                                lldp.TTL(ttl=120), lldp.End())))
    pkt.serialize()
    assert parse(bytes(pkt.data)) is None


def test_the_lldp_entry_sends_whole_frames_and_reads_back_equal():
    m = msg.flow_mod(LLDP_FLOW, 7)
    out = m.instructions[0].actions[0]
    assert out.port == ofp.OFPP_CONTROLLER and out.max_len == ofp.OFPCML_NO_BUFFER
    (st,) = stats_of([LLDP_FLOW], 7)
    assert msg.canon_stats_flow(st) == msg.canon_flow(LLDP_FLOW, 7)
    assert LLDP_FLOW.priority > DISCOVER_FLOW.priority and LLDP_FLOW.table == T_INGRESS


# -- cabling -------------------------------------------------------------------------------------

def test_cabling_learns_cables_hosts_and_moves():
    clock = Clock()
    c = Cabling(clock)
    c.switch(10, [(1, True, "aa:00:00:00:00:01"), (2, True, "aa:00:00:00:00:02"),
                  (0xFFFFFFFE, True, "aa:00:00:00:00:ff")])
    c.switch(20, [(5, True, "aa:00:00:00:00:05"), (6, True, "aa:00:00:00:00:06")])
    c.switch(30, [(9, True, "aa:00:00:00:00:09")])
    assert sorted(c.ports[10]) == [1, 2]                     # the LOCAL port is not a port
    assert c.lldp_in(20, 5, frame(10, 2, "aa:00:00:00:00:02")) == ((10, 2), (20, 5))
    assert c.lldp_in(10, 2, frame(20, 5, "aa:00:00:00:00:05")) is None   # the other way
    assert c.lldp_in(20, 6, b"garbage") is None
    assert c.host_in(10, 1, "02:00:00:00:01:00") and not c.host_in(10, 1, "02:00:00:00:01:99")
    assert not c.host_in(10, 2, "02:00:00:00:01:01")         # a cabled port holds no host
    clock.t = 4.0
    assert c.settled(3.0) and not c.settled(5.0)
    f = c.fabric()
    assert f.cables == [(("0x000000000000000a", 2), ("0x0000000000000014", 5))]
    assert f.hosts["0x0000020000000100"]["port"] == 1
    # host ports: up and no LLDP heard (20 port 6, 30 port 9: not heard, named by the port)
    assert sorted((h["switch"], h["port"]) for h in f.hosts.values()) == [
        ("0x000000000000000a", 1), ("0x0000000000000014", 6), ("0x000000000000001e", 9)]
    # the cable at 20 port 5 moves to 30 port 9: the old one is gone
    assert c.lldp_in(30, 9, frame(20, 5, "aa:00:00:00:00:05")) == ((20, 5), (30, 9))
    assert c.cables() == [((20, 5), (30, 9))] and not c.settled(3.0)
    assert c.port(30, 9, False) and c.cables() == []
    # a file that reads back equal
    assert Cabled.from_dict(c.fabric().to_dict()) == c.fabric()


# -- the map ---------------------------------------------------------------------------------------
def test_hosts_macs_choose_the_true_map_among_the_automorphisms():
    topo, _ = sf5()
    c = cabled(topo, seed=3, remove=1, spare=2)
    a = assign(with_plan_macs(c, topo), topo)
    assert a.by == "hosts"
    assert a.switch == {int(s, 16): u for s, u in c.switch.items()}
    removed = tuple(c.removed[0]["cable"])
    assert a.absent == [removed] and a.misfits == []
    for sid, u in c.switch.items():
        for fp, pp in c.port[sid].items():
            if pp in a.ports[u]:
                assert a.ports[u][pp] == fp
    # every planned port but the removed cable's ends is mapped
    s, ps, t, pt = removed
    assert ps not in a.ports[s] and pt not in a.ports[t]
    assert sum(map(len, a.ports.values())) == topo.n_hosts + 2 * (len(topo.links) - 1)


def test_without_plan_macs_the_cabling_map_explains_every_cable():
    topo, _ = sf5()
    c = cabled(topo, seed=4, remove=1, spare=0)
    a = assign(c.fabric, topo)
    assert a.by == "cabling" and len(a.absent) == 1 and not a.misfits
    planned = {(s, ps, t, pt) for s, ps, t, pt in topo.links.tolist()}
    back = {u: {fp: pp for pp, fp in p.items()} for u, p in a.ports.items()}
    for (x, px), (y, py) in c.fabric.cables:
        u, v = a.switch[int(x, 16)], a.switch[int(y, 16)]
        assert (u, back[u][px], v, back[v][py]) in planned or \
            (v, back[v][py], u, back[u][px]) in planned


def test_a_moved_cable_is_a_misfit_and_its_planned_cable_absent():
    topo, _ = sf5()
    c = cabled(topo, seed=5, move=1, spare=2)
    a = assign(with_plan_macs(c, topo), topo)
    assert a.by == "hosts" and len(a.misfits) == 1 and a.absent == [tuple(c.moved[0]["cable"])]
    assert a.match.moved          # the technician's action is named too


# -- programs on the switch's own ports ------------------------------------------------------------
def test_translate_renumbers_ports_and_leaves_out_absent_hosts():
    topo = build("dsnf:n=16")               # MIN with FAST_FAILOVER groups (Slim Fly has none)
    ts = build_tables(topo, "min")
    p = plan(ts, fast_failover=True)
    u = 0
    prog = program(p, u)
    hs = int(topo.hosts[u])
    width = hs + topo.radix
    ports = {q: width + 1 - q for q in range(1, width + 1)}      # reversed
    out = translate(prog, ports)
    assert len(out.flows) == len(prog.flows)
    ins = lambda pr: sorted(dict(f.match)["in_port"] for f in pr.flows if "in_port" in dict(f.match))  # noqa: E731
    assert ins(out) == sorted(ports[q] for q in ins(prog))
    outs = [a[1] for f in out.flows for a in f.actions if a[0] == "output"]
    assert outs and all(isinstance(x, str) or 1 <= x <= width for x in outs)
    # metadata keeps the planned out port: the egress entries still say which
    assert [dict(f.match).get("metadata") for f in out.flows if f.table == T_EGRESS] == \
        [dict(f.match).get("metadata") for f in prog.flows if f.table == T_EGRESS]
    for g, h in zip(prog.groups, out.groups):
        assert [ports[w] for w, _ in g.buckets] == [w for w, _ in h.buckets]
    # host 1 is not there: its entries go, nothing else
    gone = translate(prog, {q: v for q, v in ports.items() if q != 1})
    assert 0 < len(prog.flows) - len(gone.flows) <= 3
    # a network port a FAST_FAILOVER group watches must exist
    assert prog.groups
    watched = prog.groups[0].buckets[0][0]
    with pytest.raises(ValueError, match="group"):
        translate(prog, {q: v for q, v in ports.items() if q != watched})


def test_a_mapped_fabric_serves_programs_on_real_ports_and_checks_them():
    topo, ts = sf5()
    c = cabled(topo, seed=6, spare=2)
    a = assign(with_plan_macs(c, topo), topo)
    fab = Fabric(ts, dpids=a.dpids(topo.n_switches), ports=a.ports, lldp=True)
    sid = next(iter(c.switch))
    d, u = int(sid, 16), c.switch[sid]
    assert fab.switch_of(d) == u and fab.switch_of(1) is None
    prog = fab.program(u)
    assert LLDP_FLOW in prog.flows and prog.dpid == d
    have = list(range(1, int(c.fabric.switches[sid]["ports"]) + 1))
    assert fab.check_ports(u, have) is None                   # spare ports are fine
    host, net = fab.expected_ports(u)
    lost = sorted(net)[0]
    assert "missing" in fab.check_ports(u, [p for p in have if p != lost])
    assert fab.plan_port(u, a.ports[u][topo.hosts[u] + 1]) == topo.hosts[u] + 1
    # what the switch reports back of its program compares equal
    assert fab.compare(u, stats_of(prog.flows, fab.cookie), []).empty


# -- the learner -------------------------------------------------------------------------------
def test_learner_degrades_for_a_missing_cable_and_restores_it_when_heard():
    topo, ts = sf5()
    c = cabled(topo, seed=8, remove=1, spare=0)
    lr = Learner(ts, given=with_plan_macs(c, topo))
    links = Links(ts)
    lr.failed(links)
    s, ps, t, pt = c.removed[0]["cable"]
    assert links.failed() == {(min(s, t), max(s, t))}
    deg = links.target()
    fab = lr.fabric(deg)
    assert fab.topo.name() != topo.name() and fab.lldp and fab.ports is lr.assignment.ports
    # the cable is plugged into two new ports: LLDP hears it, it is the absent one
    inv = {u: sid for sid, u in c.switch.items()}
    top = {u: int(c.fabric.switches[inv[u]]["ports"]) + 1 for u in (s, t)}
    cable = ((int(inv[s], 16), top[s]), (int(inv[t], 16), top[t]))
    assert lr.appeared(cable, links) == (s, ps, t, pt)
    assert links.target() is ts and lr.assignment.absent == []
    assert lr.assignment.known(*cable)
    # the live update to the full tables keeps every datapath and its ports
    upd = Update(fab, ts)
    assert upd.mode == "two-phase" and upd.new.dpids == fab.dpids
    assert upd.new.ports[s][ps] == top[s]
    flows, _ = upd.new.intended(s)
    assert any(dict(f.match).get("in_port") == top[s] for _, f in flows.values())
    # a cable that fits nothing is not taken
    assert lr.appeared(((cable[0][0], 99), (cable[1][0], 98)), links) is None


def test_a_cabling_that_does_not_fit_is_one_line_and_no_map():
    topo, ts = sf5()
    lr = Learner(ts, settle=1.0)
    lr.cabling.switch(5, [(1, True, "aa:00:00:00:00:01")])
    assert lr.learn() is None and lr.assignment is None
    assert lr.error and "\n" not in lr.error
    assert not lr.ready()                # not again until something changes
    lr.cabling.switch(6, [(1, True, "aa:00:00:00:00:02")])
    lr.cabling.changed -= 2
    assert lr.ready()


@pytest.mark.parametrize("args,what", [
    (["--lldp", "--fabric", "F"], "one of them"),
    (["--fabric-out", "x.json"], "--lldp"),
    (["--lldp", "--settle", "0.1"], "settle"),
])
def test_controller_refuses_contradicting_options(tmp_path, capsys, args, what):
    args = [a if a != "x.json" else str(tmp_path / a) for a in args]
    assert what in refusal(["controller", str(tmp_path), *args], capsys)


@pytest.mark.parametrize("profile", ["ovs", "standard"])
def test_both_profiles_serve_mapped_switches_on_their_own_ports(profile):
    topo = build("slimfly:q=5")
    ts = build_tables(topo, "val-3h")
    c = cabled(topo, seed=9, spare=1)
    a = assign(with_plan_macs(c, topo), topo)
    fab = Fabric(ts, dpids=a.dpids(topo.n_switches), ports=a.ports, lldp=True, profile=profile)
    plain = Fabric(ts, profile=profile)
    for u in (0, 17):
        prog, ref = fab.program(u), plain.program(u)
        assert len(prog.flows) == len(ref.flows) + 1 and len(prog.groups) == len(ref.groups)
        own = set(a.ports[u].values())
        assert {dict(f.match)["in_port"] for f in prog.flows if "in_port" in dict(f.match)} \
            <= own
        assert {x[1] for f in prog.flows for x in f.actions
                if x[0] == "output" and isinstance(x[1], int)} <= own
        assert fab.compare(u, stats_of(prog.flows, fab.cookie), []).missing_flows == []
        if profile == "standard":
            assert not any(x[0] == "resubmit" for g in prog.groups for _, b in g.buckets
                           for x in b)
