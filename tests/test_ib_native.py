"""The IB-native variant (tablegen/exports/infiniband/native.py): destination trees chosen on
the CDG plus an up*/down* escape layer, proven by a brute-force CDG, labelled in every file,
bound to its proof, and loaded into real OpenSM on ibsim at DSN-F n = 1,024."""

from __future__ import annotations

import json

import numpy as np
import pytest

from emulation.ibsim import apply as ib_apply
from fabroute.cli import main
from tablegen.exports.infiniband.layers import build_layers
from tablegen.exports.infiniband.limits import IB_DATA_VLS
from tablegen.exports.infiniband.native import (VARIANT, _centre, _updown_ranks,
                                                native_layers)
from tablegen.exports.infiniband.sls import verify_ib
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

from conftest import ib_processes
from test_ib_turns import brute_cdg


def native(spec, routing, vls=IB_DATA_VLS):
    return native_layers(build_tables(build(spec), routing), vls)


@pytest.mark.parametrize("spec,routing,vls", [("dsnf:n=64", "dsnf", 8), ("dsnf:n=64", "dsnf", 3),
                                              ("dsnf:n=128", "min", 4),
                                              ("slimfly:q=5", "min", 3),
                                              ("dragonfly:p=2,a=4,h=2", "min", 3),
                                              ("torus:x=6,y=6", "min", 3)])
def test_native_trees_are_acyclic_by_brute_force(spec, routing, vls):
    """Every path arrives and the CDG over (switch, port, VL), walked path by path in plain
    Python, has no cycle; the VLs stay within the budget, and the arrays' own proof agrees."""
    layers = native(spec, routing, vls)
    used, cyclic = brute_cdg(layers, layers.sl2vl)
    assert not cyclic
    assert max(used) < vls and layers.kinds == [f"{routing}-{VARIANT}"]
    rep = verify_ib(layers, layers.sl2vl)
    assert rep["ok"], rep["errors"]
    assert rep["variant"] == VARIANT and rep["vls_used"] == len(used)


def test_escape_trees_go_up_then_down():
    """One regular layer (3 VLs) leaves DSN-F n = 128 destinations to the escape layer; each
    of their paths, in the ranks of the BFS from the centre, never goes up after going down."""
    layers = native("dsnf:n=128", "dsnf", vls=3)
    topo = layers.ts.topo
    n = topo.n_switches
    adj = topo.adj.astype(np.int64)
    esc = np.flatnonzero(layers.sl[0, 0] == 1)
    assert layers.info["escape_destinations"] == len(esc) > 0
    rank = _updown_ranks(adj, _centre(adj))
    for d in esc.tolist():
        for u in range(n):
            x, down = u, False
            while x != d:
                y = int(adj[x, layers.nxt[0, x, d]])
                up = rank[y] < rank[x]
                assert not (down and up), (u, d)
                down |= not up
                x = y


def test_all_on_one_sl_is_caught_by_both_checks():
    """Negative control: the same trees with every destination on SL 0 (one VL) close a
    cycle; the brute force and verify_ib both find it."""
    layers = native("dsnf:n=128", "dsnf")
    assert layers.num_sls >= 2
    layers.sl[:] = 0
    assert brute_cdg(layers, layers.sl2vl)[1]
    rep = verify_ib(layers, layers.sl2vl)
    assert not rep["ok"] and "cycle" in rep["errors"][0]


def test_native_stays_near_the_routing_where_it_fits():
    """Where the routing's own trees fit the layers (DSN-F n = 64: no escape), most
    next hops are the routing's own and the average path is no longer than its own."""
    layers = native("dsnf:n=64", "dsnf")
    base = build_layers(layers.ts, 0)
    assert layers.info["escape_destinations"] == 0
    off = ~np.eye(64, dtype=bool)
    assert (layers.nxt[0][off] == base.nxt[0][off]).mean() > 0.7
    assert layers.hops[0][off].mean() <= base.hops[0][off].mean()


def test_cli_exports_the_variant_labelled_and_bound_to_its_proof(tmp_path, capsys):
    out = tmp_path / "ib"
    assert main(["ib", "export", "dsnf:n=64", "--routing", "dsnf", "--ib-native",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["variant"] == VARIANT and summary["layers"][0]["kind"] == "dsnf-ib-native"
    g = json.loads((out / "guids.json").read_text())
    assert g["ib"]["variant"] == VARIANT and g["lft_class"] == "dsnf-ib-native"
    assert main(["verify", str(out)]) == 0
    assert "ib-native variant" in capsys.readouterr().out
    assert main(["verify", str(out), "--walk-ib-files"]) == 0
    # the manifest no longer naming the variant: the files are not what it would derive
    m = json.loads((out / "manifest.json").read_text())
    del m["exports"]["ib"]["variant"]
    (out / "manifest.json").write_text(json.dumps(m))
    assert main(["verify", str(out)]) == 1


def test_cli_refuses_native_with_an_lmc(tmp_path, capsys):
    assert main(["ib", "export", "dsnf:n=64", "--routing", "dsnf", "--ib-native", "--lmc", "1",
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--ib-native" in err and "got LMC 1" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.ib
@pytest.mark.usefixtures("ib_tools")
def test_dsnf_1024_native_loads_into_opensm_with_zero_mismatches(tmp_path, capsys):
    """DSN-F n = 1,024 with its own routing fits neither SL scheme; its IB-native variant
    exports within 8 VLs, is proven from its files, and real OpenSM on ibsim holds every LFT
    entry, SL2VL row and (sampled) path SL as written."""
    out = tmp_path / "ib"
    assert main(["ib", "export", "dsnf:n=1024", "--routing", "dsnf", "--out",
                 str(tmp_path / "own")]) == 2
    assert "--ib-native" in capsys.readouterr().err
    assert main(["ib", "export", "dsnf:n=1024", "--routing", "dsnf", "--ib-native",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["vls_used"] <= IB_DATA_VLS and summary["escape_destinations"] > 0
    assert main(["verify", str(out)]) == 0
    rep = ib_apply.apply(out)
    assert rep["ok"] and rep["mismatches"] == 0
    for kind in ("lft", "sl2vl", "path_sl"):
        assert rep[kind]["mismatches"] == 0, kind
    assert rep["lft"]["switches_read"] == 1024
    assert ib_processes() == []
