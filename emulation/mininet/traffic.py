"""Paced UDP traffic between emulated hosts, with receivers that count goodput and loss per pair.

:func:`run_traffic` drives every emulated host from this process, like
:mod:`emulation.mininet.probes`: per host an ``AF_PACKET`` socket on its interface (send) and a
UDP socket bound to :data:`TRAFFIC_PORT` (receive), both opened after ``setns`` into the
host's namespace — no process per host (one process keeps up: docs/emulation.md).  Frames
are built here (Ethernet / IPv4 / UDP / payload; the IPv4 header checksum computed once per
pair, UDP checksum 0 = "none", legal for IPv4), so no checksum offload is involved.

**Rate.**  Every active host sends ``load × link_mbit`` Mbit/s counted in **frame bytes**:
the untagged Ethernet frame without FCS, ``payload + 42`` bytes (14 Ethernet + 20 IPv4 + 8
UDP) — what htb counts on a host-facing port (a network port carries the pipeline's VLAN
tag too: 4 bytes more per frame, 0.3 % at 1,400-byte payloads).  Sends are paced: the
active hosts take turns in a fixed order, one frame every ``1 / (n · rate)`` seconds, so
each host sends one frame every ``1 / rate`` seconds (a late wake-up catches up at once;
``max_lag_ms`` says by how much the loop fell behind).

**Destinations and source ports.**  Each phase names a pattern of :mod:`simulator.traffic`
(``uniform``, ``worst-case``, ``adversarial``, …) or gives ``{src: dst}``; a frame of host
``s`` goes to a host drawn uniformly from the pattern's range for ``s`` restricted to the
emulated hosts other than ``s`` (a host whose range holds none is idle in that phase).
Every frame's UDP source port is drawn uniformly from ``sport_range`` (default 1..65535: all
16 bits uniform), so splits on masked source-port bits (the Valiant source choice, an
adaptive split) see every slot.

**Payload**: magic, source host, destination host, phase index, sequence number (per
source), send time (``time.monotonic``), zero padding to ``payload`` bytes.  The receivers
count per phase and (source, destination): **received** (arrived at its destination by the
phase's end + ``drain`` seconds), **late** (arrived at its destination after that; after
the last phase the receivers listen until the fabric has been quiet for 0.3 s, so a frame
still queued at the end is late, not lost), **lost** = sent − received − late, and
**misrouted** (arrived at a host that is not its destination) and duplicates.
**Goodput** (``delivered_mbps``) counts the frames of a phase that arrived at their
destination by the phase's end, over the phase's seconds — what the destinations took in
during the phase; the time series ``bins`` count arrivals by arrival time.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from dataclasses import dataclass

import numpy as np

from emulation.mininet import shaping
from emulation.mininet.net import FabricNet
from emulation.mininet.probes import HostSockets, inet_checksum, received
from simulator.traffic import pattern
from tablegen.errors import BadInput

__all__ = ["TRAFFIC_PORT", "MAGIC", "FRAME_OVERHEAD", "HEADER", "Phase", "frame_bytes",
           "packets_per_second", "decode", "destinations", "Traffic", "run_traffic"]

TRAFFIC_PORT = 40001
MAGIC = b"FBTR"
#: Ethernet (14) + IPv4 (20) + UDP (8) bytes around the payload; no FCS, no VLAN tag
FRAME_OVERHEAD = 42
#: magic, source host, destination host, phase, sequence number, send time
HEADER = struct.Struct("!4sIIHQd")
_UDP_HEADER = struct.Struct("!HHHH")
_POLL_EVERY = 256          # frames sent at most before the receivers are drained again


@dataclass(frozen=True)
class Phase:
    """``seconds`` of ``traffic`` (a pattern name or ``{src: dst}``) at ``load`` (fraction of
    the link capacity; ``None``: the run's load)."""

    traffic: object
    seconds: float
    load: float | None = None

    @property
    def name(self) -> str:
        return self.traffic if isinstance(self.traffic, str) else "explicit"


def frame_bytes(payload: int) -> int:
    """Bytes of one untagged frame (no FCS) carrying ``payload`` UDP payload bytes."""
    return payload + FRAME_OVERHEAD


def packets_per_second(load: float, link_mbit: float, payload: int) -> float:
    """Frames per second of one host sending ``load × link_mbit`` Mbit/s of frames."""
    return load * link_mbit * 1e6 / (8 * frame_bytes(payload))


def decode(data) -> tuple[int, int, int, int, float] | None:
    """``(src, dst, phase, seq, send time)`` of a payload, or ``None`` if it is not ours."""
    if len(data) < HEADER.size or data[:4] != MAGIC:
        return None
    return HEADER.unpack_from(data)[1:]


def destinations(topo, hosts: list[int], traffic, seed: int) -> dict[int, np.ndarray]:
    """Per emulated host, the emulated hosts its frames may go to (sorted): the pattern's
    range for the host (``simulator.traffic.pattern``, or ``{src: dst}``) restricted to
    ``hosts`` minus the host itself.  Hosts with no destination are left out."""
    emu = np.array(sorted(hosts), np.int64)
    if isinstance(traffic, str):
        lo, hi = pattern(topo, traffic, seed)
    else:
        lo = np.full(topo.n_hosts, -1, np.int64)
        for s, d in traffic.items():
            lo[s] = d
        hi = lo + 1
    out = {}
    for s in emu.tolist():
        c = emu[(emu >= lo[s]) & (emu < hi[s]) & (emu != s)]
        if len(c):
            out[s] = c
    return out


class Traffic(HostSockets):
    """Sockets in every emulated host of ``fnet`` (:class:`~emulation.mininet.probes.
    HostSockets`, senders non-blocking) and the frames' fixed parts; use :meth:`run` (or
    :func:`run_traffic`), then :meth:`close` (or ``with``)."""

    def __init__(self, fnet: FabricNet, *, payload: int = 1400, port: int = TRAFFIC_PORT,
                 rcvbuf: int = 1 << 21):
        if not HEADER.size <= payload <= 1472:
            raise BadInput(f"payload={payload}; expected {HEADER.size} .. 1472 bytes "
                           "(a 1,500-byte IP packet)")
        self.payload = payload
        self._udp, self._ulen = _UDP_HEADER.pack, 8 + payload
        self._pad = bytes(payload - HEADER.size)
        self.hosts = fnet.host_ids
        self._heads: dict[tuple[int, int], bytes] = {}
        super().__init__(fnet, port, rcvbuf, nonblocking_tx=True)

    def head(self, src: int, dst: int) -> bytes:
        """Ethernet + IPv4 header of a frame ``src → dst`` (IP id 0, DF, TTL 64)."""
        key = (src, dst)
        h = self._heads.get(key)
        if h is None:
            f = self.fnet
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + self.payload, 0, 0x4000, 64,
                             socket.IPPROTO_UDP, 0, socket.inet_aton(f.ip[src]),
                             socket.inet_aton(f.ip[dst]))
            ip = ip[:10] + struct.pack("!H", inet_checksum(ip)) + ip[12:]
            h = self._heads[key] = (bytes.fromhex(f.mac[dst].replace(":", ""))
                                    + bytes.fromhex(f.mac[src].replace(":", ""))
                                    + b"\x08\x00" + ip)
        return h

    def frame(self, src: int, dst: int, sport: int, phase: int, seq: int, t: float) -> bytes:
        """One whole frame: :meth:`head`, UDP header (checksum 0), payload (:data:`HEADER`,
        then zeros)."""
        return (self.head(src, dst) + self._udp(sport, self.port, self._ulen, 0)
                + HEADER.pack(MAGIC, src, dst, phase, seq, t) + self._pad)

    # -- the run ------------------------------------------------------------------------------
    def run(self, phases, *, load: float, link_mbit: float, seed: int = 1,
            bin_seconds: float = 0.5, drain: float = 0.5, on_bin=None,
            sport_range: tuple[int, int] = (1, 65536)) -> dict:
        """Run ``phases`` back to back; see :func:`run_traffic`."""
        phases = [p if isinstance(p, Phase) else Phase(*p) for p in phases]
        loads = [load if p.load is None else p.load for p in phases]
        _check(phases, loads, link_mbit, bin_seconds, drain, sport_range)
        rng = np.random.default_rng(seed)
        hosts = np.asarray(self.hosts, np.int64)
        rc = _Counts(self, len(phases), bin_seconds, drain, on_bin)
        self._discard()                                   # leftovers of earlier traffic
        shaped = set(self.fnet.switch_port_names()) if self.fnet.link_mbit else set()
        drops0 = shaping.queue_drops(shaped) if shaped else {}
        seq = dict.fromkeys(self.hosts, 0)
        frame = self.frame
        t_phase = rc.start(time.monotonic())
        for k, ph in enumerate(phases):
            dests = destinations(self.fnet.topo, self.hosts, ph.traffic, seed)
            order = [h for h in self.hosts if h in dests]
            t_end = t_phase + ph.seconds
            rc.begin_phase(k, t_end, len(order))
            if order:
                dt = 1.0 / (len(order) * packets_per_second(loads[k], link_mbit, self.payload))
                total = int(ph.seconds / dt)
                flat = np.concatenate([dests[h] for h in order])
                cnt = np.array([len(dests[h]) for h in order], np.int64)
                off = np.cumsum(cnt) - cnt
                src_ix = np.searchsorted(hosts, order)
                i = 0
                while i < total:
                    # a chunk of frames: sources round-robin, destinations and ports drawn at once
                    m = min(4096, total - i)
                    pos = (i + np.arange(m)) % len(order)
                    d = flat[off[pos] + (rng.random(m) * cnt[pos]).astype(np.int64)]
                    np.add.at(rc.sent[k], (src_ix[pos], np.searchsorted(hosts, d)), 1)
                    for j, dd, sp in zip(pos.tolist(), d.tolist(),
                                         rng.integers(*sport_range, m).tolist()):
                        s = order[j]
                        due = t_phase + i * dt
                        now = time.monotonic()
                        if due > now:
                            rc.poll_until(due)
                            now = time.monotonic()
                        elif now - due > rc.max_lag:
                            rc.max_lag = now - due
                        seq[s] += 1
                        try:
                            self.tx[s].send(frame(s, dd, sp, k, seq[s], now))
                        except BlockingIOError:
                            rc.send_errors += 1
                        rc.bin_sent += 1
                        i += 1
                        if i % _POLL_EVERY == 0:
                            rc.poll_until(0.0)
            rc.poll_until(t_end)
            t_phase = t_end
        rc.poll_until(t_phase + drain)
        rc.settle()
        rep = rc.report(phases, loads, link_mbit)
        if shaped:
            drops = {d: n - drops0.get(d, 0) for d, n in shaping.queue_drops(shaped).items()}
            rep["queue_drops"] = sum(drops.values())
            rep["other_drops"] = rep["lost"] - rep["queue_drops"]
            rep["drops_by_port"] = dict(sorted(((d, n) for d, n in drops.items() if n),
                                               key=lambda x: -x[1])[:10])
        return rep

    def _discard(self, seconds: float = 0.05) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for fd, _ in self.poll.poll(0.01):
                s = self.rx[self._by_fd[fd]]
                with contextlib.suppress(BlockingIOError):
                    while True:
                        s.recv(2048)


