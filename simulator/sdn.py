"""``ugal-sdn``: the adaptive OpenFlow controller's loop, run against the flit-level simulator.

The decisions come from the very objects the controller uses (``tablegen/routing/adaptive.py``,
``docs/openflow.md``): ONE :class:`~tablegen.routing.adaptive.PortEstimator` turns the
cumulative port counters read every ``poll_cycles`` into occupancy estimates (offered load,
EWMA, M/M/1/B occupancy), and ONE :class:`~tablegen.routing.adaptive.AdaptiveUgal` decides
from them, with Kim et al.'s UGAL-L rule (ISCA 2008 §4.2, ``ugal_kim``) and its dead band,
the non-minimal share of every (source switch, destination key) in steps of
``1 / 2**split_bits``.  A decision takes effect ``decision_delay_cycles`` after its poll (the
time to collect the counters, decide and install the flows); until then the previous shares
route.  The engine (:data:`simulator.engine.MODE_SDN`) draws each packet's class at its
source router: non-minimal with probability ``share[u, key_of[dst]] / 2**split_bits``, the
intermediate as for every Valiant packet (``sample_inter``).  A switch splits *flows* by
source-port slices; a packet is a flow here, so the draw is per packet.

What the controller reads, per network port (time unit: cycles, capacity: one flit per cycle,
``packet_bytes``: the packet size in flits):

* ``tx``: flits sent (``link_flits``);
* ``dropped``: none — the fabric is lossless.  A congested port therefore never shows more
  than its capacity, and a port *blocked* by credits (the local hop toward a saturated global
  channel on a Dragonfly) shows little traffic, although its packets wait.  With
  ``sdn_counters = "tx-wait"`` (default) the controller also reads the cycles the port sent
  nothing while a ready packet waited for credits (``link_wait``, InfiniBand's
  PortXmitWait), passed as the dropped packets' flits: the estimate then counts the demand
  backpressure refused, as the OpenFlow estimate counts the demand drops refused.
  ``"tx"`` passes zeros (what an OpenFlow switch of a lossless fabric would report).

``buffer`` (M/M/1/B's ``B``, ``sdn_buffer``): by default every packet a port can hold waiting
for or on its channel — the downstream input VCs and the output queue, ``(V * buffer_depth +
output_buffer) / packet_size``: the same quantity per-packet UGAL-L reads (``_occ_port``).

The result's ``sdn`` entry reports, per poll, the mean decided non-minimal share over the
valid (source, key) pairs, so the controller's reaction is visible.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from simulator import engine as E
from tablegen.routing.adaptive import AdaptiveParams, AdaptiveUgal, PortEstimator


def port_buffer(ts, cfg) -> float:
    """Packets a network port holds: ``sdn_buffer``, else the downstream input VCs plus the
    output queue, in packets (at least 1)."""
    if cfg.sdn_buffer is not None:
        return float(cfg.sdn_buffer)
    return max(1.0, (ts.num_vcs * cfg.buffer_depth + cfg.out_buffer) / cfg.packet_size)


def params(ts, cfg) -> AdaptiveParams:
    """The controller's knobs from the :class:`~simulator.config.SimConfig` keys."""
    return AdaptiveParams(split_bits=cfg.split_bits, alpha=cfg.sdn_alpha,
                          buffer=port_buffer(ts, cfg), hysteresis=cfg.sdn_hysteresis,
                          floor=cfg.sdn_floor, gain=cfg.sdn_gain)


class SdnLoop:
    """Polls, decisions and their delayed installation around the engine's cycle loop.

    :meth:`run` has the signature of ``_State.run`` and runs the engine in chunks that end at
    every poll and at every pending decision's installation time.  A poll at ``t`` reads the
    counters of cycles ``< t``; the first poll is at cycle 0 (no rate yet: all minimal, the
    controller's start).  Cost per poll: O(N R) estimator updates (a Python loop over the
    switches) and one decision, O(N K)."""

    def __init__(self, ts, cfg, st):
        topo = ts.topo
        self.cfg, self.st = cfg, st
        p = params(ts, cfg)
        self.ugal = AdaptiveUgal(ts, p)
        self.est = PortEstimator((topo.adj >= 0).astype(np.float64), p,
                                 poll=cfg.poll_cycles, packet_bytes=cfg.packet_size)
        st.sdn_share = np.zeros(self.ugal.share.shape, np.int64)
        st.sdn_key = np.asarray(self.ugal.key_of, np.int64)
        st.prm[E.P_SDN_SLOTS] = self.ugal.slots
        self.delay = cfg.decision_delay
        self.pending: deque = deque()          # (cycle it takes effect, share array)
        self.next_poll = 0
        self.poll_t: list[int] = []
        self.poll_share: list[float] = []

    def run(self, t, t_end, drain, prate, lo, hi):
        st = self.st
        while True:
            if t >= self.next_poll:
                self._poll(t)
                self.next_poll = t + self.cfg.poll_cycles
            while self.pending and self.pending[0][0] <= t:
                st.sdn_share[:] = self.pending.popleft()[1]
            if t >= t_end:
                return E.ST_OK, t
            stop = min(t_end, self.next_poll, self.pending[0][0] if self.pending else t_end)
            status, t2 = st.run(t, stop, drain, prate, lo, hi)
            if status != E.ST_OK or t2 < stop:     # stopped, or drained
                return status, t2
            t = t2

    def _poll(self, t: int) -> None:
        st, size = self.st, self.cfg.packet_size
        n, r = self.est.capacity.shape
        tx = st.link_flits.reshape(n, r).astype(np.float64)
        wait = (st.link_wait.reshape(n, r) if self.cfg.sdn_counters == "tx-wait"
                else np.zeros((n, r)))
        for u in range(n):
            self.est.update(u, t, tx[u], tx[u] / size, wait[u] / size)
        self.ugal.decide(self.est.occupancy(t))
        self.pending.append((t + self.delay, self.ugal.share.copy()))
        self.poll_t.append(int(t))
        self.poll_share.append(round(float(self.ugal.fraction()[self.ugal.valid].mean()), 5))

    def result(self) -> dict:
        """JSON-able: the loop's parameters and, per poll, the mean decided share."""
        c = self.cfg
        return {"poll_cycles": c.poll_cycles, "decision_delay_cycles": self.delay,
                "split_bits": c.split_bits, "counters": c.sdn_counters,
                "buffer_packets": self.est.p.buffer, "keys": self.ugal.keys,
                "polls": len(self.poll_t), "poll_t": self.poll_t,
                "share_mean": self.poll_share}
