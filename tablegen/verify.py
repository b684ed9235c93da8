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
    if min_len is not None:
        _check_minimal(ts, min_len, report)
    report.vcs_used = int(np.flatnonzero(vc_seen).max() + 1) if vc_seen.any() else 0
    _check_cdg(ts, deps, report, max_cycle_print)
    report.ok = not report.errors
    return report


def _check_minimal(ts: TableSet, got: np.ndarray, report: Report) -> None:
    """MIN's bound is the graph's, not the tables': every table path (``got[s, d]`` hops, as
    the walk measured them) must be as short as a breadth-first search of the topology says
    (a Dragonfly's: at most local, global, local).  O(N^2 R / 64) + O(N^2)."""
    from tablegen.topology import distance_matrix

    if ts.topo.kind == "dragonfly":
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
