"""Issue 25, help and front door: every argument of every sub-command (and of ``ib``'s) has
help text, every ``--help`` exits 0; ``--version``; the completion script and the man page
made from the parsers; a reader that closes the pipe early gets no traceback."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from fabroute.cli import main, parser

ROOT = Path(__file__).resolve().parents[1]


def _commands(p: argparse.ArgumentParser, prefix=()):
    """(words, parser) of every sub-command, nested ones too."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield (*prefix, name), sp
                yield from _commands(sp, (*prefix, name))


COMMANDS = list(_commands(parser()))


def test_walk_finds_every_command():
    names = {" ".join(w) for w, _ in COMMANDS}
    assert {"topology", "tables", "verify", "path", "analyze", "expand", "diff", "compare",
            "demo", "controller", "load", "pki", "emulate", "ib export", "ib import",
            "ib apply", "ib update", "ib compare", "simulate", "sweep", "growth",
            "completion"} <= names


@pytest.mark.parametrize("words,sp", COMMANDS, ids=[" ".join(w) for w, _ in COMMANDS])
def test_every_argument_has_help(words, sp):
    bare = [a.dest if not a.option_strings else "/".join(a.option_strings)
            for a in sp._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and not (a.help or "").strip()]
    assert not bare, f"fabroute {' '.join(words)}: no help for {bare}"


@pytest.mark.parametrize("words,sp", COMMANDS, ids=[" ".join(w) for w, _ in COMMANDS])
def test_help_exits_0(words, sp, capsys):
    with pytest.raises(SystemExit) as e:
        main([*words, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: fabroute " + " ".join(words))
    for a in sp._actions:      # every default worth naming is named
        if a.option_strings and a.default not in (None, False, [], argparse.SUPPRESS) \
                and not isinstance(a, argparse._HelpAction):
            assert "default" in (a.help or "") or f"default: {a.default}" in " ".join(
                out.split()), (words, a.option_strings)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"fabroute {version('fabroute')}\n"


def _fabroute() -> list[str]:
    return [sys.executable, "-m", "fabroute.cli"]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    r = subprocess.run([*_fabroute(), "completion", "--install", str(prefix)],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    return prefix


def test_bash_completion_sourced(installed):
    script = installed / "share/bash-completion/completions/fabroute"
    r = subprocess.run(["bash", "-c", f"source {script} && complete -p fabroute"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "complete" in r.stdout and r.stdout.rstrip().endswith(
        " fabroute"), r.stderr
    # and it completes: the sub-commands after `fabroute `
    r = subprocess.run(["bash", "-c", f"source {script}; COMP_WORDS=(fabroute ''); "
                        "COMP_CWORD=1; COMP_LINE='fabroute '; COMP_POINT=9; "
                        "_shtab_fabroute; printf '%s\\n' \"${COMPREPLY[@]}\""],
                       capture_output=True, text=True)
    assert {"tables", "verify", "simulate", "ib"} <= set(r.stdout.split()), r.stderr


def test_completion_on_stdout(capsys):
    assert main(["completion", "zsh"]) == 0
    assert "#compdef fabroute" in capsys.readouterr().out
    assert main(["completion"]) == 2
    assert "expected one of them" in capsys.readouterr().err


def test_man_page_lists_every_command(installed):
    page = installed / "share/man/man1/fabroute.1"
    text = page.read_text()
    for words, _ in COMMANDS:
        assert f"fabroute {' '.join(words)}" in text, words
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                           env=dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="100"))
        assert r.returncode == 0 and "FABROUTE(1)" in r.stdout
        assert "fabroute ib export" in " ".join(r.stdout.split())


#: a reader that closes the pipe before fabroute writes (the command takes ~1 s to start):
#: the first write fails however short the output
GONE = "(exec <&-; true)"


@pytest.mark.parametrize("pipe", [
    "topology slimfly:q=7 --json | head -c 10",
    f"analyze slimfly:q=5 | {GONE}",
    f"topology slimfly:q=5 --json | {GONE}",
    f"path slimfly:q=5 --routing min --src 0 --dst 7 | {GONE}",
    f"verify {{sf5}} | {GONE}",
])
def test_broken_pipe_is_quiet(pipe, tmp_path):
    cmd, _, reader = pipe.partition(" | ")
    if "{sf5}" in cmd:
        assert main(["tables", "slimfly:q=5", "--routing", "min", "--formats", "json",
                     "--out", str(tmp_path / "sf5")]) == 0
        cmd = cmd.format(sf5=tmp_path / "sf5")
    fab = " ".join(_fabroute())
    r = subprocess.run(["bash", "-c", f"{fab} {cmd} | {reader}; "
                        "echo \"status=${PIPESTATUS[0]}\" >&2"],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert "status=0" in r.stderr, r.stderr
