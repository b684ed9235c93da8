"""Simulator memory against the number of buffers (goal: linear).

For each fabric: the bytes of the run's state arrays (``simulator.run._State``: packet pool,
input-VC FIFOs, output queues, credit and flit rings, source queues) and the peak RSS of a
fresh process that builds the tables and simulates a short load point.  "Buffers" counts the
network input VCs (switches x ports x VCs) plus the injection buffers (one per host).

    .venv/bin/python benchmarks/bench_sim_memory.py [--json out.json] [--flow-control vct]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = [("slimfly:q=5", "min"), ("slimfly:q=7", "min"), ("slimfly:q=11", "min"),
         ("slimfly:q=13,p=10", "min"), ("slimfly:q=19,p=15", "min"),
         ("dragonfly:p=2,a=4,h=2", "min"), ("dragonfly:p=4,a=8,h=4", "min"),
         ("dragonfly:p=4,a=8,h=4", "val")]


def _case(spec: str, routing: str, fc: str, q) -> None:
    import numpy as np

    from simulator import engine as E
    from simulator.config import SimConfig
    from simulator.run import _params, _State, simulate, tables_for
    from tablegen.topologies.spec import build

    topo = build(spec)
    ts, over = tables_for(topo, routing)
    cfg = SimConfig(flow_control=fc, packet_size=8, buffer_depth=64, speedup=2,
                    warmup_cycles=200, warmup_max_periods=1, measure_cycles=200, **over)
    st = _State(ts, cfg, E.Packed(ts), _params(ts, cfg))
    state = sum(v.nbytes for v in vars(st).values() if isinstance(v, np.ndarray))
    simulate(ts, cfg, "uniform", 0.3, 1)
    N, R = topo.adj.shape
    q.put({"spec": spec, "routing": routing, "flow_control": fc, "switches": N,
           "hosts": topo.n_hosts, "vcs": ts.num_vcs,
           "buffers": N * R * ts.num_vcs + topo.n_hosts, "state_mib": state / 2**20,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def main(argv=None) -> list:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--flow-control", default="vct", choices=("vct", "wormhole"))
    a = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    rows = []
    for spec, routing in CASES:
        q = ctx.Queue()
        p = ctx.Process(target=_case, args=(spec, routing, a.flow_control, q))
        p.start()
        r = q.get()
        p.join()
        r["state_bytes_per_buffer"] = round(r["state_mib"] * 2**20 / r["buffers"])
        rows.append(r)
        print(f"{spec:24} {routing:4} {r['buffers']:>8} buffers  state {r['state_mib']:8.1f} MiB"
              f"  ({r['state_bytes_per_buffer']} B/buffer)  peak RSS {r['peak_rss_mib']:7.0f} MiB",
              flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
