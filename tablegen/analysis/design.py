"""``fabroute design``: every topology family sized to about N endpoints, with the cost and
power of :mod:`tablegen.analysis.cost`, average distance, bisection and resilience, ranked
by cost and power per endpoint (the Slim Fly paper's comparison, SC14 §V).

Sizing rules (docs/design.md, "Sizing"): each family's admissible sizes are listed and the
one whose endpoint count is nearest N is taken (ties: the smaller).  A family whose nearest
size is off by more than a factor of :data:`MAX_FACTOR` cannot be sized to N (bad input).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from tablegen import limits
from tablegen.analysis.bisection import bisection
from tablegen.analysis.cost import Prices, cost
from tablegen.analysis.resilience import resilience
from tablegen.errors import TopologyError
from tablegen.topologies.slimfly import delta_of
from tablegen.topology import Topology

__all__ = ["FAMILIES", "MAX_FACTOR", "candidates", "size_family", "avg_distance",
           "evaluate", "design", "curves", "plot"]

#: The families ``design`` compares, in the order the issue names them.
FAMILIES = ("slimfly", "dragonfly", "dsnf", "fattree", "fbfly", "hypercube", "torus",
            "jellyfish")

#: A family is sized to N only if its nearest size is within a factor 3 of N (the balanced
#: Dragonfly's sizes 72, 342, 1,056, 2,550 ... are up to 4.75 apart).
MAX_FACTOR = 3.0

#: Up to this many switches the average distance is exact (all sources); above, the mean
#: over :data:`DISTANCE_SAMPLED_SOURCES` sources drawn with a fixed seed.
DISTANCE_ALL_SOURCES = 2048
DISTANCE_SAMPLED_SOURCES = 256


def _prime_power(q: int) -> bool:
    p = next(d for d in range(2, q + 1) if q % d == 0)
    while q % p == 0:
        q //= p
    return q == 1


def _slimfly() -> list[tuple[str, int]]:
    out = []
    for q in range(3, limits.SLIMFLY_MAX_Q + 1):
        if q % 4 == 2 or not _prime_power(q):
            continue
        kp = (3 * q - delta_of(q)) // 2
        n = 2 * q * q * math.ceil(kp / 2)
        if n <= limits.MAX_HOSTS:
            out.append((f"slimfly:q={q}", n))
    return out


def _dragonfly() -> list[tuple[str, int]]:
    # balanced a = 2p = 2h, g = a*h + 1 (Kim et al. §3.1)
    out = []
    for h in range(1, limits.MAX_RADIX):
        a, g = 2 * h, 2 * h * h + 1
        if a * g > limits.MAX_SWITCHES or h * a * g > limits.MAX_HOSTS or a - 1 + h > \
                limits.MAX_RADIX:
            break
        out.append((f"dragonfly:p={h},a={a},h={h}", h * a * g))
    return out


def _fbfly() -> list[tuple[str, int]]:
    # k-ary n-flat, concentration k: k^n endpoints on k^(n-1) routers of (n-1)(k-1) network
    # ports; n = 2 is a full mesh of k routers, n >= 3 the flattened butterflies Kim et al. use
    out = []
    for n in range(3, 6):
        for k in range(2, limits.MAX_RADIX + 1):
            if (n - 1) * (k - 1) > limits.MAX_RADIX or k ** (n - 1) > limits.MAX_SWITCHES \
                    or k ** n > limits.MAX_HOSTS:
                break
            out.append((f"fbfly:k={k},n={n}", k ** n))
    return out


def candidates(family: str, n: int) -> list[tuple[str, int]]:
    """Every ``(spec, endpoints)`` of ``family`` that :func:`size_family` chooses from
    (for families with a free size, the few sizes around ``n``).  O(sizes)."""
    if family == "slimfly":
        return _slimfly()
    if family == "dragonfly":
        return _dragonfly()
    if family == "fbfly":
        return _fbfly()
    if family == "fattree":
        return [(f"fattree:k={k}", k ** 3 // 4) for k in range(2, limits.MAX_RADIX + 1, 2)
                if 5 * k * k // 4 <= limits.MAX_SWITCHES]
    if family == "hypercube":
        return [(f"hypercube:d={d}", 2 ** d) for d in range(1, 15)]
    if family == "dsnf":
        m = min(max(n, 8), limits.MAX_SWITCHES)
        return [(f"dsnf:n={m}", m)]
    if family == "torus":
        x = min(max(round(math.sqrt(n)), 2), 128)
        y = min(max(round(n / x), 2), 128)
        return [(f"torus:x={x},y={y}", x * y)]
    if family == "jellyfish":
        # the random graph the paper compares: routers of the network radix of the Slim Fly
        # nearest N, as many endpoints each, n*k even
        sf = min(_slimfly(), key=lambda c: (abs(c[1] - n), c[1]))[0]
        q = int(sf.split("=")[1])
        k = (3 * q - delta_of(q)) // 2
        hosts = math.ceil(k / 2)
        r = max(round(n / hosts), k + 1)
        r += (r * k) % 2
        return [(f"jellyfish:n={r},k={k},hosts={hosts}", r * hosts)]
    raise TopologyError(f"design: family {family!r} is unknown; expected one of "
                        f"{', '.join(FAMILIES)}")


def size_family(family: str, n: int) -> tuple[str, int]:
    """The spec of ``family`` whose endpoint count is nearest ``n`` (ties: the smaller), and
    that count; :class:`TopologyError` (bad input) if it is off by more than
    :data:`MAX_FACTOR`."""
    cands = candidates(family, n)
    spec, got = min(cands, key=lambda c: (abs(c[1] - n), c[1]))
    if not n / MAX_FACTOR <= got <= n * MAX_FACTOR:
        lo, hi = min(c[1] for c in cands), max(c[1] for c in cands)
        what = "small" if n < got else "large"
        raise TopologyError(f"design: --endpoints {n} is too {what} for {family} (sizes "
                            f"{lo:,}..{hi:,} endpoints, within a factor {MAX_FACTOR:g}); "
                            "expected --families without it, or another N")
    return spec, got


def avg_distance(topo: Topology) -> float | None:
    """Mean router hops between two distinct endpoints (0 on one router), over ordered
    endpoint pairs: ``sum h_i h_j d(i, j) / (N (N - 1))``.  Exact up to
    :data:`DISTANCE_ALL_SOURCES` switches, else from :data:`DISTANCE_SAMPLED_SOURCES` seeded
    random sources.
    ``None`` if disconnected or with under two endpoints.  O(S (N + L))."""
    n, hosts = topo.n_switches, topo.hosts.astype(np.float64)
    total = hosts.sum()
    if total < 2:
        return None
    l = topo.links
    g = csr_matrix((np.ones(len(l), dtype=np.int8), (l[:, 0], l[:, 2])), shape=(n, n))
    if n <= DISTANCE_ALL_SOURCES:
        src = np.arange(n)
    else:
        rng = np.random.default_rng(1)
        src = np.sort(rng.choice(n, DISTANCE_SAMPLED_SOURCES, replace=False))
    d = shortest_path(g, directed=False, unweighted=True, indices=src)
    if not np.isfinite(d).all():
        return None
    w_src = hosts[src]
    pair_sum = float(w_src @ d @ hosts)
    # sampled sources stand for all: scale their endpoint weight up to the total
    pair_sum *= total / w_src.sum()
    return pair_sum / (total * (total - 1))


def evaluate(topo: Topology, prices: Prices, seeds: int = 20,
             diameter_seeds: int = 5, slack: int = 0) -> dict:
    """The ``fabroute cost`` document of one fabric: :func:`~tablegen.analysis.cost.cost`
    plus ``avg_distance``, ``bisection`` and ``resilience``."""
    doc = {"spec": topo.name(), **cost(topo, prices)}
    doc["avg_distance"] = avg_distance(topo)
    doc["bisection"] = bisection(topo)
    doc["resilience"] = resilience(topo, seeds=seeds, diameter_seeds=diameter_seeds,
                                   slack=slack)
    return doc


def design(n: int, prices: Prices, families=FAMILIES, seeds: int = 20,
           diameter_seeds: int = 5, slack: int = 0, progress=None) -> dict:
    """Every family of ``families`` sized to about ``n`` endpoints (all sized first, so that
    a family that cannot be is refused before any work), evaluated, ranked by cost per
    endpoint (``rank_cost``, 1 the cheapest) and power per endpoint (``rank_power``);
    ``families`` is listed cheapest first."""
    from tablegen.topologies.spec import build

    if n < 1:
        raise TopologyError(f"design: --endpoints {n}; expected an integer >= 1")
    sized = [(f, size_family(f, n)[0]) for f in families]
    rows = []
    for family, spec in sized:
        doc = evaluate(build(spec), prices, seeds, diameter_seeds, slack)
        rows.append({"family": family, **doc})
        if progress:
            progress(family, doc)
    for key, rank in (("cost_per_endpoint", "rank_cost"), ("power_per_endpoint_w",
                                                            "rank_power")):
        for i, row in enumerate(sorted(rows, key=lambda r: r[key])):
            row[rank] = i + 1
    rows.sort(key=lambda r: r["rank_cost"])
    return {"endpoints": n, "families": rows}


def curves(n: int, prices: Prices, families=FAMILIES, points: int = 10) -> dict:
    """Cost and power per endpoint against size, for the paper's plots: every family sized
    to ``points`` targets spaced geometrically from ``n / 16`` to ``2 n`` (sizes a family
    cannot reach are skipped, each spec evaluated once).  Cost model only (no bisection or
    resilience).  ``{family: [{"spec", "endpoints", "cost_per_endpoint",
    "power_per_endpoint_w"}, ...]}`` by increasing size."""
    from tablegen.topologies.spec import build

    targets = sorted({max(2, round(t)) for t in np.geomspace(n / 16, 2 * n, points)})
    out: dict = {}
    for family in families:
        specs = {}
        for t in targets:
            try:
                spec, got = size_family(family, t)
            except TopologyError:
                continue
            specs[spec] = got
        rows = []
        for spec in sorted(specs, key=specs.get):
            c = cost(build(spec), prices)
            rows.append({"spec": spec, "endpoints": c["endpoints"],
                         "cost_per_endpoint": c["cost_per_endpoint"],
                         "power_per_endpoint_w": c["power_per_endpoint_w"]})
        out[family] = rows
    return out


def plot(curve: dict, path) -> None:
    """Two panels, cost and power per endpoint against endpoints (log x), one line per
    family, written to ``path`` (PNG) by one rename of a file beside it."""
    import os
    import tempfile

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for family, rows in curve.items():
        if not rows:
            continue
        x = [r["endpoints"] for r in rows]
        axes[0].plot(x, [r["cost_per_endpoint"] for r in rows], marker="o", ms=3, label=family)
        axes[1].plot(x, [r["power_per_endpoint_w"] for r in rows], marker="o", ms=3,
                     label=family)
    for ax, what in zip(axes, ("cost per endpoint [$]", "power per endpoint [W]")):
        ax.set_xscale("log")
        ax.set_xlabel("endpoints N")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
