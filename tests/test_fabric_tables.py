"""``tables --fabric`` / ``ib export --fabric`` (tablegen.fabrics.bind, exports.fabric_files):
a fabric as cabled routed on the plan's model with its absent cables failed, the IB files
keyed by its GUIDs and ports, the fabric bound in the manifest and proven by ``verify``; bad
input in one line, nothing written."""

import hashlib
import json

import pytest

from fabroute.cli import main
from tablegen.fabrics.bind import bind, check_binding
from tablegen.fabrics.cabled import cabled
from tablegen.topologies.spec import build

# slimfly:q=5 cabled with seed 6, 2 removed + 1 moved: `reconcile` names exactly those today
SPEC, SEED = "slimfly:q=5", 6


@pytest.fixture(scope="module")
def sf5_cabled():
    return cabled(build(SPEC), seed=SEED, remove=2, move=1)


def _truth_pairs(c) -> list:
    """The planned cables left out or moved, as pairs of fabric switch ids."""
    fid = {p: g for g, p in c.switch.items()}
    return sorted(tuple(sorted((fid[x["cable"][0]], fid[x["cable"][2]])))
                  for x in c.removed + c.moved)


def test_bind_fails_exactly_the_absent_cables(sf5_cabled):
    b, topo = bind(sf5_cabled.fabric, build(SPEC))
    got = sorted(tuple(sorted((b.switch[s], b.switch[t]))) for s, t in b.failed)
    assert got == _truth_pairs(sf5_cabled)
    assert (b.summary["missing"], b.summary["moved"], b.summary["extra"]) == (2, 1, 0)
    assert "fail" in topo.params and check_binding(b, sf5_cabled.fabric, topo) == []
    # a map that aliases two planned ports onto one fabric port is refused
    s = 0
    p1, p2 = sorted(b.port[s])[:2]
    b.port[s][p2] = b.port[s][p1]
    assert any("distinct ports" in e for e in check_binding(b, sf5_cabled.fabric, topo))


def test_tables_on_the_fabric_are_bound_and_verified(tmp_path, capsys, sf5_cabled):
    fab, out = tmp_path / "fabric.json", tmp_path / "t"
    sf5_cabled.fabric.save(fab)
    assert main(["tables", SPEC, "--fabric", str(fab), "--routing", "min",
                 "--formats", "json,ib", "--out", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    rec = man["exports"]["fabric"]
    assert rec["sha256"] == hashlib.sha256((out / "fabric.json").read_bytes()).hexdigest()
    assert (rec["missing"], rec["moved"], rec["switches"]) == (2, 1, 50)
    guids = json.loads((out / "ib" / "guids.json").read_text())
    assert {s["guid"] for s in guids["switches"]} == set(sf5_cabled.fabric.switches)
    assert {h["port_guid"] for h in guids["hosts"]} == set(sf5_cabled.fabric.hosts)
    # every switch-switch port in guids.json is a cable of the fabric, in its numbering
    cables = {frozenset(c) for c in sf5_cabled.fabric.cables}
    by_id = {s["id"]: s["guid"] for s in guids["switches"]}
    for s in guids["switches"]:
        for p in s["ports"]:
            if "switch" in p:
                assert frozenset({(s["guid"], p["ib_port"]),
                                  (by_id[p["switch"]], p["peer_port"])}) in cables
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fabric: fabric.json" in text and "OK; failed links" in text
    # another fabric file in its place: the manifest's hash no longer holds, exit 1
    cabled(build(SPEC), seed=SEED).fabric.save(out / "fabric.json")
    assert main(["verify", str(out)]) == 1
    assert "SHA-256" in capsys.readouterr().err


def _one_line_exit_2(capsys, argv, out):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert not out.exists()
    return err[0]


def test_a_fabric_of_another_size_or_kind_is_bad_input(tmp_path, capsys):
    out = tmp_path / "out"
    q7, df = tmp_path / "q7.json", tmp_path / "df.json"
    cabled(build("slimfly:q=7"), seed=1).fabric.save(q7)
    cabled(build("dsnf:n=50"), seed=1).fabric.save(df)
    line = _one_line_exit_2(capsys, ["tables", SPEC, "--fabric", str(q7), "--routing", "min",
                                     "--out", str(out)], out)
    assert "98 switches" in line
    _one_line_exit_2(capsys, ["ib", "export", SPEC, "--fabric", str(df), "--routing", "min",
                              "--out", str(out)], out)


def test_too_far_and_fail_with_fabric_are_bad_input(tmp_path, capsys):
    out, far = tmp_path / "out", tmp_path / "far.json"
    cabled(build(SPEC), seed=2, remove=30).fabric.save(far)
    line = _one_line_exit_2(capsys, ["ib", "export", SPEC, "--fabric", str(far), "--routing",
                                     "min", "--out", str(out)], out)
    assert "at most" in line
    ok = tmp_path / "ok.json"
    cabled(build(SPEC), seed=2).fabric.save(ok)
    line = _one_line_exit_2(capsys, ["tables", SPEC, "--fabric", str(ok), "--fail", "0:1",
                                     "--routing", "min", "--out", str(out)], out)
    assert "--fail" in line
