"""Table updates: failed links (degraded tables), diffs between table sets, DSN-F growth
written as a new verified table set with its update (``tablegen/update.py``,
``tablegen/topologies/failures.py``, ``fabroute expand --out``, ``fabroute diff``)."""

import json

import numpy as np
import pytest

from fabroute.cli import main
from tablegen.errors import TopologyError
from tablegen.exports.files import load_table_dir
from tablegen.routing.build import build_tables
from tablegen.topologies.dsnf import add_nodes, build_dsnf, transform
from tablegen.topologies.failures import parse_failures, without_links
from tablegen.topologies.spec import build
from tablegen.update import relation, table_diff
from tablegen.verify import verify

ROUTINGS = ("min", "val", "val-nta", "val-3h", "ugal-l")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- failed links ------------------------------------------------------------------------------
def test_without_links_keeps_ports_and_names_the_failure():
    topo = build("slimfly:q=5")
    a, b = sorted(topo.edge_set())[3]
    deg = without_links(topo, [(b, a)])
    assert deg.name() == f"{topo.name()},fail={a}-{b}"
    assert (b, a) not in deg.edge_set() and (a, b) not in deg.edge_set()
    assert len(deg.links) == len(topo.links) - 1
    kept = topo.adj != deg.adj
    assert kept.sum() == 2 and set(topo.adj[kept].tolist()) == {a, b}
    # a second failure adds up; the SPEC form rebuilds the same fabric
    c, d = next((x, y) for x, y in sorted(topo.edge_set()) if {x, y}.isdisjoint({a, b}))
    two = without_links(deg, [(c, d)])
    again = build(f"slimfly:q=5,fail={c}-{d}+{a}-{b}")
    assert two.name() == again.name() and np.array_equal(two.adj, again.adj)


@pytest.mark.parametrize("spec", ["slimfly:q=5", "dragonfly:p=2,a=4,h=2"])
def test_every_single_link_failure_gives_verified_tables(spec):
    """All pairs, loop-free, hop bounds and an acyclic CDG per VC after any one link fails:
    hop-indexed VCs on graph-minimal paths (more VCs than the intact fabric, never fewer)."""
    topo = build(spec)
    intact = {r: verify(build_tables(topo, r)).vcs_used for r in ROUTINGS}
    for a, b in sorted(topo.edge_set()):
        deg = without_links(topo, [(a, b)])
        for r in ROUTINGS:
            ts = build_tables(deg, r)
            rep = verify(ts)
            assert rep.ok, (a, b, r, rep.errors[:2])
            assert ts.vc_scheme == "hop" and rep.vcs_used >= intact[r]
            # no entry anywhere leads into the failed cable
            for name, t in ts.tables.items():
                nxt = np.where(t >= 0, deg.adj[np.arange(t.shape[0])[:, None],
                                                np.maximum(t, 0)], 0)
                assert (nxt >= 0).all(), (name, a, b)


def test_restoring_a_link_restores_the_original_tables():
    topo = build("dragonfly:p=2,a=4,h=2")
    a, b = sorted(topo.edge_set())[0]
    before = build_tables(topo, "ugal-l")
    build_tables(without_links(topo, [(a, b)]), "ugal-l")
    back = build_tables(build("dragonfly:p=2,a=4,h=2"), "ugal-l")
    assert all(np.array_equal(before.tables[k], back.tables[k]) for k in before.tables)
    assert np.array_equal(before.vc_inc, back.vc_inc) and before.num_vcs == back.num_vcs


@pytest.mark.parametrize("text,needle", [
    ("0:2", "failed link 0:2 is not a link of"),
    ("0:99", "switch 99 is not a switch of"),
    ("3:3", "joins a switch to itself"),
    ("0-x", "is not a switch pair"),
])
def test_bad_failures_are_one_line_errors(text, needle):
    topo = build("slimfly:q=5")
    with pytest.raises(TopologyError, match=needle):
        without_links(topo, parse_failures(text.replace("-x", ":x")))


def test_a_failure_that_disconnects_is_refused():
    topo = build("dsnf:n=8")
    leaf = int(np.flatnonzero(topo.degree == topo.degree.min())[0])
    nbs = sorted(set(int(v) for v in topo.adj[leaf] if v >= 0))
    with pytest.raises(TopologyError, match="disconnects"):
        without_links(topo, [(leaf, v) for v in nbs])


