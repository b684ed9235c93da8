"""The cabling of an OpenFlow fabric learned with LLDP, as faucet and os-ken's topology service
learn it (issue 26): every switch sends an LLDP frame out of every port, the switch at the
other end hands it to the controller, and each frame names the cable it crossed.

Pure code, no socket: :func:`frame` and :func:`parse` are the frames, :class:`Cabling`
keeps what was heard and writes it as a :class:`~tablegen.fabrics.fabric.Fabric` (the fabric
file of ``docs/real-fabrics.md``); the os-ken app sends the packet-outs and hands in the
packet-ins.

Encoding (os-ken's, so its tools read our frames): destination ``01:80:c2:00:00:0e``
(nearest bridge), chassis id subtype 7 (locally assigned) ``dpid:<16 hex digits>``, port id
subtype 2 (port component) the OpenFlow port number as 4 bytes, TTL
:data:`TTL_S`.  A port is cabled to a switch when an LLDP frame arrives on it; a port
that is up, hears no LLDP and is not reserved holds a host, named by the source MAC of the
first other frame it sent (:meth:`Cabling.host_in`), else by the switch port's own MAC.
"""

from __future__ import annotations

import struct
import time

from os_ken.lib.packet import ethernet, lldp, packet

from tablegen.exports.openflow import T_INGRESS, Flow
from tablegen.fabrics.fabric import MAX_PORT, Fabric, norm_id

__all__ = ["Cabling", "DISCOVER_FLOW", "ETH_LLDP", "LLDP_FLOW", "LLDP_PRIORITY", "frame",
           "parse"]

ETH_LLDP = 0x88CC
TTL_S = 120
LLDP_PRIORITY = 0xFFFF        # above every entry of the program (its highest is 400)
_PREFIX = b"dpid:"
#: LLDP frames to the controller: part of every program the controller serves in a mapped
#: fabric, so a cable plugged later is heard (and read back like any other entry)
LLDP_FLOW = Flow(T_INGRESS, LLDP_PRIORITY, (("eth_type", ETH_LLDP),),
                 (("output", "controller"),))
#: before its switch is known: everything else to the controller too (hosts name themselves
#: by their first frame); not in any program, so the first repair deletes it
DISCOVER_FLOW = Flow(T_INGRESS, 0, (), (("output", "controller"),))


def frame(dpid: int, port: int, src_mac: str) -> bytes:
    """The LLDP frame switch ``dpid`` sends out of ``port`` (source MAC ``src_mac``: the
    port's own)."""
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(lldp.LLDP_MAC_NEAREST_BRIDGE, src_mac, ETH_LLDP))
    pkt.add_protocol(lldp.lldp((
        lldp.ChassisID(subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED,
                       chassis_id=_PREFIX + f"{dpid:016x}".encode()),
        lldp.PortID(subtype=lldp.PortID.SUB_PORT_COMPONENT,
                    port_id=struct.pack("!I", port)),
        lldp.TTL(ttl=TTL_S), lldp.End())))
    pkt.serialize()
    return bytes(pkt.data)


def parse(data: bytes) -> tuple[int, int] | None:
    """``(dpid, port)`` a frame of :func:`frame` was sent from; ``None`` for anything else
    (another LLDP speaker's frame, a truncated or foreign one)."""
    try:
        pkt = packet.Packet(bytes(data))
        tl = pkt.get_protocol(lldp.lldp)
        if tl is None or len(tl.tlvs) < 2:
            return None
        cid, pid = tl.tlvs[0], tl.tlvs[1]
        if (cid.subtype != lldp.ChassisID.SUB_LOCALLY_ASSIGNED
                or not cid.chassis_id.startswith(_PREFIX)
                or pid.subtype != lldp.PortID.SUB_PORT_COMPONENT or len(pid.port_id) != 4):
            return None
        return int(cid.chassis_id[len(_PREFIX):], 16), struct.unpack("!I", pid.port_id)[0]
    except Exception:       # noqa: BLE001 - os-ken's parsers raise anything on garbage
        return None


