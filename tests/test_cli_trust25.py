"""Issue 25, "wrong or destroyed results": outputs of one kind are never replaced by another
without --force (nor a directory fabroute did not write, even with it), refused before any
work; ``verify`` proves every routing of a batch; ``diff`` says "same" only for the same
table sets; InfiniBand files carry a non-minimal routing's paths or say MIN only, and
``verify`` never says OK for IB files that were not written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabroute.cli import main
from tablegen.exports.outdir import kind_of

SF, DF = "slimfly:q=5", "dragonfly:p=2,a=4,h=2"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _tree(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """``tables slimfly:q=5 --routing min,val-3h,ugal-l`` (JSON and IB only, for speed)."""
    out = tmp_path_factory.mktemp("b") / "sf5"
    assert main(["tables", SF, "--routing", "min,val-3h,ugal-l", "--formats", "json,ib",
                 "--out", str(out)]) == 0
    return out


# -- outputs are safe ---------------------------------------------------------------------------
def test_ib_export_over_a_batch_is_refused_before_any_work(batch, capsys, monkeypatch):
    before = _tree(batch)
    import tablegen.cli

    def no_tables(*_a, **_k):
        raise AssertionError("tables built before the --out check")

    monkeypatch.setattr(tablegen.cli, "build_and_verify", no_tables)
    code, out, err = run(capsys, "ib", "export", SF, "--routing", "min", "--out", batch)
    assert code == 2 and out == ""
    assert "a batch of routings" in err and "--force" in err and len(err.splitlines()) == 1
    assert _tree(batch) == before and kind_of(batch) == "batch"


def test_kinds_are_recorded_and_each_command_replaces_its_own(tmp_path, capsys):
    one, ib = tmp_path / "one", tmp_path / "ib"
    for _ in range(2):      # the same command again replaces its output
        assert run(capsys, "tables", SF, "--routing", "min", "--formats", "json",
                   "--out", one)[0] == 0
        assert run(capsys, "ib", "export", SF, "--routing", "min", "--out", ib)[0] == 0
    assert json.loads((one / "manifest.json").read_text())["kind"] == "table-set"
    assert json.loads((ib / "manifest.json").read_text())["kind"] == "ib-export"
    assert (kind_of(one), kind_of(ib)) == ("table-set", "ib-export")
    # a table set over an IB export and the other way round: refused, then --force
    code, _, err = run(capsys, "tables", SF, "--routing", "min", "--out", ib)
    assert code == 2 and "an InfiniBand export" in err
    code, _, err = run(capsys, "ib", "export", SF, "--routing", "min", "--out", one)
    assert code == 2 and "a table set" in err
    assert run(capsys, "ib", "export", SF, "--routing", "min", "--out", one, "--force")[0] == 0
    assert kind_of(one) == "ib-export" and (one / "lfts.dump").is_file()


def test_a_single_set_and_a_batch_do_not_replace_each_other(batch, tmp_path, capsys):
    one = tmp_path / "one"
    assert run(capsys, "tables", SF, "--routing", "min", "--formats", "json",
               "--out", one)[0] == 0
    code, _, err = run(capsys, "tables", SF, "--routing", "min,val-3h", "--formats", "json",
                       "--out", one)
    assert code == 2 and "holds a table set" in err and "not a batch" in err
    code, _, err = run(capsys, "tables", SF, "--routing", "min", "--out", batch)
    assert code == 2 and "holds a batch" in err
    assert json.loads((batch / "routings.json").read_text())["kind"] == "batch"


def test_a_directory_fabroute_did_not_write_is_refused_even_with_force(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for argv in (["tables", SF, "--routing", "min"], ["ib", "export", SF, "--routing", "min"],
                 ["ib", "import", tmp_path], ["compare", "--sizes", "64"]):
        code, _, err = run(capsys, *argv, "--out", mine, "--force")
        assert code == 2 and "fabroute did not write" in err, argv
    assert _tree(mine) == {"notes.txt": b"keep me"}


def test_compare_refuses_a_table_set_and_records_its_kind(tmp_path, capsys):
    one, cmp = tmp_path / "one", tmp_path / "cmp"
    assert run(capsys, "tables", SF, "--routing", "min", "--formats", "json",
               "--out", one)[0] == 0
    code, _, err = run(capsys, "compare", "--sizes", "64", "--out", one)
    assert code == 2 and "a table set" in err and (one / "manifest.json").is_file()
    assert run(capsys, "compare", "--sizes", "64", "--out", cmp)[0] == 0
    assert kind_of(cmp) == "compare"
    assert json.loads((cmp / "compare.json").read_text())["kind"] == "compare"


def test_older_outputs_without_a_kind_are_inferred(batch, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(batch, old)
    (old / "routings.json").unlink()          # a batch written before routings.json
    for r in ("min", "val-3h", "ugal-l"):
        m = old / r / "manifest.json"
        doc = json.loads(m.read_text())
        del doc["kind"]
        m.write_text(json.dumps(doc))
    assert kind_of(old / "min") == "table-set" and kind_of(old) == "batch"


# -- verify on a batch ------------------------------------------------------------------------
def test_verify_proves_every_routing_of_a_batch(batch, capsys):
    code, out, err = run(capsys, "verify", batch)
    assert code == 0, err
    for r in ("min", "val-3h", "ugal-l"):
        assert f"slimfly:q=5,p=4,xi=2 {r}: OK" in out
    assert "3 of 3 routings verified" in out
    code, out, _ = run(capsys, "verify", batch, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] and doc["kind"] == "batch"
    assert list(doc["routings"]) == ["min", "val-3h", "ugal-l"]
    assert all(d["ok"] and d["files"]["ok"] for d in doc["routings"].values())


def test_verify_of_a_batch_fails_when_one_routing_fails(batch, tmp_path, capsys):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(batch, bad)
    with open(bad / "val-3h" / "tables.json", "a") as f:
        f.write(" ")
    shutil.rmtree(bad / "ugal-l")
    code, out, err = run(capsys, "verify", bad)
    assert code == 1
    assert "slimfly:q=5,p=4,xi=2 min: OK" in out and "1 of 3 routings verified" in out
    assert "FAILED: val-3h, ugal-l" in out and "ugal-l: not written" in err
    doc = json.loads(run(capsys, "verify", bad, "--json")[1])
    assert not doc["ok"] and doc["routings"]["min"]["ok"]
    assert not doc["routings"]["val-3h"]["files"]["ok"] and not doc["routings"]["ugal-l"]["ok"]


# -- diff means what it says ------------------------------------------------------------------
@pytest.mark.parametrize("a, b, what", [
    ("min", "val-3h", {"routing", "classes", "num_vcs"}),
    ("val-3h", "ugal-l", {"routing", "classes", "params"}),
])
def test_diff_of_two_routings_is_not_same(batch, capsys, a, b, what):
    code, out, _ = run(capsys, "diff", batch / a, batch / b)
    assert code == 0 and "the table sets differ" in out and "the same table sets" not in out
    code, out, _ = run(capsys, "diff", batch / a, batch / b, "--json")
    d = json.loads(out)
    assert d["same"] is False and d["relation"] == "same"
    assert {x["what"] for x in d["differences"]} == what
    assert d["order"]["consistency"] == "two-phase"        # another routing: never ordered
    for key in ("entries", "tables", "vcs", "cables", "switches", "order", "routing"):
        assert key in d                                    # the keys expand/controller use


def test_diff_of_a_set_with_itself_is_same(batch, capsys):
    code, out, _ = run(capsys, "diff", batch / "ugal-l", batch / "ugal-l", "--json")
    d = json.loads(out)
    assert code == 0 and d["same"] is True and d["differences"] == []
    assert d["order"]["consistency"] == "ordered"


def test_set_differences_sees_a_changed_class_definition(batch):
    from dataclasses import replace

    from tablegen.exports.files import load_table_dir
    from tablegen.update import set_differences

    ts = load_table_dir(batch / "val-3h")
    other = load_table_dir(batch / "val-3h")
    other.classes = [replace(other.classes[0], max_hops=4)]
    other.alternatives = other.alternatives.copy()
    other.alternatives[0, 1] ^= 1
    got = {d["what"]: d for d in set_differences(ts, other)}
    assert set(got) == {"class val-3h", "alternatives"} and got["alternatives"]["changed"] == 1


# -- InfiniBand files are honest --------------------------------------------------------------
def test_a_non_minimal_routing_exports_its_paths_by_default(batch, capsys):
    ib = json.loads((batch / "val-3h" / "manifest.json").read_text())["exports"]["ib"]
    assert ib["lmc"] == 1 and "min_only" not in ib
    assert json.loads((batch / "min" / "manifest.json").read_text())["exports"]["ib"]["lmc"] == 0
    doc = json.loads(run(capsys, "verify", batch / "ugal-l", "--json")[1])
    kinds = [lay["kind"] for lay in doc["ib"]["layers"]]
    assert kinds == ["min", "val-3h"] and doc["ib"]["ok"] and not doc["ib"]["min_only"]


def test_ib_export_defaults_to_the_routings_paths_and_lmc_0_says_min_only(tmp_path, capsys):
    code, out, err = run(capsys, "ib", "export", SF, "--routing", "val-3h", "--out",
                         tmp_path / "a", "--json")
    assert code == 0 and "MIN only" not in err
    assert json.loads(out.splitlines()[-1])["lmc"] == 1
    code, out, err = run(capsys, "ib", "export", SF, "--routing", "val-3h", "--lmc", "0",
                         "--out", tmp_path / "b")
    assert code == 0 and "carries MIN only" in err
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert "minimal paths only" in man["exports"]["ib"]["min_only"]
    code, out, err = run(capsys, "verify", tmp_path / "b")
    assert code == 0 and "carries MIN only" in out and "carry MIN only" in err


def test_tables_at_lmc_0_of_an_older_set_say_min_only(batch, tmp_path, capsys):
    """An IB export at LMC 0 whose manifest has no min_only (older outputs): verify infers
    it from the LMC and the routing's classes."""
    code, _, _ = run(capsys, "ib", "export", DF, "--routing", "ugal-l", "--lmc", "0",
                     "--out", tmp_path / "u")
    assert code == 0
    doc = json.loads(run(capsys, "verify", tmp_path / "u", "--json")[1])
    assert "val-group" in doc["ib"]["min_only"] and doc["ib"]["lmc"] == 0


def test_verify_never_says_ok_for_ib_files_not_written(tmp_path, capsys):
    out = tmp_path / "par"
    code, _, err = run(capsys, "tables", DF, "--routing", "par", "--formats", "json,ib",
                       "--out", out)
    assert code == 0 and "ib export skipped" in err and not (out / "ib").exists()
    man = json.loads((out / "manifest.json").read_text())
    assert man["exports"]["ib"] is None and "in transit" in man["exports"]["skipped"]["ib"]
    code, text, _ = run(capsys, "verify", out)
    ib_line = next(x for x in text.splitlines() if "InfiniBand" in x)
    assert code == 0 and "not exported" in ib_line and "OK" not in ib_line
    assert "in transit" in ib_line
    doc = json.loads(run(capsys, "verify", out, "--json")[1])
    assert doc["ib"]["exported"] is False and "skipped" in doc["ib"]["not_exported"]
    # --formats without ib: not exported either, and why
    out2 = tmp_path / "json"
    assert run(capsys, "tables", SF, "--routing", "min", "--formats", "json",
               "--out", out2)[0] == 0
    code, text, _ = run(capsys, "verify", out2)
    assert "InfiniBand: not exported (no InfiniBand files were asked for" in text
    assert "InfiniBand (LMC" not in text
