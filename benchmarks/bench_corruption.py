"""The corruption suite of issue 13 over EVERY file of two table sets: Slim Fly q=5 VAL_3h
with every format (``fabroute tables``) and its LMC 2 InfiniBand export (``fabroute ib
export``).  Each file is, in turn, truncated, flipped in one byte, deleted, replaced by a
FIFO, by a symbolic link to itself (a loop) and by a link to ``/dev/zero``; after each,
what the controller runs before it listens (``prove_table_dir``, the same as ``fabroute
verify`` without the InfiniBand semantics pass) must fail naming the file, and the real
``fabroute controller`` refuses a sample of them with exit 2.

    .venv/bin/python benchmarks/bench_corruption.py [--dir /tmp/bench-corruption]

Prints one JSON line: cases, failures named correctly, the slowest case and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FABROUTE = str(Path(sys.executable).with_name("fabroute"))


def _truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _flip(p):
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 1
    p.write_bytes(bytes(b))


def _delete(p):
    p.unlink()


def _fifo(p):
    p.unlink()
    os.mkfifo(p)


def _loop(p):
    p.unlink()
    p.symlink_to(p.name)


def _zero(p):
    p.unlink()
    p.symlink_to("/dev/zero")


CORRUPTIONS = [_truncate, _flip, _delete, _fifo, _loop, _zero]


def main() -> None:
    from tablegen.exports.files import prove_table_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    base = Path(a.dir or tempfile.mkdtemp(prefix="bench-corruption-"))
    sets = {"set": ["tables", "slimfly:q=5", "--routing", "val-3h"],
            "ib": ["ib", "export", "slimfly:q=5", "--routing", "val-3h", "--lmc", "2"]}
    for name, argv in sets.items():
        subprocess.run([FABROUTE, *argv, "--out", str(base / name)], check=True,
                       capture_output=True)
    cases = named = refused = sampled = 0
    slowest, misses = 0.0, []
    for name in sets:
        src = base / name
        files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
        for i, rel in enumerate(files):
            for corrupt in CORRUPTIONS:
                d = base / "case"
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(src, d, symlinks=True)
                corrupt(d / rel)
                t0 = time.perf_counter()
                try:
                    ts, rep, files_rep = prove_table_dir(d)
                    errs = rep.errors if not rep.ok else (files_rep["errors"]
                                                          if not files_rep["ok"] else [])
                    why = "\n".join(errs)
                except ValueError as e:
                    why = str(e)
                slowest = max(slowest, time.perf_counter() - t0)
                cases += 1
                if why and Path(rel).name in why.split("; expected")[0]:
                    named += 1
                else:
                    misses.append(f"{name}/{rel} {corrupt.__name__}: {why[:200]!r}")
                if i % 10 == 0:             # the real controller, on a sample
                    sampled += 1
                    try:
                        r = subprocess.run([FABROUTE, "controller", str(d), "--listen",
                                            "127.0.0.1:1"], capture_output=True, timeout=60)
                        refused += r.returncode == 2
                    except subprocess.TimeoutExpired:      # it served: not refused
                        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"cases": cases, "failed_naming_the_file": named,
                      "controller_refused": f"{refused} of {sampled} sampled",
                      "slowest_case_s": round(slowest, 2), "peak_rss_mib": round(peak),
                      "misses": misses[:10]}))


if __name__ == "__main__":
    main()
