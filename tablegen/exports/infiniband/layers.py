"""InfiniBand routing: the LMC path layers of a table set.

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
* SLs and VLs for the layers and their proof under IB semantics are
  :mod:`tablegen.exports.infiniband.sls`; the proof of the written files is
  :mod:`tablegen.exports.infiniband.verify_files`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.limits import NUM_SLS
from tablegen.routing.walk import by_dst, lengths
from tablegen.tables import PathClass, TableSet


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
        sl2vl: ``uint8[N, R + 1, R + 1, 16]`` VL per (switch, in slot, out slot, SL) — slot 0
            a host or the management port, ``1 + j`` network port ``j`` — once SLs are
            assigned (:func:`tablegen.exports.infiniband.sls.assign_vls`).
        scheme: how ``sl2vl`` was made: ``path`` (VL ``1 + SL`` after the first hop) or
            ``turn`` (per-hop labels, :mod:`tablegen.exports.infiniband.turns`).
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
    sl2vl: np.ndarray | None = None
    scheme: str = "path"

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
    hops = checked_lengths(topo, nxt)
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
            raise NotExpressible(f"{ts.routing} on {topo.name()}: no {cls.name} target toward "
                                 f"switch {d}; expected at least one candidate")
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
            raise NotExpressible(f"layer {int(k[live[b]])} has no entry at switch {int(c[b])} "
                                 f"toward {int(d[live[b]])}")
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


def checked_lengths(topo, nxt: np.ndarray) -> np.ndarray:
    """``int16[L, N, N]`` path lengths of ``nxt``; :class:`NotExpressible` for a missing
    entry or a loop."""
    hops, err = hop_counts(nxt, topo.adj.astype(np.int64))
    if err:
        raise NotExpressible(err)
    return hops


def hop_counts(nxt: np.ndarray, adj: np.ndarray) -> tuple[np.ndarray, str]:
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
