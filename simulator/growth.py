"""DSN-F grown in steps in the simulator: the same routings on every network of a growth path,
next to the diameter and ASPL of the same networks (``docs/simulator.md``, *Growth*).

    fabroute growth --experiment simulator/experiments/dsnf-growth.toml [-o PATH] [-j W] [-q]

The growth path starts at the experiment's ``spec`` (a DSN-F) and adds switches with
:func:`tablegen.topologies.dsnf.add_nodes`, which keeps ``p``, up to each of ``sizes``.  A size
``n = (p + 1) 2^(p + 1)`` is the end of the ``p``-range: the path holds the full ``p``-level
network (what growth reaches) and then :func:`~tablegen.topologies.dsnf.transform`'s
``(p + 1)``-level one (what ``build_dsnf(n)`` and ``fabroute compare`` give); a transformation
point that is not among the sizes is passed through.  A load sweep cannot express this:
``build_dsnf(2048, p=7)`` has no topology SPEC.

Per (network, routing) a worker process builds the tables and measures:

* the analytic bound of :func:`simulator.bound.throughput_bound`;
* one run at each of the experiment's ``loads`` (mean latency at a fixed offered load);
* the saturation load by bisection: between the largest unsaturated and the smallest
  saturated of those runs (else 0 and the bound, which no routing exceeds), ``search_steps``
  runs at the midpoint.  ``saturation`` is the largest offered load found unsaturated,
  ``first_saturated`` the smallest found saturated (``None``: none tested, read the bound).

Per network: diameter and ASPL (:func:`tablegen.analysis.layout.analyze`) and the cables that
growth step added, removed and re-plugged (:class:`~tablegen.topologies.dsnf.CableDiff`).
``out.json`` holds everything (every run's full result), ``out.png`` three panels against
the switch count: saturation throughput, latency, diameter and ASPL.

Cost: the path and analysis are ``O(sum of n^2)`` (all-pairs distances); each pair costs its
bound (``O(n^2 L)`` table steps) and ``len(loads) + search_steps`` simulations.
"""

from __future__ import annotations

import math
import os

from simulator.config import ROUTINGS, SimConfig, read_file
from simulator.sweep import save
from tablegen.limits import MAX_JOBS, SEED_BOUND

#: Keys of a growth experiment file besides ``[config]`` (the ``loads`` are latency loads).
GROWTH_KEYS = ("name", "figure", "note", "spec", "sizes", "routings", "traffic", "loads",
               "search_steps", "seed", "out", "workers")
MAX_STEPS = 12          #: bisection runs per (network, routing): 2^-12 of the bound is plenty
CABLES = ("added", "removed", "replugged")     #: CableDiff counts kept per growth step


def load(path) -> tuple[dict, SimConfig]:
    """A growth experiment file: its keys (each checked) and its ``[config]``.  ``ValueError``
    naming the key on anything else.  O(size of the file)."""
    from simulator.traffic import parse
    from tablegen.topologies.spec import parse_spec

    d = read_file(path)
    unknown = set(d) - set(GROWTH_KEYS) - {"config"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}; expected "
                         f"some of {', '.join(GROWTH_KEYS)} and [config]")
    exp = {k: d[k] for k in GROWTH_KEYS if k in d}
    spec = exp.get("spec")
    if not (isinstance(spec, str) and parse_spec(spec)[0] == "dsnf"
            and parse_spec(spec)[1].keys() <= {"n", "hosts"}):
        raise ValueError(f"spec={spec!r:.40}; expected the DSN-F growth starts from, "
                         "e.g. dsnf:n=1024 (keys n, hosts)")
    sizes = exp.get("sizes")
    if not (isinstance(sizes, list) and 1 <= len(sizes) <= 64 and all(
            isinstance(n, int) and not isinstance(n, bool) for n in sizes)
            and sizes == sorted(set(sizes))):
        raise ValueError(f"sizes={sizes!r:.60}; expected 1..64 increasing switch counts")
    if sizes[0] < parse_spec(spec)[1]["n"]:
        raise ValueError(f"sizes={sizes!r:.60} start below {spec}; expected sizes it grows to")
    routings = exp.get("routings")
    if not (isinstance(routings, list) and routings
            and all(isinstance(r, str) and r in ROUTINGS for r in routings)):
        raise ValueError(f"routings={routings!r:.60}; expected a list of routing names")
    loads = exp.get("loads")
    if not (isinstance(loads, list) and loads and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 1
            for x in loads)):
        raise ValueError(f"loads={loads!r:.60}; expected offered loads 0 < load <= 1")
    for key, lo, hi, default in (("search_steps", 0, MAX_STEPS, 4),
                                 ("seed", 0, SEED_BOUND - 1, 1), ("workers", 1, MAX_JOBS, None)):
        v = exp.get(key, default)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)
                              or not lo <= v <= hi):
            raise ValueError(f"{key}={v!r:.40}; expected an integer {lo} <= {key} <= {hi}")
        exp[key] = v
    exp["traffic"] = exp.get("traffic", "uniform")
    parse(exp["traffic"])
    return exp, SimConfig.from_dict(d.get("config", {}))


