"""Sweep points as Dask tasks, resumable through a results store (``docs/simulator.md``,
*Sweeps on Dask*).

:func:`run` takes the points of a sweep as jobs ``(spec, routing, config, traffic, load, seed,
vcs)``.  On the client it builds each routing's tables once (per table set: ``ugal-l`` and
``ugal-g`` share theirs), takes their digest (:func:`simulator.store.table_digest`) and the
point's key (:func:`simulator.store.point_key`); points whose key the store already holds are
reused, the others run as tasks of :func:`run_task`.  A task carries only its inputs (spec,
routing, config, ..., the expected table digest): the worker rebuilds the tables from the
SPEC (cached per worker process), and refuses to simulate when their digest, or the digest of
its simulator sources, differs from the client's.  Each finished point is appended to the
store at once; a point that fails (an exception, a worker that died, tables that cannot be
built) is reported and the others go on.

``scheduler="local"`` runs a :class:`distributed.LocalCluster` (processes, one thread each,
``workers`` of them; default one per CPU, at most one per point to compute), or, for one
worker or one point, the tasks in this process; an address (``tcp://HOST:PORT``) uses a
running ``dask scheduler`` and its ``dask worker`` processes.  The same store and resume code
runs either way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field

from simulator.store import (Store, code_digest, plain, point_inputs, point_key, record,
                             table_digest)
from tablegen.errors import BadInput

SCHEDULER_TIMEOUT = 10.0        #: seconds to reach a scheduler before it is bad input
NO_WORKERS_S = 120.0            #: a scheduler without workers this long fails what is left
_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")
_CACHE: dict = {}               #: per process: topologies, table sets and their digests


def check_scheduler(text) -> str:
    """``local`` or a Dask scheduler address ``tcp://HOST:PORT`` (or ``tls://``), else
    :class:`BadInput` naming it."""
    m = _ADDRESS.fullmatch(text) if isinstance(text, str) else None
    if text == "local" or (m and 1 <= int(m[3]) <= 65535):
        return text
    raise BadInput(f"sweep: --scheduler {text!r:.80}; expected local or the address of a "
                   "running dask scheduler, tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)")


def tables(spec: str, routing: str, vcs: int | None) -> tuple:
    """``(TableSet, config overrides, table digest)`` of a simulator routing name on a SPEC,
    built once per process and table set."""
    from simulator.config import ROUTINGS
    from simulator.run import tables_for
    from tablegen.topologies.spec import build

    if routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r} is unknown; expected one of "
                         f"{', '.join(ROUTINGS)}")
    key = ("tables", spec, *ROUTINGS[routing][:2], vcs)
    if key not in _CACHE:
        topo = _CACHE.get(("topo", spec)) or build(spec)
        _CACHE[("topo", spec)] = topo
        ts, _ = tables_for(topo, routing, vcs)
        _CACHE[key] = ts, table_digest(ts)
    ts, digest = _CACHE[key]
    return ts, dict(ROUTINGS[routing][2]), digest


def _where() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):       # not in a Dask worker
        return "local"


def run_task(inputs: dict) -> dict:
    """One point (a Dask task, or called in-process): the tables rebuilt from the SPEC and
    checked against ``inputs["tables"]``, the sources against ``inputs["code"]``, then
    :func:`simulator.run.simulate`.  Returns ``{"result", "worker", "pid", "seconds"}``."""
    from tablegen.numba_cache import use_writable_cache

    use_writable_cache()            # a `dask worker` has not run fabroute's front door
    from simulator.config import SimConfig
    from simulator.run import simulate

    t0 = time.perf_counter()
    where, routing = _where(), inputs["routing"].partition("@")[0]
    if code_digest() != inputs["code"]:
        raise RuntimeError(f"worker {where}: its simulator sources (digest "
                           f"{code_digest()[:12]}) differ from the client's "
                           f"({inputs['code'][:12]}); expected the same fabroute on every worker")
    ts, _, digest = tables(inputs["spec"], routing, inputs["vcs"])
    if digest != inputs["tables"]:
        raise RuntimeError(f"worker {where}: the tables of {routing} on {inputs['spec']} built "
                           f"here have digest {digest[:12]}, the client's "
                           f"{inputs['tables'][:12]}; expected equal tables (the same fabroute "
                           "on every worker)")
    r = simulate(ts, SimConfig.from_dict(inputs["config"]), inputs["traffic"], inputs["load"],
                 inputs["seed"])
    r["routing_name"] = inputs["routing"]
    r["spec"] = inputs["spec"]
    return {"result": r, "worker": where, "pid": os.getpid(),
            "seconds": time.perf_counter() - t0}


@dataclass
class Outcome:
    """What :func:`run` did: ``points[k]`` is job ``k``'s result (None: failed), ``failed``
    one entry per failed job (``index``, ``routing``, ``spec``, ``traffic``, ``load``,
    ``seed``, ``error``); ``reused`` and ``computed`` count jobs."""

    points: list
    failed: list = field(default_factory=list)
    reused: int = 0
    computed: int = 0
    store: str | None = None


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:400]


def run(jobs: list[tuple], workers: int | None = None, progress: bool = True,
        scheduler: str = "local", store=None) -> Outcome:
    """Every job ``(spec, routing, config dict, traffic, load, seed, vcs)`` (see the module
    docstring); ``store`` a path (or None: no store).  Bad input (scheduler address, an
    unreachable scheduler, a store that is not one): :class:`BadInput`, nothing written."""
    from simulator.config import SimConfig
    from tablegen.limits import MAX_JOBS

    scheduler = check_scheduler(scheduler)
    if workers is not None and not (isinstance(workers, int) and 1 <= workers <= MAX_JOBS):
        raise BadInput(f"sweep: workers={workers!r:.40}; expected an integer 1 <= workers <= "
                       f"{MAX_JOBS}")
    st = Store(store) if store is not None else None
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(_connect(scheduler)) if scheduler != "local" else None
        out = Outcome([None] * len(jobs), store=str(st.path) if st else None)
        failed: dict[int, str] = {}
        todo: dict[str, dict] = {}          # key -> inputs, job order
        where: dict[str, list[int]] = {}    # key -> jobs
        code = code_digest()
        for k, (spec, name, cfg, traffic, load, seed, vcs) in enumerate(jobs):
            routing, _, other = name.partition("@")     # ROUTING@SPEC: another topology
            try:
                _, over, digest = tables(other or spec, routing, vcs)
                c = SimConfig.from_dict(cfg)
                c = c.replace(**over) if over else c
            except Exception as e:          # this routing's points fail; the others run
                failed[k] = f"tables: {_one_line(e)}"
                continue
            inp = point_inputs(other or spec, name, traffic, load, seed, vcs, c.to_dict(),
                               digest, code)
            key = point_key(inp)
            todo.setdefault(key, inp)
            where.setdefault(key, []).append(k)
        stored = st.read(set(todo)) if st else {}
        for key, rec in stored.items():
            for k in where[key]:
                out.points[k] = json.loads(json.dumps(rec["result"]))
                out.reused += 1
            del todo[key]
        bar = stack.enter_context(_Bar(len(jobs), progress, out.reused, len(failed)))

        def finish(key: str, done: dict | None = None, error: str | None = None) -> None:
            if done is not None:
                text = json.dumps(done["result"], default=plain)    # as the store holds it
                if st:
                    st.append(record(todo[key], json.loads(text), done["worker"],
                                     done["pid"], done["seconds"]))
                for k in where[key]:
                    out.points[k] = json.loads(text)
                    out.computed += 1
            else:
                for k in where[key]:
                    failed[k] = error
            bar.advance(len(where[key]), 0 if done is not None else len(where[key]))

        n = min(len(todo), workers or os.cpu_count() or 1)
        if todo and (client is None and n > 1):
            client = stack.enter_context(_local_cluster(n))
        if todo and st:
            stack.enter_context(st)         # lock, cut a torn tail; only now is anything written
        if client is None:
            for key, inp in todo.items():
                bar.set_running(1)
                try:
                    done = run_task(inp)
                except Exception as e:
                    finish(key, error=_one_line(e))
                else:
                    finish(key, done)
        elif todo:
            _on_dask(client, todo, finish, bar, scheduler)
    for k in sorted(failed):
        spec, name, cfg, traffic, load, seed, vcs = jobs[k]
        out.failed.append({"index": k, "routing": name,
                           "spec": name.partition("@")[2] or spec, "traffic": traffic,
                           "load": float(load), "seed": seed, "error": failed[k]})
    return out


@contextlib.contextmanager
def _connect(address: str):
    """A client of the running scheduler at ``address``; unreachable within
    :data:`SCHEDULER_TIMEOUT`: :class:`BadInput`."""
    from distributed import Client

    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise BadInput(f"sweep: --scheduler {address!r:.80}: no dask scheduler answered within "
                       f"{SCHEDULER_TIMEOUT:g} s ({_one_line(e)[:120]}); expected the address "
                       "of a running `dask scheduler`") from None
    with client:
        yield client


@contextlib.contextmanager
def _local_cluster(n: int):
    """``n`` worker processes of one thread on this machine (no memory limit, as the
    processes of the previous pool; no dashboard)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.CRITICAL,
                      memory_limit=0) as cluster, Client(cluster, set_as_default=False) as c:
        yield c


