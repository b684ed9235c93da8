"""The map from a fabric as cabled onto its plan, found from the cabling alone, and every
difference as an action a technician can carry out (``fabroute reconcile``, issue 26,
docs/real-fabrics.md).

Names are never read: only which switch ports are cabled to which, and how many hosts sit on
each switch.  The switch map is found by :mod:`tablegen.fabrics.search`; this module turns it
into ports, hosts and actions.

Ports: a cabled port maps to the planned port whose cable it carries; host ports in port
order to the planned host ports (planned host ``e`` of switch ``s`` is the ``e``-th host port
of its fabric switch, in port order); the planned ports left over (missing cables, moved
ends, missing hosts) go to the free fabric ports of the switch, both in order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import Fabric
from tablegen.fabrics.search import Search
from tablegen.topology import Topology


def bound(n_cables: int) -> int:
    """Most mismatches (cables that do not fit plus planned cables absent) a map may have
    before the fabric counts as too far from the plan: 10, or 2 % of the cables."""
    return max(10, n_cables // 50)


@dataclass
class Match:
    """The map and the differences.  ``switch``: fabric switch id -> planned switch;
    ``port``: fabric switch id -> {fabric port: planned port}; ``host``: fabric host id ->
    planned host.  ``missing``, ``moved``, ``extra``, ``hosts_missing``, ``hosts_extra``:
    the actions (dicts in the JSON of ``fabroute reconcile``), ports in the fabric's own
    numbering, a port ``None`` where the switch has no free port left."""

    switch: dict[str, int]
    port: dict[str, dict[int, int]]
    host: dict[str, int]
    missing: list[dict]
    moved: list[dict]
    extra: list[dict]
    hosts_missing: list[dict]
    hosts_extra: list[dict]
    seed: tuple[str, int]

    @property
    def matches(self) -> bool:
        return not (self.missing or self.moved or self.extra or self.hosts_missing
                    or self.hosts_extra)

    def to_dict(self) -> dict:
        return {"matches": self.matches,
                "seed": {"switch": self.seed[0], "planned": self.seed[1]},
                "switches": dict(self.switch),
                "missing": self.missing, "moved": self.moved, "extra": self.extra,
                "hosts_missing": self.hosts_missing, "hosts_extra": self.hosts_extra,
                "ports": {s: {str(k): v for k, v in sorted(p.items())}
                          for s, p in self.port.items()},
                "hosts": dict(self.host)}


class _Graphs:
    """Both cablings as neighbour lists over switch indices, with host counts."""

    def __init__(self, fabric: Fabric, topo: Topology):
        self.ids = fabric.switch_ids
        n = len(self.ids)
        self.links = fabric.links()
        self.fnbr: list[list[int]] = [[] for _ in range(n)]
        for a, _, b, _ in self.links.tolist():
            self.fnbr[a].append(b)
            self.fnbr[b].append(a)
        hp = fabric.host_ports()
        self.fhosts = [len(hp[s]) for s in self.ids]
        self.pnbr = [[int(t) for t in row if t >= 0] for row in topo.adj]
        self.phosts = [int(h) for h in topo.hosts]
        self.plan = Counter((min(a, b), max(a, b)) for a, _, b, _ in topo.links.tolist())


def find_map(fabric: Fabric, topo: Topology) -> tuple[np.ndarray, _Graphs]:
    """The switch map (fabric index -> planned switch) of :mod:`tablegen.fabrics.search`,
    and the graphs it was found on; :class:`BadInput` when the sizes differ or no map
    found comes within :func:`bound`."""
    n, planned = len(fabric.switches), topo.n_switches
    if n != planned:
        raise BadInput(f"the fabric has {n} switches, {topo.name()} has {planned}; expected "
                       "the fabric of that SPEC")
    g = _Graphs(fabric, topo)
    total = sum(g.plan.values())
    limit = bound(total)
    if abs(len(g.links) - total) > limit:
        raise BadInput(f"the fabric has {len(g.links)} cables between switches, "
                       f"{topo.name()} plans {total}; expected at most {limit} apart")
    m = Search(g.fnbr, g.pnbr, g.fhosts, g.phosts).run(limit)
    if m is None:
        raise BadInput(f"more than {limit} of {total} planned cables do not fit any map "
                       f"found onto {topo.name()}; expected a fabric cabled after that plan")
    return m, g


def match(fabric: Fabric, topo: Topology) -> Match:
    """The map of ``fabric`` onto ``topo`` and the actions that make the cabling the plan."""
    m, g = find_map(fabric, topo)
    ids = g.ids
    inv = np.empty_like(m)
    inv[m] = np.arange(len(m))
    port: dict[int, dict[int, int]] = {f: {} for f in range(len(m))}
    fits, misfit, absent = fit_cables(g.links.tolist(), m, topo)
    for a, pa, ps, b, pb, pt in fits:
        port[a][pa], port[b][pb] = ps, pt
    moves, extras, taken = _pair_moves(misfit, absent, m, port)
    host, hosts_extra = _map_hosts(fabric, topo, m, port)
    free = _free_ports(fabric, topo, m, port)

    def at(f, pp):
        return [ids[f], free[f].get(pp)]

    missing = [{"between": [ids[inv[s]], ids[inv[t]]],
                "ports": [free[inv[s]].get(ps), free[inv[t]].get(pt)]}
               for i, (s, ps, t, pt) in enumerate(absent) if i not in taken]
    moved = [{"unplug": [ids[y], py], "plug_into": at(int(inv[t]), pt),
              "other_end": [ids[x], px]} for x, px, y, py, t, pt in moves]
    extra = [{"ends": [[ids[a], pa], [ids[b], pb]]} for a, pa, b, pb in extras]
    off = topo.host_offset
    hosts_missing = []
    for f, sid in enumerate(ids):
        p = int(m[f])
        hosts_missing += [{"host": int(off[p] + e), "at": at(f, e + 1)}
                          for e in range(min(g.fhosts[f], g.phosts[p]), g.phosts[p])]
    return Match({ids[f]: int(m[f]) for f in range(len(m))},
                 {ids[f]: dict(sorted(port[f].items())) for f in range(len(m))},
                 host, missing, moved, extra, hosts_missing, hosts_extra,
                 (ids[0], int(m[0])))


def fit_cables(cables, image, topo: Topology):
    """Each fabric cable ``(a, port_a, b, port_b)`` onto a planned cable between the images
    ``image[a]``, ``image[b]`` of its switches, lowest planned ports first: ``(fits, misfits,
    absent)`` — fits ``(a, port_a, planned port_a, b, port_b, planned port_b)``, the cables
    that fit none, and the planned cables ``(s, port_s, t, port_t)`` no cable took.  O(C)."""
    planned: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for s, ps, t, pt in topo.links.tolist():
        key, ends = ((s, t), (ps, pt)) if s <= t else ((t, s), (pt, ps))
        planned[key].append(ends)
    for v in planned.values():
        v.sort(reverse=True)         # popped from the end: lowest ports first
    fits, misfits = [], []
    for a, pa, b, pb in cables:
        s, t = int(image[a]), int(image[b])
        todo = planned.get((min(s, t), max(s, t)))
        if todo:
            ps, pt = todo.pop()
            fits.append((a, pa, pt, b, pb, ps) if s > t else (a, pa, ps, b, pb, pt))
        else:
            misfits.append((a, pa, b, pb))
    absent = sorted((s, ps, t, pt) for (s, t), v in planned.items() for ps, pt in v)
    return fits, misfits, absent


def put_right(fabric: Fabric, result: Match) -> Fabric:
    """The cabling once a technician has carried out every switch-to-switch action of
    ``result`` (matched from ``fabric``): missing cables plugged, moved ones re-plugged,
    extra ones pulled.  Host actions are left out: a host absent from the fabric has no id
    to cable.  :class:`BadInput` when an action has no free port to go to."""
    cables = set(fabric.cables)

    def plug(a, b, what):
        if a[1] is None or b[1] is None:
            raise BadInput(f"{what}: switch {(a if a[1] is None else b)[0]} has no free port "
                           "left; expected a spare port for the cable")
        cables.add(tuple(sorted(((a[0], a[1]), (b[0], b[1])))))

    def pull(a, b):
        cables.discard(tuple(sorted((tuple(a), tuple(b)))))

    for x in result.extra:
        pull(*x["ends"])
    for x in result.moved:
        pull(x["other_end"], x["unplug"])
        plug(x["other_end"], x["plug_into"], "moving the cable at "
             f"{x['other_end'][0]} port {x['other_end'][1]}")
    for x in result.missing:
        a, b = x["between"]
        plug((a, x["ports"][0]), (b, x["ports"][1]), f"plugging {a} - {b}")
    return Fabric(f"{fabric.source} put right", fabric.switches, fabric.hosts, sorted(cables))


def _pair_moves(misfit, absent, m, port):
    """Each cable that does not fit, paired with a planned cable absent at one of its ends
    (the lower fabric index's end first, then the lowest planned port): a moved cable
    ``(stay, port, wrong, port, planned target switch, planned port)``; the rest are extra.
    Records the staying end's planned port in ``port``."""
    at_switch: dict[int, list] = defaultdict(list)
    for i, (s, ps, t, pt) in enumerate(absent):
        at_switch[s].append((i, ps, t, pt))
        at_switch[t].append((i, pt, s, ps))
    taken: set[int] = set()
    moves, extras = [], []
    for a, pa, b, pb in misfit:
        pick = next(((i, x, px, y, py, ps, t, pt)
                     for x, px, y, py in ((a, pa, b, pb), (b, pb, a, pa))
                     for i, ps, t, pt in at_switch[int(m[x])] if i not in taken), None)
        if pick is None:
            extras.append((a, pa, b, pb))
            continue
        i, x, px, y, py, ps, t, pt = pick
        taken.add(i)
        port[x][px] = ps
        moves.append((x, px, y, py, t, pt))
    return moves, extras, taken


def _map_hosts(fabric, topo, m, port) -> tuple[dict[str, int], list[dict]]:
    """Hosts in port order onto the planned hosts of their switch's image: host id ->
    planned host, and the hosts beyond the plan's count on their switch."""
    off = topo.host_offset
    out, extra = {}, []
    hp = fabric.host_ports()
    for f, sid in enumerate(fabric.switch_ids):
        p = int(m[f])
        for e, (fp, h) in enumerate(hp[sid]):
            if e < int(topo.hosts[p]):
                out[h] = int(off[p] + e)
                port[f][fp] = e + 1
            else:
                extra.append({"host": h, "at": [sid, fp]})
    return out, extra


def _free_ports(fabric, topo, m, port) -> list[dict[int, int]]:
    """The planned ports no cable or host took, onto the free fabric ports of the same
    switch, both in order (recorded in ``port``); per fabric switch, planned port -> fabric
    port for every mapped port."""
    busy: dict[str, set] = defaultdict(set)
    for (a, pa), (b, pb) in fabric.cables:
        busy[a].add(pa)
        busy[b].add(pb)
    for d in fabric.hosts.values():
        busy[d["switch"]].add(d["port"])
    out = []
    for f, sid in enumerate(fabric.switch_ids):
        p = int(m[f])
        h = int(topo.hosts[p])
        plan = list(range(1, h + 1)) + [h + 1 + int(j) for j in np.flatnonzero(topo.adj[p] >= 0)]
        taken = set(port[f].values())
        want = [pp for pp in plan if pp not in taken]
        if want:
            spare = [x for x in range(1, int(fabric.switches[sid]["ports"]) + 1)
                     if x not in busy[sid]]
            port[f].update(zip(spare, want))
        out.append({pp: fp for fp, pp in port[f].items()})
    return out
