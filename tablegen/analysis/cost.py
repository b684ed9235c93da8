"""Cost and power of a fabric under the Slim Fly paper's model: routers priced by radix,
cables priced by kind and length from a rack layout, power per router port.

The model and its constants are the default price file ``prices.toml`` beside this module
(Besta & Hoefler, SC14, cost model; the SC14 slides' power model); ``fabroute cost --prices
FILE`` replaces it.  docs/design.md names the source of every constant and the
conventions the paper's case-study table pins (endpoint cables are not counted; power
counts every router port, endpoint ports included).

References
----------
.. [SF] M. Besta, T. Hoefler, "Slim Fly: A Cost Effective Low-Diameter Network Topology",
   SC14 (arXiv 1912.08968), cost model and physical layout; slides
   ``/work/shared/papers/slimfly-topology-slides.txt``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tablegen.analysis.layout import cabinet_layout
from tablegen.errors import BadInput
from tablegen.topology import Topology

__all__ = ["DEFAULT_PRICES", "Prices", "load_prices", "racks", "cable_kinds", "cost"]

#: The paper's model (package data).
DEFAULT_PRICES = Path(__file__).with_name("prices.toml")

#: Every key a price file must have, per table; all must be numbers >= 0 except
#: ``router.intercept`` (the paper's fit is negative; each router's price is checked instead).
_KEYS = {
    "cable": ("gbps", "electric_per_gbps_per_m", "electric_per_gbps", "fiber_per_gbps_per_m",
              "fiber_per_gbps"),
    "router": ("per_port", "intercept"),
    "power": ("lanes_per_port", "serdes_per_lane", "watts_per_serdes"),
    "layout": ("rack_width_m", "rack_depth_m", "intra_rack_m", "overhead_m", "electric_max_m"),
}
_MAY_BE_NEGATIVE = {("router", "intercept")}


@dataclass(frozen=True)
class Prices:
    """The model's constants, ``{table: {key: value}}`` as in ``prices.toml``, and the file
    they came from (as given, or ``default (...)``)."""

    values: dict
    source: str

    def __getitem__(self, key: str) -> float:
        table, _, name = key.partition(".")
        return self.values[table][name]

    def router_price(self, radix: int) -> float:
        """Dollars for one router of ``radix`` ports (endpoint ports included); bad input if
        the linear fit gives a negative price at that radix."""
        price = self["router.per_port"] * radix + self["router.intercept"]
        if price < 0:
            raise BadInput(f"prices {self.source}: router price {price:.2f} at radix {radix} "
                           "is negative; expected router.per_port * radix + "
                           "router.intercept >= 0")
        return price


def load_prices(path: str | Path | None = None) -> Prices:
    """The price file at ``path`` (default :data:`DEFAULT_PRICES`), checked: every key of
    :data:`_KEYS` present, a finite number, >= 0 where it is a price.  One-line
    :class:`BadInput` naming the file and key otherwise."""
    source = str(path) if path is not None else "default (tablegen/analysis/prices.toml)"
    path = Path(path) if path is not None else DEFAULT_PRICES
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"--prices {path}: no such file; expected a TOML price file "
                       f"(default {DEFAULT_PRICES.name}, docs/design.md)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BadInput(f"--prices {path}: {first}; expected a TOML price file") from None
    values: dict = {}
    for table, keys in _KEYS.items():
        section = raw.get(table)
        if not isinstance(section, dict):
            raise BadInput(f"--prices {path}: no [{table}] table; expected keys "
                           f"{', '.join(keys)} in it")
        values[table] = {}
        for key in keys:
            v = section.get(key)
            if v is None:
                raise BadInput(f"--prices {path}: missing {table}.{key}; expected a number")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise BadInput(f"--prices {path}: {table}.{key} = {v!r:.40} is not a number; "
                               "expected a finite number")
            if v < 0 and (table, key) not in _MAY_BE_NEGATIVE:
                raise BadInput(f"--prices {path}: {table}.{key} = {v} is negative; expected "
                               "a price >= 0")
            values[table][key] = float(v)
    return Prices(values, source)


def racks(topo: Topology) -> np.ndarray:
    """The rack of every switch in the paper's physical layout ([SF] "Physical layout").

    Slim Fly: the group ``(0, x)`` and the group ``(1, x)`` share rack ``x`` (groups merged
    pairwise, so that the ``q`` cables between them stay inside the rack).  A family with
    groups (Dragonfly; any whose ``group`` is coarser than the switch id): one group per
    rack.  Any other: the floor model's cabinets (:attr:`Topology.cabinet`).  O(N)."""
    if topo.kind == "slimfly":
        return topo.labels[:, 1].astype(np.int64)
    if topo.n_switches and topo.n_groups < topo.n_switches:
        return topo.group.astype(np.int64)
    return topo.cabinet.astype(np.int64)


