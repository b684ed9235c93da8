"""The OpenFlow 1.3 program of a table set: every flow entry and group of every switch.

One pure function, :func:`program`, turns a :class:`~tablegen.tables.TableSet` into plain,
serialisable records (:class:`Flow`, :class:`Group`).  Both consumers read those records:
the text export (``ovs-ofctl`` files, :mod:`~tablegen.exports.openflow_text`) and the
controller, which turns
them into os-ken messages (``controller/openflow/messages.py``).  What is exported is exactly what is
installed.  ``docs/openflow.md`` specifies the pipeline.

Addressing: host MACs ``02:GG:GG:LL:LL:EE`` (group, rank in group, host index), datapath id
``switch + 1``.  Header: VLAN VID = phase (0: phase 1; ``1 + t``: phase 0 toward target
``t``), VLAN PCP = the VC of the next hop, metadata = the chosen out port.

Pipeline: table 0 ingress, 1 decisions (UGAL-L), 2 source choice, 3 phase exit, 4 forwarding,
5 egress.

Profiles (:data:`PROFILES`): ``ovs`` splits flows by masked L4 source ports and sends other
traffic to a SELECT group whose buckets end with Open vSwitch's ``resubmit``; ``standard``
uses only what OpenFlow 1.3 itself defines (no vendor action, no mask on a field the
specification does not let be masked): the source choice and UGAL-L's split are masked
IPv4 address matches, and no group at all.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from tablegen.errors import NotExpressible
from tablegen.routing.adaptive import blocks_of, share_blocks
from tablegen.routing.walk import group_majority
from tablegen.tables import PathClass, TableSet
from tablegen.topology import Topology

__all__ = ["CHOICE_BITS_MAX", "DECIDE_PRIORITY", "VC_SHIFT", "Flow", "Group", "PROFILES", "Program",
           "SPLIT_BITS",
           "T_ARRIVE", "VERSION_BIT", "is_stamp", "version_flows", "versioned",
           "T_CHOICE", "T_DECIDE", "T_EGRESS", "T_FWD", "T_INGRESS", "choice_slots", "dpid",
           "host_macs", "mac_str", "plan", "program",
           "switch_of_dpid", "udp_src_for"]

T_INGRESS, T_DECIDE, T_CHOICE, T_ARRIVE, T_FWD, T_EGRESS = 0, 1, 2, 3, 4, 5
GROUP_MASK = "ff:ff:ff:00:00:00"
SWITCH_MASK = "ff:ff:ff:ff:ff:00"
MAX_PCP_VCS = 8                   # 3-bit PCP
MAX_VID = 4094                    # 4095 is reserved
VERSION_BIT = 0x800               # VID bit carrying the program version (two-phase updates)
FF_SHIFT, FF_MASK = 16, 0xFFFF    # metadata = out port | backup port << 16 (fast failover)
VC_SHIFT = 32                     # standard profile: metadata also carries the VC (<< 32)
FF_GROUP_BASE = 0x100             # FAST_FAILOVER group (port j, backup b, VC v): + (j, b, v)
GROUP_VERSION = 0x10000           # group ids of version 1 are those of version 0 plus this
OFPVID_PRESENT = 0x1000
CHOICE_BITS_MAX = 12              # source-choice slots are the low bits of the L4 source port
SPLIT_BITS = 3                    # UGAL-L's decision blocks: shares in steps of 1/8 of the flows
DECIDE_PRIORITY = 150             # decision entries (table T_DECIDE, a miss entry below)
ETH_IPV4, IPPROTO_TCP, IPPROTO_UDP = 0x0800, 6, 17
# the pipelines a program can be written for (docs/openflow.md, "Profiles")
PROFILES = ("ovs", "standard")
# any VID: OpenFlow 1.3's prerequisite of a vlan_pcp match and (OVS) of setting VLAN fields
TAGGED = ("vlan_vid", (OFPVID_PRESENT, OFPVID_PRESENT))


@dataclass(frozen=True)
class Flow:
    """One flow entry.

    ``match``: ``(field, value)`` pairs with os-ken OXM names (``in_port``, ``eth_dst``,
    ``vlan_vid`` — ``OFPVID_PRESENT | vid`` or 0 for untagged —, ``vlan_pcp``, ``eth_type``,
    ``ip_proto``, ``udp_src``, ``tcp_src``, ``metadata``); a masked value is a ``(value,
    mask)`` pair.  ``actions``: ``("push_vlan", ethertype)``, ``("set_field", field,
    value)``, ``("pop_vlan",)``, ``("output", port | "in_port")``, ``("set_queue", q)``,
    ``("group", id)``, ``("write_metadata", value)``, ``("goto_table", table)``; the last
    two are instructions, the others apply-actions in order.
    """

    table: int
    priority: int
    match: tuple
    actions: tuple


@dataclass(frozen=True)
class Group:
    """A group: ``kind`` ``select`` with ``buckets`` of ``(weight, actions)`` (bucket actions
    may end with ``("resubmit", table)``, an Open vSwitch action: OpenFlow 1.3 buckets cannot
    goto), or ``ff`` (FAST_FAILOVER) with ``buckets`` of ``(watch port, actions)``: the first
    bucket whose port is up forwards."""

    group_id: int
    buckets: tuple
    note: str = ""
    kind: str = "select"


@dataclass(frozen=True)
class Program:
    """Everything one switch holds."""

    switch: int
    dpid: int
    flows: tuple
    groups: tuple


# ---------------------------------------------------------------------------------------------
# addressing
# ---------------------------------------------------------------------------------------------
def dpid(switch: int) -> int:
    """Datapath id of a switch: ``switch + 1`` (0 is no valid datapath id)."""
    return int(switch) + 1


def switch_of_dpid(topo: Topology, value: int) -> int | None:
    """The switch of a datapath id, or ``None`` when it is not one of ``topo``'s."""
    s = int(value) - 1
    return s if 0 <= s < topo.n_switches else None


