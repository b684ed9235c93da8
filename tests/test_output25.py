"""Issue 25, one output convention: readable text on stdout by default, the same JSON keys as
before with ``--json``; logs on stderr without source markers; the simulator's compiled code
checked for signals between chunks of cycles (a ``-j 1`` sweep ends on SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabroute.cli import main
from tablegen.output import num, render

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_numbers_and_nested_dicts_read_as_text():
    assert [num(3.3015873015873014), num(0.000123456), num(7.0), num(12345), num(None),
            num(True)] == ["3.302", "0.000123", "7", "12,345", "-", "yes"]
    assert render({"degree": {"min": 4, "max": 5}, "aspl": 1.85714, "l": [1, 2]}) == [
        "degree:", "  min: 4", "  max: 5", "aspl  : 1.857", "l     : 1, 2"]


def test_analyze_text_is_aligned_and_rounded(capsys):
    code, out, _ = run(capsys, "analyze", "slimfly:q=5")
    assert code == 0
    assert "{" not in out and "'" not in out          # no Python dicts
    assert "aspl     : 1.857" in out and "  mean: 7" in out
    code, out, _ = run(capsys, "analyze", "slimfly:q=5", "--json")
    doc = json.loads(out)
    assert doc["aspl"] == pytest.approx(1.857, abs=1e-3) and doc["degree"]["min"] == 7


def test_tables_text_by_default_json_on_request(capsys, tmp_path):
    code, out, err = run(capsys, "tables", "slimfly:q=5", "--routing", "min", "--out",
                         tmp_path / "a")
    assert code == 0, err
    assert out.startswith("min: verified (min ≤2 hops; 2 VCs), ") and "{" not in out
    # logs: no source marker (cli.py:231), no worker count for one routing
    assert ".py:" not in err and "worker" not in err
    code, out, err = run(capsys, "tables", "slimfly:q=5", "--routing", "min,val", "--out",
                         tmp_path / "b", "--json", "--jobs", "2")
    assert code == 0, err
    assert {json.loads(line)["routing"] for line in out.splitlines()} == {"min", "val"}
    assert "(2 workers)" in err


def test_ib_export_and_import_print_text_or_json(capsys, tmp_path):
    code, out, err = run(capsys, "ib", "export", "slimfly:q=5", "--routing", "val-3h", "--lmc",
                         "1", "--out", tmp_path / "x")
    assert code == 0, err
    assert out.splitlines()[0].startswith("val-3h on slimfly:q=5") and "offset 1 val-3h" in out
    code, out, err = run(capsys, "ib", "import", tmp_path / "x", "--out", tmp_path / "i",
                         "--json")
    assert code == 0 and json.loads(out)["tables"] == 2, err


def test_simulate_text_and_json(capsys):
    argv = ("simulate", "slimfly:q=5", "--load", "0.2", "--set", "warmup_cycles=100",
            "--set", "measure_cycles=200")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and out.startswith("slimfly:q=5") and "latency      avg " in out
    code, out, _ = run(capsys, *argv, "--json")
    assert json.loads(out)["status"] == "ok"


def test_chunked_engine_runs_the_cycles_one_call_runs():
    """The run in chunks of a few cycles (Python between them) equals one call per phase,
    counter for counter: the engine's state is all in the arrays."""
    import simulator.run as R
    from simulator.config import SimConfig
    from tablegen.topologies.spec import build

    for spec, routing, cfg, load in [
            ("dragonfly:p=2,a=4,h=2", "ugal-l", {"flow_control": "wormhole",
                                                 "packet_size": 4}, 0.3),
            ("slimfly:q=5", "par", {"vc_allocation": "per-packet"}, 0.95)]:
        got = []
        for chunk in (37, 10**9):
            old, R.CHUNK_CYCLES = R.CHUNK_CYCLES, chunk
            try:
                ts, over = R.tables_for(build(spec), routing)
                r = R.simulate(ts, SimConfig().replace(**cfg, **over), "uniform", load, 3)
            finally:
                R.CHUNK_CYCLES = old
            got.append(json.dumps(r, sort_keys=True, default=str))
        assert got[0] == got[1], (spec, routing)
    assert not R.compile_pending()        # compiled above: the cache is warm


def test_sigterm_ends_a_one_process_sweep_mid_point(tmp_path):
    """`sweep -j 1` runs its points in this process, in compiled code: SIGTERM mid-point ends
    it within seconds with exit 130, no process and no store of this run left behind."""
    out = tmp_path / "sw"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    p = subprocess.Popen([sys.executable, "-m", "fabroute.cli", "sweep", "slimfly:q=5",
                          "--routing", "min", "--loads", "0.5", "-j", "1", "-q",
                          "--set", "measure_cycles=10000000", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        store = Path(f"{out}.points.jsonl")
        deadline = time.monotonic() + 120
        while not store.exists():       # opened just before the point starts
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.1)
        time.sleep(2)                   # into the compiled loop (10^7 cycles: minutes)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130 and took < 10, (p.returncode, took, err)
    assert "Traceback" not in err and "interrupted" in err
    with pytest.raises(ProcessLookupError):
        os.killpg(p.pid, 0)             # no worker of its group left
    assert sorted(x.name for x in tmp_path.iterdir()) == []
