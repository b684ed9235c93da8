"""Issue 29 item 2 on topo29's baselines: bisection of the hypercube (known width 2^(d-1)),
the fat tree's full bisection and its racks, and every family sized to 10,000 endpoints."""

from __future__ import annotations

import pytest

from tablegen.analysis.bisection import bisection
from tablegen.analysis.cost import cost, load_prices
from tablegen.analysis.design import FAMILIES, size_family
from tablegen.topologies.spec import build


@pytest.mark.parametrize("d", [3, 4, 6])
def test_hypercube_bisection_width(d):
    b = bisection(build(f"hypercube:d={d}"))
    assert b["cut_cables"] == 2 ** (d - 1)
    assert b["fraction"] == 1.0


def test_fattree_has_full_bisection_and_pods_in_racks():
    k = 8
    topo = build(f"fattree:k={k}")
    assert bisection(topo)["fraction"] == 1.0
    doc = cost(topo, load_prices())
    assert (doc["routers"], doc["radix"], doc["endpoints"]) == (5 * k * k // 4, k, k ** 3 // 4)
    # every cable is edge-aggregation (k pods x (k/2)^2) or aggregation-core (the same count)
    assert doc["cables"]["electric"] + doc["cables"]["fiber"] == 2 * k * (k // 2) ** 2


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_sizes_to_ten_thousand_and_builds(family):
    spec, n = size_family(family, 10_000)
    topo = build(spec)
    assert topo.n_hosts == n
    assert 10_000 / 3 <= n <= 3 * 10_000
