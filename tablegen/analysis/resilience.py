"""Resilience of a fabric to random cable failures (the Slim Fly paper's "Disconnection
metrics" and path-length growth): the fraction of its switch-to-switch cables that can fail,
in a random order, before the switch graph disconnects, and before its diameter grows.

Both properties are monotone in the set of failed cables (removing a cable never reconnects
a graph nor shortens a path), so for every random order one binary search over the number of
failed cables finds the exact point where each breaks: O(log L) connectivity tests of O(N + L)
each (scipy.sparse.csgraph), and O(log L) breadth-first searches for the diameter.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, shortest_path

from tablegen.topology import Topology

__all__ = ["DIAMETER_ALL_SOURCES", "DIAMETER_SAMPLED_SOURCES", "resilience"]

#: Up to this many switches the diameter is checked from every switch; above, from
#: :data:`DIAMETER_SAMPLED_SOURCES` switches drawn once per seed, which can miss a grown
#: distance between two unsampled switches (so the fraction is then an upper estimate).
DIAMETER_ALL_SOURCES = 256
DIAMETER_SAMPLED_SOURCES = 16


def _graph(n: int, a: np.ndarray, b: np.ndarray) -> csr_matrix:
    return csr_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))


def _largest_ok(ok, total: int, gallop: bool = False) -> int:
    """The largest r in [0, total] with ok(r), given ok(0) and ok monotone (true, then false).
    Binary search, O(log total) calls; with ``gallop``, first r = 1, 2, 4, ... until ok
    fails, O(log r) calls, cheaper where the answer is small (a diameter that grows at the
    first failed cables)."""
    lo, hi = 0, total
    if gallop:
        step = 1
        while step <= total and ok(step):
            lo, step = step, step * 2
        hi = min(step - 1, total)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def resilience(topo: Topology, seeds: int = 20, diameter_seeds: int | None = None,
               slack: int = 0) -> dict:
    """Fraction of cables that fail before the fabric disconnects, and before its diameter
    grows by more than ``slack`` hops (0: grows at all), averaged over ``seeds`` random
    failure orders (seeds 1..``seeds``; deterministic).

    Returns ``{"disconnect": {"mean", "min", "max"}, "diameter": {"mean", "min", "max",
    "base", "sources"}, "seeds", "diameter_seeds"}``: each fraction is the number of cables
    that failed while the property still held, over all cables.  ``diameter_seeds`` (default
    ``seeds``) orders are used for the diameter, the costlier test.  A fabric already
    disconnected, or without cables, has fraction 0.

    O(seeds * log L * (N + L)) for disconnection and O(diameter_seeds * log L * S * (N + L))
    for the diameter, S the sources (every switch up to :data:`DIAMETER_ALL_SOURCES`)."""
    n = topo.n_switches
    l = topo.links
    a, b = l[:, 0], l[:, 2]
    total = len(a)
    dseeds = seeds if diameter_seeds is None else diameter_seeds

    def connected(keep: np.ndarray) -> bool:
        g = _graph(n, a[keep], b[keep])
        return connected_components(g, directed=False, return_labels=False) == 1

    base_ok = n > 0 and total > 0 and connected(np.ones(total, dtype=bool))
    disc, diam = [], []
    base_d, n_src = None, 0
    if base_ok:
        all_src = np.arange(n)
        for seed in range(1, max(seeds, dseeds) + 1):
            rng = np.random.default_rng(seed)
            order = rng.permutation(total)

            def keep_after(r: int) -> np.ndarray:
                keep = np.ones(total, dtype=bool)
                keep[order[:r]] = False
                return keep

            if seed <= seeds:
                disc.append(_largest_ok(lambda r: connected(keep_after(r)), total) / total)
            if seed <= dseeds:
                src = (all_src if n <= DIAMETER_ALL_SOURCES
                       else np.sort(rng.choice(n, DIAMETER_SAMPLED_SOURCES, replace=False)))
                n_src = len(src)

                def eccentricity(keep: np.ndarray) -> float:
                    d = shortest_path(_graph(n, a[keep], b[keep]), directed=False,
                                      unweighted=True, indices=src)
                    return float(d.max())

                if base_d is None:
                    base_d = eccentricity(np.ones(total, dtype=bool))
                grown = base_d + slack
                diam.append(_largest_ok(lambda r: eccentricity(keep_after(r)) <= grown,
                                        total, gallop=True) / total)

    def stats(v: list[float]) -> dict:
        return ({"mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v))}
                if v else {"mean": 0.0, "min": 0.0, "max": 0.0})

    return {
        "disconnect": stats(disc),
        "diameter": {**stats(diam), "base": None if base_d is None else int(base_d),
                     "slack": slack, "sources": n_src},
        "seeds": seeds,
        "diameter_seeds": dseeds,
    }
