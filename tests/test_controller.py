"""The controller's pure parts: the OpenFlow program, its os-ken messages and the
read/compare/repair decisions — no switch.  tests/test_controller_ovs.py runs the real
controller against real Open vSwitch."""

import functools
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.openflow import messages as msg
from controller.openflow.fabric import MAX_REPAIRS, Fabric, generation_cookie
from fabroute.cli import main
from tablegen.errors import RunFailed
from tablegen.exports.openflow import (
    OFPVID_PRESENT,
    T_ARRIVE,
    T_CHOICE,
    T_DECIDE,
    T_EGRESS,
    T_FWD,
    T_INGRESS,
    choice_slots,
    plan,
    program,
    udp_src_for,
)
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

ENCODER = SimpleNamespace(ofproto=ofp, ofproto_parser=parser)   # what serialize() reads


@functools.lru_cache(maxsize=None)
def ts_of(spec, routing):
    return build_tables(build(spec), routing)


def stats_of(flows, cookie):
    """What a switch holding exactly ``flows`` reports: each flow-mod serialised to the wire
    and its match and instructions parsed back, as in a flow-stats reply."""
    out = []
    for f in flows:
        m = msg.flow_mod(f, cookie, ENCODER)
        m.serialize()
        buf = bytes(m.buf)
        off = ofp.OFP_HEADER_SIZE + 40          # cookie .. pad of ofp_flow_mod
        match = parser.OFPMatch.parser(buf, off)
        off += match.length + (-match.length % 8)
        inst = []
        while off < len(buf):
            i = parser.OFPInstruction.parser(buf, off)
            inst.append(i)
            off += i.len
        out.append(SimpleNamespace(table_id=f.table, priority=f.priority, cookie=cookie,
                                   match=match, instructions=inst))
    return out


def group_stats_of(groups):
    out = []
    for g in groups:
        m = msg.group_mod(g, datapath=ENCODER)
        m.serialize()
        buf = bytes(m.buf)
        off, buckets = ofp.OFP_HEADER_SIZE + 8, []
        while off < len(buf):
            b = parser.OFPBucket.parser(buf, off)
            buckets.append(b)
            off += b.len
        out.append(SimpleNamespace(group_id=g.group_id, type=ofp.OFPGT_SELECT, buckets=buckets))
    return out


@pytest.mark.parametrize("spec,routing", [("slimfly:q=5", "val-3h"), ("slimfly:q=5", "val-nta"),
                                          ("dragonfly:p=2,a=4,h=2", "val"), ("dsnf:n=32", "dsnf")])
def test_wire_round_trip_compares_equal(spec, routing):
    fab = Fabric(ts_of(spec, routing))
    prog = fab.program(3)
    diff = fab.compare(3, stats_of(prog.flows, fab.cookie), group_stats_of(prog.groups))
    assert diff.empty, diff.summary()


def test_compare_finds_missing_stray_and_changed_entries():
    fab = Fabric(ts_of("slimfly:q=5", "val-3h"))
    prog = fab.program(0)
    flows = list(prog.flows)
    stats = stats_of(flows[1:], fab.cookie)                   # one missing
    stats += stats_of(flows[:1], fab.cookie ^ 1)              # ... present with an old cookie
    stray = ts_of("slimfly:q=5", "min")
    stats += stats_of([f for f in Fabric(stray).program(7).flows if f.table == T_FWD][:2], 5)
    diff = fab.compare(0, stats, [])
    assert diff.missing_flows == flows[:1]
    assert len(diff.extra_flows) == 2
    assert [(g.group_id, present) for g, present in diff.wrong_groups] == [(1, False)]
    # repair: groups first, stray flows deleted strictly, the changed flow re-added in place
    fab.connected(1)
    out = fab.repair(1, diff)
    kinds = [(type(m).__name__, getattr(m, "command", None)) for m in out]
    assert kinds[0] == ("OFPGroupMod", ofp.OFPGC_ADD)
    assert kinds[1:3] == [("OFPFlowMod", ofp.OFPFC_DELETE_STRICT)] * 2
    assert kinds[3:] == [("OFPFlowMod", ofp.OFPFC_ADD)]
    per = fab.status()["per_switch"]["0"]
    assert (per["flow_mods"], per["group_mods"]) == (3, 1)


