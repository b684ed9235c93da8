"""Time and peak memory of topology + routings + verify + exports for the large cases.

Each case runs in its own process (peak RSS is per process).  Usage::

    .venv/bin/python benchmarks/bench_tablegen.py [--case slimfly19|dragonfly2064|dsnf4096]
        [--json out.json] [--no-export]

Prints one line per stage and a summary row per case (the rows of ``RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path

CASES = {
    # spec, routings the papers run on that topology
    "slimfly19": ("slimfly:q=19", ["min", "val", "val-nta", "val-3h", "ugal-l"]),
    "dragonfly2064": ("dragonfly:p=8,a=16,h=8", ["min", "val", "ugal-l", "val-3h"]),
    "dsnf4096": ("dsnf:n=4096", ["dsnf", "min"]),
}


def _run(name: str, export: bool, q) -> None:
    from tablegen.cli import write_table_set
    from tablegen.routing import build_tables
    from tablegen.verify import verify
    from tablegen.spec import build

    spec, routings = CASES[name]
    stages = []
    t0 = time.perf_counter()
    topo = build(spec)
    stages.append(("topology", time.perf_counter() - t0))
    with tempfile.TemporaryDirectory() as tmp:
        for r in routings:
            t = time.perf_counter()
            ts = build_tables(topo, r)
            t1 = time.perf_counter()
            rep = verify(ts)
            t2 = time.perf_counter()
            assert rep.ok, rep.errors
            stages.append((f"{r}: tables", t1 - t))
            stages.append((f"{r}: verify", t2 - t1))
            if export:
                write_table_set(ts, rep, Path(tmp) / r, ("json", "ib", "openflow"))
                stages.append((f"{r}: export", time.perf_counter() - t2))
    total = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
    q.put({"case": name, "spec": spec, "routings": routings, "total_s": total,
           "peak_rss_mib": peak, "stages": stages})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=list(CASES), action="append")
    p.add_argument("--json")
    p.add_argument("--no-export", action="store_true")
    a = p.parse_args()
    results = []
    for name in a.case or list(CASES):
        q = mp.get_context("spawn").Queue()
        proc = mp.get_context("spawn").Process(target=_run, args=(name, not a.no_export, q))
        proc.start()
        res = q.get()
        proc.join()
        results.append(res)
        for stage, sec in res["stages"]:
            print(f"{name:14} {stage:22} {sec:7.2f} s")
        print(f"{name:14} {'TOTAL':22} {res['total_s']:7.2f} s   peak RSS "
              f"{res['peak_rss_mib']:.0f} MiB", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
