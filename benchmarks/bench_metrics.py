"""What ``--metrics`` costs the controller (issue 28): Slim Fly q = 5, adaptive UGAL-L, under
Mininet + Open vSwitch, with and without ``--metrics`` (and a real Prometheus scraping it
every ``--scrape`` seconds), alternating, ``--repeats`` times each.

    .venv/bin/python benchmarks/bench_metrics.py --json /tmp/metrics.json

Measured per run, from the controller's own log and decision log:
- install time: the first switch connected to the last switch verified (log timestamps);
- poll-round time: the mean interval between decision rounds (``--decisions`` lines,
  ``CLOCK_MONOTONIC``) over ``--seconds`` of idle fabric, less the poll period — the work
  each round and everything else in the controller's hub (a scrape included) add to it.
And the controller process's CPU time (``/proc/PID/stat``: user + system) over the same two
spans — the install (net start to every switch verified) and per idle poll round — which
other processes on shared cores disturb far less than the wall-clock times.
With ``--metrics``: Prometheus' own ``scrape_duration_seconds`` too.  Prints one line per
run and the medians' relative change (the issue asks for < 5 %).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import cleanup_leftovers, emulate, ensure_ovs
from emulation.prometheus import Prometheus, values
from tablegen.exports.files import write_table_set
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from tablegen.verify import verify

PREFIX = "pm"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _t(line: str) -> float | None:
    m = STAMP.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def install_seconds(log: str) -> float:
    """First ``connected`` to last ``verified`` line of a controller log."""
    conn = [_t(x) for x in log.splitlines() if re.search(r"switch \d+ \(dpid \w+\) connected", x)]
    ver = [_t(x) for x in log.splitlines() if re.search(r"switch \d+ verified", x)]
    return max(ver) - min(conn)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(topo, tables: Path, work: Path, metrics: bool, seconds: float, poll: float,
        scrape: float) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    dec = work / "decisions.jsonl"
    args = ["--poll", str(poll), "--decisions", str(dec)]
    prom = None
    if metrics:
        mport = free_port()
        args += ["--metrics", f"127.0.0.1:{mport}"]
    ctl = Controller(tables, free_port(), work, args=tuple(args))
    try:
        if metrics:
            prom = Prometheus([f"127.0.0.1:{mport}"], work / "prometheus", free_port(), scrape)
            prom.wait_ready()
        cpu0 = cpu_seconds(ctl.proc.pid)
        with emulate(topo, controller_port=ctl.port, prefix=PREFIX):
            ctl.wait_verified(topo.n_switches, timeout=300)
            cpu1 = cpu_seconds(ctl.proc.pid)
            t_idle = time.monotonic()
            time.sleep(seconds)
            cpu2 = cpu_seconds(ctl.proc.pid)
        scrape_s = None
        if prom is not None:
            scrape_s = values(prom.query('avg_over_time(scrape_duration_seconds'
                                         '{job="fabroute"}[10m])'))[0]
    finally:
        if prom is not None:
            prom.stop()
        ctl.stop()
        cleanup_leftovers(PREFIX)
    rounds = [json.loads(x)["monotonic"] for x in dec.read_text().splitlines()]
    idle = [t for t in rounds if t >= t_idle]
    gaps = [b - a for a, b in zip(idle, idle[1:])]
    return {"metrics": metrics, "install_s": round(install_seconds(ctl.log_path.read_text()), 3),
            "round_s": round(statistics.mean(gaps) - poll, 4), "rounds": len(idle),
            "install_cpu_s": round(cpu1 - cpu0, 3),
            "round_cpu_s": round((cpu2 - cpu1) / max(len(idle), 1), 4),
            "scrape_s": None if scrape_s is None else round(scrape_s, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="slimfly:q=5")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0, help="idle time measured per run")
    ap.add_argument("--poll", type=float, default=1.0)
    ap.add_argument("--scrape", type=float, default=5.0, help="Prometheus' scrape interval")
    ap.add_argument("--json", help="write every run here")
    args = ap.parse_args()
    ensure_ovs()
    topo = build(args.spec)
    ts = build_tables(topo, "ugal-l")
    out = {"spec": args.spec, "poll": args.poll, "scrape": args.scrape, "runs": []}
    with tempfile.TemporaryDirectory(prefix="fabroute-bench-metrics-") as tmp:
        d = Path(tmp)
        write_table_set(ts, verify(ts), d / "tables", ("openflow",))
        for i in range(args.repeats):
            for metrics in (False, True):
                r = run(topo, d / "tables", d / f"run{i}-{int(metrics)}", metrics, args.seconds,
                        args.poll, args.scrape)
                out["runs"].append(r)
                print(json.dumps(r), flush=True)
    med = {}
    for key in ("install_s", "round_s", "install_cpu_s", "round_cpu_s"):
        off = statistics.median(r[key] for r in out["runs"] if not r["metrics"])
        on = statistics.median(r[key] for r in out["runs"] if r["metrics"])
        med[key] = {"off": off, "on": on, "change": round((on - off) / off, 4) if off else None}
        print(f"{key}: without {off:.4f} s, with --metrics {on:.4f} s "
              f"({(on - off) / off * 100 if off else float('nan'):+.1f} %)")
    out["medians"] = med
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
