"""``fabroute ib update OLD NEW``: a REAL OpenSM 3.3.23 (engine ``fabroute``) on a REAL ibsim
fabric runs OLD's tables, the running subnet is grown (ibsim console ``Link``) or degraded
(``Unlink``), NEW's tables are installed and OpenSM re-sweeps (``kill -HUP``, or its own
sweep on the link-state traps); LFTs, SL2VL tables and path SLs are read back before and
after.  No mocks and no skips: a missing tool fails the test (``make test`` installs them)."""

import json

import numpy as np
import pytest
from conftest import ib_processes

from emulation.ibsim.update import lft_changes, reach, update
from fabroute.cli import main
from tablegen.exports.infiniband.read import LftTable, load_ib_files, parse_lfts
from tablegen.routing.build import build_tables
from tablegen.topologies.dsnf import add_nodes, build_dsnf
from tablegen.topologies.failures import without_links
from tablegen.topologies.slimfly import build_slimfly
from tablegen.update import table_diff

pytestmark = [pytest.mark.ib, pytest.mark.usefixtures("ib_tools")]


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert ib_processes() == [], "ibsim/opensm processes of this test are still running"


_SETS: dict = {}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """``fabroute tables SPEC --routing R [--fail A:B] --formats ib``, once per module."""
    def get(spec, routing, fail=None):
        key = (spec, routing, fail)
        if key not in _SETS:
            out = tmp_path_factory.mktemp("t") / "tables"
            args = ["tables", spec, "--routing", routing, "--formats", "ib", "--out", str(out)]
            assert main(args + (["--fail", fail] if fail else [])) == 0
            _SETS[key] = out
        return _SETS[key]
    return get


def _lids_per_switch(topo) -> int:
    hosts = np.unique(topo.hosts)
    assert len(hosts) == 1, "the predictions below assume as many hosts at every switch"
    return 1 + int(hosts[0])          # LMC 0: the switch's LID and one per host


def _assert_clean(rep):
    assert rep["ok"], rep.get("error")
    for when in ("before", "after"):
        assert rep[when]["mismatches"] == 0
        for kind in ("lft", "sl2vl", "path_sl"):
            assert rep[when][kind]["mismatches"] == 0, (when, kind)
    assert rep["mismatches"] == 0
    assert rep["changes_agree_with_files"]
    assert rep["reach"]["undelivered"] == 0
    assert rep["reach"]["pairs"] == rep["reach"]["sources"] * rep["reach"]["lids"] \
        - rep["reach"]["lids"]                    # every source to every LID but its own


# -- growth -------------------------------------------------------------------------------------
@pytest.mark.parametrize("trigger", ["hup", "trap"])
def test_dsnf_64_to_72_grows_live_with_zero_mismatches(tables, trigger):
    old, new = tables("dsnf:n=64", "dsnf"), tables("dsnf:n=72", "dsnf")
    rep = update(old, new, trigger=trigger)
    _assert_clean(rep)
    f = rep["fabric"]
    assert (f["new_switches"], f["new_hosts"], f["cables_removed"]) == (8, 8, 0)
    _, cables = add_nodes(build_dsnf(64), 8)
    assert f["cables_added"] == len(cables.added) + 8          # + the 8 new hosts' cables
    assert f["ibsim_commands"]["Link"] == f["cables_added"]
    # the old LIDs stay (NEW's own plan would renumber all 64 hosts), new ones above 128
    assert rep["lids"] == dict(rep["lids"], top=144, new_ports=16, old_ports_new_plan_moves=64)
    # what OpenSM changed on the 64 old switches, read back before and after: no old entry,
    # one entry per new LID (8 switches + 8 hosts) at each; the new switches route all 144
    assert (rep["changed"], rep["removed"], rep["added"]) == (0, 0, 64 * 16)
    assert (rep["new_switches"], rep["new_switch_entries"]) == (8, 8 * 144)
    assert len(rep["opensm_changed"]["by_switch"]) == 64
    assert all(c["added"] == 16 for c in rep["opensm_changed"]["by_switch"].values())
    assert rep["predicted_by_files"] == {k: rep["opensm_changed"][k]
                                         for k in rep["predicted_by_files"]}
    assert rep["reach"]["pairs"] == 144 * 143
    assert rep["after"]["lft"]["entries"] == 72 * 144
    assert rep["sweep"]["plugin"].startswith("reloaded: 144 SL2VL nodes")
    assert rep["sweep"]["heavy_sweeps"] >= 1
    assert ("trap" in rep["sweep"]["trigger"]) == (trigger == "trap")


def test_dsnf_min_grows_by_a_cabinet_and_opensm_reprograms_sl2vl(tables):
    """64 -> 80 (+16, a cabinet) with minimal routing: the table diff of tablegen.update
    predicts the LFT entries; the SL count changes, so the plugin's reloaded SL2VL rows are
    what OpenSM must program on the old switches (else 'after' would count them)."""
    rep = update(tables("dsnf:n=64", "min"), tables("dsnf:n=80", "min"))
    _assert_clean(rep)
    a, b = build_dsnf(64), add_nodes(build_dsnf(64), 16)[0]
    d = table_diff(build_tables(a, "min"), build_tables(b, "min"))
    k = _lids_per_switch(b)
    old_added = sum(t["min"]["added"] for u, t in d["entries"]["per_switch"].items()
                    if int(u) < 64)
    assert rep["changed"] == k * d["tables"]["min"]["changed"] == 0
    assert rep["added"] == k * old_added == 64 * 32
    assert (rep["new_switches"], rep["new_switch_entries"]) == (16, 16 * 160)
    assert rep["sl2vl_rows_changed_on_old_nodes"] > 0
    rows = sum(len(r) for _, r in load_ib_files(tables("dsnf:n=80", "min")).sl2vl.values())
    assert rep["after"]["sl2vl"]["entries"] == rows == 4080
    assert rep["after"]["sl2vl"]["mismatches"] == 0