def _check(phases, loads, link_mbit, bin_seconds, drain, sport_range) -> None:
    if not phases or any(not 0 < p.seconds <= 3600 for p in phases):
        raise BadInput("phases: expected at least one (traffic, seconds), 0 < seconds <= 3600")
    if any(not 0 < x <= 10 for x in loads):
        raise BadInput(f"load {loads}: expected 0 < load <= 10 (fractions of link capacity)")
    if not link_mbit > 0:
        raise BadInput(f"link_mbit={link_mbit}; expected > 0")
    if not (0 < bin_seconds and 0 <= drain):
        raise BadInput(f"bin_seconds={bin_seconds}, drain={drain}: expected > 0, >= 0")
    if not 1 <= sport_range[0] < sport_range[1] <= 65536:
        raise BadInput(f"sport_range={sport_range}; expected 1 <= lo < hi <= 65536")


class _Counts:
    """What the receive sockets hold, counted per phase, (source, destination) and time bin."""

    def __init__(self, tr: Traffic, P: int, bin_seconds: float, drain: float, on_bin):
        n = len(tr.hosts)
        self.tr, self.P, self.bin, self.drain, self.on_bin = tr, P, bin_seconds, drain, on_bin
        self.hosts = np.asarray(tr.hosts, np.int64)
        self.fb = frame_bytes(tr.payload)
        self.sent = np.zeros((P, n, n), np.int64)
        self.received = np.zeros((P, n, n), np.int64)
        self.late = np.zeros((P, n, n), np.int64)
        self.misrouted = np.zeros(P, np.int64)
        self.in_window = np.zeros(P, np.int64)   # arrived at its destination by its phase's end
        self.misrouted_examples: list[dict] = []
        self._keys: list[np.ndarray] = []        # (source index, sequence number) of arrivals
        self.latency: list[list[np.ndarray]] = [[] for _ in range(P)]
        self.ends = np.full(P, np.inf)
        self.active = [0] * P
        self.bins: list[tuple[float, int, int]] = []    # (end, frames sent, frames delivered)
        self.send_errors = 0
        self.max_lag = 0.0
        self.bin_sent = 0
        self._bin_got = 0
        self._pending: list[tuple] = []
        self._t0 = self._next_bin = self.last_arrival = 0.0

    def start(self, t0: float) -> float:
        self._t0, self._next_bin = t0, t0 + self.bin
        return t0

    def begin_phase(self, k: int, t_end: float, active: int) -> None:
        self.ends[k], self.active[k] = t_end, active

    def poll_until(self, deadline: float) -> None:
        """Receive until ``deadline`` (``time.monotonic()``; at once for a past one), closing
        the time bins that end meanwhile."""
        tr = self.tr
        while True:
            now = time.monotonic()
            if now >= self._next_bin:
                self._close_bin()
            ev = tr.poll.poll(max(0.0, min(deadline, self._next_bin) - now))
            now = time.monotonic()
            for fd, _ in ev:
                h = tr._by_fd[fd]
                for data, _ in received(tr.rx[h]):
                    x = decode(data)
                    if x is not None:
                        self._pending.append((h, now, *x))
                        self.last_arrival = now
            if now >= deadline:
                return

    def settle(self, quiet: float = 0.3, limit: float = 10.0) -> None:
        """Receive until nothing has arrived for ``quiet`` seconds (at most ``limit``): what
        is still queued in the fabric arrives (late) rather than being counted as lost."""
        deadline = time.monotonic() + limit
        while True:
            now = time.monotonic()
            if now - self.last_arrival >= quiet or now >= deadline:
                return
            self.poll_until(min(self.last_arrival + quiet, deadline))

    def _close_bin(self) -> None:
        self._count()
        end = self._next_bin - self._t0
        self.bins.append((end, self.bin_sent, self._bin_got))
        if self.on_bin is not None:
            self.on_bin(self._bin_dict(end, self.bin_sent, self._bin_got))
        self.bin_sent = self._bin_got = 0
        self._next_bin += self.bin

    def _bin_dict(self, end: float, sent: int, got: int) -> dict:
        f = self.fb * 8 / self.bin / 1e6
        return {"t": round(end, 3), "offered_mbps": round(sent * f, 4),
                "delivered_mbps": round(got * f, 4)}

    def _count(self) -> None:
        p, self._pending = self._pending, []
        if not p:
            return
        a = np.array(p, np.float64)      # host, arrival, src, dst, phase, seq, send time
        h, t, src, dst, k, ts = (a[:, 0].astype(np.int64), a[:, 1], a[:, 2].astype(np.int64),
                                 a[:, 3].astype(np.int64), a[:, 4].astype(np.int64), a[:, 6])
        known = (k < self.P) & np.isin(src, self.hosts) & np.isin(dst, self.hosts)
        h, t, src, dst, k, ts = h[known], t[known], src[known], dst[known], k[known], ts[known]
        wrong = h != dst
        np.add.at(self.misrouted, k[wrong], 1)
        for x, y, z, q in zip(src[wrong].tolist(), dst[wrong].tolist(), h[wrong].tolist(),
                              k[wrong].tolist()):
            if len(self.misrouted_examples) < 20:
                self.misrouted_examples.append({"src": x, "dst": y, "at": z, "phase": q})
        seq = a[:, 5].astype(np.int64)[known]
        self._keys.append(np.searchsorted(self.hosts, src) << 40 | seq)
        t, src, dst, k, ts = t[~wrong], src[~wrong], dst[~wrong], k[~wrong], ts[~wrong]
        si, di = np.searchsorted(self.hosts, src), np.searchsorted(self.hosts, dst)
        ok = t <= self.ends[k] + self.drain
        np.add.at(self.received, (k[ok], si[ok], di[ok]), 1)
        np.add.at(self.in_window, k[t <= self.ends[k]], 1)
        np.add.at(self.late, (k[~ok], si[~ok], di[~ok]), 1)
        self._bin_got += int(ok.sum())
        for q in np.unique(k[ok]).tolist():
            self.latency[q].append((t - ts)[ok & (k == q)])

    def report(self, phases, loads, link_mbit: float) -> dict:
        self._count()
        if self._bin_got or self.bin_sent:
            self.bins.append((time.monotonic() - self._t0, self.bin_sent, self._bin_got))
        mb = self.fb * 8 / 1e6
        out = []
        for k, ph in enumerate(phases):
            out.append({"traffic": ph.name, "seconds": ph.seconds, "load": loads[k],
                        "active_hosts": self.active[k],
                        **self._totals(self.sent[k], self.received[k], self.late[k],
                                       int(self.in_window[k]), int(self.misrouted[k]),
                                       ph.seconds, self.active[k], link_mbit,
                                       self.latency[k])})
        secs = float(sum(p.seconds for p in phases))
        rep = {"link_mbit": link_mbit, "payload": self.tr.payload, "frame_bytes": self.fb,
               "hosts": len(self.hosts), "seconds": secs,
               **self._totals(self.sent.sum(0), self.received.sum(0), self.late.sum(0),
                              int(self.in_window.sum()), int(self.misrouted.sum()), secs,
                              max(self.active), link_mbit,
                              [x for lat in self.latency for x in lat]),
               "duplicates": self._duplicates(),
               "send_errors": self.send_errors, "max_lag_ms": round(self.max_lag * 1e3, 2),
               "phases": out,
               "bins": {"seconds": self.bin,
                        "t": [round(e, 3) for e, _, _ in self.bins],
                        "offered_mbps": [round(s * mb / self.bin, 4) for _, s, _ in self.bins],
                        "delivered_mbps": [round(g * mb / self.bin, 4) for _, _, g in self.bins]},
               "worst_pairs": self._worst(self.sent.sum(0), self.received.sum(0)),
               "misrouted_examples": self.misrouted_examples}
        return rep

    def _duplicates(self) -> int:
        """Frames that arrived more than once (anywhere)."""
        keys = np.concatenate(self._keys) if self._keys else np.zeros(0, np.int64)
        return int(len(keys) - len(np.unique(keys)))

    def _totals(self, sent, received, late, in_window, misrouted, seconds, active, link_mbit,
                latency) -> dict:
        mb = self.fb * 8 / 1e6
        ns, nr, nl = int(sent.sum()), int(received.sum()), int(late.sum())
        lat = np.concatenate(latency) * 1e3 if latency else np.zeros(0)
        return {"offered_mbps": round(ns * mb / seconds, 4),
                "delivered_mbps": round(in_window * mb / seconds, 4),
                "offered_load": round(ns * mb / seconds / max(active, 1) / link_mbit, 4),
                "accepted_load": round(in_window * mb / seconds / max(active, 1) / link_mbit,
                                       4),
                "sent": ns, "received": nr, "late": nl, "lost": ns - nr - nl,
                "misrouted": misrouted,
                "pairs": int((sent > 0).sum()), "pairs_with_loss": int((received < sent).sum()),
                "latency_ms": ({"p50": round(float(np.percentile(lat, 50)), 3),
                                "p99": round(float(np.percentile(lat, 99)), 3),
                                "max": round(float(lat.max()), 3)} if len(lat) else None)}

    def _worst(self, sent, received, top: int = 10) -> list[dict]:
        """The ``top`` pairs with the highest loss fraction (ties: more frames sent first);
        pairs that lost nothing are not listed."""
        si, di = np.nonzero(received < sent)
        loss = 1 - received[si, di] / sent[si, di]
        pick = np.lexsort((-sent[si, di], -loss))[:top]
        return [{"src": int(self.hosts[si[j]]), "dst": int(self.hosts[di[j]]),
                 "sent": int(sent[si[j], di[j]]), "received": int(received[si[j], di[j]]),
                 "loss": round(float(loss[j]), 4)} for j in pick.tolist()]


