"""OpenFlow 1.3 messages from fabroute's flow records, and their canonical forms.

Pure functions over os-ken's OpenFlow 1.3 parser classes (``os_ken.ofproto.ofproto_v1_3`` and
``ofproto_v1_3_parser``): no datapath, no socket, so everything here is unit-tested without a
switch.  :func:`canon_flow` / :func:`canon_group` reduce what we mean to install and what a
switch reports back (flow stats, group descriptions) to one comparable form.
"""

from __future__ import annotations

import json

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tablegen.exports.openflow import Flow, Group

__all__ = ["actions", "canon_flow", "canon_group", "canon_stats_flow", "canon_stats_group",
           "delete_flow", "error_names", "flow_mod", "group_delete", "group_mod", "instructions",
           "match", "modify_flow"]

ALL_META = 0xFFFFFFFFFFFFFFFF


# os-ken builds a match or an action at about 0.1 ms; most entries repeat from switch to switch
# (forwarding by destination), so a live update's thousands of messages share them
_CACHE_MAX = 1 << 17
_matches: dict = {}
_canon_inst: dict = {}


def _cached(cache: dict, key, make):
    v = cache.get(key)
    if v is None:
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        v = cache[key] = make()
    return v


def match(f: Flow) -> parser.OFPMatch:
    """The flow's match (one object per distinct match: messages only read it)."""
    return _cached(_matches, f.match, lambda: parser.OFPMatch(**dict(f.match)))


def actions(acts) -> list:
    """Apply-actions of a flow or bucket (instructions are left out)."""
    out = []
    for a in acts:
        kind = a[0]
        if kind == "push_vlan":
            out.append(parser.OFPActionPushVlan(a[1]))
        elif kind == "pop_vlan":
            out.append(parser.OFPActionPopVlan())
        elif kind == "set_field":
            out.append(parser.OFPActionSetField(**{a[1]: a[2]}))
        elif kind == "output" and a[1] == "controller":     # the whole frame (LLDP)
            out.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))
        elif kind == "output":
            port = ofp.OFPP_IN_PORT if a[1] == "in_port" else a[1]
            out.append(parser.OFPActionOutput(port, 0))
        elif kind == "set_queue":
            out.append(parser.OFPActionSetQueue(a[1]))
        elif kind == "group":
            out.append(parser.OFPActionGroup(a[1]))
        elif kind == "resubmit":
            # Nicira actions number ports in 16 bits: 0xfff8 is OpenFlow 1.0's OFPP_IN_PORT
            out.append(parser.NXActionResubmitTable(in_port=0xFFF8, table_id=a[1]))
        elif kind not in ("write_metadata", "goto_table"):
            raise ValueError(f"unknown action {a!r}")
    return out


def instructions(f: Flow) -> list:
    inst = []
    apply = actions(f.actions)
    if apply:
        inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, apply))
    for a in f.actions:
        if a[0] == "write_metadata":
            inst.append(parser.OFPInstructionWriteMetadata(a[1], ALL_META))
        elif a[0] == "goto_table":
            inst.append(parser.OFPInstructionGotoTable(a[1]))
    return inst


def flow_mod(f: Flow, cookie: int, datapath=None) -> parser.OFPFlowMod:
    """Add (or overwrite: same table, priority and match) one flow."""
    return parser.OFPFlowMod(datapath, cookie=cookie, table_id=f.table,
                             command=ofp.OFPFC_ADD, priority=f.priority, match=match(f),
                             instructions=instructions(f))


def modify_flow(f: Flow, datapath=None) -> parser.OFPFlowMod:
    """Replace the instructions of exactly one flow (strict: same table, priority and
    match); its cookie and counters stay."""
    return parser.OFPFlowMod(datapath, table_id=f.table, command=ofp.OFPFC_MODIFY_STRICT,
                             priority=f.priority, match=match(f), instructions=instructions(f))


def delete_flow(table: int, priority: int, m: parser.OFPMatch,
                datapath=None) -> parser.OFPFlowMod:
    """Delete exactly one flow (strict: same table, priority and match)."""
    return parser.OFPFlowMod(datapath, table_id=table, command=ofp.OFPFC_DELETE_STRICT,
                             priority=priority, match=m, out_port=ofp.OFPP_ANY,
                             out_group=ofp.OFPG_ANY)