def test_verdicts_end_in_failed_after_bounded_repairs():
    fab = Fabric(ts_of("slimfly:q=5", "min"))
    assert fab.connected(99) is None, "an unknown datapath is refused"
    st = fab.connected(5)
    assert st.switch == 4
    bad = fab.compare(4, [], [])
    states = [fab.verdict(5, bad) for _ in range(MAX_REPAIRS + 1)]
    assert states == ["repairing"] * MAX_REPAIRS + ["failed"]
    prog = fab.program(4)
    assert fab.verdict(5, fab.compare(4, stats_of(prog.flows, fab.cookie), [])) == "verified"
    s = fab.status()
    assert s["verified"] == 1 and s["per_switch"]["4"]["repairs"] == MAX_REPAIRS


def test_generation_cookie_names_the_tables():
    a = generation_cookie(ts_of("slimfly:q=5", "min"))
    assert a == generation_cookie(build_tables(build("slimfly:q=5"), "min"))
    assert a != generation_cookie(ts_of("slimfly:q=5", "val-3h"))
    assert 0 < a < 1 << 63


def test_choice_slots_follow_the_weights():
    bits, owner = choice_slots([1] * 49)
    assert bits == 8 and len(owner) == 256 and set(owner) == set(range(49))
    counts = np.bincount(owner)
    assert counts.min() >= 5 and counts.max() <= 6
    bits, owner = choice_slots([30, 10, 5, 4])
    counts = np.bincount(owner)
    assert bits == 4 and counts.sum() == 16 and counts[0] > counts[1] > counts[3] >= 1


def test_udp_source_port_selects_the_intermediate():
    ts = ts_of("slimfly:q=5", "val")
    p = plan(ts)
    prog = program(p, 0)
    for t in (1, 17, 49):
        port = udp_src_for(prog, t)
        slot_flows = [f for f in prog.flows if f.table == T_CHOICE and f.priority == 100
                      and dict(f.match)["ip_proto"] == 17]
        hit = [f for f in slot_flows
               if port & dict(f.match)["udp_src"][1] == dict(f.match)["udp_src"][0]]
        assert len(hit) == 1
        assert dict((a[1], a[2]) for a in hit[0].actions if a[0] == "set_field")[
            "vlan_vid"] == 0x1000 | (1 + t)
    assert udp_src_for(prog, 0) is None, "a switch is never its own intermediate"


def test_port_check_accepts_empty_host_ports_and_refuses_another_fabric():
    fab = Fabric(ts_of("slimfly:q=5", "min"))
    host, net = fab.expected_ports(0)
    assert host == {1, 2, 3, 4} and net == set(range(5, 12))
    local = 0xFFFFFFFE
    assert fab.check_ports(0, host | net | {local}) is None
    assert fab.check_ports(0, {1} | net) is None, "an emulation may attach fewer hosts"
    why = fab.check_ports(0, host | (net - {7}))
    assert "missing [7]" in why and "tables of another fabric?" in why
    assert "unexpected [12]" in fab.check_ports(0, host | net | {12})
    assert "missing" in fab.check_ports(0, host)
    # a switch a growth update added connects before its cables: served, ports listed
    fab.awaiting = {0}
    assert fab.check_ports(0, host) is None and fab.missing_ports(0, host) == sorted(net)
    assert "unexpected [12]" in fab.check_ports(0, host | {12})
    fab.awaiting = set()
    # degraded tables: the failed cable's port is still there (down), not another fabric
    from tablegen.routing.build import build_tables
    from tablegen.topologies.failures import without_links

    topo = fab.topo
    b = int(topo.adj[0, 2])
    deg = Fabric(build_tables(without_links(topo, [(0, b)]), "min"))
    assert deg.expected_ports(0)[1] == net - {7}
    assert deg.check_ports(0, host | net) is None
    assert deg.check_ports(0, host | (net - {7})) is None
    assert "unexpected [12]" in deg.check_ports(0, host | net | {12})


