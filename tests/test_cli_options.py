"""Every option of every sub-command, given a bad value, ends in one line on stderr and exit
code 2, before any work and with nothing left behind; Ctrl-C ends in exit code 130 with no
traceback and nothing half-written (issue 25).

The sub-commands and their options are read from the parser itself, so a new option is
covered the day it is added (and a new sub-command fails :func:`test_every_command_has_a_base`
until it gets a base command line here).  Bad values come by category — numbers, choices,
output paths, input paths, SPECs, free text — drawn by hypothesis from lists of the ways a
user gets them wrong (Unicode digits, ``1_3``, ``nan``, a path under ``/proc``, a name longer
than the filesystem allows, a file where a directory belongs, unknown keys).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabroute.cli import main, parser
from tablegen.exports.outdir import kind_of

SET = "@SET"        # a proven table set made once for the module
OUT = "out-dir"     # an output path that does not exist yet

#: a valid command line per sub-command: (positionals, options); each option is replaced by
#: a bad value in turn
BASE = {
    ("topology",): (["slimfly:q=5"], []),
    ("routings",): ([], []),
    ("reconcile",): (["nofile.json", "slimfly:q=5"], []),
    ("draw",): (["slimfly:q=5"], ["--out", "fabric.svg"]),
    ("cost",): (["slimfly:q=5"], ["--seeds", "2", "--diameter-seeds", "1"]),
    ("design",): ([], ["--endpoints", "200", "--families", "slimfly", "--seeds", "2",
                       "--diameter-seeds", "1"]),
    ("completion",): ([], []),
    ("tables",): (["slimfly:q=5"], ["--routing", "min", "--formats", "json", "--out", OUT]),
    ("verify",): ([SET], []),
    ("path",): (["slimfly:q=5"], ["--routing", "min", "--src", "0", "--dst", "1"]),
    ("analyze",): (["slimfly:q=5"], []),
    ("expand",): (["dsnf:n=32"], []),
    ("diff",): ([SET, SET], []),
    ("compare",): ([], ["--sizes", "128", "--out", OUT]),
    ("demo",): ([], ["--out", OUT]),
    ("controller",): ([SET], []),
    ("load",): (["ctl.sock", SET], []),
    ("pki",): ([OUT], ["--dpids", "1-4"]),
    ("emulate",): (["slimfly:q=5"], ["--routing", "min"]),
    ("ib", "export"): (["slimfly:q=5"], ["--routing", "min", "--out", OUT]),
    ("ib", "import"): ([SET], ["--out", OUT]),
    ("ib", "apply"): ([SET], []),
    ("ib", "update"): ([SET, SET], []),
    ("ib", "compare"): (["slimfly:q=5"], []),
    ("simulate",): (["slimfly:q=5"], ["--routing", "min", "--load", "0.1"]),
    ("sweep",): (["slimfly:q=5"], ["--routing", "min", "--loads", "0.1", "--workers", "1"]),
    ("growth",): ([], ["--experiment", "simulator/experiments/dsnf-growth.toml"]),
}

BAD_NUMBERS = ["５", "1_3", "٣", "nan", "inf", "-inf", "1e999", "0x10", "", " ", "++1",
               "1.0.0", "one", "99999999999999999999999999"]
BAD_CHOICES = ["zigzag", "", "MIN ", "min,", "☃"]
BAD_SPECS = ["", " ", "slimfly", "slimfly:q=５", "slimfly:q=1_3", "slimfly:q=5,zz=1",
             "slimfly:q=6", "mesh:x=4", "dragonfly:p=2,a=4", "dsnf:n=3", "slimfly:q=5,q=7",
             "torus:x=4,y=4,hosts=-1", "slimfly:q=" + "9" * 40]
LONG = "n" * 300
#: output paths that cannot be made: a pseudo filesystem, a name too long, below a file
BAD_OUTPUTS = ["/proc/fabroute-x/y", LONG, "afile/sub", "", f"{'d/' * 3}{LONG}"]
#: input paths that are not what the option reads
BAD_INPUTS = ["no-such-path", "afile", "emptydir", "/proc/fabroute-x", LONG, ""]
BAD_TEXT = ["", "zz", "1_3", "?,?", LONG, "a:b:c", "-1"]

OUTPUT_DESTS = {"out", "log", "status", "decisions", "store", "control", "install", "discover",
                "put_right", "fabric_out"}
INPUT_DESTS = {"dir", "dir_a", "dir_b", "old", "new", "tls", "experiment", "config", "socket"}
#: free-text options with the values a user could mean that are valid (so not "bad")
TEXT_OK = {
    "name": {"zz", "1_3", "-1"},       # pki: any file name
    "engine": set(BAD_TEXT) - {""},    # ib import: recorded as given
    "class": set(),
}


def _commands(p=None, path=()):
    p = p or parser()
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _commands(sp, path + (name,))
            return
    yield path, p


COMMANDS = dict(_commands())


def _options():
    """``(command, action)`` for every option and positional that takes a value."""
    for cmd, p in COMMANDS.items():
        for a in p._actions:
            if a.nargs == 0 or isinstance(a, argparse._HelpAction):
                continue
            yield cmd, a


def _category(cmd, a) -> list[str]:
    if a.choices:
        return BAD_CHOICES
    if a.type is not None and a.type is not str:
        return BAD_NUMBERS
    if a.dest == "spec":
        return BAD_SPECS
    if a.dest in OUTPUT_DESTS or (cmd == ("pki",) and a.dest == "dir"):
        return BAD_OUTPUTS
    if a.dest in INPUT_DESTS:
        return BAD_INPUTS
    if a.dest == "routing":
        return BAD_CHOICES
    ok = TEXT_OK.get(a.dest, set()) | ({""} if getattr(a, "empty_ok", False) else set())
    return [v for v in BAD_TEXT if v not in ok]


OPTIONS = [(cmd, a.dest, a.option_strings[0] if a.option_strings else None)
           for cmd, a in _options()]


def _argv(cmd, dest, flag, value, table_set: str) -> list[str]:
    """The base command line of ``cmd`` with option ``dest`` set to ``value``."""
    pos, opts = ([table_set if x == SET else x for x in part] for part in BASE[cmd])
    if flag is None:
        k = [a.dest for a in COMMANDS[cmd]._actions if not a.option_strings].index(dest)
        pos = pos[:k] + [value] + pos[k + 1:]
    else:
        strings = next(a.option_strings for a in COMMANDS[cmd]._actions if a.dest == dest)
        at = [i for i, x in enumerate(opts) if x in strings]
        if at:
            opts[at[0] + 1] = value
        else:
            opts.append(f"{flag}={value}")
    # "--" keeps a positional that starts with "-" a positional
    return [*cmd, *opts, "--", *pos] if pos else [*cmd, *opts]


class Tripwire(RuntimeError):
    """Work started although an option was bad: a process, a server or a simulation."""


@pytest.fixture(scope="module")
def table_set(tmp_path_factory):
    d = tmp_path_factory.mktemp("set") / "sf5"
    assert main(["tables", "slimfly:q=5", "--routing", "min", "--out", str(d)]) == 0
    return str(d)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A working directory with a file, an empty directory and the experiment files; every
    way of starting work raises :class:`Tripwire`."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "emptydir").mkdir()
    exp = tmp_path / "simulator" / "experiments"
    exp.mkdir(parents=True)
    src = Path(__file__).resolve().parents[1] / "simulator" / "experiments"
    for f in src.glob("*.toml"):
        (exp / f.name).write_text(f.read_text())
    monkeypatch.chdir(tmp_path)

    def trip(*_a, **_k):
        raise Tripwire("work started on a bad option")

    monkeypatch.setattr(subprocess.Popen, "__init__", trip)
    import controller.openflow.launcher as launcher
    import simulator.run as sim_run

    monkeypatch.setattr(launcher, "run", trip)
    monkeypatch.setattr(sim_run, "simulate", trip)
    return tmp_path


def _tree(root: Path) -> set:
    return {(str(p.relative_to(root)), p.is_dir()) for p in root.rglob("*")}


def _run(argv, capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def test_every_command_has_a_base():
    assert set(COMMANDS) == set(BASE), "give each sub-command a base command line in BASE"


@pytest.mark.parametrize("cmd,dest,flag", OPTIONS,
                         ids=[f"{' '.join(c)}:{f or d}" for c, d, f in OPTIONS])
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_bad_value_is_one_line_and_exit_2(cmd, dest, flag, data, sandbox, table_set,
                                            capsys):
    action = next(a for a in COMMANDS[cmd]._actions if a.dest == dest)
    value = data.draw(st.sampled_from(_category(cmd, action)), label="value")
    argv = _argv(cmd, dest, flag, value, table_set)
    before, kept = _tree(sandbox), _tree(Path(table_set))
    code, err = _run(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (argv, code, err)
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err
    assert _tree(sandbox) == before, argv
    assert _tree(Path(table_set)) == kept


#: commands that do real work for a while, interrupted at a random moment
INTERRUPTED = [
    ["tables", "slimfly:q=7", "--routing", "min,val,ugal-l", "--out", "X"],
    ["ib", "export", "slimfly:q=7", "--routing", "val", "--lmc", "1", "--out", "X"],
    ["compare", "--sizes", "128,256,512", "--out", "X"],
    ["simulate", "slimfly:q=5", "--routing", "min", "--load", "0.2"],
]


@pytest.mark.parametrize("argv", INTERRUPTED, ids=[" ".join(a[:2]) for a in INTERRUPTED])
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(after=st.floats(0.3, 4.0))
def test_ctrl_c_is_exit_130_without_traceback_or_leftovers(argv, after, tmp_path):
    """SIGINT to the whole process group of the installed ``fabroute``, as a terminal sends
    it: exit 130 and one line, or (when the command had already finished) exit 0 with its
    complete output.  From 0.3 s
    on: in its first tens of milliseconds the interpreter is still importing ``site``, whose
    own traceback on Ctrl-C no program can prevent."""
    work = tmp_path / f"w{time.monotonic_ns()}"
    work.mkdir()
    p = subprocess.Popen([str(Path(sys.executable).parent / "fabroute"), *argv], cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True,
                         env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1])))
    time.sleep(after)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=120)
    err = err.decode()
    assert "Traceback" not in err and p.returncode in (0, 130), err
    left = sorted(x.name for x in work.iterdir())
    assert left in ([], ["X"]), left     # no temporary directory, no lock file
    if p.returncode == 130:
        assert err.rstrip().splitlines()[-1].startswith("fabroute: interrupted"), err
    if left:    # whole: put in place before the signal came (or the command finished)
        assert kind_of(work / "X") is not None
        if argv[0] in ("tables", "ib"):
            assert main(["verify", str(work / "X")]) == 0
