"""A fabric as it is cabled: the switches and hosts the hardware reports and the cables
between their ports, whatever the plan says (issue 26, docs/real-fabrics.md).

A :class:`Fabric` is what a reader produces (``ibnetdiscover``'s text, the controller's LLDP)
and what ``fabroute reconcile`` matches onto a planned :class:`~tablegen.topology.Topology`.
Its ids are the hardware's: an InfiniBand node GUID or an OpenFlow datapath id for a switch,
a port GUID or a MAC for a host, each written ``0x`` + 16 lower-case hex digits (a MAC as the
48-bit number); ports are the switch's own port numbers (1..254), not the plan's.

The file (``fabric.json``)::

    {"format": "fabroute-fabric", "version": 1, "source": "ibnetdiscover",
     "switches": [{"id": "0x0002c90300a1b2c3", "name": "sw-r1-u12", "ports": 36}, ...],
     "hosts": [{"id": "0x...", "name": "node017 HCA-1", "switch": "0x...", "port": 3}, ...],
     "cables": [{"a": ["0x...", 7], "b": ["0x...", 3]}, ...]}

``cables`` are switch-to-switch only; a host's cable is its ``switch``/``port``.  Whatever
contradicts itself (an id twice, a port with two cables or a cable and a host, a cable from
a port to itself, a port beyond the switch's count) is refused in one line
(:class:`~tablegen.errors.BadInput`).  Building and checking are O(S + H + C).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tablegen.durable import atomic_write
from tablegen.errors import BadInput

FORMAT, VERSION = "fabroute-fabric", 1
MAX_PORT = 254                  # InfiniBand switch ports 1..254 (0 is the management port)
MAX_FILE_BYTES = 256 << 20
_ID = re.compile(r"0x[0-9a-f]{1,16}")


def norm_id(value, what: str = "id") -> str:
    """A GUID, datapath id or MAC as ``0x`` + 16 hex digits; ``BadInput`` otherwise.  Accepts
    an int, ``0x``-hex text, or a MAC ``aa:bb:cc:dd:ee:ff``."""
    if isinstance(value, bool):
        raise BadInput(f"{what} {value!r}; expected a GUID, datapath id or MAC")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}", value):
        n = int(value.replace(":", ""), 16)
    elif isinstance(value, str) and _ID.fullmatch(value.strip().lower()):
        n = int(value.strip(), 16)
    else:
        raise BadInput(f"{what} {value!r:.40}; expected a GUID, datapath id or MAC "
                       "(0x + up to 16 hex digits, or aa:bb:cc:dd:ee:ff)")
    if not 0 <= n < 1 << 64:
        raise BadInput(f"{what} {value!r:.40} is wider than 64 bits; expected a GUID")
    return f"0x{n:016x}"


@dataclass
class Fabric:
    """Switches (id -> name, port count), hosts (id -> name, switch, port) and switch-to-switch
    cables ``((id, port), (id, port))``, each stored with its lower end first and the list
    sorted, so equal cablings compare equal."""

    source: str
    switches: dict[str, dict]
    hosts: dict[str, dict] = field(default_factory=dict)
    cables: list[tuple[tuple[str, int], tuple[str, int]]] = field(default_factory=list)

    def __post_init__(self):
        self.cables = sorted(tuple(sorted((tuple(a), tuple(b)))) for a, b in self.cables)
        self.check()

    # -- checks ------------------------------------------------------------------------------
    def check(self) -> None:
        """Refuse a cabling that contradicts itself (one line, :class:`BadInput`)."""
        used: dict[tuple[str, int], str] = {}

        def take(end, what):
            sw, port = end
            if sw not in self.switches:
                raise BadInput(f"fabric: {what} names switch {sw}, which the fabric does not "
                               "list; expected one of its switches")
            top = int(self.switches[sw]["ports"])
            if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= top:
                raise BadInput(f"fabric: {what} uses port {port!r} of switch {sw}; expected "
                               f"1 <= port <= {top}")
            if end in used:
                raise BadInput(f"fabric: port {port} of switch {sw} is used by {used[end]} "
                               f"and by {what}; expected one cable per port")
            used[end] = what

        for sw, s in self.switches.items():
            ports = s.get("ports")
            if not isinstance(ports, int) or isinstance(ports, bool) or not 1 <= ports <= MAX_PORT:
                raise BadInput(f"fabric: switch {sw} has {ports!r} ports; expected 1..{MAX_PORT}")
        dup = set(self.hosts) & set(self.switches)
        if dup:
            raise BadInput(f"fabric: id {min(dup)} is both a switch and a host; expected "
                           "distinct GUIDs")
        for a, b in self.cables:
            if a == b:
                raise BadInput(f"fabric: a cable from port {a[1]} of switch {a[0]} to itself; "
                               "expected two different ports")
            what = f"the cable {a[0]}:{a[1]} - {b[0]}:{b[1]}"
            take(a, what)
            take(b, what)
        for h, d in self.hosts.items():
            take((d["switch"], d["port"]), f"host {h}")

    # -- views the matcher uses --------------------------------------------------------------
    @property
    def switch_ids(self) -> list[str]:
        """Switch ids in a fixed order (sorted): index ``i`` of the arrays below."""
        return sorted(self.switches)

    def links(self) -> np.ndarray:
        """``int64[C, 4]``: ``(a, port_a, b, port_b)`` per cable, switches as indices into
        :attr:`switch_ids`."""
        index = {s: i for i, s in enumerate(self.switch_ids)}
        out = np.array([(index[a], pa, index[b], pb) for (a, pa), (b, pb) in self.cables],
                       dtype=np.int64)
        return out.reshape(-1, 4)

    def host_ports(self) -> dict[str, list[tuple[int, str]]]:
        """Per switch id, its ``(port, host id)`` pairs in port order."""
        out: dict[str, list] = {s: [] for s in self.switches}
        for h, d in self.hosts.items():
            out[d["switch"]].append((d["port"], h))
        for v in out.values():
            v.sort()
        return out

    # -- the file ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "source": self.source,
                "switches": [dict(id=s, **self.switches[s]) for s in self.switch_ids],
                "hosts": [dict(id=h, **self.hosts[h]) for h in sorted(self.hosts)],
                "cables": [{"a": list(a), "b": list(b)} for a, b in self.cables]}

    @classmethod
    def from_dict(cls, doc, where: str = "fabric") -> Fabric:
        """The fabric of a parsed file; :class:`BadInput` naming the first thing wrong."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise BadInput(f"{where}: not a fabric file; expected JSON with \"format\": "
                           f"\"{FORMAT}\"")
        if doc.get("version") != VERSION:
            raise BadInput(f"{where}: version {doc.get('version')!r}; expected {VERSION}")
        try:
            switches: dict[str, dict] = {}
            for s in doc["switches"]:
                sid = norm_id(s["id"], f"{where}: switch id")
                if sid in switches:
                    raise BadInput(f"{where}: switch {sid} is listed twice; expected unique "
                                   "GUIDs")
                switches[sid] = {"name": str(s.get("name", "")), "ports": s["ports"]}
            hosts: dict[str, dict] = {}
            for h in doc.get("hosts", []):
                hid = norm_id(h["id"], f"{where}: host id")
                if hid in hosts:
                    raise BadInput(f"{where}: host {hid} is listed twice; expected unique "
                                   "GUIDs")
                hosts[hid] = {"name": str(h.get("name", "")),
                              "switch": norm_id(h["switch"], f"{where}: host {hid}'s switch"),
                              "port": h["port"]}
            cables = [((norm_id(c["a"][0], f"{where}: cable end"), c["a"][1]),
                       (norm_id(c["b"][0], f"{where}: cable end"), c["b"][1]))
                      for c in doc.get("cables", [])]
        except (KeyError, TypeError, IndexError) as e:
            raise BadInput(f"{where}: a switch, host or cable lacks {e}; expected the fields "
                           "of docs/real-fabrics.md") from None
        return cls(str(doc.get("source", "")), switches, hosts, cables)

    @classmethod
    def load(cls, path) -> Fabric:
        path = Path(path)
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise BadInput(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; expected a "
                               "fabric file")
            doc = json.loads(path.read_bytes())
        except OSError as e:
            raise BadInput(f"{path}: cannot be read ({e.strerror}); expected a fabric "
                           "file") from None
        except (ValueError, RecursionError):
            raise BadInput(f"{path}: not JSON; expected a fabric file") from None
        return cls.from_dict(doc, str(path))

    def save(self, path) -> None:
        """Write the file crash-safe (:func:`tablegen.durable.atomic_write`)."""
        atomic_write(path, json.dumps(self.to_dict(), indent=1) + "\n")
