"""Measurements behind docs/design.md (issue 29): METIS against KaHIP for the bisection, and
the Slim Fly paper's case-study tables reproduced cell by cell, with the one-assumption
checks for the cells that differ.

Usage::

    .venv/bin/python benchmarks/bench_design.py partitioners [--repeat 3]
    .venv/bin/python benchmarks/bench_design.py case-study

``partitioners`` needs ``pip install kahip`` (KaHIP is measured, not a dependency).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from tablegen.analysis.bisection import bisection, csr
from tablegen.analysis.cost import cost, load_prices
from tablegen.topologies.spec import build

PARTITION_SPECS = ["torus:x=8,y=8", "torus:x=64,y=64", "slimfly:q=5", "slimfly:q=19",
                   "dragonfly:p=7,a=14,h=7", "dragonfly:p=11,a=22,h=11,g=45", "dsnf:n=1024",
                   "dsnf:n=10000"]

#: The slides' tables, (endpoints, routers, radix, electric, fiber, $ per node, W per node),
#: against the fabroute SPEC read as that column's fabric.
CASE_STUDY = [
    ("2-col Slim Fly", "slimfly:q=19", (10830, 722, 43, 6669, 6869, 1033, 8.02)),
    ("2-col Dragonfly", "dragonfly:p=11,a=22,h=11,g=45", (10890, 990, 43, 6885, 1012, 1365,
                                                          10.9)),
    ("5-col Dragonfly 58,806", "dragonfly:p=11,a=22,h=11", (58806, 5346, 43, 56133, 29524,
                                                            1438, 10.9)),
    ("5-col Dragonfly 9,702", "dragonfly:p=7,a=14,h=7", (9702, 1386, 27, 9009, 4900, 1342,
                                                         10.8)),
    ("5-col Flat. butterfly 20,736", "fbfly:k=12,n=4", (20736, 1728, 43, 9504, 20736, 1570,
                                                        10.8)),
    ("5-col Flat. butterfly 10,000", "fbfly:k=10,n=4", (10000, 1000, 33, 4500, 10000, 1535,
                                                        10.8)),
    ("5-col Random 40,200", "jellyfish:n=4020,k=33,hosts=10", (40200, 4020, 43, 32488, 33842,
                                                               1743, 12.04)),
    ("5-col Random 9,702", "jellyfish:n=1386,k=21,hosts=7", (9702, 1386, 28, 6837, 7716, 1566,
                                                             11.2)),
]


def _kahip(topo, seed: int):
    import kahip

    xadj, adjncy, ew = csr(topo)
    vw = np.maximum(topo.hosts.astype(np.int64), 1)
    cut, parts = kahip.kaffpa(vw.tolist(), xadj.tolist(), ew.tolist(), adjncy.tolist(), 2,
                              0.03, True, seed, kahip.STRONG)
    parts = np.asarray(parts)
    l = topo.links
    return int((parts[l[:, 0]] != parts[l[:, 2]]).sum())


def partitioners(repeat: int) -> None:
    print("| fabric | switches | METIS cut (1 run) | s | METIS best of 16 | s | KaHIP strong "
          "cut | s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for spec in PARTITION_SPECS:
        topo = build(spec)
        tm, tk, cm, ck, t16, c16 = [], [], [], [], [], []
        for seed in range(1, repeat + 1):
            t = time.perf_counter()
            cm.append(bisection(topo, seed=seed, tries=1)["cut_cables"])
            tm.append(time.perf_counter() - t)
            t = time.perf_counter()
            c16.append(bisection(topo, seed=16 * seed)["cut_cables"])
            t16.append(time.perf_counter() - t)
            t = time.perf_counter()
            ck.append(_kahip(topo, seed))
            tk.append(time.perf_counter() - t)
        print(f"| `{spec}` | {topo.n_switches:,} | {np.median(cm):,.0f} | {np.median(tm):.3f} | "
              f"{np.median(c16):,.0f} | {np.median(t16):.3f} | {np.median(ck):,.0f} | "
              f"{np.median(tk):.3f} |")


def _row(doc) -> tuple:
    return (doc["endpoints"], doc["routers"], doc["radix"], doc["cables"]["electric"],
            doc["cables"]["fiber"], round(doc["cost_per_endpoint"]),
            round(doc["power_per_endpoint_w"], 2))


def case_study() -> None:
    P = load_prices()
    names = ("endpoints", "routers", "radix", "electric", "fiber", "$/node", "W/node")
    for label, spec, paper in CASE_STUDY:
        ours = _row(cost(build(spec), P))
        print(f"\n{label}: `fabroute cost {spec}`")
        print("| cell | slides | fabroute | diff |")
        print("|---|---:|---:|---:|")
        for n, a, b in zip(names, paper, ours):
            print(f"| {n} | {a:,} | {b:,} | {100 * (b - a) / a:+.1f} % |")
    # one assumption at a time
    sf = build("slimfly:q=19")
    p14 = cost(build("slimfly:q=19,p=14"), P)
    print(f"\nSlim Fly with p = 14 (radix 43): {_row(p14)}")
    at43 = (722 * 43 * 4 * 0.7) / 10830
    print(f"Slim Fly power at the slides' radix 43 with p = 15: {at43:.3f} W")
    sf_doc = cost(sf, P)
    router43 = 722 * (350.4 * 43 - 892.3)
    per = (router43 + sf_doc["cost"]["cables"]) / 10830
    print(f"Slim Fly routers priced at radix 43: ${per:,.0f} per endpoint")
    unmerged = sf.labels[:, 0] * 19 + sf.labels[:, 1]
    same = unmerged[sf.links[:, 0]] == unmerged[sf.links[:, 2]]
    print(f"Slim Fly, one group per rack: electric {int(same.sum()):,}, fiber "
          f"{int((~same).sum()):,}")
    fit = load_prices(Path(__file__).with_name("prices-slides-fit.toml"))
    print("\n--prices benchmarks/prices-slides-fit.toml (fiber_per_gbps 2.5):")
    for label, spec, paper in CASE_STUDY:
        got = cost(build(spec), fit)["cost_per_endpoint"]
        diff = 100 * (got - paper[5]) / paper[5]
        print(f"| {label} | {paper[5]:,} | {got:,.0f} | {diff:+.1f} % |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("partitioners", "case-study"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    partitioners(args.repeat) if args.what == "partitioners" else case_study()


if __name__ == "__main__":
    main()
