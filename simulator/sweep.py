"""Load sweeps: every (routing, load) point in parallel processes, a rich progress bar, a JSON
file with every result and a latency-vs-offered-load PNG with one curve per routing."""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from simulator.config import SimConfig

_CACHE: dict = {}


def _point(spec: str, routing: str, cfg: dict, traffic: str, load: float, seed: int,
           vcs: int | None) -> dict:
    """One load point (runs in a worker process; topology and tables cached per process)."""
    from simulator.run import simulate, tables_for
    from tablegen.topologies.spec import build

    name = routing
    if "@" in routing:              # ROUTING@SPEC: one curve on another topology
        routing, spec = routing.split("@", 1)
    key = (spec, routing, vcs)
    if key not in _CACHE:
        topo = _CACHE.get(spec) or build(spec)
        _CACHE[spec] = topo
        _CACHE[key] = tables_for(topo, routing, vcs)
    ts, over = _CACHE[key]
    c = SimConfig.from_dict(cfg)
    if over:
        c = c.replace(**over)
    r = simulate(ts, c, traffic, load, seed)
    r["routing_name"] = name
    r["spec"] = spec
    return r


def sweep(spec: str, routings: list[str], traffic: str, loads: list[float],
          config: SimConfig | None = None, seed: int = 1, workers: int | None = None,
          out: str | os.PathLike | None = None, title: str | None = None,
          progress: bool = True, vcs: int | None = None, bounds: bool = True) -> dict:
    """Run every (routing, load) point (a routing may be ``ROUTING@SPEC`` to put another
    topology's curve on the same plot); returns ``{"spec", "traffic", "config", "points",
    "summary"}`` and, with ``out`` (a path without suffix), writes ``out.json`` and
    ``out.png``.  ``summary`` holds per routing the saturation estimates and (``bounds``) the
    analytic bound of :mod:`simulator.bound` (single-class routings; UGAL: its two classes and
    the best fixed split)."""
    cfg = (config or SimConfig()).to_dict()
    jobs = [(spec, r, cfg, traffic, float(x), seed, vcs) for r in routings for x in loads]
    points = run_points(jobs, workers, progress)
    res = {"spec": spec, "traffic": traffic, "seed": seed, "routings": list(routings),
           "loads": [float(x) for x in loads], "config": cfg, "points": points}
    res["summary"] = summarize(res, bounds=bounds)
    return save(res, out, title, lambda r, png: plot(r, png, title=title))


def save(res: dict, out, title: str | None, plotter) -> dict:
    """Name the results (``title``) and, when ``out`` is given, write them as JSON and plot
    them beside as PNG (``plotter(res, path)``)."""
    if title:
        res["title"] = title
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(res, indent=1))
        plotter(res, out.with_suffix(".png"))
    return res


def run_points(jobs: list[tuple], workers: int | None, progress: bool) -> list[dict]:
    """The results of :func:`_point` for every job (its arguments), in the jobs' order, on
    ``workers`` processes (default: one per CPU, at most one per job)."""
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        return _progress((_point(*j) for j in jobs), len(jobs), progress)
    with ProcessPoolExecutor(max_workers=workers) as ex:
        futs = {ex.submit(_point, *j): k for k, j in enumerate(jobs)}
        done = _progress(((futs[f], f.result()) for f in as_completed(futs)), len(jobs),
                         progress)
    return [r for _, r in sorted(done, key=lambda kr: kr[0])]


def _progress(it, total: int, show: bool) -> list:
    if not show:
        return list(it)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = []
    with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=False) as bar:
        task = bar.add_task("points", total=total)
        for r in it:
            out.append(r)
            bar.advance(task)
    return out


