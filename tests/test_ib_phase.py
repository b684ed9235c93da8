"""The ib-phase variant (tablegen/exports/infiniband/phases.py): DSN-F trees whose paths read
W* C* W? around the ring, VLs by direction and an SL-chosen dateline; proven by a brute-force
CDG, held to its own rules (the group sequence, the threshold outside every path's span),
labelled in every file, and loaded into real OpenSM on ibsim (docs/ib-routing.md, *The
ib-phase variant*)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from emulation.ibsim import apply as ib_apply
from emulation.ibsim.compare import _export_variant
from fabroute.cli import main
from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.limits import IB_DATA_VLS, NUM_SLS
from tablegen.exports.infiniband.phases import (GROUP, PHASE, channel_kinds, phase_layers,
                                                ring_positions)
from tablegen.exports.infiniband.sls import verify_ib
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

from conftest import ib_processes
from test_ib_turns import assert_one_vl_cycles, brute_cdg


def phase(spec):
    return phase_layers(build_tables(build(spec), "min"))


@pytest.mark.parametrize("spec", ["dsnf:n=64", "dsnf:n=100", "dsnf:n=128"])
def test_phase_is_acyclic_by_brute_force_and_keeps_its_own_rules(spec):
    """The CDG over (switch, port, VL), walked path by path in plain Python, has no cycle and
    uses at most VLs 0-5; every path's groups never fall after its first hop, and its SL's
    threshold lies outside the ring positions of its switches after the first — the two
    facts the deadlock-freedom argument rests on, checked here path by path."""
    layers = phase(spec)
    used, cyclic = brute_cdg(layers, layers.sl2vl)
    assert not cyclic and max(used) <= 5
    topo = layers.ts.topo
    pos, ring = ring_positions(topo)
    adj = topo.adj.astype(np.int64)
    kind, _ = channel_kinds(adj, pos, topo.labels[:, 1].astype(np.int64), ring)
    n = topo.n_switches
    nxt, sl = layers.nxt[0].astype(np.int64), layers.sl[0]
    for s in range(n):
        for d in range(n):
            x, kinds, seen = s, [], []
            while x != d:
                j = nxt[x, d]
                kinds.append(kind[x, j])
                seen.append(pos[x])
                x = adj[x, j]
            groups = [GROUP[a, b] for a, b in zip(kinds, kinds[1:])]
            assert all(g >= 0 for g in groups) and groups == sorted(groups), (s, d, kinds)
            if len(seen) > 1:
                assert _outside(int(sl[s, d]) * ring // NUM_SLS, seen[1:], ring), (s, d)
    rep = verify_ib(layers, layers.sl2vl)
    assert rep["ok"], rep["errors"]
    assert rep["variant"] == PHASE and layers.kinds == [f"min-{PHASE}"]


def _outside(k, positions, ring):
    """``k`` off the arc of ring positions a path's switches cover, walked in order."""
    x, lo, hi = 0, 0, 0
    for a, b in zip(positions, positions[1:]):
        step = (b - a) % ring
        x += step - ring if step > ring // 2 else step
        lo, hi = min(lo, x), max(hi, x)
    return (k - positions[0] - lo) % ring > hi - lo


def test_one_vl_for_every_turn_is_caught_by_both_checks():
    assert_one_vl_cycles(phase("dsnf:n=64"))


def test_phase_is_dsnf_only():
    with pytest.raises(NotExpressible, match="numbers DSN-F's ring; slimfly"):
        phase("slimfly:q=5")


def test_cli_exports_the_variant_labelled_and_bound_to_its_proof(tmp_path, capsys):
    out = tmp_path / "ib"
    assert main(["ib", "export", "dsnf:n=128", "--routing", "min", "--ib-phase",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["variant"] == PHASE and summary["layers"][0]["kind"] == "min-ib-phase"
    assert summary["vl_scheme"] == "turn" and summary["vls_used"] <= IB_DATA_VLS
    g = json.loads((out / "guids.json").read_text())
    assert g["ib"]["variant"] == PHASE and g["lft_class"] == "min-ib-phase"
    assert sum(ln.startswith("row ") for ln in (out / "path-sl.txt").read_text().splitlines()) \
        == 128
    assert main(["verify", str(out)]) == 0
    assert "ib-phase variant" in capsys.readouterr().out


@pytest.mark.parametrize("args,words", [
    (["--routing", "dsnf", "--ib-phase"], ["--ib-phase", "expected routing min, got dsnf"]),
    (["--routing", "min", "--ib-phase", "--ib-climb"], ["--ib-climb and --ib-phase"]),
    (["--routing", "min", "--ib-phase", "--lmc", "1"], ["--ib-phase", "got LMC 1"])])
def test_cli_refuses_phase_where_it_does_not_apply(tmp_path, capsys, args, words):
    assert main(["ib", "export", "dsnf:n=64", *args, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words) and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_compare_falls_back_past_phase_off_dsnf(tmp_path):
    """A torus of diameter 15: ib-climb refuses it (more than 12 hops), ib-phase too (not a
    DSN-F), and MIN runs as its IB-native variant."""
    assert _export_variant(build("torus:x=30,y=2"), "min", tmp_path) == "fabroute-min-ib-native"
    assert [p.name for p in tmp_path.iterdir()] == ["fabroute-min-ib-native"]


@pytest.mark.ib
@pytest.mark.usefixtures("ib_tools")
def test_phase_loads_into_opensm_with_zero_mismatches(tmp_path, capsys):
    """DSN-F n = 256 (two layers) in the ib-phase variant: exported within 8 VLs, proven from
    its files, and real OpenSM on ibsim holds every LFT entry, SL2VL row and (sampled) path
    SL as written, every path SL from the plugin's SL matrix."""
    out = tmp_path / "ib"
    assert main(["ib", "export", "dsnf:n=256", "--routing", "min", "--ib-phase",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["variant"] == PHASE and summary["sls_used"] > 1
    assert summary["vls_used"] <= IB_DATA_VLS
    assert main(["verify", str(out)]) == 0
    rep = ib_apply.apply(out)
    assert rep["ok"] and rep["mismatches"] == 0
    for kind in ("lft", "sl2vl", "path_sl"):
        assert rep[kind]["mismatches"] == 0, kind
    assert rep["path_sl"]["no_rule"] == 0 and len(rep["path_sl"]["sls_read"]) > 1
    assert rep["lft"]["switches_read"] == 256
    assert ib_processes() == []
