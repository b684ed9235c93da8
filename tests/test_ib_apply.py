"""``fabroute ib apply``: our LFTs, SL2VL tables and path SLs loaded into REAL OpenSM 3.3.23
(engine ``fabroute`` = the file engine + our plugin's ``update_sl2vl`` / ``path_sl`` hooks) on
a REAL ibsim fabric, read back from the simulated switches and the SA, and compared.  No
mocks and no skips: a missing tool fails the test (``make test`` installs them)."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from emulation.ibsim import apply as ib_apply
from fabroute.cli import main
from tablegen.errors import BadInput
from tablegen.exports.infiniband.limits import IB_DATA_VLS
from tablegen.exports.infiniband.read import load_ib_files

from conftest import edited_copy, ib_processes

pytestmark = [pytest.mark.ib, pytest.mark.usefixtures("ib_tools")]


def _state(p: Path) -> bytes:
    return (p / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    try:
        return _state(Path(f"/proc/{pid}")) != b"Z"
    except OSError:
        return False


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert ib_processes() == [], "ibsim/opensm processes of this test are still running"


def _assert_stopped(report):
    for proc in ("ibsim", "opensm"):
        if proc in report:
            assert not _alive(report[proc]["pid"]), f"{proc} pid {report[proc]['pid']} alive"


# -- table sets (exported once per module) ----------------------------------------------------
def _tables(tmp_path_factory, spec, name, routing="min"):
    """``fabroute tables``: the files land in DIR/ib."""
    out = tmp_path_factory.mktemp(name) / "tables"
    assert main(["tables", spec, "--routing", routing, "--formats", "json,ib",
                 "--out", str(out)]) == 0
    return out


def _ib_export(tmp_path_factory, spec, name, routing, lmc=0):
    """``fabroute ib export``: the files land in DIR itself."""
    out = tmp_path_factory.mktemp(name) / "ib"
    assert main(["ib", "export", spec, "--routing", routing, "--lmc", str(lmc),
                 "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def sf5(tmp_path_factory):
    return _tables(tmp_path_factory, "slimfly:q=5", "sf5")


@pytest.fixture(scope="module")
def df(tmp_path_factory):
    return _ib_export(tmp_path_factory, "dragonfly:p=2,a=4,h=2", "df", "min")


CASES = {   # name: (spec, routing, lmc, export layout)
    "sf5-min": ("slimfly:q=5", "min", 0, "tables"),
    "df-min": ("dragonfly:p=2,a=4,h=2", "min", 0, "ib"),
    "dsnf32-dsnf": ("dsnf:n=32", "dsnf", 0, "ib"),
    "sf5-val3h-lmc2": ("slimfly:q=5", "val-3h", 2, "ib"),
    "df-val-lmc2": ("dragonfly:p=2,a=4,h=2", "val", 2, "ib"),
    # hosts on the edge switches only: aggregation and core switches have none
    "fattree4-min": ("fattree:k=4", "min", 0, "ib"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_zero_mismatches_lft_sl2vl_path_sl(case, tmp_path_factory, sf5, df):
    spec, routing, lmc, layout = CASES[case]
    if case == "sf5-min":
        d = sf5
    elif case == "df-min":
        d = df
    else:
        d = _ib_export(tmp_path_factory, spec, case, routing, lmc)
    rep = ib_apply.apply(d)
    _assert_stopped(rep)
    files = d / "ib" if layout == "tables" else d
    g = json.loads((files / "guids.json").read_text())
    n, h = len(g["switches"]), len(g["hosts"])
    assert rep["lmc"] == lmc == g["lmc"]
    # every switch, every LID (switch LIDs once, host LIDs 2^LMC times)
    assert rep["lft"]["entries"] == n * (n + h * 2 ** lmc)
    assert rep["lft"]["switches_read"] == n and rep["lft"]["switches_missing"] == 0
    # every (in, out) pair of every switch, plus every CA port
    assert rep["sl2vl"]["entries"] == sum((s["num_ports"] + 1) * len(s["ports"])
                                          for s in g["switches"]) + h
    assert rep["readback"]["sl2vl_smps"] == rep["sl2vl"]["entries"]
    # every (source HCA, other HCA, offset) and (source HCA, switch) pair: no sampling
    assert rep["path_sl"]["entries"] == rep["path_sl"]["pairs_total"] \
        == h * ((h - 1) * 2 ** lmc + n)
    assert not rep["path_sl"]["sampled"] and rep["path_sl"]["no_rule"] == 0
    for kind in ("lft", "sl2vl", "path_sl"):
        assert rep[kind]["mismatches"] == 0 and rep[kind]["first_mismatches"] == [], kind
    assert rep["mismatches"] == 0 and rep["ok"]
    assert rep["opensm"]["tables_configured"] and rep["opensm"]["plugin"].startswith("ready")
    # the SLs / VLs read back are the exported ones: Valiant layers use SL > 0, MIN does not
    sls = {int(k) for k in rep["path_sl"]["sls_read"]}
    assert (sls != {0}) == (lmc > 0), rep["path_sl"]["sls_read"]
    assert len(rep["sl2vl"]["vls_read"]) >= 2       # VL 0 from hosts, VL >= 1 from switches


# -- negative controls: one edited entry in a copy, handed to OpenSM, compared with the original
def _tamper_lft(files: Path, out: Path):
    """Copy lfts.dump to ``out`` with one entry changed to another network port of that
    switch; returns (switch GUID, LID, old port, new port)."""
    g = json.loads((files / "guids.json").read_text())
    sw = g["switches"][7]
    host = next(h for h in g["hosts"] if h["switch"] != sw["id"])
    lid = host["lid"]
    net_ports = [p["port"] for p in sw["ports"] if "switch" in p]
    lines = (files / "lfts.dump").read_text().splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.startswith("Unicast lids")
                 and f" guid {sw['guid']} " in l)
    k = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"0x{lid:04x} "))
    old = int(lines[k].split()[1])
    new = next(p for p in net_ports if p != old)
    lines[k] = re.sub(r"^(0x[0-9a-f]+) \d+", rf"\g<1> {new:03d}", lines[k])
    out.write_text("".join(lines))
    return sw["guid"], lid, old, new


def test_negative_control_lft_reports_exactly_the_tampered_entry(sf5, tmp_path):
    guid, lid, old, new = _tamper_lft(sf5 / "ib", tmp_path / "tampered.dump")
    rep = ib_apply.apply(sf5, load=tmp_path / "tampered.dump")   # compared against the original
    _assert_stopped(rep)
    assert rep["lft"]["mismatches"] == 1 and rep["mismatches"] == 1 and not rep["ok"]
    assert rep["lft"]["first_mismatches"] == [{"switch": guid, "name": f"S-{guid[2:]}",
                                               "lid": lid, "expected": old, "actual": new}]
    assert rep["sl2vl"]["mismatches"] == rep["path_sl"]["mismatches"] == 0


def test_negative_control_sl2vl_reports_exactly_the_tampered_entry(df, tmp_path):
    """One VL of one (in, out) row of one switch, in a copy the plugin loads."""
    lines = (df / "sl2vl.dump").read_text().splitlines(keepends=True)
    sw = next(i for i, l in enumerate(lines) if l.startswith("Switch 0x"))
    sw = next(i for i in range(sw + 1, len(lines)) if lines[i].startswith("Switch 0x"))  # 2nd
    guid = lines[sw].split()[1].rstrip(",")
    k = next(i for i in range(sw + 1, len(lines)) if re.match(r"^5\s+2\s+:", lines[i]))
    head, _, tail = lines[k].partition(":")
    vls = [int(x) for x in tail.split()]
    new = list(vls)
    new[3] = (vls[3] + 1) % IB_DATA_VLS              # SL 3 of row (in 5, out 2)
    lines[k] = f"{head}:" + "".join(f" {v:<2d}" for v in new) + "\n"
    (tmp_path / "sl2vl.dump").write_text("".join(lines))
    rep = ib_apply.apply(df, load_sl2vl=tmp_path / "sl2vl.dump")
    _assert_stopped(rep)
    assert rep["sl2vl"]["mismatches"] == 1 and rep["mismatches"] == 1 and not rep["ok"]
    [m] = rep["sl2vl"]["first_mismatches"]
    assert (m["node"], m["in"], m["out"], m["sls"]) == (guid, 5, 2, [3])
    assert m["expected"] == vls and m["actual"] == new


def test_negative_control_path_sl_reports_exactly_the_tampered_pair(df, tmp_path):
    """A rule placed before the others gives one (src, dst, offset) another SL."""
    g = json.loads((df / "guids.json").read_text())
    src, dst = g["hosts"][3], g["hosts"][40]
    text = (df / "path-sl.txt").read_text()
    (tmp_path / "path-sl.txt").write_text(f"{src['port_guid']} {dst['port_guid']} 0 5\n" + text)
    rep = ib_apply.apply(df, load_path_sl=tmp_path / "path-sl.txt")
    _assert_stopped(rep)
    assert rep["path_sl"]["mismatches"] == 1 and rep["mismatches"] == 1 and not rep["ok"]
    [m] = rep["path_sl"]["first_mismatches"]
    assert (m["src"], m["dst"], m["slid"], m["dlid"], m["offset"]) == \
        (src["port_guid"], dst["port_guid"], src["lid"], dst["lid"], 0)
    assert (m["expected"], m["actual"]) == (0, 5)


def test_cli_exit_0_and_json_report(sf5, capsys):
    assert main(["ib", "apply", str(sf5), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["mismatches"] == 0 and rep["lft"]["switches"] == 50
    assert rep["readback"]["processes"] == 1
    _assert_stopped(rep)


def test_path_sample_is_deterministic_and_covers_sources_destinations_offsets(tmp_path_factory,
                                                                              df):
    ts = load_ib_files(df)
    ts.lmc = 2                       # the arithmetic only: 72 HCAs x (71 x 4 + 36) = 23 040
    pairs, total, k = ib_apply.path_pairs(ts, max_paths=3_000)
    assert total == 72 * (71 * 4 + 36) and k == 8 and len(pairs) <= 3_000 + 72
    assert np.array_equal(pairs, ib_apply.path_pairs(ts, max_paths=3_000)[0])
    assert {i for i, _, _ in pairs} == set(range(72))
    assert {j for _, j, _ in pairs} == set(range(72 + 36))
    assert {o for _, _, o in pairs} == {0, 1, 2, 3}
    assert all(i != j for i, j, _ in pairs)


# -- bad input: one line on stderr, exit 2, nothing started ------------------------------------
def _one_line_exit_2(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len([l for l in err.splitlines() if l.strip()]) == 1, err
    return err


def test_bad_input_exit_2_before_starting_anything(sf5, df, tmp_path, capsys):
    assert "is not a directory" in _one_line_exit_2(capsys, "ib", "apply", str(tmp_path / "no"))
    json_only = tmp_path / "json-only"
    assert main(["tables", "slimfly:q=5", "--routing", "min", "--formats", "json",
                 "--out", str(json_only)]) == 0
    capsys.readouterr()
    assert "holds no InfiniBand export" in _one_line_exit_2(capsys, "ib", "apply", str(json_only))
    no_sl2vl = tmp_path / "no-sl2vl"
    shutil.copytree(df, no_sl2vl)
    (no_sl2vl / "sl2vl.dump").unlink()
    assert "lacks sl2vl.dump" in _one_line_exit_2(capsys, "ib", "apply", str(no_sl2vl))

    sw3 = "0x02fab00100000003"
    cases = [  # (file in sf5/ib, edit, expected words)
        ("lfts.dump", lambda t: t.replace(f"guid {sw3} ", "guid 0x02fab001000000ff ", 1),
         "not in this fabric"),
        ("lfts.dump", lambda t: re.sub(r"(?m)^(0x0002) 005", r"\1 099", t, count=1),
         "beyond its 11 ports"),
        ("lfts.dump", lambda t: re.sub(rf"(?s)Unicast lids [^\n]* guid {sw3} .*?(?=Unicast)",
                                       "", t, count=1), "have no LFT section"),
        ("sl2vl.dump", lambda t: t.replace(f"Switch {sw3},", "Switch 0x02fab001000000ff,", 1),
         "is not in this fabric"),
        ("sl2vl.dump", lambda t: re.sub(r"(?m)^11  5   :", "12  5   :", t, count=1),
         "port 12 is beyond its 11 ports"),
        ("sl2vl.dump", lambda t: re.sub(rf"(?s)Switch {sw3},.*?(?=Switch)", "", t, count=1),
         f"switch {sw3} (S-02fab00100000003) has no SL2VL section"),
        ("sl2vl.dump", lambda t: re.sub(r"(?m)^(0   1   : )0 ", r"\g<1>9 ", t, count=1),
         "VL 9 is beyond the 8 data VLs"),
        ("path-sl.txt", lambda t: "0x02fab002000000a1 0x0badc0de00000001 * 1\n" + t,
         "destination 0x0badc0de00000001 is no port of this fabric"),
        ("path-sl.txt", lambda t: "* * 1 1\n" + t, "LMC 0 gives offsets 0..0"),
        ("path-sl.txt", lambda t: t + "group 0x0badc0de00000001 0\n",
         "group of 0x0badc0de00000001, which is no port of this fabric"),
        ("path-sl.txt", lambda t: t + "row 0 12x4\n", "is no 'group port_guid group' or 'row"),
        ("path-sl.txt", lambda t: t + "group 0x02fab002000000a1 0\ngroup 0x02fab002000000a1 1\n",
         "each listed once"),
        ("guid2lid", lambda t: "0x0badc0de00000001 0x0100 0x0100\n" + t, "no port of this fabric"),
    ]
    for k, (name, edit, needle) in enumerate(cases):
        d = edited_copy(sf5, tmp_path / f"bad-{k}", f"ib/{name}", edit)
        assert needle in _one_line_exit_2(capsys, "ib", "apply", str(d)), (name, needle)

    # files of another fabric: Slim Fly tables (50 switches) in a Dragonfly directory (36)
    mixed = tmp_path / "mixed"
    shutil.copytree(df, mixed)
    for name, needle in (("sl2vl.dump", "switch 0x02fab00100000024 is not in this fabric"),
                         ("lfts.dump", "switch 0x02fab00100000024 is not in this fabric"),
                         ("guids.json", "describe different fabrics")):
        shutil.copy(sf5 / "ib" / name, mixed / name)
        assert needle in _one_line_exit_2(capsys, "ib", "apply", str(mixed)), name
    assert ib_processes() == []


def test_lft_gaps_no_port_and_foreign_lids_are_bad_input(sf5, tmp_path, capsys):
    """OpenSM's file engine sets an LID the file omits to 255 and the comparison skips 255 on
    both sides, so a gap would pass unnoticed: ib apply and verify refuse it, an explicit 255
    and a LID nobody owns before starting anything."""
    g = json.loads((sf5 / "ib" / "guids.json").read_text())
    host, sw3 = g["hosts"][17], g["switches"][3]
    lid = f"0x{host['lid']:04x}"

    def in_sw3(edit):
        def apply_edit(t):
            head, sec = t.split(f" guid {sw3['guid']} ", 1)
            new = edit(sec)
            assert new != sec
            return head + f" guid {sw3['guid']} " + new
        return apply_edit

    cases = [
        (in_sw3(lambda t: re.sub(rf"(?m)^{lid} .*\n", "", t, count=1)),
         f"switch {sw3['guid']} has no entry for LID {lid} ({host['name']}) and 0 more; "
         f"expected one for each of the 250 LIDs in guids.json"),
        (in_sw3(lambda t: re.sub(rf"(?m)^{lid} \d+", f"{lid} 255", t, count=1)),
         f"switch {sw3['guid']} LID {lid} -> port 255 (no port); expected a port 0..11"),
        (in_sw3(lambda t: t.replace("\n0x0001 ", "\n0x0fff 005 # stray\n0x0001 ", 1)),
         f"switch {sw3['guid']} LID 0x0fff belongs to no port of this fabric"),
        (in_sw3(lambda t: t.replace("\n0x0001 ", "\n0xc001 005\n0x0001 ", 1)),
         "'0xc001 005': expected a unicast LID (at most 0xBFFF) and a port 0..255"),
    ]
    for k, (edit, needle) in enumerate(cases):
        d = edited_copy(sf5, tmp_path / f"lft-{k}", "ib/lfts.dump", edit)
        assert needle in _one_line_exit_2(capsys, "ib", "apply", str(d)), needle
        # to verify the edit is a failed verification: the file is not what the proven tables
        # give (manifest), and the reader names the defect
        code = main(["verify", str(d)])
        err = capsys.readouterr().err
        assert code == 1 and "lfts.dump: line" in err and needle in err, err
    assert ib_processes() == []


def test_lmc_the_lid_space_cannot_hold_is_bad_input(tmp_path_factory, capsys):
    """Slim Fly q=7: 98 switches, 588 HCAs; LMC 7 needs 588 x 128 LIDs > 0xBFFF."""
    d = _ib_export(tmp_path_factory, "slimfly:q=7", "sf7", "min")
    capsys.readouterr()
    g = json.loads((d / "guids.json").read_text())
    g["lmc"] = 7
    (d / "guids.json").write_text(json.dumps(g))
    err = _one_line_exit_2(capsys, "ib", "apply", str(d))
    assert "LMC 7 needs LIDs up to 0x" in err and "0xBFFF" in err and "LMC 6 fits" in err


def test_missing_gcc_is_a_clear_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))            # no gcc on it
    monkeypatch.setenv("FABROUTE_CACHE", str(tmp_path / "cache"))   # nothing built yet
    with pytest.raises(BadInput, match=r"gcc not found.*apt-get install .*gcc"):
        ib_apply.build_tools()


def test_tools_are_built_once_per_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("FABROUTE_CACHE", str(tmp_path))
    d = ib_apply.build_tools()
    assert d.parent == tmp_path / "fabroute" / "opensm" and len(d.name) == 16
    assert (d / "libfabroute_osm.so").is_file() and (d / "fabroute_ibread").is_file()
    mtime = (d / "libfabroute_osm.so").stat().st_mtime_ns
    assert ib_apply.build_tools() == d and (d / "libfabroute_osm.so").stat().st_mtime_ns == mtime


# -- failures of the started processes: log tails, everything stopped -------------------------
def test_ibsim_start_failure_reports_log_and_stops(sf5, tmp_path, capsys):
    d = tmp_path / "small"
    shutil.copytree(sf5, d)
    g = json.loads((d / "ib" / "guids.json").read_text())
    g["ibsim_limits"]["S"] = 10                  # ibsim refuses the 11th switch
    (d / "ib" / "guids.json").write_text(json.dumps(g))
    assert main(["ib", "apply", str(d), "--json"]) == 1
    out, err = capsys.readouterr()
    rep = json.loads(out)
    assert "ibsim exited" in rep["error"] and not rep["ok"]
    assert any("no more switches" in l for l in rep["log_tail"])
    assert "opensm" not in rep
    _assert_stopped(rep)


def test_opensm_start_failure_reports_log_and_stops_both(df, tmp_path, capsys):
    d = tmp_path / "nohost"
    shutil.copytree(df, d)
    g = json.loads((d / "guids.json").read_text())
    g["hosts"][0]["name"] = "no-such-node"       # OpenSM's SIM_HOST: ibsim refuses it
    (d / "guids.json").write_text(json.dumps(g))
    assert main(["ib", "apply", str(d), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["error"].startswith("opensm exited") and not rep["ok"]
    assert any("unknown host" in l and "no-such-node" in l for l in rep["log_tail"])
    _assert_stopped(rep)