def test_tables_fail_cli_writes_verified_degraded_tables(capsys, tmp_path):
    out = tmp_path / "t"
    code, so, err = run(capsys, "tables", "slimfly:q=5", "--routing", "min", "--fail", "0:1",
                        "--formats", "json,openflow", "--out", out)
    assert code == 0, err
    code, so, err = run(capsys, "verify", out)
    assert code == 0 and "fail=0-1" in so and "OK" in so
    ts = load_table_dir(out)
    assert ts.topo.params["fail"] == "0-1" and ts.num_vcs == 4   # diameter 4 without 0-1
    # bad input: exit 2, nothing written
    for argv, needle in ((["--fail", "0:2"], "not a link"),
                         (["--fail", "0"], "not a switch pair")):
        bad = tmp_path / "bad"
        code, _, err = run(capsys, "tables", "slimfly:q=5", "--routing", "min", *argv,
                           "--out", bad)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
        assert not bad.exists()
    code, _, err = run(capsys, "tables", "dsnf:n=64", "--routing", "dsnf", "--fail", "0:1",
                       "--out", tmp_path / "bad")
    assert code == 2 and "cannot avoid failed links" in err and not (tmp_path / "bad").exists()


# -- diffs -------------------------------------------------------------------------------------
def test_growth_within_p_changes_no_existing_destination():
    """DSN-F's claim for its own routing, step by step over n = 64 -> 100 (p = 4) and across a
    cabinet at once; graph-minimal tables do not keep it (a new switch closes a local chain
    into shorter paths), so MIN growth is a two-phase update."""
    p = 4
    old = build_tables(build_dsnf(64, p=p), "dsnf")
    old_min = build_tables(build_dsnf(64, p=p), "min")
    min_changed = 0
    for n in range(64, 100):
        new = build_tables(build_dsnf(n + 1, p=p), "dsnf")
        d = table_diff(old, new)
        assert d["entries"]["changed"] == 0 and d["entries"]["removed"] == 0
        assert d["cables"]["removed"] == [] and d["cables"]["replugged"] == []
        # every (old switch, new destination) and every new switch's row is added
        assert d["tables"]["dsnf_main"]["added"] == 2 * n
        assert d["order"]["consistency"] == "ordered"
        new_min = build_tables(build_dsnf(n + 1, p=p), "min")
        min_changed += table_diff(old_min, new_min)["entries"]["changed"]
        old, old_min = new, new_min
    assert min_changed > 0
    d = table_diff(build_tables(build_dsnf(64, p=p), "dsnf"),
                   build_tables(build_dsnf(80, p=p), "dsnf"))
    assert d["entries"]["old_destinations_changed"] == 0 and d["switches"]["added"] == 16


def test_growth_at_paper_scale_samples():
    """n = 1024 -> 1025, 1536 -> 1537, 2047 -> 2048 (p = 7): the full 1024 -> 2048 count is
    benchmarks/bench_updates.py growth."""
    for n in (1024, 1536, 2047):
        d = table_diff(build_tables(build_dsnf(n, p=7), "dsnf"),
                       build_tables(build_dsnf(n + 1, p=7), "dsnf"))
        assert d["entries"]["old_destinations_changed"] == 0
        assert d["order"]["consistency"] == "ordered"


def test_diff_counts_against_recomputed_tables():
    """The diff of a transformation and of a failure, counted again here entry by entry."""
    old_t = build_dsnf(64, p=3)
    new_t, cd, relabel = transform(64)
    old, new = build_tables(old_t, "dsnf"), build_tables(new_t, "dsnf")
    d = table_diff(old, new, relabel)
    assert [len(d["cables"][k]) for k in ("added", "removed", "replugged")] == \
        [len(cd.added), len(cd.removed), len(cd.replugged)] == [74, 73, 6]
    for name in ("dsnf_pre", "dsnf_main"):
        a, b = old.tables[name], new.tables[name]
        changed = 0
        for u in range(64):
            for t in range(64):
                if a[u, t] >= 0:
                    changed += relabel[old_t.adj[u, a[u, t]]] != new_t.adj[relabel[u],
                                                                           b[relabel[u], relabel[t]]]
        assert d["tables"][name]["changed"] == changed > 0
    topo = build("slimfly:q=5")
    deg = without_links(topo, [(0, 1)])
    a, b = build_tables(topo, "min"), build_tables(deg, "min")
    d = table_diff(a, b)
    assert d["entries"]["changed"] == int((a.tables["min"] != b.tables["min"]).sum())
    assert d["cables"]["removed"] == [[0, int(topo.links[0][1]), 1, int(topo.links[0][3]),
                                       "local" if "local" in topo.kind_names else
                                       topo.kind_names[topo.link_kind[0, 0]]]]
    assert d["order"]["consistency"] == "two-phase"