def cable_kinds(topo: Topology, prices: Prices) -> tuple[np.ndarray, np.ndarray]:
    """Length (m) and kind (``True``: electric) of the cable of every link of
    ``topo.links``.

    Racks stand on the grid of :func:`~tablegen.analysis.layout.cabinet_layout` with the
    pitch of ``layout.rack_width_m`` x ``layout.rack_depth_m``; a cable inside one rack is
    ``layout.intra_rack_m`` long, between racks their Manhattan distance plus
    ``layout.overhead_m``; up to ``layout.electric_max_m`` it is electric, beyond, fiber.
    O(L + racks)."""
    links = topo.links
    if len(links) == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    rack = racks(topo)
    n_racks = int(rack.max()) + 1
    _, per_row, _ = cabinet_layout(n_racks)
    ids = np.arange(n_racks)
    xy = np.stack([(ids % per_row) * prices["layout.rack_width_m"],
                   (ids // per_row) * prices["layout.rack_depth_m"]], 1)
    ra, rb = rack[links[:, 0]], rack[links[:, 2]]
    length = np.where(ra == rb, prices["layout.intra_rack_m"],
                      np.abs(xy[ra] - xy[rb]).sum(axis=1) + prices["layout.overhead_m"])
    return length, length <= prices["layout.electric_max_m"]


def cost(topo: Topology, prices: Prices) -> dict:
    """Routers, radix, endpoints, cables by kind, and cost and power in all and per endpoint.

    * ``radix``: the radix of the router the fabric is built of, the largest number of
      connected ports on one switch (endpoints + cables), as the paper's "Radix (k)" row:
      every router is priced and powered at it; port slots no cable uses (DSN-F keeps
      fixed slots for growth) are not bought.
    * ``cables``: ``{"electric", "fiber"}`` router-to-router cables by kind
      (:func:`cable_kinds`), and ``"endpoint"``, the endpoint cables, which the paper's
      table does not count and the cost leaves out (docs/design.md).
    * ``cost``: ``{"routers", "cables", "total"}`` dollars; ``cost_per_endpoint``.
    * ``power_w``: every router port (endpoint ports included) x lanes x SerDes x watts;
      ``power_per_endpoint_w``.

    O(N + L).  Bad input when a router's price comes out negative."""
    n = topo.n_switches
    radix = int((topo.hosts.astype(np.int64) + topo.degree).max()) if n else 0
    router_usd = prices.router_price(radix) * n if n else 0.0
    length, electric = cable_kinds(topo, prices)
    g = prices["cable.gbps"]
    cable_usd = float(
        g * (prices["cable.electric_per_gbps_per_m"] * length[electric]
             + prices["cable.electric_per_gbps"]).sum()
        + g * (prices["cable.fiber_per_gbps_per_m"] * length[~electric]
               + prices["cable.fiber_per_gbps"]).sum())
    watts = float(n * radix * prices["power.lanes_per_port"]
                  * prices["power.serdes_per_lane"] * prices["power.watts_per_serdes"])
    endpoints = topo.n_hosts
    per = (lambda v: v / endpoints) if endpoints else (lambda v: None)
    total = float(router_usd) + cable_usd
    return {
        "routers": n,
        "radix": radix,
        "endpoints": endpoints,
        "cables": {"electric": int(electric.sum()), "fiber": int((~electric).sum()),
                   "endpoint": endpoints},
        "cable_length_m": {"electric": float(length[electric].sum()),
                           "fiber": float(length[~electric].sum())},
        "racks": int(racks(topo).max()) + 1 if n else 0,
        "cost": {"routers": float(router_usd), "cables": cable_usd, "total": total},
        "cost_per_endpoint": per(total),
        "power_w": watts,
        "power_per_endpoint_w": per(watts),
    }
