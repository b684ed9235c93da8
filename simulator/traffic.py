"""Synthetic traffic patterns as per-host destination ranges.

Every pattern is two arrays ``lo, hi`` over source hosts: a packet of host ``s`` goes to a host
drawn uniformly from ``[lo[s], hi[s])`` (excluding ``s`` itself when the range holds more than
one host); a permutation has ``hi = lo + 1``.  Host ids are switch-major (``tablegen.topology``).

=============== ===========================================================================
name            destination of host ``s`` (``H`` hosts, ``b = ceil(log2 H)`` address bits)
=============== ===========================================================================
uniform         a random host other than ``s``
worst-case      a random host of group ``G + 1 mod g`` (Kim et al. §4.2; Dragonfly)
adversarial     Yébenes et al. Algorithm 2: switch ``w < q²`` sends to ``(w + A) mod q² + q²``,
                switch ``w ≥ q²`` to ``(w + B) mod q²``, end node ``e`` to end node ``e``
                (Table III's A, B; other q: the smallest A, B making every flow two hops).
                ``adversarial:A=2,B=11`` overrides them
transpose       DSN-F paper: the ``b``-bit address rotated by ``b/2`` bits
bitrev          the ``b``-bit address reversed
bitcomp         every bit of the address complemented
shuffle         the address rotated left by one bit
shift           ``(s + H/2) mod H``
randperm        a random permutation (drawn from the run's seed)
=============== ===========================================================================

Bit patterns map a result ``>= H`` (``H`` not a power of two) to ``result mod H``.
"""

from __future__ import annotations

import re

import numpy as np

#: the keys a pattern takes (``adversarial:A=2,B=11``); the others take none
KEYS = {"adversarial": ("A", "B")}
TRAFFICS = ("uniform", "worst-case", "adversarial", "transpose", "bitrev", "bitcomp",
            "shuffle", "shift", "randperm")
ALIASES = {"wc": "worst-case", "worstcase": "worst-case", "bit-reverse": "bitrev",
           "bit-complement": "bitcomp", "permutation": "randperm",
           "random-permutation": "randperm", "ur": "uniform", "random": "uniform",
           "matrix-transpose": "transpose", "adv": "adversarial"}

#: Yébenes et al. Table III: q -> (A, B)
TABLE_III = {7: (4, 3), 11: (1, 10), 13: (2, 11), 17: (3, 14), 19: (6, 13)}


def parse(name: str) -> tuple[str, dict]:
    """``NAME[:KEY=N,...]`` as ``(pattern, keys)``: a name of :data:`TRAFFICS` (or an alias)
    and the integer keys it takes (:data:`KEYS`); anything else is a one-line ``ValueError``
    naming the bad part and what was expected."""
    kind, _, rest = name.partition(":")
    kind = ALIASES.get(kind.strip().lower(), kind.strip().lower())
    if kind not in TRAFFICS:
        raise ValueError(f"traffic {name!r} is unknown; expected one of {', '.join(TRAFFICS)}")
    params = {}
    keys = KEYS.get(kind, ())
    expected = f"expected {', '.join(f'{k}=N' for k in keys)}" if keys else "expected no keys"
    for item in filter(None, (s.strip() for s in rest.split(","))):
        k, eq, v = (x.strip() for x in item.partition("="))
        if k not in keys:
            raise ValueError(f"traffic {kind}: unknown key {k!r:.40}; {expected}")
        if not eq or k in params or not re.fullmatch(r"-?[0-9]+", v):
            raise ValueError(f"traffic {kind}: {item!r:.40} is not a new {k}=integer; "
                             f"{expected}")
        params[k] = int(v)
    return kind, params


def pattern(topo, name: str, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` int64 arrays over hosts for traffic ``name`` on ``topo``."""
    kind, params = parse(name)
    H = topo.n_hosts
    s = np.arange(H, dtype=np.int64)
    if kind == "uniform":
        return np.zeros(H, np.int64), np.full(H, H, np.int64)
    if kind == "worst-case":
        return _worst_case(topo)
    if kind == "adversarial":
        d = _adversarial(topo, params)
    elif kind == "shift":
        d = (s + H // 2) % H
    elif kind == "randperm":
        d = np.random.default_rng(seed).permutation(H).astype(np.int64)
    else:
        b = max(1, int(np.ceil(np.log2(H))))
        if kind == "transpose":
            k = b // 2
            d = ((s << k) | (s >> (b - k))) & ((1 << b) - 1)
        elif kind == "bitrev":
            d = np.zeros(H, np.int64)
            for i in range(b):
                d |= ((s >> i) & 1) << (b - 1 - i)
        elif kind == "bitcomp":
            d = ~s & ((1 << b) - 1)
        else:  # shuffle
            d = ((s << 1) | (s >> (b - 1))) & ((1 << b) - 1)
        d = d % H
    return d.astype(np.int64), d.astype(np.int64) + 1


def _worst_case(topo):
    if topo.kind != "dragonfly":
        raise ValueError(f"traffic worst-case is defined for a dragonfly, not {topo.kind}")
    off = topo.host_offset
    g = topo.group
    G = topo.n_groups
    glo = np.array([off[np.flatnonzero(g == x).min()] for x in range(G)], np.int64)
    ghi = np.array([off[np.flatnonzero(g == x).max() + 1] for x in range(G)], np.int64)
    sw = np.repeat(np.arange(topo.n_switches), topo.hosts)
    tgt = (g[sw] + 1) % G
    return glo[tgt], ghi[tgt]


def adversarial_ab(topo) -> tuple[int, int]:
    """A, B of Algorithm 2: Table III, else the smallest values making every flow 2 hops."""
    q = topo.params["q"]
    if q in TABLE_III and topo.params.get("xi") in (None, {7: 3, 11: 2, 13: 2, 17: 3, 19: 3}[q]):
        return TABLE_III[q]
    from tablegen.topology import distance_matrix

    dist = distance_matrix(topo)
    q2 = q * q
    w = np.arange(q2)

    def first(f):
        for x in range(1, q2):
            if (dist[f(x)[0], f(x)[1]] == 2).all():
                return x
        raise ValueError(f"adversarial: no A/B makes every flow two hops for q={q}")

    A = first(lambda a: (w, (w + a) % q2 + q2))
    B = first(lambda b: (w + q2, (w + q2 + b) % q2))
    return A, B


def _adversarial(topo, params):
    if topo.kind != "slimfly":
        raise ValueError(f"traffic adversarial is defined for a slimfly, not {topo.kind}")
    q = topo.params["q"]
    A, B = adversarial_ab(topo)
    A, B = params.get("A", A), params.get("B", B)
    q2 = q * q
    n = topo.n_switches
    w = np.arange(n)
    dsw = np.where(w < q2, (w + A) % q2 + q2, (w + B) % q2)
    p = topo.hosts
    if not (p == p[0]).all():
        raise ValueError("adversarial traffic needs the same concentration on every switch")
    p = int(p[0])
    e = np.arange(topo.n_hosts)
    return dsw[e // p] * p + e % p
