"""UGAL-L decision rules and candidates, shared by the controller and the simulator.

The rules are pure functions of queue occupancies and hop counts; they return ``True`` for
"route minimally".

* Kim et al. (ISCA 2008) §4.2 and [Singh 2005]: minimal iff ``q_m * H_m <= q_nm * H_nm``.
* Kim et al. UGAL-L_VC_H (§4.3): when the minimal and the non-minimal path leave on the same
  output port, compare the occupancies of the two VCs they would use instead of the port's.
* Yébenes et al. (HOTI 2017) §V: minimal iff ``Q_min <= 2 * Q_val + T``, with ``Q`` the
  occupancy of the VC the packet would be stored in and ``T`` a bias toward minimal paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tablegen.tables import TableSet


def ugal_kim(q_min: float, h_min: int, q_nonmin: float, h_nonmin: int) -> bool:
    """Kim et al.: take the minimal path iff ``q_min * h_min <= q_nonmin * h_nonmin``."""
    return q_min * h_min <= q_nonmin * h_nonmin


def ugal_kim_vch(q_min_port: float, q_nonmin_port: float, q_min_vc: float, q_nonmin_vc: float,
                 h_min: int, h_nonmin: int, same_port: bool) -> bool:
    """Kim et al. UGAL-L_VC_H: per-VC occupancies when both paths share the output port,
    per-port occupancies otherwise."""
    if same_port:
        return q_min_vc * h_min <= q_nonmin_vc * h_nonmin
    return q_min_port * h_min <= q_nonmin_port * h_nonmin


def ugal_yebenes(q_min: float, q_val: float, threshold: float) -> bool:
    """Yébenes et al.: take the minimal path iff ``q_min <= 2 * q_val + threshold``."""
    return q_min <= 2 * q_val + threshold


@dataclass(frozen=True)
class Candidate:
    """One choice a source switch has: the class, the intermediate (``-1`` for MIN), the
    network port index of the first hop, the VC of the first hop and the path's hops."""

    cls: str
    inter: int
    port: int
    vc: int
    hops: int


def candidates(ts: TableSet, src: int, dst: int) -> list[Candidate]:
    """Every (class, intermediate) choice of ``src`` toward ``dst`` with its first hop and hop
    count, by walking the tables.  O(C · L) for C candidates of length L."""
    out: list[Candidate] = []
    for c in ts.classes:
        inters = ts.candidates(src, dst, c) if c.inter != "none" else np.array([-1])
        for i in inters:
            path = ts.walk(src, dst, c, int(i))
            if len(path["ports"]):
                out.append(Candidate(c.name, int(i), ts.topo.port_index(src, path["ports"][0]),
                                     path["vcs"][0], len(path["ports"])))
    return out

