"""InfiniBand routing: LMC path layers, service levels and VLs, verified under IB semantics.

An InfiniBand switch forwards on the destination LID alone (one out port per LID, whoever sent
the packet), a packet's service level (SL) is fixed for its whole path, and each switch picks
the virtual lane from ``(in port, out port, SL)``.  Our table model carries a phase, an
intermediate and a hop-indexed VC in the packet header; none of that exists on an IB wire.
This module maps a :class:`~tablegen.tables.TableSet` onto what IB can express
(``docs/ib-routing.md`` gives the reasoning and the proofs):

* **Layers.**  With LMC ``m`` every host owns ``2**m`` LIDs; LID offset ``k`` is routed by
  layer ``k``, a tree into every destination switch.  Layer 0 is the routing's deterministic
  minimal table (its own routing for DSN-F).  Layers ``k >= 1``: equal-cost minimal
  alternatives for MIN; for the Valiant variants (and UGAL-L's non-minimal class) a *target*
  per (layer, destination) — an intermediate switch (VAL, VAL_nta), a neighbour of the
  destination (VAL_3h) or an intermediate group (Dragonfly) — with a trunk: the switches
  where the class is in phase 1 route on the phase-1 table, every other switch heads for the
  target on the phase-0 table.  See :func:`build_layers`.
* **SL/VL.**  VL 0 on every hop that enters a switch from a host (or from the switch's
  management port 0), VL ``1 + SL`` on every hop that enters from another switch.  SLs are
  assigned per (layer, source switch, destination switch), first fit, longest paths first:
  each path joins the lowest SL whose channel dependency graph stays acyclic with it.  See
  :func:`assign_sls`.
* :func:`verify_ib` proves the result from the arrays the exporter writes: every
  (layer, source, destination) path delivered and loop-free within its hop bound, and the
  channel dependency graph over ``(link, VL)`` acyclic, with the VL of every hop read from the
  SL2VL array ``[switch, in slot, out slot, SL]``.
* :func:`verify_ib_files` proves the written files themselves (what ``fabroute verify DIR``
  runs): every (source HCA, destination LID) packet through ``lfts.dump`` with its
  ``path-sl.txt`` SL and the ``sl2vl.dump`` VLs, the CDG of those walks, and the LFTs against
  the table set's layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from emulation.ibsim.apply import VL_DROP
from tablegen.errors import BadInput, NotExpressible
from tablegen.routing.walk import by_dst, lengths
from tablegen.tables import PathClass, TableSet
from tablegen.verify import cdg_edges

__all__ = ["IB_DATA_VLS", "NotExpressible", "IbLayers", "assign_sls", "build_layers", "ib_routing",
           "sl2vl_array", "verify_ib", "verify_ib_files", "walk_layers"]

IB_DATA_VLS = 8        # data VLs an ibsim port reports (VLCap VL0-7); real HCAs often have 8 too
NUM_SLS = 16           # SL is a 4-bit field


@dataclass(eq=False)
class IbLayers:
    """Per-LID-offset forwarding trees and the SL of every path.

    Attributes:
        ts: the table set the layers come from.
        lmc: LID mask control; ``2**lmc`` layers.
        kinds: per layer, how it was made (``min``, ``min-alt``, ``dsnf``, ``val``, ``val-nta``,
            ``val-3h``, ``val-group``).
        bounds: per layer, the hop bound :func:`verify_ib` enforces.
        nxt: ``int16[L, N, N]`` network port index at switch ``u`` toward destination switch
            ``d`` in layer ``k``; ``-1`` at ``d``.
        target: ``int32[L, N]`` the Valiant target of layer ``k`` toward ``d`` (a switch or a
            group); ``-1`` for minimal and DSN-F layers.
        sl: ``uint8[L, N, N]`` SL of the path from ``u`` to ``d`` in layer ``k``.
        hops: ``int16[L, N, N]`` its length in switch hops.
        shortcuts: (layer, switch, destination) entries where a packet of the routing's own
            path would be in phase 0 but the tree sends it on the phase-1 table (the trunk):
            the paths that differ from the table set's own.
    """

    ts: TableSet
    lmc: int
    kinds: list[str]
    bounds: list[int]
    nxt: np.ndarray
    target: np.ndarray
    sl: np.ndarray
    hops: np.ndarray
    shortcuts: int = 0
    info: dict = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        return 1 << self.lmc

    @property
    def num_sls(self) -> int:
        return int(self.sl.max(initial=0)) + 1

    def histograms(self) -> list[dict[str, int]]:
        """Per layer: number of (source, destination) switch pairs per path length."""
        n = self.ts.topo.n_switches
        off = ~np.eye(n, dtype=bool)
        return [{str(h): int(c) for h, c in enumerate(np.bincount(self.hops[k][off]))
                 if c} for k in range(self.num_layers)]


# ---------------------------------------------------------------------------------------------
# layers
# ---------------------------------------------------------------------------------------------
def build_layers(ts: TableSet, lmc: int = 0, seed: int = 1) -> IbLayers:
    """Destination-based layers of ``ts`` for LID offsets ``0 .. 2**lmc - 1``.

    Layer 0: the class whose phase-1 table is the routing's deterministic minimal table
    (UGAL-L's MIN; a Valiant variant's phase 1) or, for DSN-F, its own routing.  Layer
    ``k >= 1``: MIN — the ``k``-th equal-cost alternative (rotating from the tie-break's
    choice); DSN-F — layer 0 again (one route per destination); a Valiant class — per
    destination a target drawn with ``numpy.random.default_rng(seed)`` from the class's
    candidates (any other switch; VAL_3h: a neighbour of the destination, so that every path
    is ``<= 1 + diameter`` hops; Dragonfly: any other group), distinct across layers while
    candidates last.

    Complexity: O(2^lmc N^2 L) time and O(2^lmc N^2) memory for paths of length L.
    """
    topo = ts.topo
    n = topo.n_switches
    L = 1 << lmc
    names = [c.name for c in ts.classes]
    nonmin = [c for c in ts.classes if c.name != "min"]
    if "min" in names:
        first = ts.cls("min")
    elif ts.classes[-1].target0 == "dst":
        first = ts.classes[-1]            # DSN-F: its own routing is the only route
    else:
        first = PathClass("min", table1=ts.classes[-1].table1,
                          max_hops=_diameter(ts, ts.classes[-1].table1))
    nxt = np.empty((L, n, n), dtype=np.int16)
    target = np.full((L, n), -1, dtype=np.int32)
    nxt[0], shortcuts = _tree(ts, first, None)
    kinds, bounds = [first.name], [first.max_hops]
    rng = np.random.default_rng(seed)
    picks = _targets(ts, nonmin[0], L - 1, rng) if nonmin and nonmin[0].target0 != "dst" else None
    for k in range(1, L):
        if picks is not None:
            target[k] = picks[k - 1]
            nxt[k], sc = _tree(ts, nonmin[0], target[k])
            kinds.append(nonmin[0].name)
            bounds.append(nonmin[0].max_hops)
        elif first.name == "min":
            nxt[k], sc = _min_alternative(ts, k), 0
            kinds.append("min-alt")
            bounds.append(first.max_hops)
        else:
            nxt[k], sc = nxt[0], shortcuts
            kinds.append(first.name)
            bounds.append(first.max_hops)
        shortcuts += sc
    hops = _lengths(topo, nxt)
    return IbLayers(ts=ts, lmc=lmc, kinds=kinds, bounds=bounds, nxt=nxt, target=target,
                    sl=np.zeros((L, n, n), dtype=np.uint8), hops=hops, shortcuts=shortcuts,
                    info={"seed": seed})


def _diameter(ts: TableSet, table: str) -> int:
    from tablegen.routing.build import table_lengths

    return int(table_lengths(ts.topo, ts.tables[table]).max())


def _targets(ts: TableSet, cls: PathClass, count: int, rng) -> np.ndarray:
    """``int32[count, N]``: the target of each non-minimal layer toward each destination."""
    topo = ts.topo
    n = topo.n_switches
    out = np.empty((count, n), dtype=np.int32)
    for d in range(n):
        if cls.target0 == "group":
            cand = np.flatnonzero(np.arange(topo.n_groups) != topo.group[d])
        elif cls.name == "val-3h":
            # the mirror of Yebenes' first-hop choice: a tree fixes where paths end, so the
            # intermediate is next to the destination; min path to it + 1 <= 1 + diameter.
            cand = np.unique(topo.adj[d][topo.adj[d] >= 0])
        else:
            cand = np.flatnonzero(np.arange(n) != d)
        if not len(cand):
            raise NotExpressible(f"{ts.routing} on {topo.name()}: no {cls.name} target toward switch "
                          f"{d}; expected at least one candidate")
        order = rng.permutation(cand)
        out[:, d] = order[np.arange(count) % len(order)]
    return out


def _tree(ts: TableSet, cls: PathClass, target) -> tuple[np.ndarray, int]:
    """Next hops of one layer (``int16[N, N]``, ``[u, d]``) and its shortcut count.

    The trunk toward ``d`` is every switch where the class is in phase 1: the target switch,
    the target group's switches, or (DSN-F, ``target0 == 'dst'``) every switch that some source's
    own walk reaches in phase 1; closed under the phase-1 table.  Trunk switches use the
    phase-1 table, the others the phase-0 table toward the target.  Loop-free: off the trunk a
    packet follows a loop-free phase-0 walk, which ends on the trunk (it reaches the target or
    exits), and the trunk is closed under a loop-free phase-1 table.
    """
    topo = ts.topo
    n = topo.n_switches
    t1 = ts.tables[cls.table1]
    cols = np.arange(n)
    if cls.table0 is None:
        out = t1.astype(np.int16, copy=True)
        out[cols, cols] = -1
        return out, 0
    t0 = ts.tables[cls.table0]
    if cls.target0 == "dst":
        trunk, used0 = _phase1_seen(ts, cls)
        toward = t0
    else:
        trunk = np.zeros((n, n), dtype=bool)
        if cls.target0 == "switch":
            trunk[target, cols] = True
        else:
            trunk = topo.group[:, None] == target[None, :]
        used0 = None
        toward = t0[:, target]
    trunk[cols, cols] = True
    _close(topo, t1, trunk)
    out = np.where(trunk, t1, toward).astype(np.int16)
    out[cols, cols] = -1
    shortcuts = 0 if used0 is None else int((used0 & trunk & (t0 != t1)).sum())
    return out, shortcuts


def _phase1_seen(ts: TableSet, cls: PathClass) -> tuple[np.ndarray, np.ndarray]:
    """For a class whose phase 0 is indexed by the destination (DSN-F): ``[u, d]`` masks of
    where some source's own walk is processed in phase 1, and in phase 0."""
    topo = ts.topo
    n = topo.n_switches
    t0, t1 = ts.tables[cls.table0], ts.tables[cls.table1]
    by_port = cls.exit == "port"
    leave = ts.exit_port if by_port else np.zeros((1, 1), dtype=bool)
    seen = np.zeros((2, n, n), dtype=bool)
    args = (by_dst(t0), by_dst(t1), by_port, leave,
            topo.adj.astype(np.int64), seen)
    err = np.full(3, -1, dtype=np.int64)
    if not _walk_phases_once(*args):
        _walk_phases(*args, err)
    if err[1] >= 0:
        raise NotExpressible(f"{ts.routing} on {topo.name()}: no {cls.name} entry at switch "
                      f"{int(err[2])} toward {int(err[0] % n)}")
    if err[0] >= 0:
        raise NotExpressible(f"{ts.routing} on {topo.name()}: class {cls.name} loops")
    return by_dst(seen[1]), by_dst(seen[0])


