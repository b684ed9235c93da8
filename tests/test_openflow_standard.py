"""The ``standard`` OpenFlow profile: every message the controller would send for it is plain
OpenFlow 1.3 — no experimenter (Nicira) action, instruction or match field, and a mask only
on the fields OpenFlow 1.3 lets be masked (§7.2.3.7, Table 12).  The messages are the real
os-ken objects of ``controller/openflow/messages.py``, checked as objects and as the bytes
they serialise to, for every routing on Slim Fly q = 5, the programs a switch starts with,
with every UGAL-L decision non-minimal, and as program version 1 of a two-phase update."""

from __future__ import annotations

import functools
import ipaddress
import struct

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser
from os_ken.ofproto.ofproto_protocol import ProtocolDesc

from controller.openflow import messages as msg
from tablegen.exports import openflow as of
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

ROUTINGS = ("min", "val", "val-nta", "val-3h", "ugal-l")
DP = ProtocolDesc(ofp.OFP_VERSION)
# OXM fields OpenFlow 1.3 lets be masked (Table 12); every other must match exactly
MASKABLE = {ofp.OFPXMT_OFB_METADATA, ofp.OFPXMT_OFB_ETH_DST, ofp.OFPXMT_OFB_ETH_SRC,
            ofp.OFPXMT_OFB_VLAN_VID, ofp.OFPXMT_OFB_IPV4_SRC, ofp.OFPXMT_OFB_IPV4_DST,
            ofp.OFPXMT_OFB_ARP_SPA, ofp.OFPXMT_OFB_ARP_TPA, ofp.OFPXMT_OFB_ARP_SHA,
            ofp.OFPXMT_OFB_ARP_THA, ofp.OFPXMT_OFB_IPV6_SRC, ofp.OFPXMT_OFB_IPV6_DST,
            ofp.OFPXMT_OFB_IPV6_FLABEL, ofp.OFPXMT_OFB_PBB_ISID, ofp.OFPXMT_OFB_TUNNEL_ID,
            ofp.OFPXMT_OFB_IPV6_EXTHDR}
ACTIONS = {ofp.OFPAT_OUTPUT, ofp.OFPAT_COPY_TTL_OUT, ofp.OFPAT_COPY_TTL_IN,
           ofp.OFPAT_SET_MPLS_TTL, ofp.OFPAT_DEC_MPLS_TTL, ofp.OFPAT_PUSH_VLAN,
           ofp.OFPAT_POP_VLAN, ofp.OFPAT_PUSH_MPLS, ofp.OFPAT_POP_MPLS, ofp.OFPAT_SET_QUEUE,
           ofp.OFPAT_GROUP, ofp.OFPAT_SET_NW_TTL, ofp.OFPAT_DEC_NW_TTL, ofp.OFPAT_SET_FIELD,
           ofp.OFPAT_PUSH_PBB, ofp.OFPAT_POP_PBB}
INSTRUCTIONS = {ofp.OFPIT_GOTO_TABLE, ofp.OFPIT_WRITE_METADATA, ofp.OFPIT_WRITE_ACTIONS,
                ofp.OFPIT_APPLY_ACTIONS, ofp.OFPIT_CLEAR_ACTIONS, ofp.OFPIT_METER}


def oxm_problems(buf: bytes, at: int, end: int, setting: bool) -> list[str]:
    """What is not standard in the OXM TLVs of ``buf[at:end]``: another class than
    OpenFlow basic, a mask on a field that has none (``setting``: a set_field, never masked)."""
    out = []
    while at + 4 <= end:
        cls, fh, n = struct.unpack_from("!HBB", buf, at)
        field, masked = fh >> 1, fh & 1
        if cls != ofp.OFPXMC_OPENFLOW_BASIC:
            out.append(f"OXM class 0x{cls:04x} field {field}")
        elif masked and (setting or field not in MASKABLE):
            out.append(f"masked OXM field {field}")
        if setting:             # one field per set_field; zero padding follows
            break
        at += 4 + n
    return out


def action_problems(buf: bytes, at: int, end: int) -> list[str]:
    out = []
    while at + 4 <= end:
        kind, n = struct.unpack_from("!HH", buf, at)
        if kind not in ACTIONS:
            out.append(f"action type 0x{kind:04x}")
        elif kind == ofp.OFPAT_SET_FIELD:
            out += oxm_problems(buf, at + 4, at + n, True)
        at += n
    return out