def group_rank(topo: Topology) -> np.ndarray:
    """Rank of every switch inside its group (by id)."""
    grp = topo.group.astype(np.int64)
    order = np.lexsort((np.arange(topo.n_switches), grp))
    start = np.searchsorted(grp[order], grp[order], side="left")
    rank = np.empty(topo.n_switches, dtype=np.int64)
    rank[order] = np.arange(topo.n_switches) - start
    return rank


def check_mac_plan(topo: Topology) -> None:
    if topo.n_groups > 0xFFFF or group_rank(topo).max(initial=0) > 0xFFFF:
        raise NotExpressible(f"{topo.name()}: {topo.n_groups} groups or a group of more than "
                             "65536 switches do not fit the 02:GG:GG:LL:LL:EE MAC plan")
    if topo.hosts.max(initial=0) > 256:
        raise NotExpressible(f"{topo.name()}: {int(topo.hosts.max())} hosts on a switch; the "
                             "MAC plan has one byte for the host index")


def switch_macs(topo: Topology) -> np.ndarray:
    """MAC of host index 0 of every switch, i.e. the switch prefix (uint64)."""
    g = topo.group.astype(np.uint64)
    return (np.uint64(0x02) << np.uint64(40)) | (g << np.uint64(24)) | (
        group_rank(topo).astype(np.uint64) << np.uint64(8))


def host_macs(topo: Topology) -> np.ndarray:
    """``uint64[H]`` MAC address of every host (``02:GG:GG:LL:LL:EE``)."""
    check_mac_plan(topo)
    ht = topo.host_table()
    return switch_macs(topo)[ht[:, 1]] | (ht[:, 2] - 1).astype(np.uint64)


def mac_str(values) -> list[str]:
    out = []
    for v in np.asarray(values, dtype=np.uint64).tolist():
        s = f"{v:012x}"
        out.append(f"{s[0:2]}:{s[2:4]}:{s[4:6]}:{s[6:8]}:{s[8:10]}:{s[10:12]}")
    return out


# ---------------------------------------------------------------------------------------------
# source choice
# ---------------------------------------------------------------------------------------------
def choice_slots(weights: list[int]) -> tuple[int, list[int]]:
    """Split the ``2**bits`` values of the L4 source port's low bits among buckets in
    proportion to ``weights`` (largest remainder, every bucket at least one slot).

    Returns ``(bits, owner)`` with ``owner[slot]`` the bucket index.  ``bits`` is the
    smallest with ``2**bits >= 4 * len(weights)`` (so shares are within 25 % of the weights'),
    at most :data:`CHOICE_BITS_MAX`.
    """
    k = len(weights)
    bits = choice_bits(k)
    slots = 1 << bits
    if slots < k:
        raise NotExpressible(f"{k} source-choice buckets exceed {slots} L4 port slots")
    w = np.asarray(weights, dtype=np.float64)
    share = (slots - k) * w / w.sum()
    count = 1 + np.floor(share).astype(np.int64)
    rest = slots - int(count.sum())
    count[np.argsort(-(share - np.floor(share)), kind="stable")[:rest]] += 1
    return bits, np.repeat(np.arange(k), count).tolist()


def choice_bits(buckets: int) -> int:
    """Source-port bits the source choice of ``buckets`` buckets uses (see
    :func:`choice_slots`)."""
    bits = 0
    while (1 << bits) < 4 * buckets and bits < CHOICE_BITS_MAX:
        bits += 1
    return bits