def choice_targets(prog) -> list[int]:
    """Every phase-0 target the source choice of ``prog`` can write (VID ``1 + t``): the
    targets of the UDP and TCP slot entries, which must be those of the SELECT group's
    buckets (the choice of other IP traffic)."""
    vid = ("set_field", "vlan_vid")
    slots = {next(a[2] for a in f.actions if a[:2] == vid) for f in prog.flows
             if f.table == T_CHOICE and f.priority == 100}
    group = {next(a[2] for a in acts if a[:2] == vid) for g in prog.groups
             for _, acts in g.buckets}
    assert slots == group, "every bucket owns a slot, and no slot leads elsewhere"
    return sorted((v & ~OFPVID_PRESENT) - 1 for v in slots)


@pytest.mark.parametrize("spec,routing", [("slimfly:q=5", "val"), ("slimfly:q=5", "val-nta"),
                                          ("slimfly:q=5", "val-3h"),
                                          ("dragonfly:p=2,a=4,h=2", "val")])
def test_every_source_choice_of_the_program_is_safe(spec, routing):
    """The source choice cannot see the destination, so it may pick what
    ``TableSet.candidates`` (what ``verify`` walks) leaves out: the destination or its group
    as intermediate, or a VAL_3h first hop that turns back through the source.  Walk every
    choice the installed program can make toward every destination: delivered, within the
    hop bound, VAL_nta without revisits, each hop on the VC the PCP entries write, and an
    acyclic channel dependency graph over (switch, port, VC)."""
    ts = ts_of(spec, routing)
    p = plan(ts)
    c, n = p.choice, ts.topo.n_switches
    progs = [program(p, u) for u in range(n)]
    pcp = ("set_field", "vlan_pcp")
    # the PCP a packet leaves with, per switch: (out port, PCP it arrived with) -> new PCP
    egress = [{(dict(f.match)["metadata"], dict(f.match)["vlan_pcp"]):
               next(a[2] for a in f.actions if a[:2] == pcp)
               for f in prog.flows if f.table == T_EGRESS and f.priority == 100}
              for prog in progs]
    cdg, flat = nx.DiGraph(), nx.DiGraph()
    outside = longest = 0
    for u, prog in enumerate(progs):
        pcp0 = {a[2] for f in prog.flows if f.table == T_INGRESS and f.priority == 100
                for a in f.actions if a[:2] == pcp}
        assert pcp0 == {c.vc_base}
        for t in choice_targets(prog):
            for d in range(n):
                if d == u:
                    continue
                w = ts.walk(u, d, c, t)
                assert w["switches"][-1] == d
                hops = list(zip(w["switches"], w["ports"], w["vcs"]))
                assert len(hops) <= c.max_hops, (u, t, d, w)
                if routing == "val-nta":
                    assert len(set(w["switches"])) == len(w["switches"]), (u, t, d, w)
                # the VC of every hop is the PCP the switches' egress entries write
                assert w["vcs"] == [c.vc_base] + [egress[s][port, vc]
                                                  for s, port, vc in hops[:-1]], (u, t, d, w)
                for a, b in zip(hops, hops[1:]):
                    cdg.add_edge(a, b)
                    flat.add_edge(a[:2], b[:2])
                outside += t not in ts.candidates(u, d, c)
                longest = max(longest, len(hops))
    assert outside > 0, "the program's choice is wider than the candidates"
    assert routing != "val-3h" or longest <= 3
    assert nx.is_directed_acyclic_graph(cdg), nx.find_cycle(cdg)
    assert not nx.is_directed_acyclic_graph(flat), "without VCs these paths would deadlock"


