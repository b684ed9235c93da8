"""The controller's decisions, as a plain class: which switch a datapath is, what it must
hold, what to send to make it so, and whether it does.

:class:`Fabric` never touches a socket: the os-ken app (``controller/openflow/app.py``) hands it
datapath ids and statistics replies and sends the messages it returns.  Per switch the
cycle is *read → compare → repair → read → compare*: on (re)connect the controller first
reads the flow and group tables, so a switch that already holds the current generation (a
controller restart while traffic flows) is verified without a single flow-mod; otherwise it
deletes what does not belong (other generations, stray entries), adds what is missing,
sends a barrier and reads again.  A switch still differing after :data:`MAX_REPAIRS`
rounds is reported failed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np

from controller.openflow import messages as msg
from controller.openflow.lldp import LLDP_FLOW
from controller.openflow.portmap import translate
from tablegen.exports.openflow import (
    DECIDE_PRIORITY,
    SPLIT_BITS,
    T_DECIDE,
    Program,
    plan,
    dpid,
    program,
    version_flows,
)
from tablegen.tables import TableSet

__all__ = ["Diff", "Fabric", "MAX_REPAIRS", "generation_cookie"]

MAX_REPAIRS = 3
MAX_REFUSED = 64        # refusal reasons the status keeps (the newest); all are counted


def generation_cookie(ts: TableSet) -> int:
    """The cookie every flow of this table generation carries: 63 bits of a SHA-256 over the
    routing, the topology and every table array (so another generation never collides)."""
    h = hashlib.sha256(f"{ts.routing}|{ts.topo.name()}|{ts.num_vcs}".encode())
    for name in sorted(ts.tables):
        h.update(name.encode())
        h.update(ts.tables[name].tobytes())
    h.update(ts.vc_inc.tobytes())
    return int.from_bytes(h.digest()[:8], "big") >> 1


@dataclass
class Diff:
    """What a switch holds that it should not, and what it lacks."""

    missing_flows: list = field(default_factory=list)      # Flow records
    extra_flows: list = field(default_factory=list)        # (table, priority, OFPMatch)
    wrong_groups: list = field(default_factory=list)       # (Group, present on the switch)
    extra_groups: list = field(default_factory=list)       # group ids

    @property
    def empty(self) -> bool:
        return not (self.missing_flows or self.extra_flows or self.wrong_groups
                    or self.extra_groups)

    def summary(self) -> dict:
        return {"missing_flows": len(self.missing_flows), "extra_flows": len(self.extra_flows),
                "wrong_groups": len(self.wrong_groups), "extra_groups": len(self.extra_groups)}


@dataclass
class SwitchState:
    switch: int
    program: Program
    state: str = "connected"      # reading, repairing, verified, failed, refused
    repairs: int = 0
    errors: int = 0               # OpenFlow error replies
    flow_mods: int = 0            # flow adds and strict deletes sent by repairs
    group_mods: int = 0           # group adds, modifies and deletes sent by repairs
    last_diff: dict = field(default_factory=dict)
    conn: object = None           # the connection (os-ken datapath) this state belongs to
    read_at: float | None = None  # unix time of the last read-back (metrics)


class Fabric:
    """Decisions for one table set.  ``program`` records are computed once per switch."""

    def __init__(self, ts: TableSet, split_bits: int = SPLIT_BITS, version: int = 0,
                 fast_failover: bool = False, dpids=None, addresses=None,
                 profile: str = "ovs", ports=None, lldp: bool = False):
        self.ts = ts
        self.topo = ts.topo
        self.cookie = generation_cookie(ts)
        self.profile = profile     # the OpenFlow profile (PROFILES) every program is built in
        self.plan_ = plan(ts, split_bits, fast_failover, addresses, profile)
        # the datapath id of every switch: switch + 1, or the physical switch's own after a
        # relabelling (DSN-F p -> p + 1: switches keep their datapaths, tables renumber them)
        # (None: a planned switch no datapath is mapped to yet — a learned fabric)
        self.dpids = [dpid(u) for u in range(ts.topo.n_switches)] if dpids is None \
            else [None if d is None else int(d) for d in dpids]
        self._switch_of = {d: u for u, d in enumerate(self.dpids) if d is not None}
        # real switches (controller.openflow.portmap): per planned switch, planned port ->
        # the datapath's own; None: the datapaths number their ports as the plan does
        self.ports = ports
        self.lldp = lldp           # every program sends LLDP frames to the controller
        self.split_bits = split_bits
        self.fast_failover = fast_failover
        # switches a growth update added: they connect before their cables are plugged
        self.awaiting: set[int] = set()
        self.version = version     # the program version (0 or 1) a two-phase update flips
        self.decisions = None      # controller.openflow.adaptive.Decisions (UGAL-L, adaptive)
        self.adapted = None
        self._programs: dict[int, Program] = {}
        self._intended: dict[int, tuple[dict, dict]] = {}
        self.switches: dict[int, SwitchState] = {}      # by dpid
        self.refused: list[str] = []     # the newest MAX_REFUSED distinct refusal reasons
        self.refusals = 0                # every refusal, however often repeated

    # -- identity ------------------------------------------------------------------------------
    def switch_of(self, dpid: int) -> int | None:
        """Our switch id of a datapath id; ``None`` for a datapath that is not ours (refuse it,
        never guess)."""
        return self._switch_of.get(int(dpid))

    def dpid_of(self, switch: int) -> int | None:
        return self.dpids[switch]

    def plan_port(self, switch: int, port: int) -> int | None:
        """The planned port number of the datapath's ``port`` (``None``: a port the map does
        not use — spare, or a cable that fits no planned one)."""
        if self.ports is None:
            return port
        return next((pp for pp, fp in self.ports.get(switch, {}).items() if fp == port), None)

    def program(self, switch: int) -> Program:
        """The switch's program, with the current decisions of an adaptive UGAL-L."""
        if switch not in self._programs:
            shares = self.decisions.shares(switch) if self.decisions is not None else None
            prog = program(self.plan_, switch, shares, self.version)
            if self.ports is not None:
                prog = translate(prog, self.ports.get(switch, {}))
            if self.lldp:
                prog = replace(prog, flows=prog.flows + (LLDP_FLOW,))
            self._programs[switch] = replace(prog, dpid=self.dpids[switch])
        return self._programs[switch]

    def adapt(self, params, poll: float, link_bps: float | None = None) -> None:
        """Make UGAL-L's decisions adaptive (:class:`controller.openflow.adaptive.Decisions`);
        ``ValueError`` for a table set without a choice between MIN and a Valiant class."""
        from controller.openflow.adaptive import Decisions

        if self.plan_.decide is None:
            raise ValueError(f"{self.ts.routing}: adaptive decisions need UGAL-L tables")
        self.decisions = Decisions(self, params, poll, link_bps)
        self.adapted = (params, poll, link_bps)     # for the fabric a live update makes

    def adopt(self, switch: int, flow_stats) -> int:
        """UGAL-L's decisions as ``switch`` holds them (``OFPFlowStats`` of a read) become its
        program's (:meth:`controller.openflow.adaptive.Decisions.adopt`); how many shares
        changed (0 without adaptive decisions)."""
        n = self.decisions.adopt(switch, flow_stats) if self.decisions is not None else 0
        if n:
            self._programs.pop(switch, None)
            self._intended.pop(switch, None)
        return n

    def decided(self, switch: int, flows: list) -> list:
        """Decision entries of ``switch`` changed to ``flows``: they become part of what the
        switch must hold (a decision is the program, not drift), and the MODIFY messages
        that make it so (match and priority kept, actions replaced; cookie unchanged)."""
        self._programs.pop(switch, None)
        cached = self._intended.get(switch)
        if self.plan_.versions:
            flows = version_flows(flows, self.version)
        for f in flows:
            k, v = msg.canon_flow(f, self.cookie)
            if cached is not None:
                cached[0][k] = (v, f)
        return [msg.modify_flow(f) for f in flows]

    def forget(self) -> None:
        """Drop the programs computed so far (they are computed again when asked for)."""
        self._programs.clear()
        self._intended.clear()

    def intended(self, switch: int) -> tuple[dict, dict]:
        """Canonical ``{key: (cookie, instructions)}`` flows and ``{group id: desc}`` groups."""
        if switch not in self._intended:
            prog = self.program(switch)
            flows = {}
            for f in prog.flows:
                k, v = msg.canon_flow(f, self.cookie)
                flows[k] = (v, f)
            groups = {gid: (desc, g) for g in prog.groups for gid, desc in [msg.canon_group(g)]}
            self._intended[switch] = (flows, groups)
        return self._intended[switch]

    # -- connection cycle ----------------------------------------------------------------------
    def connected(self, dpid: int, conn=None) -> SwitchState | None:
        """A datapath said hello on connection ``conn``; the state to track (replacing that of
        an earlier connection of the same dpid), or ``None`` when it is not ours."""
        s = self.switch_of(dpid)
        if s is None:
            return None
        if self.decisions is not None:      # its program with the decisions of now
            self._programs.pop(s, None)
            self._intended.pop(s, None)
        st = SwitchState(s, self.program(s), state="reading", conn=conn)
        self.switches[dpid] = st
        return st

    def current(self, dpid: int, conn) -> SwitchState | None:
        """The state of ``dpid`` when ``conn`` is its current connection, else ``None``: a
        switch that reconnects gets a new connection before os-ken reports the old one dead,
        and what the old one still delivers must not touch the new one's state."""
        st = self.switches.get(dpid)
        return st if st is not None and st.conn is conn else None

    def expected_ports(self, switch: int) -> tuple[set[int], set[int]]:
        """OpenFlow port numbers of the switch's host ports and connected network ports, as
        the tables number them."""
        hs = int(self.topo.hosts[switch])
        net = {hs + 1 + int(j) for j in (self.topo.adj[switch] >= 0).nonzero()[0]}
        host = set(range(1, hs + 1))
        if self.ports is not None:
            own = self.ports.get(switch, {})
            return {own[p] for p in host if p in own}, {own[p] for p in net}
        return host, net

    def check_ports(self, switch: int, ports) -> str | None:
        """``None`` when the datapath's ports (reserved ones ignored) fit the fabric: host
        ports among the switch's (a host port may be empty), every network port of its
        cables, no other port; else a one-line reason — tables of another fabric, or
        miswiring.  Two exceptions for a living fabric: the port of a failed cable (degraded
        tables) may be there or not, and a switch a growth update added (:attr:`awaiting`)
        connects before its cables are plugged (:meth:`missing_ports` lists them)."""
        have = {int(p) for p in ports if int(p) < 0xFF00}
        host, net = self.expected_ports(switch)
        failed = self._failed_ports(switch)
        # a mapped real switch may have spare ports and cables that fit no planned one: the
        # map says which ports the program uses, the others carry nothing
        extra = [] if self.ports is not None else sorted(have - net - host - failed)
        missing = [] if switch in self.awaiting else sorted(net - have)
        if not missing and not extra:
            return None
        return (f"switch {switch} of {self.topo.name()} has ports {sorted(have)[:12]}; the "
                f"tables need network ports {sorted(net)[:12]} and host ports <= "
                f"{len(host)} (missing {missing[:8]}, unexpected {extra[:8]}): tables of "
                f"another fabric?")

    def missing_ports(self, switch: int, ports) -> list[int]:
        """Network ports the tables route over that the datapath does not have."""
        have = {int(p) for p in ports}
        return sorted(self.expected_ports(switch)[1] - have)

    def _failed_ports(self, switch: int) -> set[int]:
        """Port numbers of ``switch``'s failed cables (a degraded table set), from the intact
        fabric its name gives."""
        if "fail" not in self.topo.params:
            return set()
        if not hasattr(self, "_intact"):
            from tablegen.verify import rebuilt_topology

            self._intact = rebuilt_topology(self.topo, intact=True)
        hs = int(self.topo.hosts[switch])
        out = {hs + 1 + int(j) for j in np.flatnonzero(
            (self._intact.adj[switch] >= 0) & (self.topo.adj[switch] < 0))}
        if self.ports is not None:
            own = self.ports.get(switch, {})
            return {own[p] for p in out if p in own}
        return out

    def check_certificate(self, dpid: int, ranges: list[tuple[int, int]] | None) -> str | None:
        """``None`` when a datapath may claim ``dpid``: always over plain TCP (``ranges`` is
        None), over TLS only when its certificate carries that datapath id
        (:func:`controller.tls.dpid_ranges`); else the one-line reason to refuse it."""
        if ranges is None or any(lo <= dpid <= hi for lo, hi in ranges):
            return None
        have = ", ".join(f"{lo:x}-{hi:x}" for lo, hi in ranges[:4]) or "none"
        return (f"refused datapath {dpid:016x}: its certificate carries datapath ids {have}, "
                f"not {dpid:x} (an impostor?)")

    def refuse(self, dpid: int) -> None:
        st = self.switches.get(dpid)
        if st is not None:
            st.state = "refused"

    def note_refusal(self, why: str) -> None:
        """Count a refusal and keep its reason, newest last, at most :data:`MAX_REFUSED`
        distinct ones: a refused switch keeps reconnecting, an attacker keeps varying."""
        self.refusals += 1
        if why in self.refused:
            self.refused.remove(why)
        self.refused.append(why)
        del self.refused[:-MAX_REFUSED]

    def disconnected(self, dpid: int, conn=None) -> SwitchState | None:
        """Connection ``conn`` of ``dpid`` died: forget the switch and return its state — or
        return ``None`` and keep everything when ``conn`` is not its current connection (the
        late death of a connection the switch has already replaced)."""
        st = self.current(dpid, conn)
        if st is not None:
            del self.switches[dpid]
        return st

    def compare(self, switch: int, flow_stats, group_stats, eth_dst=None) -> Diff:
        """Diff between what the switch reports (``OFPFlowStats`` / ``OFPGroupDescStats``
        lists) and its program; ``eth_dst``: only the decision entries of these destination
        prefixes were read (``(value, mask)`` pairs; no groups)."""
        flows, groups = self.intended(switch)
        if eth_dst is not None:
            want = set(eth_dst)
            flows = {k: v for k, v in flows.items() if k[0] == T_DECIDE and
                     k[1] == DECIDE_PRIORITY and dict(v[1].match).get("eth_dst") in want}
            groups = {}
        d = Diff()
        seen = set()
        for st in flow_stats:
            key, val = msg.canon_stats_flow(st)
            want = flows.get(key)
            if want is None:
                d.extra_flows.append((int(st.table_id), int(st.priority), st.match))
            elif want[0] == val:
                seen.add(key)
            # else: same table, priority and match, other actions or cookie: re-adding the
            # flow overwrites it in place (no gap in forwarding)
        d.missing_flows = [f for key, (_, f) in flows.items() if key not in seen]
        got = {gid: desc for gid, desc in map(msg.canon_stats_group, group_stats)}
        d.wrong_groups = [(g, gid in got) for gid, (desc, g) in groups.items()
                          if got.get(gid) != desc]
        d.extra_groups = [gid for gid in got if gid not in groups]
        return d

    def repair(self, dpid: int, diff: Diff) -> list:
        """Messages that turn the switch's tables into its program (the caller sends them,
        then a barrier, then reads back).  Groups first (flows may point at them); stray flows
        are deleted strictly, missing or changed ones (re-)added."""
        st = self.switches[dpid]
        out = []
        out += [msg.group_delete(gid) for gid in diff.extra_groups]
        for g, present in diff.wrong_groups:
            out.append(msg.group_mod(g, msg.ofp.OFPGC_MODIFY if present else msg.ofp.OFPGC_ADD))
        for table, prio, m in diff.extra_flows:
            out.append(msg.delete_flow(table, prio, m))
        out += [msg.flow_mod(f, self.cookie) for f in diff.missing_flows]
        st.flow_mods += len(diff.missing_flows) + len(diff.extra_flows)
        st.group_mods += len(diff.extra_groups) + len(diff.wrong_groups)
        return out

    def verdict(self, dpid: int, diff: Diff) -> str:
        """After a read: ``verified``, ``repairing`` (send :meth:`repair`'s messages) or
        ``failed`` (still differing after :data:`MAX_REPAIRS` rounds)."""
        st = self.switches[dpid]
        st.last_diff = diff.summary()
        if diff.empty:
            st.state = "verified"
        elif st.repairs >= MAX_REPAIRS:
            st.state = "failed"
        else:
            st.repairs += 1
            st.state = "repairing"
        return st.state

    def status(self) -> dict:
        """JSON-ready: per switch its state, repairs and last diff; totals."""
        per = {str(st.switch): {"dpid": f"{dpid:016x}", "state": st.state,
                                "repairs": st.repairs, "errors": st.errors,
                                "flow_mods": st.flow_mods, "group_mods": st.group_mods,
                                "flows": len(st.program.flows), "diff": st.last_diff}
               for dpid, st in sorted(self.switches.items())}
        states = [st.state for st in self.switches.values()]
        ff = self.plan_.ff
        return {"routing": self.ts.routing, "topology": self.topo.name(),
                "cookie": f"0x{self.cookie:016x}", "version": self.version,
                "fast_failover": None if ff is None else {
                    "cables": [list(c) for c in ff["cables"]], "switches": len(ff["at"]),
                    "entries": sum(len(a) + len(b) for a, b in ff["at"].values())},
                "switches": self.topo.n_switches,
                "connected": len(states), "verified": states.count("verified"),
                "failed": states.count("failed"), "refused": self.refused,
                "refusals": self.refusals,
                "adaptive": None if self.decisions is None else self.decisions.status(),
                "per_switch": per}
