"""The flattened butterfly and the hypercube: both Hamming graphs (switches are the points
of a ``side^dims`` grid, cabled to every switch that differs in one coordinate), the direct
high-radix and low-radix baselines of the Slim Fly paper.

* Flattened butterfly [FB]_, the k-ary n-flat: the ``k^(n-1)`` routers of a k-ary n-fly's
  rows, each joined to every router in the same row of each of the ``n - 1`` dimensions:
  ``n - 1`` dimensions of side ``k``, ``(n-1)(k-1)`` network ports, concentration ``c = k``
  hosts (radix ``k' = n(k-1)+1``, the paper's §2); diameter ``n - 1``.
* Hypercube: ``d`` dimensions of side 2, ``2^d`` switches of ``d`` network ports, one host
  each by default; diameter ``d``.

Switch ``(x_0, .., x_{D-1})`` has id ``sum x_i side^i`` and those labels.  Network port
order: dimension by dimension, and within dimension ``i`` the other ``side - 1`` values of
``x_i`` in increasing order (hypercube: port ``i`` flips bit ``i``).  Link kind ``"d<i>"``
for dimension ``i``.  Cabinets hold 16 switches in id order (the default floor model of
:mod:`tablegen.topologies.baselines`); ``group`` is the switch id.

References
----------
.. [FB] J. Kim, W. J. Dally, D. Abts, "Flattened butterfly: a cost-efficient topology for
   high-radix networks", ISCA 2007, §2.
"""

from __future__ import annotations

import numpy as np

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topologies.baselines import _cabinets, _check_int
from tablegen.topology import Topology, TopologyBuilder

__all__ = ["build_fbfly", "build_hypercube"]


def build_fbfly(k: int, n: int, hosts: int | None = None) -> Topology:
    """Flattened butterfly, the ``k``-ary ``n``-flat [FB]_ (module docstring).

    Parameters
    ----------
    k : int
        Routers per dimension, ``k >= 2``.
    n : int
        Stages of the butterfly it flattens, ``n >= 2`` (``n - 1`` dimensions).
    hosts : int, optional
        Hosts per router; default ``k`` (the paper's concentration).

    Returns
    -------
    Topology
        ``kind="fbfly"``, ``params={"k", "n"}`` (``hosts`` unless ``k``), labels
        ``("x0", .., "x{n-2}")``.

    Limits (:mod:`tablegen.limits`, checked first): ``k^(n-1) <= 16,384`` routers,
    ``(n-1)(k-1) <= 64`` network ports, ``hosts <= 64``, at most 131,072 hosts.

    Complexity: O(k^(n-1) (n-1) k) time and memory.
    """
    k = _check_int("k", k, 2, what=" (flattened-butterfly routers per dimension)")
    n = _check_int("n", n, 2, what=" (flattened-butterfly stages; n-1 dimensions)")
    switches = k ** (n - 1) if n - 1 <= 14 else limits.MAX_SWITCHES + 1  # 2^15 is too many
    limits.check_switches("fbfly", f"k={k}, n={n}", switches,
                          f"k^(n-1) <= {limits.MAX_SWITCHES:,}")
    ports = (n - 1) * (k - 1)
    if ports > limits.MAX_RADIX:
        raise TopologyError(f"fbfly: k={k}, n={n} needs {ports} network ports, above the "
                            f"largest supported {limits.MAX_RADIX}; expected (n-1)(k-1) <= "
                            f"{limits.MAX_RADIX}")
    hosts = k if hosts is None else hosts
    hosts = limits.check_hosts("fbfly", "hosts", _check_int("hosts", hosts, 0), switches)
    return _hamming("fbfly", k, n - 1, hosts,
                    {"k": k, "n": n, **({"hosts": hosts} if hosts != k else {})})


def build_hypercube(d: int, hosts: int = 1) -> Topology:
    """Hypercube of ``2^d`` switches (module docstring).

    Parameters
    ----------
    d : int
        Dimension, ``1 <= d <= 14`` (16,384 switches).
    hosts : int
        Hosts per switch.

    Returns
    -------
    Topology
        ``kind="hypercube"``, ``params={"d"}`` (``hosts`` unless 1), labels
        ``("x0", .., "x{d-1}")``, port ``i`` flipping bit ``i`` of the id.

    Complexity: O(2^d d) time and memory.
    """
    d = _check_int("d", d, 1, what=" (hypercube dimension)")
    limits.at_most("hypercube", "d", d, limits.MAX_SWITCHES.bit_length() - 1,
                   f"2^d <= {limits.MAX_SWITCHES:,} switches")
    hosts = limits.check_hosts("hypercube", "hosts", _check_int("hosts", hosts, 0), 2 ** d)
    return _hamming("hypercube", 2, d, hosts, {"d": d, **({"hosts": hosts} if hosts != 1
                                                          else {})})


def _hamming(kind: str, side: int, dims: int, hosts: int, params: dict) -> Topology:
    """The Hamming graph ``side^dims`` as a topology of ``kind``.  O(side^dims dims side)."""
    n = side ** dims
    ids = np.arange(n)
    coords = np.stack([ids // side ** i % side for i in range(dims)], axis=1)
    b = TopologyBuilder(n, hosts, tuple(f"d{i}" for i in range(dims)))
    for i in range(dims):
        base = i * (side - 1)
        for s in range(n):
            x = int(coords[s, i])
            for y in range(x + 1, side):
                t = s + (y - x) * side ** i
                # value y sits at slot y-1 when above x, and x at slot x when below y
                b.put(s, base + y - 1, t, base + x, f"d{i}")
    return b.build(kind=kind, params=params, label_names=tuple(f"x{i}" for i in range(dims)),
                   labels=coords, cabinet=_cabinets(n), radix=dims * (side - 1))
