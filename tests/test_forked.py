"""Forked jobs: results in order, failures carried back, and never more jobs computing at
once than workers, however the calls nest."""

import os
import time

import pytest

from tablegen.forked import run_forked


def _interval(log, tag, seconds=0.15):
    """A job that records when it computed."""
    def job():
        t0 = time.monotonic()
        time.sleep(seconds)
        with open(log, "a") as f:
            f.write(f"{tag} {t0} {time.monotonic()}\n")
        return tag
    return job


def _most_at_once(log):
    events = []
    for line in open(log):
        _, a, b = line.split()
        events += [(float(a), 1), (float(b), -1)]
    now = most = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        now += step
        most = max(most, now)
    return most


def test_results_come_in_order_and_done_sees_each(tmp_path):
    seen = []
    res = run_forked([_interval(tmp_path / "log", i, 0.05 * (3 - i)) for i in range(3)], 2,
                     done=lambda i, r: seen.append((i, r)))
    assert res == [0, 1, 2]
    assert sorted(seen) == [(0, 0), (1, 1), (2, 2)]


def test_a_job_may_return_none():
    assert run_forked([lambda: None, lambda: 0], 2) == [None, 0]


def test_one_worker_runs_here():
    pid = os.getpid()
    assert run_forked([os.getpid, os.getpid], 1) == [pid, pid]
    assert run_forked([os.getpid, os.getpid], 2) != [pid, pid]


def test_a_failure_is_raised_with_the_child_traceback():
    def bad():
        raise ValueError("bad value 7; expected 3")

    with pytest.raises(ValueError, match="bad value 7") as e:
        run_forked([lambda: 1, bad], 2)
    assert any("raised in a forked job" in n for n in e.value.__notes__)


def test_a_child_that_dies_is_an_error():
    with pytest.raises(RuntimeError, match="exit code 3 and no result"):
        run_forked([lambda: os._exit(3), lambda: 1], 2)


def test_nested_jobs_share_the_workers(tmp_path):
    log = tmp_path / "log"

    def outer(k):
        def job():
            _interval(log, f"outer{k}", 0.1)()
            return run_forked([_interval(log, f"inner{k}.{i}") for i in range(3)], 2)
        return job

    res = run_forked([outer(k) for k in range(3)], 2)
    assert res == [[f"inner{k}.{i}" for i in range(3)] for k in range(3)]
    assert len(open(log).readlines()) == 12
    assert _most_at_once(log) == 2     # two computing: never more, and the second CPU used
