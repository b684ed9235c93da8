"""Baseline low-degree topologies that DSN-F is compared against: 2-D torus, DSN-x and DLN-x.

Their routing tables are :mod:`tablegen.routing` (the torus's dimension order in
:mod:`tablegen.routing.torus`).  All three are built with :class:`~tablegen.topology.TopologyBuilder`, so they share the port
numbering of :mod:`tablegen.topology`: hosts on ports ``1 .. hosts``, network port index ``j``
on port ``hosts + 1 + j``.  The port order of each family is documented on its builder.

Every builder fills cabinets with :data:`SWITCHES_PER_CABINET` switches in switch-id order
(the floor model of the DSN-F paper, §IV-C) and leaves ``group`` at its default (the switch id).

References
----------
.. [DSNF] DSN-F: expandable low-degree topology (``/work/shared/papers/dsnf-expandable-low-
   degree-topology.txt``), §II-A (DSN-x) and §IV-C (floor and cable model).
.. [DLN] M. Koibuchi, H. Matsutani, H. Amano, D. F. Hsu, H. Casanova, "A case for random
   shortcut topologies for HPC interconnects", ISCA 2012.
"""

from __future__ import annotations

import math

import numpy as np

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topology import Topology, TopologyBuilder

__all__ = [
    "SWITCHES_PER_CABINET",
    "TORUS_PLUS_X", "TORUS_MINUS_X", "TORUS_PLUS_Y", "TORUS_MINUS_Y",
    "build_torus", "build_dsn", "build_dln",
]

#: Switches per cabinet in the DSN-F paper's floor model (§IV-C).
SWITCHES_PER_CABINET = 16

#: Network port indices of a torus switch.
TORUS_PLUS_X, TORUS_MINUS_X, TORUS_PLUS_Y, TORUS_MINUS_Y = 0, 1, 2, 3

# Attempts per DLN matching round before giving up; a round succeeds with probability about
# exp(-(edges per node so far) / 2), so this only trips when the request is (nearly) infeasible.
_DLN_MAX_TRIES = 10_000


def _cabinets(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int32) // SWITCHES_PER_CABINET


def _hosts_param(hosts: int) -> dict:
    """``{"hosts": hosts}`` unless it is the default 1: the name of a fabric carries every
    parameter that changes it (a SPEC without ``hosts`` means one host per switch)."""
    return {"hosts": hosts} if hosts != 1 else {}


def _check_int(name: str, value, lo: int, hi: int | None = None, what: str = "") -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if ok and value >= lo and (hi is None or value <= hi):
        return int(value)
    rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
    raise TopologyError(f"{name}={value!r}: expected an integer {rng}{what}")


# ---------------------------------------------------------------------------------------------
# 2-D torus
# ---------------------------------------------------------------------------------------------
def build_torus(x: int, y: int, hosts: int = 1) -> Topology:
    """2-D torus of ``x * y`` switches.

    Parameters
    ----------
    x, y : int
        Ring sizes of the X and Y dimensions, each at least 2.
    hosts : int
        Hosts per switch.

    Returns
    -------
    Topology
        ``kind="torus"``, ``params={"x", "y"}`` (``hosts`` unless 1), labels ``("i", "j")``.
        Switch ``(i, j)``, ``0 <= i < x``, ``0 <= j < y``, has id ``j * x + i``.  Network port
        indices are ``0: +x``, ``1: -x``, ``2: +y``, ``3: -y`` (:data:`TORUS_PLUS_X` ...); link
        kinds ``"x"`` and ``"y"``.

    Notes
    -----
    When a ring has two switches (``x == 2`` or ``y == 2``) the ``+`` and ``-`` neighbours are
    the same switch.  We still lay two parallel links (two cables), ``+`` of one switch to ``-``
    of the other and vice versa, so every switch has exactly four ports and the port order, the
    DOR tables and the dateline stay uniform.  ``to_networkx`` then returns a ``MultiGraph``.

    Limits (:mod:`tablegen.limits`, checked first): ``x * y <= 16,384`` switches, diameter
    ``x//2 + y//2 <= 254`` hops, ``hosts <= 64``, ``x * y * hosts <= 131,072``.

    Complexity: O(x * y) time and memory.
    """
    x = _check_int("x", x, 2, what=" (torus ring size)")
    y = _check_int("y", y, 2, what=" (torus ring size)")
    limits.check_switches("torus", f"x={x}, y={y}", x * y, f"x*y <= {limits.MAX_SWITCHES:,}")
    if x // 2 + y // 2 > limits.MAX_DIAMETER:  # hop distances are uint8
        raise TopologyError(f"torus: x={x}, y={y} has diameter {x // 2 + y // 2} hops, above "
                            f"the largest supported {limits.MAX_DIAMETER}; expected "
                            f"x//2 + y//2 <= {limits.MAX_DIAMETER}")
    hosts = limits.check_hosts("torus", "hosts", _check_int("hosts", hosts, 0), x * y)
    n = x * y
    ids = np.arange(n)
    i, j = ids % x, ids // x
    east = j * x + (i + 1) % x
    north = ((j + 1) % y) * x + i
    b = TopologyBuilder(n, hosts, ("x", "y"))
    # Explicit slots: each link is +dir at one end and -dir at the other, which `add`'s
    # call-order numbering could not guarantee around the wrap-around.
    for s in range(n):
        b.put(s, TORUS_PLUS_X, int(east[s]), TORUS_MINUS_X, "x")
        b.put(s, TORUS_PLUS_Y, int(north[s]), TORUS_MINUS_Y, "y")
    return b.build(kind="torus", params={"x": x, "y": y, **_hosts_param(hosts)},
                   label_names=("i", "j"),
                   labels=np.stack([i, j], axis=1), cabinet=_cabinets(n), radix=4)


