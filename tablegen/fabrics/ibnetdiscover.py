"""Read the cabling that real ``ibnetdiscover`` (infiniband-diags) prints into a
:class:`~tablegen.fabrics.fabric.Fabric` (source ``"ibnetdiscover"``).

The format (``ibnetdiscover`` without ``-l``/``-p``; ``-g`` grouping is accepted)::

    vendid=0x2c9                                   # header lines of the next node
    devid=0xcf08
    sysimgguid=0x2000000000000002
    switchguid=0x2000000000000002(2000000000000002)
    Switch  8 "S-2000000000000002"   # "sw-2" base port 0 lid 2 lmc 0
    [4]     "S-2000000000000001"[2]             # "sw-1" lid 1 4xSDR
    [5]     "H-1000000000000020"[1](1000000000000021)   # "host b" lid 4 4xSDR

    caguid=0x1000000000000020
    Ca      1 "H-1000000000000020"   # "host b"
    [1](1000000000000021)   "S-2000000000000002"[5]     # lid 4 lmc 0 "sw-2" lid 2 4xSDR

Every link is printed twice, once in each end's section; a CA port carries its port GUID
in ``(…)`` after the port number (on the switch's line after the peer port).  What this
reader makes of it: a switch per ``Switch`` section (its node GUID, its node description as
the name, the port count of the ``Switch`` line), a host per CA port linked to a switch (its
port GUID, the CA's description, the switch and the switch's port), each switch-to-switch
cable once.  Both listings of every link must agree (ends, ports, port GUIDs); a link
listed once, or no section for the node named by ``# Initiated from node …`` (a CA, printed
after every switch), means a truncated or edited output: as ibnetdiscover prints no end
mark, only a cut that leaves such a trace can be told from a smaller fabric.  Routers and
CA-to-CA links have no place in a switched fabric and are refused.  Anything else (a
garbled line, a port beyond the node's count, a GUID with two sections) is refused in one
line naming its line number (:class:`~tablegen.errors.BadInput`).  O(lines).
"""

from __future__ import annotations

import re

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import Fabric

_HEX = r"[0-9a-fA-F]{1,16}"
_HEADER = re.compile(r"(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=0x(" + _HEX
                     + r")(?:\((" + _HEX + r")\))?(?:\s+#.*)?$")
_NODE = re.compile(r"(Switch|Ca|Rt)\s+(\d+)\s+\"([SHR])-(" + _HEX + r")\""
                   r"(?:\s+#\s*\"(.*)\".*)?$")
_EXT = r"(?:\[ext \d+\])?"
_PORT = re.compile(r"\[(\d+)\]" + _EXT + r"(?:\((" + _HEX + r")\))?\s*"
                   r"\"([SHR])-(" + _HEX + r")\"\[(\d+)\]" + _EXT
                   + r"(?:\s*\((" + _HEX + r")\))?\s*(?:#.*)?$")
# -g (grouping) adds chassis lines around the same sections
_GROUPING = re.compile(r"Chassis \d+.*|Non-Chassis Nodes|Hostname: .*")
_INITIATED = re.compile(r"#\s*Initiated from node (" + _HEX + r")\b")
_KIND = {"Switch": "S", "Ca": "H", "Rt": "R"}
_NAME = {"S": "switch", "H": "CA", "R": "router"}


def _guid(text: str) -> str:
    return f"0x{int(text, 16):016x}"


