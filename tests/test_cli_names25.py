"""Issue 25, names: every printed topology name is a SPEC of the same fabric, a name carries
every parameter that shapes the fabric, a table directory is taken where a SPEC is, one
routing vocabulary for every command (``fabroute routings``), the SPEC grammar in
``topology --help`` and the README, and the bad inputs of the issue (``dsnf:n=3``, an empty
SPEC, non-ASCII or underscored digits, unknown traffic keys).  Small fabrics only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabroute.cli import main
from simulator.config import ROUTINGS as SIM_ROUTINGS
from tablegen.errors import TopologyError
from tablegen.routing.build import build_tables, check_routing
from tablegen.routing.names import ROUTINGS, listing, resolve
from tablegen.topologies.spec import _KEYS, DSNF_MIN_N, GRAMMAR, build
from tablegen.topology import Topology
from tablegen.verify import verify, verify_stored

README = Path(__file__).resolve().parents[1] / "README.md"


def run(capsys, *argv):
    """``fabroute ARGV`` in-process: ``(exit code, stdout, stderr)``; argparse's refusals
    (SystemExit) included."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, needle: str, *argv) -> str:
    """Run ``argv``, which must be bad input: exit 2, one line on stderr holding ``needle``."""
    code, out, err = run(capsys, *argv)
    lines = [l for l in err.splitlines() if l.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], (code, err)
    return lines[0]


def same_fabric(a: Topology, b: Topology) -> bool:
    return a.name() == b.name() and a.to_dict() == b.to_dict()


# -- specs round-trip ---------------------------------------------------------------------------
SAMPLE = ["slimfly:q=5", "slimfly:q=4", "slimfly:q=7,p=2,xi=5", "dragonfly:p=2,a=4,h=2",
          "dragonfly:p=1,a=3,h=1,g=3,arrangement=relative", "dsnf:n=8", "dsnf:n=64",
          "dsnf:n=64,p=3", "dsnf:n=40,hosts=2", "dsnf:n=32,fail=0-1", "torus:x=4,y=5,hosts=2",
          "dsn:n=32", "dsn:n=32,x=2,hosts=0", "dln:n=32,seed=5", "dln:n=24,x=3,hosts=3",
          "slimfly:q=5,fail=0-1+0-4", "torus:x=3,y=4,fail=0-1", "fattree:k=4",
          "fattree:k=6,hosts=2", "fattree:k=4,fail=0-8", "fbfly:k=3,n=3", "fbfly:k=4,n=2,hosts=1",
          "hypercube:d=4", "hypercube:d=3,hosts=0", "jellyfish:n=20,k=3",
          "jellyfish:n=20,k=4,seed=2,hosts=2"]


@pytest.mark.parametrize("spec", SAMPLE)
def test_every_printed_name_is_a_spec_of_the_same_fabric(spec):
    t = build(spec)
    again = build(t.name())
    assert same_fabric(again, t)
    assert np.array_equal(again.links, t.links) and np.array_equal(again.hosts, t.hosts)


@st.composite
def good_specs(draw) -> str:
    """A SPEC of every kind with small admissible values (some not buildable: refused)."""
    kind = draw(st.sampled_from(sorted(_KEYS)))
    vals = {"slimfly": {"q": st.sampled_from([3, 4, 5, 7]), "p": st.integers(1, 3),
                        "xi": st.integers(2, 5)},
            "dragonfly": {"p": st.integers(0, 2), "a": st.integers(1, 4), "h": st.integers(1, 2),
                          "g": st.integers(2, 6),
                          "arrangement": st.sampled_from(["absolute", "relative"])},
            "dsnf": {"n": st.integers(DSNF_MIN_N, 200), "p": st.integers(2, 5),
                     "hosts": st.integers(0, 3)},
            "torus": {"x": st.integers(2, 6), "y": st.integers(2, 6), "hosts": st.integers(0, 3)},
            "dsn": {"n": st.integers(8, 80), "x": st.integers(1, 4), "hosts": st.integers(0, 3)},
            "dln": {"n": st.integers(12, 60), "x": st.integers(2, 4), "seed": st.integers(0, 9),
                    "hosts": st.integers(0, 3)},
            "fattree": {"k": st.sampled_from([3, 4, 6]), "hosts": st.integers(0, 3)},
            "fbfly": {"k": st.integers(1, 4), "n": st.integers(1, 4), "hosts": st.integers(0, 3)},
            "hypercube": {"d": st.integers(0, 5), "hosts": st.integers(0, 3)},
            "jellyfish": {"n": st.integers(4, 30), "k": st.integers(2, 5),
                          "seed": st.integers(0, 9), "hosts": st.integers(0, 3)}}[kind]
    required, optional = _KEYS[kind]
    keys = sorted(required) + draw(st.lists(st.sampled_from(sorted(optional)), unique=True))
    return f"{kind}:" + ",".join(f"{k}={draw(vals[k])}" for k in keys)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(good_specs(), st.integers(0, 10**6))
