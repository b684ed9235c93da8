"""Prove the exact switch path and VC sequence of single probes with per-flow packet counters.

Method (``docs/emulation.md``):

1. Read every bridge's flow counters (:class:`~emulation.mininet.ofclient.FlowReader`, one OpenFlow
   1.3 flow-stats request per bridge over persistent management connections: all 50 bridges
   of Slim Fly q=5 in ~10–30 ms).
2. Send **one** probe (a scapy frame from inside the source host), wait until the destination
   host's socket has it, make ``ovs-vswitchd`` push the datapath's cached statistics to the
   OpenFlow rules (``revalidator/purge``; without it, packets that hit an already cached
   datapath flow are credited only at the next revalidation, ~0.5 s later), read again.
3. The counters that moved are the probe's footprint: the ingress entry (table 0,
   ``in_port=<host port>``, or for UGAL-L one of its decision entries) at the source switch; one egress entry (table ``T_EGRESS``:
   ``metadata=<out port>, vlan_pcp=<VC>``; in the ``standard`` profile ``metadata=<out port> |
   <VC> << VC_SHIFT``) per hop — the switch, its out port and the VC the
   hop is taken on; the deliver entry (table ``T_FWD``, priority 400, ``eth_dst=<host MAC>``)
   at the last switch.  Starting at the source switch, each hop's out port leads (through
   ``topo.adj``) to the next switch, which must hold the next hop or the delivery: the ordered
   hop list ``(switch, out port, VC)`` is reconstructed.
4. It must equal ``TableSet.walk(src switch, dst switch, class, intermediate)`` — the switches,
   the port numbers and the VCs — with the intermediate that the probe's UDP source port
   selects (``udp_src`` → the source choice entry in table ``T_CHOICE``; in the ``standard``
   OpenFlow profile its IPv4 destination address does).  Any extra, missing
   or different counter (another port, another VC, a detour, a drop, a delivery elsewhere)
   makes the check fail; a wrong table cannot produce the expected footprint, because every
   hop's counter is tied to the port and the VC the packet really left on.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from emulation.mininet.net import FabricNet
from emulation.mininet.ofclient import FlowReader, unixctl
from emulation.mininet.probes import Prober
from tablegen.exports.openflow import (
    DECIDE_PRIORITY,
    IPPROTO_UDP,
    OFPVID_PRESENT,
    T_CHOICE,
    T_DECIDE,
    T_EGRESS,
    T_FWD,
    T_INGRESS,
    VC_SHIFT,
    host_macs,
    plan,
    program,
)
from tablegen.tables import TableSet

__all__ = ["PathChecker", "PathResult", "target_of_probe", "expected_walk"]


@dataclass
class PathResult:
    src: int                      # host ids
    dst: int
    udp_src: int
    delivered: bool
    measured: dict                # {"switches", "ports", "vcs"} reconstructed from counters
    expected: dict | None         # the walk of the intermediate udp_src selects
    target: int | None            # phase-0 target (intermediate) udp_src selects, if any
    ok: bool
    problems: list = field(default_factory=list)
    candidates_ok: bool = False   # measured equals the walk of *some* allowed target

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "udp_src": self.udp_src,
                "target": self.target, "delivered": self.delivered, "ok": self.ok,
                "measured": self.measured, "expected": self.expected,
                "problems": self.problems}

    @property
    def hops(self) -> int:
        return len(self.measured["ports"])


def target_of_probe(prog, udp_src: int, ipv4_dst: str, vid_base: int = 0) -> int | None:
    """The phase-0 target (VID ``vid_base + 1 + t``: ``Plan.vid_base`` of the program's
    profile) that the source-choice table of ``prog`` assigns to
    a UDP probe from ``udp_src`` to ``ipv4_dst`` (dotted): the highest-priority entry whose
    L4 source port or IPv4 destination bits it matches; ``None`` when that entry writes no
    target (Open vSwitch's SELECT group) or the program has no source choice."""
    dst = int(ipaddress.IPv4Address(ipv4_dst))
    for f in sorted((f for f in prog.flows if f.table == T_CHOICE), key=lambda f: -f.priority):
        m = dict(f.match)
        if "udp_src" in m:
            value, mask = m["udp_src"]
            hit = m.get("ip_proto") == IPPROTO_UDP and udp_src & mask == value
        elif "ipv4_dst" in m:
            value, mask = (int(ipaddress.IPv4Address(x)) for x in m["ipv4_dst"])
            hit = dst & mask == value
        else:
            hit = "tcp_src" not in m
        if hit:
            return next(((a[2] & ~OFPVID_PRESENT) - 1 - vid_base for a in f.actions
                         if a[:2] == ("set_field", "vlan_vid")), None)
    return None


def expected_walk(ts: TableSet, src_sw: int, dst_sw: int, choice_cls, target) -> dict:
    """What the pipeline does with a probe: hosts of one switch talk directly (table 0);
    otherwise the walk of the ingress class, or of the choice class through ``target``."""
    if src_sw == dst_sw:
        return {"switches": [src_sw], "ports": [], "vcs": []}
    if choice_cls is not None:
        return ts.walk(src_sw, dst_sw, choice_cls, target)
    return ts.walk(src_sw, dst_sw, ts.classes[0])


class PathChecker:
    """Counters-based path check on a net whose bridges hold ``ts``'s program (from files or
    from the controller) in OpenFlow profile ``profile``.  Use as a context manager (it
    holds sockets)."""

    def __init__(self, fnet: FabricNet, ts: TableSet, prober: Prober | None = None,
                 wait: float = 1.0, profile: str = "ovs"):
        if ts.topo.name() != fnet.topo.name() and not _degraded_of(ts.topo, fnet.topo):
            raise ValueError(f"tables for {ts.topo.name()}, net of {fnet.topo.name()}")
        self.fnet, self.ts, self.topo = fnet, ts, fnet.topo
        self.plan = plan(ts, profile=profile)   # the OpenFlow profile the bridges hold
        self.choice = self.plan.choice if self.plan.ingress["choice"] else None
        self._progs: dict[int, object] = {}
        self.own_prober = prober is None
        self.prober = prober or Prober(fnet)
        self.reader = FlowReader(fnet.bridges, paths=[fnet.of_socket(s) for s in
                                                      range(len(fnet.bridges))])
        self.wait = wait
        self.mac_host = {int(m): h for h, m in enumerate(host_macs(self.topo).tolist())}
        self.bridge_switch = {b: s for s, b in enumerate(fnet.bridges)}
        self.times: list[float] = []

    def close(self):
        self.reader.close()
        if self.own_prober:
            self.prober.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def prog(self, s: int):
        if s not in self._progs:
            self._progs[s] = program(self.plan, s)
        return self._progs[s]

    # -- counters ------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Counters of tables ``T_INGRESS``, ``T_DECIDE``, ``T_FWD`` and ``T_EGRESS`` (the
        phase-exit and choice tables are not needed and VAL_nta's phase-exit table is large):
        ``{("egress", s, port, vc) | ("deliver", s, host) | ("ingress", s, port) |
        ("local", s, host) | ("fwd", s, table, priority, match) : packets}``."""
        out: dict = {}
        reads = [self.reader.read(t) for t in (T_INGRESS, T_DECIDE, T_FWD, T_EGRESS)]
        for b in self.fnet.bridges:
            s = self.bridge_switch[b]
            for table, prio, m, n in (x for r in reads for x in r[b]):
                if table == T_EGRESS and "metadata" in m:
                    # the standard profile carries the VC in the metadata (vc_in_metadata)
                    meta = int(m["metadata"])
                    vc = int(m["vlan_pcp"]) if "vlan_pcp" in m else meta >> VC_SHIFT
                    k = ("egress", s, meta & ((1 << VC_SHIFT) - 1), vc)
                elif table == T_FWD and prio == 400:
                    k = ("deliver", s, self.mac_host.get(int(m.get("eth_dst", -1)), -1))
                elif table == T_INGRESS and prio == 100:
                    # a net wired like a real fabric: the controller matched the switch's
                    # own port number; the walk speaks of the planned one
                    port = int(m.get("in_port", -1))
                    w = self.fnet.wiring
                    k = ("ingress", s, port if w is None else w.planned(s, port))
                elif table == T_DECIDE and prio == DECIDE_PRIORITY:
                    # UGAL-L's decision entries take IPv4 from any host port of the switch
                    k = ("decide", s)
                elif table == T_INGRESS and prio == 200:
                    k = ("local", s, self.mac_host.get(int(m.get("eth_dst", -1)), -1))
                else:
                    k = ("flow", s, table, prio, tuple(sorted(m.items())))
                out[k] = out.get(k, 0) + n
        return out

    @staticmethod
    def delta(before: dict, after: dict) -> dict:
        return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}

    # -- one probe -----------------------------------------------------------------------------
    def footprint(self, src: int, dst: int, udp_src: int) -> tuple[bool, dict]:
        """Send one probe and return ``(delivered, counter deltas)``."""
        # OVS: earlier traffic's cached stats reach the rules; ofsoftswitch13 counts on the
        # rules themselves
        purge = self.fnet.datapath == "ovs"
        self.prober.flush()
        if purge:
            unixctl("revalidator/purge")
        before = self.snapshot()
        p = self.prober.send(src, dst, udp_src)
        delivered = self.prober.wait_for(p, self.wait)
        if purge:
            unixctl("revalidator/purge")
        return delivered, self.delta(before, self.snapshot())

    def reconstruct(self, src: int, dst: int, d: dict,
                    expected: dict | None = None) -> tuple[dict, list]:
        """Ordered hops from the counter deltas ``d`` (see the module doc).  A switch the
        path visits twice holds two hop counters; the hop with the lower VC was taken first
        (VCs never decrease along a path).  Only when two hops at one switch carry the same
        VC is the order not in the counters: then the order of ``expected`` is taken if
        its hop is among them (the multiset of hops is still checked exactly)."""
        topo = self.topo
        s0, p0 = topo.host_of(src)
        s1, p1 = topo.host_of(dst)
        problems = []
        neg = {k: v for k, v in d.items() if v < 0}
        if neg:
            problems.append(f"counters went down: {neg}")
        hops = Counter()
        for k, v in d.items():
            if k[0] == "egress" and v > 0:
                hops[(k[1], k[2], k[3])] += v
        deliver = {k: v for k, v in d.items() if k[0] in ("deliver", "local") and v > 0}
        ingress = {k: v for k, v in d.items() if k[0] in ("ingress", "decide") and v > 0}
        # UGAL-L: the host's tag entry, then one decision entry of the switch
        if s0 != s1 and ingress not in ({("ingress", s0, p0): 1},
                                        {("ingress", s0, p0): 1, ("decide", s0): 1}):
            problems.append(f"ingress counters {ingress}; expected one packet in at switch "
                            f"{s0} port {p0}")
        want_del = ("local" if s0 == s1 else "deliver", s1, dst)
        if deliver != {want_del: 1}:
            problems.append(f"delivery counters {deliver}; expected {want_del}: 1")
        switches, ports, vcs = [s0], [], []
        u = s0
        guard = sum(hops.values()) + 1
        while guard > 0:
            guard -= 1
            here = sorted((k for k, v in hops.items() if k[0] == u and v > 0),
                          key=lambda k: k[2])
            if not here:
                break
            pick = here[0]
            if len(here) > 1 and here[1][2] == pick[2] and expected is not None:
                i = len(ports)
                if i < len(expected["ports"]):
                    want = (u, expected["ports"][i], expected["vcs"][i])
                    if want in here:
                        pick = want
            _, port, vc = pick
            hops[pick] -= 1
            ports.append(port)
            vcs.append(vc)
            j = topo.port_index(u, port)
            if not 0 <= j < topo.radix or topo.adj[u, j] < 0:
                problems.append(f"switch {u} sent on port {port}, which is no network port")
                break
            u = int(topo.adj[u, j])
            switches.append(u)
        rest = {k: v for k, v in hops.items() if v > 0}
        if rest:
            problems.append(f"hop counters not on the reconstructed path: {rest}")
        if u != s1:
            problems.append(f"the path ends at switch {u}, the destination is on switch {s1}")
        return {"switches": switches, "ports": ports, "vcs": vcs}, problems

    def check(self, src: int, dst: int, udp_src: int | None = None,
              target: int | None = None) -> PathResult:
        """Probe ``src → dst`` (host ids) once and compare with the tables' walk.  Valiant
        routings: give ``target`` (an intermediate; its ``udp_src`` is derived) or
        ``udp_src``; by default the probe's ``udp_src`` is 49152."""
        t0 = time.perf_counter()
        s0, _ = self.topo.host_of(src)
        s1, _ = self.topo.host_of(dst)
        prog = self.prog(s0)
        if target is not None:
            if self.choice is None:
                raise ValueError(f"{self.ts.routing} has no source choice")
            udp_src = self.udp_src_for(s0, target)
        if udp_src is None:
            udp_src = 49152
        tgt = (target_of_probe(prog, udp_src, self.fnet.ip[dst], self.plan.vid_base)
               if self.choice is not None else None)
        delivered, d = self.footprint(src, dst, udp_src)
        expected = None
        if self.choice is None or tgt is not None:
            expected = expected_walk(self.ts, s0, s1, self.choice, tgt)
        measured, problems = self.reconstruct(src, dst, d, expected)
        if not delivered:
            problems.append("the destination host did not receive the probe")
        cand_ok = False
        if expected is None or measured != expected:
            cand_ok = any(measured == w for w in self.allowed_walks(s0, s1))
        if expected is not None and measured != expected:
            problems.append(f"path differs from the tables: measured {measured}, "
                            f"expected {expected}")
        if expected is None and not cand_ok:
            problems.append(f"measured {measured} is no allowed candidate's walk")
        ok = not problems
        self.times.append(time.perf_counter() - t0)
        return PathResult(src, dst, udp_src, delivered, measured, expected, tgt, ok, problems,
                          cand_ok or (ok and expected is not None))

    def udp_src_for(self, s0: int, target: int, base: int = 49152) -> int:
        """A UDP source port that the source choice of switch ``s0`` sends via ``target``."""
        from tablegen.exports.openflow import udp_src_for
        u = udp_src_for(self.prog(s0), target, base)
        if u is None:
            raise ValueError(f"switch {s0}: no source-choice slot leads to target {target}")
        return u

    def targets(self, s0: int) -> list[int]:
        """Targets of the source choice at switch ``s0`` (bucket order)."""
        from tablegen.exports.openflow import buckets
        return [t for t, _ in buckets(self.plan, s0, self.choice)] if self.choice else []

    def allowed_walks(self, s0: int, s1: int) -> list[dict]:
        if s0 == s1:
            return [{"switches": [s0], "ports": [], "vcs": []}]
        if self.choice is None:
            return [self.ts.walk(s0, s1, self.ts.classes[0])]
        return [self.ts.walk(s0, s1, self.choice, t) for t in self.targets(s0)]


def _degraded_of(t, intact) -> bool:
    """Whether ``t`` is ``intact`` with failed cables (tables of a net with cables down or
    left out; the walk never crosses them)."""
    if "fail" not in t.params:
        return False
    from tablegen.verify import rebuilt_topology

    return rebuilt_topology(t, intact=True).name() == intact.name()


def sample_pairs(fnet: FabricNet, n: int, seed: int = 1, distinct_switches: bool = True):
    """``n`` random ordered host pairs (on different switches by default)."""
    rng = np.random.default_rng(seed)
    hosts = fnet.hosts
    out = []
    while len(out) < n:
        a, b = rng.choice(len(hosts), 2, replace=False)
        if distinct_switches and hosts[a, 1] == hosts[b, 1]:
            continue
        out.append((int(hosts[a, 0]), int(hosts[b, 0])))
    return out


def _mac_int(v: str) -> int:
    return int(v.replace(":", ""), 16)


def _norm_match(match: tuple) -> dict:
    """A program flow's match in :class:`~emulation.mininet.ofclient.FlowReader`'s form."""
    out = {}
    for k, v in match:
        if k == "eth_dst":
            out[k] = (_mac_int(v[0]), _mac_int(v[1])) if isinstance(v, tuple) else _mac_int(v)
        elif isinstance(v, tuple):
            out[k] = (int(v[0]), int(v[1]))
        else:
            out[k] = int(v)
    return out


def forwarding_flow(pc: PathChecker, s: int, delta: dict):
    """The program flow of switch ``s``'s forwarding table (``T_FWD``, priority < 400) that a
    probe's counter ``delta`` shows it used, or ``None``."""
    used = [k for k, v in delta.items() if v > 0 and k[0] == "flow" and k[1] == s
            and k[2] == T_FWD and k[3] < 400]
    for k in used:
        m = dict(k[4])
        for f in pc.prog(s).flows:
            if f.table == T_FWD and f.priority == k[3] and _norm_match(f.match) == m:
                return f
    return None


def corrupt_forwarding(pc: PathChecker, src: int, dst: int, udp_src: int = 49152):
    """Negative control: rewrite the out port of the forwarding entry that the probe
    ``src → dst`` uses at its source switch (``ovs-ofctl --strict mod-flows``), choosing a
    wrong port whose neighbour's own route to the destination does not come back (no
    forwarding loop).  Returns ``(flow, original ofctl line, wrong line)``; restore with
    :func:`restore_flow`."""
    from tablegen.exports.openflow import Flow
    from tablegen.exports.openflow_text import ofctl_flow

    topo, ts = pc.topo, pc.ts
    s0, _ = topo.host_of(src)
    s1, _ = topo.host_of(dst)
    _, d = pc.footprint(src, dst, udp_src)
    f = forwarding_flow(pc, s0, d)
    if f is None:
        raise RuntimeError(f"no forwarding entry of switch {s0} counted the probe {src}->{dst}")
    good = next(a[1] for a in f.actions if a[0] == "write_metadata")
    wrong = None
    for j in (topo.adj[s0] >= 0).nonzero()[0].tolist():
        port = topo.port_number(s0, j)
        n = int(topo.adj[s0, j])
        if port == good or n == s1:
            continue
        if not ts.on_path(s0, n, s1):        # n's phase-1 route to s1 avoids s0: no loop
            wrong = port
            break
    if wrong is None:
        raise RuntimeError(f"switch {s0}: no loop-free wrong port toward switch {s1}")
    bad = Flow(f.table, f.priority, f.match, tuple(("write_metadata", wrong)
                                                   if a[0] == "write_metadata" else a
                                                   for a in f.actions))
    orig_line, bad_line = ofctl_flow(f), ofctl_flow(bad)
    pc.fnet.ofctl("--strict", "mod-flows", pc.fnet.bridges[s0], bad_line)
    return f, orig_line, bad_line


def restore_flow(pc: PathChecker, s: int, line: str) -> None:
    pc.fnet.ofctl("--strict", "mod-flows", pc.fnet.bridges[s], line)
