"""The map from a fabric as cabled onto its plan, found from the cabling alone, and every
difference as an action a technician can carry out (``fabroute reconcile``, issue 26,
docs/real-fabrics.md).

Names are never read: only which switch ports are cabled to which, and how many hosts sit on
each switch.  The cabled graph is the planned one with a few cables missing and a few moved,
so this is not plain graph isomorphism — but when no cable is changed it is, and that case
is tried first:

0. *exact*: when both cablings have the same cables per switch degree, a depth-first
   isomorphism search: the next fabric switch is, of the :data:`LOOK` with the most mapped
   neighbours, the one with the fewest options; an option is a free planned switch whose
   mapped neighbours are exactly the images of the fabric switch's, with the same host
   count and, to every mapped switch, the same hop distance and number of two-hop paths
   (the invariant that makes Slim Fly's diameter-2 graphs tractable).  Given up after
   :data:`STEPS` steps per switch.

Otherwise (or when that gives up) **seed and extend with tolerance**:

1. the *seed* is the fabric switch with the smallest id; it is tried on the planned switches
   in order of how well their signature (hosts, degree, the degrees of their neighbours)
   agrees with its own, then by planned id;
2. from the seed, the unmapped fabric switch with the most mapped neighbours (then the
   smallest index) is mapped to the unused planned switch adjacent to the most of those
   neighbours' images (then the closest signature, then the smallest planned id), until all
   are mapped;
3. the map is scored by the cables that do not fit it plus the planned cables it leaves
   absent.  The first few ties of a map are branched on (:data:`BRANCH`), depth first, and
   a map is abandoned once its score passes the best so far (at first :func:`bound`); the
   best map found is kept, stopping early at a score no map can beat.

Slim Fly is vertex-transitive, so many maps are equally right; this one is deterministic: the
smallest id goes to planned switch 0 whenever that fits.  Dragonfly and DSN-F are not, which
is why further seed images are tried.

Ports: a cabled port maps to the planned port whose cable it carries; host ports in port
order to the planned host ports (planned host ``e`` of switch ``s`` is the ``e``-th host port
of its fabric switch, in port order); the planned ports left over (missing cables, moved
ends, missing hosts) go to the free fabric ports of the switch, both in order.

The exact search needs the all-pairs invariant, O(S²) memory (S = 4,096: 64 MiB per
cabling), and O(LOOK·d² + S) per step.  The tolerant search costs O(d²) per step for
degree d plus the hop distances to at most :data:`ANCHORS` mapped switches; a map
O(S·d² + C), at most :data:`BUDGET` maps started.  The tolerant search is not yet reliable
beyond Slim Fly q = 5: ties the extension breaks wrongly end in :class:`BadInput`
(docs/real-fabrics.md, "Status").
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import Fabric
from tablegen.topology import Topology

BRANCH = 8          # ties (equally good candidates) branched on at the start of a map
ANCHORS = 24        # mapped switches whose hop distances break ties between candidates
BUDGET = 4000       # maps started (most end early, once past the best score) before giving up
LOOK = 64           # switches whose options the exact search compares at each step
STEPS = 200         # exact search steps per switch before the tolerant search takes over


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
    """Both cablings as adjacency lists over switch indices, with their signatures."""

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
        self.fsig = _signatures(self.fnbr)
        self.psig = _signatures(self.pnbr)
        self.plan = Counter((min(a, b), max(a, b)) for a, _, b, _ in topo.links.tolist())
        self.fcsr, self.pcsr = _csr(self.fnbr), _csr(self.pnbr)
        self.frows: dict[int, np.ndarray] = {}
        self.prows: dict[int, np.ndarray] = {}

    def rows(self, fs: list[int], ps: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Hop distances from fabric switches ``fs`` and planned switches ``ps`` (cached)."""
        for v, cache, csr in [(v, self.frows, self.fcsr) for v in fs] + \
                             [(v, self.prows, self.pcsr) for v in ps]:
            if v not in cache:
                d = shortest_path(csr, unweighted=True, indices=[v])[0]
                d[np.isinf(d)] = len(self.fnbr)
                cache[v] = d.astype(np.int32)
        return (np.array([self.frows[v] for v in fs]), np.array([self.prows[v] for v in ps]))

    def distance(self, f: int, p: int) -> int:
        """How far fabric switch ``f``'s signature is from planned switch ``p``'s."""
        (fd, fn), (pd, pn) = self.fsig[f], self.psig[p]
        d = 4 * abs(self.fhosts[f] - self.phosts[p]) + abs(fd - pd)
        return d + sum(((fn - pn) + (pn - fn)).values())

    def extend(self, seed_f: int, seed_p: int, prefix: tuple[int, ...], cap: int):
        """The map grown from ``seed_f -> seed_p`` (module docstring, step 2), taking the
        ``prefix[k]``-th of the equally good candidates at the k-th tie, the first after
        that.  Returns ``(map or None, score, sizes of the first BRANCH ties)``: ``None``
        once the score can no longer stay within ``cap``."""
        n = len(self.fnbr)
        m = np.full(n, -1, dtype=np.int64)
        used = np.zeros(n, dtype=bool)
        count = [0] * n
        heap: list[tuple[int, int]] = []
        ties: list[int] = []
        score_now = sum(self.plan.values()) - len(self.links)   # + 2 per cable that misfits

        anchors: list[int] = []

        def assign(f, p):
            m[f] = p
            used[p] = True
            if len(anchors) < ANCHORS:
                anchors.append(f)
            for u in self.fnbr[f]:
                if m[u] < 0:
                    count[u] += 1
                    heapq.heappush(heap, (-count[u], u))

        assign(seed_f, seed_p)
        cursor = 0
        for _ in range(n - 1):
            f = -1
            while heap:
                c, u = heapq.heappop(heap)
                if m[u] < 0 and -c == count[u]:
                    f = u
                    break
            score: Counter = Counter()
            if f < 0:       # a part of the fabric not cabled to what is mapped
                while m[cursor] >= 0:
                    cursor += 1
                f = cursor
            else:
                for g in self.fnbr[f]:
                    if m[g] >= 0:
                        score.update(q for q in self.pnbr[m[g]] if not used[q])
            if not score:
                score = Counter({int(q): 0 for q in np.flatnonzero(~used)})
            top = max(score.values())
            cands = sorted(q for q, v in score.items() if v == top)
            if len(cands) > 1 and anchors:
                fd, pd = self.rows(anchors, [int(m[a]) for a in anchors])
                off = np.abs(pd[:, cands] - fd[:, [f]]).sum(axis=0)
                cands = [q for q, o in zip(cands, off.tolist()) if o == off.min()]
            ranked = sorted((self.distance(f, q), q) for q in cands)
            best = [q for d, q in ranked if d == ranked[0][0]]
            pick = 0
            if len(best) > 1 and len(ties) < BRANCH:
                pick = prefix[len(ties)] if len(ties) < len(prefix) else 0
                ties.append(len(best))
                if pick >= len(best):       # a prefix made for another branch
                    return None, score_now, ties
            score_now += 2 * (count[f] - top)
            if score_now > cap:
                return None, score_now, ties
            assign(f, best[pick])
        return m, score_now, ties

    def exact(self) -> np.ndarray | None:
        """An isomorphism of the two cablings that keeps host counts (module docstring,
        step 0), found depth first, or ``None`` once :data:`STEPS` per switch are spent or
        there is none."""
        n = len(self.fnbr)
        fnbr, pnbr = self.fnbr, self.pnbr
        FD, PD = _hops(fnbr), _hops(pnbr)
        m = np.full(n, -1, dtype=np.int64)
        inv = np.full(n, -1, dtype=np.int64)
        count = np.zeros(n, dtype=np.int64)      # mapped fabric neighbours
        pused = np.zeros(n, dtype=np.int64)      # mapped planned neighbours
        phosts = np.array(self.phosts)
        mapped: list[int] = []
        stack: list[tuple[int, list[int], int]] = []   # (switch, its options, next option)

        def options(f):
            marks = Counter(q for x in fnbr[f] if m[x] >= 0 for q in pnbr[m[x]]
                            if inv[q] < 0)
            free = list(marks) if marks else np.flatnonzero(inv < 0).tolist()
            # a planned switch fits when its mapped neighbours are exactly the images of f's
            q = np.array([v for v in free if marks.get(v, 0) == count[f] == pused[v]],
                         dtype=np.int64)
            if not len(q):
                return []
            if mapped:
                off = np.abs(PD[np.ix_(q, m[mapped])].astype(np.int32)
                             - FD[f, mapped][None, :]).sum(axis=1)
            else:
                off = np.array([self.distance(f, int(v)) for v in q])
            return [int(v) for v in q[(off == 0) & (phosts[q] == self.fhosts[f])]]

        def put(f, p):
            m[f], inv[p] = p, f
            mapped.append(f)
            for u in fnbr[f]:
                count[u] += 1
            for v in pnbr[p]:
                pused[v] += 1

        def undo(f):
            p = int(m[f])
            m[f], inv[p] = -1, -1
            mapped.pop()
            for u in fnbr[f]:
                count[u] -= 1
            for v in pnbr[p]:
                pused[v] -= 1

        steps = 0
        stack.append((0, options(0), 0))
        while stack:
            steps += 1
            if steps > STEPS * n:
                return None
            f, opts, i = stack[-1]
            if m[f] >= 0:               # back here: the choice below failed
                undo(f)
            if i >= len(opts):
                stack.pop()
                continue
            stack[-1] = (f, opts, i + 1)
            put(f, opts[i])
            if len(mapped) == n:
                return m
            # fail first: of the switches with the most mapped neighbours, the one with the
            # fewest options
            free = np.flatnonzero(m < 0)
            top = free[np.argsort(-count[free], kind="stable")[:LOOK]]
            stack.append(min(((int(u), options(int(u)), 0) for u in top),
                             key=lambda e: len(e[1])))
        return None