def plot(res: dict, path, title: str | None = None, ymax: float | None = None) -> None:
    """Left: latency (labelled packets, mean) vs offered load, one curve per routing,
    saturated points hollow, the analytic bound dotted; right: accepted vs offered load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    summ = res.get("summary") or summarize(res, bounds=False)
    lat_ok = [p["latency_avg"] for p in res["points"]
              if not p["saturated"] and p["latency_avg"] is not None]
    top = ymax or (3 * max(lat_ok) if lat_ok else 100)
    for r in res["routings"]:
        allp = [p for p in res["points"] if p["routing_name"] == r]
        if not allp:
            continue
        pts = [p for p in allp if p["latency_avg"]]   # saturated points may deliver none
        x = [p["offered"] for p in pts]
        y = [min(p["latency_avg"], top) for p in pts]
        b = summ[r].get("bound")
        lo, hi = summ[r]["saturation"], summ[r]["first_saturated"]
        sat = f"sat. {lo:g}–{hi:g}" if hi is not None else f"sat. > {lo:g}"
        lab = f"{r} ({sat}" + (f", bound {b:.3f})" if b else ")")
        (line,) = ax.plot(x, y, "-", label=lab)
        col = line.get_color()
        for p, yy in zip(pts, y):
            ax.plot(p["offered"], yy, "o", color=col, mfc="none" if p["saturated"] else col)
        ax2.plot([p["offered"] for p in allp], [p["accepted"] for p in allp], "-", color=col)
        for p in allp:
            ax2.plot(p["offered"], p["accepted"], "o", color=col,
                     mfc="none" if p["saturated"] else col)
        if b:
            ax.axvline(b, color=col, ls=":", lw=1)
            ax2.axhline(b, color=col, ls=":", lw=1)
    ax.set_xlabel("offered load (flits/cycle/host)")
    ax.set_ylabel("mean packet latency (cycles)")
    ax.set_ylim(0, top * 1.05)
    fig.suptitle(title or f"{res['spec']} — {res['traffic']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    xs = [p["offered"] for p in res["points"]] or [1.0]
    ax2.plot([0, max(xs)], [0, max(xs)], color="0.7", lw=0.8)
    ax2.set_xlabel("offered load (flits/cycle/host)")
    ax2.set_ylabel("accepted load (flits/cycle/host)")
    ax2.set_title("throughput (dotted: analytic bound)", fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replot(path, title: str | None = None, bounds: bool = True) -> dict:
    """Recompute the summary (and bounds) of a sweep's JSON file and redraw its PNG (no
    simulation)."""
    path = Path(path)
    res = json.loads(path.read_text())
    res["summary"] = summarize(res, bounds=bounds)
    if title:
        res["title"] = title
    path.write_text(json.dumps(res, indent=1))
    plot(res, path.with_suffix(".png"), title=title or res.get("title"))
    return res


def _sat(pts: list) -> float:
    """Saturation estimate: the largest offered load of an unsaturated point (0 if none)."""
    return max([p["offered"] for p in pts if not p["saturated"]], default=0.0)


def summarize(res: dict, bounds: bool = True) -> dict:
    """Per routing: ``saturation`` (the largest offered load whose point is not saturated),
    ``first_saturated`` (the smallest offered load whose point is), ``max_accepted`` (the
    largest accepted load: above the saturation point when only some flows are throttled),
    ``latency_low`` (mean latency at the lowest load) and, with ``bounds``, the analytic
    ``bound`` (:func:`simulator.bound.throughput_bound`)."""
    out = {}
    for r in res["routings"]:
        pts = [p for p in res["points"] if p["routing_name"] == r]
        if not pts:
            continue
        sat = [p["offered"] for p in pts if p["saturated"]]
        d = {"saturation": _sat(pts), "first_saturated": min(sat) if sat else None,
             "max_accepted": max(p["accepted"] for p in pts),
             "latency_low": pts[0]["latency_avg"],
             "nonmin_share_max": max((p["nonmin_share"] or 0.0) for p in pts)}
        if bounds:
            try:
                d.update(_bound(pts[0]["spec"], r.split("@")[0], res["traffic"], res["seed"]))
            except Exception as e:  # a bound is a reference; never fail a sweep on it
                d["bound_error"] = str(e)
        out[r] = d
    return out


def _bound(spec: str, routing: str, traffic: str, seed: int) -> dict:
    """The bound of ``routing``'s tables, once per tables: names that differ only in
    simulator config (``ugal-l`` / ``ugal-g``, UGAL-G's readings) share it."""
    from simulator.bound import throughput_bound
    from simulator.config import ROUTINGS
    from simulator.run import tables_for
    from tablegen.topologies.spec import build

    key = ("bound", spec, *ROUTINGS[routing][:2], traffic, seed)
    if key not in _CACHE:
        topo = _CACHE.get(spec) or build(spec)
        _CACHE[spec] = topo
        ts, _ = tables_for(topo, routing)
        b = throughput_bound(ts, traffic, seed)
        d = {"bound": b["bound"],
             "class_bounds": {k: v["bound"] for k, v in b["classes"].items()}}
        if "mix" in b:
            d["mix_bound"] = b["mix"]["bound"]
        _CACHE[key] = d
    return dict(_CACHE[key])
