"""A table set bound to a fabric as cabled (issue 26, docs/real-fabrics.md, "Routing the
fabric as cabled"): the map of the fabric onto its plan (:func:`~tablegen.fabrics.match.match`)
turned into what the exports need — per planned switch its hardware id and the fabric port
of each planned port, per planned host its hardware id — and the planned cables the fabric
lacks (missing, and the planned cable of every moved one) as failed links, so the tables are
the degraded, proven tables of ``tables --fail`` on the plan's model.

:func:`bind` makes a :class:`Binding` from a fabric and a plan; :meth:`Binding.to_dict` /
:meth:`Binding.from_dict` are the map file (``fabric-map.json``) a table directory keeps
beside the fabric file; :func:`check_binding` proves a binding against a fabric (what
``fabroute verify`` runs).  O(S·P + H + C).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import Fabric, norm_id
from tablegen.topologies.failures import failed_pairs, fail_param, without_links
from tablegen.topology import Topology

MAP_FORMAT, MAP_VERSION = "fabroute-fabric-map", 1


@dataclass
class Binding:
    """``switch[s]``: the fabric id of planned switch ``s``; ``host[h]``: of planned host
    ``h``; ``port[s]``: planned port -> fabric port of switch ``s`` (every port the plan
    cables or puts a host on that the fabric has a place for); ``failed``: the planned switch
    pairs whose cable the fabric lacks; ``summary``: the map's counts, for the manifest."""

    switch: list[str]
    host: list[str]
    port: list[dict[int, int]]
    failed: list[tuple[int, int]]
    summary: dict
    fabric: Fabric | None = None    # the fabric it binds (not part of the map file)

    def port_array(self, width: int) -> np.ndarray:
        """``int64[S, width]``: fabric port of every planned port ``< width`` (port 0, the
        switch itself, stays 0; -1 where the fabric has none)."""
        out = np.full((len(self.switch), width), -1, dtype=np.int64)
        out[:, 0] = 0
        for s, pm in enumerate(self.port):
            for p, q in pm.items():
                if p < width:
                    out[s, p] = q
        return out

    def to_dict(self) -> dict:
        return {"format": MAP_FORMAT, "version": MAP_VERSION, "summary": self.summary,
                "failed": [list(p) for p in self.failed],
                "switches": [{"planned": s, "id": g,
                              "ports": {str(p): q for p, q in sorted(self.port[s].items())}}
                             for s, g in enumerate(self.switch)],
                "hosts": [{"planned": h, "id": g} for h, g in enumerate(self.host)]}

    @classmethod
    def from_dict(cls, doc, where: str = "fabric-map.json") -> Binding:
        """The binding of a parsed map file; :class:`BadInput` naming what is wrong."""
        if not isinstance(doc, dict) or doc.get("format") != MAP_FORMAT \
                or doc.get("version") != MAP_VERSION:
            raise BadInput(f"{where}: not a {MAP_FORMAT} version {MAP_VERSION} document; "
                           "expected the map 'fabroute tables --fabric' writes")
        try:
            sw = sorted(doc["switches"], key=lambda x: x["planned"])
            hs = sorted(doc["hosts"], key=lambda x: x["planned"])
            if [x["planned"] for x in sw] != list(range(len(sw))) or \
                    [x["planned"] for x in hs] != list(range(len(hs))):
                raise ValueError("planned ids are not 0..n-1")
            return cls([norm_id(x["id"], f"{where}: switch id") for x in sw],
                       [norm_id(x["id"], f"{where}: host id") for x in hs],
                       [{int(p): int(q) for p, q in x["ports"].items()} for x in sw],
                       [(int(a), int(b)) for a, b in doc["failed"]], dict(doc["summary"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BadInput(f"{where}: {type(e).__name__}: {e}; expected the map 'fabroute "
                           "tables --fabric' writes") from None


def bind(fabric: Fabric, topo: Topology) -> tuple[Binding, Topology]:
    """Match ``fabric`` onto the intact plan ``topo`` and return the binding and the
    topology the tables are computed on (``topo`` without the cables the fabric lacks).
    :class:`BadInput` (one line) when the fabric does not map (another size or kind, too far
    from the plan), when a planned host is missing or a host is not planned (the tables
    address every planned host and no other), or when the absent cables cut the fabric."""
    from tablegen.fabrics.match import match

    if "fail" in topo.params:
        raise BadInput(f"{topo.name()} already has failed links; expected the intact plan "
                       "(the fabric's absent cables become its failed links)")
    r = match(fabric, topo)
    if r.hosts_missing or r.hosts_extra:
        what = (f"planned host {r.hosts_missing[0]['host']} is not cabled"
                if r.hosts_missing else
                f"host {r.hosts_extra[0]['host']} at {r.hosts_extra[0]['at'][0]} port "
                f"{r.hosts_extra[0]['at'][1]} is not in the plan")
        raise BadInput(f"the fabric's hosts differ from {topo.name()}'s ({what}; "
                       f"{len(r.hosts_missing)} missing, {len(r.hosts_extra)} unplanned); "
                       "expected every planned host cabled (`fabroute reconcile` lists them)")
    n = topo.n_switches
    switch = [""] * n
    for g, s in r.switch.items():
        switch[s] = g
    host = [""] * topo.n_hosts
    for g, h in r.host.items():
        host[h] = g
    port: list[dict[int, int]] = [{} for _ in range(n)]
    for g, pm in r.port.items():
        for q, p in pm.items():
            port[r.switch[g]][p] = q
    b = Binding(switch, host, port, [], {}, fabric)
    failed = sorted({(min(s, t), max(s, t)) for s, ps, t, pt in absent_cables(b, fabric, topo)})
    b.failed = failed
    b.summary = {"switches": n, "hosts": topo.n_hosts, "cables": len(fabric.cables),
                 "missing": len(r.missing), "moved": len(r.moved), "extra": len(r.extra),
                 "failed": fail_param(failed), "matches": r.matches}
    return b, (without_links(topo, failed) if failed else topo)


def absent_cables(b: Binding, fabric: Fabric, topo: Topology) -> list[tuple[int, ...]]:
    """The cables of ``topo`` (``(s, ps, t, pt)``) that ``fabric`` lacks at the ends ``b``
    maps them to."""
    have = set(fabric.cables)
    out = []
    for s, ps, t, pt in topo.links.tolist():
        qs, qt = b.port[s].get(ps), b.port[t].get(pt)
        ends = tuple(sorted(((b.switch[s], qs), (b.switch[t], qt)))) if qs and qt else None
        if ends not in have:
            out.append((s, ps, t, pt))
    return out


def check_binding(b: Binding, fabric: Fabric, topo: Topology) -> list[str]:
    """Why ``b`` does not bind the tables of ``topo`` (the plan with ``b``'s failed links) to
    ``fabric`` (empty when it does): every fabric switch and host mapped once, each switch's
    planned ports onto distinct ports it has, every cable the tables use a cable of the
    fabric between the switches the map names, every host where the map puts it, and the
    failed links exactly those ``topo`` routes around."""
    errors: list[str] = []
    if (len(b.switch), len(b.host)) != (topo.n_switches, topo.n_hosts):
        return [f"the map has {len(b.switch)} switches and {len(b.host)} hosts; "
                f"{topo.name()} has {topo.n_switches} and {topo.n_hosts}"]
    if sorted(b.switch) != sorted(fabric.switches) or sorted(b.host) != sorted(fabric.hosts):
        return ["the map's switch and host ids are not the fabric's, each once"]
    if sorted(b.failed) != failed_pairs(topo.params):
        errors.append(f"the map fails {fail_param(b.failed) or 'no link'}; the tables route "
                      f"around {fail_param(failed_pairs(topo.params)) or 'no failed link'}")
    for s, pm in enumerate(b.port):
        top = int(fabric.switches[b.switch[s]]["ports"])
        qs = list(pm.values())
        if len(set(qs)) != len(qs) or not all(1 <= q <= top for q in qs):
            errors.append(f"the map puts planned ports of switch {s} ({b.switch[s]}) on "
                          f"ports {sorted(qs)}; expected distinct ports 1..{top}")
    bad = absent_cables(b, fabric, topo)
    if bad:
        s, ps, t, pt = bad[0]
        errors.append(f"{len(bad)} cables the tables use are not in the fabric, e.g. planned "
                      f"{s}:{ps} - {t}:{pt} = {b.switch[s]} port {b.port[s].get(ps)} - "
                      f"{b.switch[t]} port {b.port[t].get(pt)}")
    for h, sw, p in topo.host_table().tolist():
        d = fabric.hosts[b.host[h]]
        if (d["switch"], d["port"]) != (b.switch[sw], b.port[sw].get(p)):
            errors.append(f"host {h} ({b.host[h]}) is cabled to {d['switch']} port "
                          f"{d['port']}; the map says {b.switch[sw]} port {b.port[sw].get(p)}")
            break
    return errors