@njit(cache=True)
def _walk_phases_once(t0_t, t1_t, by_port, leave, adj, seen):
    """``seen`` of :func:`_walk_phases` in O(N^2): where a walk reaches a (phase, switch)
    an earlier walk to the same destination passed, it goes on as that one did, so it stops.
    Returns False at the first missing entry or loop (:func:`_walk_phases` then finds the
    one to report)."""
    n = t0_t.shape[0]
    mark = np.empty((2, n), dtype=np.int64)
    for d in range(n):
        mark[:] = -1
        for u in range(n):
            x, ph = u, 0
            while x != d:
                if mark[ph, x] == u:
                    return False
                if mark[ph, x] >= 0:
                    break
                mark[ph, x] = u
                seen[ph, d, x] = True
                j = t1_t[d, x] if ph else t0_t[d, x]
                if j < 0 or adj[x, j] < 0:
                    return False
                if by_port and leave[x, j]:
                    ph = 1
                x = adj[x, j]
    return True


@njit(cache=True)
def _walk_phases(t0_t, t1_t, by_port, leave, adj, seen, err):
    """Walk every (source, destination) path of a DSN-F-type class (tables destination-major,
    ``[d, u]``), marking ``seen[phase, d, u]`` at every switch it is processed at.  ``err``:
    the missing entry of the earliest hop, lowest ``u * N + d`` among them, as ``(path, hop,
    switch)``; else ``err[0]`` = a path still walking after ``4 N + 4`` hops (a loop)."""
    n = t0_t.shape[0]
    for d in range(n):
        for u in range(n):
            if u == d:
                continue
            x, ph, h = u, 0, 0
            while x != d:
                if h == 4 * n + 4:
                    if err[1] < 0:
                        err[0] = u * n + d
                    break
                seen[ph, d, x] = True
                j = t1_t[d, x] if ph else t0_t[d, x]
                if j < 0:
                    p = u * n + d
                    if err[1] < 0 or h < err[1] or (h == err[1] and p < err[0]):
                        err[0], err[1], err[2] = p, h, x
                    break
                if by_port and leave[x, j]:
                    ph = 1
                x = adj[x, j]
                h += 1


def _close(topo, t1: np.ndarray, trunk: np.ndarray) -> None:
    """Add to ``trunk`` every switch on the phase-1 walk from a trunk switch to ``d``."""
    n = topo.n_switches
    u, d = np.nonzero(trunk)
    keep = u != d
    u, d = u[keep], d[keep]
    for _ in range(n + 1):
        if not len(u):
            return
        u = topo.adj[u, t1[u, d]]
        new = ~trunk[u, d]
        trunk[u, d] = True
        u, d = u[new], d[new]   # a switch already on the trunk has its walk marked already
    raise NotExpressible(f"phase-1 table loops on {topo.name()}")


