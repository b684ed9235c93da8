"""Simulator speed: simulated router-cycles/s and flit-hops/s at one load point.

Default: the 1,056-node Dragonfly of Kim et al. (p = h = 4, a = 8), MIN, uniform random,
offered load 0.5, single-flit packets, 16-flit buffers.  A warm-up run (compiles / loads the
Numba cache) is not timed.

    .venv/bin/python benchmarks/bench_sim.py [--spec dragonfly:p=4,a=8,h=4] [--routing min]
        [--traffic uniform] [--load 0.5] [--speedup 2] [--measure 2000]
        [--allocator rr|islip] [--islip-iterations 1] [--router-delay 1] [--credit-latency 0]
        [--warmup-periods 2] [--flow-control vct|wormhole]

Also times the analytic throughput bound (``simulator.bound.throughput_bound``) of the same
routing and traffic (``bound_s``; Numba cache warm).

"router-cycles" counts (router, cycle) pairs the engine processed (routers holding no packet
are skipped and not counted); "router-cycles (all)" counts every router every cycle, which is
what a simulator that visits each router each cycle (BookSim) does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.config import SimConfig  # noqa: E402
from simulator.run import simulate, tables_for  # noqa: E402
from tablegen.topologies.spec import build  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="dragonfly:p=4,a=8,h=4")
    ap.add_argument("--routing", default="min")
    ap.add_argument("--traffic", default="uniform")
    ap.add_argument("--load", type=float, default=0.5)
    ap.add_argument("--speedup", type=int, default=2)
    ap.add_argument("--measure", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--allocator", default="rr", choices=("rr", "islip"))
    ap.add_argument("--islip-iterations", type=int, default=1)
    ap.add_argument("--router-delay", type=int, default=1)
    ap.add_argument("--credit-latency", type=int, default=0)
    ap.add_argument("--warmup-periods", type=int, default=2)
    ap.add_argument("--flow-control", default="vct", choices=("vct", "wormhole"))
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    topo = build(a.spec)
    ts, over = tables_for(topo, a.routing)
    t_tables = time.perf_counter() - t0
    cfg = SimConfig(speedup=a.speedup, measure_cycles=a.measure, warmup_cycles=a.warmup,
                    warmup_max_periods=a.warmup_periods, allocator=a.allocator,
                    islip_iterations=a.islip_iterations, router_delay=a.router_delay,
                    credit_latency=a.credit_latency, flow_control=a.flow_control, **over)
    simulate(ts, cfg.replace(warmup_cycles=50, measure_cycles=50, warmup_max_periods=1),
             a.traffic, a.load, 1)  # compile / load cache
    t0 = time.perf_counter()
    r = simulate(ts, cfg, a.traffic, a.load, 1)
    wall = time.perf_counter() - t0
    from simulator.bound import throughput_bound

    throughput_bound(ts, a.traffic)  # compile / load cache
    t0 = time.perf_counter()
    b = throughput_bound(ts, a.traffic)
    t_bound = time.perf_counter() - t0
    out = {
        "spec": a.spec, "routing": r["routing"], "traffic": a.traffic, "load": a.load,
        "speedup": a.speedup, "allocator": a.allocator, "hosts": r["hosts"],
        "switches": r["switches"],
        "cycles": r["cycles"], "wall_s": round(wall, 3), "tables_s": round(t_tables, 3),
        "accepted": round(r["accepted"], 4), "latency_avg": r["latency_avg"],
        "router_cycles_per_s": round(r["router_cycles"] / wall),
        "all_router_cycles_per_s": round(r["switches"] * r["cycles"] / wall),
        "flit_hops_per_s": round(r["flit_hops"] / wall),
        "cycles_per_s": round(r["cycles"] / wall, 1),
        "bound": b["bound"] if b["bound"] is not None else
        {k: v["bound"] for k, v in b["classes"].items()},
        "bound_s": round(t_bound, 3),
    }
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
