"""Which datapath is which planned switch, and which of its ports is which planned port: the
map that lets the controller serve real switches (any datapath ids, any port numbers) with
the programs of the plan (issue 26, ``docs/openflow.md``, *Real switches*).

Pure code: :func:`assign` takes a fabric as cabled (learned by LLDP, or a fabric file) and
the plan; :func:`translate` renumbers a switch's program onto its own ports.

The map comes from the cabling (:func:`tablegen.fabrics.match.match`).  Slim Fly is
vertex-transitive, so the cabling alone leaves many maps equally right; but the hosts already
have addresses (the program delivers to ``02:GG:GG:LL:LL:EE`` MACs), and a host can only be
reached as the planned host whose MAC it carries.  So when every switch's hosts carry the
plan's MACs of one planned switch (``fabroute emulate``'s hosts, or hosts configured from the
plan), that map is taken — provided it explains the cabling as well as the cabling's own
map (no more cables that do not fit, no more planned cables absent); otherwise the
cabling's map, with hosts in port order, and the hosts must take the MACs it gives them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from tablegen.exports.openflow import Program, host_macs
from tablegen.fabrics.fabric import Fabric
from tablegen.fabrics.match import Match, fit_cables, match
from tablegen.topology import Topology

__all__ = ["Assignment", "assign", "translate"]


@dataclass
class Assignment:
    """``switch``: datapath id -> planned switch; ``ports``: planned switch -> {planned port:
    the datapath's port} for every port with a fitting cable or a host; ``absent``: planned
    cables the fabric lacks (or carries elsewhere), ``(s, port_s, t, port_t)`` in planned
    numbers — failed links for the tables; ``misfits``: fabric cables that fit no planned
    cable, ``((dpid, port), (dpid, port))``, left unused; ``by``: ``hosts`` (the hosts'
    MACs chose among the maps) or ``cabling``; ``match``: the cabling's own
    :class:`~tablegen.fabrics.match.Match` (the technician's actions)."""

    switch: dict[int, int]
    ports: dict[int, dict[int, int]]
    absent: list[tuple[int, int, int, int]]
    misfits: list
    by: str
    match: Match
    hosts: dict[str, int] = field(default_factory=dict)

    def dpids(self, n: int) -> list:
        """Datapath id of every planned switch (``None`` where the fabric has none)."""
        out: list = [None] * n
        for d, u in self.switch.items():
            out[u] = d
        return out

    def failed_pairs(self) -> list[tuple[int, int]]:
        return sorted({(min(s, t), max(s, t)) for s, _, t, _ in self.absent})

    def known(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        """Whether both ends of the cable ``a``–``b`` are ports the map already uses (a cable
        heard again after a reconnect)."""
        return all(end[0] in self.switch and end[1] in
                   self.ports.get(self.switch[end[0]], {}).values() for end in (a, b))

    def fit(self, a: tuple[int, int], b: tuple[int, int], topo: Topology):
        """A cable ``a``–``b`` (``(dpid, port)`` ends) that appeared later: the absent planned
        cable ``(s, port_s, t, port_t)`` it is (its ports recorded in :attr:`ports`, the
        cable no longer absent), or ``None`` when it fits none (a switch not in the map, a
        port already mapped, no planned cable between the two switches absent)."""
        if a[0] not in self.switch or b[0] not in self.switch:
            return None
        s, t = self.switch[a[0]], self.switch[b[0]]
        used = {u: set(self.ports.get(u, {}).values()) for u in (s, t)}
        if a[1] in used[s] or b[1] in used[t]:
            return None
        for i, (x, px, y, py) in enumerate(self.absent):
            if (x, y) in ((s, t), (t, s)):
                if (x, y) != (s, t):
                    x, px, y, py = y, py, x, px
                self.ports.setdefault(s, {})[px] = a[1]
                self.ports.setdefault(t, {})[py] = b[1]
                del self.absent[i]
                return (x, px, y, py)
        return None

    def to_dict(self) -> dict:
        return {"by": self.by, "switches": {f"0x{d:016x}": u for d, u in
                                            sorted(self.switch.items())},
                "absent": [list(c) for c in self.absent],
                "misfits": [[list(a), list(b)] for a, b in self.misfits],
                "actions": {k: self.match.to_dict()[k] for k in ("missing", "moved", "extra")}}


def _under(fabric: Fabric, topo: Topology, smap: dict[str, int], host_port):
    """Ports, absent planned cables and misfits under the switch map ``smap`` (fabric id ->
    planned switch); ``host_port(fabric id, [(port, host id)])`` gives each host port's
    planned port."""
    fits, misfit, absent = fit_cables(
        [(a, pa, b, pb) for (a, pa), (b, pb) in fabric.cables], smap, topo)
    ports: dict[int, dict[int, int]] = defaultdict(dict)
    for a, pa, ps, b, pb, pt in fits:
        ports[smap[a]][ps], ports[smap[b]][pt] = pa, pb
    misfits = [((int(a, 16), pa), (int(b, 16), pb)) for a, pa, b, pb in misfit]
    for sid, hp in fabric.host_ports().items():
        for fp, pp in host_port(sid, hp).items():
            ports[smap[sid]][pp] = fp
    return dict(ports), absent, misfits


def _by_macs(fabric: Fabric, topo: Topology) -> tuple[dict[str, int], dict[str, int]] | None:
    """The switch map the hosts' MACs give (each fabric switch: the planned switch all its
    hosts are hosts of) and each host's planned host; ``None`` unless it is a bijection."""
    plan = {int(m): h for h, m in enumerate(host_macs(topo).tolist())}
    ht = topo.host_table()
    smap, hmap = {}, {}
    for sid, hp in fabric.host_ports().items():
        owners = set()
        for _, h in hp:
            planned = plan.get(int(h, 16))
            if planned is None:
                return None
            owners.add(int(ht[planned, 1]))
            hmap[h] = planned
        if len(owners) != 1:
            return None
        smap[sid] = owners.pop()
    if len(smap) != topo.n_switches or len(set(smap.values())) != len(smap):
        return None
    return smap, hmap


def assign(fabric: Fabric, topo: Topology) -> Assignment:
    """The map of ``fabric`` onto ``topo`` (module doc); :class:`~tablegen.errors.BadInput`
    (from the matcher) when the fabric is of another size or too far from the plan."""
    m = match(fabric, topo)
    ht = topo.host_table()
    score_m = len(m.missing) + 2 * len(m.moved) + len(m.extra)
    macs = _by_macs(fabric, topo)
    if macs is not None:
        smap, hmap = macs
        ports, absent, misfits = _under(
            fabric, topo, smap, lambda sid, hp: {fp: int(ht[hmap[h], 2]) for fp, h in hp})
        if len(absent) + len(misfits) <= score_m:
            return Assignment({int(f, 16): u for f, u in smap.items()}, ports, absent,
                              misfits, "hosts", m, hmap)
    ports, absent, misfits = _under(fabric, topo, m.switch, lambda sid, hp: {
        fp: pp for fp, _ in hp for pp in [m.port[sid].get(fp)] if pp is not None})
    return Assignment({int(f, 16): u for f, u in m.switch.items()}, ports, absent, misfits,
                      "cabling", m, dict(m.host))


def translate(prog: Program, ports: dict[int, int]) -> Program:
    """``prog`` on the switch's own port numbers (``ports``: planned port -> the switch's):
    ``in_port`` matches, outputs and FAST_FAILOVER watch ports.  A flow on a planned port
    the switch lacks (a host that is not there) is left out; a group bucket on one is a
    ``ValueError`` (a network port of the tables must exist).  The metadata that carries
    the chosen out port between tables keeps the planned number: it never leaves the
    switch, and the read-back compares it like any value."""
    def port(p):
        if p not in ports:
            raise KeyError(p)
        return ports[p]

    def acts(actions):
        return tuple(("output", port(a[1])) if a[0] == "output" and isinstance(a[1], int)
                     else a for a in actions)

    flows = []
    for f in prog.flows:
        try:
            m = tuple((k, port(v)) if k == "in_port" else (k, v) for k, v in f.match)
            flows.append(replace(f, match=m, actions=acts(f.actions)))
        except KeyError:
            continue
    groups = []
    for g in prog.groups:
        try:
            if g.kind == "ff":
                b = tuple((port(w), acts(a)) for w, a in g.buckets)
            else:
                b = tuple((w, acts(a)) for w, a in g.buckets)
        except KeyError as e:
            raise ValueError(f"switch {prog.switch}: group {g.group_id} uses planned port "
                             f"{e.args[0]}, which the switch does not have") from None
        groups.append(replace(g, buckets=b))
    return replace(prog, flows=tuple(flows), groups=tuple(groups))