def udp_src_for(prog: Program, target: int, base: int = 49152) -> int | None:
    """A UDP source port whose packets the source choice of ``prog`` sends via ``target``
    (VID ``1 + target``), or ``None`` when no slot leads there."""
    for f in prog.flows:
        if f.table == T_CHOICE and dict(f.match).get("ip_proto") == IPPROTO_UDP:
            vid = next(a[2] for a in f.actions if a[:2] == ("set_field", "vlan_vid"))
            if vid == OFPVID_PRESENT | (1 + target):
                value, mask = dict(f.match)["udp_src"]
                return (base & ~mask) | value
    return None


# ---------------------------------------------------------------------------------------------
# the program
# ---------------------------------------------------------------------------------------------
def _effective_vcs(ts: TableSet) -> int:
    """VCs the PCP must carry: ``ts.num_vcs`` (``fabroute tables`` tightens it to what the
    verified paths use)."""
    if ts.num_vcs > MAX_PCP_VCS:
        raise NotExpressible(f"{ts.routing} on {ts.topo.name()}: {ts.num_vcs} VCs; the VLAN "
                             f"PCP carries at most {MAX_PCP_VCS}")
    return max(ts.num_vcs, 1)


def _aggregate(table: np.ndarray, grp: np.ndarray, n_groups: int):
    """Per (switch u, group G not containing u): the majority port toward G's switches and
    whether a group entry pays off (>= 2 switches agree); plus the (u, d) pairs that need a
    switch entry.  u's own group always gets switch entries: a group entry there could bounce
    a packet for an unknown switch of the group between members forever."""
    n = table.shape[0]
    valid = table >= 0
    if np.bincount(grp, minlength=n_groups).max(initial=0) < 2:
        # singleton groups (torus, DSN): nothing to aggregate
        return (np.zeros((n, n_groups), dtype=bool), np.zeros((n, n_groups), dtype=np.int64),
                valid.copy())
    maj, best = group_majority(table, grp, n_groups)
    use = best >= 2
    use[np.arange(n), grp] = False
    covered = use[np.arange(n)[:, None], grp[None, :]] & (
        table == maj[np.arange(n)[:, None], grp[None, :]])
    exc = valid & ~covered
    return use, maj, exc


@dataclass
class Plan:
    """What :func:`program` needs for every switch, computed once per table set."""

    ts: TableSet
    V: int
    ingress: dict
    choice: PathClass | None
    deliver_vids: list
    host_mac: list
    sw_prefix: list
    grp_prefix: list
    phase_tables: list          # (vid, use, maj, exc_rows, exc_cols, exc_split, table, leave)
    vid_targets: list           # classes whose phase 0 heads for a switch or group (VID 1 + t)
    on_path: tuple | None
    decide: dict | None = None  # UGAL-L's decision entries (:func:`decision_layout`)
    versions: bool = False      # every VID fits below VERSION_BIT: programs carry a version
    ff: dict | None = None      # fast failover: cables with backups, and per switch the
                                # backup of each entry: {"cables", "at": {u: ({d: b}, {G: b})}}
    profile: str = "ovs"        # one of PROFILES
    #: added to every VID the program writes or matches: 1 in the ``standard`` profile, which
    #: uses no VID 0 (802.1Q's priority tag; ofsoftswitch13 reads an exact match on it as
    #: "any VID")
    vid_base: int = 0


def decision_layout(ts: TableSet, choice: PathClass | None, split_bits: int,
                    profile: str = "ovs") -> dict | None:
    """Where UGAL-L's decision entries split a destination's flows: ``split_bits``
    bits of the L4 source port just above the bits the source choice uses (so which
    intermediate a flow takes and whether it goes non-minimally are independent) — in the
    ``standard`` profile the low bits of the IPv4 source address, since the choice reads the
    destination's —, per destination switch — or per destination group when the non-minimal
    class heads for groups (a Dragonfly: the minimal paths to a group leave on one port).
    ``None`` for routings without a choice between MIN and a Valiant class."""
    if choice is None or len(ts.classes) != 2 or ts.classes[0].table0 is not None:
        return None
    topo = ts.topo
    keys = "group" if choice.target0 == "group" else "switch"
    if profile == "standard":
        return {"bits": split_bits, "shift": 0, "field": "ipv4_src", "keys": keys,
                "blocks": share_blocks(split_bits)}
    if choice.target0 == "group":
        most = topo.n_groups - 1
    elif choice.inter == "switch-3h":
        most = int(topo.degree.max(initial=1))
    else:
        most = topo.n_switches - 1
    shift = choice_bits(most)
    if shift + split_bits > 16:
        raise NotExpressible(f"{ts.routing} on {topo.name()}: the source choice uses {shift} "
                             f"bits of the L4 source port; {split_bits} split bits above them "
                             "exceed its 16")
    return {"bits": split_bits, "shift": shift, "field": "l4_src", "keys": keys,
            "blocks": share_blocks(split_bits)}


