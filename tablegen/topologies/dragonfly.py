"""Dragonfly of Kim, Dally, Scott and Abts (ISCA 2008), complete graph inside each group.

Router ``r`` of group ``G`` has id ``G*a + r`` and label ``(G, r)``.  Network port order on a
router: ``a - 1`` local ports to the other routers of its group in increasing index, then its
``h`` global ports ``t = 0 .. h-1``; global port ``t`` of router ``r`` is the group's global
port ``j = r*h + t``.

Global links.  With ``g = a*h + 1`` groups every pair of groups shares exactly one global
link.  With fewer groups the ``a*h`` global ports of a group are spread as the paper says
(§3.1): every pair gets ``⌊a*h/(g-1)⌋`` links and the remaining ``r`` ports of each group join
a circulant pattern (group ``G`` with ``G ± d`` for ``d = 1 .. ⌊r/2⌋``, and with ``G + g/2``
when ``r`` is odd and ``g`` even), so that every pair gets at least ``⌊(a*h+1)/g⌋`` links; when
``r`` and ``g`` are both odd one port per group stays unconnected.  A group's global ports are
then filled with its list of target groups (a group repeated once per link), ordered by

* ``absolute`` (default; BookSim ``dragonflynew``): increasing target group, so with
  ``g = a*h+1`` port ``j`` reaches group ``j`` if ``j < G`` else ``j + 1``;
* ``relative`` (SST merlin ``relative``): increasing ``(T - G - 1) mod g``, so with
  ``g = a*h+1`` port ``j`` reaches group ``(G + j + 1) mod g``.

The ``i``-th link of ``G`` towards ``T`` (in ``G``'s port order) is the ``i``-th link of ``T``
towards ``G``.
"""

from __future__ import annotations

import numpy as np

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topology import Topology, TopologyBuilder

ARRANGEMENTS = ("absolute", "relative")


def global_targets(a: int, h: int, g: int, arrangement: str = "absolute") -> list[list[int]]:
    """For every group, the target group of each of its ``a*h`` global ports (``-1``: unused).

    Complexity: O(g * a * h).
    """
    ah = a * h
    base, r = divmod(ah, g - 1)
    extra = [d for d in range(1, r // 2 + 1)]
    targets = []
    for G in range(g):
        t = [T for T in range(g) if T != G for _ in range(base)]
        for d in extra:
            t += [(G + d) % g, (G - d) % g]
        if r % 2 and g % 2 == 0:
            t.append((G + g // 2) % g)
        if arrangement == "absolute":
            t.sort()
        else:
            t.sort(key=lambda T: (T - G - 1) % g)
        targets.append(t + [-1] * (ah - len(t)))
    return targets


def build_dragonfly(p: int, a: int, h: int, g: int | None = None,
                    arrangement: str = "absolute") -> Topology:
    """Build a Dragonfly with ``p`` hosts per router, ``a`` routers per group, ``h`` global
    links per router and ``g`` groups (default the maximum ``a*h + 1``).

    Limits (:mod:`tablegen.limits`, checked before anything is built): network radix
    ``a - 1 + h <= 64``, ``a * g <= 16,384`` routers, ``p <= 64`` and ``p * a * g <= 131,072``
    hosts.

    Complexity: O(g a (a + h)).
    """
    radix = f"a-1+h <= {limits.MAX_RADIX} network ports per router"
    a = limits.at_most("dragonfly", "a", a, limits.MAX_RADIX, radix)
    h = limits.at_most("dragonfly", "h", h, limits.MAX_RADIX + 1 - max(a, 1),
                       f"{radix} (a={a})")
    for name, v, lo in (("p", p, 1), ("a", a, 1), ("h", h, 1)):
        if v < lo:
            raise TopologyError(f"dragonfly: {name}={v}; expected an integer >= {lo}")
    gmax = a * h + 1
    g = gmax if g is None else g
    if not 2 <= g <= gmax:
        raise TopologyError(f"dragonfly: g={g}; expected 2 <= g <= a*h+1 = {gmax}")
    limits.check_switches("dragonfly", f"a={a}, g={g}", a * g, f"a*g <= "
                          f"{limits.MAX_SWITCHES:,} routers (fewer groups g=, or smaller a, h)")
    p = limits.check_hosts("dragonfly", "p", p, a * g)
    if arrangement not in ARRANGEMENTS:
        raise TopologyError(f"dragonfly: arrangement={arrangement!r}; expected one of "
                            f"{', '.join(ARRANGEMENTS)}")
    n = a * g
    b = TopologyBuilder(n, p, ("local", "global"))
    for G in range(g):
        for r in range(a):
            for r2 in range(r + 1, a):
                # local port index of r2 on r is r2 - 1 (skip itself); of r on r2 is r.
                b.put(G * a + r, r2 - 1, G * a + r2, r, "local")
    targets = global_targets(a, h, g, arrangement)
    seen: dict[tuple[int, int], list[int]] = {}
    for G in range(g):
        for j, T in enumerate(targets[G]):
            if T >= 0:
                seen.setdefault((G, T), []).append(j)
    for (G, T), js in seen.items():
        if G < T:
            for j, k in zip(js, seen[(T, G)]):
                b.put(G * a + j // h, a - 1 + j % h, T * a + k // h, a - 1 + k % h, "global")
    labels = np.array([(G, r) for G in range(g) for r in range(a)])
    return b.build(kind="dragonfly",
                   params={"p": p, "a": a, "h": h, "g": g, "arrangement": arrangement},
                   label_names=("group", "router"), labels=labels,
                   group=np.arange(n) // a, radix=a - 1 + h)
