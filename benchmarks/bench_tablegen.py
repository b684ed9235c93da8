"""Time and peak memory of topology + routings + verify + exports for the large cases.

Each case runs in its own process and does what ``fabroute tables SPEC --routing
R1,R2,... --out DIR`` does (:func:`tablegen.cli.write_routings`): the routings, and once a
routing is verified its formats, run on ``--jobs`` forked workers (default: the CPUs
available).  The figure is the wall time from building the topology to the last file
written; the stage lines are each routing's own times inside its worker (they overlap).
Peak RSS is given for the case's process and for the largest worker (workers share the
parent's pages copy-on-write, so the two are not to be added up page for page).

Exports go into a fresh directory under ``--out`` (default ``/dev/shm``, a tmpfs).  On a
tmpfs the figure is fabroute's own work: formatting the text and copying it into the page
cache.  On a disk (``--out /tmp``) writes land in the page cache too, but once the dirty
pages pass the kernel's ``vm.dirty_ratio`` the writer is throttled to the disk's speed, so
a case that writes gigabytes then measures the disk.  Each routing's files are deleted once
written (their size is recorded; the deletion runs in the case's process and is inside the
figure), unless ``--keep``: a case writes up to 6 GiB, and keeping it all in RAM measures
how fast the machine hands out fresh memory (in a VM that backs guest memory lazily, a
fraction of the speed of memory it has handed out before).  Usage::

    .venv/bin/python benchmarks/bench_tablegen.py [--case slimfly19|dragonfly2064|dsnf4096]
        [--out DIR] [--keep] [--jobs N] [--json out.json] [--no-export]

Prints one line per stage and a summary row per case (the rows of ``RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import resource
import shutil
import tempfile
import time
from pathlib import Path

from tablegen.forked import cpu_count

CASES = {
    # spec, routings the papers run on that topology
    "slimfly19": ("slimfly:q=19", ["min", "val", "val-nta", "val-3h", "ugal-l"]),
    "dragonfly2064": ("dragonfly:p=8,a=16,h=8", ["min", "val", "ugal-l", "val-3h"]),
    "dsnf4096": ("dsnf:n=4096", ["dsnf", "min"]),
}
FORMATS = ("json", "ib", "openflow")
SHM = "/dev/shm"


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _run(name: str, export: bool, out: str, keep: bool, jobs: int, q) -> None:
    from tablegen.cli import write_routings
    from tablegen.routing.build import build_tables
    from tablegen.topologies.spec import build
    from tablegen.verify import verify

    spec, routings = CASES[name]
    stages, skipped, written = [], {}, 0
    t0 = time.perf_counter()
    topo = build(spec)
    stages.append(("topology", time.perf_counter() - t0))
    with tempfile.TemporaryDirectory(dir=out, prefix="bench_tablegen-") as tmp:
        if export:
            def done(res):
                nonlocal written
                assert res["verified"], res
                d = Path(tmp) / res["routing"]
                written += _size(d)
                if not keep:
                    shutil.rmtree(d)
                sec = res["seconds"]
                stages.append((f"{res['routing']}: tables+verify", sec["tables_and_verify"]))
                stages.append((f"{res['routing']}: export", sec["export"]))
                skipped.update({f"{res['routing']}/{f}": why
                                for f, why in res["skipped"].items()})

            write_routings(topo, routings, Path(tmp), FORMATS, jobs=jobs, done=done)
        else:
            for r in routings:
                t = time.perf_counter()
                rep = verify(build_tables(topo, r))
                assert rep.ok, rep.errors
                stages.append((f"{r}: tables+verify", time.perf_counter() - t))
    wall = time.perf_counter() - t0
    # peak RSS of this process and of the largest forked worker (KiB -> MiB)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    q.put({"case": name, "spec": spec, "routings": routings, "out": out, "keep": keep,
           "jobs": jobs, "total_s": wall, "peak_rss_mib": peak, "worker_peak_rss_mib": child,
           "written_bytes": written, "stages": stages, "skipped": skipped})


def _tree_pss(pid: int) -> int:
    """Proportional set size (bytes) of ``pid`` and all its descendants: pages shared
    copy-on-write between forked workers count once in the sum."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for kids in Path(f"/proc/{p}/task").glob("*/children"):
                todo += [int(c) for c in kids.read_text().split()]
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass  # ended meanwhile
    return total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=list(CASES), action="append")
    p.add_argument("--out", default=SHM if os.path.isdir(SHM) else tempfile.gettempdir(),
                   help="directory the exports go to (default: %(default)s)")
    p.add_argument("--keep", action="store_true",
                   help="keep every routing's files until the case ends")
    p.add_argument("--json")
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--jobs", type=int, default=cpu_count(),
                   help="worker processes (default: the CPUs available, %(default)s)")
    a = p.parse_args()
    results = []
    for name in a.case or list(CASES):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=_run, args=(name, not a.no_export, a.out, a.keep, a.jobs,
                                                  q))
        proc.start()
        peak_pss = 0
        while True:
            try:
                res = q.get(timeout=0.1)
                break
            except queue.Empty:
                peak_pss = max(peak_pss, _tree_pss(proc.pid))
                if not proc.is_alive():
                    raise SystemExit(f"{name}: the benchmark process died "
                                     f"(exit code {proc.exitcode})") from None
        proc.join()
        res["peak_tree_pss_mib"] = peak_pss / 2**20
        results.append(res)
        for stage, sec in res["stages"]:
            print(f"{name:14} {stage:22} {sec:7.2f} s")
        for what, why in res["skipped"].items():
            print(f"{name:14} skipped {what}: {why}")
        print(f"{name:14} {'TOTAL (wall)':22} {res['total_s']:7.2f} s   peak PSS of all "
              f"processes {peak_pss / 2**20:.0f} MiB (sampled every 0.1 s; peak RSS: case "
              f"{res['peak_rss_mib']:.0f} MiB, largest worker "
              f"{res['worker_peak_rss_mib']:.0f} MiB; {a.jobs} workers)   "
              f"{res['written_bytes'] / 2**30:.2f} GiB written to {a.out}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