def plan(ts: TableSet, split_bits: int = SPLIT_BITS, fast_failover: bool = False,
         addresses: tuple[list, list] | None = None, profile: str = "ovs") -> Plan:
    """Check that ``ts`` fits the pipeline and precompute the per-table-set parts
    (``split_bits``: UGAL-L's decision granularity, :func:`decision_layout`;
    ``fast_failover``: FAST_FAILOVER groups on the verified backup ports of
    :func:`tablegen.backup.fast_failover`; ``addresses``: ``(host MACs, switch MAC
    prefixes)`` the hosts already have, instead of the plan's — a relabelled fabric (DSN-F
    ``p -> p + 1``) keeps its hosts' addresses, whose groups are not the new ones, so no
    destination group is aggregated; ``profile``: one of :data:`PROFILES`).
    Complexity: O(N^2) plus VAL_nta's O(N^2 L) on-path triples (and the backups' proofs)."""
    topo = ts.topo
    n = topo.n_switches
    if profile not in PROFILES:
        raise ValueError(f"OpenFlow profile {profile!r}; expected one of {PROFILES}")
    if "reroute" in ts.params:
        raise NotExpressible(f"{ts.routing}: class {ts.params['reroute']} begins at a packet's "
                             "second switch; the OpenFlow program chooses path classes only "
                             "at the source switch")
    check_mac_plan(topo)
    if len({c.table1 for c in ts.classes}) > 1:
        raise NotExpressible(f"{ts.routing}: classes use different phase-1 tables; VID 0 "
                             "cannot tell them apart")
    V = _effective_vcs(ts)
    grp = topo.group.astype(np.int64) if addresses is None else np.arange(n)
    G = int(grp.max(initial=0)) + 1
    first = ts.classes[0]
    choice = next((c for c in ts.classes if c.inter != "none"), None)
    to_target = [c for c in ts.classes if c.table0 is not None and c.target0 != "dst"]
    to_dst = [c for c in ts.classes if c.table0 is not None and c.target0 == "dst"]
    if to_target and to_dst:
        raise NotExpressible(f"{ts.routing}: mixes DSN-F style and Valiant phase 0; their "
                             "VIDs would collide")
    base = 1 if profile == "standard" else 0
    top_vid = 1 + base
    for c in to_target:
        top = 1 + base + (G - 1 if c.target0 == "group" else n - 1)
        if top > MAX_VID:
            raise NotExpressible(f"{ts.routing} on {topo.name()}: class {c.name} needs VID "
                                 f"{top}; VLAN IDs end at {MAX_VID}")
        top_vid = max(top_vid, top)
    if first.table0 is None:
        ingress = {"pcp": first.vc_base, "vid": 0, "choice": False}
    elif first.target0 == "dst":
        ingress = {"pcp": first.vc_base, "vid": 1, "choice": False}
    else:
        ingress = {"pcp": first.vc_base, "vid": None, "choice": True}
    gmac = (np.uint64(0x02) << np.uint64(40)) | (np.arange(G, dtype=np.uint64) << np.uint64(24))
    phase_tables = []
    specs = [(0, ts.tables[ts.classes[-1].table1], None)]
    specs += [(1, ts.tables[c.table0], c) for c in to_dst]
    for vid, table, c in specs:
        use, maj, exc = _aggregate(table, grp, G)
        er, ec = np.nonzero(exc)
        split = np.searchsorted(er, np.arange(n + 1))
        leave = ts.exit_port if c is not None and c.exit == "port" else None
        phase_tables.append((vid, use, maj, er, ec, split, table, leave))
    on_path = ts.on_path_triples() if any(c.exit == "on_path" for c in to_target) else None
    decide = decision_layout(ts, choice, split_bits, profile)
    if addresses is not None and decide is not None:
        raise NotExpressible(f"{ts.routing}: UGAL-L's decisions per destination group need "
                             "the MAC plan's groups; a relabelled fabric keeps other addresses")
    hmac, smac = (mac_str(host_macs(topo)), mac_str(switch_macs(topo))) if addresses is None \
        else (list(addresses[0]), list(addresses[1]))
    return Plan(ts, V, ingress, choice, [0] + ([1] if to_dst else []), hmac, smac,
                mac_str(gmac),
                phase_tables, to_target, on_path, decide, top_vid < VERSION_BIT,
                _ff_entries(ts, phase_tables, grp) if fast_failover else None, profile, base)


