"""Adaptive UGAL-L on the emulated fabrics (issue 14): goodput of MIN, VAL and UGAL-L with
the controller's decisions under the adversarial pattern and under uniform traffic, and the
reaction of the decisions to a pattern switch — every run a real ``fabroute emulate``
process (Mininet, Open vSwitch, os-ken).

    .venv/bin/python benchmarks/bench_adaptive.py --json /tmp/adaptive.json
    .venv/bin/python benchmarks/bench_adaptive.py --spec slimfly:q=5 --load 0.4

Prints one line per run and a table of the ratios the issue asks for (UGAL-L / MIN and
UGAL-L / VAL per pattern); ``--json`` keeps every report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

FABROUTE = str(Path(sys.executable).with_name("fabroute"))
ADVERSARIAL = {"dragonfly": "worst-case", "slimfly": "adversarial"}


def emulate(spec: str, routing: str, traffic: list[str], load: float, duration: float,
            link: float, extra: list[str]) -> dict:
    cmd = [FABROUTE, "emulate", spec, "--routing", routing, "--load", str(load), "--duration",
           str(duration), "--link-mbit", str(link), "--json", *extra]
    for t in traffic:
        cmd += ["--traffic", t]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", action="append", help="fabrics (default: the issue's two)")
    ap.add_argument("--load", type=float, default=0.6)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--link-mbit", type=float, default=1.0)
    ap.add_argument("--hosts-per-switch", type=int)
    ap.add_argument("--json", help="write every report here")
    args = ap.parse_args()
    specs = args.spec or ["dragonfly:p=2,a=4,h=2", "slimfly:q=5"]
    extra = ["--hosts-per-switch", str(args.hosts_per_switch)] if args.hosts_per_switch else []
    out = {"load": args.load, "duration": args.duration, "link_mbit": args.link_mbit,
           "runs": []}
    for spec in specs:
        adv = ADVERSARIAL[spec.split(":")[0]]
        acc = {}
        for traffic in (adv, "uniform"):
            for routing in ("min", "val", "ugal-l"):
                rep = emulate(spec, routing, [traffic], args.load, args.duration,
                              args.link_mbit, extra)
                acc[traffic, routing] = rep["accepted_load"]
                out["runs"].append(rep)
                print(f"{spec} {traffic:11s} {routing:7s} accepted {rep['accepted_load']:.3f} "
                      f"of {rep['offered_load']:.3f}  lost {rep['lost']:6d}  misrouted "
                      f"{rep['misrouted']}  decision rounds {rep['controller']['rounds']} "
                      f"(read back equal {rep['controller']['rounds_verified']}, differing "
                      f"{rep['controller']['rounds_differing']})", flush=True)
        for traffic in (adv, "uniform"):
            u = acc[traffic, "ugal-l"]
            print(f"{spec} {traffic}: UGAL-L/MIN {u / acc[traffic, 'min']:.2f}  "
                  f"UGAL-L/VAL {u / acc[traffic, 'val']:.2f}")
        rep = emulate(spec, "ugal-l", ["uniform", adv, "uniform"], args.load,
                      args.duration, args.link_mbit, extra)
        out["runs"].append(rep)
        for r in rep["reaction"]:
            print(f"{spec} reaction {r['from']} -> {r['to']}: share of the new pattern's "
                  f"flows {r['share_of_new'][0]:.2f} -> {r['share_of_new'][1]:.2f} (rose after "
                  f"{r['rises']} polls), of the old {r['share_of_old'][0]:.2f} -> "
                  f"{r['share_of_old'][1]:.2f} (fell after {r['falls']} polls)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
