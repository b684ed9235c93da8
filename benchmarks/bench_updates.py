"""Table updates between table sets of one fabric (``tablegen/update.py``, docs/updates.md).

    .venv/bin/python benchmarks/bench_updates.py growth [--start 1024] [--stop 2048] [--routing dsnf]
    .venv/bin/python benchmarks/bench_updates.py failures SPEC [SPEC ...]

``growth``: DSN-F's claim that adding a switch within one ``p`` changes no existing
destination's entries, counted step by step: for every ``n`` from ``start`` to ``stop - 1``
the table sets of ``n`` and ``n + 1`` switches (same ``p``) are built and compared by
:func:`~tablegen.update.table_diff`; prints one JSON line with the totals over all steps
(entries changed and removed toward existing destinations, cables removed, entries added,
the steps whose update is not ``ordered``) and the wall time.

``failures``: every single-link failure of each SPEC, every routing: whether the degraded
tables verify, and the VCs they use against the intact fabric's; one JSON line per routing.
"""

from __future__ import annotations

import argparse
import json
import time

from tablegen.routing.build import build_tables
from tablegen.topologies.dsnf import build_dsnf, p_for
from tablegen.topologies.failures import without_links
from tablegen.topologies.spec import build
from tablegen.update import table_diff
from tablegen.verify import verify

ROUTINGS = ("min", "val", "val-nta", "val-3h", "ugal-l")


def growth(start: int, stop: int, routing: str) -> dict:
    t0 = time.perf_counter()
    p = p_for(start)
    tot = {"steps": 0, "changed": 0, "removed": 0, "cables_removed": 0, "added": 0,
           "not_ordered": []}
    old = build_tables(build_dsnf(start, p=p), routing)
    for n in range(start, stop):
        new = build_tables(build_dsnf(n + 1, p=p), routing)
        d = table_diff(old, new)
        tot["steps"] += 1
        tot["changed"] += d["entries"]["changed"]
        tot["removed"] += d["entries"]["removed"]
        tot["added"] += d["entries"]["added"]
        tot["cables_removed"] += len(d["cables"]["removed"])
        if d["order"]["consistency"] != "ordered":
            tot["not_ordered"].append(n)
        old = new
    late = tot.pop("not_ordered")
    return dict(tot, not_ordered=len(late), not_ordered_first=late[:5], routing=routing, p=p,
                start=start, stop=stop, seconds=round(time.perf_counter() - t0, 1))


def failures(spec: str) -> list[dict]:
    topo = build(spec)
    base = {r: verify(build_tables(topo, r)).vcs_used for r in ROUTINGS}
    rows = {r: {"verified": 0, "vcs": set()} for r in ROUTINGS}
    links = sorted(topo.edge_set())
    t0 = time.perf_counter()
    for a, b in links:
        deg = without_links(topo, [(a, b)])
        for r in ROUTINGS:
            rep = verify(build_tables(deg, r))
            rows[r]["verified"] += rep.ok
            rows[r]["vcs"].add(rep.vcs_used)
    return [{"topology": topo.name(), "routing": r, "links": len(links),
             "verified": rows[r]["verified"], "vcs_intact": base[r],
             "vcs_degraded": sorted(rows[r]["vcs"]),
             "seconds": round(time.perf_counter() - t0, 1)} for r in ROUTINGS]


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("growth")
    g.add_argument("--start", type=int, default=1024)
    g.add_argument("--stop", type=int, default=2048)
    g.add_argument("--routing", default="dsnf")
    f = sub.add_parser("failures")
    f.add_argument("specs", nargs="+")
    a = ap.parse_args()
    if a.cmd == "growth":
        print(json.dumps(growth(a.start, a.stop, a.routing)))
    else:
        for spec in a.specs:
            for row in failures(spec):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
