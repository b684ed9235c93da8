"""Load sweeps: every (routing, load) point in parallel processes, a rich progress bar, a JSON
file with every result and a latency-vs-offered-load PNG with one curve per routing."""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .config import SimConfig

_CACHE: dict = {}


def _point(spec: str, routing: str, cfg: dict, traffic: str, load: float, seed: int,
           vcs: int | None) -> dict:
    """One load point (runs in a worker process; topology and tables cached per process)."""
    from tablegen.spec import build

    from .run import simulate, tables_for

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
          progress: bool = True, vcs: int | None = None) -> dict:
    """Run every (routing, load) point (a routing may be ``ROUTING@SPEC`` to put another
    topology's curve on the same plot); returns ``{"spec", "traffic", "config", "points"}``
    and, with ``out`` (a path without suffix), writes ``out.json`` and ``out.png``."""
    cfg = (config or SimConfig()).to_dict()
    jobs = [(spec, r, cfg, traffic, float(x), seed, vcs) for r in routings for x in loads]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    points = []
    if workers <= 1:
        it = (_point(*j) for j in jobs)
        points = _progress(it, len(jobs), progress)
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            futs = [ex.submit(_point, *j) for j in jobs]
            points = _progress((f.result() for f in as_completed(futs)), len(jobs), progress)
    order = {(r, float(x)): k for k, (_, r, _, _, x, _, _) in enumerate(jobs)}
    points.sort(key=lambda p: order[(p["routing_name"], p["load"])])
    res = {"spec": spec, "traffic": traffic, "seed": seed, "routings": list(routings),
           "loads": [float(x) for x in loads], "config": cfg, "points": points}
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(res, indent=1))
        plot(res, out.with_suffix(".png"), title=title)
    return res


def _progress(it, total: int, show: bool) -> list:
    if not show:
        return list(it)
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    out = []
    with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=False) as bar:
        task = bar.add_task("points", total=total)
        for r in it:
            out.append(r)
            bar.advance(task)
    return out


def plot(res: dict, path, title: str | None = None, ymax: float | None = None) -> None:
    """Latency (labelled packets, mean) vs offered load, one curve per routing; saturated
    points are drawn hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    lat_ok = [p["latency_avg"] for p in res["points"]
              if not p["saturated"] and p["latency_avg"] is not None]
    top = ymax or (3 * max(lat_ok) if lat_ok else 100)
    for r in res["routings"]:
        pts = [p for p in res["points"] if p["routing_name"] == r and p["latency_avg"]]
        if not pts:
            continue
        x = [p["offered"] for p in pts]
        y = [min(p["latency_avg"], top) for p in pts]
        (line,) = ax.plot(x, y, "-", label=f"{r} (sat. ≈ {_sat(pts):.2f})")
        for p, yy in zip(pts, y):
            ax.plot(p["offered"], yy, "o", color=line.get_color(),
                    mfc="none" if p["saturated"] else line.get_color())
    ax.set_xlabel("offered load (flits/cycle/host)")
    ax.set_ylabel("mean packet latency (cycles)")
    ax.set_ylim(0, top * 1.05)
    ax.set_title(title or f"{res['spec']} — {res['traffic']}", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _sat(pts: list) -> float:
    """Saturation throughput estimate: the largest accepted load over the points."""
    return max(p["accepted"] for p in pts)
