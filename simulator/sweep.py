"""Load sweeps: every (routing, load) point as a Dask task (:mod:`simulator.cluster`: a local
cluster, this process, or a running scheduler), each finished point streamed into a results
store (:mod:`simulator.store`: an interrupted sweep resumes), then a JSON file with every
result and a latency-vs-offered-load PNG with one curve per routing, both replaced whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

from simulator.config import SimConfig
from tablegen.durable import atomic_path, atomic_write

_CACHE: dict = {}


def sweep(spec: str, routings: list[str], traffic: str, loads: list[float],
          config: SimConfig | None = None, seed: int = 1, workers: int | None = None,
          out: str | os.PathLike | None = None, title: str | None = None,
          progress: bool = True, vcs: int | None = None, bounds: bool = True,
          scheduler: str = "local", store=None) -> dict:
    """Run every (routing, load) point (a routing may be ``ROUTING@SPEC`` to put another
    topology's curve on the same plot); returns ``{"spec", "traffic", "config", "points",
    "failed", "summary"}`` and, with ``out`` (a path without suffix), writes ``out.json`` and
    ``out.png``.  ``summary`` holds per routing the saturation estimates and (``bounds``) the
    analytic bound of :mod:`simulator.bound` (single-class routings; UGAL: its two classes and
    the best fixed split).  ``scheduler``: ``"local"`` or a Dask scheduler address;
    ``store``: the results store (default ``out.points.jsonl`` beside ``out``, none without
    ``out``; ``False``: none).  ``failed`` lists the points that failed (their error); the
    returned dict also has ``run`` (``reused``, ``computed``, ``failed`` counts, ``store``),
    which the JSON file does not."""
    cfg = (config or SimConfig()).to_dict()
    jobs = [(spec, r, cfg, traffic, float(x), seed, vcs) for r in routings for x in loads]
    done = run_jobs(jobs, workers, progress, scheduler, store_path(out, store))
    res = {"spec": spec, "traffic": traffic, "seed": seed, "routings": list(routings),
           "loads": [float(x) for x in loads], "config": cfg,
           "points": [p for p in done.points if p is not None], "failed": failures(done)}
    res["summary"] = summarize(res, bounds=bounds)
    return ran(save(res, out, title, lambda r, png: plot(r, png, title=title)), done)


def store_path(out, store):
    """The store a sweep writing ``out`` keeps: ``store`` if given, none if ``False``, else
    ``out.points.jsonl`` (none without ``out``)."""
    if store is False or (store is None and out is None):
        return None
    return Path(store) if store is not None else Path(f"{out}.points.jsonl")


def run_jobs(jobs: list[tuple], workers: int | None, progress: bool,
             scheduler: str = "local", store=None):
    """:func:`simulator.cluster.run` (an :class:`~simulator.cluster.Outcome`)."""
    from simulator.cluster import run

    return run(jobs, workers, progress, scheduler, store)


def failures(done) -> list[dict]:
    """The failed points of an outcome, as the JSON lists them (without the job index)."""
    return [{k: v for k, v in f.items() if k != "index"} for f in done.failed]


def ran(res: dict, done) -> dict:
    """``res`` with ``run``: how many points were reused from the store, computed, failed."""
    res["run"] = {"reused": done.reused, "computed": done.computed,
                  "failed": len(done.failed), "store": done.store}
    return res


def save(res: dict, out, title: str | None, plotter) -> dict:
    """Name the results (``title``) and, when ``out`` is given, write them as JSON and plot
    them beside as PNG (``plotter(res, path)``), each to a temporary file, fsynced and renamed
    into place (the PNG first: a JSON in place means both are complete)."""
    if title:
        res["title"] = title
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out.with_suffix(".png")) as tmp:
            plotter(res, tmp)
        atomic_write(out.with_suffix(".json"), json.dumps(res, indent=1))
    return res


def run_points(jobs: list[tuple], workers: int | None, progress: bool) -> list[dict]:
    """The results of every job ``(spec, routing, config, traffic, load, seed, vcs)`` in the
    jobs' order (no store); ``RuntimeError`` naming the first failed point, if any."""
    done = run_jobs(jobs, workers, progress)
    if done.failed:
        f = done.failed[0]
        raise RuntimeError(f"{len(done.failed)} point(s) failed; first {f['routing']} at load "
                           f"{f['load']:g}: {f['error']}")
    return done.points


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
    with atomic_path(path.with_suffix(".png")) as tmp:
        plot(res, tmp, title=title or res.get("title"))
    atomic_write(path, json.dumps(res, indent=1))
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
    from simulator.cluster import tables
    from simulator.config import ROUTINGS

    key = ("bound", spec, *ROUTINGS[routing][:2], traffic, seed)
    if key not in _CACHE:
        ts = tables(spec, routing, None)[0]     # those the sweep built, if it ran here
        b = throughput_bound(ts, traffic, seed)
        d = {"bound": b["bound"],
             "class_bounds": {k: v["bound"] for k, v in b["classes"].items()}}
        if "mix" in b:
            d["mix_bound"] = b["mix"]["bound"]
        _CACHE[key] = d
    return dict(_CACHE[key])