def _on_dask(client, todo: dict, finish, bar, scheduler: str) -> None:
    """Submit every point, then poll: finished futures are handed to ``finish`` as they
    come, the running count is read from the scheduler once a second."""
    import uuid

    tag = uuid.uuid4().hex[:8]
    futs = {client.submit(run_task, inp, key=f"fabroute-point-{tag}-{i}", pure=False): key
            for i, (key, inp) in enumerate(todo.items())}
    pending = dict(futs)
    next_poll, idle_since = 0.0, None
    while pending:
        done = [f for f in pending if f.done()]
        for f in done:
            key = pending.pop(f)
            try:
                res = f.result() if f.status == "finished" else None
                err = None if res is not None else _one_line(f.exception(timeout=5))
            except Exception as e:          # lost, cancelled, or the result itself
                res, err = None, _one_line(e)
            finish(key, res, err)
            f.release()
        now = time.monotonic()
        if pending and now >= next_poll:
            next_poll = now + 1.0
            keys = {str(f.key) for f in pending}
            proc = client.processing()
            bar.set_running(sum(str(k) in keys for ks in proc.values() for k in ks))
            idle_since = None if proc else (idle_since or now)
            if idle_since is not None and now - idle_since > NO_WORKERS_S:
                for f, key in list(pending.items()):
                    finish(key, None, f"no dask worker connected to {scheduler} for "
                                      f"{NO_WORKERS_S:g} s")
                    f.cancel()
                pending.clear()
        if not done:
            time.sleep(0.05)


class _Bar:
    """A rich progress bar on stderr: points done of all (reused ones count as done),
    running, failed, reused."""

    def __init__(self, total: int, show: bool, reused: int, failed: int):
        self.done, self.failed, self.reused, self.running = reused + failed, failed, reused, 0
        self.total, self.show, self.p = total, show, None

    def __enter__(self):
        if self.show:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            self.p = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                              TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                              console=Console(stderr=True), transient=False)
            self.p.start()
            self.t = self.p.add_task("points", total=self.total, completed=self.done,
                                     info=self._info())
        return self

    def _info(self) -> str:
        return f"running {self.running} · failed {self.failed} · reused {self.reused}"

    def _show(self) -> None:
        if self.p is not None:
            self.p.update(self.t, completed=self.done, info=self._info())

    def advance(self, n: int, failed: int) -> None:
        self.done += n
        self.failed += failed
        self._show()

    def set_running(self, n: int) -> None:
        self.running = n
        self._show()

    def __exit__(self, *exc):
        self.running = 0
        self._show()
        if self.p is not None:
            self.p.stop()
