"""Sweeps of one :class:`~simulator.config.SimConfig` key at fixed offered loads, against
reference routings that do not depend on it — e.g. ``ugal-sdn``'s throughput against its
controller's poll period, with MIN, VAL and per-packet UGAL-L as horizontal lines
(``simulator/experiments/dragonfly-ugal-sdn-poll-period.toml``).

An experiment file selects this with ``vary = "KEY"``, ``values = [...]`` and optionally
``references = [...]``; ``fabroute sweep --experiment FILE`` then writes ``out.json`` (every
result, ``vary_value`` on each point, ``None`` for a reference) and ``out.png``: accepted load
and mean latency against the key (log axis), and, for ``ugal-sdn``, the controller's mean
decided non-minimal share over time for each value at the highest load.
"""

from __future__ import annotations

from simulator.config import SimConfig
from simulator.sweep import failures, ran, run_jobs, save, store_path


def sweep_values(spec: str, routings: list[str], traffic: str, loads: list[float], key: str,
                 values: list, references: list[str] = (), config: SimConfig | None = None,
                 seed: int = 1, workers: int | None = None, out=None, title: str | None = None,
                 progress: bool = True, vcs: int | None = None, scheduler: str = "local",
                 store=None) -> dict:
    """Every (routing, value, load) point with ``config.key = value``, and every (reference,
    load) point with ``config`` as it is; returns ``{"spec", "traffic", "vary", "values",
    "routings", "references", "loads", "config", "points", "failed"}`` and, with ``out`` (a
    path without suffix), writes ``out.json`` and ``out.png``.  ``scheduler``, ``store``,
    ``failed`` and the returned ``run``: as :func:`simulator.sweep.sweep`."""
    base = config or SimConfig()
    cfgs = [base.replace(**{key: v}).to_dict() for v in values]   # checked before any run
    jobs, tags = [], []
    for r in routings:
        for v, c in zip(values, cfgs):
            for x in loads:
                jobs.append((spec, r, c, traffic, float(x), seed, vcs))
                tags.append(v)
    for r in references:
        for x in loads:
            jobs.append((spec, r, base.to_dict(), traffic, float(x), seed, vcs))
            tags.append(None)
    done = run_jobs(jobs, workers, progress, scheduler, store_path(out, store))
    points = []
    for p, v in zip(done.points, tags):
        if p is not None:
            p["vary_value"] = v
            points.append(p)
    failed = failures(done)
    for f, d in zip(failed, done.failed):
        f["vary_value"] = tags[d["index"]]
    res = {"spec": spec, "traffic": traffic, "seed": seed, "vary": key, "values": list(values),
           "routings": list(routings), "references": list(references),
           "loads": [float(x) for x in loads], "config": base.to_dict(), "points": points,
           "failed": failed}
    return ran(save(res, out, title, plot), done)


def plot(res: dict, path) -> None:
    """Accepted load and mean latency against the varied key, one line per (routing, load)
    (hollow markers: saturated), the references as horizontal lines (one colour per
    reference, one dash per load); for results with an ``sdn`` entry a third panel with the
    mean decided non-minimal share per poll over time at the highest load, the measurement
    window shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sdn = [p for p in res["points"] if p.get("sdn") and p["load"] == max(res["loads"])]
    fig, axes = plt.subplots(1, 3 if sdn else 2, figsize=(15 if sdn else 10, 4.4))
    acc, lat = axes[0], axes[1]
    dashes = ["--", ":", "-.", (0, (5, 1, 1, 1))]
    for k, x in enumerate(res["loads"]):
        for r in res["routings"]:
            pts = sorted((p for p in res["points"] if p["routing_name"] == r
                          and p["vary_value"] is not None and p["load"] == x),
                         key=lambda p: p["vary_value"])
            xs = [p["vary_value"] for p in pts]
            (line,) = acc.plot(xs, [p["accepted"] for p in pts], "-", label=f"{r} @ {x:g}")
            lat.plot(xs, [p["latency_avg"] for p in pts], "-", color=line.get_color())
            for p in pts:
                fill = "none" if p["saturated"] else line.get_color()
                acc.plot(p["vary_value"], p["accepted"], "o", color=line.get_color(), mfc=fill)
                lat.plot(p["vary_value"], p["latency_avg"], "o", color=line.get_color(),
                         mfc=fill)
        for j, r in enumerate(res["references"]):
            ref = [p for p in res["points"] if p["routing_name"] == r and p["load"] == x
                   and p["vary_value"] is None]
            if not ref:
                continue
            col = f"C{len(res['routings']) * len(res['loads']) + j}"
            sat = " (sat.)" if ref[0]["saturated"] else ""
            acc.axhline(ref[0]["accepted"], color=col, ls=dashes[k % len(dashes)], lw=1,
                        label=f"{r} @ {x:g}: {ref[0]['accepted']:.3f}{sat}")
            if ref[0]["latency_avg"]:
                lat.axhline(ref[0]["latency_avg"], color=col, ls=dashes[k % len(dashes)], lw=1)
    for ax, ylab in ((acc, "accepted load (flits/cycle/host)"),
                     (lat, "mean packet latency (cycles)")):
        ax.set_xscale("log")
        ax.set_xlabel(res["vary"])
        ax.set_ylabel(ylab)
        ax.grid(alpha=0.3, which="both")
    lat.set_yscale("log")
    acc.set_ylim(bottom=0)
    acc.legend(fontsize=6.5)
    acc.set_title("hollow: saturated; lines: reference routings", fontsize=8)
    if sdn:
        ax = axes[2]
        w = sdn[0]
        start = w["warmup_cycles"]
        ax.axvspan(start, start + w["config"]["measure_cycles"], color="0.92")
        for p in sorted(sdn, key=lambda p: p["vary_value"]):
            s = p["sdn"]
            ax.step(s["poll_t"], s["share_mean"], where="post",
                    label=f"{res['vary']} = {p['vary_value']:g}")
        ax.set_xlabel("cycle (shaded: measurement window)")
        ax.set_ylabel("mean decided non-minimal share")
        ax.set_title(f"{w['routing_name']} @ {w['load']:g}: share per poll, mean over "
                     "(source, key)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5)
    fig.suptitle(res.get("title") or f"{res['spec']} — {res['traffic']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
