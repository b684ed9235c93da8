"""Sweeps on Dask with a resumable results store (simulator/cluster.py, simulator/store.py):
a real ``dask scheduler`` and two ``dask worker`` processes run a sweep given by address and
give the same JSON as the same sweep in this process; a sweep SIGKILLed mid-run resumes from
its store (the stored points reused, a torn last line cut off) to the same JSON; a point
that fails is reported while the others finish (exit 1); the key covers every input; a bad
``--scheduler`` is one line and exit code 2.

The tests that start a cluster share one (module fixture): they run in xdist group ``dask``
(``pytest -n 2 --dist loadgroup``)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator import cluster
from simulator.config import SimConfig
from simulator.run import tables_for
from simulator.store import (Store, code_digest, point_inputs, point_key, record,
                             table_digest)
from simulator.sweep import sweep
from tablegen.errors import BadInput
from tablegen.topologies.spec import build

pytestmark = pytest.mark.xdist_group("dask")

BIN = Path(sys.executable).parent
FABROUTE = str(BIN / "fabroute")
DF = "dragonfly:p=2,a=4,h=2"
ROUTINGS = ["min", "val"]
LOADS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]           # 16 points
CFG = {"warmup_cycles": 200, "measure_cycles": 300, "warmup_max_periods": 1}


def _sweep_argv(tmp: Path, out: Path, *extra) -> list[str]:
    cfg = tmp / "small.toml"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in CFG.items()))
    return [FABROUTE, "sweep", DF, "-r", *ROUTINGS, "-t", "uniform", "--loads",
            ",".join(map(str, LOADS)), "-c", str(cfg), "-o", str(out), "--json", *extra]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    """The sweep's JSON, computed in this process without a store (never interrupted)."""
    out = tmp_path_factory.mktemp("ref") / "ref"
    res = sweep(DF, ROUTINGS, "uniform", LOADS, SimConfig(**CFG), workers=1, out=out,
                progress=False, store=False)
    assert len(res["points"]) == 16 and res["failed"] == [] and res["run"]["store"] is None
    assert not list(out.parent.glob("*.jsonl"))
    return out.with_suffix(".json").read_bytes()


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A real ``dask scheduler`` (free port) and two ``dask worker --nthreads 1``, each in a
    session of its own, killed by PID at the end."""
    from distributed import Client

    d = tmp_path_factory.mktemp("dask")
    procs: list[subprocess.Popen] = []

    def start(*argv, name):
        log = open(d / f"{name}.log", "wb")
        procs.append(subprocess.Popen([str(BIN / "dask"), *argv], cwd=d, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    try:
        sf = d / "scheduler.json"
        start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
              "--scheduler-file", str(sf), name="scheduler")
        deadline = time.monotonic() + 30
        while not (sf.exists() and sf.read_text().strip().endswith("}")):
            assert time.monotonic() < deadline and procs[0].poll() is None, \
                (d / "scheduler.log").read_text()[-2000:]
            time.sleep(0.1)
        addr = json.loads(sf.read_text())["address"]
        for i in (1, 2):
            start("worker", addr, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                  "--name", f"w{i}", name=f"w{i}")
        with Client(addr, timeout=10, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=30)
            pids = c.run(os.getpid)                 # worker address -> its PID
        assert sorted(pids.values()) == sorted(p.pid for p in procs[1:])
        yield addr, pids
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)    # the session each was started in
            except ProcessLookupError:
                pass
            p.wait(timeout=10)


def test_sweep_on_a_dask_cluster_equals_the_local_sweep(dask_cluster, reference, tmp_path):
    """The CLI against the scheduler's address: the same JSON byte for byte as the sweep
    run in this process; every point streamed into the store; both workers ran points."""
    addr, pids = dask_cluster
    out = tmp_path / "remote"
    r = subprocess.run(_sweep_argv(tmp_path, out, "--scheduler", addr, "-q"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert (summary["reused"], summary["computed"], summary["failed"]) == (0, 16, [])
    assert out.with_suffix(".json").read_bytes() == reference
    recs = _records(Path(f"{out}.points.jsonl"))
    assert len(recs) == 16 and len({x["key"] for x in recs}) == 16
    ran = {(x["worker"], x["pid"]) for x in recs}
    assert ran == set(pids.items()), "both workers got tasks, and only they"


def test_a_killed_sweep_resumes_from_its_store(reference, tmp_path):
    """SIGKILL a sweep (its process group: the CLI and its local Dask cluster) once the
    store holds 2 points; a torn half record is appended as a crash mid-write would leave
    it.  The re-run reuses every stored point (reported, records untouched, in their first
    order), cuts the torn tail, computes the rest, and writes the same JSON as a sweep
    never interrupted."""
    out = tmp_path / "resumed"
    store = Path(f"{out}.points.jsonl")
    p = subprocess.Popen(_sweep_argv(tmp_path, out, "-j", "2", "-q"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not (store.exists() and store.read_bytes().count(b"\n") >= 2):
            assert p.poll() is None, f"the sweep ended before it was killed: {p.stderr.read()}"
            assert time.monotonic() < deadline, "no 2 points stored in 90 s"
            time.sleep(0.02)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        p.stderr.close()
    for _ in range(50):                 # the killed group is gone (the cluster too)
        left = [d.name for d in Path("/proc").iterdir() if d.name.isdigit() and
                _pgid(d.name) == p.pid]
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"processes of the killed sweep left: {left}"
    assert p.returncode == -signal.SIGKILL and not out.with_suffix(".json").exists()
    data = store.read_bytes()
    kept = data[:data.rfind(b"\n") + 1]         # complete records (a torn one is possible)
    k = kept.count(b"\n")
    assert 2 <= k < 16
    first = kept.splitlines()[0]
    store.write_bytes(kept + first[:len(first) // 2])      # a torn last line

    r = subprocess.run(_sweep_argv(tmp_path, out, "-j", "1", "-q"), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert (summary["reused"], summary["computed"]) == (k, 16 - k)
    assert f"{k} reused from {store}" in r.stderr
    after = store.read_bytes()
    assert after.startswith(kept) and after.count(b"\n") == 16
    assert all(rec["key"] == point_key(rec["inputs"]) for rec in _records(store))
    assert out.with_suffix(".json").read_bytes() == reference
    assert out.with_suffix(".png").stat().st_size > 1000
    assert not list(tmp_path.glob(".*tmp*")), "no temporary file left"
    # a third run computes nothing
    r = subprocess.run(_sweep_argv(tmp_path, out, "-q"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["computed"] == 0
    assert store.read_bytes() == after and out.with_suffix(".json").read_bytes() == reference


def _pgid(pid: str) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def test_failed_points_are_reported_and_the_others_finish(dask_cluster, tmp_path):
    """Tables that cannot be built on the SPEC (``dsnf`` on a Dragonfly: fails on the
    client) and a traffic the other topology lacks (worst-case on ``min@slimfly:q=3``:
    fails in the worker's task): each failed point one line on stderr and an entry of
    ``failed``; MIN's points finish and are stored; exit 1."""
    addr, _ = dask_cluster
    out = tmp_path / "f"
    cfg = tmp_path / "small.toml"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in CFG.items()))
    r = subprocess.run([FABROUTE, "sweep", DF, "-r", "min", "dsnf", "min@slimfly:q=3", "-t",
                        "worst-case", "--loads", "0.1,0.3", "-c", str(cfg), "-o", str(out),
                        "--scheduler", addr, "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("sweep: failed: ")]
    assert len(lines) == 4
    assert sum("dsnf on dragonfly" in x and "needs a dsnf topology" in x for x in lines) == 2
    assert sum("min@slimfly:q=3 on slimfly:q=3" in x and "worst-case is defined for a "
               "dragonfly" in x for x in lines) == 2
    res = json.loads(out.with_suffix(".json").read_text())
    assert [(p["routing_name"], p["offered"]) for p in res["points"]] == [("min", 0.1),
                                                                          ("min", 0.3)]
    assert [(f["routing"], f["load"]) for f in res["failed"]] == [
        ("dsnf", 0.1), ("dsnf", 0.3), ("min@slimfly:q=3", 0.1), ("min@slimfly:q=3", 0.3)]
    assert len(_records(Path(f"{out}.points.jsonl"))) == 2


@pytest.mark.parametrize("scheduler,expected", [
    ("tcp//127.0.0.1:8786", "--scheduler 'tcp//127.0.0.1:8786'; expected local or"),
    ("http://127.0.0.1:8786", "--scheduler 'http://127.0.0.1:8786'; expected local or"),
    ("tcp://127.0.0.1:99999", "--scheduler 'tcp://127.0.0.1:99999'; expected local or"),
])
def test_bad_scheduler_is_one_line_and_exit_2(scheduler, expected, tmp_path):
    r = subprocess.run([FABROUTE, "sweep", DF, "-r", "min", "--loads", "0.1", "-q",
                        "--scheduler", scheduler, "-o", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and expected in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_unreachable_scheduler_is_bad_input_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "SCHEDULER_TIMEOUT", 1.0)     # 10 s in real use
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # free, and nobody listens on it
    jobs = [(DF, "min", SimConfig(**CFG).to_dict(), "uniform", 0.1, 1, None)]
    with pytest.raises(BadInput, match=rf"tcp://127.0.0.1:{port}'?: no dask scheduler "
                                       r"answered within 1 s") as e:
        cluster.run(jobs, 1, False, f"tcp://127.0.0.1:{port}", tmp_path / "s.jsonl")
    assert len(str(e.value).splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_key_covers_config_load_seed_and_tables():
    topo = build(DF)
    ts_min, ts_val = tables_for(topo, "min")[0], tables_for(topo, "val")[0]
    d_min = table_digest(ts_min)
    assert d_min == table_digest(tables_for(build(DF), "min")[0]), "deterministic"
    changed = dataclasses.replace(ts_min, tables={k: v.copy() for k, v in ts_min.tables.items()})
    t = changed.tables["min"]
    t[0, 1] = (t[0, 1] + 1) % topo.adj.shape[1]
    cfg = SimConfig(**CFG).to_dict()
    base = dict(spec=DF, routing="min", traffic="uniform", load=0.3, seed=1, vcs=None,
                config=cfg, tables=d_min, code=code_digest())
    key = point_key(point_inputs(**base))
    assert key == point_key(dict(reversed(list(point_inputs(**base).items())))), "canonical"
    for change in [{"config": {**cfg, "measure_cycles": 301}}, {"load": 0.31}, {"seed": 2},
                   {"tables": table_digest(ts_val)}, {"tables": table_digest(changed)},
                   {"traffic": "shift"}, {"vcs": 3}, {"routing": "ugal-l"}]:
        assert point_key(point_inputs(**{**base, **change})) != key, change
    # the model version is keyed, the sources' digest is not (an edit that changes no
    # result keeps a figure's stored points; workers are still checked against it)
    assert point_key({**point_inputs(**base), "model": -1}) != key
    assert point_key(point_inputs(**{**base, "code": "0" * 64})) == key


def test_store_ignores_torn_and_foreign_lines(tmp_path):
    """A torn last line is ignored and cut off before the next append; so are records of
    other keys, records whose key is not their inputs' hash, and a second record of a
    key; a file that is no store is refused."""
    base = dict(spec=DF, routing="min", traffic="uniform", seed=1, vcs=None, config={},
                tables="t", code="c")
    inp = [point_inputs(load=x, **base) for x in (0.1, 0.2, 0.3)]
    keys = [point_key(i) for i in inp]
    recs = [record(i, {"offered": i["load"]}, "local", 1, 0.5) for i in inp]
    forged = {**recs[1], "inputs": {**inp[1], "seed": 2}}       # key no longer matches
    again = record(inp[0], {"offered": 99}, "local", 1, 0.5)
    path = tmp_path / "s.jsonl"
    line = [json.dumps(r) + "\n" for r in (recs[0], forged, again, recs[2])]
    path.write_text("".join(line) + "not json\n" + line[1][:40])   # last line torn
    st = Store(path)
    got = st.read(set(keys[:2]))            # keys[2] is not wanted
    assert set(got) == {keys[0]} and got[keys[0]]["result"] == {"offered": 0.1}
    with st:
        assert not path.read_text().endswith(line[1][:40])
        st.append(recs[1])
    text = path.read_text()
    assert text.endswith("\n") and text.startswith("".join(line))
    assert set(Store(path).read(set(keys))) == set(keys)
    other = tmp_path / "o.json"
    other.write_text('{"spec": 1}')
    with pytest.raises(BadInput, match="is not a sweep results store"):
        Store(other)
    assert other.read_text() == '{"spec": 1}'


def test_a_worker_refuses_tables_that_differ(tmp_path):
    """The task's expected table digest (and source digest) must be what the worker builds
    from the SPEC."""
    ts, _, digest = cluster.tables(DF, "min", None)
    assert digest == table_digest(ts)
    inp = point_inputs(DF, "min", "uniform", 0.1, 1, None, SimConfig(**CFG).to_dict(),
                       digest, code_digest())
    assert cluster.run_task(inp)["result"]["routing_name"] == "min"
    with pytest.raises(RuntimeError, match=r"the tables of min on dragonfly:p=2,a=4,h=2 "
                                           r"built here have digest \w{12}, the client's 0{12}"):
        cluster.run_task({**inp, "tables": "0" * 64})
    with pytest.raises(RuntimeError, match="simulator sources"):
        cluster.run_task({**inp, "code": "0" * 64})


def test_a_new_config_key_at_its_default_keeps_stored_points(tmp_path):
    """A config key added later with a default that keeps the old behaviour (as
    vc_allocation, model, ugal_cr were) must not make a figure's stored points stale; and a
    record written with the whole config as its key (before defaults were dropped) is read."""
    cfg = SimConfig(**CFG).to_dict()
    base = dict(spec=DF, routing="min", traffic="uniform", load=0.3, seed=1, vcs=None,
                config=cfg, tables="t", code="c")
    old = {k: v for k, v in cfg.items() if k not in ("vc_allocation", "model", "ugal_cr")}
    assert point_key(point_inputs(**base)) == point_key(point_inputs(**{**base, "config": old}))
    assert point_key(point_inputs(**base)) != point_key(
        point_inputs(**{**base, "config": {**cfg, "vc_allocation": "per-packet"}}))
    import hashlib

    from simulator.store import canonical

    inp = point_inputs(**{**base, "config": old})
    rec = record(inp, {"x": 1}, "w", 1, 0.1)
    rec["key"] = hashlib.sha256(canonical({k: v for k, v in inp.items() if k != "code"})
                                ).hexdigest()
    path = tmp_path / "s.points.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    want = point_key(point_inputs(**base))
    assert Store(path).read({want})[want]["result"] == {"x": 1}