def _ff_entries(ts: TableSet, phase_tables, grp: np.ndarray) -> dict:
    """The cables with verified backups (:func:`tablegen.backup.fast_failover`, one
    backup per forwarding entry: a group entry's serves all the destinations it covers) and
    per switch the backup port of each entry over them: ``{"cables": [(u, v)], "at": {u:
    ({dst: backup}, {group: backup})}}``."""
    from tablegen.backup import fast_failover

    if len(phase_tables) != 1:
        return {"cables": [], "at": {}}
    _, use, maj, er, ec, split, table, _ = phase_tables[0]
    n = table.shape[0]
    covered = use[:, grp] & (table == maj[:, grp]) & (table >= 0)
    exc = np.zeros_like(covered)
    exc[er, ec] = True
    covered &= ~exc
    backups = fast_failover(ts, np.where(covered, n + grp[None, :], np.arange(n)[None, :]))
    at: dict = {}
    for ends in backups.values():
        for a, dst_b in ends.items():
            sw, groups = at.setdefault(a, ({}, {}))
            for d, b in dst_b.items():
                if covered[a, d]:
                    groups[int(grp[d])] = b       # one backup per entry: equal for all d
                else:
                    sw[d] = b
    return {"cables": sorted(backups), "at": at}


def buckets(p: Plan, u: int, c: PathClass) -> list[tuple[int, int]]:
    """(target, weight) per source-choice bucket at ``u``: uniform over the class's phase-0
    targets.  VAL_3h's target only decides the first hop, so targets sharing a first hop share
    one bucket (weight = their number; target = the neighbour on that port when it is one of
    them)."""
    topo = p.ts.topo
    n = topo.n_switches
    if c.target0 == "group":
        g = int(topo.group[u])
        return [(G, 1) for G in range(topo.n_groups) if G != g]
    if c.inter != "switch-3h":
        return [(i, 1) for i in range(n) if i != u]
    t0 = p.ts.tables[c.table0][u]
    cand = np.flatnonzero(np.arange(n) != u)
    out = []
    for j in np.unique(t0[cand]).tolist():
        members = cand[t0[cand] == j]
        nb = int(topo.adj[u, j])
        rep = nb if nb in set(members.tolist()) else int(members[0])
        out.append((rep, len(members)))
    return out


def _vid(v: int) -> int:
    return OFPVID_PRESENT | v


def ip_str(v: int) -> str:
    """``v`` (32 bits) as a dotted IPv4 address: the value or mask of a masked address match."""
    return ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))


def decision_keys(p: Plan, u: int) -> list[int]:
    """The destination keys (switches, or groups) switch ``u`` has decision entries for:
    every one but its own."""
    topo = p.ts.topo
    if p.decide["keys"] == "group":
        return [k for k in range(topo.n_groups) if k != int(topo.group[u])]
    return [k for k in range(topo.n_switches) if k != u]


def decision_flow(p: Plan, k: int, block: int, proto: int, nonmin: bool) -> Flow:
    """The decision entry (table :data:`T_DECIDE`) of destination key ``k``, share block
    ``block`` and L4 protocol ``proto``: IPv4 from a host (tagged by table 0 with MIN's VID,
    first VC and the program version) toward ``k`` whose source-port bits fall in the
    block; MIN (on to the phase tables) or the Valiant class (on to the source choice, which
    sets the class's VID and first VC).  It matches any version and writes nothing, so it
    belongs to no version and no table set: a two-phase update flips only table 0's few
    stamps, and a decision is a MODIFY between two verified classes that holds in both."""
    d = p.decide
    prefix, pmask = ((p.grp_prefix[k], GROUP_MASK) if d["keys"] == "group"
                     else (p.sw_prefix[k], SWITCH_MASK))
    return _decision_flow(prefix, pmask, *d["blocks"][block], d["field"], d["shift"],
                          proto, bool(nonmin))


@functools.lru_cache(maxsize=1 << 16)
def _decision_flow(prefix: str, pmask: str, value: int, mask: int, field: str, shift: int,
                   proto: int, nonmin: bool) -> Flow:
    # one object per distinct entry: every table set of a fabric (each repair a live update
    # prepares, every switch toward the same key) shares it, and so the caches keyed by it
    if field == "ipv4_src":
        split = ("ipv4_src", (ip_str(value), ip_str(mask)))
    else:
        split = ("udp_src" if proto == IPPROTO_UDP else "tcp_src",
                 (value << shift, mask << shift))
    m = (TAGGED, ("eth_type", ETH_IPV4), ("ip_proto", proto),
         ("eth_dst", (prefix, pmask)), split)
    return Flow(T_DECIDE, DECIDE_PRIORITY, m, (("goto_table", T_CHOICE if nonmin else T_ARRIVE),))


def decision_flows(p: Plan, u: int, shares=None) -> list[Flow]:
    """Every decision entry of switch ``u``; ``shares[k]``: slots of ``2**bits`` toward key
    ``k`` that go non-minimal (default none: the program a switch starts with)."""
    bits = p.decide["bits"]
    out = []
    for k in decision_keys(p, u):
        nonmin = blocks_of(int(shares[k]) if shares is not None else 0, bits)
        for proto in (IPPROTO_UDP, IPPROTO_TCP):
            out += [decision_flow(p, k, b, proto, nm) for b, nm in enumerate(nonmin)]
    return out


