"""Wall time and peak RSS of every bad-input case of ``tests/test_bounds.py`` (issue 13's
target: under 2 s and 200 MB each), each a fresh ``fabroute`` process in an empty directory,
run ``--repeat`` times; prints a Markdown table for ``benchmarks/RESULTS.md``.

    .venv/bin/python benchmarks/bench_bad_input.py [--repeat 3] [--json FILE]

Peak RSS is ``ru_maxrss`` of ``os.wait4`` on the process (the largest of it and the
children it waited for).  Nothing is asserted: the test checks the behaviour, this measures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cases():
    spec = importlib.util.spec_from_file_location("test_bounds", ROOT / "tests/test_bounds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure(argv: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """``(wall s, peak RSS MiB, exit code, stderr)`` of one run."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return wall, ru.ru_maxrss / 1024, p.returncode, err.read().decode(errors="replace")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    mod = cases()
    rows = []
    for case, _needle in mod.BAD_INPUT:
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as d:
                cwd, ind = Path(d) / "cwd", mod.inputs(Path(d) / "in")
                cwd.mkdir()
                runs.append(measure([str(mod.FABROUTE), *mod.argv_of(case, cwd / "out", ind)],
                                    cwd))
        shown = " ".join(case if len(" ".join(case)) < 90 else [*case[:6], "…"])
        rows.append({"command": shown, "exit": sorted({r[2] for r in runs}),
                     "wall_s": [round(r[0], 2) for r in runs],
                     "rss_mib": [round(r[1]) for r in runs],
                     "lines": max(len(r[3].splitlines()) for r in runs)})
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"Machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; {args.repeat} runs per case\n")
    print("| command | exit | wall (median, max) | peak RSS (max) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| `fabroute {r['command']}` | {','.join(map(str, r['exit']))} | "
              f"{statistics.median(r['wall_s']):.2f} s, {max(r['wall_s']):.2f} s | "
              f"{max(r['rss_mib'])} MiB |")
    walls = [w for r in rows for w in r["wall_s"]]
    rss = [m for r in rows for m in r["rss_mib"]]
    print(f"\n{len(rows)} cases: wall {min(walls):.2f}–{max(walls):.2f} s, peak RSS "
          f"{min(rss)}–{max(rss)} MiB; every exit code 2: "
          f"{all(r['exit'] == [2] for r in rows)}; one stderr line each: "
          f"{all(r['lines'] == 1 for r in rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
