"""Per-hop VLs on InfiniBand (``tablegen/exports/infiniband/turns.py``): a path's VL chosen per
(switch, in port, out port, SL), checked against a brute-force channel dependency graph built
here in plain Python, against the one-VL-per-path scheme, on the DSN-F sizes the path scheme
could not fit, and loaded into real OpenSM on ibsim (docs/ib-routing.md, *SLs and VLs*)."""

from __future__ import annotations

import json
from collections import defaultdict, deque

import numpy as np
import pytest

from emulation.ibsim import apply as ib_apply
from fabroute.cli import main
from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.layers import build_layers
from tablegen.exports.infiniband.limits import IB_DATA_VLS
from tablegen.exports.infiniband.sls import assign_sls, assign_vls, ib_routing, verify_ib
from tablegen.exports.infiniband.turns import assign_turn_vls
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

from conftest import ib_processes


def brute_cdg(layers, sl2vl):
    """Every (layer, source, destination) path walked hop by hop in Python; returns the set
    of VLs its hops use and whether the dependency graph over (switch, port, VL) — the hops
    after the first, consecutive hops of one path — has a cycle (Kahn's algorithm)."""
    topo = layers.ts.topo
    n = topo.n_switches
    succ, indeg, vls = defaultdict(set), defaultdict(int), set()
    for k in range(layers.num_layers):
        for u in range(n):
            for d in range(n):
                s, x, slot, prev = int(layers.sl[k, u, d]), u, 0, None
                for _ in range(n):
                    if x == d:
                        break
                    j = int(layers.nxt[k, x, d])
                    node = (x, j, int(sl2vl[x, slot, j + 1, s]))
                    vls.add(node[2])
                    if prev is not None and node not in succ[prev]:
                        succ[prev].add(node)
                        indeg[node] += 1
                    prev, slot, x = node, int(topo.peer[x, j]) + 1, int(topo.adj[x, j])
                else:
                    raise AssertionError(f"layer {k}: {u} -> {d} does not arrive")
    nodes = set(succ) | set(indeg)
    todo = deque(v for v in nodes if indeg[v] == 0)
    left = dict(indeg)
    done = 0
    while todo:
        v = todo.popleft()
        done += 1
        for w in succ[v]:
            left[w] -= 1
            if left[w] == 0:
                todo.append(w)
    return vls, done < len(nodes)


def assert_one_vl_cycles(layers):
    """Negative control: ``layers``' trees and SLs with every switch-to-switch hop on VL 1
    close a cycle (DSN-F MIN needs VLs); the brute force and verify_ib both find it."""
    flat = layers.sl2vl.copy()
    flat[:, 1:, 1:, :] = np.minimum(flat[:, 1:, 1:, :], 1)
    assert brute_cdg(layers, flat)[1]
    rep = verify_ib(layers, flat)
    assert not rep["ok"] and "cycle" in rep["errors"][0]


def layers_of(spec, routing, lmc=0):
    return build_layers(build_tables(build(spec), routing), lmc)


@pytest.mark.parametrize("spec,routing,lmc,vls", [("dsnf:n=64", "dsnf", 0, 4),
                                                  ("dsnf:n=128", "dsnf", 0, 5),
                                                  ("dragonfly:p=2,a=4,h=2", "val", 2, 3),
                                                  ("slimfly:q=5", "val-3h", 2, 3),
                                                  ("slimfly:q=7", "val", 1, 4)])
def test_turn_labels_are_acyclic_by_brute_force(spec, routing, lmc, vls):
    layers = layers_of(spec, routing, lmc)
    assert assign_turn_vls(layers, vls) and layers.scheme == "turn"
    used, cycle = brute_cdg(layers, layers.sl2vl)
    assert not cycle and max(used) < vls
    rep = verify_ib(layers, layers.sl2vl)
    assert rep["ok"] and rep["vls_used"] == len(used | {0}), rep["errors"]
    # every hop from a host takes VL 0 (a CDG node without predecessors)
    assert not layers.sl2vl[:, 0].any()
    # per-hop VLs really change along paths: some (in, out) rows of one SL differ
    rows = layers.sl2vl[:, 1:, 1:, :]
    assert len(np.unique(rows[..., 0])) > 1


@pytest.mark.parametrize("spec,routing,lmc", [("dsnf:n=64", "dsnf", 0),
                                              ("dragonfly:p=2,a=4,h=2", "val", 2)])