def program(p: Plan, u: int, shares=None, version: int = 0) -> Program:
    """Flows and groups of switch ``u`` (see ``docs/openflow.md``); ``shares``: UGAL-L's
    non-minimal shares per destination key (:func:`decision_flows`); ``version``: 0 or 1,
    the tag a two-phase update tells programs apart by (:func:`versioned`).  Complexity:
    O(N + R V) entries per switch (fewer with group aggregation), O(N) work for VAL_nta's
    on-path set, O(K bits) decision entries for K destination keys."""
    if version and not p.versions:
        raise NotExpressible(f"{p.ts.routing} on {p.ts.topo.name()}: VIDs reach "
                             f"{VERSION_BIT} or more; no VID bit is left for a version tag")
    prog = _program(p, u, shares)
    return versioned(prog, version) if p.versions else prog


def is_stamp(f: Flow) -> bool:
    """Whether ``f`` is an entry that stamps a packet's version: a table-0 entry for packets
    from hosts (untagged).  A two-phase update replaces these last, all others first."""
    return f.table == T_INGRESS and (("vlan_vid", 0) in f.match
                                     or any(a[0] == "push_vlan" for a in f.actions))


def _stamp_vid(v, vbit: int):
    if isinstance(v, tuple):                  # (OFPVID_PRESENT, OFPVID_PRESENT): tagged
        return (v[0] | vbit, v[1] | VERSION_BIT)
    return v | vbit if v else v               # 0 matches untagged packets: no version yet


def versioned(prog: Program, version: int) -> Program:
    """``prog`` as program version ``version`` (0 or 1): every entry past the stamp matches
    only packets whose VID carries the version (:data:`VERSION_BIT` set for 1, clear for 0),
    every VID written keeps it, the host ingress entries stamp it, and groups of version 1
    are numbered apart (:data:`GROUP_VERSION`).  The table-0 entries of network ports and of
    same-switch delivery and UGAL-L's decision entries (which write no VID) do not depend on
    the version and are equal in both.  So two versions coexist on a switch without a
    single overlapping entry that differs, which is what
    Reitblatt et al.'s two-phase update needs: a packet is forwarded by the version its
    first switch stamped, from end to end.  O(entries)."""
    vbit = VERSION_BIT if version else 0
    gv = GROUP_VERSION if version else 0
    groups = tuple(replace(g, group_id=g.group_id + gv, buckets=tuple(
        (w, _version_actions(b, vbit, gv, False)) for w, b in g.buckets)) for g in prog.groups)
    return Program(prog.switch, prog.dpid, version_flows(prog.flows, version), groups)


def version_flows(flows, version: int) -> tuple:
    """The flows of :func:`versioned` (also for UGAL-L's decision entries, which the
    controller sends on their own)."""
    vbit = VERSION_BIT if version else 0
    gv = GROUP_VERSION if version else 0
    any_tag = ("vlan_vid", (OFPVID_PRESENT | vbit, OFPVID_PRESENT | VERSION_BIT))
    out = []
    for f in flows:
        if f.table == T_DECIDE:                 # decisions belong to no version
            out.append(f)
            continue
        if f.table == T_INGRESS:
            match = f.match
        elif any(k == "vlan_vid" for k, _ in f.match):
            match = tuple((k, _stamp_vid(v, vbit)) if k == "vlan_vid" else (k, v)
                          for k, v in f.match)
        else:                                   # past table 0 every packet is tagged
            match = (any_tag,) + f.match
        out.append(Flow(f.table, f.priority, match, _version_actions(
            f.actions, vbit, gv, is_stamp(f))))
    return tuple(out)


def _version_actions(actions, vbit: int, gv: int, stamp: bool) -> tuple:
    # a pushed tag has VID 0 (version 0) until an action sets one
    stamp = stamp and vbit and not any(a[:2] == ("set_field", "vlan_vid") for a in actions)
    out = []
    for a in actions:
        if a[0] == "set_field" and a[1] == "vlan_vid":
            out.append(("set_field", "vlan_vid", a[2] | vbit))
        elif a[0] == "group":
            out.append(("group", a[1] + gv))
        else:
            out.append(a)
        if a[0] == "push_vlan" and stamp:
            out.append(("set_field", "vlan_vid", OFPVID_PRESENT | vbit))
    return tuple(out)


