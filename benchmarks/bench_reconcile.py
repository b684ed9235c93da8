"""``fabroute reconcile`` at scale (issue 26): the matcher's time and peak RSS on a cabled
plan with R cables removed, M moved and K pairs swapped (far ends exchanged: every degree
as planned), from the cabling alone (goal: every one found, each
< 30 s and < 2 GiB).

Each case runs in a fresh process (its own peak RSS) under a time limit; the table gives the
counts found against the truth, or the error the matcher raised, or "timeout".

    .venv/bin/python benchmarks/bench_reconcile.py [--remove 5] [--move 5] [--swap 0] [--limit 120]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = ["slimfly:q=19", "dragonfly:p=4,a=8,h=4", "dsnf:n=4096"]


def _case(spec: str, remove: int, move: int, swap: int, seed: int, q) -> None:
    from tablegen.errors import BadInput
    from tablegen.fabrics.cabled import cabled
    from tablegen.fabrics.match import match
    from tablegen.topologies.spec import build

    topo = build(spec)
    c = cabled(topo, seed=seed, remove=remove, move=move, swap=swap)
    t = time.perf_counter()
    try:
        r = match(c.fabric, topo)
        got = f"{len(r.missing)} missing, {len(r.moved)} moved, {len(r.extra)} extra"
    except BadInput as e:
        got = f"BadInput: {str(e)[:60]}"
    q.put((got, time.perf_counter() - t,
           resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--remove", type=int, default=5)
    ap.add_argument("--move", type=int, default=5)
    ap.add_argument("--swap", type=int, default=0, help="pairs of cables with far ends swapped")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=float, default=120.0, help="seconds per case")
    ap.add_argument("cases", nargs="*", default=CASES)
    a = ap.parse_args()
    print("| fabric | removed + moved + swapped pairs | found | match time (s) | peak RSS (GiB) |")
    print("|---|---|---|---:|---:|")
    for spec in a.cases:
        q = mp.get_context("spawn").Queue()
        p = mp.get_context("spawn").Process(target=_case,
                                             args=(spec, a.remove, a.move, a.swap, a.seed, q))
        p.start()
        p.join(a.limit)
        if p.is_alive():
            p.kill()
            p.join()
            row = ("timeout", f"> {a.limit:.0f}", "-")
        else:
            got, secs, rss = q.get()
            row = (got, f"{secs:.1f}", f"{rss:.2f}")
        print(f"| {spec} | {a.remove} + {a.move} + {a.swap} | {row[0]} | {row[1]} | {row[2]} |", flush=True)


if __name__ == "__main__":
    main()