def _csr(nbr: list[list[int]]):
    rows = np.repeat(np.arange(len(nbr)), [len(x) for x in nbr])
    cols = np.array([u for x in nbr for u in x], dtype=np.int64)
    return csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(nbr), len(nbr)))


def _hops(nbr: list[list[int]]) -> np.ndarray:
    """Per pair of switches, the hop distance (``n`` where none) times 64 plus the number of
    two-hop paths (at most 63): an invariant any isomorphism keeps."""
    a = _csr(nbr)
    d = shortest_path(a, unweighted=True)
    d[np.isinf(d)] = len(nbr)
    paths = np.minimum((a @ a).toarray(), 63)
    return (d * 64 + paths).astype(np.int32)


def _signatures(nbr: list[list[int]]) -> list[tuple[int, Counter]]:
    deg = [len(x) for x in nbr]
    return [(deg[v], Counter(deg[u] for u in nbr[v])) for v in range(len(nbr))]


def find_map(fabric: Fabric, topo: Topology) -> tuple[np.ndarray, _Graphs]:
    """The switch map (fabric index -> planned switch) of the module docstring, and the
    graphs it was found on; :class:`BadInput` when the sizes differ or no map tried comes
    within :func:`bound`."""
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
    if len(g.links) == total and sorted(map(len, g.fnbr)) == sorted(map(len, g.pnbr)):
        m = g.exact()
        if m is not None:
            return m, g
    order = sorted(range(planned), key=lambda p: (g.distance(0, p), p))
    best, cap, runs = None, limit, 0
    floor = max(0, total - len(g.links))
    for p in order:
        stack = [()]
        while stack and runs < BUDGET and (best is None or best[0] > floor):
            prefix = stack.pop()
            runs += 1
            m, score, ties = g.extend(0, p, prefix, cap)
            if m is not None:
                best, cap = (score, m), score - 1
            # the other candidates of the next tie this prefix did not fix, lowest first
            if len(ties) > len(prefix):
                k = len(prefix)
                stack.extend(prefix + (i,) for i in range(ties[k] - 1, 0, -1))
                stack.extend(prefix + (0,) * (j - k + 1) + (i,)
                             for j in range(len(ties) - 1, k, -1)
                             for i in range(ties[j] - 1, 0, -1))
        if runs >= BUDGET or (best is not None and best[0] <= floor):
            break
    if best is None:
        raise BadInput(f"more than {limit} of {total} planned cables do not fit any map "
                       f"tried onto {topo.name()}; expected a fabric cabled after that plan")
    return best[1], g


def match(fabric: Fabric, topo: Topology) -> Match:
    """The map of ``fabric`` onto ``topo`` and the actions that make the cabling the plan."""
    m, g = find_map(fabric, topo)
    ids = g.ids
    inv = np.empty_like(m)
    inv[m] = np.arange(len(m))
    # planned cables by switch pair, each as (port at the lower switch, port at the other)
    planned: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for s, ps, t, pt in topo.links.tolist():
        key, ends = ((s, t), (ps, pt)) if s <= t else ((t, s), (pt, ps))
        planned[key].append(ends)
    for v in planned.values():
        v.sort(reverse=True)         # popped from the end: lowest ports first
    port: dict[int, dict[int, int]] = {f: {} for f in range(len(m))}
    misfit = []
    for a, pa, b, pb in g.links.tolist():
        s, t = int(m[a]), int(m[b])
        key = (min(s, t), max(s, t))
        if planned.get(key):
            ps, pt = planned[key].pop()
            if s > t or (s == t and pa > pb):
                ps, pt = pt, ps
            port[a][pa], port[b][pb] = ps, pt
        else:
            misfit.append((a, pa, b, pb))
    absent = sorted((s, ps, t, pt) for (s, t), v in planned.items() for ps, pt in v)
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