def flow_mod_problems(m) -> list[str]:
    """Everything non-standard in a serialised OFPFlowMod: match, instructions, actions."""
    m.serialize()
    buf = bytes(m.buf)
    mtype, mlen = struct.unpack_from("!HH", buf, 48)
    out = [] if mtype == ofp.OFPMT_OXM else [f"match type {mtype}"]
    out += oxm_problems(buf, 52, 48 + mlen, False)
    at = 48 + (mlen + 7) // 8 * 8
    while at + 4 <= len(buf):
        kind, n = struct.unpack_from("!HH", buf, at)
        if kind not in INSTRUCTIONS:
            out.append(f"instruction type 0x{kind:04x}")
        elif kind in (ofp.OFPIT_APPLY_ACTIONS, ofp.OFPIT_WRITE_ACTIONS):
            out += action_problems(buf, at + 8, at + n)
        at += n
    return out


def group_mod_problems(m) -> list[str]:
    m.serialize()
    buf = bytes(m.buf)
    out, at = [], ofp.OFP_GROUP_MOD_SIZE
    while at + ofp.OFP_BUCKET_SIZE <= len(buf):
        (n,) = struct.unpack_from("!H", buf, at)
        out += action_problems(buf, at + ofp.OFP_BUCKET_SIZE, at + n)
        at += n
    return out


def object_problems(m) -> list[str]:
    """The same read off the os-ken objects: experimenter actions or instructions."""
    acts = [a for i in getattr(m, "instructions", []) for a in getattr(i, "actions", [])]
    acts += [a for b in getattr(m, "buckets", []) for a in b.actions]
    out = [type(a).__name__ for a in acts if isinstance(a, parser.OFPActionExperimenter)]
    out += [type(i).__name__ for i in getattr(m, "instructions", [])
            if i.type == ofp.OFPIT_EXPERIMENTER]
    return out


@functools.lru_cache(maxsize=None)
def tables(routing: str):
    return build_tables(build("slimfly:q=5"), routing)


def messages(p, u: int):
    """Every message for switch ``u``: its program (flow adds, group adds), the UGAL-L
    decisions all non-minimal (MODIFYs), and program version 1."""
    progs = [of.program(p, u)]
    if p.versions:
        progs.append(of.program(p, u, version=1))
    for prog in progs:
        yield from (msg.flow_mod(f, 1, DP) for f in prog.flows)
        yield from (msg.group_mod(g, datapath=DP) for g in prog.groups)
    if p.decide is not None:
        full = {k: 1 << p.decide["bits"] for k in of.decision_keys(p, u)}
        yield from (msg.modify_flow(f, DP) for f in of.decision_flows(p, u, full))


@pytest.mark.parametrize("routing", ROUTINGS)
def test_standard_profile_sends_only_openflow_1_3(routing):
    p = of.plan(tables(routing), profile="standard")
    seen = 0
    for u in range(p.ts.topo.n_switches):
        for m in messages(p, u):
            bad = object_problems(m) + (flow_mod_problems(m) if isinstance(m, parser.OFPFlowMod)
                                        else group_mod_problems(m))
            assert not bad, (routing, u, bad, m)
            seen += 1
    assert seen > 50 * 100


@pytest.mark.parametrize("routing", ["val-3h", "ugal-l"])
def test_the_check_finds_what_the_ovs_profile_uses(routing):
    """Negative control: the ovs profile's resubmit bucket and masked L4 ports are caught."""
    p = of.plan(tables(routing))
    found = set()
    for m in messages(p, 0):
        bad = object_problems(m) + (flow_mod_problems(m) if isinstance(m, parser.OFPFlowMod)
                                    else group_mod_problems(m))
        found |= {b.split(" field")[0] if b.startswith("masked") else b for b in bad}
    assert "NXActionResubmitTable" in found and "action type 0xffff" in found
    assert "masked OXM" in found         # udp_src / tcp_src slots


def shifted(flows, base: int) -> list:
    """``flows`` with every VID they match exactly or write raised by ``base``."""
    def v(x):
        return x + base if isinstance(x, int) and x & of.OFPVID_PRESENT else x

    return [of.Flow(f.table, f.priority,
                    tuple((k, v(x)) if k == "vlan_vid" else (k, x) for k, x in f.match),
                    tuple(a[:2] + (v(a[2]),) if a[:2] == ("set_field", "vlan_vid") else a
                          for a in f.actions)) for f in flows]


