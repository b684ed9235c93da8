"""UGAL-L decisions from live OpenFlow statistics, as a plain class: counters in, the flows to
modify out.

:class:`Decisions` owns the two objects the simulator's ``ugal-sdn`` shares
(``tablegen/routing/adaptive.py``): a :class:`~tablegen.routing.adaptive.PortEstimator` fed
with every switch's port statistics (and the tc class drops its queue statistics carry where
a port has a QoS row), and an :class:`~tablegen.routing.adaptive.AdaptiveUgal` that turns the
estimates into non-minimal shares per (source switch, destination).  A round
(:meth:`Decisions.decide`) returns, per switch, the table-0 decision entries whose actions
change (:func:`tablegen.exports.openflow.decision_flow`): each one moves a block of flows
between MIN and the Valiant class, both installed and verified; the match never changes.
The os-ken app (``app.py``) polls, sends the MODIFYs and a barrier, and reads table 0 back.
"""

from __future__ import annotations

import numpy as np

from controller.openflow import messages as msg
from tablegen.exports.openflow import (
    IPPROTO_TCP,
    IPPROTO_UDP,
    T_DECIDE,
    decision_flow,
    decision_keys,
)
from tablegen.routing.adaptive import (
    AdaptiveParams,
    AdaptiveUgal,
    PortEstimator,
    blocks_of,
    share_of,
)

__all__ = ["Decisions"]

MATRIX_MAX = 10_000     # (source, destination) shares a decision record carries in full