def growth_path(spec: str, sizes: list[int]) -> list[tuple]:
    """``(n, p, step, cables, topology)`` per network: ``step`` is ``"start"``, ``"add"`` or
    ``"transform"``; ``cables`` the ``{added, removed, replugged}`` counts since the
    previous network.  O(sum of n log n)."""
    from tablegen.topologies.dsnf import add_nodes, transform
    from tablegen.topologies.spec import build

    topo = build(spec)
    hosts = int(topo.hosts[0])
    path = [(topo.n_switches, int(topo.params["p"]), "start", None, topo)]
    for n in sizes:
        if n <= topo.n_switches:
            if n == topo.n_switches and len(path) == 1:    # the start itself
                continue
            raise ValueError(f"sizes: {n} is not above {topo.n_switches}; expected sizes "
                             "that grow the network")
        cables = dict.fromkeys(CABLES, 0)
        while topo.n_switches < n:
            p = int(topo.params["p"])
            full = (p + 1) * 2 ** (p + 1)
            if topo.n_switches == full:     # a transformation point between two sizes
                topo, diff, _ = transform(full, hosts)
            else:
                topo, diff = add_nodes(topo, min(n, full) - topo.n_switches)
            for k in cables:
                cables[k] += diff.counts[k]
        p = int(topo.params["p"])
        path.append((n, p, "add", cables, topo))
        if n == (p + 1) * 2 ** (p + 1):     # full: the transformed network too
            topo, diff, _ = transform(n, hosts)
            path.append((n, p + 1, "transform", {k: diff.counts[k] for k in CABLES}, topo))
    return path


def _pair(n: int, p: int, hosts: int, routing: str, cfg: dict, traffic: str,
          loads: list[float], steps: int, seed: int) -> dict:
    """One (network, routing): bound, latency runs, bisection (runs in a worker process)."""
    from simulator.bound import throughput_bound
    from simulator.run import simulate, tables_for
    from tablegen.topologies.dsnf import build_dsnf

    ts, over = tables_for(build_dsnf(n, hosts, p=p), routing)
    c = SimConfig.from_dict(cfg).replace(**over)
    bound = throughput_bound(ts, traffic, seed)["bound"]
    runs = [simulate(ts, c, traffic, x, seed) for x in loads]
    lo = max((r["offered"] for r in runs if not r["saturated"]), default=0.0)
    hi = min((r["offered"] for r in runs if r["saturated"]), default=min(1.0, bound or 1.0))
    for _ in range(steps):
        if hi <= lo:                    # saturated below an unsaturated load: nothing between
            break
        r = simulate(ts, c, traffic, round((lo + hi) / 2, 4), seed)
        runs.append(r)
        hi, lo = (r["offered"], lo) if r["saturated"] else (hi, r["offered"])
    sat = [r["offered"] for r in runs if r["saturated"]]
    at = [r for r in runs if r["offered"] == lo and not r["saturated"]]
    return {"n": n, "p": p, "routing": routing, "num_vcs": ts.num_vcs, "bound": bound,
            "saturation": lo, "first_saturated": min(sat, default=None),
            "accepted_at_saturation": at[0]["accepted"] if at else None,
            "max_accepted": max(r["accepted"] for r in runs),
            "latency": {f"{x:g}": runs[k]["latency_avg"] for k, x in enumerate(loads)},
            "runs": runs}