def test_relation_refuses_other_fabrics():
    from tablegen.errors import BadInput

    assert relation(build_dsnf(64), add_nodes(build_dsnf(64), 3)[0])[0] == "grown"
    assert relation(build_dsnf(64, p=3), transform(64)[0])[0] == "transformed"
    sf = build("slimfly:q=5")
    assert relation(sf, without_links(sf, [(0, 1)]))[0] == "same, degraded"
    with pytest.raises(BadInput, match="expected two table sets of one fabric"):
        relation(sf, build("slimfly:q=7"))
    with pytest.raises(BadInput, match="expected two table sets of one fabric"):
        relation(add_nodes(build_dsnf(64), 3)[0], build_dsnf(64))


def test_expand_out_writes_the_grown_verified_set_with_its_update(capsys, tmp_path):
    old, new = tmp_path / "n64", tmp_path / "n72"
    assert run(capsys, "tables", "dsnf:n=64", "--routing", "dsnf", "--formats",
               "json,openflow", "--out", old)[0] == 0
    code, out, err = run(capsys, "expand", old, "--add", "8", "--out", new, "--json")
    assert code == 0, err
    d = json.loads(out)
    ts = load_table_dir(new)
    ref = build_tables(add_nodes(build_dsnf(64), 8)[0], "dsnf")
    assert ts.topo.name() == "dsnf:n=72,p=4"
    assert all(np.array_equal(ts.tables[k], ref.tables[k]) for k in ref.tables)
    assert json.loads((new / "update.json").read_text()) == d
    assert (new / "openflow").is_dir() and not (new / "ib").exists()   # the old set's formats
    assert run(capsys, "verify", new)[0] == 0
    code, out, _ = run(capsys, "diff", old, new, "--json")
    dd = json.loads(out)
    assert code == 0 and dd["relation"] == "grown"
    assert dd["entries"] == d["entries"] and dd["cables"] == d["cables"]
    # --to, and a changed update.json is caught by verify (bound by its hash)
    code, out, _ = run(capsys, "expand", old, "--to", "80", "--out", tmp_path / "n80", "--json")
    assert code == 0 and json.loads(out)["switches"] == {"old": 64, "new": 80, "added": 16}
    upd = new / "update.json"
    upd.write_text(upd.read_text().replace('"ordered"', '"two-phase"'))
    assert run(capsys, "verify", new)[0] == 1


def test_expand_and_diff_bad_input(capsys, tmp_path):
    old = tmp_path / "n64"
    assert run(capsys, "tables", "dsnf:n=64", "--routing", "dsnf", "--formats", "json",
               "--out", old)[0] == 0
    sf = tmp_path / "sf"
    assert run(capsys, "tables", "slimfly:q=5", "--routing", "min", "--formats", "json",
               "--out", sf)[0] == 0
    n40 = tmp_path / "n40"      # n = 64 is a transformation point (as its SPEC), 40 is not
    assert run(capsys, "tables", "dsnf:n=40", "--routing", "min", "--formats", "json",
               "--out", n40)[0] == 0
    cases = [
        (["expand", old, "--add", "200", "--out", tmp_path / "x"], "leaves the p=4 range"),
        (["expand", old, "--to", "60", "--out", tmp_path / "x"], "expected a size above 64"),
        (["expand", n40, "--transform", "--out", tmp_path / "x"], "not at a transformation"),
        (["expand", sf, "--add", "1", "--out", tmp_path / "x"], "not an intact dsnf fabric"),
        (["expand", old, "--add", "1", "--to", "70"], "exclude each other"),
        (["diff", old, sf], "expected two table sets of one fabric"),
        (["diff", old, tmp_path / "nothing"], "is not a directory"),
    ]
    for argv, needle in cases:
        code, _, err = run(capsys, *argv)
        assert code == 2 and needle in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
    # an unproven DIR is not used: exit 1
    (old / "verify.json").write_text("{}")
    code, _, err = run(capsys, "expand", old, "--add", "1", "--out", tmp_path / "x")
    assert code == 1 and not (tmp_path / "x").exists()
