"""Analytic throughput bound from fabroute's own tables: 1 / (maximum channel load).

Every host injects one flit per cycle (the injection bandwidth) to destinations drawn from a
traffic pattern (:mod:`simulator.traffic`, the same ``(lo, hi)`` ranges the simulator draws
from).  The *load* of a channel is the expected number of flits per cycle that cross it per
unit of injection: the sum over switch pairs ``(s, d)`` of the demand ``D[s, d]`` times the
share of the pair's paths that use the channel.  Paths are walked through the compiled twin of
``TableSet.step`` (:func:`simulator.engine.walk_c`), so the bound is computed from exactly the
tables the simulator (and the fabric) runs:

* single-path classes (MIN, DSN-F): the table path of ``(s, d)``;
* Valiant classes (VAL, VAL_nta, VAL_3h, Dragonfly group VAL): the expectation over the
  intermediates the class allows, uniform over exactly ``TableSet.candidates(s, d, cls)`` —
  the set the simulator draws from (:func:`simulator.engine.sample_inter`; VAL_3h excludes the
  turn-around first hops with the same per-``(s, d)`` port mask);
* traffic between hosts of one switch uses no network channel (the simulator delivers it
  locally).

No routing sustains more than ``1 / max_load`` of the injection bandwidth (the most loaded
channel carries one flit per cycle), and no host accepts more than its ejection channel: the
saturation bound is ``min(1, 1 / max_load, 1 / max_eject)``.  For a UGAL table set each class
is bounded on its own (``classes``), and ``mix`` gives the best *fixed* split between the
minimal and the non-minimal class (every packet minimal with probability ``f``): a reference
point, not a bound on adaptive UGAL (which chooses per packet and can do better).

Complexity: ``O(N · H)`` for the switch-pair demand (``N`` switches, ``H`` hosts), then
``O(P · I · L)`` compiled table steps, with ``P`` the switch pairs of non-zero demand (``N²``
for uniform traffic), ``I`` the intermediates per pair (1 for MIN; ``N - 2`` for switch
Valiant, ``g - 2`` for Dragonfly group Valiant) and ``L`` the path length (VAL_nta's
``on_path`` exit adds a factor of the phase-1 path length).  Switch Valiant with the
``reach`` exit (VAL) decomposes into its two phases: ``O(N² · L)``.  Memory ``O(N²)``
(demand) plus ``O(N · R)`` (channel loads).  On this machine: 1,056-node Dragonfly VAL
0.02 s; Slim Fly q = 13 (338 switches) VAL_nta uniform ~10 s (walked), VAL (decomposed)
well under a second; q = 19 VAL_nta some minutes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator import engine as E
from simulator.traffic import pattern
from tablegen.routing.imported import IMPORTED


def demand(topo, traffic: str, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(D, eject)``: ``D[s, d]`` the flits per cycle from switch ``s`` to switch ``d`` when
    every host injects one flit per cycle under ``traffic`` (host pairs of one switch
    included on the diagonal), and ``eject[h]`` the flits per cycle destined to host ``h``."""
    H, N = topo.n_hosts, topo.n_switches
    off = topo.host_offset.astype(np.int64)
    D = np.zeros((N, N))
    eject = np.zeros(H)
    for s, dens in _host_demand(topo, traffic, seed):
        eject += dens
        cs = np.concatenate(([0.0], np.cumsum(dens)))
        D[s] = cs[off[1:]] - cs[off[:-1]]
    return D, eject


def _host_demand(topo, traffic: str, seed: int):
    """Per source switch ``s``: ``(s, dens)`` with ``dens[h]`` the flits per cycle its hosts
    send to host ``h`` under ``traffic`` (every host injecting one flit per cycle)."""
    lo, hi = pattern(topo, traffic, seed)
    H, N = topo.n_hosts, topo.n_switches
    off = topo.host_offset.astype(np.int64)
    for s in range(N):
        row = np.zeros(H + 1)
        for h in range(off[s], off[s + 1]):
            a, b = int(lo[h]), int(hi[h])
            excl = b - a > 1 and a <= h < b        # the simulator never sends to itself
            w = 1.0 / (b - a - (1 if excl else 0))
            row[a] += w
            row[b] -= w
            if excl:
                row[h] -= w
                row[h + 1] += w
        yield s, np.cumsum(row)[:H]