# ---------------------------------------------------------------------------------------------
# DSN-x
# ---------------------------------------------------------------------------------------------
def _dsn_levels(n: int, p: int) -> np.ndarray:
    return np.arange(n) % p + 1


def build_dsn(n: int, x: int | None = None, hosts: int = 1) -> Topology:
    """Distributed Shortcut Network DSN-x [DSNF]_ (§II-A).

    Construction: a ring ``0 .. n-1``; ``p = ceil(log2 n)``; node ``i`` has level
    ``(i mod p) + 1``; every node ``i`` of level ``l <= x`` gets one shortcut to the node ``j``
    of level ``l + 1`` with the minimum clockwise distance ``(j - i) mod n`` that is at least
    ``floor(n / 2**l)``.

    Parameters
    ----------
    n : int
        Number of switches, at least 4.
    x : int, optional
        Number of shortcut levels, ``1 <= x <= p - 1``; default ``p - 1``.
    hosts : int
        Hosts per switch.

    Returns
    -------
    Topology
        ``kind="dsn"``, ``params={"n", "x"}`` (resolved ``x``; ``hosts`` unless 1), labels
        ``("i", "level")``, link kinds ``"ring"`` and ``"shortcut"``.  Port indices: ``0`` pred,
        ``1`` succ, ``2`` the outgoing shortcut if the node has one (level ``<= x``), then the
        incoming shortcuts in increasing source id.  Indices are packed: a node without an
        outgoing shortcut has its first incoming one on index 2.  The radix is the maximum
        degree; shorter nodes leave trailing slots unconnected.

    Notes
    -----
    The definition is followed literally, so when ``floor(n / 2**l)`` is 1 or the wrap-around
    is near, a shortcut can join two ring neighbours (e.g. ``n = 10``: shortcut 2 -> 3).  It is
    kept as a parallel link (a second cable), like the torus with a ring of 2.

    Limits (:mod:`tablegen.limits`, checked first): ``n <= 16,384``, ``hosts <= 64``,
    ``n * hosts <= 131,072``.

    Complexity: O(n * p) time, O(n) memory.
    """
    n = _check_int("n", n, 4, what=" (DSN switches)")
    limits.at_most("dsn", "n", n, limits.MAX_SWITCHES, f"4 <= n <= {limits.MAX_SWITCHES:,}")
    p = math.ceil(math.log2(n))
    x = p - 1 if x is None else _check_int("x", x, 1, p - 1, what=f" (DSN levels, p={p})")
    hosts = limits.check_hosts("dsn", "hosts", _check_int("hosts", hosts, 0), n)
    level = _dsn_levels(n, p)

    src = np.flatnonzero(level <= x)
    dst = np.empty_like(src)
    for k, s in enumerate(src):
        lv = int(level[s])
        d0 = n >> lv  # floor(n / 2**l)
        # Scan all n - d0 candidates at once: p is small but the wrap-around breaks the
        # period-p pattern of levels, so no closed form covers every n.
        cand = (s + np.arange(d0, n)) % n
        hit = np.flatnonzero(level[cand] == lv + 1)
        if hit.size == 0:  # pragma: no cover - level l+1 <= p always occurs among n >= 4 nodes
            raise TopologyError(f"n={n}: no level-{lv + 1} node for the shortcut of node {s}")
        dst[k] = cand[hit[0]]

    b = TopologyBuilder(n, hosts, ("ring", "shortcut"))
    for s in range(n):
        b.put(s, 1, (s + 1) % n, 0, "ring")
    nxt = np.full(n, 2)
    nxt[src] = 3  # index 2 holds the outgoing shortcut
    # src is increasing, so incoming shortcuts land in increasing source id.
    for s, t in zip(src.tolist(), dst.tolist()):
        b.put(s, 2, t, int(nxt[t]), "shortcut")
        nxt[t] += 1
    return b.build(kind="dsn", params={"n": n, "x": x, **_hosts_param(hosts)},
                   label_names=("i", "level"),
                   labels=np.stack([np.arange(n), level], axis=1), cabinet=_cabinets(n))