def run_traffic(fnet: FabricNet, phases, *, load: float, link_mbit: float | None = None,
                payload: int = 1400, seed: int = 1, bin_seconds: float = 0.5,
                drain: float = 0.5, on_bin=None,
                sport_range: tuple[int, int] = (1, 65536)) -> dict:
    """Send paced UDP traffic from every emulated host and count what arrives (module doc).

    ``phases``: ``[(traffic, seconds)]`` or ``[(traffic, seconds, load)]`` (or
    :class:`Phase`), run back to back — ``traffic`` a :mod:`simulator.traffic` pattern name
    or ``{src: dst}``.  ``load``: each host's rate as a fraction of ``link_mbit`` (default:
    the net's shaped capacity ``fnet.link_mbit``).  ``on_bin(dict)`` is called at the end of
    every ``bin_seconds`` bin with ``t``, ``offered_mbps``, ``delivered_mbps`` — in the
    sending loop: it should return within a few milliseconds.

    Returns a JSON-ready report (module doc): ``offered_mbps``, ``delivered_mbps`` (goodput),
    ``offered_load`` / ``accepted_load`` (the same per active host, as fractions of
    ``link_mbit``), ``sent``, ``received``, ``late``, ``lost``, ``misrouted``,
    ``duplicates``, ``pairs`` / ``pairs_with_loss``, ``latency_ms`` (p50, p99, max of the
    received frames), the same per phase under ``phases``, the time series ``bins``, the
    ``worst_pairs`` by loss fraction, ``send_errors`` and ``max_lag_ms``; on a shaped net
    also ``queue_drops`` (frames the shaped queues dropped meanwhile, from tc — what
    OpenFlow reports as the queues' ``tx_errors``), ``other_drops`` = ``lost −
    queue_drops`` (lost anywhere else: the datapath; 0 while the links are the
    bottleneck) and ``drops_by_port`` (the 10 ports that dropped most)."""
    link_mbit = fnet.link_mbit if link_mbit is None else link_mbit
    if link_mbit is None:
        raise BadInput("link_mbit: the net has no link capacity (build_net(link_mbit=...)); "
                       "give the rate's reference explicitly")
    with Traffic(fnet, payload=payload) as tr:
        return tr.run(phases, load=load, link_mbit=link_mbit, seed=seed,
                      bin_seconds=bin_seconds, drain=drain, on_bin=on_bin,
                      sport_range=sport_range)
