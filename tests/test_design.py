"""``fabroute cost`` and ``fabroute design`` (issue 29, items 2-3): the cost and power model
on fabrics small enough to price by hand, price-file refusals, bisection of graphs whose
bisection width is known, resilience on a ring (known exactly) and its determinism, family
sizing, the CLI's JSON keys and its bad-input refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fabroute.cli import main
from tablegen.analysis.bisection import bisection
from tablegen.analysis.cost import DEFAULT_PRICES, cable_kinds, cost, load_prices, racks
from tablegen.analysis.design import avg_distance, design, size_family
from tablegen.analysis.resilience import resilience
from tablegen.errors import BadInput, TopologyError
from tablegen.topologies.spec import build
from tablegen.topology import TopologyBuilder
from tests.refusal import refusal

COST_KEYS = {"routers", "radix", "endpoints", "cables", "cost_per_endpoint",
             "power_per_endpoint_w", "avg_distance", "bisection", "resilience"}


def _ring(n: int):
    b = TopologyBuilder(n, 1, ("ring",))
    for i in range(n):
        b.add(i, (i + 1) % n, "ring")
    return b.build(kind="ring", params={"n": n}, label_names=("i",),
                   labels=np.arange(n)[:, None])


def _prices_file(tmp_path, edit: str) -> str:
    """The default price file with one line replaced (``old=>new``)."""
    old, new = edit.split("=>")
    text = DEFAULT_PRICES.read_text()
    assert old in text
    path = tmp_path / "prices.toml"
    path.write_text(text.replace(old, new))
    return str(path)


# -- cost and power by hand -------------------------------------------------------------------
def test_smallest_dragonfly_priced_by_hand():
    # p=a=h=1... a=2: 3 groups of 2 routers, one local cable per group (inside its rack), one
    # global cable per pair of groups; racks 0, 1 in the first row (0.6 m apart), rack 2 in
    # the second (2.1 m behind rack 0)
    topo = build("dragonfly:p=1,a=2,h=1")
    P = load_prices()
    doc = cost(topo, P)
    assert (doc["routers"], doc["radix"], doc["endpoints"]) == (6, 3, 6)
    assert doc["cables"] == {"electric": 3, "fiber": 3, "endpoint": 6}
    assert list(racks(topo)) == [0, 0, 1, 1, 2, 2]
    length, electric = cable_kinds(topo, P)
    assert sorted(length[~electric].round(6)) == [2.6, 4.1, 4.7]
    assert set(length[electric]) == {2.0}
    router = 6 * (350.4 * 3 - 892.3)
    cables = (3 * 40 * (0.4079 * 2 + 0.5771)
              + 40 * (0.0919 * (2.6 + 4.1 + 4.7) + 3 * 7.2745))
    assert doc["cost"]["routers"] == pytest.approx(router)
    assert doc["cost"]["cables"] == pytest.approx(cables)
    assert doc["cost_per_endpoint"] == pytest.approx((router + cables) / 6)
    # 6 routers x 3 ports x 4 lanes x 1 SerDes x 0.7 W
    assert doc["power_per_endpoint_w"] == pytest.approx(6 * 3 * 4 * 0.7 / 6)


def test_slimfly_racks_merge_groups_pairwise():
    topo = build("slimfly:q=5")
    r = racks(topo)
    q = 5
    # rack x holds the groups (0, x) and (1, x): 2q routers; the q cables between them and the
    # intra-group cables stay inside
    assert np.bincount(r).tolist() == [2 * q] * q
    doc = cost(topo, load_prices())
    intra_group = 2 * q * q * 2 // 2          # degree (q - δ)/2 = 2 inside a group
    assert doc["cables"]["electric"] == intra_group + q * q
    assert doc["cables"]["electric"] + doc["cables"]["fiber"] == len(topo.links)


def test_power_counts_every_router_port():
    # the slides' case study: 722 routers of radix 43 -> 8.02 W per endpoint; ours has the
    # radix the formulas give, k' + p = 29 + 15 = 44
    doc = cost(build("slimfly:q=19"), load_prices())
    assert doc["radix"] == 44
    assert doc["power_per_endpoint_w"] == pytest.approx(722 * 44 * 4 * 0.7 / 10830)


# -- price files --------------------------------------------------------------------------------
@pytest.mark.parametrize("edit, words", [
    ("per_port = 350.4=>", "missing router.per_port"),
    ("fiber_per_gbps = 7.2745=>fiber_per_gbps = -1.0", "negative"),
    ("gbps = 40.0=>gbps = \"forty\"", "not a number"),
    ("[power]=>[powr]", "no [power] table"),
])
def test_bad_price_files(tmp_path, edit, words):
    with pytest.raises(BadInput, match=words.replace("[", r"\[").replace("]", r"\]")):
        load_prices(_prices_file(tmp_path, edit))


def test_negative_router_price_at_a_radix_is_refused(tmp_path):
    P = load_prices(_prices_file(tmp_path, "intercept = -892.3=>intercept = -5000.0"))
    with pytest.raises(BadInput, match="negative"):
        cost(build("dragonfly:p=1,a=2,h=1"), P)     # radix 3: 1051.2 - 5000 < 0


def test_missing_price_file(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        load_prices(tmp_path / "none.toml")


# -- bisection -----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, cut", [
    ("torus:x=4,y=4", 8),       # the 4x4 torus is the hypercube Q4: bisection width 2^3
    ("torus:x=8,y=8", 16),      # a cut across both wrap-arounds of 8 rings
])
def test_bisection_of_known_graphs(spec, cut):
    topo = build(spec)
    b = bisection(topo)
    assert b["cut_cables"] == cut
    assert b["fraction"] == pytest.approx(cut / (topo.n_hosts / 2))


def test_bisection_of_a_ring():
    assert bisection(_ring(12))["cut_cables"] == 2


# -- resilience ----------------------------------------------------------------------------------
def test_ring_disconnects_at_the_second_failure():
    r = resilience(_ring(10), seeds=7, diameter_seeds=3)
    # one failure leaves a path; the second cuts it, whatever the order
    assert r["disconnect"]["min"] == r["disconnect"]["max"] == 0.1
    assert r["disconnect"]["mean"] == pytest.approx(0.1)
    # any failure turns the ring of diameter 5 into a path of diameter 9
    assert r["diameter"]["mean"] == 0.0 and r["diameter"]["base"] == 5
    assert resilience(_ring(10), seeds=2, diameter_seeds=2, slack=4)["diameter"]["min"] == 0.1


def test_resilience_is_seeded_and_ordered():
    topo = build("slimfly:q=5")
    # girth 5 (Hoffman-Singleton): one failed cable leaves its ends 4 hops apart, diameter + 2
    a = resilience(topo, seeds=5, diameter_seeds=3, slack=2)
    assert a == resilience(topo, seeds=5, diameter_seeds=3, slack=2)
    assert resilience(topo, seeds=1, diameter_seeds=3, slack=1)["diameter"]["max"] == 0
    assert 0 < a["diameter"]["mean"] <= a["disconnect"]["mean"] < 1
    tight = resilience(topo, seeds=5, diameter_seeds=3, slack=1)
    assert tight["diameter"]["mean"] <= a["diameter"]["mean"]
    assert tight["disconnect"] == a["disconnect"]


# -- sizing and design ---------------------------------------------------------------------------
def test_sizing_picks_the_nearest_size():
    assert size_family("slimfly", 10_000) == ("slimfly:q=19", 10_830)
    assert size_family("dragonfly", 10_000) == ("dragonfly:p=7,a=14,h=7", 9_702)
    assert size_family("torus", 10_000) == ("torus:x=100,y=100", 10_000)
    with pytest.raises(TopologyError, match="too large for dragonfly"):
        size_family("dragonfly", 10 ** 7)
    with pytest.raises(TopologyError, match="too small for slimfly"):
        size_family("slimfly", 10)


def test_avg_distance_of_a_ring_by_hand():
    # ring of 6, one endpoint per switch: distances 1, 1, 2, 2, 3 from every switch
    assert avg_distance(_ring(6)) == pytest.approx((1 + 1 + 2 + 2 + 3) / 5)


def test_design_ranks_by_cost_and_power():
    doc = design(200, load_prices(), ("slimfly", "dragonfly", "torus"), seeds=3,
                 diameter_seeds=2)
    rows = doc["families"]
    assert [r["family"] for r in rows] == sorted(
        (r["family"] for r in rows), key=lambda f: next(r["cost_per_endpoint"] for r in rows
                                                        if r["family"] == f))
    assert sorted(r["rank_power"] for r in rows) == [1, 2, 3]
    assert all(COST_KEYS <= r.keys() for r in rows)


# -- the command line ----------------------------------------------------------------------------
def test_cost_json_keys(capsys):
    assert main(["cost", "slimfly:q=5", "--seeds", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert COST_KEYS <= doc.keys()
    assert set(doc["cables"]) >= {"electric", "fiber"}
    assert doc["endpoints"] == 200 and doc["routers"] == 50


def test_design_json_and_plot(capsys, tmp_path):
    png = tmp_path / "curves.png"
    assert main(["design", "-n", "500", "--families", "slimfly,dragonfly", "--seeds", "2",
                 "--diameter-seeds", "1", "--plot", str(png), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["family"] for f in doc["families"]] != []
    assert {f["family"] for f in doc["families"]} == {"slimfly", "dragonfly"}
    assert all({"family", "spec"} | COST_KEYS <= f.keys() for f in doc["families"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(doc["curves"]["slimfly"]) >= 2


@pytest.mark.parametrize("argv, words", [
    (["design", "-n", "1000", "--families", "slimfly,mesh"], "mesh"),
    (["design", "-n", "100000", "--families", "hypercube"], "too large for hypercube"),
    (["design", "-n", "10000000"], "--endpoints"),
    (["design", "-n", "5", "--families", "slimfly"], "too small for slimfly"),
    (["cost", "mesh:n=4"], "mesh"),
    (["cost", "slimfly:q=5", "--seeds", "0"], "--seeds"),
    (["cost", "slimfly:q=5", "--slack", "５"], "--slack"),
    (["design", "-n", "500", "--plot", "x.svg"], ".png"),
])
def test_bad_input_is_one_line(argv, words, capsys):
    assert words in refusal(argv, capsys)


def test_bad_price_file_on_the_command_line(tmp_path, capsys):
    bad = _prices_file(tmp_path, "watts_per_serdes = 0.7=>watts_per_serdes = -0.7")
    err = refusal(["cost", "slimfly:q=5", "--prices", bad], capsys)
    assert "power.watts_per_serdes" in err and "negative" in err
    missing = _prices_file(tmp_path, "electric_max_m = 2.5=>")
    assert "missing layout.electric_max_m" in refusal(
        ["design", "-n", "500", "--prices", missing], capsys)


def test_router_radix_counts_connected_ports_only():
    # DSN-F keeps 8 fixed port slots but its switches have at most 5 cables ([DSNF] Theorem
    # 1; n = 32: switch 0 has links to 1, 2, 13, 23, 24) and one endpoint: radix 6
    topo = build("dsnf:n=32")
    assert topo.radix == 8
    assert cost(topo, load_prices())["radix"] == 6