def _program(p: Plan, u: int, shares=None) -> Program:
    ts, topo = p.ts, p.ts.topo
    n = topo.n_switches
    hs = int(topo.hosts[u])
    off = int(topo.host_offset[u])
    grp = topo.group
    pn = hs + 1                                   # port number of network index 0
    net = np.flatnonzero(topo.adj[u] >= 0)
    flows: list[Flow] = []
    add = flows.append

    def vlan(v):                                  # the OpenFlow value of VID v
        return _vid(v + p.vid_base)

    # 0 ingress
    for e in range(hs):
        add(Flow(T_INGRESS, 200, (("vlan_vid", 0), ("eth_dst", p.host_mac[off + e])),
                 (("output", e + 1),)))
    tag = (("push_vlan", 0x8100), ("set_field", "vlan_pcp", p.ingress["pcp"]))
    if p.ingress["choice"]:
        then = (("goto_table", T_CHOICE),)
    else:
        then = (("set_field", "vlan_vid", vlan(p.ingress["vid"])),
                ("goto_table", T_ARRIVE if p.decide is None else T_DECIDE))
    for e in range(hs):
        add(Flow(T_INGRESS, 100, (("in_port", e + 1),), tag + then))
    for j in net.tolist():
        add(Flow(T_INGRESS, 50, (("in_port", pn + j),), (("goto_table", T_ARRIVE),)))
    if p.decide is not None:                      # 1 decisions
        flows += decision_flows(p, u, shares)
        add(Flow(T_DECIDE, 0, (), (("goto_table", T_ARRIVE),)))

    # 2 source choice
    groups: list[Group] = []
    # the class's first VC again: UGAL-L's decisions come here from MIN's (version-free)
    pcp = ("set_field", "vlan_pcp", p.choice.vc_base) if p.choice is not None else None
    if p.choice is not None and p.profile == "standard":
        # OpenFlow 1.3 masks no L4 port and lets no bucket go on to a table: the destination
        # address's low bits pick the target, and traffic other than IPv4 takes the first
        bk = buckets(p, u, p.choice)
        bits, owner = choice_slots([w for _, w in bk])
        mask = ip_str((1 << bits) - 1)
        for slot, b in enumerate(owner):
            add(Flow(T_CHOICE, 100, (TAGGED, ("eth_type", ETH_IPV4),
                                     ("ipv4_dst", (ip_str(slot), mask))),
                     (("set_field", "vlan_vid", vlan(1 + bk[b][0])), pcp, ("goto_table", T_ARRIVE))))
        add(Flow(T_CHOICE, 0, (), (("set_field", "vlan_vid", vlan(1 + bk[0][0])), pcp,
                                   ("goto_table", T_ARRIVE))))
    elif p.choice is not None:
        # the L4 source port's low bits pick the bucket (OVS's OpenFlow 1.3 SELECT groups
        # hash every flow to one bucket); other traffic uses the SELECT group
        c = p.choice
        bk = buckets(p, u, c)
        bits, owner = choice_slots([w for _, w in bk])
        mask = (1 << bits) - 1
        for proto, field in ((IPPROTO_UDP, "udp_src"), (IPPROTO_TCP, "tcp_src")):
            for slot, b in enumerate(owner):
                add(Flow(T_CHOICE, 100, (TAGGED, ("eth_type", ETH_IPV4), ("ip_proto", proto),
                                         (field, (slot, mask))),
                         (("set_field", "vlan_vid", vlan(1 + bk[b][0])), pcp,
                          ("goto_table", T_ARRIVE))))
        add(Flow(T_CHOICE, 0, (), (("group", 1),)))
        groups.append(Group(1, tuple((w, (("set_field", "vlan_vid", vlan(1 + t)),
                                           ("set_field", "vlan_pcp", c.vc_base),
                                           ("resubmit", T_ARRIVE))) for t, w in bk),
                            note=f"class {c.name}, weight = phase-0 targets behind the bucket"))

    # 3 phase exit
    for c in p.vid_targets:
        if c.exit in ("reach", "on_path"):
            here = u if c.target0 == "switch" else int(grp[u])
            add(Flow(T_ARRIVE, 200, (("vlan_vid", vlan(1 + here)),),
                     (("set_field", "vlan_vid", vlan(0)), ("goto_table", T_FWD))))
        if c.exit == "on_path" and p.on_path is not None:
            ou, oi, od = p.on_path
            lo, hi = np.searchsorted(ou, [u, u + 1])
            for i, d in zip(oi[lo:hi].tolist(), od[lo:hi].tolist()):
                if i != u:
                    add(Flow(T_ARRIVE, 300, (("vlan_vid", vlan(1 + i)),
                                             ("eth_dst", (p.sw_prefix[d], SWITCH_MASK))),
                             (("set_field", "vlan_vid", vlan(0)), ("goto_table", T_FWD))))
    add(Flow(T_ARRIVE, 0, (), (("goto_table", T_FWD),)))

    # 4 forwarding
    for vid in p.deliver_vids:
        for e in range(hs):
            add(Flow(T_FWD, 400, (("vlan_vid", vlan(vid)), ("eth_dst", p.host_mac[off + e])),
                     (("pop_vlan",), ("output", e + 1))))

    def fwd(prio, match, leave, port, backup=None):
        acts = (("set_field", "vlan_vid", vlan(0)),) if leave else ()
        if backup is not None:          # egress by the FAST_FAILOVER group of (port, backup)
            port |= (pn + backup) << FF_SHIFT
            ff_used.add(port)
        add(Flow(T_FWD, prio, match, acts + (("write_metadata", port),
                                             ("goto_table", T_EGRESS))))

    ff_sw, ff_grp = p.ff["at"].get(u, ({}, {})) if p.ff else ({}, {})
    ff_used: set = set()
    for vid, use, maj, er, ec, split, table, leave in p.phase_tables:
        gs = np.flatnonzero(use[u])
        for G, j in zip(gs.tolist(), maj[u, gs].tolist()):
            fwd(200, (("vlan_vid", vlan(vid)), ("eth_dst", (p.grp_prefix[G], GROUP_MASK))),
                bool(leave is not None and leave[u, j]), pn + j, ff_grp.get(G))
        ds = ec[split[u]:split[u + 1]]
        for d, j in zip(ds.tolist(), table[u, ds].tolist()):
            fwd(300, (("vlan_vid", vlan(vid)), ("eth_dst", (p.sw_prefix[d], SWITCH_MASK))),
                bool(leave is not None and leave[u, j]), pn + j, ff_sw.get(d))
    for c in p.vid_targets:
        t0 = ts.tables[c.table0][u]
        if c.inter == "switch-3h":
            targets = [t for t, _ in buckets(p, u, c)]
        elif c.target0 == "group":
            targets = [G for G in range(topo.n_groups) if G != int(grp[u])]
        else:
            targets = [i for i in range(n) if i != u]
        for t in targets:
            j = int(t0[t])
            leave = c.exit == "first_hop" or (c.exit == "port" and bool(ts.exit_port[u, j]))
            fwd(100, (("vlan_vid", vlan(1 + t)),), leave, pn + j)

    # 5 egress: queue = this hop's VC, PCP = the next hop's
    def leave_on(j, v):
        nv = min(v + int(ts.vc_inc[u, j]), p.V - 1)
        return (("set_queue", v), ("set_field", "vlan_pcp", nv), ("output", pn + j))

    for meta in sorted(ff_used):
        j, b = (meta & FF_MASK) - pn, (meta >> FF_SHIFT) - pn
        for v in range(p.V):
            gid = FF_GROUP_BASE + ((j << 6 | b) << 3 | v)
            add(Flow(T_EGRESS, 100, (("metadata", meta), TAGGED, ("vlan_pcp", v)),
                     (("group", gid),)))
            groups.append(Group(gid, ((pn + j, leave_on(j, v)), (pn + b, leave_on(b, v))),
                                note=f"port {pn + j}, backup {pn + b}, VC {v}", kind="ff"))
    for j in net.tolist():
        for v in range(p.V):
            nv = min(v + int(ts.vc_inc[u, j]), p.V - 1)
            acts = (("set_queue", v), ("set_field", "vlan_pcp", nv))
            add(Flow(T_EGRESS, 100, (("metadata", pn + j), TAGGED, ("vlan_pcp", v)),
                     acts + (("output", pn + j),)))
            # OpenFlow never outputs to the ingress port by number; only Valiant phase 0 can
            # lead a packet back out of the port it came in on
            if p.vid_targets:
                add(Flow(T_EGRESS, 110, (("in_port", pn + j), ("metadata", pn + j), TAGGED,
                                         ("vlan_pcp", v)), acts + (("output", "in_port"),)))
    if p.profile == "standard":
        flows = vc_in_metadata(flows, p.V)
    return Program(u, dpid(u), tuple(flows), tuple(groups))