@pytest.mark.parametrize("routing", ROUTINGS)
def test_standard_profile_keeps_targets_vcs_and_classes(routing):
    """The profiles differ only in how the source choice and UGAL-L's split read a packet
    and where the egress table reads the VC, with every VID one higher: the same phase-0
    targets (with the same slot weights), the same phase-exit entries, the same forwarding
    and egress entries but for the VC carried in the metadata (``vc_in_metadata``: so the
    same paths and VCs), no group, no ``vlan_pcp`` match without an exact ``vlan_vid``
    beside it, and VID 0 neither matched nor written."""
    ts = tables(routing)
    po, ps = of.plan(ts), of.plan(ts, profile="standard")
    assert (po.vid_base, ps.vid_base) == (0, 1)
    for u in (0, 17, 49):
        a, b = of.program(po, u), of.program(ps, u)
        a_flows = shifted(a.flows, ps.vid_base)
        assert of.vc_in_metadata([f for f in a_flows if f.table > of.T_CHOICE], po.V) == \
            [f for f in b.flows if f.table > of.T_CHOICE]
        assert not b.groups
        for f in b.flows:
            m = dict(f.match)
            assert "vlan_pcp" not in m or isinstance(m.get("vlan_vid"), int), f
            assert m.get("vlan_vid") != of.OFPVID_PRESENT, f
            assert ("set_field", "vlan_vid", of.OFPVID_PRESENT) not in f.actions, f
        fwd = [f for f in a.flows if f.table == of.T_FWD and f.priority < 400]
        assert len([f for f in b.flows if f.table == of.T_FWD and f.priority < 400]) == \
            po.V * len(fwd)
        if po.choice is None:
            assert of.vc_in_metadata(a_flows, po.V) == list(b.flows)
            continue

        def slots(prog, field):
            return sorted((int(ipaddress.IPv4Address(v)) if isinstance(v, str) else v, f.actions)
                          for f in prog.flows if f.table == of.T_CHOICE
                          and field in dict(f.match) for v in [dict(f.match)[field][0]])
        udp, ip = slots(a, "udp_src"), slots(b, "ipv4_dst")
        assert [shifted([of.Flow(0, 0, (), acts)], 1)[0].actions for _, acts in udp] == \
            [acts for _, acts in ip]
        targets = {t for t, _ in of.buckets(ps, u, ps.choice)}
        assert {x[2] for f in b.flows if f.table == of.T_CHOICE for x in f.actions
                if x[:2] == ("set_field", "vlan_vid")} == {of.OFPVID_PRESENT | (2 + t)
                                                           for t in targets}


def test_tables_records_the_profile_and_verify_proves_it(tmp_path, capsys):
    """``fabroute tables --openflow-profile standard``: the manifest records it, no groups
    file is written, ``verify`` derives that profile's files again and accepts them; the
    same files under a manifest claiming the other profile (or none it knows) fail."""
    from fabroute.cli import main
    from tablegen.exports.files import openflow_profile
    from tablegen.exports.manifest import load_manifest

    out = tmp_path / "sf5"
    assert main(["tables", "slimfly:q=5", "--routing", "val-3h", "--formats", "json,openflow",
                 "--openflow-profile", "standard", "--out", str(out)]) == 0
    man = load_manifest(out)
    assert openflow_profile(man["exports"]) == "standard"
    assert not list((out / "openflow").glob("*.groups"))
    assert "resubmit" not in (out / "openflow" / "s0000.flows").read_text()
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "OpenFlow program: profile standard" in capsys.readouterr().out
    text = (out / "manifest.json").read_text()
    for other in ("ovs", "hw"):
        (out / "manifest.json").write_text(text.replace('"openflow_profile": "standard"',
                                                        f'"openflow_profile": "{other}"'))
        assert main(["verify", str(out)]) == 1
        assert "openflow" in capsys.readouterr().err


def test_ofss_datapath_id_survives_ofdatapaths_base_12_parse(monkeypatch):
    """ofsoftswitch13's ``ofdatapath -d`` reads its 12 digits with ``strtoll(arg, NULL, 12)``:
    the argument fabroute gives it is the id in base 12, so that parse returns the id (a hex
    argument would turn switch 11's id 12 = ``00000000000c`` into 0, which it refuses)."""
    from emulation.mininet import ofss
    from tablegen.errors import RunFailed

    for d in (1, 11, 12, 50, 0xABCDEF, ofss.MAX_DPID):
        arg = ofss.dpid_arg(d)
        assert len(arg) == 12 and set(arg) <= set("0123456789ab")
        assert int(arg, 12) == d
    assert f"{12:012x}"[-1] not in "0123456789ab"     # what strtoll(…, 12) stops at
    for bad in (0, ofss.MAX_DPID + 1):
        with pytest.raises(RunFailed, match="base 12"):
            ofss.dpid_arg(bad)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "ofdatapath" in ofss.available() and "ofsoftswitch13" in ofss.available()
