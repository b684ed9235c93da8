"""Bounded input (issue 13): every bad value of the issue's list, and the ones found by trying,
through the real ``fabroute`` entry point in a subprocess: exit code 2, exactly one line on
stderr naming the value, no traceback, nothing written.  Each subprocess runs under a 2 GiB
address-space cap (an unbounded allocation fails instead of eating the machine) and a 60 s
hang guard; nothing here is timed (the figures, under 2 s and 200 MB each, are in
``benchmarks/RESULTS.md``, measured by ``benchmarks/bench_bad_input.py`` over :data:`BAD_INPUT`).

Also: the limits of :mod:`tablegen.limits` build exactly at the cap; the command line works
for a user who cannot write the installed sources (``nobody``, as root only).
"""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tablegen import limits
from tablegen.errors import TopologyError
from tablegen.numba_cache import use_writable_cache

FABROUTE = Path(sys.executable).with_name("fabroute")
ROOT = Path(__file__).resolve().parents[1]
AS_CAP = 2 << 30        # RLIMIT_AS; a normal command needs 0.4-0.6 GB (below that OpenBLAS,
#                         loaded by SciPy, spins at import instead of failing)
HANG = 60               # seconds: a guard against hangs, not a speed assertion

# (argv, text the one stderr line must hold).  {out}: an output path in an empty directory;
# {in}: a directory of input files (see _inputs).
SIM = ["simulate", "slimfly:q=5", "--load", "0.1"]
BAD_INPUT = [
    # the list of issue 13
    (["topology", "slimfly:q=1000003"], "slimfly: q=1000003 is above the largest supported q=41"),
    (["topology", "dsnf:n=1000000000"], "dsnf: n=1000000000 is above the largest supported"),
    (["tables", "slimfly:q=5", "--routing", "min", "--vcs", "1000000", "--out", "{out}"],
     "argument --vcs: 1000000 is above the largest supported VC count 64"),
    (["topology", "dragonfly:p=2,a=4,h=100000"], "dragonfly: h=100000 is above the largest"),
    ([*SIM, "--set", "measure_cycles=1e12"],
     "measure_cycles=1000000000000.0; expected an integer 1 <= measure_cycles <= 10,000,000"),
    ([*SIM, "--vcs", "0"], "argument --vcs: 0 is below the smallest supported VC count 1"),
    (["topology", "slimfly:q=5,q=7"], "slimfly: 'q=7' repeats key 'q' (already 5)"),
    ([*SIM, "--seed", "-1"], "argument --seed/-s: -1 is below the smallest supported seed 0"),
    (["ib", "export", "slimfly:q=5", "--routing", "min", "--seed", "-1", "--out", "{out}"],
     "argument --seed: -1 is below the smallest supported seed 0"),
    (["verify", "{in}", "--seed", "-1"], "argument --seed: -1"),
    ([*SIM, "--set", "packet_size=null"], "packet_size=None; expected an integer 1 <="),
    # found by trying: topologies
    (["topology", "slimfly:q=43"], "q=43 is above the largest supported q=41"),
    (["topology", "slimfly:q=5,p=99999999999999999999999"], "p=99999999999999999999999 is above"),
    (["topology", "slimfly:q=41,p=64"], "p=64 on 3,362 switches gives 215,168 hosts"),
    (["topology", "dragonfly:p=8,a=32,h=16"], "a=32, g=513 gives 16,416 switches"),
    (["topology", "dragonfly:p=2,a=100000,h=2"], "a=100000 is above the largest supported"),
    (["topology", "dsnf:n=16384,hosts=9"], "hosts=9 on 16,384 switches gives 147,456 hosts"),
    (["topology", "torus:x=200,y=200"], "x=200, y=200 gives 40,000 switches"),
    (["topology", "torus:x=512,y=32"], "has diameter 272 hops"),
    (["topology", "dsn:n=100000"], "dsn: n=100000 is above the largest supported n=16384"),
    (["topology", "dsn:n=4096,x=1"], "a hop distance is >= 255"),
    (["topology", "dln:n=16384,x=16"], "dln: x=16 is above the largest supported x=12"),
    (["topology", "dln:n=100,seed=4294967296"], "seed=4294967296"),
    (["path", "dsn:n=1024,x=1", "--routing", "min", "--src", "0", "--dst", "1"],
     "dsn:n=1024,x=1 has diameter 107: hop-indexed VCs need at least 107"),
    (["path", "dln:n=80,x=2", "--routing", "val", "--src", "0", "--dst", "1"],
     "val on dln:n=80,x=2,seed=1 needs 80 VCs (hop scheme), above the largest supported 64"),
    (["expand", "dsnf:n=16384", "--add", "1000"], "dsnf: n=17384 is above the largest"),
    (["compare", "--sizes", "100000000", "--out", "{out}"], "n=100000000 is above the largest"),
    (["compare", "--sizes", "64", "--expansion", "2,100000000,1", "--out", "{out}"],
     "100,000,003 topologies to analyse"),
    # found by trying: options
    (["tables", "slimfly:q=5", "--routing", "min", "--jobs", "100000", "--out", "{out}"],
     "argument --jobs: 100000 is above the largest supported worker count 64"),
    (["verify", "{in}", "--lmc", "1000000"],
     "argument --lmc: 1000000 is above the largest supported LMC 7"),
    (["ib", "export", "slimfly:q=5", "--routing", "min", "--lmc", "8", "--out", "{out}"],
     "argument --lmc: 8 is above the largest supported LMC 7"),
    (["path", "slimfly:q=5", "--routing", "min", "--src", "0", "--dst", "3", "--vcs", "1e3"],
     "argument --vcs: '1e3' is not an integer"),
    ([*SIM, "--vcs", "1000000"], "argument --vcs: 1000000 is above"),
    (["analyze", "slimfly:q=5", "--throughput-bound", "--seed", "-1"], "argument --seed/-s: -1"),
    (["simulate", "slimfly:q=5", "--load", "1e400"], "argument --load/-l: '1e400' is not a finite number"),
    ([*SIM, "--set", "latency_hist_max=1000000000000"], "latency_hist_max=1000000000000"),
    ([*SIM, "--set", "buffer_depth=true"], "buffer_depth=True; expected an integer"),
    ([*SIM, "--set", "source_queue_cap=1e9"], "source_queue_cap=1000000000.0"),
    ([*SIM, "--set", "warmup_tol=NaN"], "warmup_tol=nan; expected a number"),
    ([*SIM, "--config", "/dev/zero"], "'/dev/zero' is not a regular file"),
    ([*SIM, "--config", "{in}/list.json"], "holds a list; expected a table of keys"),
    (["sweep", "--experiment", "{in}/seed.toml", "--quiet"], "seed='x'; expected an integer"),
    (["sweep", "slimfly:q=5", "--routing", "min", "--loads", "0.1,,0.2", "--quiet"],
     "--loads '0.1,,0.2'; expected comma-separated numbers"),
    (["sweep", "slimfly:q=5", "--routing", "min", "val", "--loads", ",".join(["0.5"] * 600),
      "--quiet"], "1,200 load points, above the largest supported 1,000"),
    (["sweep", "slimfly:q=5", "--routing", "min", "--loads", "0.1", "--workers", "0"],
     "argument --workers/-j: 0 is below"),
    (["sweep", "slimfly:q=5", "--routing", "min", "--loads", "0.1", "--seed", "4294967296"],
     "argument --seed/-s: 4294967296 is above the largest supported seed 4294967295"),
    # the adaptive controller (issue 14)
    (["controller", "{in}", "--poll", "0"], "argument --poll: 0 is out of range; expected "
     "poll interval in seconds 0.05 <= X <= 60"),
    (["controller", "{in}", "--poll", "nan"], "argument --poll: 'nan' is not a number"),
    (["controller", "{in}", "--link-mbit", "-3"], "argument --link-mbit: -3 is out of range"),
    (["controller", "{in}", "--split-bits", "9"],
     "argument --split-bits: 9 is above the largest supported split width in bits 6"),
    (["controller", "{in}", "--hysteresis", "x"], "argument --hysteresis: 'x' is not a number"),
    (["emulate", "dragonfly:p=2,a=4,h=2", "--routing", "ugal-l", "--traffic", "uniform",
      "--load", "1.5"], "argument --load: 1.5 is out of range; expected load as a fraction"),
    (["emulate", "dragonfly:p=2,a=4,h=2", "--routing", "ugal-l", "--traffic", "uniform",
      "--link-mbit", "0"], "argument --link-mbit: 0 is out of range"),
    (["emulate", "dragonfly:p=2,a=4,h=2", "--routing", "ugal-l", "--traffic", "uniform",
      "--duration", "0.2"], "argument --duration: 0.2 is out of range"),
    (["emulate", "dragonfly:p=2,a=4,h=2", "--routing", "ugal-l", "--traffic", "bogus"],
     "emulate: --traffic traffic 'bogus' is unknown; expected one of uniform"),
    (["emulate", "dragonfly:p=2,a=4,h=2", "--routing", "ugal-l", "--traffic", "uniform",
      "--split-bits", "0"], "argument --split-bits: 0 is below the smallest supported"),
]