def growth(spec: str, sizes: list[int], routings: list[str], traffic: str = "uniform",
           loads: list[float] = (0.03,), config: SimConfig | None = None,
           search_steps: int = 4, seed: int = 1, workers: int | None = None, out=None,
           title: str | None = None, progress: bool = True) -> dict:
    """Every (network of :func:`growth_path`, routing) of the module docstring; returns
    ``{"spec", "sizes", "routings", "traffic", "loads", "search_steps", "seed", "config",
    "networks", "results"}`` and, with ``out`` (a path without suffix), writes ``out.json``
    and ``out.png``."""
    from tablegen.analysis.layout import analyze

    cfg = (config or SimConfig()).to_dict()
    path = growth_path(spec, sizes)
    nets = []
    for n, p, step, cables, topo in path:
        a = analyze(topo)
        nets.append({"n": n, "p": p, "step": step, "cables": cables,
                     "diameter": a["diameter"], "aspl": a["aspl"]})
    hosts = int(path[0][4].hosts[0])
    jobs = [(n, p, hosts, r, cfg, traffic, [float(x) for x in loads], search_steps, seed)
            for n, p, *_ in path for r in routings]
    results = _run(jobs, workers, progress)
    res = {"spec": spec, "sizes": list(sizes), "hosts": hosts, "routings": list(routings),
           "traffic": traffic, "loads": [float(x) for x in loads],
           "search_steps": search_steps, "seed": seed, "config": cfg, "networks": nets,
           "results": results}
    return save(res, out, title, plot)


def _run(jobs: list[tuple], workers: int | None, progress: bool) -> list[dict]:
    """:func:`_pair` of every job, in the jobs' order, on ``workers`` processes (default:
    one per CPU, at most one per job)."""
    from rich.progress import track

    workers = workers or min(len(jobs), os.cpu_count() or 1)
    bar = dict(description="growth", total=len(jobs), disable=not progress)
    if workers <= 1:
        return list(track((_pair(*j) for j in jobs), **bar))
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(track(ex.map(_pair, *zip(*jobs)), **bar))


def plot(res: dict, path) -> None:
    """Against the switch count, the networks in growth order (a transformation is a
    vertical step at one size; square markers: after it): saturation throughput per
    routing (the accepted load at the largest unsaturated offered load, a bar up to the
    smallest saturated one, the bound dotted); mean latency per (routing, load) (hollow:
    saturated); diameter and ASPL, with each routing's mean hops at the lowest load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (thr, lat, hop) = plt.subplots(1, 3, figsize=(15, 4.4))
    nets = res["networks"]
    xs = [net["n"] for net in nets]
    marks = ["s" if net["step"] == "transform" else "o" for net in nets]
    for k, r in enumerate(res["routings"]):
        col = f"C{k}"
        rows = [x for x in res["results"] if x["routing"] == r]
        acc = [x["accepted_at_saturation"] or 0.0 for x in rows]
        thr.plot(xs, acc, "-", color=col, label=f"{r} (saturation)")
        thr.plot(xs, [x["bound"] for x in rows], ":", color=col, lw=1, label=f"{r} bound")
        for x, a, m in zip(rows, acc, marks):
            thr.plot(x["n"], a, m, color=col)
            if x["first_saturated"] is not None:
                thr.vlines(x["n"], a, x["first_saturated"], color=col, lw=3, alpha=0.3)
        for j, load in enumerate(res["loads"]):
            key = f"{load:g}"
            runs = [x["runs"][j] for x in rows]
            lat.plot(xs, [x["latency"][key] or math.nan for x in rows], ["-", "--", ":"][j % 3],
                     color=col, label=f"{r} @ {key}")
            for run, m in zip(runs, marks):
                lat.plot(run["switches"], run["latency_avg"], m, color=col,
                         mfc="none" if run["saturated"] else col)
        hop.plot(xs, [x["runs"][0]["hops_avg"] for x in rows], "--", color=col, lw=1,
                 label=f"{r}: mean hops @ {res['loads'][0]:g}")
    for key, label, col in (("diameter", "diameter", "k"), ("aspl", "ASPL", "0.5")):
        hop.plot(xs, [net[key] for net in nets], "-", color=col, label=label)
        for net, m in zip(nets, marks):
            hop.plot(net["n"], net[key], m, color=col)
    for i, net in enumerate(nets):      # first and last network of each p
        if net["p"] != nets[max(i - 1, 0)]["p"] or net["p"] != nets[min(i + 1, len(nets) - 1)][
                "p"] or i in (0, len(nets) - 1):
            hop.annotate(f"p={net['p']}", (net["n"], net["diameter"]), fontsize=7,
                         textcoords="offset points", xytext=(4, 4))
    for ax, ylab, title in (
            (thr, "accepted load (flits/cycle/host)",
             "saturation throughput (bar: up to first saturated load)"),
            (lat, "mean packet latency (cycles)", "latency at fixed offered load"),
            (hop, "hops", "graph (solid) and simulated paths (dashed)")):
        ax.set_xlabel("switches (square: after the p -> p+1 transformation)")
        ax.set_ylabel(ylab)
        ax.set_title(title, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5)
    thr.set_ylim(bottom=0)
    fig.suptitle(res.get("title") or f"{res['spec']} grown — {res['traffic']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
