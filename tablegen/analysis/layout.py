"""Graph and floor-layout metrics of a :class:`~tablegen.topology.Topology`.

References
----------
.. [DSNF] DSN-F: expandable low-degree topology (``/work/shared/papers/dsnf-expandable-low-
   degree-topology.txt``), §IV (diameter, average shortest path length, average cable length)
   and §IV-C (floor and cable model).
"""

from __future__ import annotations

import math

import numpy as np

from tablegen.topology import UNREACHABLE, Topology, distance_matrix

__all__ = [
    "CABINET_WIDTH_M", "CABINET_DEPTH_M", "INTRA_CABINET_CABLE_M",
    "CABLE_OVERHEAD_M", "cabinet_layout", "cable_lengths", "analyze",
]

#: Floor model of [DSNF]_ §IV-C: cabinet pitch within a row and between rows (incl. aisle).
CABINET_WIDTH_M = 0.6
CABINET_DEPTH_M = 2.1
#: Length of a cable whose two ends are in the same cabinet.
INTRA_CABINET_CABLE_M = 2.0
#: Wiring overhead added once to every inter-cabinet cable (see :func:`cable_lengths`).
CABLE_OVERHEAD_M = 2.0



def cabinet_layout(n_cabinets: int) -> tuple[int, int, np.ndarray]:
    """Grid position of every cabinet on the machine-room floor ([DSNF]_ §IV-C).

    Parameters
    ----------
    n_cabinets : int
        Number of cabinets ``c``.

    Returns
    -------
    rows : int
        ``ceil(sqrt(c))``.
    per_row : int
        ``ceil(c / rows)``.
    xy : float64[c, 2]
        Position in metres: cabinet ``i`` sits in row ``i // per_row`` at position
        ``i % per_row``; positions are ``CABINET_WIDTH_M`` apart, rows ``CABINET_DEPTH_M``.

    Notes
    -----
    Complexity: O(c).
    """
    c = int(n_cabinets)
    if c <= 0:
        return 0, 0, np.zeros((0, 2))
    # ceil(sqrt(c)) in integers: float sqrt can round a large perfect square up.
    rows = math.isqrt(c - 1) + 1
    per_row = -(-c // rows)
    ids = np.arange(c)
    xy = np.stack([(ids % per_row) * CABINET_WIDTH_M, (ids // per_row) * CABINET_DEPTH_M], 1)
    return rows, per_row, xy


def cable_lengths(topo: Topology) -> np.ndarray:
    """Length of the cable of every link of ``topo.links`` ([DSNF]_ §IV-C).

    A cable inside one cabinet is ``INTRA_CABINET_CABLE_M`` (2 m).  A cable between two
    cabinets is their Manhattan distance on the floor grid of :func:`cabinet_layout` plus
    ``CABLE_OVERHEAD_M`` (2 m) once per cable.

    The paper's "2m wiring overhead added to the length of inter-cabinet cables at each
    cabinet" could also be read as 2 m per end (4 m per cable); we follow the issue's reading,
    2 m per cable.  Host cables are ignored, as in the paper (their length is constant).

    Parameters
    ----------
    topo : Topology
        Topology with ``cabinet`` filled in.

    Returns
    -------
    float64[L]
        Cable length in metres, in the order of ``topo.links``.

    Notes
    -----
    Complexity: O(L + c), L links and c cabinets.
    """
    links = topo.links
    if len(links) == 0:
        return np.zeros(0)
    cab = topo.cabinet.astype(np.int64)
    _, _, xy = cabinet_layout(int(cab.max()) + 1)
    ca, cb = cab[links[:, 0]], cab[links[:, 2]]
    manhattan = np.abs(xy[ca] - xy[cb]).sum(axis=1)
    return np.where(ca == cb, INTRA_CABINET_CABLE_M, manhattan + CABLE_OVERHEAD_M)


def analyze(topo: Topology) -> dict:
    """Size, distance and cable metrics of a topology, as compared in [DSNF]_ §IV.

    Parameters
    ----------
    topo : Topology
        Any topology.

    Returns
    -------
    dict
        JSON-serialisable:

        * ``switches``, ``hosts``, ``links`` (network links; parallel links count each);
        * ``connected``: every switch reaches every other;
        * ``diameter``: largest hop distance, ``aspl``: mean hop distance over ordered pairs
          of distinct switches (0.0 for one switch); both ``None`` when not connected;
        * ``degree``: ``{min, max, mean}`` connected network ports per switch;
        * ``cables``: ``{count, average_length_m, total_length_m, cabinets, rows, per_row}``
          from :func:`cable_lengths` (host cables excluded).

    Notes
    -----
    Complexity: that of :func:`distance_matrix`, O(D * N^2 * R / 64 + N^2) time and O(N^2)
    memory, plus O(L) for the cables.
    """
    n = topo.n_switches
    dist = distance_matrix(topo)
    connected = bool(n == 0 or (dist != UNREACHABLE).all())
    if connected and n > 1:
        diameter = int(dist.max())
        aspl = float(dist.sum(dtype=np.int64) / (n * (n - 1)))
    elif connected:
        diameter, aspl = 0, 0.0
    else:
        diameter, aspl = None, None
    deg = topo.degree
    length = cable_lengths(topo)
    n_cab = int(topo.cabinet.max()) + 1 if n else 0
    rows, per_row, _ = cabinet_layout(n_cab)
    return {
        "switches": n,
        "hosts": topo.n_hosts,
        "links": int(len(topo.links)),
        "connected": connected,
        "diameter": diameter,
        "aspl": aspl,
        "degree": {
            "min": int(deg.min()) if n else 0,
            "max": int(deg.max()) if n else 0,
            "mean": float(deg.mean()) if n else 0.0,
        },
        "cables": {
            "count": int(len(length)),
            "average_length_m": float(length.mean()) if len(length) else 0.0,
            "total_length_m": float(length.sum()),
            "cabinets": n_cab,
            "rows": rows,
            "per_row": per_row,
        },
    }
