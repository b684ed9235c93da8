"""A planned topology as a real fabric would cable it: hardware ids instead of switch
numbers, each switch's ports numbered its own way, spare ports, and (on purpose) some
cables missing and some moved to another switch — what the tests, the benchmarks and the
ibsim fabrics of issue 26 run ``fabroute reconcile`` against, with the truth beside it.

Deterministic for a given seed; O(S·P + C).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import MAX_PORT, Fabric
from tablegen.topology import Topology


@dataclass
class Cabled:
    """A :class:`Fabric` and what it was made from: ``switch`` maps each fabric switch id to
    its planned switch, ``port[id][fabric port]`` to the planned port number, ``host`` each
    host id to its planned host; ``removed`` lists planned cables left out and ``moved``
    planned cables whose end ``(planned switch, planned port)`` was plugged elsewhere
    (``to``: fabric switch id, fabric port), as dicts; ``swapped`` pairs of planned cables
    whose far ends were exchanged (``cables``: both, in plan numbers)."""

    fabric: Fabric
    switch: dict[str, int]
    port: dict[str, dict[int, int]]
    host: dict[str, int]
    removed: list[dict]
    moved: list[dict]
    swapped: list[dict]


def planned_cables(topo: Topology) -> list[tuple[int, int, int, int]]:
    """Every cable of ``topo`` once: ``(s, port_s, t, port_t)`` with ``s < t`` (or, between
    the same two switches, the lower port first), in plan port numbers."""
    out = []
    for s in range(topo.n_switches):
        for j in range(topo.radix):
            t = int(topo.adj[s, j])
            if t < 0:
                continue
            ps, pt = int(topo.hosts[s]) + 1 + j, int(topo.hosts[t]) + 1 + int(topo.peer[s, j])
            if (s, ps) < (t, pt):
                out.append((s, ps, t, pt))
    return out


def cabled(topo: Topology, seed: int = 1, *, permute_ports: bool = True, spare: int = 2,
           remove: int = 0, move: int = 0, swap: int = 0, source: str = "plan") -> Cabled:
    """``topo`` cabled with random 64-bit switch and host ids, each switch's ports permuted
    (``permute_ports``), ``spare`` unused ports per switch, ``remove`` cables left out and
    ``move`` cables with one end moved to a spare port of another switch (never one already
    next to the cable's other end), and ``swap`` pairs of cables ``s–t``, ``u–w`` cabled
    as ``s–w``, ``u–t`` on the same ports (four distinct switches, neither new pair planned
    next to each other): every switch keeps its planned degree.  Raises :class:`BadInput`
    when the plan has too few cables or spare ports for that."""
    rng = np.random.default_rng(seed)
    n = topo.n_switches
    ids = _unique_ids(rng, n + topo.n_hosts)
    sw_ids, host_ids = ids[:n], ids[n:]
    width = [int(topo.hosts[s]) + topo.radix + spare for s in range(n)]
    if max(width) > MAX_PORT:
        raise BadInput(f"cabled: {max(width)} ports per switch, above {MAX_PORT}; expected "
                       "fewer spare ports")
    # fabric port of plan port p on switch s: perm[s][p - 1]
    perm = [(rng.permutation(w) + 1 if permute_ports else np.arange(1, w + 1)) for w in width]
    fport = lambda s, p: int(perm[s][p - 1])    # noqa: E731
    cables = planned_cables(topo)
    if remove + move > len(cables):
        raise BadInput(f"cabled: {remove} removed + {move} moved cables of {len(cables)}")
    pick = rng.permutation(len(cables))
    gone = [cables[i] for i in pick[:remove]]
    shift = [cables[i] for i in pick[remove:remove + move]]
    pairs = _swap_pairs(topo, [cables[i] for i in pick[remove + move:]], swap)
    crossed = {c for pair in pairs for c in pair}
    keep = [cables[i] for i in pick[remove + move:] if cables[i] not in crossed]
    free = {s: [p for p in range(int(topo.hosts[s]) + topo.radix + 1, width[s] + 1)]
            for s in range(n)}
    fab_cables = [((sw_ids[s], fport(s, ps)), (sw_ids[t], fport(t, pt)))
                  for s, ps, t, pt in keep]
    moved = []
    for s, ps, t, pt in shift:
        # the end at t goes to a spare port of a switch that is neither s nor t nor next to s
        near = set(int(x) for x in topo.adj[s] if x >= 0) | {s, t}
        options = [w for w in range(n) if w not in near and free[w]]
        if not options:
            raise BadInput("cabled: no spare port left to move a cable to; expected more "
                           "spare ports")
        w = int(rng.choice(options))
        pw = free[w].pop(0)
        fab_cables.append(((sw_ids[s], fport(s, ps)), (sw_ids[w], fport(w, pw))))
        moved.append({"cable": [s, ps, t, pt], "end": [t, pt], "to": [sw_ids[w], fport(w, pw)]})
    for (s, ps, t, pt), (u, pu, w, pw) in pairs:
        fab_cables += [((sw_ids[s], fport(s, ps)), (sw_ids[w], fport(w, pw))),
                       ((sw_ids[u], fport(u, pu)), (sw_ids[t], fport(t, pt)))]
    switches = {sw_ids[s]: {"name": f"switch-{s}", "ports": width[s]} for s in range(n)}
    off = topo.host_offset
    hosts, host_of = {}, {}
    for s in range(n):
        for e in range(int(topo.hosts[s])):
            h = host_ids[off[s] + e]
            hosts[h] = {"name": f"host-{off[s] + e}", "switch": sw_ids[s], "port": fport(s, e + 1)}
            host_of[h] = int(off[s] + e)
    fabric = Fabric(source, switches, hosts, fab_cables)
    return Cabled(fabric, {sw_ids[s]: s for s in range(n)},
                  {sw_ids[s]: {int(perm[s][p]): p + 1 for p in range(width[s])}
                   for s in range(n)},
                  host_of, [{"cable": list(c)} for c in gone], moved,
                  [{"cables": [list(a), list(b)]} for a, b in pairs])


def _swap_pairs(topo: Topology, cables: list, swap: int) -> list:
    """``swap`` disjoint pairs of ``cables``, first fitting first: two cables on four
    distinct switches whose crossed pairs are not planned neighbours (so each crossed cable
    is a wrong one, not a second planned one)."""
    adj = [set(int(x) for x in row if x >= 0) for row in topo.adj]
    pairs: list = []
    used: set[int] = set()
    for i, (s, _, t, _) in enumerate(cables):
        if len(pairs) == swap:
            break
        if i in used:
            continue
        for j in range(i + 1, len(cables)):
            u, _, w, _ = cables[j]
            if (j not in used and len({s, t, u, w}) == 4 and w not in adj[s]
                    and t not in adj[u]):
                pairs.append((cables[i], cables[j]))
                used |= {i, j}
                break
    if len(pairs) < swap:
        raise BadInput(f"cabled: {swap} swapped cable pairs, only {len(pairs)} fit")
    return pairs


def _unique_ids(rng, count: int) -> list[str]:
    seen: set[str] = set()
    out = []
    while len(out) < count:
        for v in rng.integers(1, 2**63, size=count - len(out), dtype=np.int64):
            g = f"0x{int(v):016x}"
            if g not in seen:
                seen.add(g)
                out.append(g)
    return out
