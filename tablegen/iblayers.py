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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .tables import PathClass, TableSet

__all__ = ["IB_DATA_VLS", "IbError", "IbLayers", "assign_sls", "build_layers", "ib_routing",
           "sl2vl_array", "verify_ib", "walk_layers"]

IB_DATA_VLS = 8        # data VLs an ibsim port reports (VLCap VL0-7); real HCAs often have 8 too
NUM_SLS = 16           # SL is a 4-bit field


class IbError(ValueError):
    """The routing cannot be expressed on InfiniBand; the message is one line."""


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
    from .routing import table_lengths

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
            raise IbError(f"{ts.routing} on {topo.name()}: no {cls.name} target toward switch "
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
    seen1 = np.zeros((n, n), dtype=bool)
    seen0 = np.zeros((n, n), dtype=bool)
    u, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    keep = u != d
    u, d = u[keep], d[keep]
    ph = np.zeros(len(u), dtype=bool)
    for _ in range(4 * n + 4):
        if not len(u):
            break
        seen1[u[ph], d[ph]] = True
        seen0[u[~ph], d[~ph]] = True
        j = np.where(ph, t1[u, d], t0[u, d]).astype(np.int64)
        if (j < 0).any():
            raise IbError(f"{ts.routing} on {topo.name()}: no {cls.name} entry at switch "
                          f"{int(u[j < 0][0])} toward {int(d[j < 0][0])}")
        if cls.exit == "port":
            ph = ph | ts.exit_port[u, j]
        u = topo.adj[u, j]
        more = u != d
        u, d, ph = u[more], d[more], ph[more]
    else:
        raise IbError(f"{ts.routing} on {topo.name()}: class {cls.name} loops")
    return seen1, seen0


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
    raise IbError(f"phase-1 table loops on {topo.name()}")


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
    :class:`IbError` on a missing entry or a loop.
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
            raise IbError(f"layer {int(k[live[b]])} has no entry at switch {int(c[b])} toward "
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
        raise IbError(f"layer {int(k[b])} loops from switch {int(u[b])} toward {int(d[b])}")
    if not steps_c:
        return np.full((P, 0), -1, dtype=np.int64), np.zeros((P, 0), dtype=np.int64)
    return np.stack(steps_c, axis=1), np.stack(steps_i, axis=1)


def _lengths(topo, nxt: np.ndarray) -> np.ndarray:
    chans, _ = walk_layers(topo, nxt)
    return (chans >= 0).sum(axis=1).reshape(nxt.shape).astype(np.int16)


# ---------------------------------------------------------------------------------------------
# service levels
# ---------------------------------------------------------------------------------------------
def assign_sls(layers: IbLayers, max_sls: int = IB_DATA_VLS - 1) -> IbLayers:
    """Give every path an SL so that, with VL ``1 + SL`` on hops that enter from a switch,
    each VL's channel dependency graph is acyclic (hops from a host use VL 0, which depends
    only on VLs >= 1, so it closes no cycle).

    First fit, longest paths first: a path joins the lowest SL whose dependency graph stays
    acyclic with the path's dependencies added (a new dependency ``a -> b`` is refused when
    ``b`` already reaches ``a``).  On the fabrics of the tests this needs fewer SLs than
    DFSSSP's cycle breaking (Domke et al. 2011), e.g. 4 instead of 6 for DSN-F n = 64 and 2
    instead of 3 for an 8x8 torus.  Raises :class:`IbError` when more than ``max_sls`` SLs
    would be needed.

    Complexity: O(P H) plus one reachability search per new dependency, O(D) each for D
    dependencies in the SL's graph; paths without new dependencies cost O(H).
    """
    topo = layers.ts.topo
    chans, _ = walk_layers(topo, layers.nxt)
    P = chans.shape[0]
    length = (chans >= 0).sum(axis=1)
    sl = np.zeros(P, dtype=np.uint8)
    graphs: list[dict[int, set[int]]] = []
    seen_deps: dict[tuple, int] = {}       # identical dependency lists share their SL
    for p in np.argsort(-length, kind="stable")[:int((length >= 3).sum())].tolist():
        hops = chans[p, 1:length[p]].tolist()          # hop 0 enters from a host: VL 0
        deps = tuple(zip(hops[:-1], hops[1:]))
        if deps in seen_deps:
            sl[p] = seen_deps[deps]
            continue
        for s in range(max_sls + 1):
            if s == len(graphs):
                graphs.append({})
            if _add_acyclic(graphs[s], deps):
                sl[p] = seen_deps[deps] = s
                break
        else:
            raise IbError(f"{layers.ts.routing} on {topo.name()} with LMC {layers.lmc}: "
                          f"more than {max_sls} SLs needed (VL 0 + one VL per SL must fit "
                          f"{IB_DATA_VLS} data VLs); lower the LMC")
    layers.sl = sl.reshape(layers.nxt.shape)
    return layers


def _add_acyclic(g: dict[int, set[int]], deps) -> bool:
    """Add the dependencies ``deps`` to the acyclic graph ``g`` if it stays acyclic; else
    leave ``g`` unchanged and return False."""
    added = []
    for a, b in deps:
        out = g.get(a)
        if out is not None and b in out:
            continue
        if a == b or _reaches(g, b, a):
            for x, y in added:
                g[x].discard(y)
            return False
        g.setdefault(a, set()).add(b)
        added.append((a, b))
    return True


def _reaches(g: dict[int, set[int]], src: int, dst: int) -> bool:
    stack, seen = [src], {src}
    while stack:
        x = stack.pop()
        if x == dst:
            return True
        for y in g.get(x, ()):
            if y not in seen:
                seen.add(y)
                stack.append(y)
    return False


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
    """Layers, SLs and their :func:`verify_ib` report; raises :class:`IbError` when the
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

    Complexity: O(L N^2 H) time and memory for paths of H hops.
    """
    ts = layers.ts
    topo = ts.topo
    n, r = topo.adj.shape
    errors: list[str] = []
    rep: dict = {"ok": True, "routing": ts.routing, "topology": topo.name(), "lmc": layers.lmc,
                 "errors": errors, "data_vls": IB_DATA_VLS, "shortcuts": layers.shortcuts}
    try:
        chans, ins = walk_layers(topo, layers.nxt)
    except IbError as e:
        errors.append(str(e))
        rep["ok"] = False
        return rep
    hops = (chans >= 0).sum(axis=1).reshape(layers.nxt.shape)
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
    P, H = chans.shape
    sl = np.broadcast_to(layers.sl.reshape(P, 1), (P, H))
    live = chans >= 0
    u, j = chans // r, chans % r
    vl = np.where(live, sl2vl[u, ins, j + 1, sl], 0).astype(np.int64)
    node = chans * NUM_SLS + vl
    rep["sls_used"] = int(np.unique(layers.sl[:, off]).size) if n > 1 else 0
    used_vls = np.unique(vl[live])
    rep["vls_used"] = int(used_vls.size)
    rep["vl_max"] = int(used_vls.max(initial=0))
    if rep["vl_max"] >= IB_DATA_VLS:
        errors.append(f"VL {rep['vl_max']} used; ibsim ports report {IB_DATA_VLS} data VLs "
                      f"(0..{IB_DATA_VLS - 1})")
    if H >= 2:
        ok = live[:, 1:]
        a, b = node[:, :-1][ok], node[:, 1:][ok]
        e = np.unique(a * (n * r * NUM_SLS) + b)
        a, b = e // (n * r * NUM_SLS), e % (n * r * NUM_SLS)
    else:
        a = b = np.empty(0, dtype=np.int64)
    rep["cdg"] = {"dependencies": int(len(a)),
                  "per_vl": {str(v): int(c) for v, c in
                             enumerate(np.bincount(a % NUM_SLS, minlength=1)) if c}}
    if len(a):
        m = n * r * NUM_SLS
        g = csr_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(m, m))
        ncomp, label = connected_components(g, directed=True, connection="strong")
        big = np.flatnonzero(np.bincount(label, minlength=ncomp) > 1)
        if len(big):
            cyc = _cycle(g, label, int(big[0]))
            text = " -> ".join(f"{x // NUM_SLS // r}:{topo.port_number(x // NUM_SLS // r, x // NUM_SLS % r)}"
                               f"(vl{x % NUM_SLS})" for x, _ in cyc[:max_cycle_print])
            errors.append(f"IB channel dependency graph has a cycle of {len(cyc)} channels: "
                          f"{text}")
    rep["ok"] = not errors
    return rep
