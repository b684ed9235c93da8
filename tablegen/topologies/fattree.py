"""The full-bandwidth 3-level k-ary fat tree of Al-Fares et al., the indirect baseline the
Slim Fly paper compares against (its slides: "3-level fat tree ... diameter = 4").

``k`` pods of ``k/2`` edge and ``k/2`` aggregation switches, and ``(k/2)^2`` core switches:
``5k^2/4`` switches of radix ``k``.  Edge switch ``i`` of every pod is cabled to every
aggregation switch of its pod; aggregation switch ``i`` of every pod to the ``k/2`` cores
``(i, 0 .. k/2-1)``.  Hosts sit on the edge switches only, ``k/2`` each by default
(``k^3/4`` endpoints: every edge switch has as many up ports as hosts, the full bisection).

Switch ids and labels ``(level, a, b)``:

* edge ``(0, pod, i)``: id ``pod * k/2 + i``;
* aggregation ``(1, pod, i)``: id ``k^2/2 + pod * k/2 + i``;
* core ``(2, i, j)``: id ``k^2 + i * k/2 + j``.

Port order (network port indices; hosts come first, :mod:`tablegen.topology`): an edge
switch ``i`` has aggregation switches ``0 .. k/2-1`` of its pod on indices ``0 .. k/2-1``; an
aggregation switch ``(pod, i)`` has its pod's edge switches on ``0 .. k/2-1`` and cores
``(i, 0 .. k/2-1)`` on ``k/2 .. k-1``; core ``(i, j)`` has pod ``p``'s aggregation switch
``i`` on index ``p``.  Link kinds ``"edge"`` (edge–aggregation) and ``"core"``
(aggregation–core).  ``group`` is the pod (``k + i`` for core group ``i``); cabinets hold 16
switches, pod by pod (a pod's edge and aggregation switches side by side), then the cores.

References
----------
.. [FT] M. Al-Fares, A. Loukissas, A. Vahdat, "A scalable, commodity data center network
   architecture", SIGCOMM 2008, §3.
"""

from __future__ import annotations

import numpy as np

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topologies.baselines import SWITCHES_PER_CABINET, _check_int
from tablegen.topology import Topology, TopologyBuilder

__all__ = ["LEVELS", "build_fattree"]

#: Level of each switch kind, the first label field (:func:`build_fattree`).
LEVELS = ("edge", "aggregation", "core")


def build_fattree(k: int, hosts: int | None = None) -> Topology:
    """Full-bandwidth 3-level ``k``-ary fat tree [FT]_ (module docstring for the numbering).

    Parameters
    ----------
    k : int
        Switch radix: even, ``4 <= k <= 64`` (:data:`tablegen.limits.MAX_RADIX`).
    hosts : int, optional
        Hosts per edge switch, ``1 <= hosts <= k/2``; default ``k/2`` (full bandwidth).  Fewer
        leave edge ports free (an under-populated tree, same switches and cables).

    Returns
    -------
    Topology
        ``kind="fattree"``, ``params={"k"}`` (``hosts`` unless ``k/2``), labels
        ``("level", "a", "b")``; aggregation and core switches have no hosts.

    Complexity: O(k^3) time and memory (the ``k^3/2`` cables).
    """
    k = _check_int("k", k, 4, limits.MAX_RADIX, what=" (fat-tree radix)")
    if k % 2:
        raise TopologyError(f"fattree: k={k} is odd; expected an even radix 4 <= k <= "
                            f"{limits.MAX_RADIX} (k/2 ports up, k/2 down)")
    h = k // 2
    hosts = h if hosts is None else _check_int("hosts", hosts, 1, h,
                                               what=f" (hosts per edge switch, k={k})")
    n_edge, n_core = k * h, h * h
    n = 2 * n_edge + n_core
    ids = np.arange(n)
    b = TopologyBuilder(n, np.where(ids < n_edge, hosts, 0), ("edge", "core"))
    for pod in range(k):
        for i in range(h):
            for a in range(h):
                b.put(pod * h + i, a, n_edge + pod * h + a, i, "edge")
    for pod in range(k):
        for i in range(h):
            for j in range(h):
                b.put(n_edge + pod * h + i, h + j, 2 * n_edge + i * h + j, pod, "core")
    level = np.repeat([0, 1, 2], [n_edge, n_edge, n_core])
    local = np.concatenate([ids[:n_edge], ids[:n_edge], ids[:n_core]])
    labels = np.stack([level, local // h, local % h], axis=1)
    pod_or_core = np.where(level < 2, labels[:, 1], k + labels[:, 1])
    # Cabinet order: pod 0's edge and aggregation switches, pod 1's, ..., then the cores.
    order = np.where(level < 2, labels[:, 1] * k + level * h + labels[:, 2], ids)
    return b.build(kind="fattree", params={"k": k, **({"hosts": hosts} if hosts != h else {})},
                   label_names=("level", "a", "b"), labels=labels, group=pod_or_core,
                   cabinet=order // SWITCHES_PER_CABINET, radix=k)
