"""The controller's pure parts: the OpenFlow program, its os-ken messages and the
read/compare/repair decisions — no switch.  tests/test_controller_ovs.py runs the real
controller against real Open vSwitch."""

import functools
from types import SimpleNamespace

import numpy as np
import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller import messages as msg
from controller.fabric import MAX_REPAIRS, Fabric, generation_cookie
from tablegen.openflow import (T_CHOICE, choice_slots, plan, program, udp_src_for)
from tablegen.routing import build_tables
from tablegen.spec import build

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
    stats += stats_of([f for f in Fabric(stray).program(7).flows if f.table == 3][:2], 5)
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
