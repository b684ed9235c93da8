"""InfiniBand address plans: GUIDs of switches and HCAs, LIDs with LMC blocks
(``docs/formats.md``).

* GUIDs: switch ``s`` -> ``SWITCH_GUID_BASE + s`` (node = port GUID, as on a switch); host
  ``h`` -> node GUID ``HCA_GUID_BASE + h * HCA_GUID_STRIDE``, port-1 GUID node + 1 (ibsim
  numbers HCA port GUIDs node + port).  ``0x02`` in the top byte marks locally administered
  EUI-64s.
* LIDs: switch ``s`` -> ``s + 1``; host ``h`` -> ``first + h * 2**lmc`` with ``first`` the
  smallest multiple of ``2**lmc`` above the switch LIDs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.limits import MAX_UNICAST_LID
from tablegen.topology import Topology

SWITCH_GUID_BASE = 0x02FAB00100000000
HCA_GUID_BASE = 0x02FAB00200000000
HCA_GUID_STRIDE = 0x10
def switch_guid(s):
    """Node (= port) GUID of switch ``s`` (int or array)."""
    return np.uint64(SWITCH_GUID_BASE) + np.asarray(s, dtype=np.uint64)


def host_node_guid(h):
    return np.uint64(HCA_GUID_BASE) + np.asarray(h, dtype=np.uint64) * np.uint64(HCA_GUID_STRIDE)


def host_port_guid(h):
    """GUID of the (only) port 1 of host ``h``'s HCA."""
    return host_node_guid(h) + np.uint64(1)


def hex16(values) -> list[str]:
    return [f"{v:016x}" for v in np.asarray(values, dtype=np.uint64).tolist()]


@dataclass(frozen=True)
class LidPlan:
    """LIDs of every switch and host; host ``h`` owns ``host_lid[h] .. + 2**lmc - 1``."""

    lmc: int
    switch_lid: np.ndarray
    host_lid: np.ndarray
    top: int


def lid_plan(topo: Topology, lmc: int = 0) -> LidPlan:
    """Switches get LIDs ``1..N``; host base LIDs follow, aligned to ``2**lmc`` (an LMC port
    answers to ``base | offset``, so the base must have ``lmc`` zero low bits)."""
    if not 0 <= lmc <= 7:
        raise NotExpressible(f"lmc={lmc}; expected 0..7")
    n, h = topo.n_switches, topo.n_hosts
    step = 1 << lmc
    host = first_host_lid(n, lmc) + np.arange(h, dtype=np.int64) * step
    top = int(host[-1]) + step - 1 if h else n
    if top > MAX_UNICAST_LID:
        fits = [m for m in range(8) if top_lid(n, h, m) <= MAX_UNICAST_LID]
        raise NotExpressible(f"{topo.name()}: LMC {lmc} needs LIDs up to 0x{top:X}, beyond the "
                             f"unicast limit 0x{MAX_UNICAST_LID:X}; lower the LMC (to "
                             f"{max(fits) if fits else 'none: too many ports'})")
    return LidPlan(lmc, np.arange(1, n + 1, dtype=np.int64), host, top)


def first_host_lid(n: int, lmc: int) -> int:
    step = 1 << lmc
    return -(-(n + 1) // step) * step


def top_lid(n: int, h: int, lmc: int) -> int:
    """Highest LID of the plan: ``N`` switch LIDs, then ``H`` aligned blocks of ``2**lmc``."""
    return first_host_lid(n, lmc) + h * (1 << lmc) - 1 if h else n