def _cap_address_space():   # preexec_fn: in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))


def inputs(d: Path) -> Path:
    """The input files the cases name as ``{in}/...``."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "list.json").write_text("[1, 2]")
    (d / "seed.toml").write_text('spec = "slimfly:q=5"\nroutings = ["min"]\nloads = [0.1]\n'
                                 'seed = "x"\n')
    return d


def argv_of(case: list[str], out: Path, ind: Path) -> list[str]:
    return [a.replace("{out}", str(out)).replace("{in}", str(ind)) for a in case]


def run_capped(argv, cwd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=HANG,
                          preexec_fn=_cap_address_space, **kw)


@pytest.mark.parametrize("case,needle", BAD_INPUT, ids=[" ".join(c)[:60] for c, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, case, needle):
    cwd, ind = tmp_path / "cwd", inputs(tmp_path / "in")
    cwd.mkdir()
    before = sorted(ind.iterdir())
    r = run_capped([str(FABROUTE), *argv_of(case, cwd / "out", ind)], cwd)
    lines = r.stderr.splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr and r.stdout.strip() == ""  # (a progress bar: "\n")
    assert list(cwd.iterdir()) == [] and sorted(ind.iterdir()) == before


def test_the_address_space_cap_admits_a_normal_command_and_stops_a_runaway(tmp_path):
    """The cap is not what makes the cases above pass: a real command runs under it, and an
    allocation that the cases would once have made fails under it."""
    r = run_capped([str(FABROUTE), "tables", "slimfly:q=5", "--routing", "val-3h",
                    "--formats", "json", "--out", str(tmp_path / "t")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "t" / "tables.npz").is_file()
    r = run_capped([sys.executable, "-c", "import numpy; numpy.ones(3 << 30, numpy.uint8)"],
                   tmp_path)
    assert r.returncode != 0 and "MemoryError" in r.stderr


@pytest.mark.parametrize("spec", [
    f"slimfly:q={limits.SLIMFLY_MAX_Q}",                      # 3,362 switches, 104,222 hosts
    f"dsnf:n={limits.MAX_SWITCHES},hosts=8",                  # 16,384 switches, 131,072 hosts
    "dragonfly:p=8,a=32,h=16,g=512",                          # 16,384 routers
    "torus:x=128,y=128",
    f"dln:n=1024,x={limits.DLN_MAX_DEGREE}",
])
def test_the_largest_supported_sizes_build(spec):
    from tablegen.topologies.spec import build

    t = build(spec)
    assert t.n_switches <= limits.MAX_SWITCHES and t.n_hosts <= limits.MAX_HOSTS
    assert t.radix <= limits.MAX_RADIX and int(t.hosts.max()) <= limits.MAX_HOSTS_PER_SWITCH


def test_limits_are_checked_by_the_builders_too():
    """Direct callers (not only SPEC strings) are bounded: the checks sit in the builders."""
    from tablegen.topologies.baselines import build_dln, build_torus
    from tablegen.topologies.dragonfly import build_dragonfly
    from tablegen.topologies.dsnf import add_nodes, build_dsnf
    from tablegen.topologies.slimfly import build_slimfly

    for call in (lambda: build_slimfly(10**6 + 3), lambda: build_dsnf(10**9),
                 lambda: build_dragonfly(2, 4, 10**5), lambda: build_torus(10**4, 10**4),
                 lambda: build_dln(10**6), lambda: add_nodes(16_000, 1_000),
                 lambda: build_slimfly(5, p=True)):
        with pytest.raises(TopologyError, match="above the largest|not an integer"):
            call()


# -- a user who cannot write the installed sources ---------------------------------------------
def test_numba_cache_dir_is_private_and_only_set_when_needed(tmp_path, monkeypatch):
    import tablegen.numba_cache as nc

    env = {"HOME": str(tmp_path / "home"), "NUMBA_CACHE_DIR": "/given"}
    assert use_writable_cache(env) is None and env["NUMBA_CACHE_DIR"] == "/given"
    monkeypatch.setattr(nc, "_writable", lambda _src: True)
    env = {"HOME": str(tmp_path / "home")}
    assert use_writable_cache(env) is None and "NUMBA_CACHE_DIR" not in env
    monkeypatch.setattr(nc, "_writable", lambda _src: False)
    got = use_writable_cache(env)
    assert got == env["NUMBA_CACHE_DIR"] == str(tmp_path / "home" / ".cache/fabroute/numba")
    assert stat.S_IMODE(os.stat(got).st_mode) == 0o700
    # a directory others may write is never used (Numba loads pickles from it)
    shared = tmp_path / "xdg" / "fabroute" / "numba"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    monkeypatch.setattr(nc.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert use_writable_cache(env) == str(tmp_path / "tmp" / f"fabroute-numba-{os.getuid()}")


def _as_nobody(*argv, env, cwd):
    return run_capped(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                       "env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv], cwd)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to user nobody needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
def test_the_command_line_runs_as_a_user_who_cannot_write_the_install():
    """``nobody`` (home /nonexistent) against this checkout, which it cannot write: before
    the fix every command died at start-up with Numba's "cannot cache function"."""
    d = Path(tempfile.mkdtemp(prefix="fabroute-nobody-"))
    try:
        d.chmod(0o777)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": str(d)}
        probe = _as_nobody("test", "-w", str(ROOT / "tablegen" / "routing"), env=env, cwd=d)
        if probe.returncode == 0:
            pytest.skip(f"nobody can write {ROOT}: nothing to show")
        r = _as_nobody(str(FABROUTE), "topology", "slimfly:q=5", env=env, cwd=d)
        assert r.returncode == 0 and "50 switches" in r.stdout, r.stderr
        r = _as_nobody(str(FABROUTE), "tables", "slimfly:q=5", "--routing", "min", "--formats",
                       "json", "--out", str(d / "out"), env=env, cwd=d)
        assert r.returncode == 0 and (d / "out" / "tables.npz").is_file(), r.stderr
        # with a writable home the cache goes to ~/.cache/fabroute/numba
        (d / "home").mkdir(mode=0o777)
        (d / "home").chmod(0o777)
        r = _as_nobody(str(FABROUTE), "topology", "slimfly:q=5", env=dict(env, HOME=d / "home"),
                       cwd=d)
        assert r.returncode == 0, r.stderr
        assert (d / "home" / ".cache" / "fabroute" / "numba").is_dir()
    finally:
        shutil.rmtree(d, ignore_errors=True)