def test_property_build_of_a_name_is_the_same_fabric(spec, pick):
    try:
        t = build(spec)
    except TopologyError:
        return                  # a drawn combination that does not exist: refused, fine
    if pick % 3 == 0 and len(t.links) > 1:      # now and then with a failed cable
        a, _, b, _ = (int(v) for v in t.links[pick % len(t.links)])
        if a != b:
            try:
                t = build(f"{spec},fail={a}-{b}")
            except TopologyError:
                return          # the failure disconnects the fabric
    assert same_fabric(build(t.name()), t)


def test_dsnf_p_round_trips_and_a_wrong_p_names_both(capsys):
    code, out, _ = run(capsys, "topology", "dsnf:n=64,p=4")
    assert code == 0 and out.startswith("dsnf:n=64,p=4:")
    line = refused(capsys, "p=5", "topology", "dsnf:n=64,p=5")
    assert "n=64" in line and "p=4" in line


# -- a name identifies its fabric ---------------------------------------------------------------
@pytest.mark.parametrize("spec", ["dsnf:n=64", "torus:x=4,y=4", "dsn:n=32", "dln:n=32"])
def test_hosts_are_in_the_name_when_not_the_default(spec):
    one, two = build(spec), build(f"{spec},hosts=2")
    assert one.name() != two.name() and "hosts=2" in two.name() and "hosts" not in one.name()
    assert build(f"{spec},hosts=1").name() == one.name()
    assert int(build(two.name()).hosts.max()) == 2


def _old_named(spec: str) -> Topology:
    """``spec``'s fabric as stored before names carried ``hosts=``."""
    d = build(spec).to_dict()
    d["params"] = {k: v for k, v in d["params"].items() if k != "hosts"}
    return Topology.from_dict(d)


def test_a_table_set_stored_under_an_old_name_still_verifies(capsys, tmp_path):
    from tablegen.exports.files import write_table_set

    old = _old_named("dsnf:n=16,hosts=2")
    assert old.name() == "dsnf:n=16,p=2" and int(old.hosts[0]) == 2
    ts = build_tables(old, "min")
    rep = verify(ts)
    assert rep.ok and verify_stored(ts).ok
    write_table_set(ts, rep, tmp_path / "old", ("json",))
    code, out, err = run(capsys, "verify", tmp_path / "old")
    assert code == 0 and "dsnf:n=16,p=2 min: OK" in out, err
    # the directory's fabric is the hosts=2 one, under the name it was stored with
    code, out, _ = run(capsys, "topology", tmp_path / "old")
    assert code == 0 and out.startswith("dsnf:n=16,p=2: 16 switches, 32 hosts")


def test_a_name_whose_hosts_differ_from_the_stored_ones_is_refused():
    from dataclasses import replace

    d = build("torus:x=4,y=4,hosts=3").to_dict()
    d["params"]["hosts"] = 2            # the name says 2 hosts per switch, the switches 3
    ts = build_tables(build("torus:x=4,y=4,hosts=3"), "min")
    rep = verify_stored(replace(ts, topo=Topology.from_dict(d)))
    assert not rep.ok and any("hosts" in e for e in rep.errors), rep.errors


