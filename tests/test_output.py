"""Crash-safe output: every directory fabroute writes is built beside its target and put in
place in one atomic step, one writer at a time, leftovers of dead writers removed, and never
over a directory fabroute did not write.  Every path here lies inside pytest's tmp_path."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tablegen.errors import BadInput
from tablegen.exports.outdir import check_out_dir, replaced_dir

FABROUTE = str(Path(sys.executable).with_name("fabroute"))


def _tree(d: Path) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def _siblings(d: Path) -> list[str]:
    return sorted(p.name for p in d.parent.iterdir() if p.name.startswith(f".{d.name}."))


def test_a_new_directory_appears_whole_and_replaces_the_old_in_one_step(tmp_path):
    out = tmp_path / "out"
    with replaced_dir(out) as tmp:
        (tmp / "manifest.json").write_text("1")
        assert not out.exists()                   # nothing at OUT until the block ends
    assert _tree(out) == {"manifest.json": hashlib.sha256(b"1").hexdigest()}
    ino = out.stat().st_ino
    with replaced_dir(out) as tmp:
        (tmp / "manifest.json").write_text("2")
        assert (out / "manifest.json").read_text() == "1"    # the old one meanwhile
    assert (out / "manifest.json").read_text() == "2" and out.stat().st_ino != ino
    assert _siblings(out) == []


def test_a_failing_block_leaves_the_old_directory_and_no_leftovers(tmp_path):
    out = tmp_path / "out"
    with replaced_dir(out) as tmp:
        (tmp / "manifest.json").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with replaced_dir(out) as tmp:
            (tmp / "manifest.json").write_text("new")
            raise KeyboardInterrupt
    assert (out / "manifest.json").read_text() == "old" and _siblings(out) == []


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "out"
    with replaced_dir(out):
        with pytest.raises(BadInput, match=rf"another fabroute \(PID {os.getpid()}\)"):
            with replaced_dir(out):
                pass


def test_leftovers_of_dead_writers_go_those_of_live_ones_stay(tmp_path):
    out = tmp_path / "out"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = [out.with_name(f".out.tmp-{dead.pid}"), out.with_name(f".out.old-{dead.pid}")]
    live = out.with_name(f".out.tmp-{os.getppid()}")
    for d in (*stale, live):
        d.mkdir()
        (d / "x").write_text("x")
    with replaced_dir(out) as tmp:
        (tmp / "manifest.json").write_text("1")
    assert not any(d.exists() for d in stale) and live.exists()


@pytest.mark.parametrize("bad, words", [
    ("", "expected a path"), (".", "expected a path"), ("/", "holds the working directory"),
    ("{cwd}", "holds the working directory"), ("{parent}", "holds the working directory"),
    ("{mine}", "fabroute did not write"), ("{file}/x", "is not a directory"),
    ("{long}", "too long"),
])
def test_paths_that_must_not_be_replaced_are_refused(tmp_path, monkeypatch, bad, words):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    (tmp_path / "file").write_text("x")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    path = bad.format(cwd=tmp_path / "cwd", parent=tmp_path, mine=tmp_path / "mine",
                      file=tmp_path / "file", long=tmp_path / ("n" * 250))
    with pytest.raises(BadInput, match=words):
        check_out_dir(path)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


# -- interrupts of real batches ----------------------------------------------------------------
SPEC, ROUTINGS = "dsnf:n=64", "dsnf,min"
# two batches that differ in every routing's directory (OpenFlow files or not), so that a mix
# of the two would show
FORMATS = ("json,openflow", "json")


def _tables(out: Path, formats: str) -> subprocess.Popen:
    return subprocess.Popen([FABROUTE, "tables", SPEC, "--routing", ROUTINGS, "--out",
                             str(out), "--formats", formats, "--jobs", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def interrupt_once(out: Path, rng: random.Random, formats: str) -> None:
    """Start a batch writing ``formats`` over ``out``; deliver one signal (SIGINT, SIGTERM or
    SIGKILL to the parent, or SIGKILL to a forked worker) at a random moment."""
    p = _tables(out, formats)
    time.sleep(rng.uniform(0.0, 2.5))
    target, sig = p.pid, rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
    kids = _children(p.pid)
    if kids and rng.random() < 0.3:
        target, sig = rng.choice(kids), signal.SIGKILL
    try:
        os.kill(target, sig)
    except ProcessLookupError:
        pass
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def reference_trees(tmp: Path) -> dict[str, dict]:
    refs = {}
    for f in FORMATS:
        assert _tables(tmp / f.replace(",", "-"), f).wait(120) == 0
        refs[f] = _tree(tmp / f.replace(",", "-"))
    assert refs[FORMATS[0]] != refs[FORMATS[1]]
    return refs


def test_interrupted_batches_leave_the_old_or_the_new_set_and_no_leftovers(tmp_path):
    refs = reference_trees(tmp_path)
    out = tmp_path / "out"
    assert _tables(out, FORMATS[0]).wait(120) == 0
    rng = random.Random(13)
    for k in range(12):
        interrupt_once(out, rng, FORMATS[(k + 1) % 2])
        time.sleep(0.2)                          # a killed parent's workers die with it
        assert _tree(out) in refs.values(), f"interrupt {k}: a partial or mixed set"
    assert _tables(out, FORMATS[0]).wait(120) == 0  # the next run cleans up after the dead
    assert _siblings(out) == [] and _tree(out) == refs[FORMATS[0]]