def demand_by_host_index(topo, traffic: str, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(D, eject)`` with ``D[e, s, d]`` the flits per cycle from switch ``s`` to the ``e``-th
    host of switch ``d`` (zero where ``d`` has fewer hosts): :func:`demand` split by the
    destination host's index, what an imported set's per-host classes need.  Memory
    ``O(E · N²)`` for ``E`` hosts per switch at most."""
    H, N = topo.n_hosts, topo.n_switches
    off = topo.host_offset.astype(np.int64)
    E = int(topo.hosts.max(initial=0))
    D = np.zeros((E, N, N))
    eject = np.zeros(H)
    for s, dens in _host_demand(topo, traffic, seed):
        eject += dens
        for e in range(E):
            has = topo.hosts > e
            D[e, s, has] = dens[off[:-1][has] + e]
    return D, eject


@njit(cache=True)
def _accumulate(ps, pd, pw, c, kind, n_groups, T, cls_t0, cls_t1, cls_target0, cls_exit,
                cls_vcbase, onpath_t, group, adj, exit_port, vc_inc, num_vcs, bad3h, load):
    """Add ``pw[k]`` times the expected use of every channel by the class-``c`` paths of pair
    ``(ps[k], pd[k])`` to ``load[u, j]``; returns ``(flit-hops, -1)`` or ``(0, k)`` for the
    first pair whose walk dead-ends."""
    n = adj.shape[0]
    sw = np.empty(4 * n + 5, np.int64)
    po = np.empty(4 * n + 4, np.int64)
    vc = np.empty(4 * n + 4, np.int64)
    hops = 0.0
    t0 = T[cls_t0[c]] if cls_t0[c] >= 0 else T[0]
    for k in range(ps.shape[0]):
        s, d, w = ps[k], pd[k], pw[k]
        # the intermediates TableSet.candidates allows (and sample_inter draws from)
        if kind == E.INTER_NONE:
            m, cnt = 1, 1
        else:
            m = n_groups if kind == E.INTER_GROUP else n
            cnt = 0
            for i in range(m):
                cnt += E.inter_allowed(s, d, i, kind, group, t0, bad3h)
            if cnt == 0:
                return 0.0, k
        wi = w / cnt
        for i in range(m):
            if kind != E.INTER_NONE and not E.inter_allowed(s, d, i, kind, group, t0, bad3h):
                continue
            inter = -1 if kind == E.INTER_NONE else i
            h = E.walk_c(s, d, c, inter, T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase,
                         onpath_t, group, adj, exit_port, vc_inc, num_vcs, sw, po, vc)
            if h < 0:
                return 0.0, k
            for x in range(h):
                load[sw[x], po[x]] += wi
            hops += wi * h
    return hops, -1


@njit(cache=True)
def _accumulate_reach(A, B, t0, t1, adj, load):
    """Switch-Valiant with the ``reach`` exit decomposed: the phase-0 table path ``s -> i``
    carries ``A[s, i]``, the phase-1 path ``i -> d`` carries ``B[i, d]`` (the paths are what
    :func:`simulator.engine.step_c` walks: phase 0 ends exactly on reaching ``i``).  Returns the
    flit-hops, or ``-1.0`` on a dead end or loop."""
    n = adj.shape[0]
    hops = 0.0
    for k in range(2):
        W = A if k == 0 else B
        t = t0 if k == 0 else t1
        for a in range(n):
            for b in range(n):
                w = W[a, b]
                if w == 0.0 or a == b:
                    continue
                u = a
                steps = 0
                while u != b:
                    j = t[u, b]
                    if j < 0 or steps > n:
                        return -1.0
                    load[u, j] += w
                    u = adj[u, j]
                    steps += 1
                hops += w * steps
    return hops


def channel_load(ts, D: np.ndarray, cls: int | str = 0, packed: E.Packed | None = None,
                 decompose: bool = True) -> tuple[np.ndarray, float]:
    """``(load[N, R], flit-hops per cycle)`` of path class ``cls`` (index or name) of ``ts``
    under the switch-pair demand ``D`` (:func:`demand`).

    Switch-Valiant classes with the ``reach`` exit (VAL) are computed in ``O(N² · L)`` by
    decomposing every path into its phase-0 path ``s -> i`` and phase-1 path ``i -> d``
    (intermediates uniform over the ``N - 2`` switches other than ``s`` and ``d``); with
    ``decompose=False`` (and for every other class) each (pair, intermediate) is walked."""
    pk = packed or E.Packed(ts)
    c = cls if isinstance(cls, (int, np.integer)) else pk.cls_names.index(cls)
    n = ts.topo.n_switches
    if (decompose and pk.cls_inter[c] == E.INTER_SWITCH and pk.cls_exit[c] == E.EXIT_REACH
            and pk.cls_target0[c] == E.T0_SWITCH and n > 2):
        Dz = D.astype(np.float64).copy()
        np.fill_diagonal(Dz, 0.0)
        A = (Dz.sum(axis=1)[:, None] - Dz) / (n - 2)     # A[s, i]: sum over d not in {s, i}
        B = (Dz.sum(axis=0)[None, :] - Dz) / (n - 2)     # B[i, d]: sum over s not in {i, d}
        np.fill_diagonal(A, 0.0)
        np.fill_diagonal(B, 0.0)
        load = np.zeros(ts.topo.adj.shape)
        hops = _accumulate_reach(A, B, pk.T[pk.cls_t0[c]], pk.T[pk.cls_t1[c]], pk.adj, load)
        if hops < 0:
            raise RuntimeError(f"throughput bound: class {pk.cls_names[c]}: dead end or loop")
        return load, float(hops)
    s, d = np.nonzero(D)
    keep = s != d
    s, d = s[keep].astype(np.int64), d[keep].astype(np.int64)
    w = D[s, d].astype(np.float64)
    load = np.zeros(ts.topo.adj.shape)
    hops, bad = _accumulate(s, d, w, int(c), int(pk.cls_inter[c]), int(pk.n_groups), pk.T,
                            pk.cls_t0, pk.cls_t1, pk.cls_target0, pk.cls_exit, pk.cls_vcbase,
                            pk.onpath_t, pk.group, pk.adj, pk.exit_port, pk.vc_inc, pk.num_vcs,
                            pk.bad3h, load)
    if bad >= 0:
        raise RuntimeError(f"throughput bound: class {pk.cls_names[c]}: no path "
                           f"{int(s[bad])} -> {int(d[bad])} (dead end, loop or no intermediate)")
    return load, float(hops)


def _summary(topo, load: np.ndarray, eject_max: float, hops: float, total: float) -> dict:
    used = topo.adj >= 0
    kinds = topo.link_kind
    mx = float(load[used].max()) if used.any() else 0.0
    u, j = np.unravel_index(int(np.argmax(np.where(used, load, -1.0))), load.shape)

    def bnd(x):
        return 1.0 / x if x > 0 else float("inf")

    by_kind = {}
    for k, name in enumerate(topo.kind_names):
        sel = kinds == k
        if sel.any():
            km = float(load[sel].max())
            by_kind[name] = {"max_load": km, "avg_load": float(load[sel].mean()),
                             "bound": min(1.0, bnd(km))}
    return {
        "max_load": mx, "avg_load": float(load[used].mean()) if used.any() else 0.0,
        "bound": min(1.0, bnd(mx), bnd(eject_max)), "bound_uncapped": bnd(mx),
        "limited_by": ("injection" if max(mx, eject_max) <= 1.0 else
                       "ejection" if eject_max >= mx else "channel"),
        "hops_avg": hops / total if total else 0.0,
        "bottleneck": {"switch": int(u), "port_index": int(j),
                       "port": int(topo.port_number(int(u), int(j))),
                       "kind": topo.kind_names[int(kinds[u, j])], "to": int(topo.adj[u, j])},
        "by_kind": by_kind,
    }


def _best_mix(lm: np.ndarray, ln: np.ndarray) -> tuple[float, float]:
    """``(f, max load)`` minimising ``max(f · lm + (1 - f) · ln)`` over ``f`` in [0, 1] (a
    convex piecewise-linear function: ternary search to 1e-9, then the better endpoint)."""
    a, b = lm.ravel(), ln.ravel()

    def g(f):
        return float((f * a + (1 - f) * b).max())

    lo, hi = 0.0, 1.0
    for _ in range(100):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if g(m1) <= g(m2):
            hi = m2
        else:
            lo = m1
    cands = [(g(f), f) for f in (0.0, 1.0, (lo + hi) / 2)]
    v, f = min(cands)
    return f, v


def throughput_bound(ts, traffic: str = "uniform", seed: int = 1,
                     cls: str | None = None) -> dict:
    """The analytic saturation throughput of the table set ``ts`` under ``traffic`` (a
    :mod:`simulator.traffic` name; ``seed`` for ``randperm``), per path class (all of them,
    or only ``cls``).

    Returns a JSON-serialisable dict: ``topology``, ``routing``, ``traffic``, ``seed``,
    ``eject_max_load`` (flits per cycle to the busiest host), ``classes`` (name -> ``max_load``,
    ``avg_load`` (channels), ``bound`` = ``min(1, 1/max_load, 1/eject_max_load)`` in units of
    the injection bandwidth, ``bound_uncapped`` = ``1/max_load``, ``limited_by``,
    ``hops_avg``, ``bottleneck`` (switch, port, kind), ``by_kind`` (link kind -> max/avg load and
    bound)), ``bound`` (the bound of the single class, or of ``cls``; for several classes
    ``None``), and for a two-class (UGAL) set ``mix``: the best fixed minimal share ``f`` and
    its bound.  See the module docstring for the model and the complexity."""
    topo = ts.topo
    if ts.routing == IMPORTED:
        return _imported_bound(ts, traffic, seed)
    D, eject = demand(topo, traffic, seed)
    emax = float(eject.max()) if eject.size else 0.0
    pk = E.Packed(ts)
    # PAR's re-route class is its non-minimal class begun one hop later: bounded as UGAL-L's
    # two classes (and their best fixed split) unless asked for by name
    names = [cls] if cls else [c for c in pk.cls_names if c != ts.params.get("reroute")]
    for nm in names:
        if nm not in pk.cls_names:
            raise ValueError(f"throughput bound: class {nm!r} not in {', '.join(pk.cls_names)}")
    total = float(D.sum())
    loads, out = {}, {}
    for nm in names:
        load, hops = channel_load(ts, D, nm, pk)
        loads[nm] = load
        out[nm] = _summary(topo, load, emax, hops, total)
    res = {"topology": topo.name(), "routing": ts.routing, "traffic": traffic, "seed": seed,
           "hosts": topo.n_hosts, "switches": topo.n_switches, "eject_max_load": emax,
           "classes": out, "bound": out[names[0]]["bound"] if len(names) == 1 else None}
    if len(names) == 2:
        f, v = _best_mix(loads[names[0]], loads[names[1]])
        res["mix"] = {"min_share": f, "max_load": v,
                      "bound": min(1.0, 1 / v if v > 0 else float("inf"),
                                   1 / emax if emax > 0 else float("inf"))}
    return res


def _imported_bound(ts, traffic: str, seed: int) -> dict:
    """The bound of an imported set (:mod:`tablegen.routing.imported`): traffic to the
    ``e``-th host of a switch takes the classes of host index ``e``, each LID offset an equal
    share; the channel loads of all classes add up to one load, whose maximum bounds the
    routing (a single class ``ib-import`` in the result).  ``O(E · 2^LMC)`` class walks of
    ``O(N² · L)`` each."""
    topo = ts.topo
    D, eject = demand_by_host_index(topo, traffic, seed)
    emax = float(eject.max()) if eject.size else 0.0
    pk = E.Packed(ts)
    k = 1 << int(ts.params["lmc"])
    load = np.zeros(topo.adj.shape)
    hops = 0.0
    for c, cls in enumerate(ts.classes):
        e = c // k
        l, h = channel_load(ts, D[e] / k, c, pk)
        load += l
        hops += h
    out = _summary(topo, load, emax, hops, float(D.sum()))
    return {"topology": topo.name(), "routing": ts.routing, "traffic": traffic, "seed": seed,
            "hosts": topo.n_hosts, "switches": topo.n_switches, "eject_max_load": emax,
            "classes": {IMPORTED: out}, "bound": out["bound"]}


def cmd_bound(args, topo=None) -> dict:
    """The bound for parsed ``args`` (``spec`` or a built ``topo``, and the fields of
    :func:`simulator.cli.add_bound_args`)."""
    from simulator.run import tables_for
    from tablegen.topologies.spec import build

    topo = topo if topo is not None else build(args.spec)
    ts, _ = tables_for(topo, args.routing)
    return throughput_bound(ts, args.traffic, args.seed, getattr(args, "cls", None))
