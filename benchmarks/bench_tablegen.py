"""Time and peak memory of topology + routings + verify + exports for the large cases.

Each case runs in its own process (peak RSS is per process) and writes its exports into a
fresh directory under ``--out`` (default ``/dev/shm``, a tmpfs).  On a tmpfs the figure is
fabroute's own work: formatting the text and copying it into the page cache.  On a disk
(``--out /tmp``) writes land in the page cache too, but once the dirty pages pass the
kernel's ``vm.dirty_ratio`` the writer is throttled to the disk's speed, so a case that
writes gigabytes then measures the disk.  Each routing's files are deleted once written
(their size is recorded), unless ``--keep``: a case writes up to 6 GiB, and keeping it all
in RAM measures how fast the machine hands out fresh memory (in a VM that backs guest memory
lazily, a fraction of the speed of memory it has handed out before).  The total is the sum
of the stages.  Usage::

    .venv/bin/python benchmarks/bench_tablegen.py [--case slimfly19|dragonfly2064|dsnf4096]
        [--out DIR] [--keep] [--json out.json] [--no-export]

Prints one line per stage and a summary row per case (the rows of ``RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

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


def _run(name: str, export: bool, out: str, keep: bool, q) -> None:
    from tablegen.cli import write_table_set
    from tablegen.routing import build_tables
    from tablegen.spec import build
    from tablegen.verify import verify

    spec, routings = CASES[name]
    stages, skipped, written = [], {}, 0
    t0 = time.perf_counter()
    topo = build(spec)
    stages.append(("topology", time.perf_counter() - t0))
    with tempfile.TemporaryDirectory(dir=out, prefix="bench_tablegen-") as tmp:
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
                _, skip = write_table_set(ts, rep, Path(tmp) / r, FORMATS)
                stages.append((f"{r}: export", time.perf_counter() - t2))
                skipped.update({f"{r}/{f}": why for f, why in skip.items()})
                written += _size(Path(tmp) / r)
                if not keep:
                    shutil.rmtree(Path(tmp) / r)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
    q.put({"case": name, "spec": spec, "routings": routings, "out": out, "keep": keep,
           "total_s": sum(sec for _, sec in stages), "peak_rss_mib": peak,
           "written_bytes": written, "stages": stages, "skipped": skipped})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=list(CASES), action="append")
    p.add_argument("--out", default=SHM if os.path.isdir(SHM) else tempfile.gettempdir(),
                   help="directory the exports go to (default: %(default)s)")
    p.add_argument("--keep", action="store_true",
                   help="keep every routing's files until the case ends")
    p.add_argument("--json")
    p.add_argument("--no-export", action="store_true")
    a = p.parse_args()
    results = []
    for name in a.case or list(CASES):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=_run, args=(name, not a.no_export, a.out, a.keep, q))
        proc.start()
        res = q.get()
        proc.join()
        results.append(res)
        for stage, sec in res["stages"]:
            print(f"{name:14} {stage:22} {sec:7.2f} s")
        for what, why in res["skipped"].items():
            print(f"{name:14} skipped {what}: {why}")
        print(f"{name:14} {'TOTAL':22} {res['total_s']:7.2f} s   peak RSS "
              f"{res['peak_rss_mib']:.0f} MiB   {res['written_bytes'] / 2**30:.2f} GiB "
              f"written to {a.out}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