def vc_in_metadata(flows: list, n_vcs: int) -> list:
    """The egress table without a ``vlan_pcp`` match: each forwarding entry that goes on to
    it is split per VC (``vlan_pcp`` matched next to its exact ``vlan_vid``) and writes the
    VC into the metadata (``<< VC_SHIFT``), which the egress entries match instead.  Why:
    CPqD's ofsoftswitch13 refuses ``vlan_pcp`` unless an *unmasked* ``vlan_vid`` precedes
    it (``OFPBMC_BAD_PREREQ``), and the egress table matches any VID (docs/openflow.md)."""
    out = []
    for f in flows:
        m = dict(f.match)
        if f.table == T_FWD and any(a[0] == "write_metadata" for a in f.actions):
            out += [Flow(f.table, f.priority, f.match + (("vlan_pcp", v),), tuple(
                ("write_metadata", a[1] | v << VC_SHIFT) if a[0] == "write_metadata" else a
                for a in f.actions)) for v in range(n_vcs)]
        elif f.table == T_EGRESS and "vlan_pcp" in m:
            meta = ("metadata", m["metadata"] | m["vlan_pcp"] << VC_SHIFT)
            out.append(Flow(f.table, f.priority, tuple(meta if k == "metadata" else (k, v)
                                                      for k, v in f.match if k != "vlan_pcp"),
                            f.actions))
        else:
            out.append(f)
    return out