# -- link failures ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, build, fail", [
    ("slimfly:q=5", lambda: build_slimfly(5), (0, 1)),
    ("dsnf:n=64", lambda: build_dsnf(64), (0, 1)),
])
def test_a_link_unlinked_in_ibsim_then_degraded_tables_route_every_pair(tables, spec, build,
                                                                       fail):
    old, new = tables(spec, "min"), tables(spec, "min", f"{fail[0]}:{fail[1]}")
    rep = update(old, new)
    _assert_clean(rep)
    f = rep["fabric"]
    assert (f["cables_removed"], f["cables_added"], f["new_switches"]) == (1, 0, 0)
    assert f["ibsim_commands"] == dict(f["ibsim_commands"], Unlink=1, Link=0)
    assert rep["lids"]["old_ports_new_plan_moves"] == 0
    # OpenSM changed exactly the entries the table diff predicts: every (switch, destination
    # switch) whose next switch changed, once per LID at that destination
    topo = build()
    d = table_diff(build_tables(topo, "min"), build_tables(without_links(topo, [fail]), "min"))
    assert d["tables"]["min"]["changed"] > 0
    assert rep["changed"] == _lids_per_switch(topo) * d["tables"]["min"]["changed"]
    assert (rep["added"], rep["removed"], rep["new_switches"]) == (0, 0, 0)
    n = topo.n_switches + topo.n_hosts
    assert rep["reach"]["pairs"] == n * (n - 1)


def test_the_walk_catches_the_old_tables_on_the_degraded_wiring(tables):
    """Negative control of ``reach``: the intact fabric's LFTs on the wiring without the link
    leave pairs undelivered; the degraded LFTs deliver all."""
    old = load_ib_files(tables("slimfly:q=5", "min"))
    new = load_ib_files(tables("slimfly:q=5", "min", "0:1"))
    broken = reach(old.lfts, new)
    assert broken["undelivered"] > 0 and broken["first_undelivered"]
    assert reach(new.lfts, new)["undelivered"] == 0
    assert reach(old.lfts, old)["undelivered"] == 0


def _lft_table(entries: dict[int, dict[int, int]]) -> LftTable:
    text = "".join(f"Unicast lids [0-9] of switch Lid {g} guid 0x{g:016x} ('s{g}'):\n"
                   + "".join(f"0x{lid:04x} {p:03d}\n" for lid, p in e.items())
                   for g, e in entries.items())
    return parse_lfts(text.encode().splitlines(), "test")


def test_lft_changes_counts_each_kind():
    before = _lft_table({1: {1: 0, 2: 3, 3: 4, 4: 5}})
    after = _lft_table({1: {1: 0, 2: 3, 3: 6, 4: 255, 9: 2}, 2: {1: 1, 9: 0}})
    c = lft_changes(before, after, {1}, {1: 1, 2: 2})
    assert (c["changed"], c["added"], c["removed"]) == (1, 1, 1)
    assert (c["new_switches"], c["new_switch_entries"], c["switches_touched"]) == (1, 2, 1)
    assert c["by_switch"]["0x0000000000000001"]["ports"] == {"2": 1, "6": 1}
    assert [e["kind"] for e in c["first"]] == ["changed", "removed", "added"]


# -- command line and bad input -----------------------------------------------------------------
def test_cli_exit_0_and_json_report(tables, capsys):
    old, new = tables("dsnf:n=64", "dsnf"), tables("dsnf:n=72", "dsnf")
    capsys.readouterr()          # what building the sets printed (when this test builds them)
    rc = main(["ib", "update", str(old), str(new), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    rep = json.loads(out)
    assert {k: rep[k] for k in ("changed", "added", "new_switches", "mismatches", "ok")} == \
        {"changed": 0, "added": 1024, "new_switches": 8, "mismatches": 0, "ok": True}


def test_bad_input_exit_2_one_line_nothing_started(tables, tmp_path, capsys):
    d64, d72 = tables("dsnf:n=64", "dsnf"), tables("dsnf:n=72", "dsnf")
    sf = tables("slimfly:q=5", "min")
    lmc1 = tmp_path / "lmc1"
    assert main(["ib", "export", "dsnf:n=72", "--routing", "min", "--lmc", "1",
                 "--out", str(lmc1)]) == 0
    capsys.readouterr()
    cases = [
        ([str(d72), str(d64)], "is not in NEW"),                 # shrinking: nodes go away
        ([str(sf), str(d64)], "slimfly fabric"),                 # another fabric
        ([str(d64), str(lmc1)], "LMC"),
        ([str(d64), str(tmp_path / "none")], "is not a directory"),
        ([str(d64), str(d72), "--trigger", "poll"], "invalid choice"),
        ([str(d64), str(d72), "--discover", str(tmp_path / "no" / "f.txt")], "no directory"),
    ]
    for args, msg in cases:
        try:
            rc = main(["ib", "update", *args])
        except SystemExit as e:                  # argparse's errors exit from the parser
            rc = e.code
        assert rc == 2, args
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err, (args, err)
        assert ib_processes() == []
