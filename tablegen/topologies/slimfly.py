"""Slim Fly: the MMS graphs of Besta & Hoefler (SC14) as built by Yébenes et al. (HOTI 2017).

Switches are ``(s, x, y)`` for ``s`` in {0, 1} and ``x, y`` in GF(q); switch id
``s*q^2 + x*q + y`` (subgraph-major, then group, then row: the numbering under which the
adversarial traffic of Yébenes et al. Algorithm 2 / Table III makes every flow two hops).

Edges (all arithmetic in GF(q), see :mod:`tablegen.topologies.gf`):
``(0,x,y) ~ (0,x,y')`` iff ``y - y'`` in X; ``(1,m,c) ~ (1,m,c')`` iff ``c - c'`` in X';
``(0,x,y) ~ (1,m,c)`` iff ``y = m x + c``.

Network port order on every switch: first its intra-group neighbours in increasing id, then
its ``q`` neighbours in the other subgraph in increasing id (for ``(0,x,y)`` the neighbour
``(1, m, y - m x)`` sits on cross port ``m``; for ``(1,m,c)`` the neighbour ``(0, x, m x + c)``
on cross port ``x``).
"""

from __future__ import annotations

import math

import numpy as np

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topologies.gf import GF
from tablegen.topology import Topology, TopologyBuilder

#: ξ used by Yébenes et al. (Tables II and III).  For δ = -1 the choice of ξ changes the graph
#: itself (not only its labels), so these are the defaults where the paper gives one.
PAPER_XI = {7: 3, 11: 2, 13: 2, 17: 3, 19: 3}


def delta_of(q: int) -> int:
    """δ in q = 4w + δ, or :class:`TopologyError` if q is not admissible."""
    r = q % 4
    if q < 3 or r == 2:
        raise TopologyError(
            f"slimfly: q={q} is not admissible; expected a prime power q = 4w + δ with "
            "δ in {-1, 0, 1} (3, 4, 5, 7, 8, 9, 11, 13, 16, …)")
    return {0: 0, 1: 1, 3: -1}[r]


def generator_sets(field: GF, xi: int) -> tuple[list[int], list[int]]:
    """The generator sets X, X' of the MMS construction for primitive element ``xi``.

    δ = +1: X = ξ^{0,2,…,q-3}, X' = ξ^{1,3,…,q-2} (squares / non-squares).
    δ = -1 (q = 4w - 1): X = ξ^{0,2,…,2w-2} ∪ ξ^{2w-1,2w+1,…,4w-3},
    X' = ξ^{1,3,…,2w-1} ∪ ξ^{2w,2w+2,…,4w-2}.  The Yébenes text garbles these; this form is
    the one under which X = -X, X' = -X' (since -1 = ξ^{2w-1}) and the graph is
    k'-regular of diameter 2, which the tests check for every admissible q <= 27.
    δ = 0 (q = 2^m): X = ξ^{0,2,…,q-2}, X' = ξ^{1,3,…,q-1}.
    """
    q = field.q
    d = delta_of(q)
    if d == 1:
        ex, exp = range(0, q - 2, 2), range(1, q - 1, 2)
    elif d == -1:
        w = (q + 1) // 4
        ex = [*range(0, 2 * w - 1, 2), *range(2 * w - 1, 4 * w - 2, 2)]
        exp = [*range(1, 2 * w, 2), *range(2 * w, 4 * w - 1, 2)]
    else:
        ex, exp = range(0, q - 1, 2), range(1, q, 2)
    return sorted({field.power(xi, e) for e in ex}), sorted({field.power(xi, e) for e in exp})


def build_slimfly(q: int, p: int | None = None, xi: int | None = None) -> Topology:
    """Build the Slim Fly MMS(q) switch graph with ``p`` hosts per switch.

    Parameters:
        q: admissible prime power (q = 4w + δ, δ in {-1, 0, 1}).
        p: concentration; default ⌈k'/2⌉ with k' = (3q - δ)/2 (Yébenes Table II).
        xi: primitive element of GF(q); default :data:`PAPER_XI` or the smallest one.

    Limits (:mod:`tablegen.limits`, checked before anything is built): q <= 41, at most 64
    hosts per switch and 131,072 hosts in all.

    Complexity: O(q^2 k') time and memory (2 q^2 switches of network radix k').
    """
    q = limits.at_most("slimfly", "q", q, limits.SLIMFLY_MAX_Q,
                       f"an admissible prime power 3 <= q <= {limits.SLIMFLY_MAX_Q} (network "
                       f"radix (3q - δ)/2 <= {limits.MAX_RADIX} ports)")
    delta = delta_of(q)
    kprime = (3 * q - delta) // 2
    if p is None:
        p = math.ceil(kprime / 2)
    p = limits.check_hosts("slimfly", "p", p, 2 * q * q)
    field = GF(q)
    prims = field.primitive_elements()
    if xi is None:
        xi = PAPER_XI.get(q, prims[0])
    elif xi not in prims:
        raise TopologyError(f"slimfly: xi={xi} is not a primitive element of GF({q}); "
                            f"expected one of {prims}")
    if p < 0:
        raise TopologyError(f"slimfly: p={p}; expected a concentration >= 0")
    X, Xp = generator_sets(field, xi)
    n = 2 * q * q
    b = TopologyBuilder(n, p, ("intra", "cross"))
    labels = np.array([(s, x, y) for s in (0, 1) for x in range(q) for y in range(q)])
    sid = lambda s, x, y: s * q * q + x * q + y  # noqa: E731
    # Intra-group ports first, in increasing neighbour id, on both subgraphs.
    for s, gens in ((0, set(X)), (1, set(Xp))):
        for x in range(q):
            nbrs = {y: [y2 for y2 in range(q) if int(field.sub[y, y2]) in gens] for y in range(q)}
            for y in range(q):
                for j, y2 in enumerate(nbrs[y]):
                    if y < y2:
                        b.put(sid(s, x, y), j, sid(s, x, y2), nbrs[y2].index(y), "intra")
    # Cross ports: (0,x,y) cross port m <-> (1,m,c) cross port x, c = y - m x.
    base0, base1 = len(X), len(Xp)
    for x in range(q):
        for y in range(q):
            for m in range(q):
                c = int(field.sub[y, field.mul[m, x]])
                b.put(sid(0, x, y), base0 + m, sid(1, m, c), base1 + x, "cross")
    group = np.arange(n) // q
    return b.build(kind="slimfly", params={"q": q, "p": p, "xi": xi},
                   label_names=("s", "x", "y"), labels=labels, group=group)