def _min_alternative(ts: TableSet, k: int) -> np.ndarray:
    """MIN layer ``k``: the ``k``-th equal-cost minimal port after the tie-break's choice."""
    topo = ts.topo
    n, r = topo.adj.shape
    alt = ts.alternatives.astype(np.uint64)
    bits = ((alt[..., None] >> np.arange(r, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    count = bits.sum(axis=-1)
    base = ts.tables["min"].astype(np.int64)
    rank0 = np.where(base >= 0, np.cumsum(bits, axis=-1)[np.arange(n)[:, None],
                                                          np.arange(n)[None, :],
                                                          np.maximum(base, 0)] - 1, 0)
    want = (rank0 + k) % np.maximum(count, 1)
    pos = np.argmax(np.cumsum(bits, axis=-1) > want[..., None], axis=-1)
    out = np.where(count > 0, pos, -1).astype(np.int16)
    out[np.arange(n), np.arange(n)] = -1
    return out


# ---------------------------------------------------------------------------------------------
# walks
# ---------------------------------------------------------------------------------------------
def walk_layers(topo, nxt: np.ndarray):
    """Walk every (layer, source switch, destination switch) path of ``nxt``.

    Returns ``(chans, ins)``: ``int64[P, H]`` channel ``u * R + j`` of hop ``i`` (``-1`` past
    the end) and ``int64[P, H]`` the in slot at hop ``i`` (0: from a host, ``1 + j'``: from
    network port ``j'``), with ``P = L * N * N`` in ``(k, u, d)`` order.  Raises
    :class:`NotExpressible` on a missing entry or a loop.
    """
    L, n, _ = nxt.shape
    r = topo.radix
    adj = topo.adj.astype(np.int64)
    peer = topo.peer.astype(np.int64)
    P = L * n * n
    k, u, d = (a.ravel() for a in np.meshgrid(np.arange(L), np.arange(n), np.arange(n),
                                              indexing="ij"))
    cur, slot = u.astype(np.int64), np.zeros(P, dtype=np.int64)
    live = np.flatnonzero(cur != d)
    steps_c, steps_i = [], []
    for _ in range(n + 1):
        if not len(live):
            break
        c = cur[live]
        j = nxt[k[live], c, d[live]].astype(np.int64)
        if (j < 0).any():
            b = int(np.flatnonzero(j < 0)[0])
            raise NotExpressible(f"layer {int(k[live[b]])} has no entry at switch {int(c[b])} toward "
                          f"{int(d[live[b]])}")
        col_c = np.full(P, -1, dtype=np.int64)
        col_i = np.zeros(P, dtype=np.int64)
        col_c[live] = c * r + j
        col_i[live] = slot[live]
        steps_c.append(col_c), steps_i.append(col_i)
        cur[live] = adj[c, j]
        slot[live] = peer[c, j] + 1
        live = live[cur[live] != d[live]]
    else:
        b = int(live[0])
        raise NotExpressible(f"layer {int(k[b])} loops from switch {int(u[b])} toward {int(d[b])}")
    if not steps_c:
        return np.full((P, 0), -1, dtype=np.int64), np.zeros((P, 0), dtype=np.int64)
    return np.stack(steps_c, axis=1), np.stack(steps_i, axis=1)


def _lengths(topo, nxt: np.ndarray) -> np.ndarray:
    hops, err = _hop_counts(nxt, topo.adj.astype(np.int64))
    if err:
        raise NotExpressible(err)
    return hops


def _hop_counts(nxt: np.ndarray, adj: np.ndarray) -> tuple[np.ndarray, str]:
    """``int16[L, N, N]`` path lengths of ``nxt`` and, for a missing entry or a loop,
    :func:`walk_layers`'s message (else ``""``) — without its ``P x H`` arrays, which reach
    gigabytes at N = 4096."""
    L, n, _ = nxt.shape
    hops = np.empty((L, n, n), dtype=np.int16)
    by_d = np.empty((n, n), dtype=np.int16)
    for k in range(L):
        if lengths(adj, by_dst(nxt[k]), by_d)[0] >= 0:
            break       # a missing entry or a loop: _walk_hops finds the one to report
        hops[k] = by_dst(by_d)
    else:
        return hops, ""
    nxt_t = np.ascontiguousarray(nxt.transpose(0, 2, 1))
    err = np.full(4, -1, dtype=np.int64)
    _walk_hops(nxt_t, adj, hops, err)
    p, step, lp = err[0], err[1], err[2]
    if step >= 0:
        return hops, f"layer {p // (n * n)} has no entry at switch {err[3]} toward {p % n}"
    if lp >= 0:
        return hops, f"layer {lp // (n * n)} loops from switch {lp // n % n} toward {lp % n}"
    return hops, ""


@njit(cache=True)
def _walk_hops(nxt_t, adj, hops, err):
    """Walk every (layer, source, destination) path of ``nxt_t[k, d, u]`` (destination-major:
    a destination's walks stay in one cached row).  ``err`` receives what
    :func:`walk_layers` reports first: the missing entry of the earliest hop, lowest path
    ``(k * N + u) * N + d`` among them, as ``(path, hop, switch)`` in ``err[0, 1, 3]``; else
    in ``err[2]`` the lowest path still walking after ``N + 1`` hops (a loop)."""
    L, n, _ = nxt_t.shape
    for k in range(L):
        for d in range(n):
            row = nxt_t[k, d]
            for u in range(n):
                x, h = u, 0
                while x != d and h <= n:
                    j = row[x]
                    if j < 0:
                        p = (k * n + u) * n + d
                        if err[1] < 0 or h < err[1] or (h == err[1] and p < err[0]):
                            err[0], err[1], err[3] = p, h, x
                        break
                    x = adj[x, j]
                    h += 1
                if x != d and h > n:
                    p = (k * n + u) * n + d
                    if err[2] < 0 or p < err[2]:
                        err[2] = p
                hops[k, u, d] = h


# ---------------------------------------------------------------------------------------------
# service levels
# ---------------------------------------------------------------------------------------------
def assign_sls(layers: IbLayers, max_sls: int = IB_DATA_VLS - 1) -> IbLayers:
    """Give every path an SL so that, with VL ``1 + SL`` on hops that enter from a switch,
    each VL's channel dependency graph is acyclic (hops from a host use VL 0, which depends
    only on VLs >= 1, so it closes no cycle).

    First fit, longest paths first (``layers.hops``; ties in ``(layer, source, destination)``
    order): a path joins the lowest SL whose dependency graph stays acyclic with the path's
    dependencies added (a new dependency ``a -> b`` is refused when ``b`` already reaches
    ``a``).  On the fabrics of the tests this needs fewer SLs than DFSSSP's cycle breaking
    (Domke et al. 2011), e.g. 4 instead of 6 for DSN-F n = 64 and 2 instead of 3 for an 8x8
    torus.  Raises :class:`NotExpressible` as soon as a path fits none of the ``max_sls`` SLs: the
    first fit of a prefix of the paths does not depend on the rest, so stopping there gives
    the answer of the whole run (DSN-F n = 4096 fails within its first 0.5 % of paths).

    Complexity: O(P H) plus, per new dependency against an SL's topological order, a search
    of the channels between its two ends (Pearce and Kelly 2006); a path whose dependencies
    another path with the same layer, second switch and destination already placed costs
    O(H).
    """
    topo = layers.ts.topo
    L = layers.num_layers
    same = [next(i for i in range(k + 1) if np.array_equal(layers.nxt[i], layers.nxt[k]))
            for k in range(L)]
    sl = np.zeros(layers.nxt.size, dtype=np.uint8)
    bad = _first_fit(layers.nxt, layers.hops, topo.adj.astype(np.int64),
                     topo.peer.astype(np.int64), np.array(same, dtype=np.int64), max_sls, sl)
    if bad:
        # fewer layers mean fewer dependencies; at LMC 0 there is one layer already
        hint = ("lower the LMC" if layers.lmc else "LMC 0 cannot be lowered: this routing "
                "does not fit InfiniBand's VLs on this fabric")
        raise NotExpressible(f"{layers.ts.routing} on {topo.name()} with LMC {layers.lmc}: "
                      f"more than {max_sls} SLs needed (VL 0 + one VL per SL must fit "
                      f"{IB_DATA_VLS} data VLs); {hint}")
    layers.sl = sl.reshape(layers.nxt.shape)
    return layers


@njit(cache=True)
def _first_fit(nxt, hops, adj, peer, same, max_sls, sl):
    """SLs of every path of three or more hops by first fit into ``sl`` (flat ``(layer,
    source, destination)``), longest first; returns whether some path fits no SL.

    SL ``s``'s graph is the bit set ``g[s, a]``: bit ``j`` when channel ``a = u * R + i``
    depends on port ``j`` of the switch behind it; ``rank[s]`` is a topological order of it.
    Bits and 32-bit ranks keep a search's data in the core's cache (a quarter faster at
    N = 4096).
    The dependencies of a path are those of its walk from the second switch on, so paths of
    one layer (``same``: the first identical layer) with the same second switch and
    destination share them — and their SL: lower SLs refused them once, and graphs only
    grow."""
    L, n, _ = nxt.shape
    r = adj.shape[1]
    C = n * r
    g = np.zeros((max_sls, C, (r + 7) // 8), dtype=np.uint8)
    rank = np.empty((max_sls, C), dtype=np.int32)
    for s in range(max_sls):
        rank[s] = np.arange(C)
    out = np.full(C, -1, dtype=np.int32)       # first channel of the switch behind a channel
    into = np.full((n, r), -1, dtype=np.int32)  # the channel entering switch u on port j
    for u in range(n):
        for j in range(r):
            if adj[u, j] >= 0:
                out[u * r + j] = adj[u, j] * r
                into[u, j] = adj[u, j] * r + peer[u, j]
    memo = np.full((L, n, n), -1, dtype=np.int8)
    chans = np.empty(n + 1, dtype=np.int64)
    added = np.empty(n + 1, dtype=np.int64)
    seen = np.zeros(C, dtype=np.int64)
    work = np.empty(C, dtype=np.int32)
    fwd = np.empty(C, dtype=np.int32)
    back = np.empty(C, dtype=np.int32)
    flat = hops.ravel()
    tick = 0
    for length in range(flat.max(), 2, -1):
        for p in range(flat.shape[0]):
            if flat[p] != length:
                continue
            k, x, d = p // (n * n), p // n % n, p % n
            for m in range(length):
                j = nxt[k, x, d]
                chans[m] = x * r + j
                x = adj[x, j]
            v = chans[1] // r
            if memo[same[k], v, d] >= 0:
                sl[p] = memo[same[k], v, d]
                continue
            for s in range(max_sls):
                na, ok = 0, True
                for i in range(1, length - 1):
                    a, j = chans[i], chans[i + 1] % r
                    if g[s, a, j >> 3] & (1 << (j & 7)):
                        continue
                    tick += 1
                    if chans[i + 1] == a or not _insert(g[s], rank[s], out, into, a, j, seen,
                                                        tick, work, fwd, back):
                        ok = False
                        break
                    added[na] = i
                    na += 1
                if ok:
                    sl[p] = memo[same[k], v, d] = s
                    break
                for t in range(na):       # removing edges keeps the order topological
                    a, j = chans[added[t]], chans[added[t] + 1] % r
                    g[s, a, j >> 3] &= ~np.uint8(1 << (j & 7))
            else:
                return True
    return False


@njit(cache=True)
def _insert(gs, rank, out, into, a, j, seen, tick, work, fwd, back):
    """Add the dependency of channel ``a`` on port ``j`` behind it (channel ``b``) to the
    acyclic graph ``gs`` unless ``b`` reaches ``a`` (then return False).  Keeps ``rank``
    topological as Pearce and Kelly (2006) do: only when ``rank[b] < rank[a]`` is anything
    searched — forward from ``b`` and backward from ``a``, within the ranks between — and
    the channels found take the ranks they held, the backward ones first, each set in its
    old order."""
    b = out[a] + j
    lo, hi = rank[b], rank[a]
    if lo < hi:
        nf = _search(gs, rank, out, into, b, hi, True, seen, tick, work, fwd)
        if nf < 0:
            return False
        nb = _search(gs, rank, out, into, a, lo, False, seen, tick, work, back)
        C = rank.shape[0]
        kf = np.empty(nf, dtype=np.int64)         # rank and channel in one sortable key
        for i in range(nf):
            kf[i] = np.int64(rank[fwd[i]]) * C + fwd[i]
        kb = np.empty(nb, dtype=np.int64)
        for i in range(nb):
            kb[i] = np.int64(rank[back[i]]) * C + back[i]
        kf.sort()
        kb.sort()
        # merge the two rank lists into the free slots; work and fwd hold the new ranks
        i = f = 0
        for t in range(nb + nf):
            if f == nf or (i < nb and kb[i] < kf[f]):
                slot = kb[i] // C
                i += 1
            else:
                slot = kf[f] // C
                f += 1
            x = kb[t] % C if t < nb else kf[t - nb] % C
            work[t] = x
            fwd[t] = slot
        for t in range(nb + nf):
            rank[work[t]] = fwd[t]
    gs[a, j >> 3] |= np.uint8(1 << (j & 7))
    return True


_BIT_INDEX = np.zeros(129, dtype=np.int64)     # bit number of a one-bit byte
_BIT_INDEX[1 << np.arange(8)] = np.arange(8)


@njit(cache=True)
def _search(gs, rank, out, into, start, bound, forward, seen, tick, work, found):
    """Channels reachable from ``start`` (forward: along dependencies, ranks below
    ``bound``; backward: against them, ranks above ``bound``) into ``found``; returns their
    number, or -1 when a forward search meets the channel ranked ``bound``."""
    r = into.shape[1]
    work[0], top, nfound = start, 1, 0
    seen[start] = tick
    while top:
        top -= 1
        x = work[top]
        found[nfound] = x
        nfound += 1
        if forward:
            for byte in range(gs.shape[1]):     # only the set bits: most bytes are 0
                bits = np.int64(gs[x, byte])
                while bits:
                    low = bits & -bits
                    bits ^= low
                    y = out[x] + byte * 8 + _BIT_INDEX[low]
                    if rank[y] == bound:
                        return -1
                    if rank[y] < bound and seen[y] != tick:
                        seen[y] = tick
                        work[top] = y
                        top += 1
        else:
            i = x % r
            for j in range(r):              # the channels into x's switch, one per port
                y = into[x // r, j]
                if (y >= 0 and gs[y, i >> 3] & (1 << (i & 7)) and rank[y] > bound
                        and seen[y] != tick):
                    seen[y] = tick
                    work[top] = y
                    top += 1
    return nfound


def _cycle(g: csr_matrix, label: np.ndarray, comp: int) -> list[tuple[int, int]]:
    """One cycle inside strongly connected component ``comp`` (every member has a successor
    in the component, so following successors must repeat a node)."""
    start = int(np.flatnonzero(label == comp)[0])
    pos, path, x = {}, [], start
    while x not in pos:
        pos[x] = len(path)
        path.append(x)
        succ = g.indices[g.indptr[x]:g.indptr[x + 1]]
        x = int(succ[label[succ] == comp][0])
    loop = path[pos[x]:] + [x]
    return list(zip(loop[:-1], loop[1:]))


def sl2vl_array(topo, num_sls: int) -> np.ndarray:
    """``uint8[N, R + 1, R + 1, 16]`` VL per (switch, in slot, out slot, SL); slot 0 is a host
    port (or, for in slots, the management port 0), slot ``1 + j`` network port index ``j``.
    VL 0 when entering from slot 0, VL ``1 + SL`` from a switch; SLs no path uses map like
    SL 0."""
    n, r = topo.adj.shape
    per_sl = np.ones(NUM_SLS, dtype=np.uint8)
    per_sl[:num_sls] = 1 + np.arange(num_sls)
    out = np.zeros((n, r + 1, r + 1, NUM_SLS), dtype=np.uint8)
    out[:, 1:, :, :] = per_sl
    return out


def ib_routing(ts: TableSet, lmc: int = 0, seed: int = 1) -> tuple[IbLayers, dict]:
    """Layers, SLs and their :func:`verify_ib` report; raises :class:`NotExpressible` when the
    routing does not fit (too many SLs)."""
    layers = assign_sls(build_layers(ts, lmc, seed))
    return layers, verify_ib(layers, sl2vl_array(ts.topo, layers.num_sls))


# ---------------------------------------------------------------------------------------------
# verification under IB semantics
# ---------------------------------------------------------------------------------------------
def verify_ib(layers: IbLayers, sl2vl: np.ndarray, max_cycle_print: int = 32) -> dict:
    """Prove the layers deliver and are deadlock-free under InfiniBand's semantics.

    Walks every (layer, source switch, destination switch) path on ``layers.nxt`` (loop-free
    delivery within the layer's hop bound) and builds the channel dependency graph over
    ``(switch, out port, VL)`` where each hop's VL is ``sl2vl[switch, in slot, out slot, SL]``
    with the path's SL — the (in port, out port, SL) -> VL lookup a switch does.  Hosts' own
    links are left out: an injection channel has no incoming and an ejection channel no
    outgoing dependency, so neither can lie on a cycle.

    Returns a JSON-ready dict with ``ok``, ``errors``, per-layer ``layers`` (kind, hop bound,
    histogram), ``sls_used``, ``vls_used``, ``data_vls`` and the CDG size per VL.

    Complexity: O(L N^2 H) compiled steps for paths of H hops; memory O(N R^2 V^2) bits of
    dependencies for ports of R network ports and V VLs.
    """
    ts = layers.ts
    topo = ts.topo
    n, r = topo.adj.shape
    errors: list[str] = []
    rep: dict = {"ok": True, "routing": ts.routing, "topology": topo.name(), "lmc": layers.lmc,
                 "errors": errors, "data_vls": IB_DATA_VLS, "shortcuts": layers.shortcuts}
    adj = topo.adj.astype(np.int64)
    hops, err = _hop_counts(layers.nxt, adj)
    if err:
        errors.append(err)
        rep["ok"] = False
        return rep
    off = ~np.eye(n, dtype=bool)
    rep["layers"] = []
    for k in range(layers.num_layers):
        h = hops[k][off]
        worst = int(h.max(initial=0))
        rep["layers"].append({"offset": k, "kind": layers.kinds[k], "bound": layers.bounds[k],
                              "max_hops": worst, "hist": {str(x): int(c) for x, c in
                                                          enumerate(np.bincount(h)) if c}})
        if worst > layers.bounds[k]:
            errors.append(f"layer {k} ({layers.kinds[k]}): a path has {worst} hops; the bound "
                          f"is {layers.bounds[k]}")
    V = int(sl2vl.max(initial=0)) + 1
    deps = np.zeros((n * r * V, r * V), dtype=bool)
    vl_seen = np.zeros(256, dtype=bool)
    _ib_deps(layers.nxt, adj, topo.peer.astype(np.int64), layers.sl, sl2vl, V, deps, vl_seen)
    rep["sls_used"] = int(np.count_nonzero(np.bincount(layers.sl[:, off].ravel(), minlength=1)))
    used_vls = np.flatnonzero(vl_seen)
    rep["vls_used"] = int(used_vls.size)
    rep["vl_max"] = int(used_vls.max(initial=0))
    if rep["vl_max"] >= IB_DATA_VLS:
        errors.append(f"VL {rep['vl_max']} used; ibsim ports report {IB_DATA_VLS} data VLs "
                      f"(0..{IB_DATA_VLS - 1})")
    # node numbering (channel * 16 + VL) and order (sorted) of the edges as before
    a, b = cdg_edges(deps, adj, V, NUM_SLS)
    rep["cdg"], cyc = _cdg_summary(a, b, n * r * NUM_SLS, NUM_SLS)
    if cyc:
        text = " -> ".join(f"{x // NUM_SLS // r}:"
                           f"{topo.port_number(x // NUM_SLS // r, x // NUM_SLS % r)}"
                           f"(vl{x % NUM_SLS})" for x in cyc[:max_cycle_print])
        errors.append(f"IB channel dependency graph has a cycle of {len(cyc)} channels: "
                      f"{text}")
    rep["ok"] = not errors
    return rep


@njit(cache=True)
def _ib_deps(nxt, adj, peer, sl, sl2vl, V, deps, vl_seen):
    """Walk every (layer, source, destination) path (they all arrive: :func:`_walk_hops`
    first) with its SL; marks ``vl_seen`` and ``deps[in channel * V + VL, out port * V +
    VL]`` for consecutive hops."""
    L, n, _ = nxt.shape
    r = adj.shape[1]
    for k in range(L):
        for u in range(n):
            for d in range(n):
                s = sl[k, u, d]
                x, slot, prev = u, 0, -1
                while x != d:
                    j = nxt[k, x, d]
                    vl = sl2vl[x, slot, j + 1, s]
                    vl_seen[vl] = True
                    if prev >= 0:
                        deps[prev, j * V + vl] = True
                    prev = (x * r + j) * V + vl
                    slot = peer[x, j] + 1
                    x = adj[x, j]


# ---------------------------------------------------------------------------------------------
# verification of the exported files
# ---------------------------------------------------------------------------------------------
# how a (source HCA, destination LID) walk through the files ends; _OK = delivered
_OK, _LOOP, _DEAD_PORT, _WRONG_NODE, _DROPPED, _TOO_LONG = range(6)
_FAILS = {_LOOP: "loop", _DEAD_PORT: "leave on a port without a link",
          _WRONG_NODE: "end at another node than the LID's", _DROPPED: "meet VL 15 (drop)",
          _TOO_LONG: "exceed their LID offset's hop bound"}
SL_BLOCK_CELLS = 8_000_000     # (source HCA, LID) SLs computed per block: bounds the memory


@dataclass(eq=False)
class _Files:
    """The exported files as arrays; switches and HCAs by their position in guids.json."""

    sw_id: list[int]            # guids.json "id" of each switch
    host_name: list[str]
    lft: np.ndarray             # int16[N, T] out port per (switch, LID)
    vl: np.ndarray              # uint8[N, P + 1, P + 1, 16] VL per (switch, in, out, SL)
    ca_vl: np.ndarray           # uint8[H, 16] the HCA's VL per SL on its own link
    peer_sw: np.ndarray         # int32[N, P + 1] switch behind a port, -1 for none
    peer_port: np.ndarray       # int32[N, P + 1] its port number there
    peer_host: np.ndarray       # int32[N, P + 1] HCA behind a port, -1 for none
    host_sw: np.ndarray         # int32[H] switch and port each HCA is wired to
    host_port: np.ndarray
    lid_host: np.ndarray        # int32[T] HCA owning a LID, -1 for none
    lid_sw: np.ndarray          # int32[T] switch owning a LID, -1 for none
    lid_off: np.ndarray         # int32[T] LID offset (0 for a switch LID)


def _file_arrays(f) -> _Files:
    """Arrays of an :func:`emulation.ibsim.apply.load_table_set` result; raises its
    :class:`~emulation.ibsim.BadInput` for wiring a packet could not follow."""
    switches, hosts = f.guids["switches"], f.guids["hosts"]
    n, H, step = len(switches), len(hosts), 1 << f.lmc
    sw_of = {int(s["guid"], 16): k for k, s in enumerate(switches)}
    host_of = {int(h["node_guid"], 16): k for k, h in enumerate(hosts)}
    P1 = max(int(s["num_ports"]) for s in switches) + 1
    T = max(max(int(s["lid"]) for s in switches), max(int(h["lid"]) for h in hosts) + step) + 1
    lid_host = np.full(T, -1, dtype=np.int32)
    lid_sw = np.full(T, -1, dtype=np.int32)
    lid_off = np.zeros(T, dtype=np.int32)
    lid_sw[[int(s["lid"]) for s in switches]] = np.arange(n, dtype=np.int32)
    base = np.array([int(h["lid"]) for h in hosts], dtype=np.int64)
    lid_host[(base[:, None] + np.arange(step)).ravel()] = np.repeat(np.arange(H), step)
    lid_off[(base[:, None] + np.arange(step)).ravel()] = np.tile(np.arange(step), H)

    peer_sw = np.full((n, P1), -1, dtype=np.int32)
    peer_port = np.full((n, P1), -1, dtype=np.int32)
    peer_host = np.full((n, P1), -1, dtype=np.int32)
    host_sw = np.full(H, -1, dtype=np.int32)
    host_port = np.full(H, -1, dtype=np.int32)
    for g, (kind, ports) in f.net.items():
        for p, (pg, pp) in ports.items():
            if not 0 < p < P1 or not 0 < pp < P1:
                raise BadInput(f"fabric.net: link 0x{g:016x}[{p}] - 0x{pg:016x}[{pp}] uses a "
                               f"port beyond the {P1 - 1} ports of the largest switch")
            if kind == "Hca":
                if p == 1 and pg in sw_of:
                    host_sw[host_of[g]], host_port[host_of[g]] = sw_of[pg], pp
                continue
            u = sw_of[g]
            if pg in sw_of:
                peer_sw[u, p], peer_port[u, p] = sw_of[pg], pp
            else:
                peer_host[u, p] = host_of[pg]
    lonely = np.flatnonzero(host_sw < 0)
    if len(lonely):
        raise BadInput(f"fabric.net: HCA {hosts[lonely[0]]['name']} has no port 1 linked to a "
                       f"switch ({len(lonely)} such HCAs); expected each HCA wired to one")

    lft = np.zeros((n, T), dtype=np.int16)
    # the load checks demand a row for every (in, out) a switch can use; should a wiring
    # mismatch reach one they do not, it reads as a drop instead of passing
    vl = np.full((n, P1, P1, NUM_SLS), VL_DROP, dtype=np.uint8)
    for g, entries in f.lfts.items():
        u = sw_of[g]
        lft[u, np.fromiter(entries.keys(), np.int64, len(entries))] = \
            np.fromiter(entries.values(), np.int16, len(entries))
    ca_vl = np.empty((H, NUM_SLS), dtype=np.uint8)
    ca_of = {int(h["port_guid"], 16): k for k, h in enumerate(hosts)}
    for g, (kind, rows) in f.sl2vl.items():
        if kind == "Switch":
            io = np.array(list(rows.keys()), dtype=np.int64).reshape(-1, 2)
            vl[sw_of[g], io[:, 0], io[:, 1]] = np.array(list(rows.values()), dtype=np.uint8)
        else:
            ca_vl[ca_of[g]] = rows[(0, 0)]
    return _Files([int(s["id"]) for s in switches], [h["name"] for h in hosts], lft, vl, ca_vl,
                  peer_sw, peer_port, peer_host, host_sw, host_port, lid_host, lid_sw, lid_off)


class _PathSls:
    """``path-sl.txt`` as OpenSM's ``path_sl`` hook applies it (first matching rule; none: the
    QoS policy's SL 0), evaluated for blocks of source HCAs over every LID at once."""

    def __init__(self, f, fa: _Files):
        rules = f.path_sl.rules
        hosts, switches = f.guids["hosts"], f.guids["switches"]
        step, T = 1 << f.lmc, len(fa.lid_off)
        self.none = len(rules)          # "no rule" sorts after every rule
        self.sl = np.array([r[3] for r in rules] + [0], dtype=np.uint8)
        src_of = {int(h["port_guid"], 16): k for k, h in enumerate(hosts)}
        lids_of = {int(h["port_guid"], 16): (int(h["lid"]), step) for h in hosts}
        lids_of.update((int(s["guid"], 16), (int(s["lid"]), 1)) for s in switches)
        self.cols = np.full(T, self.none, dtype=np.int32)      # best wildcard-source rule
        self.src_any, exact = [], []
        for k, (src, dst, off, _) in enumerate(rules):
            if src is not None and dst is not None:
                if src in src_of:    # a switch's port never sends the walked packets
                    exact.append((k, src_of[src], *lids_of[dst], -1 if off is None else off))
                continue
            if dst is None:
                sel = np.arange(T) if off is None else np.flatnonzero(fa.lid_off == off)
            else:
                lo, cnt = lids_of[dst]
                sel = lo + (np.arange(cnt) if off is None else np.arange(off, min(off + 1, cnt)))
            if src is None:
                np.minimum.at(self.cols, sel, k)
            elif src in src_of:
                self.src_any.append((src_of[src], sel, k))
        # the (source, destination) rules, one (row, LID, rule) triple per LID they cover;
        # there are hundreds of thousands, so no NumPy call per rule
        k, row, lo, cnt, off = np.array(exact, dtype=np.int64).reshape(-1, 5).T
        cnt = np.where(off < 0, cnt, (off < cnt).astype(np.int64))
        lo = np.where(off < 0, lo, lo + off)
        first = np.repeat(np.cumsum(cnt) - cnt, cnt)
        col = np.repeat(lo, cnt) + np.arange(int(cnt.sum())) - first
        row, k = np.repeat(row, cnt), np.repeat(k, cnt)
        order = np.argsort(row, kind="stable")
        self.rows, self.rcols, self.ridx = row[order], col[order], k[order]

    def block(self, h0: int, h1: int) -> np.ndarray:
        """``uint8[h1 - h0, T]``: the SL of every (source HCA, destination LID)."""
        best = np.repeat(self.cols[None, :], h1 - h0, axis=0)
        a, b = np.searchsorted(self.rows, [h0, h1])
        np.minimum.at(best, (self.rows[a:b] - h0, self.rcols[a:b]), self.ridx[a:b])
        for h, sel, k in self.src_any:
            if h0 <= h < h1:
                best[h - h0, sel] = np.minimum(best[h - h0, sel], k)
        return self.sl[best]


@njit(cache=True)
def _walk_files(h0, sl, host_sw, host_port, ca_vl, lft, vlmap, peer_sw, peer_port, peer_host,
                lid_host, lid_sw, lid_off, bound, deps, hist, vl_seen, sl_seen, fails):
    """Walk every (source HCA ``h0 + b``, destination LID) packet through the LFTs with SL
    ``sl[b, lid]``, taking each hop's VL from the SL2VL rows as a switch does.  Marks
    ``deps[in channel, out port * V + out VL]`` for consecutive switch-to-switch channels
    ``(switch * (P + 1) + port) * V + VL``, counts delivered paths by hops in ``hist[offset]``
    (row ``L``: switch LIDs), and per failure kind its count and first (HCA, LID) in
    ``fails``."""
    n, T = lft.shape
    P1 = peer_sw.shape[1]
    V = deps.shape[1] // P1
    L = hist.shape[0] - 1
    for b in range(sl.shape[0]):
        h = h0 + b
        for lid in range(1, T):
            dh, ds = lid_host[lid], lid_sw[lid]
            if (dh < 0 and ds < 0) or dh == h:
                continue
            s = sl[b, lid]
            sl_seen[s] = True
            u, i, hops, inch, status = host_sw[h], host_port[h], 0, -1, _OK
            if ca_vl[h, s] == VL_DROP:
                status = _DROPPED
            while status == _OK:
                o = lft[u, lid]
                if o == 0:
                    if ds != u:
                        status = _WRONG_NODE
                    break
                vl = vlmap[u, i, o, s]
                if vl == VL_DROP:
                    status = _DROPPED
                    break
                vl_seen[vl] = True
                v = peer_sw[u, o]
                if v < 0:
                    if peer_host[u, o] < 0:
                        status = _DEAD_PORT
                    elif peer_host[u, o] != dh:
                        status = _WRONG_NODE
                    break
                ch = (u * P1 + o) * V + vl
                if inch >= 0:
                    deps[inch, o * V + vl] = True
                inch, i, u = ch, peer_port[u, o], v
                hops += 1
                if hops > n:
                    status = _LOOP
            row = L if ds >= 0 else lid_off[lid]
            if status == _OK and hops > bound[row]:
                status = _TOO_LONG
            if status == _OK:
                hist[row, hops] += 1
            else:
                fails[status, 0] += 1
                if fails[status, 0] == 1:
                    fails[status, 1], fails[status, 2] = h, lid


def verify_ib_files(f, ts: TableSet, max_cycle_print: int = 32,
                    block_cells: int = SL_BLOCK_CELLS) -> dict:
    """Prove an InfiniBand export from its files alone: what OpenSM loads (``lfts.dump``,
    ``sl2vl.dump``, ``path-sl.txt``), the LIDs of ``guids.json`` and the wiring ibsim builds
    (``fabric.net``), as :func:`emulation.ibsim.apply.load_table_set` read them into ``f``.

    * Every (source HCA, destination LID) packet — HCA and switch LIDs, every LID offset — is
      walked through the LFTs with the SL ``path-sl.txt`` gives it (first matching rule, as
      OpenSM's ``path_sl`` hook); each hop's VL is the SL2VL row ``(in port, out port)[SL]``
      of its switch, the first from the HCA's own table.  It must reach the LID's node,
      without a loop, a port without a link or VL 15, within the hop bound of its offset's
      layer (switch LIDs: layer 0's), which comes from ``ts``, not from the files.
    * The channel dependency graph over ``(switch, out port, VL)`` of those walks must be
      acyclic.  An HCA's link is left out: its injection channel has no incoming and its
      ejection channel no outgoing dependency.
    * The files must agree with ``ts``: guids.json's GUIDs and LIDs with the address plan,
      fabric.net's links with the topology, and every LFT entry with the layers
      :func:`build_layers` gives ``ts`` at the files' LMC and recorded seed.

    Returns a JSON-ready dict like :func:`verify_ib`'s (``layers`` per LID offset counting
    walked (HCA, LID) paths, ``switch_lids``, ``tables``); ``errors`` print the first failing
    path or the cycle channel by channel.  Raises ``BadInput`` when fabric.net's wiring
    cannot be walked.

    Complexity: O(H T D) compiled steps for H HCAs, T LIDs and paths of D hops, plus the
    path-SL rules expanded once; memory O(N P^2 V^2) bits of dependencies for N switches of
    P ports, and SL blocks of ``block_cells`` (source HCA, LID) pairs.
    """
    fa = _file_arrays(f)
    seed = int(f.guids.get("ib", {}).get("seed", 1))
    errors: list[str] = []
    rep: dict = {"ok": False, "source": "files", "dir": str(f.dir), "routing": ts.routing,
                 "topology": ts.topo.name(), "lmc": f.lmc, "seed": seed, "errors": errors,
                 "data_vls": IB_DATA_VLS}
    try:
        layers = build_layers(ts, f.lmc, seed)
    except NotExpressible as e:
        errors.append(f"the table set has no InfiniBand layers at LMC {f.lmc}: {e}")
        return rep
    n, T = fa.lft.shape
    H, P1, V, L = len(fa.host_name), fa.peer_sw.shape[1], IB_DATA_VLS, layers.num_layers
    bound = np.array(layers.bounds + [layers.bounds[0]], dtype=np.int64)
    deps = np.zeros((n * P1 * V, P1 * V), dtype=bool)
    hist = np.zeros((L + 1, n + 2), dtype=np.int64)
    vl_seen = np.zeros(NUM_SLS, dtype=bool)
    sl_seen = np.zeros(NUM_SLS, dtype=bool)
    fails = np.zeros((len(_FAILS) + 1, 3), dtype=np.int64)
    first_sl: dict[int, int] = {}
    sls = _PathSls(f, fa)
    rows = max(1, block_cells // T)
    for h0 in range(0, H, rows):
        blk = sls.block(h0, min(H, h0 + rows))
        _walk_files(h0, blk, fa.host_sw, fa.host_port, fa.ca_vl, fa.lft, fa.vl, fa.peer_sw,
                    fa.peer_port, fa.peer_host, fa.lid_host, fa.lid_sw, fa.lid_off, bound, deps,
                    hist, vl_seen, sl_seen, fails)
        for k in np.flatnonzero(fails[:, 0]).tolist():
            if k not in first_sl:       # its first failure is in this block
                first_sl[k] = int(blk[fails[k, 1] - h0, fails[k, 2]])
    for k, what in _FAILS.items():
        if fails[k, 0]:
            h, lid = int(fails[k, 1]), int(fails[k, 2])
            errors.append(f"{fails[k, 0]} (HCA, LID) paths {what}, e.g. "
                          f"{_path_text(fa, layers, bound, h, lid, first_sl[k])}")
    rep["paths"] = int(hist.sum() + fails[:, 0].sum())
    rep["layers"] = [dict(offset=k, kind=layers.kinds[k], **_hist(hist[k], bound[k]))
                     for k in range(L)]
    rep["switch_lids"] = _hist(hist[L], bound[L])
    rep["sls_used"] = int(sl_seen.sum())
    rep["vls_used"] = int(vl_seen.sum())
    rep["vl_max"] = int(np.flatnonzero(vl_seen).max(initial=0))
    ins, outs = cdg_edges(deps, fa.peer_sw, V)
    rep["cdg"], cyc = _cdg_summary(ins, outs, n * P1 * V, V)
    if cyc:
        text = " -> ".join(f"{fa.sw_id[x // (P1 * V)]}:{x // V % P1}(vl{x % V})"
                           for x in cyc[:max_cycle_print])
        errors.append(f"IB channel dependency graph of the files has a cycle of {len(cyc)} "
                      f"channels: {text}")
    rep["tables"] = _agreement(f, fa, ts, layers, errors)
    rep["ok"] = not errors
    return rep


def _hist(h: np.ndarray, bound: int) -> dict:
    used = np.flatnonzero(h)
    return {"bound": int(bound), "max_hops": int(used.max(initial=0)),
            "hist": {str(x): int(h[x]) for x in used}}


def _path_text(fa: _Files, layers: IbLayers, bound: np.ndarray, h: int, lid: int,
               sl: int) -> str:
    """One walked packet, hop by hop (``switch:out port(vl)``), and how it ends."""
    dh, ds = int(fa.lid_host[lid]), int(fa.lid_sw[lid])
    k = int(fa.lid_off[lid])
    dst = (f"switch {fa.sw_id[ds]}" if ds >= 0 else
           f"{fa.host_name[dh]} offset {k} ({layers.kinds[k]})")
    head = f"{fa.host_name[h]} -> LID 0x{lid:04x} = {dst}, SL {sl}: "
    if fa.ca_vl[h, sl] == VL_DROP:
        return head + f"the HCA's SL2VL maps SL {sl} to VL {VL_DROP}"
    u, i, text, seen, hops = int(fa.host_sw[h]), int(fa.host_port[h]), [], set(), 0
    while True:
        if u in seen:
            text.append(f"{fa.sw_id[u]} again: a loop")
            break
        seen.add(u)
        o = int(fa.lft[u, lid])
        if o == 0:
            text.append(f"{fa.sw_id[u]}:0" + ("" if ds == u else " (not the LID's switch)"))
            break
        vl = int(fa.vl[u, i, o, sl])
        text.append(f"{fa.sw_id[u]}:{o}(vl{vl})")
        if vl == VL_DROP:
            text[-1] += f" dropped (SL2VL row in {i} out {o})"
            break
        if fa.peer_sw[u, o] < 0:
            ph = int(fa.peer_host[u, o])
            text.append(fa.host_name[ph] if ph >= 0 else "no link")
            break
        u, i, hops = int(fa.peer_sw[u, o]), int(fa.peer_port[u, o]), hops + 1
    row = len(layers.kinds) if ds >= 0 else k
    tail = f" ({hops} hops; the bound is {bound[row]})" if hops > bound[row] else ""
    return head + " -> ".join(text) + tail


def _cdg_summary(a: np.ndarray, b: np.ndarray, n_nodes: int, n_vl: int):
    """``({"dependencies", "per_vl"}, cycle)`` of an IB channel dependency graph whose nodes
    are ``channel * n_vl + VL`` and edges ``a -> b``; dependencies count by the VL they
    leave."""
    per = np.bincount(a % n_vl, minlength=1)
    return ({"dependencies": int(len(a)),
             "per_vl": {str(v): int(c) for v, c in enumerate(per) if c}},
            _find_cycle(a, b, n_nodes))


def _find_cycle(a: np.ndarray, b: np.ndarray, m: int) -> list[int]:
    """The nodes of one cycle of the graph with edges ``a -> b`` over ``m`` nodes, or []."""
    if not len(a):
        return []
    g = csr_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(m, m))
    ncomp, label = connected_components(g, directed=True, connection="strong")
    big = np.flatnonzero(np.bincount(label, minlength=ncomp) > 1)
    if len(big):
        return [x for x, _ in _cycle(g, label, int(big[0]))]
    return a[a == b][:1].tolist()


def _agreement(f, fa: _Files, ts: TableSet, layers: IbLayers, errors: list[str]) -> dict:
    """Append to ``errors`` where the files differ from ``ts``: guids.json's ids, GUIDs and
    LIDs against the address plan, fabric.net's links against the topology, the LFTs entry
    by entry against ``layers``.  Returns the LFT comparison's counts."""
    from tablegen.exports.files import host_port_guid, lft_lids, lft_row, lid_plan, switch_guid

    topo = ts.topo
    n, r = topo.adj.shape
    switches, hosts = f.guids["switches"], f.guids["hosts"]
    if (len(switches), len(hosts)) != (n, topo.n_hosts):
        errors.append(f"the files describe {len(switches)} switches and {len(hosts)} HCAs; "
                      f"the table set's {topo.name()} has {n} and {topo.n_hosts}")
        return {}
    plan = lid_plan(topo, f.lmc)
    ht = topo.host_table()
    got = np.array([[int(s["id"]), int(s["guid"], 16), int(s["lid"]), int(s["num_ports"])]
                    for s in switches], dtype=np.uint64)
    want = _u64(np.arange(n), switch_guid(np.arange(n)), plan.switch_lid, topo.hosts + r)
    got_h = np.array([[int(h["id"]), int(h["port_guid"], 16), int(h["lid"]), int(h["switch"]),
                       int(h["switch_port"])] for h in hosts], dtype=np.uint64)
    want_h = _u64(ht[:, 0], host_port_guid(ht[:, 0]), plan.host_lid, ht[:, 1], ht[:, 2])
    for what, a, b, fields in (("switch", got, want, "id, GUID, LID, ports"),
                               ("HCA", got_h, want_h, "id, port GUID, LID, switch, port")):
        bad = np.flatnonzero((a != b).any(axis=1))
        if len(bad):
            k = int(bad[0])
            errors.append(f"guids.json: {what} record {k} has ({fields}) = "
                          f"{a[k].tolist()}; the table set's address plan gives {b[k].tolist()}")
    if errors and errors[-1].startswith("guids.json"):
        return {}
    P1 = fa.peer_sw.shape[1]
    s, j = np.nonzero(topo.adj >= 0)
    t = topo.adj[s, j]
    exp_sw = np.full((n, P1), -1, dtype=np.int64)
    exp_port = np.full((n, P1), -1, dtype=np.int64)
    exp_host = np.full((n, P1), -1, dtype=np.int64)
    exp_sw[s, topo.hosts[s] + 1 + j] = t
    exp_port[s, topo.hosts[s] + 1 + j] = topo.hosts[t] + 1 + topo.peer[s, j]
    exp_host[ht[:, 1], ht[:, 2]] = ht[:, 0]
    exp_port[ht[:, 1], ht[:, 2]] = 1
    got_port = np.where(fa.peer_host >= 0, 1, fa.peer_port)
    bad = (exp_sw != fa.peer_sw) | (exp_port != got_port) | (exp_host != fa.peer_host)
    stray = np.flatnonzero((fa.host_sw != ht[:, 1]) | (fa.host_port != ht[:, 2]))
    if len(stray):
        h = int(stray[0])
        errors.append(f"fabric.net: HCA {fa.host_name[h]} is wired to switch "
                      f"{fa.host_sw[h]} port {fa.host_port[h]}; the topology has switch "
                      f"{ht[h, 1]} port {ht[h, 2]}")
        return {}
    if bad.any():
        u, p = (int(x[0]) for x in np.nonzero(bad))
        errors.append(f"fabric.net: port {p} of switch {u} is wired to "
                      f"{_peer_text(fa.peer_sw[u, p], got_port[u, p], fa.peer_host[u, p])}; "
                      f"the topology has "
                      f"{_peer_text(exp_sw[u, p], exp_port[u, p], exp_host[u, p])}")
        return {}
    lids = lft_lids(ts, plan)
    diff, first = 0, None
    for u in range(n):
        exp = lft_row(topo, lids, layers, u)
        bad = np.flatnonzero(fa.lft[u, lids[0]] != exp)
        diff += len(bad)
        if len(bad) and first is None:
            first = (u, int(lids[0][bad[0]]), int(fa.lft[u, lids[0][bad[0]]]), int(exp[bad[0]]),
                     int(lids[5][bad[0]]))
    if first:
        u, lid, got_p, exp_p, k = first
        errors.append(f"lfts.dump differs from the table set's layers (LMC {f.lmc}, seed "
                      f"{layers.info['seed']}) in {diff} of {n * len(lids[0])} entries, e.g. "
                      f"switch {u} LID 0x{lid:04x} (offset {k}, {layers.kinds[k]}): port "
                      f"{got_p} in the file, {exp_p} in the tables")
    return {"lft_entries": n * len(lids[0]), "lft_mismatches": diff}


def _u64(*cols) -> np.ndarray:
    """Columns as one uint64 array (np.stack would widen GUIDs next to ints to float64)."""
    return np.stack([np.asarray(c).astype(np.uint64) for c in cols], axis=1)


def _peer_text(sw: int, port: int, host: int) -> str:
    if host >= 0:
        return f"host {host}"
    return f"switch {sw} port {port}" if sw >= 0 else "nothing"
