"""Repairs ready before the failure (issue 27, docs/updates.md, *Repairs made ready*).

When a port goes down the controller used to plan the two-phase update, build its OpenFlow
messages and serialise them one by one — on Slim Fly q = 5 MIN 112 ms of building and 131 ms
of serialising before Open vSwitch had anything to do (it then needs about 30 ms).  So while
the fabric is idle, :class:`Prepared` computes, for every single cable that could fail next
(and every failed one that could come back), the proven table set without it, the
:class:`~controller.openflow.update.Update` to it, and the *install* and *flip* phases of
every switch already serialised into one ``bytes`` each; a port event whose failed cables
are one of those sends them as they are (one write per switch per phase).

Plain code, no socket: :meth:`Prepared.work` is a generator that does one switch of one
cable per step, so the os-ken app runs it in a green thread and yields between steps (a port
event is never kept waiting for more than a step).  The repairs hold for the fabric they were
made from (the same :class:`~controller.openflow.fabric.Fabric` object: any update or
reconnect makes a new basis) and for its verified switches.  UGAL-L's decision rounds do
not: its decision entries belong to no program version, so a repair neither sends them nor
depends on them.

Bound: at most ``budget`` bytes of serialised messages (Slim Fly q = 5 MIN: about 0.45 MB a
cable, 175 cables); candidates beyond it are left to the ordinary path and counted.  Cost per
cable: the tables (graph-minimal, verified: a few ms on q = 5) plus building and serialising
its install and flip messages, O(entries of the program).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from controller.openflow import messages as msg
from controller.openflow.update import Links, Phase, Update
from tablegen.limits import PREPARE_MIB

__all__ = ["Encoder", "PREPARE_BYTES", "PREPARE_IDLE_S", "Prepared", "Ready", "serialised"]

PREPARE_BYTES = PREPARE_MIB << 20   # default bound of the serialised repairs kept ready
PREPARE_IDLE_S = 1.0           # the fabric idle this long (every switch verified): prepare

# what os-ken's serialiser reads from a datapath; the bytes are the same for every switch
_DP = SimpleNamespace(ofproto=msg.ofp, ofproto_parser=msg.parser)


@dataclass
class Ready:
    """One prepared repair: the update and its first phases, serialised per datapath id."""

    update: Update
    phases: list[Phase]
    size: int = 0

    def phases_for(self, switches):
        """The phases for the verified ``switches`` (those prepared, a subset): *install*
        and *flip* as prepared, then *remove*, computed after the flip as any update's."""
        keep = {self.update.old.dpid_of(u) for u in switches}
        for ph in self.phases:
            yield Phase(ph.name, {d: m for d, m in ph.msgs.items() if d in keep},
                        {d: n for d, n in ph.counts.items() if d in keep}, ph.wait)
        yield self.update.remove_phase(switches)


@dataclass
class Prepared:
    """The ready repairs of one basis (a fabric and its verified switches)."""

    budget: int                                  # bytes of serialised messages at most
    drain: float
    ready: dict = field(default_factory=dict)    # failed set -> Ready
    basis: object = None
    switches: frozenset = frozenset()
    size: int = 0
    left_out: int = 0                            # candidates beyond the budget
    refused: int = 0                             # candidates whose tables cannot be made
    seconds: float = 0.0                         # time spent preparing this basis
    complete: bool = False

    def take(self, fabric, failed: frozenset, switches) -> Ready | None:
        """The repair for ``failed`` if it was prepared from ``fabric`` for (at least) the
        verified ``switches``; ``None`` otherwise."""
        r = self.ready.get(failed)
        if r is None or fabric is not self.basis or not set(switches) <= self.switches:
            return None
        return r

    def stale(self, fabric, switches) -> bool:
        return fabric is not self.basis or frozenset(switches) != self.switches

    def work(self, fabric, links: Links, switches):
        """Prepare the repairs from ``fabric`` (its verified ``switches``): one step per
        switch of each candidate; the caller yields to other work between steps."""
        self.ready, self.size, self.left_out, self.refused = {}, 0, 0, 0
        self.basis, self.switches, self.complete = fabric, frozenset(switches), False
        self.seconds = 0.0
        if self.budget <= 0:
            self.complete = True
            return
        enc = Encoder()
        now = links.failed()
        # a failed cable coming back first: one candidate each, and the likelier next event
        todo = [now - {c} for c in sorted(now - links.known)]
        todo += [now | {c} for c in links.cables() if c not in now]
        for i, failed in enumerate(todo):
            t = time.perf_counter()
            try:
                target = links.target_for(frozenset(failed))
                upd = Update(fabric, target, drain=self.drain)
            except ValueError:
                self.refused += 1
                continue
            if upd.mode != "two-phase":
                continue
            install, flip = Phase("install"), Phase("flip", wait=self.drain)
            size = 0
            self.seconds += time.perf_counter() - t
            for u in sorted(self.switches):
                t = time.perf_counter()
                d = fabric.dpid_of(u)
                groups, adds, stamps = upd.two_phase_records(u)
                parts = (b"".join([*map(enc.group, groups),
                                   *(enc.flow(f, upd.new.cookie) for f in adds)]),
                         b"".join(enc.flow(f, upd.new.cookie) for f in stamps))
                for ph, blob, n in zip((install, flip), parts, (len(groups) + len(adds),
                                                                len(stamps))):
                    if n:
                        ph.msgs[d], ph.counts[d] = blob, n
                        size += len(blob)
                self.seconds += time.perf_counter() - t
                yield
            if self.size + size > self.budget:
                self.left_out = len(todo) - i
                break
            # the new fabric's caches are rebuilt for the read-back; keep only the bytes
            upd.new.forget()
            self.ready[frozenset(failed)] = Ready(upd, [install, flip], size)
            self.size += size
        self.complete = True

    def status(self) -> dict:
        return {"ready": len(self.ready), "bytes": self.size, "left_out": self.left_out,
                "refused": self.refused, "seconds": round(self.seconds, 2),
                "complete": self.complete}


class Encoder:
    """OpenFlow bytes of flow adds and group adds, each record serialised once: a flow's
    bytes differ between table sets only in the cookie, patched in (``ofp_flow_mod`` has it
    right after the 8-byte header).  Serialising through os-ken costs about 60 µs a message,
    and every candidate repeats nearly the whole program."""

    def __init__(self):
        self._flows: dict = {}
        self._groups: dict = {}

    def flow(self, f, cookie: int) -> bytes:
        b = self._flows.get(f)
        if b is None:
            b = self._flows[f] = serialised(msg.flow_mod(f, 0))
        return b[:8] + cookie.to_bytes(8, "big") + b[16:]

    def group(self, g) -> bytes:
        b = self._groups.get(g)
        if b is None:
            b = self._groups[g] = serialised(msg.group_mod(g, msg.ofp.OFPGC_ADD))
        return b


def serialised(m) -> bytes:
    """``m``'s bytes with xid 0: no reply is matched to a flow-mod or group-mod (an error
    reply is counted, whatever its xid)."""
    m.datapath = _DP
    m.xid = 0
    m.serialize()
    return bytes(m.buf)
