"""Run independent jobs in forked processes, sharing the CPUs as tokens.

A forked child inherits the parent's memory copy-on-write, so a job can read a topology or a
table set of hundreds of MiB without pickling it; only its (small) result travels back, over
a pipe.  Table generation and export are CPU-bound Python and compiled NumPy/Numba code that
holds the GIL, so processes, not threads, are what uses a second core.

Jobs nest: a job may itself call :func:`run_forked` (a routing's job writes its formats side
by side).  The outermost call makes ``workers`` tokens, and a process computes only while it
holds one; a job waiting for jobs of its own lends its token out meanwhile.  So however the
calls nest, at most ``workers`` processes compute at a time (more only made this CPU-bound
work slower), and a core that one job leaves idle goes to the next job ready, whichever
routing or format it belongs to.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any

__all__ = ["cpu_count", "run_forked"]

_tokens = None      # the outermost run_forked's semaphore, inherited by every forked child
_DIED = object()    # what a child that sent no result "returned" (a job may return None)
_PR_SET_PDEATHSIG = 1


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class _Failed:
    """An exception raised in a child, carried back to be raised again in the parent."""

    def __init__(self, exc: BaseException):
        try:
            pickle.dumps(exc)
            self.exc = exc
        except Exception:  # an unpicklable exception keeps its type name and message
            self.exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        self.trace = traceback.format_exc()


def _die_with(parent: int) -> None:
    """Have the kernel kill this child when its parent dies (``PR_SET_PDEATHSIG``): a parent
    killed outright (SIGKILL) leaves no worker writing into its abandoned output."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:      # it died before the call above
        os._exit(1)


def _child(job: Callable[[], Any], conn, parent: int) -> None:
    # Ctrl-C reaches the whole process group; the parent alone answers it, by terminating
    # its children, and a terminated child just ends (no KeyboardInterrupt raised into
    # whatever it was doing, which printed tracebacks)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with(parent)
    try:
        with _tokens:
            result = job()
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        result = _Failed(e)
    conn.send(result)
    conn.close()


def run_forked(jobs: Sequence[Callable[[], Any]], workers: int,
               done: Callable[[int, Any], None] | None = None) -> list[Any]:
    """Results of the zero-argument callables ``jobs``, in order.

    With ``workers <= 1``, one job, or no ``fork`` start method, the jobs run here one after
    the other.  Otherwise the jobs run in forked children, started in order, at most
    ``workers`` of them alive per call (so a batch keeps few results in flight), and at most
    ``workers`` computing at a time however calls nest (tokens).
    ``done(i, result)`` is called in the parent as job ``i`` finishes.  The first job to
    raise (in finishing order) has its exception raised here, the running children
    terminated and the rest not started.

    Jobs must not rely on side effects in the parent's memory: a child's writes stay in the
    child.  Files they write are shared, so jobs must write disjoint files.  Call it with no
    other thread running that may hold a lock the children need (a rich live display
    writing to stderr, say): a forked child gets the lock, held, but not the thread.
    """
    global _tokens
    results: list[Any] = [None] * len(jobs)
    if workers <= 1 or len(jobs) <= 1 or "fork" not in mp.get_all_start_methods():
        for i, job in enumerate(jobs):
            results[i] = job()
            if done is not None:
                done(i, results[i])
        return results
    ctx = mp.get_context("fork")
    outermost = _tokens is None
    if outermost:
        _tokens = ctx.Semaphore(workers)
    else:
        _tokens.release()          # lent to our children while we only wait
    running: dict[Any, tuple[int, Any]] = {}   # reader end -> (job index, process)
    nxt, failed = 0, None
    try:
        while failed is None and (nxt < len(jobs) or running):
            while nxt < len(jobs) and len(running) < workers:
                sys.stdout.flush()      # else a child flushes our buffered text once more
                sys.stderr.flush()
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(jobs[nxt], writer, os.getpid()))
                proc.start()
                writer.close()
                running[reader] = (nxt, proc)
                nxt += 1
            for reader in wait(list(running)):
                i, proc = running.pop(reader)
                try:
                    res = reader.recv()
                except EOFError:    # the child died without a word (killed, os._exit)
                    res = _DIED
                reader.close()
                proc.join()
                if res is _DIED:
                    res = _Failed(RuntimeError(f"job {i} ended with exit code {proc.exitcode} "
                                               "and no result"))
                if isinstance(res, _Failed):
                    failed = failed or res
                    continue
                results[i] = res
                if done is not None:
                    done(i, res)
    finally:
        for reader, (_, proc) in running.items():   # after a failure or an exception here
            proc.terminate()
            proc.join()
            reader.close()
        if outermost:
            _tokens = None
        else:
            _tokens.acquire()
    if failed is not None:
        failed.exc.add_note(f"raised in a forked job:\n{failed.trace}")
        raise failed.exc
    return results
