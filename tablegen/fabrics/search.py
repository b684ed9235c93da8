"""The switch map of a cabled fabric onto its plan, from the cabling alone: a depth-first
search that is exact where the cabling is certainly right and counts mismatches where it
may not be (``fabroute reconcile``, issue 26, docs/real-fabrics.md).

A fabric is its plan with a few cables missing and a few with one end moved to a free port
of another switch.  Each changed cable leaves its ends with a degree the plan does not have
(a missing cable: both ends short; a moved one: the switch it left short, the switch it went
to over), except the end that stayed, which is a neighbour of a switch that is over.  So
the *suspects* are the switches of abnormal degree (or host count) and the neighbours of
those that may be over; every other switch is *clean*: its cables are exactly its planned
ones.  Between two clean switches the cabling is therefore exact — adjacent as planned, the
same number of common neighbours — and the hop distance without the cables of the switches
that may be over is at least the planned one.  Hence two phases:

1. **clean switches, exactly** (an induced-subgraph isomorphism): the next switch is, of
   the :data:`LOOK` / S (8 to 64) clean switches with the most mapped neighbours, the one
   with the fewest options; an option is a free planned switch of the same degree and host count whose
   mapped neighbours are exactly the images of the switch's, with the same number of
   common neighbours as, and no more hops than, each of the first :data:`ANCHORS` mapped
   switches (fewest extra hops first, then by planned id).  With nothing changed this is
   plain isomorphism, and the hop counts must be equal.  The first switch (the root) is
   the clean one with the fewest suspects within two hops, tried on one planned switch per
   automorphism orbit (nauty), closest histogram of 3-walk counts first (with no suspect
   that near, the root's is its image's exactly; a Dragonfly's routers share every hop and
   common-neighbour profile, but the walks tell their orbits apart), each with at most
   :data:`ROOT_STEPS` steps per clean switch below it.  Below the root too, options that
   an automorphism of the plan fixing every image so far maps onto each other are tried
   once (nauty, until only the identity fixes them): the 1K Dragonfly's plan has 5.4 · 10⁷
   automorphisms, 2 · 10⁶ of them fixing two routers, so without this each wrong root
   retried every arrangement of a group's routers (the 1K Dragonfly with 5 + 5 changes,
   seed 8: > 90 s before, about 5 s with both).  A dead end jumps
   back (conflict-directed backjumping) to the deepest earlier choice that ruled out one of
   its options — for each planned switch of its kind that is no option, the earliest mapped
   switch that took it or disagrees with it — or failed a subtree below it, not merely to
   the last choice: in a Dragonfly the routers of a group that differ only in cables to
   suspects fit in any order among themselves, and plain backtracking retried every such
   order before it got back to the choice that caused the dead end (the 1K Dragonfly with
   5 + 5 changes, seed 4: > 60 s before, 8 s with it).
2. **suspects, with a budget**: in order of most mapped neighbours, each onto the free
   planned switch that costs fewest mismatches (fabric cables to mapped switches that are
   not planned, planned cables to mapped switches that are absent), depth first under a
   budget.  Since mismatches = (planned − fabric cables) + 2 × misfit cables, the budget
   grows two at a time from the least the degrees allow (iterative deepening), so the map
   found first has the fewest mismatches of those the order reaches.

A change that leaves every degree as planned (a switch that lost one cable and gained
another; two cables with their far ends swapped) is not seen by the degrees: its ends look
clean, and phase 1 meets a clean switch with no option.  Such a change alters the hop counts
far from it, but the common neighbours of two switches only where one of them is an end of
it (they count the two switches' own cables).  So phase 1 is retried with hops used only to
order the options, not to prune them, allowing clean switches without an option to be left
to phase 2 — first with the common neighbours exact and at most 4 of them (the ends of one
swap: the more are allowed, the deeper a wrong map goes before it fails), then up to the
mismatch limit, then allowing each switch to disagree on common neighbours with up to
:data:`SLIP` mapped switches (an end of the change mapped before its wrong partner
disagrees with the partner's neighbours).  A
wrong map of the clean switches may still be completed within the limit, so in a retry the
phase-2 budget grows over its maps at once, the k-th budget over the first 2^k of them
(at most :data:`CORE_MAPS`; finding a map of the clean switches costs more than completing
one): the map returned has the fewest mismatches of those.  A swap then costs 4
mismatches (on a plan of one degree no change that keeps every degree and is not an
automorphism costs fewer: one wrong cable and one absent must share both ends, so there the
retries' budget starts at 4) and, each wrong cable sharing an end with an absent planned
one, reads as two moved cables.  As a last resort phase 2 runs with every switch a suspect.

Slim Fly is vertex-transitive, so many maps are equally right; this one is deterministic:
the root goes to the lowest planned switch of the first orbit (in the order above) that
fits, every later switch to its first option that fits, in the order above.

Cost: all-pairs hop distances and common-neighbour counts of both cablings, four S×S int16
matrices (S = 4,096: 128 MiB), then per step O(d²) for degree d plus O(options · ANCHORS)
for each of the (at most 64) switches compared, per dead end O(S · mapped) for its
culprits (the hop and common-neighbour rows of every planned switch of its kind), and per
level whose images some automorphism besides the identity fixes one nauty call (in
practice near-linear in the cables).  The root's 3-walk histograms are one sparse product
per orbit (S × S int32 when every switch is its own orbit).  At most :data:`STEPS` steps
per switch per phase; phase 1 runs at most four times (exact; then three times with up to
4 or ``limit`` clean switches left to phase 2), and :data:`CORE_MAPS` of its maps are tried
each time, in the retries each once per mismatch budget (``limit / 2`` budgets at most),
so a fabric with a hidden change costs up to four times one without.
Measured in benchmarks/RESULTS.md ("reconcile (issue 26)").
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix, identity

from tablegen.topology import hop_distances

ANCHORS = 512       # mapped switches whose hops and common neighbours filter the options
LOOK = 1 << 14      # switches whose options phase 1 compares per step: LOOK / S, within
                    # 8..64 (fail-first pays on Dragonfly groups; per-step cost on 4,096)
STEPS = 60          # steps per switch before a phase gives up
ROOT_STEPS = 16     # steps per switch phase 1 spends below one image of its first switch
RANK = 256          # options of a suspect ranked by hops and common neighbours (the
                    # rest, costlier or equal, only by cost)
CORE_MAPS = 32      # maps of the clean switches tried per number of them left to phase 2
SLIP = 4            # mapped switches a clean one may disagree with on common neighbours
                    # once the degrees hide a change (two per swapped cable pair)


class Search:
    """Both cablings as neighbour lists over switch indices (``fnbr`` fabric, ``pnbr``
    plan) with host counts; :meth:`run` returns the map or ``None``."""

    def __init__(self, fnbr: list[list[int]], pnbr: list[list[int]],
                 fhosts: list[int], phosts: list[int]):
        self.n = n = len(fnbr)
        self.fnbr, self.pnbr = fnbr, pnbr
        self.fdeg = np.array([len(x) for x in fnbr])
        self.pdeg = np.array([len(x) for x in pnbr])
        self.fhosts, self.phosts = np.array(fhosts), np.array(phosts)
        degs, hosts = set(self.pdeg.tolist()), set(self.phosts.tolist())
        odd = [v for v in range(n)
               if self.fdeg[v] not in degs or self.fhosts[v] not in hosts]
        over = [v for v in odd if self.fdeg[v] > min(degs)]
        suspect = set(odd).union(*(fnbr[v] for v in over)) if over else set(odd)
        self.odd = np.zeros(n, dtype=bool)
        self.odd[odd] = True
        self.clean = np.ones(n, dtype=bool)
        self.clean[list(suspect)] = False
        self.unchanged = not odd and sum(self.fdeg) == sum(self.pdeg)
        self.fA, self.pA = _csr(fnbr), _csr(pnbr)
        self.padj = _padded(pnbr)
        # switches of the same degree and host count share a kind (options need the same)
        kinds = {k: i for i, k in enumerate(sorted(set(zip(self.pdeg.tolist(),
                                                            self.phosts.tolist()))))}
        self.pkind = np.array([kinds[k]
                               for k in zip(self.pdeg.tolist(), self.phosts.tolist())])
        self.fkind = np.array([kinds.get(k, -1)
                               for k in zip(self.fdeg.tolist(), self.fhosts.tolist())])
        # without the cables of the switches that may be over, the fabric is part of the
        # plan: its hop counts are at least the planned ones (and mostly equal)
        maybe_over = np.zeros(n, dtype=bool)
        maybe_over[over] = True
        self.trimmed = [[] if maybe_over[v] else [u for u in fnbr[v] if not maybe_over[u]]
                        for v in range(n)]
        self.PH, self.PC = _hops(pnbr, "the plan"), _common(self.pA)
        self.pprof = _profile(self.PH)
        self.rep = _orbit_firsts(pnbr, self.phosts)
        self.padict = {v: sorted(set(pnbr[v])) for v in range(n)}
        self.FC = _common(self.fA)
        self.hop_bound, self.slip = True, 0
        self._fabric_hops()
        self._choose_root(suspect)

    def _choose_root(self, suspect: set[int]) -> None:
        """The first switch of phase 1 (``root``): the clean switch with the fewest suspects
        within two hops (lowest index first), and, for one planned switch per orbit, its
        distance to the root (``walk_off``): the L1 distance of their histograms of 3-walk
        counts (to every switch, how many walks of three cables lead there); the root's
        images are tried by it, then by hop profile.  A walk of three cables from the root
        passes only its neighbours and theirs, so with no suspect among them the root's
        histogram is exactly its image's: on a Dragonfly, whose routers share every hop and
        common-neighbour profile, this puts the right image's orbit among the first four
        where plain hop profiles left it 49th of 60 (1K Dragonfly 5 + 5, seed 8)."""
        clean = np.flatnonzero(self.clean)
        if not len(clean):
            return
        bad = np.zeros(self.n, dtype=np.int32)
        bad[list(suspect)] = 1
        ball = self.fA @ self.fA + self.fA + identity(self.n, dtype=np.int32, format="csr")
        ball.data[:] = 1
        self.root = int(clean[np.argmin(ball[clean] @ bad)])
        self.walk_off = np.zeros(self.n, dtype=np.int64)
        reps = np.flatnonzero(self.rep)
        self.walk_off[reps] = np.abs(_walks3(self.pA, reps)
                                     - _walks3(self.fA, np.array([self.root]))).sum(axis=1)

    def _fabric_hops(self) -> None:
        """Hop distances between fabric switches without the cables of switches that may be
        over (all cables when nothing is changed or no switch is clean)."""
        whole = self.unchanged or not self.clean.any()
        self.FH = _hops(self.fnbr if whole else self.trimmed, "the fabric")
        self.fprof = _profile(self.FH)

    def run(self, limit: int) -> np.ndarray | None:
        """A map with at most ``limit`` mismatches, or ``None``."""
        misfit_least = max(0, int(self.fdeg.sum() - self.pdeg.sum()) // 2,
                           -(-int((self.fdeg > self.pdeg.max()).sum()) // 2))
        base = int(self.pdeg.sum() - self.fdeg.sum()) // 2     # planned − fabric cables
        caps = range(base + 2 * misfit_least, limit + 1, 2)
        for _, core in zip(range(CORE_MAPS), self._core_maps(0)):
            m = next((m for cap in caps if (m := self._fill(core, cap)) is not None), None)
            if m is not None:
                return m
        # a change the degrees do not show leaves hop counts wrong far from it, but common
        # neighbours only at its own ends: the retries use hops to order, not to prune,
        # first with common neighbours exact (a switch at a hidden change is left to phase
        # 2 when it has no option), then with up to SLIP mapped switches disagreeing (a
        # hidden change's end mapped before its wrong partner).  A wrong core map can still
        # be completed within the limit, so the budget grows over the core maps of a retry
        # at once, the k-th budget over the first 2^k (finding a core map costs more than
        # completing one): the map returned has the fewest mismatches of those.  With
        # every degree as planned on a plan of one degree, the exact pass has looked for
        # maps without mismatches, and no map has 2 (the docstring), so the budget starts
        # at 4; at most the four ends of one swap are left to phase 2 first, then `limit`
        # (the more are left, the deeper a wrong core map goes before it fails).
        self.hop_bound = False
        if self.unchanged and len(set(self.pdeg.tolist())) == 1:
            caps = range(4, limit + 1, 2)
        for self.slip, demote in ((0, min(4, limit)), (0, limit), (SLIP, limit)):
            cores: list = []
            more = self._core_maps(demote)
            for k, cap in enumerate(caps):
                for i in range(min(CORE_MAPS, 1 << k)):
                    if i == len(cores):
                        core = next(more, None)
                        if core is None:
                            break
                        cores.append(tuple(x.copy() for x in core[:4]) + (list(core[4]),))
                    m = self._fill(cores[i], cap)
                    if m is not None:
                        return m
        self.clean[:] = False
        if not self.unchanged:          # the hop counts were over the trimmed cabling
            self._fabric_hops()
        core = (*self._state(), [])
        return next((m for cap in caps if (m := self._fill(core, cap)) is not None), None)

    def _state(self):
        n = self.n
        return (np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64),
                np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))

    def _core_maps(self, demote: int):
        """Maps of the clean switches (phase 1), each as ``(m, inv, count, pused, mapped)``
        with ``count``/``pused`` the mapped neighbours of every fabric/planned switch."""
        fnbr, pnbr = self.fnbr, self.pnbr
        m, inv, count, pused = self._state()
        mapped: list[int] = []
        clean = np.flatnonzero(self.clean)
        if not len(clean):
            yield m, inv, count, pused, mapped
            return

        def options(f):
            c = count[f]
            if c:
                near = self.padj[m[fnbr[f]][m[fnbr[f]] >= 0]].ravel()
                q, k = np.unique(near[near >= 0], return_counts=True)
                q = q[(k == c) & (pused[q] == c) & (inv[q] < 0)]
            else:
                q = np.flatnonzero((inv < 0) & (pused == 0))
            q = q[self.pkind[q] == self.fkind[f]]
            if not len(q):
                return []
            if not mapped:      # the root: one image per orbit, whose walks and hops fit first
                q = q[self.rep[q]]
                off = np.abs(self.pprof[q] - self.fprof[f]).sum(axis=1)
                return q[np.lexsort((q, off, self.walk_off[q]))].tolist()
            fa = np.array(mapped[:ANCHORS])
            pa = m[fa]
            extra = self.FH[f, fa][None, :].astype(np.int32) - self.PH[np.ix_(q, pa)]
            differ = (self.PC[np.ix_(q, pa)] != self.FC[f, fa][None, :]).sum(axis=1)
            ok = differ <= self.slip
            if self.hop_bound:
                ok &= ((extra == 0) if self.unchanged else (extra >= 0)).all(axis=1)
            q, slack, differ = q[ok], np.abs(extra).sum(axis=1)[ok], differ[ok]
            return q[np.lexsort((q, slack, differ))].tolist()

        # a clean switch with no option may be a changed one the degrees did not show: it
        # is then left to phase 2 (at most `demote` of them)
        waiting = np.zeros(self.n, dtype=bool)

        def step_for(u):
            opts = options(u)
            opts = opts or ([-1] if waiting.sum() < demote else [])
            return (u, opts, 0, opts)

        steps, budget = 0, STEPS * len(clean)
        stack = [step_for(self.root)]
        # whether the plan's automorphisms that fix the images of the levels above are
        # only the identity (then none of the levels below needs nauty)
        rigid = [False]
        # conflict-directed backjumping: per level, the earlier levels whose choices ruled
        # out its options (or failed its subtrees); an exhausted level jumps back to the
        # deepest of them, past levels whose choices had nothing to do with the dead end
        conflicts: list[set[int]] = [set()]
        level = np.zeros(self.n, dtype=np.int64)    # stack level of a mapped/waiting switch
        since_root = 0
        while stack:
            steps += 1
            since_root += 1
            if steps > budget:
                return
            if since_root > ROOT_STEPS * len(clean) and len(stack) > 1:
                # a root in the wrong orbit (Dragonfly routers are not all alike) fails only
                # deep down: give each root image a share and move on
                self._drop(stack, conflicts, rigid, 1, m, inv, count, pused, mapped, waiting)
            if len(stack) == 1:
                since_root = 0
            f, opts, i, full = stack[-1]
            if m[f] >= 0:
                _undo(f, m, inv, count, pused, mapped, fnbr, pnbr)
            waiting[f] = False
            if i >= len(opts):
                d = len(stack) - 1
                if not d:
                    return
                why = conflicts[d] | self._culprits(f, full, d, m, inv, level, mapped)
                if waiting.any() and -1 not in opts and not waiting[f]:
                    why |= set(level[waiting].tolist())    # the demote cap was spent there
                h = max(why, default=d - 1)
                self._drop(stack, conflicts, rigid, h + 1, m, inv, count, pused, mapped, waiting)
                conflicts[h] |= why - {h}
                continue
            stack[-1] = (f, opts, i + 1, full)
            level[f] = len(stack) - 1
            if opts[i] < 0:
                waiting[f] = True
            else:
                _put(f, opts[i], m, inv, count, pused, mapped, fnbr, pnbr)
            free = clean[(m[clean] < 0) & ~waiting[clean]]
            if not len(free):
                yield m, inv, count, pused, mapped
                # phase 2 turned this map down, for reasons the conflicts do not know:
                # every level may be to blame, so back up one level at a time
                for d in range(1, len(stack)):
                    conflicts[d].add(d - 1)
                continue
            top = free[np.argsort(-count[free], kind="stable")[:min(64, max(8, LOOK // self.n))]]
            u, opts, _, full = min((step_for(int(u)) for u in top), key=lambda e: len(e[1]))
            # an automorphism of the plan that fixes every image so far keeps every test of
            # the options (adjacency, hops, common neighbours, free or taken), so of the
            # options it exchanges one stands for all; the dead end's culprits still see all
            if not rigid[-1] and len(opts) > 1:
                orbit = self._stabiliser_orbits(m[mapped])
                rigid.append(orbit is None)
                if orbit is not None:
                    seen: set[int] = set()
                    opts = [v for v in opts
                            if v < 0 or not (orbit[v] in seen or seen.add(orbit[v]))]
            else:
                rigid.append(rigid[-1])
            stack.append((u, opts, 0, full))
            conflicts.append(set())

    def _drop(self, stack, conflicts, rigid, keep, m, inv, count, pused, mapped, waiting) -> None:
        """Pops the stack down to ``keep`` levels, undoing their choices."""
        while len(stack) > keep:
            u = stack.pop()[0]
            conflicts.pop()
            rigid.pop()
            if m[u] >= 0:
                _undo(u, m, inv, count, pused, mapped, self.fnbr, self.pnbr)
            waiting[u] = False

    def _stabiliser_orbits(self, images) -> np.ndarray | None:
        """The orbits of the planned switches under the plan's automorphisms that fix every
        switch of ``images`` (nauty, host counts kept), or ``None`` when only the identity
        does."""
        import pynauty

        fixed = [int(v) for v in images]
        rest = np.ones(self.n, dtype=bool)
        rest[fixed] = False
        colours = [{v} for v in fixed] + [set(np.flatnonzero(rest & (self.phosts == h)).tolist())
                                          for h in np.unique(self.phosts)]
        g = pynauty.Graph(self.n, directed=False, vertex_coloring=[c for c in colours if c],
                          adjacency_dict=self.padict)
        _, size, exp, orbits, _ = pynauty.autgrp(g)
        return None if size == 1 and exp == 0 else np.asarray(orbits)

    def _culprits(self, f, opts, d, m, inv, level, mapped) -> set[int]:
        """The levels below ``d`` whose choices ruled out the planned switches of ``f``'s
        degree and host count that are not among its options ``opts``: for each such
        switch the earliest mapped switch it is taken by or disagrees with (adjacency;
        common neighbours and hops with the first :data:`ANCHORS`, as in the options).
        Should a switch that fits not be among ``opts``, the level below is blamed too
        (``d - 1``), which is plain backtracking."""
        fa = np.array(mapped, dtype=np.int64)
        q = np.flatnonzero(self.pkind == self.fkind[f])
        if not len(fa):
            return set()
        pa = m[fa]
        ph = self.PH[np.ix_(q, pa)]
        bad = (ph == 1) != (self.FH[f, fa] == 1)[None, :]
        k = min(len(fa), ANCHORS)
        extra = self.FH[f, fa[:k]][None, :].astype(np.int32) - ph[:, :k]
        if self.hop_bound:
            bad[:, :k] |= (extra != 0) if self.unchanged else (extra < 0)
        # common neighbours rule a switch out at the anchor where it disagrees once more
        # than the slip allows
        differ = np.zeros_like(bad)
        differ[:, :k] = self.PC[np.ix_(q, pa[:k])] != self.FC[f, fa[:k]][None, :]
        bad |= differ & (differ.cumsum(axis=1) > self.slip)
        never = np.iinfo(np.int64).max
        first = np.where(bad.any(axis=1), level[fa][bad.argmax(axis=1)], never)
        taken = inv[q] >= 0
        first[taken] = np.minimum(first[taken], level[inv[q[taken]]])
        why = set(first[first < never].tolist())
        if not set(q[first == never].tolist()) <= set(opts):
            why.add(d - 1)
        return why

    def _fill(self, core, cap: int) -> np.ndarray | None:
        """The suspects mapped onto the planned switches the clean ones of ``core`` left
        (phase 2) with at most ``cap`` mismatches, or ``None``."""
        m, inv, count, pused = (x.copy() for x in core[:4])
        mapped = list(core[4])
        fnbr, pnbr = self.fnbr, self.pnbr
        rest = np.flatnonzero(m < 0)
        if not len(rest):
            return m

        def options(f, spent):
            # every free planned switch within the budget, not only those next to the
            # images of f's neighbours: a moved cable may be f's only mapped one
            marks = np.zeros(self.n, dtype=np.int64)
            for x in fnbr[f]:
                if m[x] >= 0:
                    marks[pnbr[m[x]]] += 1
            cost = count[f] + pused - 2 * marks
            free = np.flatnonzero((inv < 0) & (spent + cost <= cap))
            free = free[np.lexsort((free, cost[free]))]
            cost = cost[free]
            near = free[:RANK]
            off = (np.abs(self.pdeg[near] - self.fdeg[f])
                   + np.abs(self.phosts[near] - self.fhosts[f]))
            if mapped:
                fa = np.array(mapped[:ANCHORS])
                pa = m[fa]
                off += (np.abs(self.PC[np.ix_(near, pa)] - self.FC[f, fa][None, :])
                        + np.abs(self.PH[np.ix_(near, pa)] - self.FH[f, fa][None, :])
                        ).sum(axis=1)
            order = np.lexsort((near, off, cost[:RANK]))
            return list(zip(np.concatenate([near[order], free[RANK:]]).tolist(),
                            np.concatenate([cost[:RANK][order], cost[RANK:]]).tolist()))

        def pick():
            free = rest[m[rest] < 0]
            return int(free[np.lexsort((self.odd[free], -count[free]))[0]])

        steps, budget = 0, STEPS * len(rest)
        f = pick()
        stack = [(f, options(f, 0), 0, 0)]
        while stack:
            steps += 1
            if steps > budget:
                return None
            f, opts, i, spent = stack[-1]
            if m[f] >= 0:
                _undo(f, m, inv, count, pused, mapped, fnbr, pnbr)
            if i >= len(opts):
                stack.pop()
                continue
            stack[-1] = (f, opts, i + 1, spent)
            v, cost = opts[i]
            _put(f, v, m, inv, count, pused, mapped, fnbr, pnbr)
            if len(mapped) == self.n:
                return m
            g = pick()
            stack.append((g, options(g, spent + cost), 0, spent + cost))
        return None


def _put(f, p, m, inv, count, pused, mapped, fnbr, pnbr) -> None:
    m[f], inv[p] = p, f
    mapped.append(f)
    for u in fnbr[f]:
        count[u] += 1
    for v in pnbr[p]:
        pused[v] += 1


def _undo(f, m, inv, count, pused, mapped, fnbr, pnbr) -> None:
    p = int(m[f])
    m[f], inv[p] = -1, -1
    mapped.pop()
    for u in fnbr[f]:
        count[u] -= 1
    for v in pnbr[p]:
        pused[v] -= 1


def _hops(nbr: list[list[int]], name: str) -> np.ndarray:
    """All-pairs hop distances of a cabling given as neighbour lists (255 where none),
    int16 (:func:`tablegen.topology.hop_distances`)."""
    return hop_distances(_padded(nbr), name).astype(np.int16)


def _padded(nbr: list[list[int]]) -> np.ndarray:
    """Neighbour lists as one array, rows padded with -1."""
    adj = np.full((len(nbr), max(map(len, nbr), default=0)), -1, dtype=np.int64)
    for v, x in enumerate(nbr):
        adj[v, :len(x)] = x
    return adj


def _orbit_firsts(pnbr: list[list[int]], phosts: np.ndarray) -> np.ndarray:
    """Per planned switch, whether it is the lowest of its orbit under the plan's
    automorphisms that keep host counts (nauty): a map that sends a switch to one member of
    an orbit can be turned into one that sends it to any other, so the first switch of the
    search needs to try only one image per orbit."""
    import pynauty

    n = len(pnbr)
    colours = [set(np.flatnonzero(phosts == h).tolist()) for h in np.unique(phosts)]
    g = pynauty.Graph(n, directed=False, vertex_coloring=colours,
                      adjacency_dict={v: sorted(set(pnbr[v])) for v in range(n)})
    orbits = np.asarray(pynauty.autgrp(g)[3])
    first = np.zeros(n, dtype=bool)
    first[np.unique(orbits, return_index=True)[1]] = True
    return first


def _profile(h: np.ndarray) -> np.ndarray:
    """Per switch, how many switches lie at each hop count (up to 15; further as 15)."""
    h = np.minimum(h, 15).astype(np.int64)
    return np.stack([np.bincount(row, minlength=16) for row in h])


def _walks3(a, rows: np.ndarray) -> np.ndarray:
    """Per switch of ``rows``, its histogram of 3-walk counts: how many switches are
    reached by 0, 1, …, 255 or more walks of three cables, int64."""
    w = np.minimum(((a[rows] @ a) @ a).toarray(), 255)
    return np.stack([np.bincount(r, minlength=256) for r in w])


def _common(a) -> np.ndarray:
    """Common neighbours of every pair of switches, int16."""
    return (a @ a).toarray().astype(np.int16)


def _csr(nbr: list[list[int]]):
    rows = np.repeat(np.arange(len(nbr)), [len(x) for x in nbr])
    cols = np.array([u for x in nbr for u in x], dtype=np.int64)
    return csr_matrix((np.ones(len(cols), dtype=np.int32), (rows, cols)),
                      shape=(len(nbr), len(nbr)))
