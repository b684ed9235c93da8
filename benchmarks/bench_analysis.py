"""Time :func:`tablegen.analysis.layout.analyze` on a 64x64 torus (N = 4096 switches).

Usage::

    .venv/bin/python benchmarks/bench_analysis.py [--x 64] [--y 64] [--repeat 5] [--scipy]

``--scipy`` also times ``scipy.sparse.csgraph.shortest_path`` on the same graph, the obvious
alternative to our bit-set BFS, and checks that both agree.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tablegen.analysis.layout import analyze
from tablegen.routing.torus import torus_dor_tables
from tablegen.topologies.baselines import build_torus
from tablegen.topology import distance_matrix


def _time(fn, repeat: int) -> tuple[float, float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--x", type=int, default=64)
    ap.add_argument("--y", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scipy", action="store_true")
    args = ap.parse_args()

    lo, med, topo = _time(lambda: build_torus(args.x, args.y), args.repeat)
    print(f"build_torus({args.x}, {args.y})  N={topo.n_switches}: "
          f"min {lo:.3f} s  median {med:.3f} s")
    lo, med, _ = _time(lambda: torus_dor_tables(topo), args.repeat)
    print(f"torus_dor_tables:         min {lo:.3f} s  median {med:.3f} s")
    lo, med, dist = _time(lambda: distance_matrix(topo), args.repeat)
    print(f"distance_matrix:          min {lo:.3f} s  median {med:.3f} s")
    lo, med, result = _time(lambda: analyze(topo), args.repeat)
    print(f"analyze:                  min {lo:.3f} s  median {med:.3f} s")
    print(f"  diameter {result['diameter']}  aspl {result['aspl']:.4f}  "
          f"avg cable {result['cables']['average_length_m']:.4f} m "
          f"({result['cables']['cabinets']} cabinets)")

    if args.scipy:
        import scipy.sparse as sp
        from scipy.sparse.csgraph import shortest_path

        a, _, b, _ = topo.links.T
        g = sp.coo_matrix((np.ones(len(a)), (a, b)), shape=(topo.n_switches,) * 2).tocsr()
        lo, med, ref = _time(
            lambda: shortest_path(g, directed=False, unweighted=True), max(1, args.repeat // 2))
        print(f"scipy shortest_path:      min {lo:.3f} s  median {med:.3f} s")
        assert np.array_equal(ref.astype(np.uint8), dist)


if __name__ == "__main__":
    main()
