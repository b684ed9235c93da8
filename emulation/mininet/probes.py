"""UDP probes between emulated hosts: scapy frames sent from the test process through sockets
opened inside the hosts' network namespaces.

:class:`Prober` opens, per emulated host and once, an ``AF_PACKET`` socket on the host's
interface (to send) and a UDP socket bound to :data:`PROBE_PORT` (to receive), both created
after ``setns`` into the host's namespace (``emulation.mininet.net.netns``) — no process per probe.
A probe is ``Ether / IPv4 / UDP(sport=udp_src, dport=PROBE_PORT) / payload`` with the plan's
MACs and IPs; the payload carries magic, source host, destination host and a sequence
number, so a receiver knows exactly which probe arrived and on which host.

Frames come from scapy: :meth:`Prober.frame` builds every field with scapy.  For the
all-pairs check, building each of ~10^4 frames with scapy costs ~0.3–0.6 ms on this machine
(more than the network), so :meth:`Prober.fast_frame` takes a scapy-built template per source
host and patches the destination MAC/IP, IP id, UDP source port and payload, recomputing
both checksums; ``tests/test_emulation.py`` checks it byte for byte against scapy.

``udp_src`` selects the source choice of Valiant routings (the low bits of the UDP source
port, ``tablegen.exports.openflow.udp_src_for``): pass an int, a function ``(src, dst) -> port``, or
``None`` for the default :func:`default_udp_src` (spread over the pairs).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass, field

from emulation.mininet.net import FabricNet, netns

__all__ = ["PROBE_PORT", "MAGIC", "HostSockets", "inet_checksum", "Prober", "Probe",
           "default_udp_src", "received"]

PROBE_PORT = 40000
MAGIC = b"FABRPRB1"
_PAYLOAD = struct.Struct("!8sIIQ")              # magic, src host, dst host, seq
ETH_P_IP = 0x0800


def default_udp_src(src: int, dst: int) -> int:
    """49152 + a mix of the pair, so the low bits (Valiant slots) vary across pairs."""
    return 49152 + ((src * 7919 + dst * 104729) & 0x3FFF)


@dataclass(frozen=True)
class Probe:
    src: int
    dst: int
    seq: int
    udp_src: int


def inet_checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``: IPv4 headers, UDP with its pseudo-header."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def received(sock: socket.socket, size: int = 2048):
    """Every ``(data, address)`` a non-blocking socket holds now, one at a time (until it
    would block)."""
    while True:
        try:
            yield sock.recvfrom(size)
        except BlockingIOError:
            return


@dataclass
class DeliveryReport:
    pairs: int
    delivered: int
    lost: int
    misdelivered: int
    duplicates: int
    seconds: float
    lost_pairs: list = field(default_factory=list)        # (src, dst, udp_src)
    misdelivered_pairs: list = field(default_factory=list)
    resent: int = 0          # probes lost on the first pass and sent again (same udp_src)

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "delivered": self.delivered, "lost": self.lost,
                "misdelivered": self.misdelivered, "duplicates": self.duplicates,
                "resent": self.resent, "seconds": round(self.seconds, 3),
                "lost_pairs": self.lost_pairs[:20],
                "misdelivered_pairs": self.misdelivered_pairs[:20]}


class HostSockets:
    """Per emulated host of ``fnet``: an ``AF_PACKET`` socket on its interface (``tx``, to
    send frames built here) and a UDP socket bound to ``port`` (``rx``), both opened inside
    the host's network namespace, and one epoll over the receivers (``poll``; ``_by_fd``
    maps a receiver's descriptor to its host).  Close with :meth:`close` (or ``with``)."""

    def __init__(self, fnet: FabricNet, port: int, rcvbuf: int, nonblocking_tx: bool = False):
        self.fnet = fnet
        self.port = port
        self.tx: dict[int, socket.socket] = {}
        self.rx: dict[int, socket.socket] = {}
        self._by_fd: dict[int, int] = {}
        self.poll = select.epoll()
        try:
            for h in fnet.host_ids:
                with netns(fnet.host_pid[h]):
                    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                    tx.bind((fnet.host_ifname(h), 0))
                    tx.setblocking(not nonblocking_tx)
                    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                    rx.bind(("0.0.0.0", port))
                    rx.setblocking(False)
                self.tx[h], self.rx[h] = tx, rx
                self._by_fd[rx.fileno()] = h
                self.poll.register(rx.fileno(), select.EPOLLIN)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for s in list(self.tx.values()) + list(self.rx.values()):
            s.close()
        self.tx.clear()
        self.rx.clear()
        self.poll.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Prober(HostSockets):
    """Probe sockets in every emulated host of ``fnet`` (:class:`HostSockets`)."""

    def __init__(self, fnet: FabricNet, port: int = PROBE_PORT, rcvbuf: int = 1 << 22):
        self._seq = 0
        self._templates: dict[int, bytes] = {}
        super().__init__(fnet, port, rcvbuf)

    # -- frames ---------------------------------------------------------------------------------
    def _udp_src(self, udp_src, src: int, dst: int) -> int:
        if udp_src is None:
            return default_udp_src(src, dst)
        return int(udp_src(src, dst) if callable(udp_src) else udp_src)

    def frame(self, src: int, dst: int, udp_src: int, seq: int) -> bytes:
        """The probe built field by field with scapy."""
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw

        f = self.fnet
        pkt = (Ether(src=f.mac[src], dst=f.mac[dst], type=ETH_P_IP)
               / IP(src=f.ip[src], dst=f.ip[dst], ttl=64, id=seq & 0xFFFF, flags="DF")
               / UDP(sport=udp_src, dport=self.port)
               / Raw(_PAYLOAD.pack(MAGIC, src, dst, seq)))
        return bytes(pkt)

    def fast_frame(self, src: int, dst: int, udp_src: int, seq: int) -> bytes:
        """:meth:`frame`'s bytes from a scapy-built per-source template, patched."""
        t = self._templates.get(src)
        if t is None:
            t = self._templates[src] = self.frame(src, src, 0, 0)
        f = self.fnet
        dmac = bytes.fromhex(f.mac[dst].replace(":", ""))
        dip = socket.inet_aton(f.ip[dst])
        ip = bytearray(t[14:34])
        ip[4:6] = struct.pack("!H", seq & 0xFFFF)
        ip[10:12] = b"\0\0"
        ip[16:20] = dip
        ip[10:12] = struct.pack("!H", inet_checksum(bytes(ip)))
        payload = _PAYLOAD.pack(MAGIC, src, dst, seq)
        ulen = 8 + len(payload)
        udp = struct.pack("!HHHH", udp_src, self.port, ulen, 0) + payload
        pseudo = ip[12:16] + dip + struct.pack("!BBH", 0, 17, ulen)
        c = inet_checksum(bytes(pseudo) + udp) or 0xFFFF
        udp = udp[:6] + struct.pack("!H", c) + udp[8:]
        return dmac + t[6:14] + bytes(ip) + udp

    # -- sending and receiving ------------------------------------------------------------------
    def send(self, src: int, dst: int, udp_src=None, fast: bool = False) -> Probe:
        self._seq += 1
        u = self._udp_src(udp_src, src, dst)
        fr = (self.fast_frame if fast else self.frame)(src, dst, u, self._seq)
        self.tx[src].send(fr)
        return Probe(src, dst, self._seq, u)

    def receive(self, timeout: float) -> list[tuple[int, Probe | None]]:
        """``(receiving host, probe)`` for every datagram that arrives within ``timeout``
        seconds of silence (``probe`` is ``None`` for a datagram that is not a probe)."""
        out = []
        while True:
            ev = self.poll.poll(timeout)
            if not ev:
                return out
            for fd, _ in ev:
                h = self._by_fd[fd]
                for data, (_, port) in received(self.rx[h]):
                    if len(data) == _PAYLOAD.size and data[:8] == MAGIC:
                        _, src, dst, seq = _PAYLOAD.unpack(data)
                        out.append((h, Probe(src, dst, seq, port)))
                    else:
                        out.append((h, None))
            timeout = min(timeout, 0.05)

    def wait_for(self, probe: Probe, timeout: float = 1.0) -> bool:
        """Wait until ``probe`` arrives at its destination (other arrivals are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for h, p in self.receive(min(left, 0.2)):
                if p is not None and p.seq == probe.seq and h == probe.dst:
                    return True

    def flush(self) -> int:
        return len(self.receive(0.0))

    def all_pairs(self, pairs=None, udp_src=None, window: int = 200, settle: float = 0.5,
                  fast: bool = True, retries: int = 2) -> DeliveryReport:
        """Send one probe per ordered pair of emulated hosts (or per pair of ``pairs``) and
        count what arrives where.  ``window`` probes are sent, then the receivers drained
        (so a few thousand frames/s, what the userspace datapath keeps up with); ``settle``
        seconds of silence end the check.  A probe that did not reach its destination is
        sent again (a misdelivered one too: it stays in ``misdelivered``, which fails the
        check whatever the resend does) with the same UDP source port, so on the same
        path, up to ``retries`` times in
        smaller windows: the userspace datapath drops first packets of new flows when its
        upcall handling falls behind (a loaded machine), which says nothing about the
        tables; ``resent`` counts them."""
        hosts = self.fnet.host_ids
        if pairs is None:
            pairs = [(s, d) for s in hosts for d in hosts if s != d]
        self.flush()
        t0 = time.perf_counter()
        sent: dict[int, Probe] = {}
        got: set[int] = set()
        dup = 0
        mis = []

        def take(arrivals):
            nonlocal dup
            for h, p in arrivals:
                if p is None or p.seq not in sent:
                    continue
                if h != p.dst:
                    mis.append((p.src, p.dst, h))
                elif p.seq in got:
                    dup += 1
                else:
                    got.add(p.seq)

        todo = [(s, d, udp_src) for s, d in pairs]
        resent = 0
        for attempt in range(retries + 1):
            tries = {}
            for i in range(0, len(todo), window):
                for s, d, u in todo[i:i + window]:
                    p = self.send(s, d, u, fast=fast)
                    sent[p.seq] = tries[p.seq] = p
                take(self.receive(0.002))
            take(self.receive(settle))
            todo = [(p.src, p.dst, p.udp_src) for q, p in tries.items() if q not in got]
            if not todo or attempt == retries:
                break
            resent += len(todo)
            window = max(10, window // 4)
        return DeliveryReport(len(pairs), len(pairs) - len(todo), len(todo), len(mis), dup,
                              time.perf_counter() - t0, todo, mis, resent)
