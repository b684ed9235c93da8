"""Minimal (up*/down*) routing of the 3-level fat tree, in one virtual channel.

Toward an edge switch (the only switches with hosts) every shortest path of the fat tree
goes up, then down: edge -> aggregation -> edge inside a pod, edge -> aggregation -> core ->
aggregation -> edge between pods.  Up*/down* paths have no cyclic channel dependency (every
dependency goes up a level, down a level, or turns from up to down, never down to up), so
MIN needs one VC: the ``updown`` scheme of :mod:`tablegen.routing.build`, proven by
``verify`` on the tables.  Toward an aggregation or core switch (no hosts: management
traffic only) some shortest paths turn down then up (two aggregation switches of one pod
meet through an edge switch); those tables stay shortest
(:func:`~tablegen.routing.build.graph_min`) and carry no data, so the deadlock proof leaves
them out (:func:`tablegen.routing.walk.data_destinations`).

Spreading: the tables are per destination switch, so if the up port depended on the
destination alone, every packet toward edge switch ``d`` from another pod would come down
through one aggregation switch and one cable into ``d``.  The up choice depends on the
source as well, as in Al-Fares et al.'s two-level tables (§3.3): edge ``(pod, i)`` sends
toward edge ``(P, i')`` through aggregation switch ``(i + i') mod k/2`` of its pod, and
aggregation ``(s, a)`` toward a pod ``P != s`` through core ``(a, (s + i') mod k/2)``.  Under
uniform traffic every up and down cable then carries the same load to within a factor
``k / (k - 1)`` (the source pod ``s`` never equals ``P``).
"""

from __future__ import annotations

import numpy as np

from tablegen.topology import Topology


def fattree_min(topo: Topology, graph_table: np.ndarray) -> np.ndarray:
    """The MIN table of a fat tree: ``graph_table`` (graph-minimal, the tables toward
    aggregation and core switches) with the up ports toward edge switches chosen as the
    module docstring says.  Port indices follow :mod:`tablegen.topologies.fattree`.
    O(k^4) (the edge-destination block of the table)."""
    k = int(topo.params["k"])
    h = k // 2
    n_edge = k * h
    table = graph_table.copy()
    e = np.arange(n_edge)
    pod, idx = e // h, e % h
    # edge u -> edge d (u != d): up to aggregation switch (i_u + i_d) mod h, port index = a
    up_edge = (idx[:, None] + idx[None, :]) % h
    np.fill_diagonal(up_edge, -1)
    table[:n_edge, :n_edge] = up_edge
    # aggregation (s, a) -> edge (P, i'), P != s: up to core (a, (s + i') mod h), index h + j
    up_agg = h + (pod[:, None] + idx[None, :]) % h
    other_pod = pod[:, None] != pod[None, :]
    block = table[n_edge:2 * n_edge, :n_edge]
    block[other_pod] = up_agg[other_pod]
    return table
