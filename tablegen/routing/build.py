"""Routing algorithms that turn a topology into a :class:`~tablegen.tables.TableSet`.

Routings: ``min``, ``val`` (original Valiant; group-level Valiant on a Dragonfly, Kim et al.
§4.1), ``val-nta`` and ``val-3h`` (Yébenes et al. HOTI 2017 §IV), ``ugal-l`` (MIN plus a
non-minimal class, decided at the source by :mod:`tablegen.routing.ugal`), ``par`` (progressive
adaptive routing: UGAL-L's two classes plus a third, the non-minimal class taken at the second
switch of a minimal path; Jiang et al. ISCA 2009, Yébenes et al. §V) and ``dsnf`` (Truong et al.
Fig. 2).  Every routing is destination-based per phase; see :mod:`tablegen.tables` for the
header state and the processing at a switch.

Minimal tables
--------------
* Graph-minimal (Slim Fly, DSN-F ``min``, DSN-x, DLN-x): among the network ports of ``u`` whose
  neighbour is one hop closer to ``d`` (sorted by port index, ``m`` of them), take the one of
  rank ``d mod m``.  Spreading by destination rather than "lowest port" balances the several
  minimal paths Slim Fly has for q > 5; every alternative is kept in ``alternatives``.
* Dragonfly: hierarchical minimal routing of Kim et al. (local, global, local; one global hop).
  Graph-shortest paths may cross two global links, which Kim's VC scheme does not allow.
  Towards group ``T`` a router uses its own global port to ``T`` when it has one (rank
  ``T mod m`` among several), else the local port to gateway number ``T mod m`` of its group.
* 2-D torus: dimension-order routing (X then Y, shorter direction, ties positive).
* Fat tree: up*/down* shortest paths, the up port chosen by source and destination
  (:mod:`tablegen.routing.fattree`).

Virtual channels
----------------
``hop``: the VC is the hop index (Yébenes et al. §II-C): deadlock-free for any routing, with as
many VCs as the longest path (Slim Fly MIN 2, VAL/VAL_nta 4, VAL_3h 3).  ``global`` (Kim et al.
Fig. 7): the VC rises after every global hop; MIN uses VC 0-1 alone or VC 1-2 inside UGAL,
group-level VAL uses VC 0-2.  ``dateline`` (DSN-F, torus): the VC rises after every ring
dateline.  ``updown`` (fat-tree MIN): one VC, every path to a host goes up, then down.
``verify`` proves each scheme acyclic on the actual tables.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.routing.walk import table_lengths
from tablegen.tables import PathClass, TableSet
from tablegen.topology import UNREACHABLE, Topology, distance_matrix

ROUTINGS = ("min", "val", "val-nta", "val-3h", "ugal-l", "par", "dsnf")
ADAPTIVE = ("ugal-l", "par")    # a minimal and a non-minimal class, chosen per packet
NONMIN = ("val", "val-nta", "val-3h", "val-group")


def mask_dtype(radix: int):
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if radix <= np.iinfo(dt).bits:
            return dt
    raise TopologyError(f"network radix {radix} exceeds 64 ports; expected at most 64")


def graph_min(topo: Topology, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Graph-minimal table and equal-cost alternatives: toward ``d``, switch ``u`` may take
    every port whose neighbour is one hop closer (by ``dist``); the table takes the one of
    rank ``d mod m`` among those ``m`` ports in port order.

    Complexity: O(N^2 R) time (compiled), no extra memory.
    """
    n, r = topo.adj.shape
    table = np.empty((n, n), dtype=np.int16)
    alt = np.empty((n, n), dtype=mask_dtype(r))
    _graph_min(topo.adj.astype(np.int64), dist.astype(np.int16), table, alt)
    return table, alt


@njit(cache=True)
def _graph_min(adj, dist, table, alt):
    n, r = adj.shape
    good = np.empty(r, dtype=np.int64)      # the ports one hop closer, in port order
    for u in range(n):
        here = dist[u]
        for d in range(n):
            m, bits = 0, np.uint64(0)
            for j in range(r):
                v = adj[u, j]
                if v >= 0 and dist[v, d] == here[d] - 1:
                    good[m] = j
                    m += 1
                    bits |= np.uint64(1) << np.uint64(j)
            alt[u, d] = bits
            table[u, d] = good[d % m] if m else -1


