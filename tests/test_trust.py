"""What is installed is what was verified: a table set written by ``fabroute tables`` (and
``fabroute ib export``) is bound to its proof by its manifest, ``verify`` recomputes what the
set claims and derives every export again, and the controller serves nothing else.  The
corruption suite edits one file at a time, every way a user or an accident would."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fabroute.cli import main
from tablegen.exports.files import load_table_dir, prove_table_dir
from tablegen.exports.manifest import MANIFEST


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """Slim Fly q=5 VAL_3h: every format (IB LMC 0) and an ``ib export`` at LMC 2."""
    d = tmp_path_factory.mktemp("trust")
    assert main(["tables", "slimfly:q=5", "--routing", "val-3h", "--out", str(d / "set")]) == 0
    assert main(["ib", "export", "slimfly:q=5", "--routing", "val-3h", "--lmc", "2",
                 "--out", str(d / "ib")]) == 0
    return d


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _failure(d: Path) -> str:
    """The errors :func:`prove_table_dir` (what the controller runs) reports for ``d``,
    one line each, or the one-line refusal of reading it at all."""
    try:
        ts, rep, files = prove_table_dir(d)
    except ValueError as e:
        return str(e)
    if not rep.ok:
        return "\n".join(rep.errors)
    return "\n".join(files["errors"]) if not files["ok"] else ""


def test_written_sets_verify_and_list_every_file(sets, capsys):
    for name in ("set", "ib"):
        d = sets / name
        man = json.loads((d / MANIFEST).read_text())
        on_disk = {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}
        assert set(man["files"]) == on_disk - {MANIFEST}
        assert _failure(d) == ""
        assert main(["verify", str(d)]) == 0
    assert man["exports"]["ib"] == {"lmc": 2, "seed": 1, "prefix": ""}
    assert "derived again from the proven tables: OK" in capsys.readouterr().out


# -- the corruption suite ------------------------------------------------------------------
def _truncate(p: Path):
    p.write_bytes(p.read_bytes()[: max(0, p.stat().st_size // 2)])


def _flip(p: Path):
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0x01
    p.write_bytes(bytes(b))


def _delete(p: Path):
    p.unlink()


def _fifo(p: Path):
    p.unlink()
    os.mkfifo(p)


def _loop(p: Path):
    p.unlink()
    p.symlink_to(p.name)        # a link to itself: ELOOP


def _dev_zero(p: Path):
    p.unlink()
    p.symlink_to("/dev/zero")


CORRUPTIONS = [_truncate, _flip, _delete, _fifo, _loop, _dev_zero]
# one file of every kind each set holds (the whole list: benchmarks/bench_corruption.py)
FILES = {"set": ["topology.json", "tables.json", "tables.npz", "verify.json", MANIFEST,
                 "openflow/s0000.flows", "openflow/s0049.flows", "openflow/manifest.json",
                 "ib/fabric.net", "ib/guids.json", "ib/guid2lid", "ib/lfts.dump",
                 "ib/sl2vl.dump", "ib/path-sl.txt"],
         "ib": ["topology.json", "tables.npz", MANIFEST, "fabric.net", "guids.json",
                "guid2lid", "lfts.dump", "sl2vl.dump", "path-sl.txt"]}


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.strip("_"))
def test_every_kind_of_file_corrupted_every_way_fails_naming_it(sets, tmp_path, corrupt):
    for name, files in FILES.items():
        for rel in files:
            d = _copy(sets / name, tmp_path / f"{name}-{rel.replace('/', '-')}")
            corrupt(d / rel)
            why = _failure(d)
            assert why, f"{corrupt.__name__} of {name}/{rel} passed"
            named = why.split("; expected")[0]     # the file, not the list of what was expected
            assert Path(rel).name in named, f"{corrupt.__name__} of {name}/{rel}: {why}"
            shutil.rmtree(d)


def _edit_text(p: Path, old: str, new: str, count: int = 1):
    s = p.read_text()
    assert old in s, f"{old!r} not in {p}"
    p.write_text(s.replace(old, new, count))


def _npz_meta(d: Path, edit):
    """Rewrite ``tables.npz`` with its metadata edited (what a hand-edited set would hold)."""
    npz = d / "tables.npz"
    with np.load(npz) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    edit(meta)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with zipfile.ZipFile(npz, "w") as zf:
        for k, a in arrays.items():
            with zf.open(f"{k}.npy", "w") as f:
                np.lib.format.write_array(f, a, allow_pickle=False)


def test_meaningful_edits_fail(sets, tmp_path):
    """Edits that keep every file well-formed: an out port or a VC in an OpenFlow file, an SL
    in path-sl.txt, an SL2VL row, a looser bound or another routing name in the tables'
    metadata, a rewired link.  Each fails, naming the file."""
    def case(name, rel, edit):
        d = _copy(sets / name, tmp_path / f"case{len(list(tmp_path.iterdir()))}")
        edit(d)
        why = _failure(d)
        assert why and Path(rel).name in why.split("; expected")[0], f"{rel}: {why!r}"

    def of_port(d):
        p = d / "openflow/s0007.flows"
        line = next(x for x in p.read_text().splitlines() if "output:" in x)
        port = int(line.rsplit("output:", 1)[1])
        _edit_text(p, line, line.replace(f"output:{port}", f"output:{port % 7 + 5}"))

    def of_vc(d):
        p = d / "openflow/s0007.flows"
        line = next(x for x in p.read_text().splitlines() if "set_field:2->vlan_pcp" in x)
        _edit_text(p, line, line.replace("set_field:2->vlan_pcp", "set_field:1->vlan_pcp"))

    def path_sl(d):     # one path's SL, every SL 0 -> 5 would be the same edit many times
        p = d / "path-sl.txt"
        lines = p.read_text().splitlines()
        i = next(i for i, x in enumerate(lines) if x.startswith("0x"))
        lines[i] = lines[i][:-1] + str((int(lines[i][-1]) + 5) % 8)
        p.write_text("\n".join(lines) + "\n")

    def sl2vl(d):       # one (in, out) row: SL 1's VL 2 -> 3
        p = d / "sl2vl.dump"
        lines = p.read_text().splitlines()
        i = next(i for i, x in enumerate(lines) if ": 1  2 " in x)
        lines[i] = lines[i].replace(": 1  2 ", ": 1  3 ", 1)
        p.write_text("\n".join(lines) + "\n")

    def bound(d):
        _npz_meta(d, lambda m: m["classes"][0].update(max_hops=m["classes"][0]["max_hops"] + 1))

    def renamed(d):
        _npz_meta(d, lambda m: m.update(routing="min"))

    def rewired(d):
        t = json.loads((d / "topology.json").read_text())
        (a, pa, b, pb), (c, pc, e, pe) = t["links"][0], t["links"][-1]
        t["links"][0], t["links"][-1] = [a, pa, e, pe], [c, pc, b, pb]
        (d / "topology.json").write_text(json.dumps(t))

    case("set", "openflow/s0007.flows", of_port)
    case("set", "openflow/s0007.flows", of_vc)
    case("ib", "path-sl.txt", path_sl)
    case("ib", "sl2vl.dump", sl2vl)
    case("set", "tables.npz", bound)
    case("set", "tables.npz", renamed)
    case("set", "topology.json", rewired)


def test_verify_and_controller_refuse_a_corrupted_set(sets, tmp_path, capsys, monkeypatch):
    from os_ken.base import app_manager

    def listen(*_a, **_k):
        raise AssertionError("the controller started listening")

    monkeypatch.setattr(app_manager.AppManager, "run_apps", listen)
    d = _copy(sets / "set", tmp_path / "set")
    p = d / "openflow/s0003.flows"
    p.write_text(p.read_text().replace("output:", "output:1", 1))
    capsys.readouterr()
    assert main(["verify", str(d)]) == 1
    err = capsys.readouterr().err
    assert "s0003.flows: line" in err and "differs from what the proven tables give" in err
    assert main(["controller", str(d), "--listen", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s0003.flows" in err[0] and "fails verification" in err[0]
    (d / MANIFEST).unlink()
    assert main(["controller", str(d), "--listen", "127.0.0.1:1"]) == 2
    assert "manifest.json: missing" in capsys.readouterr().err


def test_loading_refuses_what_is_no_regular_file_before_reading(sets, tmp_path):
    d = _copy(sets / "set", tmp_path / "set")
    _fifo(d / "topology.json")
    with pytest.raises(ValueError, match="topology.json: a FIFO"):
        load_table_dir(d)
