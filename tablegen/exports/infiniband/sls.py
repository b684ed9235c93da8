"""Service levels and virtual lanes of InfiniBand layers, and their proof under IB semantics.

Two schemes, the one with fewer VLs wins (:func:`assign_vls`):

* **path** (:func:`assign_sls`): VL 0 on every hop that enters a switch from a host (or from
  the switch's management port 0), VL ``1 + SL`` on every hop that enters from another
  switch.  SLs are assigned per (layer, source switch, destination switch), first fit,
  longest paths first: each path joins the lowest SL whose channel dependency graph stays
  acyclic with it.  At most 7 SLs (8 data VLs).
* **turn** (:mod:`tablegen.exports.infiniband.turns`): the VL of a hop is chosen per
  (switch, in port, out port, SL), so a path may change VL on its way and the 16 SLs share
  the 8 VLs.

:func:`verify_ib` proves the result from the arrays the exporter writes: every (layer,
source, destination) path delivered and loop-free within its hop bound, and the channel
dependency graph over ``(link, VL)`` acyclic, with the VL of every hop read from the SL2VL
array ``[switch, in slot, out slot, SL]``.  ``docs/ib-routing.md`` gives the reasoning and
proofs.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.climb import CLIMB, climb_layers
from tablegen.exports.infiniband.phases import PHASE, phase_layers
from tablegen.exports.infiniband.dynorder import channel_graph, insert_dependency
from tablegen.exports.infiniband.layers import IbLayers, build_layers, hop_counts, sl2vl_array
from tablegen.exports.infiniband.limits import IB_DATA_VLS, NUM_SLS
from tablegen.exports.infiniband.native import VARIANT, native_layers
from tablegen.tables import TableSet
from tablegen.verify import cdg_edges


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
        raise NotExpressible(f"{layers.ts.routing} on {topo.name()} with LMC {layers.lmc}: "
                             f"more than {max_sls} SLs needed (VL 0 + one VL per SL must fit "
                             f"{IB_DATA_VLS} data VLs); {_hint(layers.lmc)}")
    layers.sl = sl.reshape(layers.nxt.shape)
    layers.sl2vl = sl2vl_array(topo, layers.num_sls)
    layers.scheme = "path"
    return layers


def assign_vls(layers: IbLayers, vls: int = IB_DATA_VLS) -> IbLayers:
    """SLs and SL2VL with the fewest VLs (at most ``vls``) of the two schemes: one VL per
    path (:func:`assign_sls`, ``1 + SLs`` VLs) and per-hop VLs
    (:func:`tablegen.exports.infiniband.turns.assign_turn_vls`), tried with one VL fewer than
    the best so far until it fails (with ``vls`` and restarts first when the path scheme
    does not fit).
    The path scheme wins ties: its SL2VL rows are all alike.  Raises
    :class:`NotExpressible` when neither fits ``vls``.

    Complexity: one path-scheme run and a few turn-scheme runs, each stopping at its first
    path that fits no SL."""
    from tablegen.exports.infiniband.turns import assign_turn_vls

    topo = layers.ts.topo
    try:
        best = assign_sls(layers, max_sls=vls - 1).num_sls + 1
    except NotExpressible:
        best = vls + 1
    if best > vls and assign_turn_vls(layers, vls):
        best = vls
    # fewer VLs: one run each (restarts only decide whether the fabric fits at all)
    while best <= vls and best > 2 and assign_turn_vls(layers, best - 1, restarts=0):
        best -= 1
    if best > vls:
        raise NotExpressible(f"{layers.ts.routing} on {topo.name()} with LMC {layers.lmc}: "
                             f"more than {vls} VLs needed (one VL per path: more than "
                             f"{vls - 1} SLs; per-hop VLs: no fit of {NUM_SLS} SLs in {vls} "
                             f"VLs); {_hint(layers.lmc)}")
    return layers


def _hint(lmc: int) -> str:
    # fewer layers mean fewer dependencies; at LMC 0 there is one layer already
    return ("lower the LMC" if lmc else "LMC 0 cannot be lowered: the routing's own paths "
            "do not fit; its IB-native variant does (ib export --ib-native), and for MIN "
            "the near-minimal ib-climb variant (ib export --ib-climb)")


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
    out, into, seen, work, fwd, back = channel_graph(adj, peer, 1)   # one lane per SL graph
    memo = np.full((L, n, n), -1, dtype=np.int8)
    chans = np.empty(n + 1, dtype=np.int64)
    added = np.empty(n + 1, dtype=np.int64)
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
                    if chans[i + 1] == a or not insert_dependency(
                            g[s], rank[s], out, into, a, j, seen, tick, work, fwd, back):
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


def ib_routing(ts: TableSet, lmc: int = 0, seed: int = 1,
               variant: str | None = None) -> tuple[IbLayers, dict]:
    """Layers, SLs and their :func:`verify_ib` report; raises :class:`NotExpressible` when the
    routing does not fit (too many VLs).  ``variant="ib-native"`` / ``"ib-climb"`` / ``"ib-phase"``:
    that IB variant instead (:func:`~tablegen.exports.infiniband.native.native_layers`,
    :func:`~tablegen.exports.infiniband.climb.climb_layers`,
    :func:`~tablegen.exports.infiniband.phases.phase_layers`; LMC 0)."""
    if variant is None:
        layers = assign_vls(build_layers(ts, lmc, seed))
    else:
        layers = variant_layers(ts, lmc, seed, variant)
    return layers, verify_ib(layers, layers.sl2vl)


def variant_layers(ts: TableSet, lmc: int, seed: int, variant: str) -> IbLayers:
    """The layers of an IB variant (SLs and SL2VL included); :class:`NotExpressible` for a
    variant that does not exist or takes no LMC/seed.  The routing is not checked: an
    imported set's files are proven against the variant's hop bound whatever it is called."""
    check_variant(variant, lmc, seed)
    last = _LAST_VARIANT
    if last and last[0] is ts and last[1] == variant:
        return last[2]
    build = {CLIMB: climb_layers, PHASE: phase_layers}.get(variant, native_layers)
    layers = build(ts)
    _LAST_VARIANT[:] = [ts, variant, layers]
    return layers


# the last variant built: ``fabroute verify`` derives the files again and proves them, two
# uses of one deterministic build that takes seconds (minutes at thousands of switches)
_LAST_VARIANT: list = []


def check_variant(variant: str, lmc: int, seed: int, routing: str | None = None) -> None:
    """:class:`NotExpressible` unless ``variant`` exists and takes ``lmc``, ``seed`` and
    ``routing`` (``ib-climb`` and ``ib-phase`` build their own trees for MIN's traffic: MIN
    only; None: not checked)."""
    if variant not in (VARIANT, CLIMB, PHASE):
        raise NotExpressible(f"InfiniBand variant {variant!r}; expected {VARIANT!r}, "
                             f"{CLIMB!r} or {PHASE!r}")
    if lmc or seed != 1:
        raise NotExpressible(f"the {variant} variant has one layer and no random choice: "
                             f"expected LMC 0 and seed 1, got LMC {lmc} and seed {seed}")
    if variant in (CLIMB, PHASE) and routing is not None and routing != "min":
        raise NotExpressible(f"the {variant} variant builds its own trees for MIN's traffic: "
                             f"expected routing min, got {routing}")


# ---------------------------------------------------------------------------------------------
# verification under IB semantics
# ---------------------------------------------------------------------------------------------

def cdg_summary(a: np.ndarray, b: np.ndarray, n_nodes: int, n_vl: int):
    """``({"dependencies", "per_vl"}, cycle)`` of an IB channel dependency graph whose nodes
    are ``channel * n_vl + VL`` and edges ``a -> b``; dependencies count by the VL they
    leave."""
    per = np.bincount(a % n_vl, minlength=1)
    return ({"dependencies": int(len(a)),
             "per_vl": {str(v): int(c) for v, c in enumerate(per) if c}},
            find_cycle(a, b, n_nodes))


def find_cycle(a: np.ndarray, b: np.ndarray, m: int) -> list[int]:
    """The nodes of one cycle of the graph with edges ``a -> b`` over ``m`` nodes, or []."""
    if not len(a):
        return []
    g = csr_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(m, m))
    ncomp, label = connected_components(g, directed=True, connection="strong")
    big = np.flatnonzero(np.bincount(label, minlength=ncomp) > 1)
    if len(big):
        return [x for x, _ in _cycle(g, label, int(big[0]))]
    return a[a == b][:1].tolist()


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
                 "errors": errors, "data_vls": IB_DATA_VLS, "shortcuts": layers.shortcuts,
                 "vl_scheme": layers.scheme, "variant": layers.info.get("variant")}
    adj = topo.adj.astype(np.int64)
    hops, err = hop_counts(layers.nxt, adj)
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
    rep["cdg"], cyc = cdg_summary(a, b, n * r * NUM_SLS, NUM_SLS)
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