def test_late_death_of_a_replaced_connection_keeps_the_new_state():
    fab = Fabric(ts_of("slimfly:q=5", "min"))
    old, new = object(), object()
    fab.connected(5, old)
    st = fab.connected(5, new)                   # the switch reconnected first
    assert fab.current(5, old) is None and fab.current(5, new) is st
    assert fab.disconnected(5, old) is None, "the old connection's death is ignored"
    assert fab.switches[5] is st
    assert fab.disconnected(5, new) is st and 5 not in fab.switches
    assert fab.disconnected(5, new) is None


def test_error_names_are_os_kens():
    assert msg.error_names(5, 1) == "OFPET_FLOW_MOD_FAILED/OFPFMFC_TABLE_FULL"
    assert msg.error_names(1, 8) == "OFPET_BAD_REQUEST/OFPBRC_BUFFER_UNKNOWN"
    assert msg.error_names(99, 3) == "Unknown/Unknown"


@pytest.fixture(scope="module")
def ten_vc_tables(tmp_path_factory):
    """DSN-F n=32 VAL: 10 VCs, more than the VLAN PCP's 8."""
    d = tmp_path_factory.mktemp("vc10") / "t"
    assert main(["tables", "dsnf:n=32", "--routing", "val", "--formats", "json",
                 "--out", str(d)]) == 0
    return d


