"""Link capacities: every switch egress port shaped to ``link_mbit`` Mbit/s with a small queue.

A link's capacity is what its sending port lets out, so every switch-side veth end
(``<bridge>-eth<port>``: network ports and host-facing ports) gets an Open vSwitch QoS row of
type ``linux-htb`` with ``max-rate`` = the capacity and one Queue (queue 0, the one every
packet of the userspace datapath lands in: ``set_queue`` is ignored there).  OVS turns that
into a tc ``htb`` qdisc on the veth: class ``1:fffe`` (the port's max-rate) with leaf class
``1:1`` (queue 0).  Through a QoS row rather than ``tc`` directly, OpenFlow queue statistics
exist for every port (OVS reports them only for ports with a ``linux-htb`` row; they carry
the tc class counters: ``tx_errors`` = packets the queue dropped), besides the port
statistics.

**The queue**: the leaf's qdisc is replaced (one ``tc -batch``) by ``pfifo_head_drop limit
queue_packets``: an overloaded port holds at most that many packets (bounded queueing delay)
and drops the oldest.  Not OVS's default leaf ``pfifo`` (tail drop, limit = the device's
``txqueuelen``): a tail drop fails the ``sendmmsg`` of ``ovs-vswitchd``, whose send loop
(``lib/netdev-linux.c``) then sends the failed frame once more and drops the rest of its
batch unsent — frames no counter sees (measured: 4–5 % of the losses of a Slim Fly q=5
under adversarial traffic) and frames counted as dropped that were delivered.  A head drop
accepts the new frame (``NET_XMIT_CN``, a success for the sender) and counts the one it
drops, so the queue's ``tx_errors`` are the drops.

One QoS row and one Queue row serve all ports (one ``ovs-vsctl`` transaction); both carry
``external_ids:fabroute-net=<prefix>``, so :func:`remove` finds them — QoS and Queue are
root tables in OVS's schema, they outlive the ports that referenced them unless destroyed.

**OVS's send buffer.**  The userspace datapath sends to every ``system`` port through ONE
unbound ``AF_PACKET`` socket of ``ovs-vswitchd`` (``netdev-linux``), and a packet waiting in
a port's qdisc stays charged to that socket's send buffer (``SO_SNDBUF``, from
``net.core.wmem_default`` = 208 KiB: ~90 queued frames in the whole fabric).  Once the
queues of a few ports hold that much, every send of the datapath to any port fails and the
frame is dropped where no counter of OpenFlow or tc sees it (measured: Dragonfly p=2,a=4,h=2
worst-case under MIN, 2 Mbit/s links, load 0.8, delivered 3.8 instead of 18 Mbit/s, 99 % of
its losses outside the queues).  :func:`raise_send_buffer` therefore enlarges that socket's
buffer to hold every shaped queue full (``SO_SNDBUFFORCE`` on a duplicate of
``ovs-vswitchd``'s descriptor, ``pidfd_getfd``); :func:`restore_send_buffer` puts the old
size back.
``docs/emulation.md`` (*Traffic and link capacities*) has the measurements.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import socket
import subprocess

from tablegen.errors import BadInput, RunFailed

__all__ = ["shape", "remove", "qos_rows", "queue_drops", "htb_limits", "raise_send_buffer",
           "restore_send_buffer", "send_buffer_size", "DEFAULT_QUEUE_PACKETS"]

#: packets an overloaded port holds (the htb leaf's pfifo limit): at 1 Mbit/s and 1,446-byte
#: frames (1,400-byte payloads, VLAN-tagged), 20 packets are ~230 ms of queueing
DEFAULT_QUEUE_PACKETS = 20
_TAG = "fabroute-net"


def _run(cmd: list[str], timeout: float = 120) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RunFailed(f"{' '.join(cmd[:4])} … failed (exit {r.returncode}): "
                        f"{(r.stderr or r.stdout).strip()[:1000]}")
    return r.stdout


def shape(ports: list[str], link_mbit: float, queue_packets: int, prefix: str) -> None:
    """Cap every interface of ``ports`` (OVS port names, the veth ends) at ``link_mbit``
    Mbit/s with a ``queue_packets``-packet head-drop queue."""
    if not link_mbit > 0:
        raise BadInput(f"link_mbit={link_mbit}; expected > 0 (or None for no shaping)")
    if not 1 <= queue_packets <= 100_000:
        raise BadInput(f"queue_packets={queue_packets}; expected 1 .. 100000")
    rate = int(round(link_mbit * 1e6))
    tag = f"external_ids:{_TAG}={prefix or '-'}"
    cmd = ["ovs-vsctl", "--timeout=120"]
    for p in ports:
        cmd += ["--", "set", "Port", p, "qos=@qos"]
    cmd += ["--", "--id=@qos", "create", "QoS", "type=linux-htb",
            f"other-config:max-rate={rate}", "queues:0=@q0", tag,
            "--", "--id=@q0", "create", "Queue", f"other-config:max-rate={rate}",
            f"other-config:min-rate={rate}", tag]
    _run(cmd)                                  # returns once ovs-vswitchd has set up tc
    batch = "".join(f"qdisc replace dev {p} parent 1:1 handle 2: pfifo_head_drop "
                    f"limit {queue_packets}\n" for p in ports)
    r = subprocess.run(["tc", "-batch", "-"], input=batch, text=True, capture_output=True)
    if r.returncode:
        raise RunFailed(f"tc -batch (the queues' pfifo_head_drop) failed: "
                        f"{r.stderr.strip()[:1000]}")


def qos_rows(prefix: str) -> dict[str, list[str]]:
    """UUIDs of the QoS and Queue rows that :func:`shape` made for ``prefix``."""
    out = {}
    for table in ("QoS", "Queue"):
        js = json.loads(_run(["ovs-vsctl", "--timeout=60", "--format=json",
                              "--columns=_uuid,external_ids", "list", table]))
        out[table] = [row[0][1] for row in js["data"]
                      if [_TAG, prefix or "-"] in row[1][1]]
    return out


def remove(prefix: str) -> dict[str, list[str]]:
    """Destroy the QoS and Queue rows of ``prefix`` (after its bridges are gone, or clearing
    the ports' ``qos`` first when they still exist).  Returns what was found."""
    rows = qos_rows(prefix)
    if rows["QoS"] or rows["Queue"]:
        cmd = ["ovs-vsctl", "--timeout=60"]
        for u in rows["QoS"]:
            for p in _ports_using(u):
                cmd += ["--", "clear", "Port", p, "qos"]
        cmd += [x for u in rows["QoS"] for x in ("--", "destroy", "QoS", u)]
        cmd += [x for u in rows["Queue"] for x in ("--", "destroy", "Queue", u)]
        _run(cmd)
    return rows


def _ports_using(qos_uuid: str) -> list[str]:
    js = json.loads(_run(["ovs-vsctl", "--timeout=60", "--format=json", "--columns=name,qos",
                          "list", "Port"]))
    return [row[0] for row in js["data"] if row[1] == ["uuid", qos_uuid]]


_HTB_ROOT = re.compile(r"^qdisc htb 1: dev (\S+) root .*\n Sent \d+ bytes \d+ pkt "
                       r"\(dropped (\d+),", re.M)


def queue_drops(ports: set[str]) -> dict[str, int]:
    """Packets dropped so far by the shaped queue of every interface of ``ports`` that has
    one — the root htb qdisc's ``dropped`` (its leaf's drops), all devices read in one
    ``tc -s qdisc show``.  What OpenFlow reports as the queue's ``tx_errors``."""
    out = _run(["tc", "-s", "qdisc", "show"])
    return {dev: int(n) for dev, n in _HTB_ROOT.findall(out) if dev in ports}


def htb_limits(dev: str) -> dict:
    """What the kernel holds for ``dev``: ``{"qdiscs": [...], "classes": [...]}`` lines of
    ``tc qdisc show … invisible`` (the htb leaf's default pfifo is hidden without it) and
    ``tc class show``: rate, ceil, the pfifo limit (for the tests and the docs)."""
    q = _run(["tc", "qdisc", "show", "dev", dev, "invisible"]).splitlines()
    c = _run(["tc", "class", "show", "dev", dev]).splitlines()
    return {"qdiscs": q, "classes": c}


# ---------------------------------------------------------------------------------------------
# ovs-vswitchd's send socket
# ---------------------------------------------------------------------------------------------
_SYS_PIDFD_GETFD = 438                  # x86_64 and aarch64 (asm-generic) alike
_SO_SNDBUFFORCE = 32
#: bytes one queued frame of up to 1,600 bytes may charge (its skb's truesize, rounded up)
_TRUESIZE = 4096
_libc = ctypes.CDLL(None, use_errno=True)
_OVS_PID = "/var/run/openvswitch/ovs-vswitchd.pid"


def _ovs_pid() -> int | None:
    try:
        return int(open(_OVS_PID).read().strip())
    except (OSError, ValueError):
        return None


def _send_fd(pid: int) -> int | None:
    """``ovs-vswitchd``'s descriptor of its unbound ``AF_PACKET`` socket (the one it sends to
    every system port through), if it has opened it."""
    with open("/proc/net/packet") as f:        # sk RefCnt Type Proto Iface R Rmem User Inode
        unbound = {row.split()[8] for row in list(f)[1:] if row.split()[4] == "0"}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:[") and link[8:-1] in unbound:
                return int(fd)
    return None


def _dup_from(pid: int, fd: int) -> socket.socket:
    pidfd = os.pidfd_open(pid)
    try:
        new = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
        if new < 0:
            raise RunFailed(f"pidfd_getfd(ovs-vswitchd {pid}, fd {fd}): "
                            f"{os.strerror(ctypes.get_errno())}")
    finally:
        os.close(pidfd)
    return socket.socket(fileno=new)


def raise_send_buffer(n_ports: int, queue_packets: int, bridge: str, port: int) -> int:
    """Make ``ovs-vswitchd``'s send socket hold ``n_ports`` full queues (plus what it held);
    returns the size it had (for :func:`restore_send_buffer`).  OVS opens that socket at its
    first send: if it has not yet, one frame is sent out of ``bridge``'s ``port`` first (an
    OpenFlow packet-out of a broadcast frame of the local experimental EtherType 0x88b5,
    which no host takes up)."""
    pid = _ovs_pid()
    if pid is None:
        raise RunFailed(f"{_OVS_PID} missing: ovs-vswitchd is not running")
    fd = _send_fd(pid)
    if fd is None:
        frame = "ff" * 6 + "02" + "00" * 5 + "88b5" + "00" * 46
        _run(["ovs-ofctl", "-O", "OpenFlow13", "packet-out", bridge,
              f"in_port=controller packet={frame} actions=output:{port}"])
        fd = _send_fd(pid)
        if fd is None:
            raise RunFailed("ovs-vswitchd has no unbound AF_PACKET socket (its send socket "
                            "for system ports), even after a packet-out")
    with _dup_from(pid, fd) as s:
        old = s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        want = min(old + n_ports * (queue_packets + 2) * _TRUESIZE, 1 << 30)
        s.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, want // 2)     # the kernel doubles
        return old


def send_buffer_size() -> int | None:
    """``SO_SNDBUF`` of ``ovs-vswitchd``'s send socket (``None``: OVS has not opened it)."""
    pid = _ovs_pid()
    fd = None if pid is None else _send_fd(pid)
    if fd is None:
        return None
    with _dup_from(pid, fd) as s:
        return s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def restore_send_buffer(size: int) -> None:
    """Give ``ovs-vswitchd``'s send socket its size back (``size`` as returned by
    :func:`raise_send_buffer`); nothing to do when OVS or the socket is gone."""
    pid = _ovs_pid()
    fd = None if pid is None else _send_fd(pid)
    if fd is not None:
        with _dup_from(pid, fd) as s:
            s.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, size // 2)