class Cabling:
    """What LLDP and the switches' port lists have told so far: per datapath its ports (up or
    not, own MAC), the cables heard and the hosts' MACs; ``changed``: the ``clock()`` of the
    last change (the cabling is settled when nothing changed for a while)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.ports: dict[int, dict[int, dict]] = {}          # dpid -> port -> {up, hw}
        self.peer: dict[tuple[int, int], tuple[int, int]] = {}   # each end -> the other
        self.macs: dict[tuple[int, int], str] = {}           # host port -> first MAC heard
        self.changed = clock()

    def _touch(self) -> bool:
        self.changed = self.clock()
        return True

    # -- what the switches say ---------------------------------------------------------------
    def switch(self, dpid: int, ports) -> None:
        """Datapath ``dpid`` listed its ports: ``(number, up, MAC)`` each (reserved ports
        ignored); what was known of it before is forgotten."""
        self.gone(dpid)
        self.ports[dpid] = {int(n): {"up": bool(up), "hw": str(hw)} for n, up, hw in ports
                            if 0 < int(n) <= MAX_PORT}
        self._touch()

    def port(self, dpid: int, number: int, up: bool, hw: str = "") -> bool:
        """A port came, went up or down (``up=False`` also for a deleted port); whether that
        changed the cabling (a port going down loses its cable and its host)."""
        if dpid not in self.ports or not 0 < number <= MAX_PORT:
            return False
        old = self.ports[dpid].get(number)
        self.ports[dpid][number] = {"up": up, "hw": hw or (old or {}).get("hw", "")}
        if up:
            return (old is None or not old["up"]) and self._touch()
        return self._unplug((dpid, number)) | self._touch()

    def gone(self, dpid: int) -> None:
        """Datapath ``dpid`` disconnected: its ports, cables and hosts are no longer known."""
        for end in [e for e in self.peer if e[0] == dpid]:
            self._unplug(end)
        for end in [e for e in self.macs if e[0] == dpid]:
            del self.macs[end]
        if self.ports.pop(dpid, None) is not None:
            self._touch()

    def _unplug(self, end) -> bool:
        self.macs.pop(end, None)
        other = self.peer.pop(end, None)
        if other is not None:
            self.peer.pop(other, None)
        return other is not None

    # -- what the frames say -----------------------------------------------------------------
    def lldp_in(self, dpid: int, in_port: int, data: bytes) -> tuple | None:
        """An LLDP frame arrived at ``dpid`` port ``in_port``: the cable ``((dpid, port),
        (dpid, port))`` when it is new (a port whose cable moved loses the old one), else
        ``None``."""
        src = parse(data)
        here = (int(dpid), int(in_port))
        if src is None or src == here or src[0] not in self.ports or dpid not in self.ports:
            return None
        if self.peer.get(here) == src:
            return None
        self._unplug(here)
        self._unplug(src)
        self.peer[here], self.peer[src] = src, here
        self._touch()
        return tuple(sorted((here, src)))

    def host_in(self, dpid: int, in_port: int, src_mac: str) -> bool:
        """A frame other than LLDP from ``src_mac`` arrived on a port: its host's MAC, when it
        is the first one heard there (whether it is new)."""
        end = (int(dpid), int(in_port))
        if end in self.peer or end in self.macs or dpid not in self.ports:
            return False
        self.macs[end] = src_mac.lower()
        return self._touch()

    # -- views -------------------------------------------------------------------------------
    def cables(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        return sorted({tuple(sorted((a, b))) for a, b in self.peer.items()})

    def host_ports(self, dpid: int) -> list[int]:
        """Ports of ``dpid`` that are up and hear no LLDP: hosts (or cables whose other end
        has not spoken yet — the settle time is for them)."""
        return sorted(n for n, p in self.ports.get(dpid, {}).items()
                      if p["up"] and (dpid, n) not in self.peer)

    def settled(self, settle: float) -> bool:
        """Whether some switch is known and nothing changed for ``settle`` seconds."""
        return bool(self.ports) and self.clock() - self.changed >= settle

    def fabric(self, source: str = "lldp") -> Fabric:
        """The cabling as a fabric file (switch ids = datapath ids; port counts = the highest
        port number seen; hosts by their MAC, or by their switch port's MAC when they have
        sent nothing yet)."""
        switches = {norm_id(d): {"name": "", "ports": max(p, default=1)}
                    for d, p in self.ports.items()}
        hosts = {}
        for d in self.ports:
            for n in self.host_ports(d):
                mac = self.macs.get((d, n))
                hid = norm_id(mac or self.ports[d][n]["hw"] or ((d << 8) | n))
                if hid in hosts or hid in switches:     # a MAC heard twice: one host only
                    continue
                hosts[hid] = {"name": "" if mac else f"port {n} (not heard)",
                              "switch": norm_id(d), "port": n}
        cables = [((norm_id(a), pa), (norm_id(b), pb)) for (a, pa), (b, pb) in self.cables()]
        return Fabric(source, switches, hosts, cables)