def test_controller_refuses_tables_the_pipeline_cannot_express(ten_vc_tables, capsys,
                                                               monkeypatch):
    from os_ken.base import app_manager

    def listen(*_a, **_k):
        raise AssertionError("the controller started listening")

    monkeypatch.setattr(app_manager.AppManager, "run_apps", listen)
    capsys.readouterr()
    assert main(["controller", str(ten_vc_tables), "--listen", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("fabroute: controller: val on dsnf:n=32,p=3: 10 VCs; the VLAN PCP carries "
                   "at most 8")


def test_emulate_refuses_such_tables_before_building_a_net(capsys, monkeypatch):
    import emulation.mininet.session as session

    def build(*_a, **_k):
        raise AssertionError("emulate started OVS or built a net")

    monkeypatch.setattr(session, "ensure_ovs", build)
    monkeypatch.setattr(session, "emulate", build)
    monkeypatch.setattr(session, "Controller", build)
    capsys.readouterr()
    assert main(["emulate", "dsnf:n=32", "--routing", "val"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("fabroute: emulate: val on dsnf:n=32,p=3: 10 VCs; the VLAN PCP carries "
                       "at most 8")


def test_controller_process_stderr_lands_in_its_log(ten_vc_tables, tmp_path):
    from emulation.mininet.ctl import Controller, free_port

    ctl = Controller(ten_vc_tables, free_port(), tmp_path)
    try:
        with pytest.raises(RunFailed, match=r"exited \(2\): fabroute: controller: val on "
                                                 r"dsnf:n=32,p=3: 10 VCs"):
            ctl.wait_verified(32, timeout=60)
    finally:
        ctl.stop()
    assert "10 VCs" in ctl.log_path.read_text()


def port_stats(topo, u, sent, dropped=None):
    """An ``OFPPortStats`` list of switch ``u`` with ``sent[j]`` bytes (``dropped[j]``
    packets) on network port index ``j``, packets of 1,000 bytes."""
    dropped = np.zeros(topo.radix) if dropped is None else dropped
    hs = int(topo.hosts[u])
    return [SimpleNamespace(port_no=hs + 1 + j, tx_bytes=int(sent[j]),
                            tx_packets=int(sent[j]) // 1000, tx_dropped=int(dropped[j]))
            for j in range(topo.radix) if topo.adj[u, j] >= 0]


def test_decisions_from_port_statistics_are_modifies_that_become_the_program():
    from tablegen.routing.adaptive import AdaptiveParams

    ts = ts_of("dragonfly:p=2,a=4,h=2", "ugal-l")
    topo = ts.topo
    fab = Fabric(ts)
    fab.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)          # 1 MB/s per port
    dec = fab.decisions
    u, key = 0, 5
    j = int(dec.ugal.j_min[u, key])
    before = fab.program(u)
    for t, scale in ((0.0, 0), (1.0, 1)):
        for s in range(topo.n_switches):
            sent = np.full(topo.radix, 100_000.0) * scale
            drops = np.zeros(topo.radix)
            if s == u:
                sent[j], drops[j] = 1_000_000 * scale, 500 * scale     # 1.5x offered
            dec.stats(s, t, port_stats(topo, s, sent, drops))
    changes, stale = dec.decide(1.0)
    assert not stale and set(changes) == {u}, "only the overloaded source moves"
    flows = changes[u]
    # every destination group whose minimal paths leave on the overloaded port
    keys = [k for k in range(topo.n_groups) if dec.ugal.valid[u, k] and dec.ugal.j_min[u, k] == j]
    assert key in keys
    assert {dict(f.match)["eth_dst"][0] for f in flows} == {fab.plan_.grp_prefix[k] for k in keys}
    assert all(f.actions[-1] == ("goto_table", T_CHOICE) for f in flows)
    assert dec.ugal.share[u, key] > 0
    msgs = fab.decided(u, flows)
    for m, f in zip(msgs, flows):
        assert m.command == ofp.OFPFC_MODIFY_STRICT and m.table_id == T_DECIDE
        assert m.match.to_jsondict() == msg.match(f).to_jsondict()
        m.datapath = ENCODER
        m.serialize()
    # the decision is the program now: a switch holding it is verified, the old one not
    after = fab.program(u)
    assert [f for f in after.flows if f not in before.flows] == sorted(
        flows, key=after.flows.index)
    # read back as the app does: the decision entries of the destinations decided
    dsts = {dict(f.match)["eth_dst"] for f in flows}
    of_dsts = [f for f in after.flows if f.priority == 150 and dict(f.match)["eth_dst"] in dsts]
    assert len(of_dsts) == len(dsts) * 2 * 4
    assert fab.compare(u, stats_of(of_dsts, fab.cookie), [], eth_dst=dsts).empty
    stale_ones = [f for f in before.flows if f.priority == 150
                  and dict(f.match)["eth_dst"] in dsts]
    old = fab.compare(u, stats_of(stale_ones, fab.cookie), [], eth_dst=dsts)
    assert sorted(map(str, old.missing_flows)) == sorted(map(str, flows))
    assert fab.status()["adaptive"]["decision_flow_mods"] == len(flows)
    # the source stops answering: after max_age polls its estimates expire -> MIN again
    for s in range(1, topo.n_switches):
        dec.stats(s, 5.0, port_stats(topo, s, np.full(topo.radix, 500_000.0)))
    changes, stale = dec.decide(5.0)
    assert stale == [u] and dec.ugal.share[u].max() == 0
    assert all(f.actions[-1] == ("goto_table", T_ARRIVE) for f in changes[u])


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_share_of_inverts_blocks_of(bits):
    from tablegen.routing.adaptive import blocks_of, share_of

    for m in range((1 << bits) + 1):
        assert share_of(blocks_of(m, bits), bits) == m
    assert share_of([False] * bits + [True], bits) is None     # the last block alone
    assert share_of([True] * bits, bits) is None                # one flag short


def test_a_standby_adopts_the_decisions_a_switch_holds():
    """What a new master (or a standby) reads in the decision table becomes its program:
    every valid share a master set, no key whose entries disagree or that allows no detour."""
    from dataclasses import replace

    from tablegen.exports.openflow import IPPROTO_TCP
    from tablegen.routing.adaptive import AdaptiveParams

    ts = ts_of("dragonfly:p=2,a=4,h=2", "ugal-l")
    master, standby = Fabric(ts), Fabric(ts)
    for f in (master, standby):
        f.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)
    u = 3
    dec = master.decisions
    valid = [k for k in range(ts.topo.n_groups) if dec.ugal.valid[u, k]]
    assert len(valid) >= 3
    slots = 1 << dec.p.split_bits
    for i, k in enumerate(valid):
        dec.ugal.share[u, k] = (i * 3 + 1) % (slots + 1)
    held = master.program(u)
    want = {k: int(dec.ugal.share[u, k]) for k in valid}
    assert standby.compare(u, stats_of(held.flows, master.cookie),
                           group_stats_of(held.groups)).missing_flows, "differs before"
    n = standby.adopt(u, stats_of(held.flows, master.cookie))
    assert n == sum(1 for m in want.values() if m)
    assert {k: int(standby.decisions.ugal.share[u, k]) for k in valid} == want
    assert standby.compare(u, stats_of(held.flows, master.cookie),
                           group_stats_of(held.groups)).empty
    assert standby.status()["adaptive"]["adopted"] == n
    # a switch whose UDP and TCP entries of one key disagree: that key is not taken
    fresh = Fabric(ts)
    fresh.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)
    k0 = next(k for k in valid if want[k])
    prefix = master.plan_.grp_prefix[k0]
    odd = [replace(f, actions=(("goto_table", T_ARRIVE),))
           if f.table == T_DECIDE and dict(f.match).get("eth_dst", (None,))[0] == prefix
           and dict(f.match)["ip_proto"] == IPPROTO_TCP else f for f in held.flows]
    fresh.adopt(u, stats_of(odd, master.cookie))
    assert fresh.decisions.ugal.share[u, k0] == 0
    assert all(fresh.decisions.ugal.share[u, k] == want[k] for k in valid if k != k0)
    # a key the routing allows no detour toward (here: made so) stays minimal
    k1 = next(k for k in valid if want[k] and k != k0)
    fresh.decisions.ugal.valid[u, k1] = False
    fresh.decisions.ugal.share[u, k1] = 0
    assert fresh.adopt(u, stats_of(held.flows, master.cookie)) == 1      # k0 only
    assert fresh.decisions.ugal.share[u, k1] == 0


def test_statistics_of_a_real_switch_are_read_on_its_own_port_numbers():
    """A mapped switch (issue 26) reports its ports under its own numbers: the estimator
    files each under the planned port it is cabled as, so an overloaded port moves the same
    decisions as on the plan's numbering, and a spare port is ignored."""
    from emulation.mininet.topo import random_wiring
    from tablegen.routing.adaptive import AdaptiveParams

    ts = ts_of("dragonfly:p=2,a=4,h=2", "ugal-l")
    topo = ts.topo
    wiring = random_wiring(topo, seed=4, leave_out=0)
    real = Fabric(ts, ports={s: dict(wiring.ports[s]) for s in range(topo.n_switches)})
    plain = Fabric(ts)
    u = 0
    for fab in (real, plain):
        fab.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)
        j = int(fab.decisions.ugal.j_min[u, 5])
        for t, scale in ((0.0, 0), (1.0, 1)):
            for s in range(topo.n_switches):
                sent = np.full(topo.radix, 100_000.0) * scale
                drops = np.zeros(topo.radix)
                if s == u:
                    sent[j], drops[j] = 1_000_000 * scale, 500 * scale
                stats = port_stats(topo, s, sent, drops)
                if fab is real:
                    for x in stats:
                        x.port_no = wiring.port(s, x.port_no)
                    stats.append(SimpleNamespace(port_no=99, tx_bytes=10**9, tx_packets=10**6,
                                                 tx_dropped=10**4))     # not in the map
                fab.decisions.stats(s, t, stats)
    assert any(wiring.port(u, p) != p for p in wiring.ports[u])
    got, want = real.decisions.decide(1.0)[0], plain.decisions.decide(1.0)[0]
    assert set(got) == set(want) == {u}
    assert sorted(map(str, got[u])) == sorted(map(str, want[u]))
