"""A continuous probe stream between emulated hosts that runs in the background across a change
of the net (growth, a link failure, a table update), and a reachability timer for new hosts.

:class:`ProbeStream` sends sequence-numbered UDP probes over a fixed set of (source,
destination) host pairs, each pair at ``rate`` probes/s, from one background thread of this
process (no process per host, as :mod:`emulation.mininet.probes` and
:mod:`emulation.mininet.traffic`).  Per host, opened after ``setns`` into its namespace:

* ``tx`` — an ``AF_PACKET`` socket on the host interface (senders only); frames are built
  here: Ethernet / IPv4 (DF, TTL 64) / UDP to :data:`STREAM_PORT` (checksum 0 = none, legal
  for IPv4) / payload :data:`HEADER` = magic, source host, destination host, sequence number,
  send time (``time.monotonic``).  The UDP source port is fixed per pair
  (``default_udp_src`` unless given), so each pair keeps one path (one Valiant slot).
* ``rx`` — an ``AF_PACKET`` / ``ETH_P_ALL`` socket on the host interface that ignores
  outgoing frames (``PACKET_IGNORE_OUTGOING``): it sees **every frame that reaches the host**,
  including a probe for another host (``PACKET_OTHERHOST``, which the host's IP layer would
  drop unseen — a UDP socket alone could never observe misrouting).
* ``sink`` — a UDP socket bound to :data:`STREAM_PORT` whose socket filter drops everything:
  without a bound socket the destination's kernel would answer every probe with an ICMP port
  unreachable, traffic of its own in the fabric.

Every emulated host at construction time receives (so a probe delivered to the wrong one of
them is seen); hosts added later (``emulation.mininet.grow``) are not part of the stream.
Pacing: the pairs take turns, one probe every ``1 / (pairs · rate)`` s (a late wake-up
catches up at once; ``max_gap_ms`` reports the longest pause between two sends, i.e. how
continuous the stream really was).  Probe ``i`` is pair ``i mod P``, sequence number
``i div P``.  Receivers are drained between sends.

**Classification** (:meth:`ProbeStream.report`): ``probes_sent``; ``delivered`` — distinct
probes that reached their destination host; ``lost = probes_sent − delivered`` (a probe seen
only at a wrong host is lost *and* misrouted); ``misrouted`` — arrivals at a host other
than the probe's destination; ``duplicated`` — arrivals at the destination beyond the
first.  The **loss timeline**: per pair, each run of consecutive lost sequence numbers is a
span (from the first to the last lost probe's send time); overlapping spans of different
pairs are merged.  Times are in ms relative to a reference the caller gives (e.g. the
moment :func:`~emulation.mininet.grow.set_link` took a link down), so the loss window around
an event reads directly.  Classification is ``O(sent + arrivals)`` (numpy).

:func:`reachable_after` times how long new hosts take to answer: ICMP echo requests from a
raw ``IPPROTO_ICMP`` socket in an existing host's namespace (the kernel's IP stack and its
static neighbour table, so it also proves the neighbour entries that
:func:`~emulation.mininet.grow.add_switches` wrote), repeated every ``interval`` until every
target's kernel has sent an echo reply back.  An echo reply needs both directions through
the fabric (to the new host and back), with nothing running in the new host.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import socket
import struct
import threading
import time

import numpy as np

from emulation.mininet.net import FabricNet, netns
from emulation.mininet.probes import default_udp_src, inet_checksum, received
from emulation.mininet.topo import host_of_ip
from tablegen.errors import BadInput, RunFailed

__all__ = ["STREAM_PORT", "MAGIC", "HEADER", "ProbeStream", "default_pairs", "reachable_after"]

STREAM_PORT = 40002
MAGIC = b"FBST"
#: magic, source host, destination host, sequence number, send time (time.monotonic)
HEADER = struct.Struct("!4sIIQd")
_ETH_P_ALL = 0x0003
_SOL_PACKET = 263
_PACKET_IGNORE_OUTGOING = 23
_PACKET_STATISTICS = 6            # struct tpacket_stats {tp_packets, tp_drops}; read resets
_SO_ATTACH_FILTER = 26
_OFFSET = 42                       # Ethernet 14 + IPv4 20 (no options) + UDP 8
_DRAIN_EVERY = 64                  # probes sent at most between two drains of the receivers


def default_pairs(hosts: list[int], limit: int = 32) -> list[tuple[int, int]]:
    """Host ``i`` of the sorted list sends to host ``i + H/2`` (mod ``H``) — a permutation
    whose pairs mostly cross the fabric — for every host, or for ``limit`` sources evenly
    spread over the list when there are more hosts: the stream's total rate is ``pairs ·
    rate``, and the userspace datapath on this machine forwards ~10^4 probes/s before it
    queues and drops (docs/emulation.md)."""
    hs = sorted(hosts)
    H, k = len(hs), max(1, len(hs) // 2)
    pick = range(H) if H <= limit else sorted({i * H // limit for i in range(limit)})
    return [(hs[i], hs[(i + k) % H]) for i in pick]


def _drop_all_filter(sock: socket.socket) -> None:
    """Attach a classic BPF program ``ret #0`` (accept nothing) to ``sock``."""
    prog = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0))   # BPF_RET|BPF_K, 0
    fprog = struct.pack("HL", 1, ctypes.addressof(prog))
    sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)