def parse_ibnetdiscover(text: str, where: str = "ibnetdiscover") -> Fabric:
    """The :class:`Fabric` that ``ibnetdiscover``'s ``text`` describes; :class:`BadInput`
    naming ``where``, the line number and what was expected, on anything else."""
    nodes: dict[str, dict] = {}            # node GUID -> kind, ports, name, line
    ends: dict[tuple[str, int], dict] = {}  # (node GUID, port) -> its listing
    header: str | None = None              # the switchguid=/caguid= GUID before a node line
    node: dict | None = None
    initiator: tuple[str, int] | None = None   # the node ibnetdiscover ran from, and where

    def bad(no: int, what: str):
        return BadInput(f"{where}:{no}: {what}")

    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if m := _INITIATED.match(line):
            initiator = (_guid(m.group(1)), no)
        if not line or line.startswith("#") or _GROUPING.fullmatch(line):
            continue
        if m := _HEADER.match(line):
            if m.group(1) in ("switchguid", "caguid", "rtguid"):
                header = _guid(m.group(2))
            node = None
            continue
        if m := _NODE.match(line):
            kind, count, tag, guid = m.group(1), int(m.group(2)), m.group(3), _guid(m.group(4))
            if tag != _KIND[kind]:
                raise bad(no, f"{kind} section named \"{tag}-…\"; expected "
                              f"\"{_KIND[kind]}-<guid>\"")
            if header is not None and header != guid:
                raise bad(no, f"{kind} {guid} follows the GUID line of {header}; expected "
                              "the same GUID")
            if guid in nodes:
                raise bad(no, f"{_NAME[tag]} {guid} has a second section (the first is at "
                              f"line {nodes[guid]['line']}); expected unique GUIDs")
            if not 1 <= count <= 254:
                raise bad(no, f"{kind} {guid} has {count} ports; expected 1..254")
            node = nodes[guid] = {"kind": tag, "ports": count, "line": no,
                                  "name": m.group(5) or ""}
            node["guid"] = guid
            header = None
            continue
        if m := _PORT.match(line):
            if node is None:
                raise bad(no, f"link line {line[:60]!r} outside a Switch or Ca section; "
                              "expected it after its node's section line")
            port, own_pg = int(m.group(1)), m.group(2)
            peer, peer_port, peer_pg = _guid(m.group(4)), int(m.group(5)), m.group(6)
            if not 1 <= port <= node["ports"]:
                raise bad(no, f"port {port} of {_NAME[node['kind']]} {node['guid']}, which "
                              f"has {node['ports']} ports; expected 1..{node['ports']}")
            if (node["kind"] == "S") != (own_pg is None):
                raise bad(no, f"port {port} of {_NAME[node['kind']]} {node['guid']} "
                              + ("lacks its (port GUID); expected [port](guid) on a CA"
                                 if own_pg is None else
                              "carries a (port GUID); expected none on a switch port"))
            if (m.group(3) == "S") != (peer_pg is None):
                raise bad(no, f"the peer {m.group(3)}-{m.group(4)} "
                              + ("lacks its (port GUID); expected \"H-…\"[port](guid)"
                                 if peer_pg is None else
                              "is a switch with a (port GUID); expected none"))
            if (node["guid"], port) in ends:
                raise bad(no, f"port {port} of {node['guid']} is listed twice (first at line "
                              f"{ends[node['guid'], port]['line']}); expected one link per "
                              "port")
            ends[node["guid"], port] = {
                "line": no, "peer": peer, "peer_kind": m.group(3), "peer_port": peer_port,
                "pg": _guid(own_pg) if own_pg else None,
                "peer_pg": _guid(peer_pg) if peer_pg else None}
            continue
        raise bad(no, f"{line[:60]!r}; expected a Switch/Ca section line, a [port] link "
                      "line, a vendid=/devid=/sysimgguid=/switchguid=/caguid= line or a "
                      "# comment")
    if not nodes:
        raise BadInput(f"{where}: no Switch or Ca section; expected the output of "
                       "ibnetdiscover")
    if initiator is not None and initiator[0] not in nodes:
        raise BadInput(f"{where}:{initiator[1]}: discovery started from node {initiator[0]}, "
                       "which has no section; expected one (is the output truncated?)")
    return _fabric(nodes, ends, where)


def _fabric(nodes: dict, ends: dict, where: str) -> Fabric:
    switches, hosts, cables = {}, {}, []
    port_guids: dict[str, int] = {}
    for g, n in nodes.items():
        if n["kind"] == "R":
            raise BadInput(f"{where}:{n['line']}: router {g}; expected switches and CAs only")
        if n["kind"] == "S":
            switches[g] = {"name": n["name"], "ports": n["ports"]}
    for (g, port), e in ends.items():
        no, peer, pp = e["line"], e["peer"], e["peer_port"]
        other = nodes.get(peer)
        if other is None:
            raise BadInput(f"{where}:{no}: port {port} of {g} leads to {peer}, which has no "
                           "section; expected a section for every linked node (is the output "
                           "truncated?)")
        if other["kind"] != e["peer_kind"]:
            raise BadInput(f"{where}:{no}: port {port} of {g} leads to "
                           f"{e['peer_kind']}-{peer[2:]}, but line {other['line']} makes it a "
                           f"{_NAME[other['kind']]}; expected one kind per GUID")
        back = ends.get((peer, pp))
        if back is None:
            raise BadInput(f"{where}:{no}: the link {g}[{port}] - {peer}[{pp}] is listed only "
                           f"here; expected {peer}'s section to list it too (is the output "
                           "truncated?)")
        if (back["peer"], back["peer_port"]) != (g, port):
            raise BadInput(f"{where}:{no}: {g}[{port}] leads to {peer}[{pp}], but line "
                           f"{back['line']} has {peer}[{pp}] lead to "
                           f"{back['peer']}[{back['peer_port']}]; expected both listings of "
                           "a link to agree")
        if e["peer_pg"] is not None and e["peer_pg"] != back["pg"]:
            raise BadInput(f"{where}:{no}: the port GUID of {peer}[{pp}] is {e['peer_pg']} "
                           f"here and {back['pg']} at line {back['line']}; expected both "
                           "listings of a link to agree")
        kinds = nodes[g]["kind"] + other["kind"]
        if kinds == "HH":
            raise BadInput(f"{where}:{no}: CA {g} is cabled to CA {peer} directly; expected "
                           "every CA port on a switch")
        if kinds == "SS":
            if (g, port) == (peer, pp):
                raise BadInput(f"{where}:{no}: port {port} of switch {g} is cabled to itself; "
                               "expected two different ports")
            if (g, port) < (peer, pp):
                cables.append(((g, port), (peer, pp)))
        elif kinds == "HS":
            pg = e["pg"]
            if pg in switches or pg in port_guids:
                raise BadInput(f"{where}:{no}: port GUID {pg} is used twice (also at line "
                               f"{port_guids.get(pg, nodes.get(pg, {}).get('line'))}); "
                               "expected unique GUIDs")
            port_guids[pg] = no
            hosts[pg] = {"name": nodes[g]["name"], "switch": peer, "port": pp}
    return Fabric("ibnetdiscover", switches, hosts, cables)
