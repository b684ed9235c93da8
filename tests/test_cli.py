"""The fabroute command line, run in-process through its entry point."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabroute.cli import main
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv,needle", [
    (["topology", "slimfly:q=6"], "q=6 is not admissible"),
    (["topology", "slimfly:q=15"], "q=15"),
    (["topology", "dragonfly:p=2,a=4,h=2,g=10"], "g=10; expected 2 <= g <= a*h+1 = 9"),
    (["topology", "dsnf:n=1"], "n=1"),
    (["topology", "mesh:x=4"], "topology 'mesh' is unknown"),
    (["topology", "slimfly:q=5,z=3"], "unknown key z"),
    (["tables", "slimfly:q=5", "--routing", "dsnf", "--out", "X"], "routing 'dsnf' needs a dsnf"),
    (["tables", "slimfly:q=5", "--routing", "zigzag", "--out", "X"],
     "argument --routing: routing 'zigzag' is unknown; expected one of min,"),
    (["tables", "slimfly:q=5", "--routing", "min,dsnf", "--out", "X"],
     "--routing dsnf: routing 'dsnf' needs a dsnf topology"),
    (["tables", "slimfly:q=5", "--routing", "min,val,min", "--out", "X"],
     "name a routing twice"),
    (["tables", "slimfly:q=5", "--routing", "min", "--jobs", "0", "--out", "X"],
     "argument --jobs: 0 is below the smallest supported worker count 1"),
    (["path", "slimfly:q=5", "--routing", "zigzag", "--src", "0", "--dst", "1"], "zigzag"),
    (["path", "slimfly:q=5", "--routing", "min", "--src", "0", "--dst", "50"], "dst=50"),
    (["path", "slimfly:q=5", "--routing", "min", "--src", "0", "--dst", "3", "--via", "7"],
     "--via 7"),
    (["tables", "slimfly:q=5", "--routing", "min", "--vcs", "0", "--out", "X"],
     "argument --vcs: 0 is below the smallest supported VC count 1; expected 1 <= N <= 64"),
    (["path", "dsnf:n=32", "--routing", "dsnf", "--src", "0", "--dst", "7", "--vcs", "-1"],
     "argument --vcs: -1"),
    (["tables", "slimfly:q=5", "--routing", "min", "--formats", "json,foo", "--out", "X"],
     "foo unknown; expected a comma-separated subset of json,ib,openflow"),
    (["tables", "slimfly:q=5", "--routing", "ugal-l", "--nonmin", "val-group", "--out", "X"],
     "expected one of val, val-nta, val-3h"),
    (["tables", "slimfly:q=5", "--routing", "val", "--openflow-profile", "hw", "--out", "X"],
     "argument --openflow-profile: invalid choice: 'hw'"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, needle):
    argv = [str(tmp_path / a) if a == "X" else a for a in argv]
    try:
        code, out, err = run(capsys, *argv)
    except SystemExit as e:     # refused by argparse: a bad choice or an option's range
        code, err = e.code, capsys.readouterr().err
    assert code == 2
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "X").exists()


def test_output_path_through_a_file_and_malformed_dirs(capsys, tmp_path):
    """--out naming a file (or a path below one) is refused before any work; a DIR whose
    files have the wrong shape or are truncated is bad input, not a traceback."""
    f = tmp_path / "afile"
    f.write_text("keep me")
    for out in (f, f / "sub"):
        code, _, err = run(capsys, "tables", "slimfly:q=5", "--routing", "min", "--out", str(out))
        assert code == 2 and f"{f} is not a directory" in err and len(err.splitlines()) == 1
    assert f.read_text() == "keep me" and sorted(tmp_path.iterdir()) == [f]
    assert run(capsys, "tables", "slimfly:q=5", "--routing", "min", "--formats", "json",
               "--out", str(tmp_path / "t"))[0] == 0
    npz = tmp_path / "t" / "tables.npz"
    npz.write_bytes(npz.read_bytes()[:2000])
    bad = tmp_path / "shape"
    bad.mkdir()
    (bad / "topology.json").write_text("[]")
    for d, needle in ((tmp_path / "t", "BadZipFile"), (bad, "TypeError")):
        code, _, err = run(capsys, "verify", str(d))
        assert code == 2 and needle in err and len(err.splitlines()) == 1, err


def test_path_via_is_a_switch_for_group_valiant(capsys):
    """Dragonfly group-level VAL: --via names a switch and the path detours through its
    group; a switch of the source's or destination's group is refused."""
    topo = build("dragonfly:p=2,a=4,h=2")
    code, out, _ = run(capsys, "path", "dragonfly:p=2,a=4,h=2", "--routing", "val", "--src",
                       "0", "--dst", "35", "--via", "17", "--json")
    p = json.loads(out)
    assert code == 0 and p["via"] == 17 and p["via_group"] == 4
    assert 4 in {int(topo.group[s]) for s in p["switches"]}
    code, _, err = run(capsys, "path", "dragonfly:p=2,a=4,h=2", "--routing", "val", "--src",
                       "0", "--dst", "35", "--via", "33")
    assert code == 2 and "--via 33 (group 8) is not an intermediate" in err


def test_analyze_throughput_bound(capsys):
    """`analyze --throughput-bound`: Dragonfly p=h=2, a=4 MIN under worst-case traffic is
    bound by its one global channel per group pair, 1/(a*h) = 1/8; a traffic the topology
    has no definition for is bad input."""
    code, out, _ = run(capsys, "analyze", "dragonfly:p=2,a=4,h=2", "--throughput-bound",
                       "--routing", "min", "--traffic", "worst-case", "--json")
    b = json.loads(out)
    assert code == 0 and b["bound"] == pytest.approx(1 / 8)
    assert b["classes"]["min"]["by_kind"]["global"]["max_load"] == pytest.approx(8)
    code, _, err = run(capsys, "analyze", "slimfly:q=5", "--throughput-bound", "--traffic",
                       "worst-case")
    assert code == 2 and "worst-case is defined for a dragonfly, not slimfly" in err


def test_unreadable_dir(capsys, tmp_path):
    code, _, err = run(capsys, "verify", str(tmp_path / "missing"))
    assert code == 2 and "is not a directory" in err
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "topology.json").write_text("{not json")
    code, _, err = run(capsys, "verify", str(tmp_path / "junk"))
    assert code == 2 and "holds no readable table set" in err and len(err.splitlines()) == 1


def test_topology_json_keys(capsys):
    code, out, _ = run(capsys, "topology", "dragonfly:p=2,a=4,h=2", "--json")
    d = json.loads(out)
    assert code == 0
    assert {"id", "label"} <= set(d["switches"][0])
    assert len(d["links"]) == 36 * 5 // 2 and all(len(l) == 4 for l in d["links"])
    assert len(d["hosts"]) == 72 and d["hosts"][3] == [3, 1, 2]


def test_path_json_matches_the_paper_example(capsys):
    code, out, _ = run(capsys, "path", "dsnf:n=32", "--routing", "dsnf", "--src", "24",
                       "--dst", "7", "--json")
    p = json.loads(out)
    assert code == 0 and p["switches"] == [24, 0, 1, 8, 7]
    assert len(p["ports"]) == len(p["vcs"]) == 4


def test_path_via_intermediate(capsys):
    code, out, _ = run(capsys, "path", "slimfly:q=5", "--routing", "val", "--src", "0",
                       "--dst", "49", "--via", "7", "--json")
    p = json.loads(out)
    assert 7 in p["switches"] and p["vcs"] == list(range(len(p["ports"])))
    topo = build("slimfly:q=5")
    for u, port, v in zip(p["switches"], p["ports"], p["switches"][1:]):
        assert topo.adj[u, topo.port_index(u, port)] == v


def test_tables_then_verify_roundtrip(capsys, tmp_path):
    out = tmp_path / "sf-3h"
    code, stdout, err = run(capsys, "tables", "slimfly:q=5", "--routing", "val-3h",
                            "--out", str(out), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["num_vcs"] == 3
    assert (out / "tables.npz").exists() and (out / "topology.json").exists()
    code, stdout, err = run(capsys, "verify", str(out), "--json")
    rep = json.loads(stdout)
    assert code == 0 and rep["ok"] and rep["vcs_used"] == 3
    assert not list(tmp_path.glob(".*tmp*"))


def test_failing_tables_are_never_written(capsys, tmp_path):
    out = tmp_path / "bad"
    code, _, err = run(capsys, "tables", "dragonfly:p=2,a=4,h=2", "--routing", "val",
                       "--vcs", "2", "--out", str(out))
    assert code == 1
    assert "cycle" in err and "nothing written" in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_verify_rejects_a_tampered_table_set(capsys, tmp_path):
    out = tmp_path / "df"
    assert run(capsys, "tables", "dragonfly:p=2,a=4,h=2", "--routing", "val", "--out",
               str(out))[0] == 0
    # rewrite the tables with VAL squeezed onto 2 VCs: verify must find the cycle
    from tablegen.exports.files import load_table_dir

    ts = load_table_dir(out)
    bad = build_tables(ts.topo, "val", vcs=2)
    bad.save_npz(out / "tables.npz")
    code, _, err = run(capsys, "verify", str(out))
    assert code == 1 and "cycle" in err


def test_installed_entry_point_runs():
    exe = Path(sys.executable).with_name("fabroute")
    if not exe.exists():
        pytest.skip("fabroute entry point not installed next to this interpreter")
    r = subprocess.run([str(exe), "topology", "slimfly:q=5"], capture_output=True, text=True,
                       env={**os.environ})
    assert r.returncode == 0 and "50 switches, 200 hosts" in r.stdout


@pytest.mark.parametrize("n", [24, 32, 47, 63, 64, 100, 159])
def test_growing_dsnf_by_one_only_adds_cables_and_table_entries(capsys, n):
    code, out, _ = run(capsys, "expand", f"dsnf:n={n}", "--add", "1", "--json")
    d = json.loads(out)
    assert code == 0 and d["cables"]["removed"] == [] and len(d["cables"]["added"]) >= 1
    for name in ("dsnf_pre", "dsnf_main"):
        t = d["tables"][name]
        # existing destinations keep every entry; only the new column (n entries at the old
        # switches) and the new switch's row (n entries) appear
        assert t["changed"] == 0 and t["removed"] == 0 and t["added"] == 2 * n
    assert d["order"]["consistency"] == "ordered"


def test_transform_reports_rewiring_and_table_changes(capsys):
    code, out, _ = run(capsys, "expand", "dsnf:n=64", "--transform", "--json")
    d = json.loads(out)
    assert code == 0 and d["to"] == "dsnf:n=64,p=4" and d["from"] == "dsnf:n=64,p=3"
    assert [len(d["cables"][k]) for k in ("added", "removed", "replugged")] == [74, 73, 6]
    assert d["tables"]["dsnf_main"]["changed"] > 0 and d["order"]["consistency"] == "two-phase"
    code, _, err = run(capsys, "expand", "dsnf:n=65", "--transform")
    assert code == 2 and "not at a transformation point" in err


def test_analyze_json(capsys):
    code, out, _ = run(capsys, "analyze", "torus:x=4,y=4", "--json")
    a = json.loads(out)
    assert code == 0 and a["diameter"] == 4 and a["degree"]["max"] == 4


def test_compare_writes_json_and_png(capsys, tmp_path):
    code, out, _ = run(capsys, "compare", "--sizes", "64,128", "--expansion", "64,80,8",
                       "--out", str(tmp_path))
    assert code == 0
    res = json.loads((tmp_path / "compare.json").read_text())
    png = (tmp_path / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    dsnf, torus = res["families"]["dsnf"], res["families"]["torus"]
    assert [r["n"] for r in dsnf] == [64, 128]
    assert all(a["diameter"] < b["diameter"] for a, b in zip(dsnf, torus))  # small-world effect
    assert [r["added"] for r in res["expansion"]] == [0, 8, 16]


@pytest.mark.parametrize("spec,routing", [
    ("slimfly:q=5", r) for r in ("min", "val", "val-nta", "val-3h", "ugal-l")] + [
    ("dragonfly:p=2,a=4,h=2", r) for r in ("min", "val", "ugal-l")] + [
    ("dsnf:n=32", "dsnf"), ("dsnf:n=32", "min"), ("torus:x=4,y=4", "min")])
def test_every_exported_table_set_passes_verify(capsys, tmp_path, spec, routing):
    out = tmp_path / "t"
    code, stdout, err = run(capsys, "tables", spec, "--routing", routing, "--out", str(out))
    assert code == 0, err
    code, stdout, err = run(capsys, "verify", str(out), "--json")
    rep = json.loads(stdout)
    assert code == 0 and rep["ok"] and not rep["cycle"], err
    assert (out / "openflow").is_dir() and (out / "tables.json").exists()


def test_a_table_set_infiniband_cannot_express_still_verifies(capsys, tmp_path):
    """DSN-F n = 1024 needs more VLs than IB has: `tables` skips the IB files, and `verify`
    proves the table set and reports IB as not exported, and why: not expressible, exit 0."""
    out = tmp_path / "d"
    code, stdout, err = run(capsys, "tables", "dsnf:n=1024", "--routing", "dsnf", "--out",
                            str(out), "--json")
    assert code == 0 and "ib" in json.loads(stdout)["skipped"], err
    assert not (out / "ib").exists()
    code, stdout, err = run(capsys, "verify", str(out), "--json")
    rep = json.loads(stdout)
    assert code == 0 and rep["ok"], err
    assert rep["ib"]["expressible"] is False and "more than 8 VLs" in rep["ib"]["errors"][0]
    code, stdout, _ = run(capsys, "verify", str(out))
    assert code == 0 and "InfiniBand: not exported (fabroute tables skipped it: " in stdout
    assert "at LMC 0, no files: not expressible; " in stdout and rep["ib"]["exported"] is False


def _tree(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def test_several_routings_at_once_equal_one_at_a_time(capsys, tmp_path):
    """--routing A,B writes OUT/A and OUT/B with forked workers, byte for byte what one
    routing at a time on one process writes; one JSON line per routing."""
    code, out, _ = run(capsys, "tables", "slimfly:q=5", "--routing", "min,val-3h,ugal-l",
                       "--jobs", "2", "--out", str(tmp_path / "all"), "--json")
    assert code == 0
    lines = [json.loads(l) for l in out.splitlines()]
    assert sorted(l["routing"] for l in lines) == ["min", "ugal-l", "val-3h"]
    assert all(l["verified"] and l["skipped"] == {} for l in lines)
    for r in ("min", "val-3h", "ugal-l"):
        assert run(capsys, "tables", "slimfly:q=5", "--routing", r, "--jobs", "1",
                   "--out", str(tmp_path / r))[0] == 0
        one, both = _tree(tmp_path / r), _tree(tmp_path / "all" / r)
        assert len(one) > 10 and one.keys() == both.keys()
        assert [f for f in one if one[f] != both[f]] == []
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["min", "routings.json",
                                                                     "ugal-l", "val-3h"]
    index = json.loads((tmp_path / "all" / "routings.json").read_text())
    assert index["routings"] == ["min", "val-3h", "ugal-l"] == index["written"]


def test_a_routing_that_fails_in_a_batch_is_not_written(capsys, tmp_path):
    code, out, err = run(capsys, "tables", "slimfly:q=5", "--routing", "min,val", "--vcs",
                         "2", "--jobs", "2", "--out", str(tmp_path / "o"), "--json")
    assert code == 1
    assert "tables: val on slimfly:q=5" in err and "failed verification" in err
    assert (tmp_path / "o" / "min" / "tables.npz").is_file()
    assert not (tmp_path / "o" / "val").exists()
    assert {json.loads(l)["routing"]: json.loads(l)["verified"] for l in out.splitlines()} == \
        {"min": True, "val": False}
    assert json.loads((tmp_path / "o" / "routings.json").read_text())["written"] == ["min"]
