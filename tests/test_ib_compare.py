"""``fabroute ib compare`` and ``fabroute ib import``: OpenSM 3.3.23's own routing engines and
fabroute's routings run on a REAL ibsim fabric, each read back from the simulated switches and
OpenSM's SA, imported as a table set and measured; the log parsing on logs recorded from real
runs (``tests/data/opensm-logs/``); the import of our own exports (same routes, same bounds,
same simulation); bad input.  No mocks: a missing tool fails the module."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from emulation.ibsim.compare import KEYS, compare
from emulation.ibsim.engines import parse_log
from fabroute.cli import main
from tablegen.exports.files import load_table_dir
from tablegen.exports.infiniband.imports import hop_stats, import_files, verify_imported
from tablegen.exports.infiniband.read import load_ib_files
from tablegen.routing.imported import IMPORTED, class_name
from tablegen.topology import distance_matrix

from conftest import edited_copy, ib_processes

pytestmark = [pytest.mark.ib, pytest.mark.usefixtures("ib_tools"),
              pytest.mark.xdist_group("ib-compare")]

LOGS = Path(__file__).parent / "data" / "opensm-logs"
DF = "dragonfly:p=2,a=4,h=2"
ENGINES = ["minhop", "updn", "dfsssp", "nue", "lash"]


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert ib_processes() == [], "ibsim/opensm processes of this test are still running"


@pytest.fixture(scope="module")
def df_compare(tmp_path_factory):
    """One comparison on the Dragonfly p=h=2, a=4 (36 switches, 72 HCAs), written to OUT."""
    out = tmp_path_factory.mktemp("cmp") / "out"
    doc = compare(DF, ENGINES, ["min"], out=out)
    return {r["engine"]: r for r in doc["engines"]}, doc, out


def _hca_pairs_hops(topo):
    """(max, mean) graph distance over every ordered pair of distinct HCAs: what shortest-path
    routing must give, from the topology alone."""
    dist = distance_matrix(topo).astype(np.int64)
    h = topo.hosts.astype(np.int64)
    w = h[:, None] * h[None, :] - np.diag(h)
    return int(dist[w > 0].max()), float((dist * w).sum() / w.sum())


# -- the comparison on a real ibsim fabric -----------------------------------------------------
def test_every_engine_comes_up_routes_itself_and_delivers(df_compare):
    by, doc, _ = df_compare
    assert list(by) == ENGINES + ["fabroute-min"]
    for name, r in by.items():
        assert set(KEYS) <= set(r) <= set(KEYS) | {"verify_error"}, (name, r)   # all read
        assert r["subnet_up"] and r["fell_back_to"] is None, (name, r)
        assert 0 < r["seconds"] <= 60         # up within compare()'s default timeout
        # delivered: the read-back LFTs imported into tables that verify (else max_hops None)
        assert r["max_hops"] is not None and 0 < r["avg_hops"] <= r["max_hops"], (name, r)
        assert 0 < r["bound_adversarial"] <= r["bound_uniform"] <= 1.0


def test_deadlock_freedom_as_proven_on_the_read_back_files(df_compare):
    by, _, _ = df_compare
    for name in ("updn", "dfsssp", "nue", "lash", "fabroute-min"):
        assert by[name]["deadlock_free"] is True, by[name]
    # minhop gives every path SL 0 and OpenSM maps SL 0 to VL 0: a cyclic CDG on VL 0, which
    # the walk of its read-back files must find (the proof has teeth on a real engine)
    assert by["minhop"]["deadlock_free"] is False
    assert re.search(r"cycle of \d+ channels: .*\(vl0\)", by["minhop"]["verify_error"])
    assert (by["minhop"]["sls"], by["minhop"]["vls"]) == (1, 1)
    assert by["lash"]["sls"] == by["lash"]["vls"] == 2          # its 2 lanes = SLs 0, 1
    assert by["dfsssp"]["sls"] > 1 and by["nue"]["vls"] > 1     # balanced over the 8 VLs
    assert (by["fabroute-min"]["sls"], by["fabroute-min"]["vls"]) == (1, 2)   # VL 0 + 1 + SL


def test_hops_against_the_topology(df_compare):
    """Shortest-path engines give exactly the graph's distances over all HCA pairs; fabroute's
    Dragonfly MIN is hierarchical (local, global, local): the diameter, never less."""
    from tablegen.topologies.dragonfly import build_dragonfly

    by, _, _ = df_compare
    diameter, mean = _hca_pairs_hops(build_dragonfly(2, 4, 2))
    for name in ("minhop", "dfsssp", "lash"):
        assert by[name]["max_hops"] == diameter and by[name]["avg_hops"] == round(mean, 4)
    assert by["fabroute-min"]["max_hops"] == diameter == 3
    assert by["fabroute-min"]["avg_hops"] >= round(mean, 4)
    assert by["updn"]["avg_hops"] > mean and by["updn"]["max_hops"] > diameter  # via the root


def test_fabroute_min_round_trip_of_its_bounds(df_compare):
    """fabroute-min's read-back, imported, bounds exactly as the MIN tables it came from."""
    from simulator.bound import throughput_bound
    from simulator.run import tables_for
    from tablegen.topologies.dragonfly import build_dragonfly

    by, _, _ = df_compare
    ts, _ = tables_for(build_dragonfly(2, 4, 2), "min")
    assert by["fabroute-min"]["bound_uniform"] == round(throughput_bound(ts)["bound"], 4)
    assert by["fabroute-min"]["bound_adversarial"] == round(
        throughput_bound(ts, "worst-case")["bound"], 4)


