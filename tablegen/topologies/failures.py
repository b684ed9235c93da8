"""Failed links: a fabric without some of its cables, with every port number kept.

A degraded topology is the intact one with the failed cables' ports unconnected.  Its name
carries the failures (``slimfly:q=5,xi=2,p=3,fail=3-7+8-9``), so a table set built on it can be
recomputed from its name alone like any other (``verify_stored``) and no table set of the
intact fabric is ever taken for it.  Ports, switch ids, groups and host addresses do not
change: a controller can swap the degraded tables into the switches of the running fabric.

A failure names a switch pair ``a:b``; every cable between the two fails (DSN-F ``p = 1``
and some Dragonflies have parallel cables, and a pair is what an operator sees as "the link
between a and b").
"""

from __future__ import annotations

import re

import numpy as np

from tablegen.errors import TopologyError
from tablegen.topology import UNREACHABLE, Topology, distance_matrix

__all__ = ["fail_param", "failed_pairs", "parse_failures", "without_links"]

_PAIR = re.compile(r"^\s*(\d+)\s*[:-]\s*(\d+)\s*$")


def parse_failures(text: str, sep: str = ",") -> list[tuple[int, int]]:
    """``"a:b,c:d"`` (or ``"a-b+c-d"`` with ``sep="+"``, the form names carry) as sorted
    ``(min, max)`` switch pairs, each once.  O(len(text))."""
    pairs = set()
    for item in text.split(sep):
        m = _PAIR.match(item)
        if not m:
            raise TopologyError(f"failed link {item.strip()!r:.40} is not a switch pair; "
                                "expected a:b with switch ids (e.g. 3:7)")
        a, b = int(m.group(1)), int(m.group(2))
        if a == b:
            raise TopologyError(f"failed link {a}:{b} joins a switch to itself; expected two "
                                "different switches")
        pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def failed_pairs(params: dict) -> list[tuple[int, int]]:
    """The failed switch pairs a topology's parameters carry (``fail``; none when intact)."""
    return parse_failures(str(params["fail"]), "+") if "fail" in params else []


def fail_param(pairs) -> str:
    """The ``fail`` parameter a degraded topology's name carries: sorted ``a-b`` joined by
    ``+`` (no comma, which separates the keys of a SPEC)."""
    return "+".join(f"{a}-{b}" for a, b in sorted(pairs))


def without_links(topo: Topology, pairs) -> Topology:
    """``topo`` with every cable between each switch pair of ``pairs`` removed.

    Parameters:
        topo: an intact or already degraded topology (failures add up).
        pairs: ``(a, b)`` switch pairs that are linked in ``topo``.

    Returns a new :class:`Topology`: ``params`` gain (or extend) ``fail``; ``memo`` is empty
    (the intact fabric's minimal tables do not hold).

    Raises :class:`TopologyError` (one line) for a switch id out of range, a pair that is not
    linked, or failures that disconnect the fabric (no routing can reach every pair; the
    message names the first unreachable pair).

    Complexity: O(N R) for the copy plus one BFS per switch for the connectivity check,
    O(N^2 R / 64) with the bit-set BFS of :func:`distance_matrix`.
    """
    pairs = sorted({(min(int(a), int(b)), max(int(a), int(b))) for a, b in pairs})
    n = topo.n_switches
    adj, peer, kind = topo.adj.copy(), topo.peer.copy(), topo.link_kind.copy()
    for a, b in pairs:
        for s in (a, b):
            if not 0 <= s < n:
                raise TopologyError(f"failed link {a}:{b}: switch {s} is not a switch of "
                                    f"{topo.name()}; expected 0 <= id < {n}")
        js = np.flatnonzero(adj[a] == b)
        if not len(js):
            raise TopologyError(f"failed link {a}:{b} is not a link of {topo.name()}; "
                                f"expected a pair from `fabroute topology SPEC --json` links")
        for j in js.tolist():
            k = int(peer[a, j])
            adj[a, j] = peer[a, j] = kind[a, j] = -1
            adj[b, k] = peer[b, k] = kind[b, k] = -1
    params = dict(topo.params)
    params["fail"] = fail_param(set(failed_pairs(params)) | set(pairs))
    out = Topology(kind=topo.kind, params=params, label_names=topo.label_names,
                   labels=topo.labels, hosts=topo.hosts, adj=adj, peer=peer, link_kind=kind,
                   kind_names=topo.kind_names, cabinet=topo.cabinet, group=topo.group)
    out.check()
    cut = np.argwhere(distance_matrix(out) >= UNREACHABLE)
    if len(cut):
        u, v = (int(x) for x in cut[0])
        raise TopologyError(f"failing {fail_param(pairs).replace('-', ':').replace('+', ',')} "
                            f"disconnects {topo.name()} (switch {u} cannot reach {v}); "
                            "expected failures that leave the fabric connected")
    return out