def test_a_changed_label_is_caught_by_both_checks(spec, routing, lmc):
    """Negative control: folding every VL >= 1 onto VL 1 (the labels no longer separate
    anything) gives a cycle that the brute force and verify_ib both find."""
    layers = layers_of(spec, routing, lmc)
    assert assign_turn_vls(layers, IB_DATA_VLS)
    flat = np.minimum(layers.sl2vl, 1)
    _, cycle = brute_cdg(layers, flat)
    rep = verify_ib(layers, flat)
    assert cycle and not rep["ok"] and "cycle" in rep["errors"][0]


def test_turns_fit_where_one_vl_per_path_does_not():
    """DSN-F n = 64 needs 4 SLs (5 VLs) with one VL per path; per-hop VLs fit 4 VLs."""
    layers = layers_of("dsnf:n=64", "dsnf")
    with pytest.raises(NotExpressible, match="more than 3 SLs"):
        assign_sls(layers, max_sls=3)
    assign_vls(layers, vls=4)
    assert layers.scheme == "turn" and verify_ib(layers, layers.sl2vl)["vls_used"] <= 4
    # with room for the path scheme's 5 VLs it still takes the fewer VLs of the two
    layers = assign_vls(layers_of("dsnf:n=64", "dsnf"))
    assert layers.scheme == "turn" and verify_ib(layers, layers.sl2vl)["vls_used"] == 4


def test_path_scheme_kept_when_turns_do_not_save_a_vl():
    layers = assign_vls(layers_of("slimfly:q=5", "val", 2))
    rep = verify_ib(layers, layers.sl2vl)
    assert layers.scheme == "path" and rep["ok"] and rep["vls_used"] == rep["sls_used"] + 1


@pytest.mark.parametrize("n,routing", [(384, "dsnf"), (512, "dsnf"), (512, "min")])
def test_dsnf_sizes_beyond_seven_sls_fit_eight_vls(n, routing):
    """DSN-F n = 384 and 512 needed more than 7 SLs with one VL per path (refused before);
    with per-hop VLs they fit the 8 data VLs and are proven."""
    ts = build_tables(build(f"dsnf:n={n}"), routing)
    with pytest.raises(NotExpressible):
        assign_sls(build_layers(ts, 0))
    layers, rep = ib_routing(ts, 0)
    assert rep["ok"], rep["errors"]
    assert layers.scheme == "turn" and rep["vls_used"] <= IB_DATA_VLS < rep["sls_used"] + 1


def test_a_fabric_neither_scheme_fits_is_refused_with_the_reason():
    """DSN-F n = 128 in 3 VLs: neither 2 SLs on one VL each nor 16 SLs on per-hop VLs fit
    (the same refusal `tables` gives DSN-F n = 1024 for IB's 8: tests/test_cli.py)."""
    with pytest.raises(NotExpressible, match=r"more than 3 VLs needed \(one VL per path: more "
                                             r"than 2 SLs; per-hop VLs: no fit of 16 SLs"):
        assign_vls(layers_of("dsnf:n=128", "dsnf"), vls=3)


@pytest.mark.ib
@pytest.mark.usefixtures("ib_tools")
def test_dsnf_384_loads_into_opensm_with_zero_mismatches(tmp_path):
    """The smallest DSN-F the one-VL-per-path scheme refused (8 SLs needed), exported with
    per-hop VLs, loaded into real OpenSM on ibsim and read back: every LFT entry, SL2VL row
    and path SL as written; the VLs read back are VLs 0-7."""
    out = tmp_path / "ib"
    assert main(["ib", "export", "dsnf:n=384", "--routing", "dsnf", "--out", str(out)]) == 0
    g = json.loads((out / "guids.json").read_text())
    assert g["ib"]["vl_scheme"] == "turn" and g["ib"]["sls_used"] > IB_DATA_VLS - 1
    assert main(["verify", str(out)]) == 0
    rep = ib_apply.apply(out)
    assert rep["ok"] and rep["mismatches"] == 0, {k: rep.get(k) for k in ("lft", "sl2vl")}
    for kind in ("lft", "sl2vl", "path_sl"):
        assert rep[kind]["mismatches"] == 0, kind
    assert len({int(k) for k in rep["path_sl"]["sls_read"]}) > IB_DATA_VLS - 1
    assert {int(v) for v in rep["sl2vl"]["vls_read"]} <= set(range(IB_DATA_VLS))
    assert ib_processes() == []