def test_out_dir_holds_json_png_and_proven_table_sets(df_compare, capsys):
    by, doc, out = df_compare
    assert json.loads((out / "compare.json").read_text()) == dict(doc, kind="ib-compare")
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (out / "logs").iterdir()) == sorted(
        f"{e}.opensm.log" for e in by)
    assert "dfsssp tables configured" in (out / "logs" / "dfsssp.opensm.log").read_text()
    assert not list(out.parent.glob(".out.tmp-*")), "temporary sibling left"
    # each engine's directory is a table set fabroute verify proves (files and IB walk) ...
    assert main(["verify", str(out / "dfsssp")]) == 0
    assert "InfiniBand (LMC 0): OK" in capsys.readouterr().out
    # ... and rejects where the IB files can deadlock
    assert main(["verify", str(out / "minhop")]) == 1
    assert "cycle of" in capsys.readouterr().err
    # the bound of the directory is the compared one
    assert main(["analyze", str(out / "nue"), "--throughput-bound", "--json"]) == 0
    assert round(json.loads(capsys.readouterr().out)["bound"], 4) == by["nue"]["bound_uniform"]


def test_a_failing_engine_falls_back_and_a_slow_one_is_reported(tmp_path):
    """Real OpenSM: lash from VL 7 has one lane, needs two (ERR 4D02) and OpenSM routes with
    minhop instead — reported, measured as what the fabric then holds.  A timeout too short for
    any engine: both reported not up, the comparison goes on."""
    doc = compare(DF, ["lash"], [], options={"lash_start_vl": "7"})
    (r,) = doc["engines"]
    assert r["subnet_up"] and r["fell_back_to"] == "minhop"
    assert r["deadlock_free"] is False and r["sls"] == 1
    doc = compare(DF, ["minhop", "dfsssp"], [], timeout=0.01)
    assert [r["engine"] for r in doc["engines"]] == ["minhop", "dfsssp"]
    for r in doc["engines"]:
        assert not r["subnet_up"] and r["deadlock_free"] is False
        assert "within" in r["error"] and r["max_hops"] is None


def test_sampled_path_sls_prove_nothing_for_an_engine_with_several_sls(tmp_path):
    """With only every k-th path SL read (--max-paths), the SLs of the other paths are
    assumed: for DFSSSP (several SLs) deadlock freedom is then not proven either way (None,
    with the reason); minhop's single SL is what every path carries, its cycle stands;
    fabroute-val is proven from its own files, which the sample matched.  The fabric every
    engine ran on is fabroute-val's export: MIN, not asked for, is not exported."""
    doc = compare(DF, ["minhop", "dfsssp"], ["val"], lmc=1, max_paths=500, out=tmp_path / "o")
    assert [p.name for p in (tmp_path / "o" / "exports").iterdir()] == ["fabroute-val"]
    by = {r["engine"]: r for r in doc["engines"]}
    assert by["dfsssp"]["sls"] > 1 and by["dfsssp"]["deadlock_free"] is None
    # 72 HCAs · (71 HCAs · 2 offsets + 36 switches)
    assert re.search(r"read for \d+ of 12816 ", by["dfsssp"]["not_proven"])
    assert "verify_error" not in by["dfsssp"]
    assert by["minhop"]["sls"] == 1 and by["minhop"]["deadlock_free"] is False
    assert "not_proven" not in by["minhop"]
    # fabroute's own: the sample matched its files, so the files (every path SL) are proven
    assert by["fabroute-val"]["sls"] > 1 and by["fabroute-val"]["deadlock_free"] is True