class Decisions:
    """Adaptive UGAL-L for one fabric (``fabric``: :class:`controller.openflow.fabric.Fabric`
    whose plan has decision entries).  ``link_bps``: the capacity the estimator measures
    every network port against; ``None``: each port's ``curr_speed`` from its port
    description (:meth:`port_speeds`)."""

    def __init__(self, fabric, params: AdaptiveParams, poll: float,
                 link_bps: float | None = None, packet_bytes: float = 1000.0):
        self.fabric, self.p, self.poll = fabric, params, float(poll)
        ts = fabric.ts
        self.topo = topo = ts.topo
        self.ugal = AdaptiveUgal(ts, params)
        exists = topo.adj >= 0
        self.capacity = np.where(exists, (link_bps or 0.0) / 8.0, 0.0)
        self.est = PortEstimator(self.capacity, params, poll, packet_bytes)
        self.rounds = 0
        self.flow_mods = 0
        self.readbacks_equal = 0        # decision read-backs equal to the program
        self.readbacks_differing = 0    # ... that differed (the switch is then repaired)
        self.stale: set[int] = set()
        self.last: dict | None = None   # the newest round's record (:meth:`record`)
        self.keys_per_switch = len(decision_keys(fabric.plan_, 0))
        self.adopted = 0                # shares taken from what the switches hold
        self.reversals = 0              # shares moved against their last move, last round
        self.reversals_total = 0
        self._t0: float | None = None
        self._entries: dict[int, dict] = {}     # switch -> its decision entries (adopt)

    # -- statistics in -------------------------------------------------------------------------
    def _index(self, switch: int, port_no: int) -> int | None:
        """The network port index of the datapath's ``port_no`` (its own number on a real
        switch, mapped back to the plan's); ``None`` for a host or unused port."""
        planned = self.fabric.plan_port(switch, int(port_no))
        if planned is None:
            return None
        j = planned - int(self.topo.hosts[switch]) - 1
        return j if 0 <= j < self.topo.radix and self.topo.adj[switch, j] >= 0 else None

    def port_speeds(self, switch: int, ports) -> None:
        """Port descriptions (``OFPPort``: ``port_no``, ``curr_speed`` in kbit/s) of a switch
        that connected: the capacity of each network port unless ``link_bps`` fixed it."""
        for port in ports:
            j = self._index(switch, port.port_no)
            if j is not None and self.capacity[switch, j] <= 0 and port.curr_speed:
                self.capacity[switch, j] = port.curr_speed * 1000.0 / 8.0

    def stats(self, switch: int, t: float, ports, queues=()) -> None:
        """One switch's ``OFPPortStats`` (and ``OFPQueueStats``) at time ``t``: the
        estimator's input.  A queue's ``tx_errors`` are the packets its tc class dropped;
        they count as drops of its port, like the port's own ``tx_dropped``."""
        if self._t0 is None:
            self._t0 = t
        R = self.topo.radix
        sent, packets, dropped = np.zeros(R), np.zeros(R), np.zeros(R)
        for st in ports:
            j = self._index(switch, st.port_no)
            if j is not None:
                sent[j], packets[j], dropped[j] = st.tx_bytes, st.tx_packets, st.tx_dropped
        for st in queues:
            j = self._index(switch, st.port_no)
            if j is not None:
                dropped[j] += st.tx_errors
        self.est.update(switch, t, sent, packets, dropped)

    # -- decisions out -------------------------------------------------------------------------
    def decide(self, t: float) -> tuple[dict[int, list], list[int]]:
        """One round at time ``t``: the decision entries to modify per switch (in their new
        form) and the switches whose estimates just expired (their sources now take MIN)."""
        q = self.est.occupancy(t)
        stale = {int(u) for u in np.flatnonzero(np.isnan(q).all(axis=1))
                 if np.isfinite(self.est.last[u])}
        newly = sorted(stale - self.stale)
        self.stale = stale
        before = self.ugal.share.copy()
        way_before = self.ugal.last.copy()
        changed = self.ugal.decide(q)
        if len(changed):
            u, k = changed[:, 0], changed[:, 1]
            way = np.sign(self.ugal.share[u, k] - before[u, k])
            self.reversals = int(np.count_nonzero(way == -way_before[u, k]))
        else:
            self.reversals = 0
        self.reversals_total += self.reversals
        plan = self.fabric.plan_
        bits = self.p.split_bits
        out: dict[int, list] = {}
        for u, k in changed.tolist():
            old, new = blocks_of(int(before[u, k]), bits), blocks_of(int(self.ugal.share[u, k]),
                                                                    bits)
            for b in (b for b in range(bits + 1) if old[b] != new[b]):
                for proto in (IPPROTO_UDP, IPPROTO_TCP):
                    out.setdefault(u, []).append(decision_flow(plan, k, b, proto, new[b]))
        self.rounds += 1
        self.flow_mods += sum(map(len, out.values()))
        self.last = self.record(t, len(changed))
        return out, newly

    def inherit(self, old: "Decisions") -> None:
        """Take the shares of ``old`` (the decisions of the fabric a live update replaced):
        decision entries belong to no program version, so the switches keep them through
        the update; a share is kept where this fabric allows a non-minimal choice and the
        keys are the same.  So are the port capacities ``port_speeds`` learned when the
        switches connected (they do not connect again for an update), on every port that
        still has a cable: without them the estimator would measure nothing any more."""
        if old is None:
            return
        if old.ugal.share.shape == self.ugal.share.shape:
            self.ugal.share[:] = np.where(self.ugal.valid, old.ugal.share, 0)
        n = min(len(self.capacity), len(old.capacity))
        r = min(self.capacity.shape[1], old.capacity.shape[1])
        mine, theirs = self.capacity[:n, :r], old.capacity[:n, :r]
        mine[:] = np.where((mine <= 0) & (self.topo.adj[:n, :r] >= 0), theirs, mine)

    def adopt(self, switch: int, flow_stats) -> int:
        """Take as ``switch``'s shares the decisions it holds (the ``OFPFlowStats`` of a
        read): a standby follows the master's decisions so, and a new master starts from
        them instead of rewriting them.  A key is taken only when its entries are all there,
        agree for UDP and TCP, form a share (:func:`~tablegen.routing.adaptive.share_of`) and
        the key allows that share; any other stays as it was, and a master's repair puts the
        switch right.  Returns how many shares changed.  O(F + K bits) for F flows read and
        K destination keys (the entries' canonical forms are built once per switch)."""
        entries = self._entries.get(switch)
        if entries is None:
            entries = self._entries[switch] = self._decision_entries(switch)
        held: dict[tuple, bool] = {}
        for st in flow_stats:
            if st.table_id == T_DECIDE:
                key, val = msg.canon_stats_flow(st)
                e = entries.get(key)
                if e is not None and val in e[1]:
                    held[e[0]] = e[1][val]
        bits = self.p.split_bits
        changed = 0
        for k in decision_keys(self.fabric.plan_, switch):
            udp = [held.get((k, b, IPPROTO_UDP)) for b in range(bits + 1)]
            if None in udp or udp != [held.get((k, b, IPPROTO_TCP)) for b in range(bits + 1)]:
                continue
            m = share_of(udp, bits)
            if m is None or (m and not self.ugal.valid[switch, k]):
                continue
            if self.ugal.share[switch, k] != m:
                self.ugal.share[switch, k] = m
                changed += 1
        self.adopted += changed
        return changed

    def _decision_entries(self, switch: int) -> dict:
        """``{canonical match key: ((key, block, proto), {canonical actions: non-minimal})}``
        of ``switch``'s decision entries, both choices of each."""
        plan, cookie = self.fabric.plan_, self.fabric.cookie
        out = {}
        for k in decision_keys(plan, switch):
            for b in range(self.p.split_bits + 1):
                for proto in (IPPROTO_UDP, IPPROTO_TCP):
                    key, v_min = msg.canon_flow(decision_flow(plan, k, b, proto, False), cookie)
                    _, v_non = msg.canon_flow(decision_flow(plan, k, b, proto, True), cookie)
                    out[key] = ((k, b, proto), {v_min: False, v_non: True})
        return out

    def shares(self, switch: int) -> np.ndarray:
        """The current shares of ``switch`` per destination key (its program's decisions)."""
        return self.ugal.share[switch]

    def record(self, t: float, changed: int) -> dict:
        """One round for the decision log: time since the first statistics (and
        ``CLOCK_MONOTONIC``, which other processes on the machine share), how many
        (source, destination) shares moved, the mean non-minimal share, per destination
        key its mean share over the sources, and (up to :data:`MATRIX_MAX` of them) every
        share in slots of ``2**split_bits``."""
        f = self.ugal.fraction()
        valid = self.ugal.valid
        return {"round": self.rounds, "t": round(t - (self._t0 or t), 3),
                "monotonic": round(t, 3), "changed": changed, "reversals": self.reversals,
                "share": round(float(f[valid].mean()), 4),
                "by_destination": [round(float(x), 4) for x in self.ugal.by_destination()],
                "stale": sorted(self.stale),
                **({"slots": self.ugal.share.tolist()} if self.ugal.share.size <= MATRIX_MAX
                   else {})}

    def status(self) -> dict:
        return {"keys": self.ugal.keys, "poll": self.poll, "split_bits": self.p.split_bits,
                "rounds": self.rounds, "decision_flow_mods": self.flow_mods,
                "share": self.last["share"] if self.last else 0.0, "stale": sorted(self.stale),
                "keys_per_switch": self.keys_per_switch, "adopted": self.adopted,
                "rounds_verified": self.readbacks_equal,
                "rounds_differing": self.readbacks_differing}
