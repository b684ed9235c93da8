"""Jellyfish [JF]_: a random ``k``-regular graph of ``n`` switches, the random baseline of
the Slim Fly paper.

Construction (the paper's §3): join uniformly drawn pairs of switches that both have a free
port and are not yet neighbours until no such pair is left; then a switch ``s`` left with
two free ports takes a uniformly drawn cable ``(x, y)`` (``x, y`` not neighbours of ``s``)
apart and is cabled to both ends, and two neighbours ``s, t`` left with one free port each
split a cable ``(x, y)`` into ``s–x`` and ``t–y``.  The result is simple and ``k``-regular.
A draw that leaves the fabric disconnected (or the repair stuck) is drawn again from the
next generator of the seed, ``numpy.random.default_rng([seed, attempt])``, so the fabric is
a deterministic function of ``(n, k, seed)``.

Network ports list the neighbours in increasing id.  Link kind ``"random"``; cabinets hold
16 switches in id order (:mod:`tablegen.topologies.baselines`); ``group`` is the switch id.

References
----------
.. [JF] A. Singla, C.-Y. Hong, L. Popa, P. B. Godfrey, "Jellyfish: networking data centers
   randomly", NSDI 2012, §3.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topologies.baselines import _cabinets, _check_int, _hosts_param
from tablegen.topology import Topology, TopologyBuilder

__all__ = ["build_jellyfish"]

#: Draws tried before giving up: a random k-regular graph with k >= 3 is connected with
#: probability 1 - o(1), so a second draw is already rare.
_ATTEMPTS = 100
#: Consecutive rejected pairs after which the greedy phase lists the pairs still possible.
_STALL = 64


def build_jellyfish(n: int, k: int, seed: int = 1, hosts: int = 1) -> Topology:
    """Jellyfish of ``n`` switches with ``k`` network ports each (module docstring).

    Parameters
    ----------
    n : int
        Switches, ``k < n <= 16,384``.
    k : int
        Network ports (degree), ``3 <= k <= 64``; ``n * k`` even.
    seed : int
        ``0 <= seed < 2**32``.
    hosts : int
        Hosts per switch.

    Returns
    -------
    Topology
        ``kind="jellyfish"``, ``params={"n", "k", "seed"}`` (``hosts`` unless 1), labels
        ``("i",)``, connected and ``k``-regular.

    Complexity: O(n k) expected per draw (Python loops: 4 s at n = 16,384, k = 64).
    """
    n = _check_int("n", n, 4, what=" (Jellyfish switches)")
    limits.at_most("jellyfish", "n", n, limits.MAX_SWITCHES,
                   f"k < n <= {limits.MAX_SWITCHES:,}")
    k = _check_int("k", k, 3, min(n - 1, limits.MAX_RADIX),
                   what=f" (Jellyfish network ports, below n={n})")
    if n * k % 2:
        raise TopologyError(f"jellyfish: n={n}, k={k} has n*k = {n * k} cable ends, which "
                            "is odd; expected n*k even (a k-regular graph)")
    seed = _check_int("seed", seed, 0, limits.SEED_BOUND - 1)
    hosts = limits.check_hosts("jellyfish", "hosts", _check_int("hosts", hosts, 0), n)
    for attempt in range(_ATTEMPTS):
        edges = _draw(n, k, np.random.default_rng([seed, attempt]))
        if edges is not None and _connected(n, edges):
            break
    else:  # pragma: no cover - a connected draw among 100 is certain for k >= 3
        raise TopologyError(f"jellyfish: n={n}, k={k}, seed={seed}: no connected draw in "
                            f"{_ATTEMPTS} attempts; expected another seed")
    b = TopologyBuilder(n, hosts, ("random",))
    for a, c in sorted(edges):   # (a, c) with a < c, sorted: neighbours in increasing id
        b.add(a, c, "random")
    return b.build(kind="jellyfish", params={"n": n, "k": k, "seed": seed,
                                            **_hosts_param(hosts)},
                   label_names=("i",), labels=np.arange(n)[:, None], cabinet=_cabinets(n),
                   radix=k)


def _draw(n: int, k: int, rng: np.random.Generator) -> set[tuple[int, int]] | None:
    """One draw of the construction: the cables as ``(a, b)``, ``a < b``; None when the
    repair phase finds no cable to split (tried again with the next generator)."""
    nbrs: list[set[int]] = [set() for _ in range(n)]
    free = [k] * n
    edges: list[tuple[int, int]] = []

    def link(a: int, c: int) -> None:
        nbrs[a].add(c)
        nbrs[c].add(a)
        free[a] -= 1
        free[c] -= 1
        edges.append((min(a, c), max(a, c)))

    def cut(i: int) -> tuple[int, int]:
        x, y = edges[i]
        edges[i] = edges[-1]
        edges.pop()
        nbrs[x].discard(y)
        nbrs[y].discard(x)
        free[x] += 1
        free[y] += 1
        return x, y

    open_ = list(range(n))
    pos = {s: s for s in open_}         # index of each switch in open_
    stall = 0
    uniform = _uniforms(rng)
    while len(open_) >= 2:
        i, j = int(next(uniform) * len(open_)), int(next(uniform) * len(open_))
        a, c = open_[i], open_[j]
        if a == c or c in nbrs[a]:
            stall += 1
            if stall < _STALL:
                continue
            pairs = [(a, c) for ai, a in enumerate(open_) for c in open_[ai + 1:]
                     if c not in nbrs[a]]
            if not pairs:
                break
            a, c = pairs[int(rng.integers(len(pairs)))]
        stall = 0
        link(a, c)
        for s in (a, c):
            if not free[s]:     # swap-remove: O(1) per full switch
                i = pos.pop(s)
                last = open_.pop()
                if last != s:
                    open_[i], pos[last] = last, i
    left = [s for s in range(n) if free[s]]
    while left:
        s = max(left, key=lambda v: free[v])
        t = s if free[s] >= 2 else next((v for v in left if v != s), None)
        if t is None:
            return None
        for _ in range(16 * len(edges)):
            i = int(rng.integers(len(edges)))
            x, y = edges[i]
            if rng.integers(2):
                x, y = y, x
            if x not in nbrs[s] and x != s and y not in nbrs[t] and y != t:
                cut(i)
                link(s, x)
                link(t, y)
                break
        else:
            return None
        left = [v for v in range(n) if free[v]]
    return set(edges)


def _uniforms(rng: np.random.Generator, chunk: int = 1 << 16):
    """Uniform floats in ``[0, 1)`` drawn ``chunk`` at a time: one ``rng.integers`` call per
    pair costs more than the whole pairing step."""
    while True:
        yield from rng.random(chunk).tolist()


def _connected(n: int, edges: set[tuple[int, int]]) -> bool:
    """Whether the cables join all ``n`` switches.  O(n + E)."""
    a, c = np.array(sorted(edges)).T
    g = coo_matrix((np.ones(len(a)), (a, c)), shape=(n, n))
    return connected_components(g, directed=False)[0] == 1