def error_names(type_: int, code: int) -> str:
    """os-ken's names of an OpenFlow 1.3 error type and code, ``TYPE/CODE`` (e.g.
    ``OFPET_FLOW_MOD_FAILED/OFPFMFC_TABLE_FULL``; ``Unknown`` for numbers 1.3 does not
    define)."""
    t = ofp.ofp_error_type_to_str(type_).rsplit("(", 1)[0]
    return f"{t}/{ofp.ofp_error_code_to_str(type_, code).rsplit('(', 1)[0]}"


def group_delete(group_id: int, datapath=None) -> parser.OFPGroupMod:
    """Delete one group (its type is not matched on delete)."""
    return parser.OFPGroupMod(datapath, ofp.OFPGC_DELETE, ofp.OFPGT_SELECT, group_id, [])


def group_mod(g: Group, command: int = ofp.OFPGC_ADD, datapath=None) -> parser.OFPGroupMod:
    if g.kind == "ff":     # FAST_FAILOVER: the first bucket whose watched port is up
        buckets = [parser.OFPBucket(weight=0, watch_port=port, watch_group=ofp.OFPG_ANY,
                                    actions=actions(acts)) for port, acts in g.buckets]
        return parser.OFPGroupMod(datapath, command, ofp.OFPGT_FF, g.group_id, buckets)
    buckets = [parser.OFPBucket(weight=w, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                actions=actions(acts)) for w, acts in g.buckets]
    return parser.OFPGroupMod(datapath, command, ofp.OFPGT_SELECT, g.group_id, buckets)


# ---------------------------------------------------------------------------------------------
# canonical forms
# ---------------------------------------------------------------------------------------------
def _canon_value(v):
    if isinstance(v, tuple):
        return tuple(_canon_value(x) for x in v)
    return v.lower() if isinstance(v, str) else int(v)


def _canon_match(m) -> tuple:
    return tuple(sorted((k, _canon_value(v)) for k, v in m.items()))


def _strip_len(d):
    if isinstance(d, dict):
        return {k: _strip_len(v) for k, v in d.items() if k not in ("len", "max_len")}
    if isinstance(d, list):
        return [_strip_len(x) for x in d]
    return d


def _canon_action(a) -> str:
    return json.dumps(_strip_len(a.to_jsondict()), sort_keys=True)


def _canon_instructions(inst) -> tuple:
    out = []
    for i in inst:
        if isinstance(i, parser.OFPInstructionActions):
            out.append(("apply" if i.type == ofp.OFPIT_APPLY_ACTIONS else "write",
                        tuple(_canon_action(a) for a in i.actions)))
        elif isinstance(i, parser.OFPInstructionWriteMetadata):
            out.append(("meta", int(i.metadata), int(i.metadata_mask)))
        elif isinstance(i, parser.OFPInstructionGotoTable):
            out.append(("goto", int(i.table_id)))
        else:
            out.append(("other", _canon_action(i)))
    return tuple(sorted(out))


def canon_flow(f: Flow, cookie: int) -> tuple:
    """``(table, priority, match)`` key and ``(cookie, instructions)`` value of a flow we mean
    to install, in the form :func:`canon_stats_flow` gives a switch's report."""
    key = (f.table, f.priority, _cached(_canon_inst, ("m", f.match),
                                        lambda: _canon_match(match(f))))
    return key, (cookie, _cached(_canon_inst, ("i", f.actions),
                                 lambda: _canon_instructions(instructions(f))))


def canon_stats_flow(st) -> tuple:
    """The same for one ``OFPFlowStats`` entry of a flow-stats reply."""
    return (int(st.table_id), int(st.priority), _canon_match(st.match)), (
        int(st.cookie), _canon_instructions(st.instructions))


def canon_group(g: Group) -> tuple:
    """``group id`` and ``(type, buckets)``; a bucket is its weight (SELECT) or watched port
    (FAST_FAILOVER) and its actions."""
    kind = ofp.OFPGT_FF if g.kind == "ff" else ofp.OFPGT_SELECT
    return g.group_id, _cached(_canon_inst, ("g", kind, g.buckets), lambda: (kind, tuple(
        (int(w), tuple(_canon_action(a) for a in actions(acts))) for w, acts in g.buckets)))


def canon_stats_group(st) -> tuple:
    """The same for one ``OFPGroupDescStats`` entry."""
    ff = int(st.type) == ofp.OFPGT_FF
    return int(st.group_id), (int(st.type), tuple(
        (int(b.watch_port if ff else b.weight), tuple(_canon_action(a) for a in b.actions))
        for b in st.buckets))
