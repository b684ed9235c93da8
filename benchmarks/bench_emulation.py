"""Emulation benchmark (issue 4): for each fabric, `fabroute emulate` end to end — time from
the net's start to "all tables verified" by the controller, flow-mods installed per second,
all-pairs probe time, exact path checks.

    .venv/bin/python benchmarks/bench_emulation.py [--case NAME ...] [--json FILE]

Each case runs in this process through ``emulation.mininet.session.run`` (the code behind
``fabroute emulate``); results go to stdout (one JSON line per case) and, with ``--json``,
are appended to FILE.
"""

from __future__ import annotations

import argparse
import json
import time

from emulation.mininet.session import run
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

CASES = {                # name: (SPEC, routing, hosts attached per switch or None = all)
    "sf5-min": ("slimfly:q=5", "min", None),
    "sf5-val3h": ("slimfly:q=5", "val-3h", None),
    "sf7-min": ("slimfly:q=7", "min", 2),
    "df36-val": ("dragonfly:p=2,a=4,h=2", "val", None),
    "df114-min": ("dragonfly:p=2,a=6,h=3", "min", None),
    "df264-min": ("dragonfly:p=2,a=8,h=4", "min", 1),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--json")
    args = ap.parse_args()
    for name in args.case or list(CASES):
        spec, routing, hosts = CASES[name]
        t0 = time.perf_counter()
        ts = build_tables(build(spec), routing)
        rep = run(ts, check="all-pairs", samples=12, hosts_per_switch=hosts,
                  log=lambda *a: None)
        t = rep["times"]
        row = {"case": name, "spec": rep["topology"], "routing": routing,
               "switches": rep["switches"], "hosts": rep["hosts"], "ok": rep["ok"],
               "net_build_s": t["net_build"],
               # from net.start(), when the bridges start connecting to the controller
               "start_to_verified_s": t["start_to_verified"],
               "flow_mods": rep["flow_mods"], "group_mods": rep["group_mods"],
               "flow_mods_per_s": round(rep["flow_mods"] / max(t["start_to_verified"], 1e-3),
                                        1),
               "pairs": rep["pairs"], "delivered": rep["delivered"],
               "all_pairs_s": rep["seconds"], "path_checks": rep["path_checks"],
               "path_mismatches": rep["path_mismatches"], "total_s": t["total"],
               "wall_s": round(time.perf_counter() - t0, 2)}
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