# -- a table directory where a SPEC is taken ----------------------------------------------------
@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A single set (Slim Fly q=5, val-3h) and a batch (par-3h, ugal-l-ori), JSON only."""
    root = tmp_path_factory.mktemp("names25")
    for argv in (["slimfly:q=5", "--routing", "val-3h", "--out", root / "one"],
                 ["slimfly:q=5", "--routing", "par-3h,ugal-l-ori", "--out", root / "batch"]):
        assert main(["tables", *map(str, argv), "--formats", "json", "--jobs", "1"]) == 0
    return root


def test_topology_and_analyze_take_a_table_directory(capsys, sets):
    for cmd in ("topology", "analyze"):
        want = run(capsys, cmd, "slimfly:q=5")
        for d in ("one", "batch"):
            assert run(capsys, cmd, sets / d) == want


def test_path_takes_a_table_directory_and_its_routing(capsys, sets):
    argv = ["--src", "0", "--dst", "7", "--json"]
    code, out, _ = run(capsys, "path", "slimfly:q=5", "--routing", "val-3h", *argv)
    assert code == 0
    assert run(capsys, "path", sets / "one", *argv) == (0, out, "")
    assert run(capsys, "path", sets / "one", "--routing", "val-3h", *argv) == (0, out, "")
    want = run(capsys, "path", "slimfly:q=5", "--routing", "ugal-l", "--nonmin", "val", *argv)
    assert run(capsys, "path", sets / "batch", "--routing", "ugal-l-ori", *argv) == want
    refused(capsys, "holds val-3h tables", "path", sets / "one", "--routing", "min", *argv)
    refused(capsys, "holds the routings par-3h, ugal-l-ori", "path", sets / "batch",
            "--routing", "min", *argv)
    refused(capsys, "--routing is needed with the SPEC", "path", "slimfly:q=5", *argv)


def test_expand_a_directory_transforms_as_its_spec_does(capsys, tmp_path):
    assert main(["tables", "dsnf:n=24", "--routing", "dsnf", "--formats", "json", "--jobs",
                 "1", "--out", str(tmp_path / "d24")]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "expand", tmp_path / "d24", "--transform", "--json")
    assert code == 0, err
    assert (code, out) == run(capsys, "expand", "dsnf:n=24", "--transform", "--json")[:2]
    diff = json.loads(out)
    assert diff["from"] == "dsnf:n=24,p=2" and diff["to"] == "dsnf:n=24,p=3"


# -- one routing vocabulary ---------------------------------------------------------------------
def test_the_vocabulary_is_the_simulators_and_maps_to_tables():
    assert list(ROUTINGS) == list(SIM_ROUTINGS)
    for name, (tables, nonmin, config) in SIM_ROUTINGS.items():
        r = ROUTINGS[name]
        assert (r.tables, r.nonmin, r.config) == (tables, nonmin, config)
        if not r.simulator_only:
            assert resolve(name) == (tables, nonmin)
            check_routing("slimfly" if name != "dsnf" else "dsnf", *resolve(name))
    assert [r["name"] for r in listing()] == list(ROUTINGS)


def test_tables_take_a_simulator_name_as_its_nonmin_spelling(capsys, tmp_path):
    from tablegen.exports.files import load_table_dir

    for name, argv in (("a", ["--routing", "par-3h"]),
                       ("b", ["--routing", "par", "--nonmin", "val-3h"])):
        assert main(["tables", "slimfly:q=5", *argv, "--formats", "json", "--jobs", "1",
                     "--out", str(tmp_path / name)]) == 0
    a, b = load_table_dir(tmp_path / "a"), load_table_dir(tmp_path / "b")
    assert a.routing == b.routing == "par" and a.params == b.params
    assert a.params["nonmin"] == "val-3h"
    assert all(np.array_equal(a.tables[k], b.tables[k]) for k in a.tables)


@pytest.mark.parametrize("argv,needle", [
    (["--routing", "ugal-l-cr"], "ugal-l-cr is a simulator decision rule on the ugal-l tables; "
                                 "use --routing ugal-l"),
    (["--routing", "ugal-sdn-3h"], "use --routing ugal-l-3h"),
    (["--routing", "min,ugal-g-bh"], "use --routing ugal-l"),
    (["--routing", "par-3h", "--nonmin", "val"], "--routing par-3h means --nonmin val-3h, but "
                                                 "--nonmin val"),
    (["--routing", "par-nta,val,par-nta"], "name a routing twice"),
])
def test_tables_refuse_simulator_names_and_contradictions(capsys, tmp_path, argv, needle):
    refused(capsys, needle, "tables", "slimfly:q=5", *argv, "--out", tmp_path / "X")
    assert not (tmp_path / "X").exists()


def test_routings_lists_every_name_once(capsys):
    code, out, _ = run(capsys, "routings", "--json")
    rows = json.loads(out)["routings"]
    assert code == 0 and [r["name"] for r in rows] == list(SIM_ROUTINGS)
    assert all(r["what"] and r["paper"] and "simulate" in r["commands"] for r in rows)
    assert {r["name"] for r in rows if "tables" in r["commands"]} == {
        n for n, r in ROUTINGS.items() if not r.simulator_only}
    code, out, _ = run(capsys, "routings")
    lines = out.splitlines()
    for name in SIM_ROUTINGS:
        assert sum(l.split()[0] == name for l in lines) == 1


@pytest.mark.parametrize("cmd", [["simulate"], ["sweep"], ["analyze"], ["tables"], ["path"]])
def test_help_points_at_routings_instead_of_listing_them(capsys, cmd):
    code, out, _ = run(capsys, *cmd, "--help")
    assert code == 0 and "fabroute routings" in out and "ugal-g-bh" not in out


# -- the SPEC grammar ---------------------------------------------------------------------------
def test_topology_help_and_readme_give_every_key():
    import subprocess
    import sys

    help_text = subprocess.run([sys.executable, "-m", "fabroute.cli", "topology", "--help"],
                               capture_output=True, text=True, check=True).stdout
    readme = README.read_text()
    for kind, (required, optional) in _KEYS.items():
        assert re.search(rf"\b{kind}:", GRAMMAR) and f"{kind}:" in help_text
        for key in required | optional | {"fail"}:
            assert f"{key}=" in GRAMMAR
            assert re.search(rf"`{kind}:[^`]*\b{key}=", readme) or key == "fail", (kind, key)
    assert "fail=A-B" in help_text and "fail=" in readme and "hosts=" in readme
    assert "fabroute routings" in readme


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,needle", [
    ("dsnf:n=3", f"expected n >= {DSNF_MIN_N}"),
    (f"dsnf:n={DSNF_MIN_N - 1}", "below the smallest DSN-F"),
    ("", "SPEC|DIR: the value is empty"),
    ("  ", "SPEC|DIR: the value is empty"),
    ("slimfly:q=５", "q='５' is not an integer"),
    ("slimfly:q=1_3", "q='1_3' is not an integer"),
    ("torus:x=4,y=٤", "y='٤' is not an integer"),
])
def test_bad_specs_are_one_line(capsys, spec, needle):
    refused(capsys, needle, "topology", spec)


@pytest.mark.parametrize("spec", ["", "  "])
def test_an_empty_spec_says_so_below_the_command_line(spec):
    with pytest.raises(TopologyError, match="topology SPEC is empty"):
        build(spec)


def test_the_smallest_dsnf_builds():
    t = build(f"dsnf:n={DSNF_MIN_N}")
    assert t.n_switches == DSNF_MIN_N and t.params["p"] == 2


@pytest.mark.parametrize("argv,needle", [
    (["simulate", "dragonfly:p=1,a=2,h=1", "--load", "0.1", "--traffic", "worst-case:x=1"],
     "traffic worst-case: unknown key 'x'; expected no keys"),
    (["analyze", "dragonfly:p=1,a=2,h=1", "--throughput-bound", "--traffic", "worst-case:x=1"],
     "unknown key 'x'"),
    (["analyze", "slimfly:q=5", "--throughput-bound", "--traffic", "adversarial:A=2,C=3"],
     "unknown key 'C'; expected A=N, B=N"),
    (["analyze", "slimfly:q=5", "--throughput-bound", "--traffic", "adversarial:A=1_0"],
     "'A=1_0' is not a new A=integer"),
])
def test_unknown_traffic_keys_are_one_line(capsys, argv, needle):
    refused(capsys, needle, *argv)
