"""The controller's decisions about real switches, as a plain class (faucet style: the os-ken
app hands in events and sends what comes back; docs/openflow.md, *Real switches*).

:class:`Learner` holds the cabling heard so far (:class:`~controller.openflow.lldp.Cabling`),
decides when it is settled (nothing new for ``settle`` seconds), maps it onto the plan
(:func:`~controller.openflow.portmap.assign`) — or takes the map of a fabric file given at
start — and then makes the controller's :class:`~controller.openflow.fabric.Fabric`: each
mapped datapath gets its planned switch's program on its own port numbers, the planned
cables the fabric lacks are failed links (the degraded, proven tables of ``Links``), and a
cable heard later that is one of them is handed back (the app restores it through the live
update path).
"""

from __future__ import annotations

import time
from pathlib import Path

from controller.openflow import messages as msg
from controller.openflow.fabric import Fabric
from controller.openflow.lldp import DISCOVER_FLOW, LLDP_FLOW, Cabling, frame
from controller.openflow.portmap import Assignment, assign
from tablegen.errors import BadInput
from tablegen.fabrics.fabric import Fabric as CabledFabric
from tablegen.limits import SETTLE_S
from tablegen.tables import TableSet

__all__ = ["LLDP_INTERVAL_S", "LLDP_MAPPED_S", "Learner", "SETTLE_S"]

# LLDP out of every port this often while the cabling is learned, and once it is mapped
# (a port that comes up is probed at once: the period only catches what no event reports)
LLDP_INTERVAL_S = 1.0
LLDP_MAPPED_S = 5.0


class Learner:
    """Map mode of the controller: ``given`` (a fabric file's :class:`CabledFabric`) is
    mapped at once (:class:`BadInput` when it does not fit ``base``'s plan); otherwise the
    cabling is learned with LLDP and mapped once it has settled.  ``out``: where the learned
    fabric file is written (on the map and on every cable that appears later)."""

    def __init__(self, base: TableSet, settle: float = SETTLE_S, out: Path | None = None,
                 given: CabledFabric | None = None, profile: str = "ovs",
                 clock=time.monotonic):
        self.base, self.settle, self.out, self.clock = base, settle, out, clock
        self.profile = profile          # the OpenFlow profile of every program
        self.cabling = Cabling(clock)
        self.given = given
        self.assignment: Assignment | None = None
        self.error: str | None = None         # why the last cabling could not be mapped
        self.times: dict[str, float] = {}     # wall clock: first_switch, learned
        if given is not None:
            self.assignment = assign(given, base.topo)
            self.times["learned"] = time.time()

    # -- what to send ------------------------------------------------------------------------
    def discovery(self, cookie: int) -> list:
        """Flow-mods for a datapath not mapped yet: LLDP and every other frame to the
        controller (the second names the hosts; the first repair removes it)."""
        return [msg.flow_mod(LLDP_FLOW, cookie), msg.flow_mod(DISCOVER_FLOW, cookie)]

    def undiscovery(self) -> list:
        """Strict deletes of :meth:`discovery`'s entries (a datapath that gets no program)."""
        return [msg.delete_flow(f.table, f.priority, msg.match(f))
                for f in (LLDP_FLOW, DISCOVER_FLOW)]

    def probes(self, dpid: int, only: int | None = None) -> list[tuple[int, bytes]]:
        """``(port, LLDP frame)`` for every up port of ``dpid`` (or port ``only``)."""
        return [(n, frame(dpid, n, p["hw"] or "02:00:00:00:00:00"))
                for n, p in sorted(self.cabling.ports.get(dpid, {}).items())
                if p["up"] and (only is None or n == only)]

    # -- when and what to map ----------------------------------------------------------------
    def seen(self, dpid: int) -> None:
        self.times.setdefault("first_switch", time.time())

    def ready(self) -> bool:
        """Whether the learned cabling should be mapped now (settled, not mapped yet)."""
        return self.assignment is None and self.cabling.settled(self.settle)

    def learn(self) -> Assignment | None:
        """Map the settled cabling; ``None`` (and :attr:`error`, one line) when it does not
        fit the plan — tried again once something changes."""
        fab = self.cabling.fabric()
        try:
            self.assignment = assign(fab, self.base.topo)
        except BadInput as e:
            self.error = str(e)
            self.cabling.changed = self.clock() + 3600 * 24 * 365   # until the next change
            return None
        self.error = None
        self.times["learned"] = time.time()
        self.save(fab)
        return self.assignment

    def save(self, fab: CabledFabric | None = None) -> None:
        if self.out is not None:
            (fab or self.cabling.fabric()).save(self.out)

    def fabric(self, ts: TableSet, **kw) -> Fabric:
        """The controller's fabric serving ``ts`` (the base tables, or those without the
        absent cables) on the mapped datapaths; before the map, one that knows none."""
        a = self.assignment
        n = self.base.topo.n_switches
        if a is None:
            return Fabric(ts, dpids=[None] * n, ports={}, lldp=True, profile=self.profile,
                          **kw)
        return Fabric(ts, dpids=a.dpids(n), ports=a.ports, lldp=True, profile=self.profile,
                      **kw)

    def failed(self, links) -> None:
        """Mark the planned cables the fabric lacks as down in ``links``
        (:class:`~controller.openflow.update.Links`)."""
        t = links.intact
        for s, ps, u, pu in self.assignment.absent:
            links.down.add((s, t.port_index(s, ps)))
            links.down.add((u, t.port_index(u, pu)))

    def appeared(self, cable, links) -> tuple | None:
        """A cable heard after the map: the planned cable it restores (its ports now mapped,
        both ends up in ``links``), or ``None`` when it fits no absent one."""
        if self.assignment is None:
            return None
        got = self.assignment.fit(cable[0], cable[1], self.base.topo)
        if got is not None:
            s, ps, u, pu = got
            links.port(s, ps, True)
            links.port(u, pu, True)
            self.save()
        return got

    def status(self) -> dict:
        c = self.cabling
        a = self.assignment
        return {"mode": "file" if self.given is not None else "lldp",
                "switches": len(c.ports), "cables": len(c.cables()),
                "hosts_heard": len(c.macs), "error": self.error, "times": self.times,
                "map": None if a is None else a.to_dict()}