def graph_to_group(topo: Topology, dist: np.ndarray) -> tuple[np.ndarray, int]:
    """``(int16[N, g], hops)``: the port of ``u`` toward the nearest switch of group ``G``
    (``-1`` for ``u``'s own group) -- among the ports whose neighbour is one hop closer to
    ``G``, the one of rank ``G mod m``, as :func:`graph_min` spreads destinations -- and the
    longest such route.  For Dragonflies whose hierarchical tables do not hold (failed
    links).  Complexity: O(N^2 + N g R)."""
    n, g = topo.n_switches, topo.n_groups
    grp = topo.group
    d = dist.astype(np.int64)
    table = np.full((n, g), -1, dtype=np.int16)
    nb, ok = np.maximum(topo.adj, 0), topo.adj >= 0
    hops = 0
    for G in range(g):
        here = d[:, grp == G].min(axis=1)
        hops = max(hops, int(here.max()))
        closer = ok & (here[nb] == here[:, None] - 1)
        m = closer.sum(axis=1)
        pos = np.cumsum(closer, axis=1) - 1
        pick = closer & (pos == (G % np.maximum(m, 1))[:, None])
        has = here > 0
        table[has, G] = pick[has].argmax(axis=1)
    return table, hops


def dragonfly_min(topo: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hierarchical minimal tables of Kim et al.: ``(min[N,N], group[N,g], alternatives)``.

    Complexity: O(g^2 a h + N^2).
    """
    a, h, g = (topo.params[k] for k in ("a", "h", "g"))
    n, r = topo.adj.shape
    grp = topo.group
    to_group = np.full((n, g), -1, dtype=np.int16)
    galt = np.zeros((n, g), dtype=mask_dtype(r))
    dt = galt.dtype.type
    x = np.arange(a)
    for G in range(g):
        routers = np.arange(G * a, (G + 1) * a)
        nb = topo.adj[routers, a - 1:]
        gtarget = np.where(nb >= 0, grp[np.maximum(nb, 0)], -1)            # [a, h]
        valid = gtarget >= 0
        cnt = np.zeros((a, g), dtype=np.int64)                             # own ports to T
        np.add.at(cnt, (np.nonzero(valid)[0], gtarget[valid]), 1)
        per_t = cnt.sum(axis=0)
        missing = np.flatnonzero(per_t == 0)
        missing = missing[missing != G]
        if len(missing):
            raise TopologyError(f"dragonfly: groups {G} and {missing[0]} share no global link")
        # own global ports: the one of rank T mod m among the router's m ports toward T
        seen = np.zeros((a, g), dtype=np.int64)
        for t in range(h):
            T = gtarget[:, t]
            ok = T >= 0
            rank = seen[x[ok], T[ok]]
            pick = rank == T[ok] % cnt[x[ok], T[ok]]
            to_group[routers[ok][pick], T[ok][pick]] = a - 1 + t
            galt[routers[ok], T[ok]] |= dt(1) << dt(a - 1 + t)
            seen[x[ok], T[ok]] += 1
        # other routers: the local port to gateway number T mod m of the group (flat order
        # of the group's global ports j = r*h + t)
        flat = gtarget.ravel()
        order = np.argsort(flat, kind="stable")
        start = np.searchsorted(flat[order], np.arange(g))
        Ts = np.arange(g)
        gw = order[np.minimum(start + Ts % np.maximum(per_t, 1), len(flat) - 1)] // h  # [g]
        none = cnt == 0
        none[:, G] = False
        xs, Tn = np.nonzero(none)
        gwx = gw[Tn]
        to_group[routers[xs], Tn] = np.where(gwx > xs, gwx - 1, gwx)
        for y in range(a):
            is_gw = cnt[y] > 0                                             # [g]
            bit = np.where(x == y, 0, dt(1) << np.where(y > x, y - 1, y).astype(galt.dtype))
            galt[routers] |= np.where(none & is_gw[None, :], bit[:, None], 0).astype(galt.dtype)
    sw = np.arange(n)
    same = grp[:, None] == grp[None, :]
    xr, yr = sw[:, None] % a, sw[None, :] % a
    local = np.where(yr > xr, yr - 1, yr).astype(np.int16)
    table = np.where(same, local, to_group[:, grp]).astype(np.int16)
    np.fill_diagonal(table, -1)
    lbit = np.left_shift(np.ones_like(local, dtype=galt.dtype), local.astype(galt.dtype))
    alt = np.where(same, lbit, galt[:, grp]).astype(galt.dtype)
    np.fill_diagonal(alt, 0)
    return table, to_group, alt


def build_tables(topo: Topology, routing: str, *, nonmin: str | None = None,
                 vcs: int | None = None, ugal_threshold: int | None = None) -> TableSet:
    """Build the table set of ``routing`` on ``topo``.

    Parameters:
        routing: one of :data:`ROUTINGS`.
        nonmin: UGAL-L's and PAR's non-minimal class (default ``val-3h`` on Slim Fly,
            ``val-group`` on a Dragonfly, ``val`` elsewhere).
        vcs: force the number of VCs (VCs saturate at ``vcs - 1``); default: as many as the
            scheme needs.  Fewer than needed makes ``verify`` fail — on purpose, for tests.
            At most :data:`tablegen.limits.MAX_VCS` (64), forced or needed (else
            :class:`BadInput` / :class:`TopologyError`).
        ugal_threshold: UGAL-L bias T (flits) stored for the controller and simulator.

    PAR (``par``): classes ``[min, <nonmin>, par-<nonmin>]``.  A packet starts minimal or
    non-minimal at its source as under UGAL-L; a minimal packet that has made one hop (on a
    Dragonfly: one local hop, still in its source group) is decided again at that switch and
    may leave on the third class, which is the non-minimal class begun there on VC
    ``vc_base = 1`` (``params["reroute"]`` names it).  MIN starts on VC 0, so the hop
    scheme needs ``1 +`` the non-minimal bound (Slim Fly PAR_ori / PAR_nta 5, PAR_3h 4) and
    Kim's global-hop scheme one VC more than UGAL-L (4).

    Complexity: dominated by the minimal table, O(N^2 R).
    """
    check_routing(topo.kind, routing, nonmin, degraded="fail" in topo.params)
    if vcs is not None:     # before the tables: the verifier's CDG grows with the VC count
        vcs = limits.check_vcs(vcs)
    kind = topo.kind
    degraded = "fail" in topo.params
    tables: dict[str, np.ndarray] = {}
    params: dict = {}
    exit_port = None
    reach = 2       # phase 0 of group-level Valiant: one local and one global hop (Kim et al.)
    if degraded:
        # Failed links break the structure the Dragonfly and torus schemes rely on (a global
        # link per group pair, complete rings): graph-minimal paths with hop-indexed VCs are
        # deadlock-free on any connected graph.  Group-level Valiant heads for the nearest
        # switch of its intermediate group.
        dist = _memo(topo, "dist", _hop_distances)
        tables["min"], alt = _memo(topo, "min", lambda t: graph_min(t, dist))
        if kind == "dragonfly":
            tables["group"], reach = _memo(topo, "group", lambda t: graph_to_group(t, dist))
        vc_inc, scheme = np.ones(topo.adj.shape, dtype=np.uint8), "hop"
    elif kind == "dragonfly":
        tables["min"], tables["group"], alt = _memo(topo, "min", dragonfly_min)
        vc_inc = (topo.link_kind == topo.kind_names.index("global")).astype(np.uint8)
        scheme = "global"
    elif kind == "torus":
        from tablegen.routing.torus import torus_dor_tables

        tables["min"], vc_dor = _memo(topo, "min", torus_dor_tables)
        alt = _single_bits(tables["min"], topo.radix)
        vc_inc, scheme = vc_dor.astype(np.uint8), "dateline"
    elif kind == "fattree":
        tables["min"], alt = _memo(topo, "min", _fattree_min)
        vc_inc, scheme = np.zeros(topo.adj.shape, dtype=np.uint8), "updown"
    elif routing != "dsnf":
        tables["min"], alt = _memo(topo, "min", lambda t: graph_min(t, _hop_distances(t)))
        vc_inc, scheme = np.ones(topo.adj.shape, dtype=np.uint8), "hop"
    if routing == "dsnf":
        from tablegen.routing.dsnf import dsnf_tables

        dt = dsnf_tables(topo)
        tables["dsnf_pre"], tables["dsnf_main"] = dt.pre, dt.main
        alt = _single_bits(dt.main, topo.radix)  # one deterministic route per destination
        exit_port, vc_inc, scheme = dt.exit_port, dt.vc_inc.astype(np.uint8), "dateline"
        p, n = topo.params["p"], topo.params["n"]
        k_layers = -(-n // (p * 2**p))
        classes = [PathClass("dsnf", table1="dsnf_main", table0="dsnf_pre", target0="dst",
                             exit="port", max_hops=2 * (p + k_layers - 1))]
    else:
        diam = int(_memo(topo, "min_lengths", lambda t: table_lengths(t, tables["min"])).max())
        min_cls = PathClass("min", table1="min", max_hops=diam)
        if routing == "min":
            classes = [min_cls]
        else:
            variant = routing if routing not in ADAPTIVE else (nonmin or _default_nonmin(kind))
            if kind == "dragonfly" and variant == "val":
                variant = "val-group"  # Kim et al. §4.1: Valiant at the group level
            if kind == "dragonfly" and variant != "val-group" or (
                    scheme in ("dateline", "updown") and variant != "min"):
                # Router-level Valiant breaks the global-hop, dateline and up/down schemes
                # (two local hops on one VC in a group; X after Y; down, then up again at
                # the intermediate); hop-indexed VCs hold for any path.
                vc_inc, scheme = np.ones(topo.adj.shape, dtype=np.uint8), "hop"
            nonmin_cls = _nonmin_class(variant, diam, reach)
            if routing in ADAPTIVE:
                # UGAL-L: MIN rides above group VAL's first global hop (Kim et al. Fig. 7)
                base = 1 if scheme == "global" and routing == "ugal-l" else 0
                classes = [PathClass("min", table1="min", vc_base=base, max_hops=diam), nonmin_cls]
                params["nonmin"] = variant
                params["ugal_threshold"] = ugal_threshold
                if routing == "par":
                    classes.append(replace(nonmin_cls, name="par-" + variant, vc_base=1))
                    params["reroute"] = classes[-1].name
            else:
                classes = [nonmin_cls]
    if vcs is None:
        vcs = _vcs_needed(topo, scheme, classes, vc_inc)
        if vcs > limits.MAX_VCS:    # hop-indexed VCs on a long-diameter graph (dsn, dln)
            raise TopologyError(f"{routing} on {topo.name()} needs {vcs} VCs ({scheme} "
                                f"scheme), above the largest supported {limits.MAX_VCS}; "
                                "expected a topology of smaller diameter")
    return TableSet(topo=topo, routing=routing, classes=classes, tables=tables,
                    alternatives=alt, vc_inc=vc_inc, num_vcs=int(vcs), vc_scheme=scheme,
                    exit_port=exit_port, params=params)


def check_routing(kind: str, routing: str, nonmin: str | None = None,
                  degraded: bool = False) -> None:
    """Raise :class:`TopologyError` unless :func:`build_tables` can build ``routing`` (with
    UGAL-L's ``nonmin`` class) on a topology of ``kind`` (with failed links when
    ``degraded``); O(1), so callers check every routing of a batch before any work."""
    if routing not in ROUTINGS:
        raise TopologyError(f"routing {routing!r} is unknown; expected one of {', '.join(ROUTINGS)}")
    if routing == "dsnf" and kind != "dsnf":
        raise TopologyError(f"routing 'dsnf' needs a dsnf topology, not {kind}")
    if routing == "dsnf" and degraded:
        raise TopologyError("routing 'dsnf' follows DSN-F's fixed port slots and cannot avoid "
                            "failed links; expected min, val, val-nta, val-3h or ugal-l on a "
                            "degraded DSN-F")
    if routing in ("min", "dsnf"):
        return
    variant = routing if routing not in ADAPTIVE else (nonmin or _default_nonmin(kind))
    if variant not in NONMIN or (variant == "val-group" and kind != "dragonfly"):
        fits = [v for v in NONMIN if v != "val-group" or kind == "dragonfly"]
        raise TopologyError(f"non-minimal variant {variant!r} does not fit {kind}; "
                            f"expected one of {', '.join(fits)}")


def share_minimal_tables(topo: Topology, routings) -> None:
    """Compute the minimal tables (kept in ``topo.memo``) now when two or more of
    ``routings`` will use them, so that routings built in forked processes inherit them
    instead of each computing them again."""
    if sum(r != "dsnf" for r in routings) >= 2:
        build_tables(topo, "min")


def _hop_distances(topo: Topology) -> np.ndarray:
    """:func:`distance_matrix`, refusing a diameter that hop-indexed VCs cannot cover (MIN
    alone needs one VC per hop) before any table is built.  O(N^2) on top of the BFS."""
    dist = distance_matrix(topo)
    diam = int(dist[dist < UNREACHABLE].max(initial=0))
    if diam > limits.MAX_VCS:
        raise TopologyError(f"{topo.name()} has diameter {diam}: hop-indexed VCs need at least "
                            f"{diam}, above the largest supported {limits.MAX_VCS}; expected "
                            "a topology of smaller diameter")
    return dist


def _fattree_min(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Fat-tree MIN table (:mod:`tablegen.routing.fattree`) and its equal-cost alternatives
    (every port one hop closer, as :func:`graph_min`).  O(N^2 R)."""
    from tablegen.routing.fattree import fattree_min

    table, alt = graph_min(topo, _hop_distances(topo))
    return fattree_min(topo, table), alt


def _memo(topo: Topology, key: str, compute):
    """Minimal tables are shared by every routing of a topology: compute them once."""
    if key not in topo.memo:
        topo.memo[key] = compute(topo)
    return topo.memo[key]


def _default_nonmin(kind: str) -> str:
    return {"slimfly": "val-3h", "dragonfly": "val-group"}.get(kind, "val")


def _nonmin_class(variant: str, diam: int, reach: int = 2) -> PathClass:
    if variant == "val-group":
        # phase 0: <= ``reach`` hops to the group (1 local + 1 global when intact); phase 1
        # (in the intermediate group): a minimal route.
        return PathClass("val-group", table1="min", table0="group", target0="group",
                         exit="reach", inter="group", max_hops=reach + diam)
    if variant == "val":
        return PathClass("val", table1="min", table0="min", target0="switch", exit="reach",
                         inter="switch", max_hops=2 * diam)
    if variant == "val-nta":
        return PathClass("val-nta", table1="min", table0="min", target0="switch",
                         exit="on_path", inter="switch", max_hops=2 * diam)
    return PathClass("val-3h", table1="min", table0="min", target0="switch", exit="first_hop",
                     inter="switch-3h", max_hops=1 + diam)


def _vcs_needed(topo: Topology, scheme: str, classes: list[PathClass], vc_inc) -> int:
    """VCs a scheme needs by construction; ``verify`` checks the count against the tables."""
    if scheme == "hop":
        return max(c.vc_base + c.max_hops for c in classes)
    if scheme == "updown":      # fat-tree MIN: every path to a host goes up, then down
        return 1
    if scheme == "global":
        # one more VC per global hop: MIN has one global hop, group-level VAL two.
        return max(c.vc_base + (2 if c.name.endswith("val-group") else 1) + 1 for c in classes)
    # dateline: a path crosses each ring's dateline at most once.  Torus DOR: the X and the Y
    # ring; DSN-F: the super-node ring, plus the local-ring wrap in pre-work and in finish,
    # which carry datelines only for p >= 4 (docs/dsnf.md).
    if topo.kind == "torus":
        return 3
    return 2 if topo.params["p"] <= 3 else 4


def _single_bits(table: np.ndarray, radix: int) -> np.ndarray:
    dt = mask_dtype(radix)
    return np.where(table >= 0, np.left_shift(dt(1), np.maximum(table, 0).astype(dt)), 0).astype(dt)
