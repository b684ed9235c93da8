"""``fabroute verify`` against ``fabroute tables`` for one routing (issue 13's target: verify,
with every export derived again and compared, in at most 3x the time ``tables`` takes for
that routing, under 2 GiB).

    .venv/bin/python benchmarks/bench_verify.py [--spec slimfly:q=19] [--routing val-3h]
                                                [--out /dev/shm/bench-verify] [--repeat 3]

Each command runs in its own process; wall time from outside, peak RSS of the largest
process of the run (``fabroute tables`` forks workers) from ``getrusage``.  Numba's cache is
warmed by one unreported run of each command first.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

FABROUTE = Path(sys.executable).with_name("fabroute")


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of the largest process of ``argv``'s run."""
    probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
             "dt = time.perf_counter() - t; "
             "m = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
             "print(dt, m, r.returncode)")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                         check=True).stdout.split()
    if out[2] != "0":
        raise SystemExit(f"{' '.join(argv)} exited {out[2]}")
    return float(out[0]), int(out[1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="slimfly:q=19")
    ap.add_argument("--routing", default="val-3h")
    ap.add_argument("--out", default="/dev/shm/bench-verify")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tables = [str(FABROUTE), "tables", a.spec, "--routing", a.routing, "--out", a.out]
    verify = [str(FABROUTE), "verify", a.out]
    _run(tables), _run(verify)          # warm Numba's cache
    rows = []
    for _ in range(a.repeat):
        shutil.rmtree(a.out, ignore_errors=True)
        t_tab, m_tab = _run(tables)
        size = sum(p.stat().st_size for p in Path(a.out).rglob("*") if p.is_file())
        t_ver, m_ver = _run(verify)
        rows.append({"tables_s": round(t_tab, 2), "tables_peak_mib": round(m_tab),
                     "verify_s": round(t_ver, 2), "verify_peak_mib": round(m_ver),
                     "ratio": round(t_ver / t_tab, 2), "bytes": size})
        print(json.dumps(rows[-1]), flush=True)
    shutil.rmtree(a.out, ignore_errors=True)
    print(json.dumps({"spec": a.spec, "routing": a.routing, "runs": rows,
                      "max_ratio": max(r["ratio"] for r in rows),
                      "max_verify_peak_mib": max(r["verify_peak_mib"] for r in rows)}))


if __name__ == "__main__":
    main()
