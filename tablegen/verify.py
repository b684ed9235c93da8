"""Verification of a table set by walking the tables themselves.

:func:`verify` proves, for every source switch, destination switch and source choice (path
class and intermediate):

* delivery: the walk ends at the destination (no dead end, no loop);
* the path-length bound of the class (e.g. VAL_3h <= 3 hops on Slim Fly); MIN's paths
  are moreover compared with the topology's own shortest paths (breadth-first search; a
  Dragonfly's hierarchical bound local-global-local), not with a bound derived from the tables;
* deadlock freedom: the channel dependency graph (CDG) over channels ``(switch, out port,
  VC)`` is acyclic.  VCs never decrease along a path, so this is the same as one acyclic CDG
  per VC.

Method.  The walks run in compiled code (:mod:`tablegen.routing.walk`) over the tables' state space,
never over (source, intermediate, destination) triples, which are too many for a 722-switch
Slim Fly: deterministic classes (MIN, DSN-F) walk every (source, destination) path; Valiant
classes walk phase 0 once per (source, intermediate) and phase 1 once per (switch,
destination, VC) — a phase-1 walk stops where an earlier one already went on, since its
future does not depend on how the packet got there.  The path-length histograms still count
every (source, intermediate, destination) path exactly, from the phase-1 table lengths.  The
dependencies of a packet entering phase 1 are recorded for every destination its class allows
there (including, conservatively, destinations an earlier loop cut already took), so an
acyclic result is a proof; a cycle is printed channel by channel.  Dependencies ``in-channel
-> out-channel`` live in a dense bitmap of ``channels × (ports × VCs)``.

Complexity: O(N^2 L) for deterministic classes and VAL_3h's phase 1, O(N^2 L + A N) for
Valiant classes with A arrival channels, VAL_nta adding O(N^3 / R) loop-cut checks; memory
O(N^2 V) for the phase-1 visited set plus O(N R^2 V^2) bits of dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tablegen.tables import TableSet


@dataclass
class Report:
    ok: bool
    routing: str
    topology: str
    switches: int
    num_vcs: int
    vcs_used: int
    #: name -> {"max_hops", "bound", "hist": {hops: number of (source, [intermediate,]
    #: destination) paths}}
    classes: dict = field(default_factory=dict)
    cdg: dict = field(default_factory=dict)        # channels, dependencies, per_vc
    errors: list = field(default_factory=list)
    cycle: list = field(default_factory=list)      # [{"switch", "port", "vc"}, …]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def verify(ts: TableSet, max_cycle_print: int = 64) -> Report:
    """Walk ``ts`` and return a :class:`Report`; ``report.ok`` is False with ``errors`` (and a
    printed ``cycle`` for a cyclic CDG) when the tables are wrong."""
    from tablegen.routing import walk as _walk

    topo = ts.topo
    n, r = topo.adj.shape
    V = ts.num_vcs
    deps = np.zeros((n * r * V, r * V), dtype=bool)
    vc_seen = np.zeros(V, dtype=bool)
    report = Report(ok=True, routing=ts.routing, topology=topo.name(), switches=n,
                    num_vcs=V, vcs_used=0)
    min_len = None
    for c in ts.classes:
        if c.name == "min":     # deterministic: its walk measures every path's length too
            min_len = np.zeros((n, n), dtype=np.int16)
            hist, err = _walk.run(ts, c, deps, vc_seen, min_len)
            min_len = None if err else min_len.T
        else:
            hist, err = _walker(c)(ts, c, deps, vc_seen)
        if err:
            report.errors.append(err)
        elif hist and max(hist) > c.max_hops:
            report.errors.append(f"class {c.name}: a path has {max(hist)} hops; the bound is "
                                 f"{c.max_hops}")
        report.classes[c.name] = {"max_hops": max(hist) if hist else 0, "bound": c.max_hops,
                                  "hist": {str(k): v for k, v in sorted(hist.items())}}
    if "reroute" in ts.params:
        _reroute_deps(ts, deps)
    if min_len is not None:
        _check_minimal(ts, min_len, report)
    report.vcs_used = int(np.flatnonzero(vc_seen).max() + 1) if vc_seen.any() else 0
    _check_cdg(ts, deps, report, max_cycle_print)
    report.ok = not report.errors
    return report


def _reroute_deps(ts: TableSet, deps: np.ndarray) -> None:
    """PAR: a minimal packet decided again at its second switch ``a`` turns from the channel
    it arrived on (its first hop, on MIN's first VC) into the re-route class's first hop (on
    that class's ``vc_base``).  Recorded from every channel MIN uses as a first hop (on an
    intact Dragonfly the local ones: a global first hop leaves the source group) into every
    port of ``a``.  O(N^2 + N R^2)."""
    topo = ts.topo
    n, r = topo.adj.shape
    V = ts.num_vcs
    mn, rr = ts.cls("min"), ts.cls(ts.params["reroute"])
    first = ts.tables[mn.table1]
    used = np.zeros((n, r), dtype=bool)
    src = np.repeat(np.arange(n), n).reshape(n, n)
    ok = first >= 0
    used[src[ok], first[ok]] = True
    if topo.kind == "dragonfly" and "fail" not in topo.params:
        used &= topo.link_kind != topo.kind_names.index("global")
    for s, j in np.argwhere(used):
        a = topo.adj[s, j]
        ports = np.flatnonzero(topo.adj[a] >= 0)
        deps[(s * r + j) * V + mn.vc_base, ports * V + rr.vc_base] = True


def _check_minimal(ts: TableSet, got: np.ndarray, report: Report) -> None:
    """MIN's bound is the graph's, not the tables': every table path (``got[s, d]`` hops, as
    the walk measured them) must be as short as a breadth-first search of the topology says
    (a Dragonfly's: at most local, global, local).  O(N^2 R / 64) + O(N^2)."""
    from tablegen.topology import distance_matrix

    if ts.topo.kind == "dragonfly" and "fail" not in ts.topo.params:
        # Kim et al.'s minimal routing is hierarchical (local, global, local): two global
        # hops through a third group can be shorter in the graph, and are not minimal there
        dist = np.full(got.shape, 3, dtype=got.dtype)
    else:
        dist = distance_matrix(ts.topo)
    longer = np.argwhere(got > dist)
    if len(longer):
        u, t = (int(x) for x in longer[0])
        report.errors.append(f"class min: {len(longer)} table paths are not shortest, e.g. "
                             f"{u} -> {t} takes {got[u, t]} hops, the topology {dist[u, t]}")


def _walker(c):
    """The compiled walk of a path class."""
    from tablegen.routing.walk import run, run_3h, run_nta, run_reach

    if c.table0 is None or c.target0 == "dst":
        return run
    if c.exit in ("on_path", "first_hop") and c.table0 != c.table1:
        raise ValueError(f"class {c.name}: the {c.exit} walk needs phase 0 on the phase-1 table")
    return {"reach": run_reach, "first_hop": run_3h, "on_path": run_nta}[c.exit]


def cdg_edges(deps: np.ndarray, far: np.ndarray, V: int,
              stride: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The edges ``a -> b`` of a channel dependency graph recorded as ``deps[in_channel,
    out_port * V + out_vc]``, where channel ``(u, j, vc)`` is ``(u * P + j) * V + vc`` and
    ``far[u, j]`` (``P`` columns) is the switch it leads to, from which the out-channel
    leaves.  Nodes are ``(u * P + j) * stride + vc`` (default ``stride = V``), in the sorted
    order of ``deps``' entries."""
    stride = V if stride is None else stride
    P = far.shape[1]
    ins, cols = np.nonzero(deps)
    ch = ins // V
    a = ch * stride + ins % V
    b = (far[ch // P, ch % P].astype(np.int64) * P + cols // V) * stride + cols % V
    return a, b


def _check_cdg(ts: TableSet, deps, report: Report, max_cycle_print: int) -> None:
    topo = ts.topo
    n, r = topo.adj.shape
    V = ts.num_vcs
    ins, outs = cdg_edges(deps, topo.adj, V)
    nchan = n * r * V
    per_vc = np.bincount(outs % V, minlength=V)
    report.cdg = {"channels": int(np.unique(np.concatenate([ins, outs])).size) if len(ins) else 0,
                  "dependencies": int(len(ins)),
                  "per_vc": {str(v): int(per_vc[v]) for v in range(V)}}
    if not len(ins):
        return
    g = coo_matrix((np.ones(len(ins), dtype=np.int8), (ins, outs)), shape=(nchan, nchan)).tocsr()
    ncomp, label = connected_components(g, directed=True, connection="strong")
    sizes = np.bincount(label)
    big = np.flatnonzero(sizes > 1)
    selfloop = ins == outs
    if not len(big) and not selfloop.any():
        return
    import networkx as nx

    if len(big):
        comp = big[np.argmin(sizes[big])]
        members = np.flatnonzero(label == comp)
        sub = nx.DiGraph()
        m = np.isin(ins, members) & np.isin(outs, members)
        sub.add_edges_from(zip(ins[m].tolist(), outs[m].tolist()))
        cyc = [a for a, _ in nx.find_cycle(sub)]
    else:
        cyc = [int(ins[selfloop][0])]
    report.cycle = [{"switch": int(ch // (r * V)),
                     "port": topo.port_number(int(ch // (r * V)), int((ch // V) % r)),
                     "to": int(topo.adj[ch // (r * V), (ch // V) % r]),
                     "vc": int(ch % V)} for ch in cyc[:max_cycle_print]]
    text = " -> ".join(f"{c['switch']}:{c['port']}(vc{c['vc']})" for c in report.cycle)
    report.errors.append(f"channel dependency graph has a cycle of {len(cyc)} channels: {text}")


# ---------------------------------------------------------------------------------------------
# what the set claims, against what fabroute computes from the topology's name
# ---------------------------------------------------------------------------------------------
def rebuilt_topology(topo, intact: bool = False):
    """The topology fabroute builds from ``topo``'s kind and parameters (and its uniform host
    count where the family takes one), to hold a stored topology against; ``intact``: without
    the failures its name carries (the fabric as cabled).  A stored name without ``hosts=``
    (written before names carried it) gets a rebuilt topology named the same way."""
    from tablegen.errors import TopologyError
    from tablegen.topologies import (baselines, dragonfly, dsnf, fattree, hamming, jellyfish,
                                     slimfly)

    builders = {"slimfly": slimfly.build_slimfly, "dragonfly": dragonfly.build_dragonfly,
                "dsnf": dsnf.build_dsnf, "torus": baselines.build_torus,
                "dsn": baselines.build_dsn, "dln": baselines.build_dln,
                "fattree": fattree.build_fattree, "fbfly": hamming.build_fbfly,
                "hypercube": hamming.build_hypercube, "jellyfish": jellyfish.build_jellyfish}
    if topo.kind not in builders:
        raise TopologyError(f"kind {topo.kind!r}; expected one of {', '.join(builders)}")
    from tablegen.topologies.failures import failed_pairs, without_links

    failed = [] if intact else failed_pairs(topo.params)
    kw = {k: v for k, v in topo.params.items() if k != "fail"}
    # The baselines added with the fat tree always named a host count other than their
    # default (and the fat tree's differ by level): their parameters are complete.
    if topo.kind in ("torus", "dsn", "dln", "dsnf"):
        hosts = np.unique(topo.hosts)
        if len(hosts) != 1:
            raise TopologyError(f"{topo.name()}: hosts per switch differ; fabroute builds "
                                "uniform ones")
        kw["hosts"] = int(hosts[0])
    try:
        built = builders[topo.kind](**kw)
    except TypeError as e:
        raise TopologyError(f"{topo.name()}: parameters {sorted(kw)} ({e}); expected those "
                            f"fabroute writes for {topo.kind}") from None
    if "hosts" not in topo.params:
        # a name written before names carried hosts= (topology.json holds the hosts): the
        # same fabric, still read under its old name
        built.params.pop("hosts", None)
    return without_links(built, failed) if failed else built


def same_routing(topo, like: TableSet) -> tuple[TableSet, Report]:
    """``like``'s routing (and its parameters) built on ``topo`` — a grown, transformed or
    degraded copy of its fabric — and verified; on success its VCs are tightened as ``fabroute
    tables`` does (:func:`tighten`).  :class:`~tablegen.errors.TopologyError` when the routing
    cannot be built there."""
    from tablegen.routing.build import build_tables

    ts = build_tables(topo, like.routing, nonmin=like.params.get("nonmin"),
                      ugal_threshold=like.params.get("ugal_threshold"))
    rep = verify(ts)
    tighten(ts, rep)
    return ts, rep


def _first_json_difference(a, b, where: str = "") -> str | None:
    if type(a) is not type(b) or (not isinstance(a, (dict, list)) and a != b):
        return f"{where or 'the document'} is {a!r}, expected {b!r}"
    if isinstance(a, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a or k not in b:
                return f"{where}.{k} is {'extra' if k in a else 'missing'}"
            if (d := _first_json_difference(a[k], b[k], f"{where}.{k}" if where else k)):
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where} has {len(a)} entries, expected {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if (d := _first_json_difference(x, y, f"{where}[{i}]")):
                return d
    return None


def reference(ts: TableSet) -> tuple[TableSet | None, list[str]]:
    """Hold ``ts`` against what fabroute computes from its topology's kind and parameters and
    its routing's name (an imported set, :mod:`tablegen.routing.imported`: its LMC): the
    topology (links, ports, hosts, labels, groups: ``topology.json``)
    and the routing's path classes with their hop bounds, VC scheme, VC increments, exit ports
    and parameters (``tables.npz``).  Returns ``ts`` with the recomputed classes (so that
    :func:`verify` proves the recomputed bounds, never the stored ones) and the differences,
    one line each naming the file; ``(None, errors)`` when there is nothing to compare with.
    The tables themselves are not compared: :func:`verify` proves them.  Cost: one
    construction and one :func:`~tablegen.routing.build.build_tables`."""
    from dataclasses import asdict, replace

    from tablegen.errors import TopologyError
    from tablegen.routing.build import build_tables
    from tablegen.routing.imported import IMPORTED, imported_reference

    try:
        topo = rebuilt_topology(ts.topo)
    except TopologyError as e:
        return None, [f"topology.json: {e}"]
    if (d := _first_json_difference(ts.topo.to_dict(), topo.to_dict())):
        return None, [f"topology.json: {d} (as fabroute builds {topo.name()})"]
    if ts.routing == IMPORTED:
        # another router's tables (fabroute ib import): nothing to rebuild them from, but the
        # classes, their bounds and the VCs follow from the topology and the LMC alone
        try:
            ref = imported_reference(ts)
        except ValueError as e:
            return None, [f"tables.npz: imported tables: {e}"]
    else:
        try:
            ref = build_tables(ts.topo, ts.routing, nonmin=ts.params.get("nonmin"),
                               ugal_threshold=ts.params.get("ugal_threshold"))
        except TopologyError as e:
            return None, [f"tables.npz: routing {ts.routing!r}: {e}"]
    errors = []
    what = f"{ts.routing} on {topo.name()}"
    have, want = [asdict(c) for c in ts.classes], [asdict(c) for c in ref.classes]
    if (d := _first_json_difference(have, want, "classes")):
        errors.append(f"tables.npz: {d} for {what} (recomputed)")
    for name, a, b in (("vc_scheme", ts.vc_scheme, ref.vc_scheme),
                       ("params", ts.params, ref.params),
                       ("tables", {k: list(v.shape) for k, v in ts.tables.items()},
                        {k: list(v.shape) for k, v in ref.tables.items()})):
        if a != b:
            errors.append(f"tables.npz: {name} is {a!r}, expected {b!r} for {what}")
    for name, a, b in (("vc_inc", ts.vc_inc, ref.vc_inc), ("exit_port", ts.exit_port,
                                                            ref.exit_port)):
        if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
            at = "" if a is None or b is None or a.shape != b.shape else \
                f" at switch {np.argwhere(a != b)[0][0]} port index {np.argwhere(a != b)[0][1]}"
            errors.append(f"tables.npz: {name} differs{at} from what {what} uses")
    return replace(ts, classes=list(ref.classes)), errors


def tighten(ts: TableSet, rep: Report) -> None:
    """After a passing :func:`verify`: drop the VCs no path reaches (VCs never saturated,
    so fewer VCs route identically), as ``fabroute tables`` writes table sets.  O(1)."""
    if rep.ok and rep.vcs_used < ts.num_vcs:
        ts.num_vcs = rep.vcs_used
        rep.num_vcs = ts.num_vcs


def verify_stored(ts: TableSet, max_cycle_print: int = 64) -> Report:
    """:func:`verify` of a table set read from files: first held against :func:`reference`
    (bounds recomputed, claims compared), then walked.  What ``fabroute verify`` and the
    controller run."""
    checked, errors = reference(ts)
    if checked is None:
        return Report(ok=False, routing=ts.routing, topology=ts.topo.name(),
                      switches=ts.topo.n_switches, num_vcs=ts.num_vcs, vcs_used=0,
                      errors=errors)
    rep = verify(checked, max_cycle_print)
    rep.errors[:0] = errors
    rep.ok = not rep.errors
    return rep