# ---------------------------------------------------------------------------------------------
# DLN-x
# ---------------------------------------------------------------------------------------------
def build_dln(n: int, x: int = 4, seed: int = 1, hosts: int = 1) -> Topology:
    """DLN-x: a ring plus ``x - 2`` random shortcuts per node (degree ``x``) [DLN]_.

    Parameters
    ----------
    n : int
        Number of switches, at least 4.
    x : int
        Degree, ``2 <= x <= n - 1`` (``x = 2`` is the bare ring).
    seed : int
        Seed of the ``numpy.random.default_rng`` generator; the topology is a deterministic
        function of ``(n, x, seed)``.
    hosts : int
        Hosts per switch.

    Returns
    -------
    Topology
        ``kind="dln"``, ``params={"n", "x", "seed"}`` (``hosts`` unless 1), labels ``("i",)``,
        link kinds ``"ring"`` and ``"shortcut"``.  Port indices: ``0`` pred, ``1`` succ, then
        the shortcuts in the order they were generated (round by round).

    Notes
    -----
    The shortcuts are ``x - 2`` rounds of random perfect matchings: a round pairs consecutive
    entries of a random permutation and is redrawn as a whole if any pair is a self-loop, an
    edge already present (ring or earlier round) or a pair repeated within the round, so the
    graph is simple.  With ``n`` odd a round leaves one node unmatched; the next round matches
    that node twice (the permutation is drawn over the nodes plus one extra copy of it), which
    keeps every degree at ``x`` after each pair of rounds.  So when ``n * (x - 2)`` is odd
    exactly one node, the one left over by the last round, has degree ``x - 1``.

    Limits (:mod:`tablegen.limits`, checked first): ``n <= 16,384``, ``x <= 12`` (the
    retries grow as ``e^{x/2}``), ``seed < 2**32``, ``hosts <= 64``, ``n * hosts <= 131,072``.

    Complexity: O((x - 2) * T * n log n) time, T the retries per round (expected ``O(e^{x/2})``),
    O(n * x) memory.
    """
    n = _check_int("n", n, 4, what=" (DLN switches)")
    limits.at_most("dln", "n", n, limits.MAX_SWITCHES, f"4 <= n <= {limits.MAX_SWITCHES:,}")
    x = _check_int("x", x, 2, n - 1, what=f" (DLN degree, n={n})")
    limits.at_most("dln", "x", x, limits.DLN_MAX_DEGREE,
                   f"a degree 2 <= x <= {limits.DLN_MAX_DEGREE} (random matchings are drawn "
                   "by rejection; the tries grow as e^(x/2))")
    seed = _check_int("seed", seed, 0, limits.SEED_BOUND - 1)
    hosts = limits.check_hosts("dln", "hosts", _check_int("hosts", hosts, 0), n)
    rng = np.random.default_rng(seed)

    ring_a = np.arange(n)
    ring_b = (ring_a + 1) % n
    # Undirected edges as sorted int64 keys lo * n + hi, for vectorised duplicate tests.
    keys = np.sort(np.minimum(ring_a, ring_b) * n + np.maximum(ring_a, ring_b))
    rounds: list[np.ndarray] = []
    carry: int | None = None
    for r in range(x - 2):
        pool = np.arange(n) if carry is None else np.append(np.arange(n), carry)
        for _ in range(_DLN_MAX_TRIES):
            perm = rng.permutation(pool)
            m = len(perm) // 2
            a, b = perm[0:2 * m:2], perm[1:2 * m:2]
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            k = lo * n + hi
            if (np.all(lo != hi) and len(np.unique(k)) == m
                    and not np.any(np.isin(k, keys, assume_unique=True))):
                break
        else:
            raise TopologyError(
                f"x={x}: could not draw shortcut round {r + 1} for n={n} without "
                f"duplicate edges in {_DLN_MAX_TRIES} tries (x too close to n?)")
        rounds.append(np.stack([a, b], axis=1))
        keys = np.sort(np.concatenate([keys, k]))
        carry = int(perm[-1]) if len(perm) % 2 else None

    bld = TopologyBuilder(n, hosts, ("ring", "shortcut"))
    for s in range(n):
        bld.put(s, 1, (s + 1) % n, 0, "ring")
    for pairs in rounds:
        for a, b in pairs.tolist():
            bld.add(a, b, "shortcut")
    return bld.build(kind="dln", params={"n": n, "x": x, "seed": seed, **_hosts_param(hosts)},
                     label_names=("i",), labels=np.arange(n)[:, None], cabinet=_cabinets(n),
                     radix=x)
