"""An ibsim ``net`` file for any :class:`~tablegen.fabrics.fabric.Fabric`, so that a fabric
as cabled (random GUIDs, the hardware's port numbers, missing and moved cables) can be
started in ibsim and discovered with real ``ibnetdiscover`` (issue 26).

The syntax is the one of ``templates/ibsim.net.j2`` (ibsim's ``sim_net.c``): a
``switchguid=`` / ``caguid=`` line before each record, ``Switch N "name"`` / ``Hca 1 "name"``,
one ``[port] "peer"[peer port]`` line per linked port on both ends, a blank line after each
record.  The quoted name is both ibsim's key for links and the node description that
``ibnetdiscover`` prints, so a fabric's names are kept where they are unique, printable and
at most 64 bytes; any other node is named as ``ibnetdiscover`` would name it
(``S-<guid>`` / ``H-<guid>``).  ibsim gives CA port ``p`` the GUID node GUID + ``p``, so a
host (an HCA port GUID ``g``) becomes a one-port CA with node GUID ``g - 1``.  LIDs: switches
1..S in id order, then the HCAs.  O(S + H + C).
"""

from __future__ import annotations

import re
from collections import Counter

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import Fabric

_FALLBACK = re.compile(r"[SHR]-[0-9a-f]{16}")
MAX_NAME = 64                      # a node description is 64 bytes


def ibsim_limits(fabric: Fabric) -> dict:
    """ibsim's ``-N -S -P -L`` (nodes, switches, ports, linear FDB cap) for ``fabric``."""
    n, h = len(fabric.switches), len(fabric.hosts)
    ports = sum(s["ports"] + 1 for s in fabric.switches.values()) + h
    return {"N": n + h, "S": n, "P": ports, "L": -(-(n + h + 1) // 64) * 64}


def net_names(fabric: Fabric) -> dict[str, str]:
    """Each switch and host id's name in the net file (its node description)."""
    kinds = [("S", s, d["name"]) for s, d in fabric.switches.items()]
    kinds += [("H", h, d["name"]) for h, d in fabric.hosts.items()]
    count = Counter(name for _, _, name in kinds)

    def fits(name: str) -> bool:
        return (count[name] == 1 and 0 < len(name.encode()) <= MAX_NAME and name.isprintable()
                and '"' not in name and not _FALLBACK.fullmatch(name))

    out = {}
    for tag, g, name in kinds:
        node = g if tag == "S" else f"0x{int(g, 16) - 1:016x}"
        out[g] = name if fits(name) else f"{tag}-{node[2:]}"
    return out


def net_text(fabric: Fabric, lids: dict[str, int] | None = None, lmc: int = 0) -> str:
    """ibsim's ``net`` file for ``fabric`` (HCAs first: ibsim attaches a client to the first
    CA it parsed unless told otherwise).  ``lids``/``lmc``: the LID of every switch and host
    id and the HCAs' LMC (older ibsim takes an HCA's from its port line), default the
    module's plan.  :class:`BadInput` when ibsim cannot hold the GUIDs: a host id 0 (its
    node GUID would be -1) or a host's node GUID equal to another id."""
    names = net_names(fabric)
    sw_ids = fabric.switch_ids
    host_ids = sorted(fabric.hosts)
    if lids is None:
        lid = {s: i + 1 for i, s in enumerate(sw_ids)}
        lid.update({h: len(sw_ids) + 1 + i for i, h in enumerate(host_ids)})
    else:
        lid = lids
    taken = set(fabric.switches) | set(fabric.hosts)
    node_of = {}
    for h in host_ids:
        n = int(h, 16) - 1
        node = f"0x{n:016x}"
        if n < 0 or node in taken:
            raise BadInput(f"fabric: host {h} needs node GUID {h}-1 in ibsim, which "
                           + ("is negative" if n < 0 else "is another node's id")
                           + "; expected host ids whose predecessor is free")
        taken.add(node)
        node_of[h] = node
    lim = ibsim_limits(fabric)
    lim["L"] = max(lim["L"], -(-(max(lid.values(), default=0) + (1 << lmc)) // 64) * 64)
    out = [f"# fabroute ibsim net file of a fabric ({fabric.source}): {len(sw_ids)} switches, "
           f"{len(host_ids)} HCAs, {len(fabric.cables)} switch-switch cables",
           f"# run as: ibsim -s -N {lim['N']} -S {lim['S']} -P {lim['P']} -L {lim['L']} "
           "<this file>"]
    for h in host_ids:
        d = fabric.hosts[h]
        sw = d["switch"]
        out += ["", f"caguid={node_of[h]}", f"Hca 1 \"{names[h]}\"",
                f"[1] \"{names[sw]}\"[{d['port']}] # lid {lid[h]} lmc {lmc} \"{names[sw]}\" "
                f"lid {lid[sw]} 4xSDR"]
    peers: dict[str, list[tuple[int, str, int]]] = {s: [] for s in sw_ids}
    for (a, pa), (b, pb) in fabric.cables:
        peers[a].append((pa, b, pb))
        peers[b].append((pb, a, pa))
    for h in host_ids:
        d = fabric.hosts[h]
        peers[d["switch"]].append((d["port"], h, 1))
    for s in sw_ids:
        out += ["", f"switchguid={s}",
                f"Switch {fabric.switches[s]['ports']} \"{names[s]}\" lid {lid[s]}"]
        out += [f"[{p}] \"{names[t]}\"[{tp}] # \"{names[t]}\" lid {lid[t]} 4xSDR"
                for p, t, tp in sorted(peers[s])]
    return "\n".join(out) + "\n\n"