class ProbeStream:
    """A background probe stream over ``pairs`` (default :func:`default_pairs` of the
    emulated hosts) at ``rate`` probes/s per pair; see the module doc.

    Use as ``with ProbeStream(fnet, ...) as st: ...; rep = st.report(t_ref)`` — entering
    starts the stream, leaving stops it (and drains late arrivals) and closes the sockets; or
    call :meth:`start` / :meth:`stop` / :meth:`close` yourself.  ``udp_src``: an int, a
    function ``(src, dst) -> port``, or ``None`` for ``default_udp_src``."""

    def __init__(self, fnet: FabricNet, pairs=None, *, rate: float = 200.0, udp_src=None,
                 port: int = STREAM_PORT, rcvbuf: int = 1 << 22):
        hosts = fnet.host_ids
        pairs = default_pairs(hosts) if pairs is None else [(int(s), int(d)) for s, d in pairs]
        known = set(hosts)
        if not pairs or any(s == d or s not in known or d not in known for s, d in pairs):
            raise BadInput("ProbeStream: pairs must be (src, dst) of distinct emulated hosts")
        if not 0 < rate <= 10_000:
            raise BadInput(f"ProbeStream: rate={rate}; expected 0 < rate <= 10000 per pair")
        self.fnet, self.pairs, self.rate, self.port = fnet, pairs, float(rate), port
        self._pair_ix = {p: i for i, p in enumerate(pairs)}
        self._heads = [self._head(s, d, self._sport(udp_src, s, d)) for s, d in pairs]
        self.tx: dict[int, socket.socket] = {}
        self.rx: dict[int, socket.socket] = {}
        self._sinks: list[socket.socket] = []
        self._by_fd: dict[int, int] = {}
        self.poll = select.epoll()
        self._send_t: list[float] = []            # send time of probe i (nan: not sent)
        self._arrivals: list[tuple] = []          # (host, src, dst, seq, send t, arrival t)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t_start = self.t_stop = 0.0
        self.send_errors = 0
        self.receiver_drops = 0
        self.other_frames = 0                     # frames at the hosts that are no probes
        self._error: BaseException | None = None
        senders = {s for s, _ in pairs}
        try:
            for h in hosts:
                self._open(h, h in senders, rcvbuf)
        except BaseException:
            self.close()
            raise

    # -- sockets and frames -------------------------------------------------------------------
    def _open(self, h: int, sender: bool, rcvbuf: int) -> None:
        ifname = self.fnet.host_ifname(h)
        with netns(self.fnet.host_pid[h]):
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
            self.rx[h] = rx
            rx.setsockopt(_SOL_PACKET, _PACKET_IGNORE_OUTGOING, 1)
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            rx.bind((ifname, _ETH_P_ALL))
            rx.setblocking(False)
            sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sinks.append(sink)
            _drop_all_filter(sink)
            sink.bind(("0.0.0.0", self.port))
            if sender:
                tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                self.tx[h] = tx
                tx.bind((ifname, 0))
                tx.setblocking(False)
        self._by_fd[rx.fileno()] = h
        self.poll.register(rx.fileno(), select.EPOLLIN)

    @staticmethod
    def _sport(udp_src, s: int, d: int) -> int:
        if udp_src is None:
            return default_udp_src(s, d)
        return int(udp_src(s, d) if callable(udp_src) else udp_src)

    def _head(self, s: int, d: int, sport: int) -> bytes:
        """Ethernet + IPv4 + UDP header of pair ``s → d`` (IP id 0, DF, UDP checksum 0)."""
        f = self.fnet
        ulen = 8 + HEADER.size
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64,
                         socket.IPPROTO_UDP, 0, socket.inet_aton(f.ip[s]), socket.inet_aton(f.ip[d]))
        ip = ip[:10] + struct.pack("!H", inet_checksum(ip)) + ip[12:]
        return (bytes.fromhex(f.mac[d].replace(":", "")) + bytes.fromhex(f.mac[s].replace(":", ""))
                + b"\x08\x00" + ip + struct.pack("!HHHH", sport, self.port, ulen, 0))

    # -- running ------------------------------------------------------------------------------
    def start(self) -> float:
        """Start sending in a background thread; returns the start time (``monotonic``)."""
        if self._thread is not None:
            raise RunFailed("ProbeStream: already started")
        self._drain(0.02, 1.0)                     # leftovers of earlier traffic
        self._arrivals.clear()
        self.other_frames = 0
        self.t_start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="probe-stream", daemon=True)
        self._thread.start()
        return self.t_start

    def stop(self, quiet: float = 0.3, limit: float = 3.0) -> float:
        """Stop sending, then receive until nothing has arrived for ``quiet`` s (at most
        ``limit`` s), so probes still in flight count as delivered.  Returns the time the
        last probe was sent."""
        if self._thread is None:
            raise RunFailed("ProbeStream: not started")
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise RunFailed(f"ProbeStream: the sender failed: {self._error!r}")
        self._drain(quiet, limit)
        # frames the receivers' sockets dropped (buffer full: this process fell behind), so
        # that a probe lost there is not taken for one the fabric lost
        self.receiver_drops = sum(struct.unpack("II", s.getsockopt(
            _SOL_PACKET, _PACKET_STATISTICS, 8))[1] for s in self.rx.values())
        return self.t_stop

    def _run(self) -> None:
        try:
            self._send_loop()
        except BaseException as e:                 # reported by stop()
            self._error = e

    def _send_loop(self) -> None:
        P = len(self.pairs)
        dt = 1.0 / (P * self.rate)
        heads, pairs, tx, send_t = self._heads, self.pairs, self.tx, self._send_t
        pack, t0, i = HEADER.pack, self.t_start, 0
        while not self._stop.is_set():
            due = t0 + i * dt
            if due > time.monotonic():
                self._receive_until(due)
            k, seq = i % P, i // P
            s, d = pairs[k]
            now = time.monotonic()
            try:
                tx[s].send(heads[k] + pack(MAGIC, s, d, seq, now))
                send_t.append(now)
                self.t_stop = now
            except OSError:                        # a full socket buffer, a down link
                send_t.append(float("nan"))
                self.send_errors += 1
            i += 1
            if i % _DRAIN_EVERY == 0:
                self._receive_until(0.0)

    def _receive_until(self, deadline: float) -> None:
        """Receive until ``deadline`` (``monotonic``; at once for a past one)."""
        while True:
            ev = self.poll.poll(max(0.0, deadline - time.monotonic()))
            for fd, _ in ev:
                self._read(self._by_fd[fd])
            if time.monotonic() >= deadline:
                return

    def _read(self, h: int) -> None:
        """Everything host ``h``'s receiver holds: probes to the arrivals, the rest counted."""
        for data, _ in received(self.rx[h]):
            now = time.monotonic()
            if (len(data) >= _OFFSET + HEADER.size and data[12:14] == b"\x08\x00"
                    and data[14] == 0x45 and data[23] == socket.IPPROTO_UDP
                    and data[_OFFSET:_OFFSET + 4] == MAGIC):
                _, src, dst, seq, ts = HEADER.unpack_from(data, _OFFSET)
                self._arrivals.append((h, src, dst, seq, ts, now))
            else:
                self.other_frames += 1

    def _drain(self, quiet: float, limit: float) -> None:
        """Receive until ``quiet`` s pass without a frame, for at most ``limit`` s."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            ev = self.poll.poll(quiet)
            if not ev:
                return
            for fd, _ in ev:
                self._read(self._by_fd[fd])

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        for s in [*self.tx.values(), *self.rx.values(), *self._sinks]:
            s.close()
        self.tx.clear()
        self.rx.clear()
        self._sinks.clear()
        self.poll.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        try:
            if self._thread is not None and not self._stop.is_set() and exc[0] is None:
                self.stop()
        finally:
            self.close()

    # -- classification -----------------------------------------------------------------------
    def report(self, t_ref: float | None = None) -> dict:
        """Classify what was sent and received (module doc).  ``t_ref``: the reference time
        (``time.monotonic()``, e.g. of a link failure) of the timeline's ms; default the
        stream's start.  JSON-ready: ``probes_sent``, ``delivered``, ``lost``,
        ``misrouted``, ``duplicated``, ``send_errors``, ``receiver_drops`` (frames the hosts'
        receiving sockets dropped: this process fell behind), ``pairs``, ``rate_per_pair``,
        ``seconds``, ``max_gap_ms``, ``latency_ms`` (p50/p99/max of delivered probes),
        ``loss_spans`` (``from_ms``, ``to_ms``, ``lost``, ``pairs``), ``first_lost_ms`` /
        ``last_lost_ms`` (``None`` without loss), ``lost_by_pair`` (the 10 pairs that lost
        most), ``misrouted_examples`` and ``other_frames`` (frames at the hosts that are not
        probes of this stream)."""
        if self._thread is None or self._thread.is_alive():
            raise RunFailed("ProbeStream: report() needs a started and stopped stream")
        ref = self.t_start if t_ref is None else t_ref
        P = len(self.pairs)
        send_t = np.asarray(self._send_t, np.float64)
        sent = ~np.isnan(send_t)
        got = np.zeros(len(send_t), np.int64)          # arrivals at the destination per probe
        mis, examples, lat, foreign = 0, [], [], 0
        for h, src, dst, seq, ts, ta in self._arrivals:
            k = self._pair_ix.get((src, dst))
            i = seq * P + k if k is not None else -1
            if not 0 <= i < len(send_t):           # a probe of another stream
                foreign += 1
                continue
            if h != dst:
                mis += 1
                if len(examples) < 20:
                    examples.append({"src": src, "dst": dst, "seq": seq, "at": h})
                continue
            got[i] += 1
            if got[i] == 1:
                lat.append(ta - ts)
        lost = sent & (got == 0)
        lat_ms = np.asarray(lat) * 1e3
        gaps = np.diff(send_t[sent]) if sent.sum() > 1 else np.zeros(0)
        spans = _loss_spans(send_t, lost, P, ref)
        per_pair = np.bincount(np.flatnonzero(lost) % P, minlength=P)
        lt = (send_t[lost] - ref) * 1e3
        return {
            "probes_sent": int(sent.sum()), "delivered": int((got > 0).sum()),
            "lost": int(lost.sum()), "misrouted": mis,
            "duplicated": int(np.maximum(got - 1, 0).sum()),
            "send_errors": self.send_errors, "receiver_drops": self.receiver_drops,
            "other_frames": self.other_frames + foreign,
            "pairs": P, "rate_per_pair": self.rate,
            "seconds": round(self.t_stop - self.t_start, 3),
            "max_gap_ms": round(float(gaps.max()) * 1e3, 2) if len(gaps) else None,
            "latency_ms": ({"p50": round(float(np.percentile(lat_ms, 50)), 3),
                            "p99": round(float(np.percentile(lat_ms, 99)), 3),
                            "max": round(float(lat_ms.max()), 3)} if len(lat_ms) else None),
            "loss_spans": spans,
            "first_lost_ms": round(float(lt.min()), 2) if len(lt) else None,
            "last_lost_ms": round(float(lt.max()), 2) if len(lt) else None,
            "lost_by_pair": [{"src": self.pairs[k][0], "dst": self.pairs[k][1],
                              "lost": int(per_pair[k])}
                             for k in np.argsort(-per_pair, kind="stable")[:10].tolist()
                             if per_pair[k]],
            "misrouted_examples": examples}


def _loss_spans(send_t: np.ndarray, lost: np.ndarray, P: int, ref: float) -> list[dict]:
    """Runs of consecutive lost sequence numbers per pair, as send-time intervals, merged
    across pairs where they overlap; ms relative to ``ref``."""
    runs = []                                      # (from, to, lost, pair)
    for k in range(P):
        t, miss = send_t[k::P], lost[k::P]
        ok = ~np.isnan(t)
        t, miss = t[ok], miss[ok]
        if not miss.any():
            continue
        edges = np.diff(np.concatenate([[0], miss.astype(np.int8), [0]]))
        for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
            runs.append((float(t[a]), float(t[b - 1]), int(b - a), k))
    runs.sort()
    out = []
    for a, b, n, k in runs:
        if out and a <= out[-1][1]:
            last = out[-1]
            out[-1] = (last[0], max(last[1], b), last[2] + n, last[3] | {k})
        else:
            out.append((a, b, n, {k}))
    return [{"from_ms": round((a - ref) * 1e3, 2), "to_ms": round((b - ref) * 1e3, 2),
             "lost": n, "pairs": len(ks)} for a, b, n, ks in out]


# ---------------------------------------------------------------------------------------------
def reachable_after(fnet: FabricNet, hosts, t0: float, *, sources=None, timeout: float = 10.0,
                    interval: float = 0.02) -> float:
    """Seconds from ``t0`` (``time.monotonic()``) until every host of ``hosts`` has answered
    an ICMP echo request from every host of ``sources`` (default: the lowest-numbered
    emulated host not in ``hosts``).  Requests go out every ``interval`` s to the hosts that
    have not answered yet; the answer time is the reply's arrival.  Raises
    :class:`RunFailed` naming the silent hosts after ``timeout`` s.  ``O(targets)`` per
    round."""
    targets = sorted({int(h) for h in hosts})
    if not targets or any(h not in fnet.host_pid for h in targets):
        raise BadInput(f"reachable_after: {targets[:5]} must be emulated hosts")
    if sources is None:
        rest = [h for h in fnet.host_ids if h not in targets]
        if not rest:
            raise BadInput("reachable_after: every emulated host is a target; give sources")
        sources = [min(rest)]
    ident = os.getpid() & 0xFFFF
    socks: dict[int, socket.socket] = {}
    answered: dict[tuple[int, int], float] = {}
    poll = select.epoll()
    try:
        for s in sources:
            with netns(fnet.host_pid[s]):
                sk = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            sk.setblocking(False)
            socks[s] = sk
            poll.register(sk.fileno(), select.EPOLLIN)
        by_fd = {sk.fileno(): s for s, sk in socks.items()}
        deadline, seq = time.monotonic() + timeout, 0
        while True:
            todo = [(s, d) for s in socks for d in targets if d != s and (s, d) not in answered]
            if not todo:
                return max(answered.values()) - t0
            if time.monotonic() > deadline:
                raise RunFailed(f"reachable_after: no echo reply within {timeout:.1f} s from "
                                f"{sorted({d for _, d in todo})[:10]}")
            seq = (seq + 1) & 0xFFFF
            for s, d in todo:
                with contextlib.suppress(BlockingIOError):
                    socks[s].sendto(_echo(ident, seq), (fnet.ip[d], 0))
            end = time.monotonic() + interval
            while (left := end - time.monotonic()) > 0:
                for fd, _ in poll.poll(left):
                    _replies(socks[by_fd[fd]], by_fd[fd], ident, answered)
    finally:
        for sk in socks.values():
            sk.close()
        poll.close()


def _echo(ident: int, seq: int) -> bytes:
    msg = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"fabroute-reach"
    return msg[:2] + struct.pack("!H", inet_checksum(msg)) + msg[4:]


def _replies(sk: socket.socket, src: int, ident: int, answered: dict) -> None:
    for data, _ in received(sk):
        now = time.monotonic()
        ihl = (data[0] & 0x0F) * 4
        if len(data) >= ihl + 8 and data[ihl] == 0 and \
                struct.unpack_from("!H", data, ihl + 4)[0] == ident:
            answered.setdefault((src, host_of_ip(socket.inet_ntoa(data[12:16]))), now)