def test_cli_json_and_table(tmp_path, capsys):
    assert main(["ib", "compare", DF, "--engines", "dfsssp", "--routings", "", "--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["engines"]
    assert r["engine"] == "dfsssp" and r["deadlock_free"]
    assert main(["ib", "compare", DF, "--engines", "", "--routings", "min"]) == 0
    out = capsys.readouterr().out
    assert "fabroute-min" in out and "bound" in out


@pytest.mark.parametrize("argv, msg", [
    (["--engines", "opensm"], "--engines 'opensm'; expected some of minhop"),
    (["--engines", "updn,updn"], "names one twice"),
    (["--routings", "dsnf"], "--routings dsnf"),
    (["--routings", "par"], "--routings 'par'"),
    (["--engines", "", "--routings", ""], "no engine"),
    (["--adversarial", "adversarial"], "--adversarial"),
    (["--opensm-set", "lash start"], "--opensm-set"),
    (["--timeout", "0"], "--timeout: 0 is out of range"),
])
def test_compare_bad_input(argv, msg, tmp_path, capsys):
    out = tmp_path / "o"
    try:
        code = main(["ib", "compare", DF, "--out", str(out), *argv])
    except SystemExit as e:     # refused as the command line is parsed
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err, err
    assert not out.exists() and ib_processes() == []


def test_compare_refuses_an_lmc_the_lids_cannot_hold(capsys):
    assert main(["ib", "compare", "slimfly:q=7", "--lmc", "7"]) == 2
    assert "--lmc 7" in capsys.readouterr().err


# -- the log of an engine, recorded from real runs -----------------------------------------------
def _seconds(text: str) -> float:
    """First time stamp to SUBNET UP's, read independently of parse_log."""
    stamps = re.findall(r"^\w{3} +\d+ (\d\d):(\d\d):(\d\d) (\d{6}) .*?-> (.*)$", text, re.M)
    t = [int(h) * 3600 + int(m) * 60 + int(s) + int(us) / 1e6 for h, m, s, us, _ in stamps]
    up = next(i for i, x in enumerate(stamps) if x[4].strip() == "SUBNET UP")
    return round(t[up] - t[0], 3)


@pytest.mark.parametrize("log, engine, used, fell_back, failed", [
    ("minhop.log", "minhop", "minhop", None, []),
    ("dfsssp.log", "dfsssp", "dfsssp", None, []),
    ("nue.log", "nue", "nue", None, []),
    ("fabroute-min.log", "fabroute,no_fallback", "fabroute", None, []),
    ("lash-start-vl-7-falls-back.log", "lash", "minhop", "minhop", ["lash"]),
    ("updn-no-root-falls-back.log", "updn", "minhop", "minhop", ["updn"]),
])
def test_parse_recorded_logs_up(log, engine, used, fell_back, failed):
    text = (LOGS / log).read_text()
    p = parse_log(text, engine)
    assert p["subnet_up"] and not p["no_engine"]
    assert (p["used"], p["fell_back_to"], p["failed"]) == (used, fell_back, failed)
    assert p["seconds"] == _seconds(text) and 0 < p["seconds"] < 2
    # error lines: exactly the level-0x01 lines but the harmless 'no_fallback' setup one
    want = [l.split(" -> ", 1)[1] for l in text.splitlines()
            if " 0x01 -> " in l and "'no_fallback'" not in l]
    assert p["errors"] == want
    assert bool(want) == bool(failed)
    if log.startswith("lash"):
        assert any("ERR 4D02" in e for e in p["errors"])


def test_parse_recorded_log_never_up():
    p = parse_log((LOGS / "updn-no-root-no-fallback.log").read_text(), "updn,no_fallback")
    assert not p["subnet_up"] and p["no_engine"] and p["seconds"] is None
    assert (p["used"], p["fell_back_to"], p["failed"]) == (None, None, ["updn"])
    assert any("No routing engine able" in e for e in p["errors"])


def test_parse_an_empty_or_foreign_log():
    assert parse_log("", "minhop") == {"subnet_up": False, "used": None, "fell_back_to": None,
                                       "failed": [], "no_engine": False, "errors": [],
                                       "seconds": None}


# -- ib import: our own exports round trip ---------------------------------------------------------
@pytest.fixture(scope="module")
def df_val_lmc1(tmp_path_factory):
    out = tmp_path_factory.mktemp("dfval") / "ib"
    assert main(["ib", "export", DF, "--routing", "val", "--lmc", "1", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def sf5_min(tmp_path_factory):
    out = tmp_path_factory.mktemp("sf5") / "ib"
    assert main(["ib", "export", "slimfly:q=5", "--routing", "min", "--out", str(out)]) == 0
    return out


def test_import_round_trip_same_routes(df_val_lmc1, tmp_path, capsys):
    """An export with LMC 1 (MIN + group-VAL layers), imported: every (host index, offset)
    class routes exactly as the layer of that offset; the set verifies, IB walk included."""
    from tablegen.exports.infiniband.write import ib_layers

    out = tmp_path / "imp"
    assert main(["ib", "import", str(df_val_lmc1), "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["ib"]["deadlock_free"] and res["classes"] == 2 * 2 and res["tables"] == 2
    ts = load_table_dir(out)
    assert ts.routing == IMPORTED and ts.params == {"source": "infiniband", "lmc": 1,
                                                    "engine": None}
    layers = ib_layers(load_table_dir(df_val_lmc1), 1, 1)[0]
    for e in range(2):
        for k in range(2):
            t = ts.tables[ts.cls(class_name(e, k, 1)).table1]
            assert np.array_equal(t, layers.nxt[k]), (e, k)
    assert main(["verify", str(out)]) == 0
    assert "files: 9 of 9" in capsys.readouterr().out


def test_import_of_min_bounds_hops_and_simulates_as_min(sf5_min, tmp_path, capsys):
    """Slim Fly q=5 MIN through the files and back: one shared table equal to MIN's, the same
    throughput bounds, hops = the graph's, and the simulator runs it packet for packet as MIN
    (the destination host picks the class; LMC 0 draws no offset)."""
    from simulator.bound import throughput_bound
    from simulator.config import SimConfig
    from simulator.run import simulate, tables_for

    imp = import_files(load_ib_files(sf5_min), "fabroute-min")
    ts, _ = tables_for(imp.ts.topo, "min")
    assert list(imp.ts.tables) == ["h0"] and np.array_equal(imp.ts.tables["h0"],
                                                             ts.tables["min"])
    for traffic in ("uniform", "adversarial"):
        assert throughput_bound(imp.ts, traffic)["bound"] == pytest.approx(
            throughput_bound(ts, traffic)["bound"], rel=1e-12)
    diameter, mean = _hca_pairs_hops(imp.ts.topo)
    h = hop_stats(imp.ts)
    assert (h["max_hops"], h["paths"]) == (diameter, 200 * 199)
    assert h["avg_hops"] == pytest.approx(mean)
    cfg = SimConfig().replace(warmup_cycles=200, warmup_max_periods=2, measure_cycles=400)
    a, b = simulate(imp.ts, cfg, "uniform", 0.4, 3), simulate(ts, cfg, "uniform", 0.4, 3)
    assert a["routing"] == "ib-import(fabroute-min)"
    assert {k: v for k, v in a.items() if k != "routing"} == \
        {k: v for k, v in b.items() if k != "routing"}
    # the same through the command line on a written directory
    out = tmp_path / "imp"
    assert main(["ib", "import", str(sf5_min), "--out", str(out), "--engine", "x"]) == 0
    capsys.readouterr()
    assert main(["simulate", str(out), "--load", "0.2", "--set", "warmup_cycles=100",
                 "--set", "measure_cycles=200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


def test_verify_imported_finds_a_tampered_table(sf5_min):
    """The IB walk holds every host-LID entry of lfts.dump against the imported tables."""
    f = load_ib_files(sf5_min)
    imp = import_files(f)
    imp.ts.tables["h0"][3, 17] = (imp.ts.tables["h0"][3, 17] + 1) % 7
    rep = verify_imported(f, imp.ts)
    assert not rep["ok"] and rep["tables"]["lft_mismatches"] == 4      # 4 hosts on switch 17
    assert "differs from the imported tables in 4 of" in rep["errors"][-1]


def _lft_edit(switch: int, lid: int, port: int):
    sw = f" guid 0x{0x02fab00100000000 + switch:016x} ("     # the section header only

    def edit(text):
        head = text.index(sw)
        at = text.index(f"\n0x{lid:04x} ", head) + 1
        end = text.index("\n", at)
        return text[:at] + f"0x{lid:04x} {port:03d}" + text[end:]
    return edit


@pytest.mark.parametrize("case, msg", [
    ("no-dir", "is not a directory"),
    ("empty", "holds no"),
    ("topology", "50 switches and 200 HCAs; expected 36 and 72 for dragonfly"),
    ("unknown-topology", "topology 'torus:q=5'"),
    ("port", "is beyond its"),
    ("out-foreign", "fabroute did not write"),
])
def test_import_bad_input(case, msg, sf5_min, tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    if case == "no-dir":
        src = tmp_path / "nothing"
    elif case == "empty":
        src.mkdir()
    elif case in ("topology", "unknown-topology"):
        name = "dragonfly:p=2,a=4,h=2" if case == "topology" else "torus:q=5"
        edited_copy(sf5_min, src, "guids.json", lambda t: re.sub(
            r'"topology": ?"[^"]*"', f'"topology":"{name}"', t, count=1))
    elif case == "port":
        edited_copy(sf5_min, src, "lfts.dump", _lft_edit(3, 0x40, 99))
    else:
        src = sf5_min
        out.mkdir()
        (out / "mine.txt").write_text("not fabroute's")
    assert main(["ib", "import", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err, err
    assert (not out.exists()) if case != "out-foreign" else \
        [p.name for p in out.iterdir()] == ["mine.txt"]


def test_import_of_lfts_that_do_not_deliver_writes_nothing(sf5_min, tmp_path, capsys):
    """A host's LID sent into another switch's host port: a route, not bad input — exit 1,
    the entry named, nothing written."""
    src, out = tmp_path / "src", tmp_path / "out"
    lid = 51 + 4 * 17 + 2                  # host 2 of switch 17 (LMC 0: switch LIDs 1..50)
    edited_copy(sf5_min, src, "lfts.dump", _lft_edit(3, lid, 1))
    assert main(["ib", "import", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"switch 3 forwards LID 0x{lid:04x} (host 2 of switch 17, offset 0) into its own " \
           "host port 1" in err
    assert "nothing written" in err and not out.exists()
    shutil.rmtree(src)


def test_import_of_lfts_that_loop_writes_nothing(sf5_min, tmp_path, capsys):
    """A host LID sent from switch 3 to a neighbour and straight back: verify's walk of the
    imported tables finds the loop; exit 1, nothing written."""
    guids = json.loads((sf5_min / "guids.json").read_text())
    lfts = load_ib_files(sf5_min).lfts
    sw = {s["id"]: s for s in guids["switches"]}
    lid, hop = next((h["lid"], p) for h in guids["hosts"] for p in sw[3]["ports"]
                    if "switch" in p and h["switch"] not in (3, p["switch"])
                    and lfts.row(int(sw[3]["guid"], 16))[h["lid"]] == p["port"])
    src, out = tmp_path / "src", tmp_path / "out"
    edited_copy(sf5_min, src, "lfts.dump", _lft_edit(hop["switch"], lid, hop["peer_port"]))
    assert main(["ib", "import", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "loop" in err and "nothing written" in err and not out.exists()


def test_verify_refuses_an_imported_set_whose_files_changed(df_compare, tmp_path, capsys):
    """The read-back files are the imported set's source, bound by their hash."""
    _, _, out = df_compare
    d = tmp_path / "lash"
    shutil.copytree(out / "lash", d)
    with open(d / "ib" / "path-sl.txt", "a") as f:
        f.write("* * * 1\n")
    assert main(["verify", str(d)]) == 1
    assert "path-sl.txt: its SHA-256 or size differs" in capsys.readouterr().err
