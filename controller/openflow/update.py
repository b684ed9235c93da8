"""Live updates from one proven table set to another, as phases of OpenFlow messages.

A plain class, like :class:`~controller.openflow.fabric.Fabric`: :class:`Update` compares what
every switch holds under the old fabric with what it must hold under the new one and returns
the messages of each phase; the os-ken app sends a phase to every switch, waits for every
barrier reply, and only then starts the next (``docs/updates.md`` has the proofs).

``ordered`` (the table diff allows it: no entry toward an existing destination changes, no
cable goes, VCs stay; DSN-F growth with its own routing):

1. *add*: entries and groups the old program lacks (new destinations, the ports of new
   cables);
2. *modify*: entries in both, re-added with the new generation's cookie (the actions of
   aggregated group entries may change; the exceptions they need were added in 1);
3. *delete*: entries the new program lacks.

At every moment each switch forwards every existing destination as both programs do, so no
packet between existing hosts sees a difference, whatever the order in which switches apply
a phase.

``two-phase`` (Reitblatt et al., "Abstractions for Network Update", SIGCOMM 2012):

1. *install*: the new program under the other version tag
   (:func:`tablegen.exports.openflow.versioned`) beside the old, everything but the entries
   that stamp packets from hosts; no packet matches it yet;
2. *flip*: the stamping entries, replaced in place: from its barrier on, a switch tags what
   its hosts send with the new version;
3. *drain*: ``drain`` seconds for packets of the old version still in flight;
4. *remove*: the old version's entries and groups.

A packet is stamped once, at its first switch, and every later entry it can match belongs to
its version (or is equal in both), so it is forwarded entirely by the old program or
entirely by the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.openflow import messages as msg
from controller.openflow.fabric import Fabric
from tablegen.errors import BadInput
from tablegen.exports.openflow import T_DECIDE, Flow, is_stamp
from tablegen.limits import DRAIN_S
from tablegen.tables import TableSet
from tablegen.update import table_diff

__all__ = ["Links", "Phase", "Update", "control_tables", "profile_of", "proven_tables"]

# a rewiring update's drain before cables move: the hosts are held anyway, and installing
# thousands of entries slows Open vSwitch's userspace path (probes queued up to 1.07 s while
# DSN-F 64's 9,536 went in)
HOLD_DRAIN_S = 2.0


@dataclass
class Phase:
    """Messages per switch (by datapath id) to send before one barrier round."""

    name: str
    msgs: dict = field(default_factory=dict)   # a list of messages, or their bytes
    counts: dict = field(default_factory=dict)  # messages in each ``bytes`` of ``msgs``
    wait: float = 0.0              # seconds to wait after every switch's barrier reply
    pause: bool = False            # then wait until the cables are moved (``resume``)

    def count(self) -> int:
        return sum(self.counts[d] if isinstance(m, bytes) else len(m)
                   for d, m in self.msgs.items())


class Update:
    """The update of the switches of ``old`` (a :class:`Fabric`, holding their current
    programs) to the proven table set ``new``: the same switch ids, or ``relabel`` (old id
    -> new id, DSN-F ``p -> p + 1``), which makes it a ``rewire`` update.

    ``mode``: ``ordered``, ``two-phase`` or ``None`` (the table diff decides: ``ordered``
    when it allows it).  ``ValueError`` for ``ordered`` where the diff does not allow it,
    and for a versioned update where the VIDs leave no version bit.
    """

    def __init__(self, old: Fabric, new: TableSet, mode: str | None = None,
                 drain: float = DRAIN_S, relabel=None):
        self.old = old
        self.diff = table_diff(old.ts, new, relabel)
        allowed = self.diff["order"]["consistency"]
        if relabel is not None:
            mode = "rewire"
        elif mode is None:
            mode = allowed
        if mode == "ordered" and allowed != "ordered":
            raise ValueError(f"update {old.topo.name()} -> {new.topo.name()}: entries toward "
                             "existing destinations, cables or VCs change; expected two-phase")
        version = old.version if mode == "ordered" else 1 - old.version
        n_old = old.topo.n_switches
        self.map = list(range(n_old)) if relabel is None else [int(r) for r in relabel]
        dpids = addresses = None
        if relabel is not None:
            dpids, addresses = _renumbered(old, new, self.map)
        elif old.ports is not None:      # real switches: they keep their ids and ports
            if new.topo.n_switches != n_old:
                raise ValueError(f"update {old.topo.name()} -> {new.topo.name()}: a fabric of "
                                 "mapped real switches cannot grow")
            dpids = old.dpids
        self.new = Fabric(new, old.split_bits, version=version,
                          fast_failover=old.fast_failover, dpids=dpids, addresses=addresses,
                          profile=old.profile, ports=old.ports if relabel is None else None,
                          lldp=old.lldp)
        # the switches growth adds connect before their cables (docs/updates.md)
        self.new.awaiting = set(range(old.topo.n_switches, new.topo.n_switches))
        if mode != "ordered" and not (self.new.plan_.versions and old.plan_.versions):
            raise ValueError(f"update to {new.topo.name()}: its VIDs leave no bit for the "
                             "version tag; a two-phase update is not possible")
        self.mode, self.drain = mode, drain

    def phases(self, switches):
        """The phases for the connected ``switches`` (switch ids), one at a time: a
        two-phase update's *remove* is computed after the flip (it is not on the way to the
        new program)."""
        switches = list(switches)
        if self.mode == "ordered":
            out = [Phase("add"), Phase("modify"), Phase("delete")]
            for u in switches:
                for ph, m in zip(out, self._ordered(u)):
                    if m:
                        ph.msgs[self.old.dpid_of(u)] = m
            yield from out
            return
        out = [Phase("install"), Phase("flip", wait=self.drain)]
        if self.mode == "rewire":       # no packet in flight while cables move
            out.insert(1, Phase("hold", wait=max(self.drain, HOLD_DRAIN_S), pause=True))
        for u in switches:
            install, flip = self.two_phase(u)
            parts = (install, self._hold(u), flip) if self.mode == "rewire" else (install, flip)
            for ph, m in zip(out, parts):
                if m:
                    ph.msgs[self.old.dpid_of(u)] = m
        yield from out
        yield self.remove_phase(switches)

    def remove_phase(self, switches) -> Phase:
        """A two-phase update's last phase: the old version's entries and groups."""
        remove = Phase("remove")
        for u in switches:
            if (m := self._remove(u)):
                remove.msgs[self.old.dpid_of(u)] = m
        return remove

    def _both(self, u: int):
        (of, og), (nf, ng) = self.old.intended(u), self.new.intended(self.map[u])
        return of, og, nf, ng

    def _hold(self, u: int) -> list:
        """The old program's stamping entries replaced by drops: hosts inject nothing until
        the flip (the new version's stamps replace them in place)."""
        of, _ = self.old.intended(u)
        return [msg.flow_mod(Flow(f.table, f.priority, f.match, ()), self.old.cookie)
                for _, (_, f) in of.items() if is_stamp(f)]

    def _ordered(self, u: int) -> tuple[list, list, list]:
        of, og, nf, ng = self._both(u)
        cookie = self.new.cookie
        add = [msg.group_mod(g, msg.ofp.OFPGC_ADD) for gid, (_, g) in ng.items() if gid not in og]
        add += [msg.flow_mod(f, cookie) for k, (_, f) in nf.items() if k not in of]
        mod = [msg.group_mod(g, msg.ofp.OFPGC_MODIFY) for gid, (d, g) in ng.items()
               if gid in og and og[gid][0] != d]
        mod += [msg.flow_mod(f, cookie) for k, (v, f) in nf.items() if k in of and of[k][0] != v]
        dele = [msg.delete_flow(f.table, f.priority, msg.match(f))
                for k, (_, f) in of.items() if k not in nf]
        dele += [msg.group_delete(gid) for gid in og if gid not in ng]
        return add, mod, dele

    def two_phase(self, u: int) -> tuple[list, list]:
        """Switch ``u``'s messages of the *install* and *flip* phases."""
        groups, install, flip = self.two_phase_records(u)
        cookie = self.new.cookie
        return ([msg.group_mod(g, msg.ofp.OFPGC_ADD) for g in groups]
                + [msg.flow_mod(f, cookie) for f in install],
                [msg.flow_mod(f, cookie) for f in flip])

    def two_phase_records(self, u: int) -> tuple[list, list, list]:
        """Switch ``u``'s groups to add and flows to add in *install*, and the stamping
        flows that *flip* replaces (records; every flow gets the new cookie)."""
        of, og, nf, ng = self._both(u)
        groups = [g for gid, (_, g) in ng.items() if gid not in og]
        install, flip = [], []
        for k, (v, f) in nf.items():
            if is_stamp(f):
                flip.append(f)
            elif f.table == T_DECIDE and k in of:
                continue        # no version: the decision loop's, kept through the update
            elif k in of and of[k][0][1] != v[1]:
                raise AssertionError(f"switch {u}: entry {k[:2]} differs between versions "
                                     "outside the stamp")
            else:               # new, or equal in both (network ingress): cookie updated
                install.append(f)
        return groups, install, flip

    def _remove(self, u: int) -> list:
        of, og, nf, ng = self._both(u)
        out = [msg.delete_flow(f.table, f.priority, msg.match(f))
               for k, (_, f) in of.items() if k not in nf]
        return out + [msg.group_delete(gid) for gid in og if gid not in ng]

    def summary(self) -> dict:
        """JSON-ready: mode, the two fabrics, the new version, entry counts."""
        e = self.diff["entries"]
        return {"mode": self.mode, "from": self.diff["from"], "to": self.diff["to"],
                "version": self.new.version, "entries_added": e["added"],
                "entries_changed": e["changed"], "entries_removed": e["removed"]}


def _renumbered(old: Fabric, new: TableSet, relabel: list[int]) -> tuple[list, tuple]:
    """Datapath ids and addresses of ``new`` when it renumbers ``old``'s switches (old switch
    ``i`` is new switch ``relabel[i]``): each switch keeps its datapath, each host its MAC
    (the ``e``-th host of a switch stays its ``e``-th).  ``ValueError`` when a switch's host
    count changes."""
    ot, nt = old.topo, new.topo
    n = nt.n_switches
    if sorted(relabel) != list(range(n)) or ot.n_switches != n:
        raise ValueError(f"{ot.name()} -> {nt.name()}: the relabelling is not a bijection")
    dpids, prefix = [0] * n, [""] * n
    hmac = [""] * nt.n_hosts
    ooff, noff = ot.host_offset, nt.host_offset
    for i, r in enumerate(relabel):
        if ot.hosts[i] != nt.hosts[r]:
            raise ValueError(f"switch {i} has {ot.hosts[i]} hosts, new switch {r} "
                             f"{nt.hosts[r]}; expected hosts to stay")
        dpids[r], prefix[r] = old.dpid_of(i), old.plan_.sw_prefix[i]
        for e in range(int(ot.hosts[i])):
            hmac[int(noff[r]) + e] = old.plan_.host_mac[int(ooff[i]) + e]
    return dpids, (hmac, prefix)


class Links:
    """The cables a running fabric has lost, from OpenFlow port-status events, and the table
    set that routes around them.

    ``base`` is the proven table set the controller was started with (perhaps itself
    degraded: its failed cables stay failed).  A cable counts as failed while either of its
    ports is down; when every port is up again the target is ``base`` itself, so a link that
    comes back restores the original tables exactly.
    """

    def __init__(self, base: TableSet):
        from tablegen.topologies.failures import failed_pairs
        from tablegen.verify import rebuilt_topology

        self.base = base
        self.known = frozenset(failed_pairs(base.topo.params))
        self.intact = rebuilt_topology(base.topo, intact=True) if self.known else base.topo
        self.down: set[tuple[int, int]] = set()        # (switch, network port index)

    def port(self, switch: int, port_no: int, up: bool) -> bool:
        """A port of ``switch`` went up or down; whether the failed cables changed.  Host
        ports and ports without a cable are ignored."""
        t = self.intact
        if not 0 <= switch < t.n_switches:
            return False
        j = t.port_index(switch, port_no)
        if not 0 <= j < t.radix or t.adj[switch, j] < 0:
            return False
        before = self.failed()
        (self.down.discard if up else self.down.add)((switch, j))
        return self.failed() != before

    def failed(self) -> frozenset:
        """Failed switch pairs: those of the base set and those with a port down."""
        return self.known | {tuple(sorted((u, int(self.intact.adj[u, j])))) for u, j in self.down}

    def cables(self) -> list[tuple[int, int]]:
        """Every cable of the intact fabric as a switch pair ``(u, v)``, ``u < v``."""
        t = self.intact
        return sorted({(min(u, int(v)), max(u, int(v))) for u in range(t.n_switches)
                       for v in t.adj[u] if v >= 0})

    def target(self) -> TableSet:
        """The table set for the cables that work now (:meth:`target_for`)."""
        return self.target_for(self.failed())

    def target_for(self, failed: frozenset) -> TableSet:
        """The table set for the ``failed`` switch pairs: ``base`` when no more than its own
        have failed, else graph-minimal tables of ``base``'s routing without the failed
        cables, verified (:class:`ValueError` naming the reason when they cannot be: the
        fabric falls apart, or the routing cannot avoid failed cables)."""
        if failed == self.known:
            return self.base
        from tablegen.errors import TopologyError
        from tablegen.topologies.failures import without_links
        from tablegen.verify import same_routing

        try:
            ts, rep = same_routing(without_links(self.intact, failed), self.base)
        except TopologyError as e:
            raise ValueError(str(e)) from None
        if not rep.ok:
            raise ValueError(f"tables without {sorted(failed)} fail verification: "
                             f"{rep.errors[0]}")
        return ts


def proven_tables(d):
    """The table set of ``d`` if, and only if, ``fabroute verify d`` would accept it: tables
    proven against what fabroute computes, every file checked against the manifest and
    derived again (:func:`tablegen.exports.files.prove_table_dir`).  Anything else is
    refused: :class:`BadInput`, one line."""
    from pathlib import Path

    from tablegen.exports.files import prove_table_dir

    d = Path(d)
    ts, rep, files = prove_table_dir(d)
    errors = rep.errors if not rep.ok else files["errors"] if not files["ok"] else []
    if errors:
        more = len(errors) + (files["error_count"] - len(files["errors"]) if files else 0) - 1
        raise BadInput(f"controller: {d} fails verification: {errors[0]}"
                       + (f" (and {more} more)" if more > 0 else "")
                       + "; expected a table set that 'fabroute verify' accepts")
    return ts


def control_tables(d, current: TableSet, profile: str = "ovs"):
    """:func:`proven_tables` of ``d`` and the relabelling of the running fabric's switches
    (``None``: ids kept), refused unless it is a table set of the running fabric: the same,
    grown, degraded, restored or (DSN-F ``p -> p + 1``) transformed, and written in the
    OpenFlow profile the switches run (``profile``)."""
    from tablegen.update import relation

    ts = proven_tables(d)
    if (got := profile_of(d)) != profile:
        raise BadInput(f"controller: {d}: OpenFlow profile {got}; expected {profile}, the "
                       "profile the running switches were programmed in")
    _, relabel = relation(current.topo, ts.topo)
    return ts, relabel


def profile_of(d) -> str:
    """The OpenFlow profile the manifest of table directory ``d`` records
    (:func:`tablegen.exports.files.openflow_profile`; :class:`BadInput` for a manifest
    that cannot be read)."""
    from pathlib import Path

    from tablegen.exports.files import openflow_profile
    from tablegen.exports.manifest import load_manifest

    return openflow_profile(load_manifest(Path(d))["exports"])
