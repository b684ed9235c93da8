"""Simulator scale and cost: memory and time per load point from Slim Fly q = 5 ... 29 and
Dragonfly up to 16K hosts, and a least-squares cost model (per cycle, per flit-hop).

Each case runs in a fresh process (``--child``): it first loads the Numba cache with a
100-cycle run on a small fabric of the same kind and routing (timed apart: ``warm_cpu_s``),
then builds the tables (``tables_for(topo, routing)``, timed) and simulates one load point,
uniform traffic, with the router of the Yébenes et al. experiments: 8-flit packets, 64-flit
buffers, speedup 2, 1-iteration iSLIP, one warm-up period of 500 cycles, a 1,000-cycle
window, then drain.  Recorded per case: hosts, switches, radix, build seconds, the CPU
(user + sys, ``time.process_time``) and wall seconds of ``simulate()``, ``cycles``,
``router_cycles`` (busy (router, cycle) pairs), ``flit_hops`` (flits over network channels),
peak RSS of the child (``ru_maxrss``) after the tables and after the run, the bytes of the
run's state arrays (every NumPy array of ``simulator.run._State``, as in
``bench_sim_memory.py``), the child's whole CPU (``RUSAGE_CHILDREN``) and the load average.

Cost models, fitted by non-negative least squares on relative error over the MIN and VAL
cases of at least ``--fit-min-s`` CPU seconds: ``plain``, ``cpu_s ≈ a·router_cycles +
b·flit_hops + c·cycles·hosts`` (the injection loop visits every host every cycle), and
``islip``, which adds ``a2·router_cycles·ports²`` (iSLIP's grant step scans every input for
every output; ports = network ports + hosts per switch).  ``--refit A.json [B.json ...]``
fits the rows of earlier runs again without measuring.

    .venv/bin/python benchmarks/bench_sim_scale.py [--quick] [--out FILE.json]
        [--load 0.3] [--measure 1000] [--max-run-s 600] [--budget-s 2700] [--no-extra]
        [--case SPEC,ROUTING,LOAD ...] [--warmup 500 --warmup-periods 1] [--refit F.json ...]

Fabrics: Slim Fly ``slimfly:q=Q`` (default p; q = 13 and 19 are Yébenes' 19_10 and 29_15,
p = 10 and 15) and Dragonfly ``dragonfly:p=P,a=2P,h=P`` (P = 4: 1,056 hosts, P = 8: 16,512).
``--quick``: Slim Fly q = 5, 7 and Dragonfly p = 2 only.  Extra cases (VAL at 0.3, MIN at
0.1 on fabrics up to ``--extra-max-hosts``) vary flit-hops per router-cycle for the fit; UGAL-L
on q = 13 and 19 (not fitted: its per-decision table walks are outside the model) shows how
far the model is from it.  Extras run after the main cases, only while the budget lasts.  A
case predicted (from the previous case's CPU per host-cycle) to take over ``--max-run-s``
gets a shorter window (recorded as ``measure``).  One measurement process at a time.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SLIMFLY_Q = (5, 7, 11, 13, 17, 19, 23, 29)
DRAGONFLY_P = (2, 4, 6, 8)
SMALL = {"slimfly": "slimfly:q=5", "dragonfly": "dragonfly:p=2,a=4,h=2"}


def _spec_df(p: int) -> str:
    return f"dragonfly:p={p},a={2 * p},h={p}"


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(c: dict) -> dict:
    """One case in this (fresh) process; returns the measurements."""
    import numpy as np

    from simulator import engine as E
    from simulator.config import SimConfig
    from simulator.run import _params, _State, simulate, tables_for
    from tablegen.topologies.spec import build

    cfg = SimConfig(packet_size=8, buffer_depth=64, speedup=2, allocator="islip",
                    islip_iterations=1, warmup_cycles=c["warmup"],
                    warmup_max_periods=c.get("periods", 1),
                    measure_cycles=c["measure"])
    kind = c["spec"].split(":")[0]
    c0 = time.process_time()
    small_ts, over = tables_for(build(SMALL[kind]), c["routing"])
    simulate(small_ts, cfg.replace(warmup_cycles=50, measure_cycles=50, **over), "uniform",
             c["load"], 1)   # loads (or compiles) the Numba cache
    warm_cpu = time.process_time() - c0
    rss_warm = _rss_mib()
    w0, c0 = time.perf_counter(), time.process_time()
    topo = build(c["spec"])
    ts, over = tables_for(topo, c["routing"])
    build_wall, build_cpu = time.perf_counter() - w0, time.process_time() - c0
    rss_tables = _rss_mib()
    cfg = cfg.replace(**over)
    w0, c0 = time.perf_counter(), time.process_time()
    r = simulate(ts, cfg, "uniform", c["load"], 1)
    sim_wall, sim_cpu = time.perf_counter() - w0, time.process_time() - c0
    rss_peak = _rss_mib()
    st = _State(ts, cfg, E.Packed(ts), _params(ts, cfg))
    state = sum(v.nbytes for v in vars(st).values() if isinstance(v, np.ndarray))
    N, R = topo.adj.shape
    return {"hosts": topo.n_hosts, "switches": N, "radix": int(topo.radix),
            "ports": R + int(topo.hosts.max()), "vcs": ts.num_vcs,
            "buffers": N * R * ts.num_vcs + topo.n_hosts,
            "warm_cpu_s": round(warm_cpu, 2), "build_s": round(build_wall, 2),
            "build_cpu_s": round(build_cpu, 2), "sim_cpu_s": round(sim_cpu, 3),
            "sim_wall_s": round(sim_wall, 3), "cycles": r["cycles"],
            "warmup_cycles": r["warmup_cycles"], "router_cycles": r["router_cycles"],
            "flit_hops": r["flit_hops"], "accepted": round(r["accepted"], 4),
            "latency_avg": r["latency_avg"], "hops_avg": r["hops_avg"],
            "status": r["status"], "drained": r["drained"], "saturated": r["saturated"],
            "state_mib": round(state / 2**20, 1), "rss_warm_mib": round(rss_warm),
            "rss_tables_mib": round(rss_tables), "rss_peak_mib": round(rss_peak)}


def run_case(c: dict) -> dict:
    """``c`` in a fresh subprocess; adds the child's whole CPU (RUSAGE_CHILDREN) and load."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    la0, w0 = os.getloadavg(), time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(c)],
                       capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - w0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise RuntimeError(f"{c}: child failed ({p.returncode}):\n{p.stderr[-3000:]}")
    r = dict(c, **json.loads(p.stdout.strip().splitlines()[-1]))
    r["child_cpu_s"] = round(ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime, 2)
    r["child_wall_s"] = round(wall, 2)
    r["loadavg_before"] = [round(x, 2) for x in la0]
    r["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    cyc, cpu = r["cycles"], r["sim_cpu_s"]
    r["us_per_cycle"] = round(cpu / cyc * 1e6, 1)
    r["ns_per_flit_hop"] = round(cpu / r["flit_hops"] * 1e9, 1) if r["flit_hops"] else None
    r["ns_per_router_cycle"] = round(cpu / r["router_cycles"] * 1e9, 1)
    r["ns_per_host_cycle"] = round(cpu / (cyc * r["hosts"]) * 1e9, 2)
    return r


TERMS = {"plain": ("a_router_cycle", "b_flit_hop", "c_host_cycle"),
         "islip": ("a2_router_cycle_port2", "a_router_cycle", "b_flit_hop", "c_host_cycle")}


def _terms(r: dict, model: str) -> list:
    t = [r["router_cycles"], r["flit_hops"], r["cycles"] * r["hosts"]]
    return t if model == "plain" else [r["router_cycles"] * r["ports"] ** 2] + t


def fit(rows: list, model: str, min_s: float) -> dict:
    """Non-negative least squares on relative error, sum ((pred - y) / y)^2, over the MIN
    and VAL rows of at least ``min_s`` CPU seconds; ``rel_err`` lists every row's."""
    import numpy as np
    from scipy.optimize import nnls

    X = np.array([_terms(r, model) for r in rows], float)
    y = np.array([r["sim_cpu_s"] for r in rows], float)
    mv = np.array([r["routing"] in ("min", "val") for r in rows])
    use = mv & (y >= min_s)
    if use.sum() < 4:   # --quick: too few long rows; fit every MIN and VAL row
        use = mv
    coef, _ = nnls(X[use] / y[use, None], np.ones(int(use.sum())))
    rel = X @ coef / y - 1
    return {"model": model, **{n: float(v) for n, v in zip(TERMS[model], coef)},
            "fitted_rows": int(use.sum()), "max_rel_err": float(np.abs(rel[use]).max()),
            "rms_rel_err": float(np.sqrt((rel[use] ** 2).mean())),
            "rel_err": {f"{r['spec']} {r['routing']} {r['load']}": round(float(e), 3)
                        for r, e in zip(rows, rel)}}


def cases(a) -> tuple[list, list]:
    if a.case:
        return [(s, r, float(x)) for s, r, x in (c.rsplit(",", 2) for c in a.case)], []
    sf = (5, 7) if a.quick else SLIMFLY_Q
    df = (2,) if a.quick else DRAGONFLY_P
    main = [(f"slimfly:q={q}", "min", a.load) for q in sf] + \
        [(_spec_df(p), "min", a.load) for p in df]
    extra = [] if a.no_extra else \
        [(s, "val", a.load) for s, _, _ in main] + [(s, "min", 0.1) for s, _, _ in main] + \
        [(f"slimfly:q={q}", "ugal-l", a.load) for q in (13, 19) if q in sf]
    return main, extra


def report(out: dict, min_s: float) -> None:
    """Adds ``fits`` to ``out`` and prints them."""
    rows = out["rows"]
    if len(rows) < 4:   # --case runs: too few rows to fit three or four coefficients
        return
    out["fits"] = [fit(rows, m, min_s) for m in TERMS]
    for f in out["fits"]:
        print(f"fit {f['model']} ({f['fitted_rows']} rows): " +
              ", ".join(f"{n} = {f[n]:.3g} s" for n in TERMS[f["model"]]) +
              f"; max rel err {f['max_rel_err']:.1%}, rms {f['rms_rel_err']:.1%}")
        print("  rel err: " + ", ".join(f"{k} {v:+.0%}" for k, v in f["rel_err"].items()))


def machine() -> dict:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines()
                  if ln.startswith("Model name")), platform.processor())
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import numba

    return {"cpu": model, "cpus": os.cpu_count(), "mem_gib": round(mem, 1),
            "python": platform.python_version(), "numba": numba.__version__,
            "engine_sha256": hashlib.sha256((ROOT / "simulator/engine.py").read_bytes())
            .hexdigest()[:16]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--warmup-periods", type=int, default=1)
    ap.add_argument("--case", action="append",
                    help="SPEC,ROUTING,LOAD (repeatable): only these cases, no extras")
    ap.add_argument("--refit", nargs="+", help="fit the rows of these JSON files; no runs")
    ap.add_argument("--measure", type=int, default=1000)
    ap.add_argument("--max-run-s", type=float, default=600)
    ap.add_argument("--budget-s", type=float, default=2700)
    ap.add_argument("--no-extra", action="store_true")
    ap.add_argument("--extra-max-hosts", type=int, default=20000)
    ap.add_argument("--fit-min-s", type=float, default=0.5,
                    help="fit the rows of at least this many CPU seconds")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(json.loads(a.child))))
        return {}
    if a.refit:
        rows = [r for f in a.refit for r in json.loads(Path(f).read_text())["rows"]]
        out = {"refit": a.refit, "rows": rows}
        report(out, a.fit_min_s)
        if a.out:
            Path(a.out).write_text(json.dumps(out, indent=1))
        return out
    from tablegen.topologies.spec import build

    main_cases, extra = cases(a)
    hosts = {s: build(s).n_hosts for s, _, _ in main_cases}
    extra = [c for c in extra if hosts[c[0]] <= a.extra_max_hosts]
    out = {"date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
           "machine": machine(), "rows": []}
    t_start = time.perf_counter()
    cost = {}          # kind -> CPU seconds per (cycle x host) of the latest MIN case
    print(f"{'spec':24} {'rt':4} {'load':>4} {'hosts':>6} {'sw':>5} {'build':>6} "
          f"{'cpu':>8} {'wall':>8} {'cycles':>6} {'us/cyc':>8} {'ns/fhop':>7} "
          f"{'ns/rcyc':>7} {'state':>7} {'RSS':>6}", flush=True)
    for i, (spec, routing, load) in enumerate(main_cases + extra):
        kind = spec.split(":")[0]
        measure, guess = a.measure, 0.0
        if kind in cost:
            per_cycle = 1.3 * cost[kind] * hosts[spec] * (2 if routing != "min" else 1)
            warm = a.warmup * a.warmup_periods
            if per_cycle * (warm + a.measure + 300) > a.max_run_s:
                measure = max(200, int(a.max_run_s / per_cycle) - warm - 300)
            guess = per_cycle * (warm + measure + 300)
        if i >= len(main_cases) and time.perf_counter() - t_start + guess > a.budget_s:
            print(f"skipped (budget {a.budget_s:.0f} s): {spec} {routing} {load}")
            continue
        c = {"spec": spec, "routing": routing, "load": load, "warmup": a.warmup,
             "periods": a.warmup_periods, "measure": measure}
        r = run_case(c)
        r["compiled"] = r["warm_cpu_s"] > 5   # Numba cache was stale: RSS includes compiling
        r["engine_sha256"] = hashlib.sha256((ROOT / "simulator/engine.py").read_bytes()) \
            .hexdigest()[:16]
        if routing == "min":
            cost[kind] = max(cost.get(kind, 0), r["sim_cpu_s"] / (r["cycles"] * r["hosts"]))
        out["rows"].append(r)
        print(f"{spec:24} {routing:4} {load:4} {r['hosts']:6} {r['switches']:5} "
              f"{r['build_s']:6.1f} {r['sim_cpu_s']:8.1f} {r['sim_wall_s']:8.1f} "
              f"{r['cycles']:6} {r['us_per_cycle']:8.0f} {r['ns_per_flit_hop'] or 0:7.1f} "
              f"{r['ns_per_router_cycle']:7.0f} {r['state_mib']:7.0f} {r['rss_peak_mib']:6}"
              f"  load avg {r['loadavg_before'][0]}", flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(out, indent=1))
    out["total_s"] = round(time.perf_counter() - t_start, 1)
    report(out, a.fit_min_s)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
