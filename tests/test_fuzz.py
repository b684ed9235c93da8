"""Property tests (hypothesis) of bounded input, issue 13: any SPEC text builds a topology
within :mod:`tablegen.limits` or raises :class:`TopologyError` with a one-line message; any
table of simulator keys gives a :class:`SimConfig` within its ranges or a one-line
``ValueError``; any option text is an integer within its range or argparse's one-line error.
Never another exception, never a hang (a 60 s alarm per example, not a speed assertion), never
more than :data:`ALLOC_CAP` bytes allocated by one example (tracemalloc sees NumPy's buffers).

Bounded: a few hundred examples each, small sizes mostly (the limits themselves are built in
``tests/test_bounds.py``); under 10 s on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cli import _sets
from simulator.config import (FLOAT_RANGES, INT_RANGES, NULLABLE, QUARTER_RANGES, SPEEDUP_STEPS,
                              SimConfig)
from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.topologies.spec import _KEYS, build

ALLOC_CAP = 512 << 20   # bytes one example may allocate (the limits build in <= 190 MiB)
HANG = 60               # seconds: a guard against hangs, not a speed assertion
# derandomized: the same examples on every run (CI stays reproducible); no example database
FUZZ = settings(max_examples=600, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def bounded():
    """Fail the example on a hang or on an allocation above :data:`ALLOC_CAP`."""
    def hang(*_):
        raise AssertionError(f"no answer within {HANG} s: a hang")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG)
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
        assert peak <= ALLOC_CAP, f"{peak >> 20} MiB allocated"
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def one_line(msg: str) -> bool:
    return len(msg.splitlines()) == 1 and msg.strip() != ""


# -- SPEC strings -------------------------------------------------------------------------------
KEYS = sorted(set().union(*(r | o for r, o in _KEYS.values())))
# Sizes: mostly small (cheap to build), the limits and one past them, absurd ones, junk.
EDGES = [limits.SLIMFLY_MAX_Q, limits.SLIMFLY_MAX_Q + 2, limits.MAX_SWITCHES,
         limits.MAX_SWITCHES + 1, limits.MAX_HOSTS_PER_SWITCH + 1, limits.MAX_RADIX + 1,
         limits.DLN_MAX_DEGREE + 1, limits.SEED_BOUND]
VALUES = st.one_of(
    st.integers(-2, 12).map(str),
    st.integers(13, 300).map(str),
    st.sampled_from(EDGES).map(str),
    st.integers(-10**40, 10**40).map(str),
    st.sampled_from(["absolute", "relative", "", " 7 ", "1_000", "0x10", "1e3", "nan", "٣"]),
    st.text(max_size=6),
)


# values that often build (small: cheap), per key name
GOOD = {"q": st.sampled_from([3, 4, 5, 7, 8, 9, 11, 13]), "xi": st.integers(2, 5),
        "p": st.integers(1, 4), "a": st.integers(1, 6), "h": st.integers(1, 4),
        "g": st.integers(2, 12), "n": st.integers(4, 300), "hosts": st.integers(0, 4),
        "x": st.integers(2, 8), "y": st.integers(2, 12), "seed": st.integers(0, 9),
        "arrangement": st.sampled_from(["absolute", "relative"])}


@st.composite
def kind_specs(draw) -> str:
    """A kind with its own keys (the required ones mostly present), sometimes one key
    repeated or a stranger added, each with a value that often builds (:data:`GOOD`) or any of
    :data:`VALUES`."""
    kind = draw(st.sampled_from(sorted(_KEYS)))
    required, optional = _KEYS[kind]
    keys = sorted(required) + draw(st.lists(st.sampled_from(sorted(optional)), unique=True,
                                            max_size=len(optional)))
    if draw(st.integers(0, 3)) == 0:    # now and then a key twice, or a stranger
        keys.append(draw(st.sampled_from(KEYS + ["z", " q", "Q"])))
    good = {k: st.one_of(GOOD[k].map(str), GOOD[k].map(str), VALUES) for k in GOOD}
    items = [f"{k}={draw(good.get(k, VALUES))}" for k in keys]
    return f"{draw(st.sampled_from([kind, kind.upper(), ' ' + kind]))}:{','.join(items)}"


SPECS = st.one_of(
    st.text(max_size=40),
    kind_specs(), kind_specs(),
    st.builds(lambda kind, items: f"{kind}:{','.join(items)}",
              st.one_of(st.sampled_from(sorted(_KEYS)), st.text(max_size=8)),
              st.lists(st.one_of(st.tuples(st.sampled_from(KEYS), VALUES).map("=".join),
                                 st.text(max_size=8)), max_size=5)),
)


@settings(FUZZ, max_examples=1500)
@given(SPECS)
def test_any_spec_builds_within_the_limits_or_is_one_line(spec):
    with bounded():
        try:
            t = build(spec)
        except TopologyError as e:
            assert one_line(str(e)), repr(str(e))
            return
    assert t.n_switches <= limits.MAX_SWITCHES and t.n_hosts <= limits.MAX_HOSTS
    assert t.radix <= limits.MAX_RADIX
    assert int(t.hosts.max(initial=0)) <= limits.MAX_HOSTS_PER_SWITCH


# -- simulator configuration --------------------------------------------------------------------
ANY = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                     st.integers(), max_size=2))
FIELDS = sorted(INT_RANGES) + sorted(FLOAT_RANGES) + sorted(QUARTER_RANGES) + \
    sorted(SimConfig.CHOICES)
# each key within its range (small, so that a run could be cheap), or any value at all
VALID = {k: st.integers(lo, min(hi, 64)) for k, (lo, hi) in INT_RANGES.items()}
VALID.update({k: st.floats(lo, hi) for k, (lo, hi) in FLOAT_RANGES.items()})
VALID.update({k: st.integers(lo * SPEEDUP_STEPS, min(hi, 4) * SPEEDUP_STEPS).map(
    lambda i: i / SPEEDUP_STEPS) for k, (lo, hi) in QUARTER_RANGES.items()})
VALID.update({k: st.sampled_from(v) for k, v in SimConfig.CHOICES.items()})
VALID_TABLES = st.fixed_dictionaries({}, optional=VALID)
CONFIGS = st.one_of(
    VALID_TABLES,
    st.builds(lambda d, k, v: {**d, k: v}, VALID_TABLES, st.sampled_from(FIELDS), ANY),
    st.dictionaries(st.sampled_from(FIELDS), ANY, max_size=6),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), ANY, max_size=3),
    ANY,
)
SETS = st.one_of(st.text(max_size=30),
                 st.tuples(st.sampled_from(FIELDS), st.text(max_size=12)).map("=".join),
                 st.sampled_from(FIELDS).flatmap(lambda k: VALID[k].map(
                     lambda v: f"{k}={json.dumps(v)}")))


def _within(cfg: SimConfig) -> bool:
    for k, (lo, hi) in INT_RANGES.items():
        v = getattr(cfg, k)
        if not (v is None and k in NULLABLE) and not (type(v) is int and lo <= v <= hi):
            return False
    if not all(type(getattr(cfg, k)) in (int, float) and lo <= getattr(cfg, k) <= hi
               and float(getattr(cfg, k) * SPEEDUP_STEPS).is_integer()
               for k, (lo, hi) in QUARTER_RANGES.items()):
        return False
    return all(type(getattr(cfg, k)) in (int, float) and lo <= getattr(cfg, k) <= hi
               and math.isfinite(getattr(cfg, k)) for k, (lo, hi) in FLOAT_RANGES.items())


@FUZZ
@given(CONFIGS)
def test_any_config_table_is_valid_or_one_line(d):
    with bounded():
        try:
            cfg = SimConfig.from_dict(d)
        except ValueError as e:
            assert one_line(str(e)), repr(str(e))
            return
    assert _within(cfg)


@FUZZ
@given(st.lists(SETS, max_size=4))
def test_any_set_option_is_valid_or_one_line(sets):
    """``--set KEY=VALUE`` as the simulator's command line reads it (JSON, else a string)."""
    with bounded():
        try:
            cfg = SimConfig().replace(**_sets(sets))
        except ValueError as e:
            assert one_line(str(e)), repr(str(e))
            return
    assert _within(cfg)


# -- integer options ----------------------------------------------------------------------------
OPTIONS = {"vcs": (limits.vcs_option, 1, limits.MAX_VCS),
           "seed": (limits.seed_option, 0, limits.SEED_BOUND - 1),
           "jobs": (limits.jobs_option, 1, limits.MAX_JOBS),
           "lmc": (limits.lmc_option, 0, limits.MAX_LMC)}


@FUZZ
@given(st.sampled_from(sorted(OPTIONS)),
       st.one_of(st.text(max_size=12), st.integers(-10**30, 10**30).map(str)))
def test_any_option_text_is_in_range_or_one_line(name, text):
    parse, lo, hi = OPTIONS[name]
    with bounded():
        try:
            value = parse(text)
        except argparse.ArgumentTypeError as e:
            assert one_line(str(e)), repr(str(e))
            return
    assert type(value) is int and lo <= value <= hi
