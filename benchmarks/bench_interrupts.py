"""Interrupt ``fabroute tables`` batches at random moments and check what ``--out`` holds.

    .venv/bin/python benchmarks/bench_interrupts.py [--runs 200] [--seed 1] [--dir /tmp/x]

Two batches that differ in every routing's directory (``--formats json,openflow`` and
``--formats json`` of DSN-F n=64, routings dsnf and min) are written once each as references;
then, over and over, a batch of the other kind is started over ``OUT`` and sent one signal
at a random moment (0-2.5 s): SIGINT, SIGTERM or SIGKILL to the parent, or SIGKILL to one
of its forked workers.  After each, ``OUT`` must equal one of the references byte for byte
(never partial, never a mix of the two).  At the end one more batch runs to completion and
no ``.OUT.*`` leftover may remain.  Prints one JSON line of counts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

FABROUTE = str(Path(sys.executable).with_name("fabroute"))
FORMATS = ("json,openflow", "json")


def tree(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def start(out: Path, formats: str) -> subprocess.Popen:
    return subprocess.Popen([FABROUTE, "tables", "dsnf:n=64", "--routing", "dsnf,min",
                             "--formats", formats, "--out", str(out), "--jobs", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a new temp dir)")
    a = ap.parse_args()
    base = Path(a.dir or tempfile.mkdtemp(prefix="bench-interrupts-"))
    refs = {}
    for f in FORMATS:
        d = base / f"ref-{f.replace(',', '-')}"
        assert start(d, f).wait(300) == 0
        refs[f] = tree(d)
    out = base / "out"
    assert start(out, FORMATS[0]).wait(300) == 0
    rng = random.Random(a.seed)
    counts, signals = Counter(), Counter()
    t0 = time.perf_counter()
    for k in range(a.runs):
        p = start(out, FORMATS[(k + 1) % 2])
        time.sleep(rng.uniform(0.0, 2.5))
        target, sig = p.pid, rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
        try:
            kids = [int(x) for x in
                    Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()]
        except OSError:
            kids = []
        if kids and rng.random() < 0.3:
            target, sig = rng.choice(kids), signal.SIGKILL
        try:
            os.kill(target, sig)
            signals[f"{'worker' if target != p.pid else 'parent'} {sig.name}"] += 1
        except ProcessLookupError:
            signals["finished before the signal"] += 1
        try:
            p.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        time.sleep(0.2)
        got = tree(out)
        counts["old or new, complete" if got in refs.values() else "partial or mixed"] += 1
    assert start(out, FORMATS[0]).wait(300) == 0
    leftovers = sorted(p.name for p in base.iterdir() if p.name.startswith(".out."))
    print(json.dumps({"runs": a.runs, "outcomes": counts, "signals": signals,
                      "leftovers_after_next_run": leftovers,
                      "seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
