"""DSN-F grown in steps in the simulator (simulator/growth.py): the growth path through a
transformation point, and a tiny experiment (48 -> 64 -> 96 switches) end to end through
``fabroute growth`` (``simulator/experiments/dsnf-growth-quick.toml``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from simulator.cli import add_parsers
from simulator.growth import growth_path, load
from tablegen.analysis.compare import expansion
from tablegen.analysis.layout import analyze
from tablegen.errors import BadInput
from tablegen.topologies.dsnf import build_dsnf, p_for

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "simulator/experiments/dsnf-growth-quick.toml"


def _cli(argv: list[str]):
    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(argv)
    return a.func(a)


def test_growth_path_keeps_p_then_transforms():
    """48 (p = 3) grows to 64 = 4 * 2^4 keeping p = 3 (add_nodes: cables only added), then
    64 is transformed to p = 4 (cables removed and added) and grown to 96; each network is
    build_dsnf(n, p=p).  A transformation point between two sizes is passed through."""
    path = growth_path("dsnf:n=48", [64, 96])
    assert [(n, p, step) for n, p, step, _, _ in path] == [
        (48, 3, "start"), (64, 3, "add"), (64, 4, "transform"), (96, 4, "add")]
    for n, p, _, _, topo in path:
        assert np.array_equal(topo.links, build_dsnf(n, p=p).links)
    cables = [c for _, _, _, c, _ in path]
    assert cables[0] is None
    assert cables[1] == {"added": 31, "removed": 0, "replugged": 0}
    assert cables[2]["removed"] > 0 and cables[2]["added"] > 0 and cables[3]["removed"] == 0
    through = growth_path("dsnf:n=48", [96])
    assert [(n, p) for n, p, *_ in through] == [(48, 3), (96, 4)]
    assert through[1][3]["removed"] == cables[2]["removed"]
    with pytest.raises(ValueError):
        growth_path("dsnf:n=48", [40])


def test_quick_experiment_end_to_end(tmp_path, capsys):
    """One result per (network, routing); every run accepts at most what was offered; the
    saturation found lies below the analytic bound and below the first saturated load; the
    diameter and ASPL are those of tablegen.analysis (and of ``compare --expansion`` where
    the network is build_dsnf(n)); the transformation raises DSN-F's throughput."""
    out = tmp_path / "g"
    assert _cli(["growth", "-e", str(QUICK), "-o", str(out), "-j", "1", "-q", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    res = json.loads(out.with_suffix(".json").read_text())
    assert out.with_suffix(".png").stat().st_size > 10_000
    nets = [(x["n"], x["p"]) for x in res["networks"]]
    assert nets == [(48, 3), (64, 3), (64, 4), (96, 4)]
    assert [(x["n"], x["p"], x["routing"]) for x in res["results"]] == [
        (n, p, r) for n, p in nets for r in ("dsnf", "min")]
    assert len(printed["results"]) == len(res["results"]) == 8
    for x in res["results"]:
        assert len(x["runs"]) == 1 + 2      # the latency run and the bisection
        for run in x["runs"]:
            assert run["status"] == "ok" and run["switches"] == x["n"]
            assert run["accepted"] <= 1.05 * run["offered_measured"]
        assert 0 < x["saturation"] <= x["bound"]
        assert x["accepted_at_saturation"] <= 1.05 * x["bound"]
        if x["first_saturated"] is not None:
            assert x["saturation"] < x["first_saturated"]
        assert not x["runs"][0]["saturated"] and x["latency"]["0.05"] > 0
    grown = {(r["n"]): r for r in expansion(48, 96, 16)}
    for net in res["networks"]:
        a = analyze(build_dsnf(net["n"], p=net["p"]))
        assert (net["diameter"], net["aspl"]) == (a["diameter"], a["aspl"])
        if net["p"] == p_for(net["n"]):
            assert (net["diameter"], net["aspl"]) == (grown[net["n"]]["diameter"],
                                                     grown[net["n"]]["aspl"])
    by = {(x["n"], x["p"], x["routing"]): x for x in res["results"]}
    assert by[64, 4, "dsnf"]["bound"] > by[64, 3, "dsnf"]["bound"]
    assert by[64, 4, "dsnf"]["saturation"] > by[64, 3, "dsnf"]["saturation"]


@pytest.mark.parametrize("text,why", [
    ('sizes = [96, 64]', "sizes"),
    ('sizes = [32]', "start below"),
    ('spec = "torus:x=4,y=4"', "spec"),
    ('routings = ["nope"]', "routings"),
    ('search_steps = 99', "search_steps"),
    ('bogus = 1', "unknown key"),
])
def test_bad_experiment_files_are_refused(tmp_path, text, why):
    """A growth experiment file with a wrong key is bad input (one line naming it), before
    anything is built."""
    key = text.split(" =")[0]
    lines = [ln for ln in QUICK.read_text().splitlines() if not ln.startswith(key + " =")]
    i = lines.index("[config]")
    f = tmp_path / "bad.toml"
    f.write_text("\n".join([*lines[:i], text, *lines[i:]]) + "\n")
    with pytest.raises(BadInput, match=why):
        _cli(["growth", "-e", str(f), "-q"])
    with pytest.raises(ValueError, match=why):
        load(f)
