"""Load an exported InfiniBand table set into real OpenSM on an ibsim fabric and compare.

``apply(DIR)`` takes the files of ``fabroute ib export`` (in ``DIR``) or of ``fabroute tables
--formats ib`` (in ``DIR/ib``): ``fabric.net``, ``guids.json``, ``guid2lid``, ``lfts.dump``,
``sl2vl.dump``, ``path-sl.txt``, read by :mod:`tablegen.exports.infiniband.read`.  It checks
them against each other (bad input: exit 2, nothing started), builds our OpenSM plugin
(``controller/opensm/``) and bulk reader (beside this module), cached by source hash, starts
``ibsim`` and OpenSM 3.3.23 with the routing engine ``fabroute`` (the ``file`` engine's LFTs
plus our ``update_sl2vl`` / ``path_sl`` hooks), waits for
``SUBNET UP`` and reads back, with ONE ``fabroute_ibread`` process (pipelined MADs, directed
routes from the SM's HCA, so the read does not depend on the LFTs under test):

* every switch's LFT, block by block (SubnGet LinearForwardingTable; ``dump_fts`` misses the
  top LID when it is a multiple of 64),
* every SL2VL table OpenSM programmed (each switch's (in, out) pairs, each CA port) straight
  from the simulated switches (SubnGet SLtoVLMappingTable),
* PathRecord SLs from OpenSM's SA (SubnAdmGet PathRecord by SLID/DLID) for every (source HCA,
  destination port, LID offset) triple, or a deterministic sample above ``max_paths``: the
  triples as arrays, the queries streamed to the reader and its answers parsed as they come
  (:mod:`emulation.ibsim.readback`; no Python object per triple),

compares them with the files and stops OpenSM, then ibsim, by PID (also on errors and Ctrl-C).
``docs/infiniband.md`` describes it all.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter, deque
from pathlib import Path

import numpy as np

from controller import opensm as opensm_plugin
from emulation.ibsim.readback import (CHUNK, NO_SL, PAIR_DTYPE, Answers, PathSlTable,
                                      path_queries, run_reader, sls_used)
from tablegen.errors import BadInput, RunFailed
from tablegen.exports.infiniband.limits import NO_PORT
from tablegen.exports.infiniband.read import ABSENT, IbFiles, LftTable, load_ib_files

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
BINARIES = ("ibsim", "opensm")
APT_HINT = ("apt-get install opensm ibsim-utils infiniband-diags gcc libc6-dev libopensm-dev "
            "libibumad-dev libibmad-dev (or make install)")
FIRST_MISMATCHES = 10          # how many mismatches the report lists per kind
LOG_TAIL = 15                  # log lines in a start-failure report
MAX_PATHS = 200_000            # PathRecords read back before sampling (~1 s per 60 000)
READ_WINDOW = 64               # MADs fabroute_ibread keeps in flight
READ_TIMEOUT_MS = 500
#: reader runs per read-back while queries fail: a MAD lost on a loaded machine
#: (fabroute_ibread gives up on what is in flight after 4 x 500 ms + 1 s without an answer)
#: is asked again, alone, not reported as a mismatch
READ_ATTEMPTS = 3

PLUGIN_SRC = opensm_plugin.SOURCE
READER_SRC = Path(__file__).with_name("fabroute_ibread.c")
PLUGIN_NAME = "fabroute_osm"                       # OpenSM dlopen()s lib<name>.so
INCLUDE = Path("/usr/include/infiniband")
HEADERS = {"libopensm-dev": INCLUDE / "opensm" / "osm_opensm.h",
           "libibumad-dev": INCLUDE / "umad.h",
           "libibmad-dev": INCLUDE / "mad.h"}

_runs = itertools.count()


def binaries_missing() -> list[str]:
    """The programs / libraries ``apply`` needs that this machine lacks."""
    missing = [b for b in BINARIES if shutil.which(b) is None
               and not any(Path(d, b).exists() for d in ("/usr/sbin", "/sbin"))]
    if not Path(UMAD2SIM).exists():
        missing.append(UMAD2SIM)
    if shutil.which("gcc") is None:
        missing.append("gcc")
    missing += [f"{h} ({pkg})" for pkg, h in HEADERS.items() if not h.exists()]
    return missing


def _which(name: str) -> str:
    for d in ("/usr/sbin", "/sbin"):
        if Path(d, name).exists():
            return str(Path(d, name))
    return shutil.which(name) or name


# -- the C parts: built at first use, cached by source hash ------------------------------------
def _cache_root() -> Path:
    base = os.environ.get("FABROUTE_CACHE") or os.environ.get("XDG_CACHE_HOME") \
        or Path.home() / ".cache"
    return Path(base) / "fabroute" / "opensm"


def build_tools() -> Path:
    """Compile the OpenSM plugin (``controller/opensm/fabroute_osm.c``) and the reader
    (``emulation/ibsim/fabroute_ibread.c``) into ``<cache>/<hash>/`` (``libfabroute_osm.so`` and
    ``fabroute_ibread``) unless already there; returns that directory.  The key hashes both
    sources and the OpenSM version header.  Safe under parallel runs (build in a temporary
    directory, then rename)."""
    if shutil.which("gcc") is None:
        raise BadInput(f"gcc not found: cannot build the OpenSM plugin; {APT_HINT}")
    absent = [f"{h} ({pkg})" for pkg, h in HEADERS.items() if not h.exists()]
    if absent:
        raise BadInput(f"missing headers {', '.join(absent)}: cannot build the OpenSM plugin; "
                       f"{APT_HINT}")
    h = hashlib.sha256()
    for src in (PLUGIN_SRC, READER_SRC):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    h.update((INCLUDE / "opensm" / "osm_version.h").read_bytes())
    out = _cache_root() / h.hexdigest()[:16]
    lib, reader = out / f"lib{PLUGIN_NAME}.so", out / "fabroute_ibread"
    if lib.is_file() and reader.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        cmds = {PLUGIN_SRC: ["gcc", "-O2", "-Wall", "-shared", "-fPIC", f"-I{INCLUDE}", "-o",
                             str(tmp / lib.name), str(PLUGIN_SRC)],
                READER_SRC: ["gcc", "-O2", "-Wall", f"-I{INCLUDE}", "-o", str(tmp / reader.name),
                             str(READER_SRC), "-libmad", "-libumad"]}
        for src, cmd in cmds.items():
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode:
                lines = res.stderr.strip().splitlines() or [f"status {res.returncode}"]
                first = next((l for l in lines if "error" in l), lines[-1])
                raise BadInput(f"cannot build {src.name} with gcc: {first.strip()}; {APT_HINT}")
        try:
            tmp.rename(out)
        except OSError:          # a parallel run got there first
            if not (lib.is_file() and reader.is_file()):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# -- what to read back ---------------------------------------------------------------------------
def dr_paths(guids: dict, start: str | None = None) -> tuple[dict[int, str], dict[int, str]]:
    """Directed routes (``0,1,p1,p2,…``) from the HCA named ``start`` (the client's
    ``SIM_HOST``; by default the first host) to every switch and every CA port, by BFS over
    guids.json: ``(switch GUID -> route, CA port GUID -> route)``.  They do not depend on the
    LFTs under test."""
    sw = {s["id"]: s for s in guids["switches"]}
    h0 = next((h for h in guids["hosts"] if h["name"] == start), guids["hosts"][0])
    route = {h0["switch"]: "0,1"}
    q = deque([h0["switch"]])
    while q:
        u = q.popleft()
        for p in sw[u]["ports"]:
            v = p.get("switch")
            if v is not None and v not in route:
                route[v] = f"{route[u]},{p.get('ib_port', p['port'])}"
                q.append(v)
    sw_routes = {int(sw[i]["guid"], 16): r for i, r in route.items()}
    ca_routes = {}
    for h in guids["hosts"]:
        if h is h0:
            ca_routes[int(h["port_guid"], 16)] = "0"
        elif h["switch"] in route:
            ca_routes[int(h["port_guid"], 16)] = f"{route[h['switch']]},{h['switch_port']}"
    return sw_routes, ca_routes


def path_pairs(ts: IbFiles, max_paths: int = MAX_PATHS):
    """The (source HCA index, destination index, LID offset) triples whose PathRecord SL is
    read back: every source HCA to every other HCA (each LID offset) and to every switch —
    or, above ``max_paths``, every k-th triple of that list (k = ceil(total / max_paths)),
    starting at the source's index mod k, so each source, each destination and each offset
    gets its share.  Returns (triples, total, k); triples: a :data:`PAIR_DTYPE` array
    (``src``, ``dst``: hosts first, then switches; ``off``), 12 bytes a triple, in that
    order.  O(triples), built in blocks of about :data:`CHUNK` triples."""
    hosts, switches = ts.guids["hosts"], ts.guids["switches"]
    n_h, n_s, n_off = len(hosts), len(switches), 1 << ts.lmc
    n_hd = (n_h - 1) * n_off                       # a source's triples towards other HCAs
    per_src = n_hd + n_s
    total = n_h * per_src
    k = max(1, math.ceil(total / max_paths)) if max_paths else 1
    first = np.arange(n_h, dtype=np.int64) % k
    cnt = np.maximum(0, (per_src - first + k - 1) // k)     # len(range(first, per_src, k))
    start = np.concatenate([[0], np.cumsum(cnt)])
    out = np.empty(int(start[-1]), dtype=PAIR_DTYPE)
    step = max(1, CHUNK // max(1, math.ceil(per_src / k)))
    for h0 in range(0, n_h, step):
        h1 = min(n_h, h0 + step)
        src = np.repeat(np.arange(h0, h1), cnt[h0:h1])
        j = first[src] + k * (np.arange(start[h0], start[h1]) - start[src])
        d, off = np.divmod(j, n_off)
        to_host = j < n_hd
        rows = out[start[h0]:start[h1]]
        rows["src"] = src
        rows["dst"] = np.where(to_host, d + (d >= src), n_h + j - n_hd)
        rows["off"] = np.where(to_host, off, 0)
    return out, total, k


# -- comparison --------------------------------------------------------------------------------
def compare_lfts(expected: LftTable, actual: LftTable, names: dict[int, str] | None = None,
                 first: int = FIRST_MISMATCHES) -> dict:
    """Entry-by-entry comparison.  A mismatch is a (switch, LID) whose port differs: a LID
    ``expected`` lists that the switch forwards elsewhere or nowhere (``actual`` absent / 255),
    or a LID ``expected`` does not list that the switch forwards to a port.  A switch missing
    from ``actual`` counts each of its entries.  O(switches x LIDs), vectorised per switch."""
    names = names or {}
    mism, listed = 0, []
    width = max(expected.ports.shape[1], actual.ports.shape[1])
    for g in sorted(set(expected) | set(actual)):
        e, a = expected.forwarding(g, width), actual.forwarding(g, width)
        bad = np.flatnonzero(e != a)
        mism += len(bad)
        for lid in bad[:max(0, first - len(listed))].tolist():
            listed.append({"switch": f"0x{g:016x}", "name": names.get(g), "lid": lid,
                           "expected": None if e[lid] == NO_PORT else int(e[lid]),
                           "actual": None if a[lid] == NO_PORT else int(a[lid]),
                           **({"switch_missing": True} if g not in actual else {})})
    return {"switches": len(expected), "switches_read": len(actual),
            "switches_missing": len(set(expected) - set(actual)),
            "switches_unexpected": len(set(actual) - set(expected)),
            "entries": expected.entries, "mismatches": mism, "first_mismatches": listed}


def _name_of(ts: IbFiles, g: int) -> str | None:
    if g in ts.ca_ports:
        return ts.ca_ports[g]["name"]
    return next((s["name"] for s in ts.guids["switches"] if int(s["guid"], 16) == g), None)


# -- processes -------------------------------------------------------------------------------
def _tail(path: Path, n: int = LOG_TAIL) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def _tails(*logs: tuple[Path, int]) -> list[str]:
    """The last lines of several logs, each line prefixed with its file's name."""
    return [f"{p.name}: {l}" for p, n in logs for l in _tail(p, n) if l.strip()]


def _wait_for(proc: subprocess.Popen, log: Path, marker: str, timeout: float,
              fail: tuple[str, ...] = ()) -> str | None:
    """None when ``marker`` appears in ``log``; else why not (exited / a ``fail`` line was
    logged / timed out)."""
    end = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            with open(log, "rb") as f:
                text = f.read()
            if marker.encode() in text:
                return None
            for bad in fail:
                i = text.find(bad.encode())
                if i >= 0:
                    line = text[text.rfind(b"\n", 0, i) + 1:text.find(b"\n", i)]
                    return f"logged {line.decode(errors='replace').strip()!r}"
        except FileNotFoundError:
            pass
        rc = proc.poll()
        if rc is not None:
            return f"exited with status {rc} before logging {marker!r}"
        if time.monotonic() > end:
            return f"did not log {marker!r} within {timeout:.0f} s"
        time.sleep(delay)
        delay = min(0.1, delay * 1.5)


def _stop(proc: subprocess.Popen | None, grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` s; reaps the child.  Only this PID."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


# -- the run's scratch directory, environments and ibsim (shared with ib compare / update) ---
def new_scratch() -> tuple[str, Path]:
    """A unique ibsim socket name (``fabroute-<pid>-<n>``) and a scratch directory named after
    it, whose path holds no whitespace (OpenSM's ``event_plugin_options`` is one token)."""
    sock = f"fabroute-{os.getpid()}-{next(_runs)}"
    scratch = Path(tempfile.mkdtemp(prefix=f"{sock}-"))
    if re.search(r"\s", str(scratch)):
        shutil.rmtree(scratch)
        scratch = Path(tempfile.mkdtemp(prefix=f"{sock}-", dir="/tmp"))
    return sock, scratch


def run_envs(sock: str, scratch: Path, guids: dict, tools: Path) -> tuple[dict, dict, dict]:
    """``(ibsim's, a umad2sim client's, OpenSM's)`` environments of one run: the run's socket,
    umad2sim preloaded on the first HCA (HCAs come first in our net files), OpenSM's own
    cache / tmp directories and the plugin's directory on its library path."""
    base_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    base_env["IBSIM_SOCKNAME"] = sock
    client_env = dict(base_env, LD_PRELOAD=UMAD2SIM, SIM_HOST=guids["hosts"][0]["name"],
                      OSM_TMP_DIR=str(scratch / "osm-tmp"),
                      OSM_CACHE_DIR=str(scratch / "osm-cache"))
    osm_env = dict(client_env, LD_LIBRARY_PATH=":".join(
        [str(tools)] + [p for p in [base_env.get("LD_LIBRARY_PATH")] if p]))
    return base_env, client_env, osm_env


def start_ibsim(net: Path, lim: dict, scratch: Path, env: dict, timeout: float,
                report: dict) -> subprocess.Popen:
    """``ibsim -s -n`` on ``net`` with the limits of guids.json, ready when it says so; sets
    ``report["ibsim"]``.  :class:`RunFailed` with its log tail when it exits first or times
    out, after stopping it (as on Ctrl-C while waiting); once returned, the caller stops it."""
    ibsim_log = scratch / "ibsim.log"
    cmd = [_which("ibsim"), "-s", "-n", "-N", str(lim["N"]), "-S", str(lim["S"]),
           "-P", str(lim["P"]), "-L", str(lim["L"]), str(net)]
    with open(ibsim_log, "wb") as log:
        ibsim = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT)
    report["ibsim"] = {"pid": ibsim.pid, "cmd": cmd}
    try:                # the caller holds no handle yet: stop it here on any way out
        why = _wait_for(ibsim, ibsim_log, "Network simulator ready.", timeout)
        if why:
            raise RunFailed(f"ibsim {why}", dict(report, log_tail=_tails((ibsim_log,
                                                                          LOG_TAIL))))
    except BaseException:
        _stop(ibsim)
        raise
    return ibsim


# the machine's /etc/opensm/qos-policy.conf must not apply; OpenSM insists on a default level
QOS_POLICY = """# fabroute ib apply: path SLs come from the fabroute engine's path_sl hook
qos-levels
    qos-level
        name: default
        sl: 0
    end-qos-level
end-qos-levels
"""

_PLUGIN_FAIL = ("fabroute_osm: ERROR", "cannot load plugin",
                "Failed to setup routing engine 'fabroute'",   # ('no_fallback' is logged too)
                "cannot find or setup routing engine 'fabroute'")


def apply(d, *, load: str | os.PathLike | None = None,
          load_sl2vl: str | os.PathLike | None = None,
          load_path_sl: str | os.PathLike | None = None,
          keep_logs: bool = False, timeout: float | None = None,
          max_paths: int = MAX_PATHS, readback: dict | None = None) -> dict:
    """Run ibsim + OpenSM (engine ``fabroute``) on the table set ``d``, read back LFTs,
    SL2VL tables and PathRecord SLs and compare them with the files of ``d``.

    ``load`` / ``load_sl2vl`` / ``load_path_sl`` hand OpenSM another LFT / SL2VL / path-SL
    file while the comparison stays against ``d``'s (negative controls).  ``max_paths``
    bounds the PathRecords read (0: all).  ``readback``: a dict to fill with the values read
    (:func:`read_values`: what ``fabroute ib compare`` writes as the read-back files).
    Returns the report (``ok`` when no kind has a
    mismatch); raises :class:`BadInput` before starting anything and :class:`RunFailed`
    (with a report holding the log tails) when a process fails.  Both processes are stopped
    on return, error or KeyboardInterrupt."""
    t0 = time.perf_counter()
    expected = load_ib_files(d)
    if load is not None or load_sl2vl is not None or load_path_sl is not None:
        # the files OpenSM gets instead must pass the same checks
        load_ib_files(d, lfts_file=load, sl2vl_file=load_sl2vl, path_sl_file=load_path_sl)
    ib = expected.dir.resolve()
    loaded = {"lfts": Path(load or ib / "lfts.dump").resolve(),
              "sl2vl": Path(load_sl2vl or ib / "sl2vl.dump").resolve(),
              "path_sl": Path(load_path_sl or ib / "path-sl.txt").resolve()}
    missing = binaries_missing()
    if missing:
        raise BadInput(f"not installed: {', '.join(missing)}; {APT_HINT}")
    tools = build_tools()
    guids, lmc = expected.guids, expected.lmc
    lim = guids["ibsim_limits"]
    n_entries = expected.lfts.entries
    if timeout is None:
        timeout = 30.0 + n_entries / 20_000   # OpenSM sends one SMP per 64 LFT entries
    pairs, pairs_total, stride = path_pairs(expected, max_paths)
    timings: dict[str, float] = {"check_s": time.perf_counter() - t0}

    sock, scratch = new_scratch()
    ibsim = opensm = None
    try:
        for sub in ("osm-tmp", "osm-cache", "plugin"):
            (scratch / sub).mkdir()
        shutil.copy(ib / "guid2lid", scratch / "osm-cache" / "guid2lid")
        shutil.copy(loaded["sl2vl"], scratch / "plugin" / "sl2vl.dump")
        shutil.copy(loaded["path_sl"], scratch / "plugin" / "path-sl.txt")
        (scratch / "qos-policy.conf").write_text(QOS_POLICY)
        conf = scratch / "opensm.conf"
        conf.write_text(f"# fabroute ib apply\n"
                        f"event_plugin_name {PLUGIN_NAME}\n"
                        f"event_plugin_options {scratch / 'plugin'}\n"
                        f"qos TRUE\n"
                        f"qos_policy_file {scratch / 'qos-policy.conf'}\n"
                        f"dump_files_dir {scratch / 'osm-tmp'}\n")
        base_env, client_env, osm_env = run_envs(sock, scratch, guids, tools)
        ibsim_log, osm_log = scratch / "ibsim.log", scratch / "opensm.log"
        report: dict = {"dir": str(d), "files": str(ib), "topology": guids.get("topology"),
                        "routing": guids.get("routing"), "lmc": lmc,
                        "loaded": {k: str(v) for k, v in loaded.items()}, "socket": sock,
                        "tools": str(tools)}
        if keep_logs:
            report["logs"] = str(scratch)
        ibsim = start_ibsim(ib / "fabric.net", lim, scratch, base_env, timeout, report)
        timings["ibsim_ready_s"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        cmd = [_which("opensm"), "-F", str(conf), "-d2", "-e", "-f", str(osm_log), "-s", "0",
               "-x", "-l", str(lmc), "-R", "fabroute,no_fallback", "-U", str(loaded["lfts"])]
        with open(scratch / "opensm.out", "wb") as out:
            opensm = subprocess.Popen(cmd, cwd=scratch, env=osm_env,
                                      stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT)
        report["opensm"] = {"pid": opensm.pid, "cmd": cmd}
        why = _wait_for(opensm, osm_log, "SUBNET UP", timeout, fail=_PLUGIN_FAIL)
        if why:
            raise RunFailed(f"opensm {why}", dict(report, log_tail=_tails(
                (osm_log, LOG_TAIL), (scratch / "opensm.out", 4), (ibsim_log, 3))))
        timings["opensm_up_s"] = time.perf_counter() - t1
        log_text = osm_log.read_text(errors="replace")
        ready = re.search(r"fabroute_osm: (ready: .*)", log_text)
        report["opensm"]["plugin"] = ready.group(1) if ready else None
        report["opensm"]["tables_configured"] = "fabroute tables configured" in log_text
        if not ready or not report["opensm"]["tables_configured"]:
            raise RunFailed("opensm did not route with the fabroute engine (plugin not "
                            "loaded?)", dict(report, log_tail=_tails((osm_log, LOG_TAIL))))

        t2 = time.perf_counter()
        answers, lft_keys, sl_keys = read_back(tools, scratch, client_env, expected, pairs,
                                               timeout, report)
        timings["readback_s"] = time.perf_counter() - t2
    finally:
        _stop(opensm)   # OpenSM first: without its ibsim it ignores SIGTERM
        _stop(ibsim)
        if not keep_logs:
            shutil.rmtree(scratch, ignore_errors=True)

    t4 = time.perf_counter()
    parts, _ = compare_read(expected, answers, lft_keys, sl_keys,
                            (pairs, pairs_total, stride, max_paths))
    report.update(parts)
    if readback is not None:
        readback.update(read_values(expected, answers, lft_keys, sl_keys, pairs),
                        pairs_total=pairs_total, stride=stride)
    timings["compare_s"] = time.perf_counter() - t4
    timings["total_s"] = time.perf_counter() - t0
    report["timings"] = {k: round(v, 3) for k, v in timings.items()}
    report["mismatches"] = sum(report[k]["mismatches"] for k in ("lft", "sl2vl", "path_sl"))
    report["ok"] = report["mismatches"] == 0
    return report


def read_back(tools: Path, cwd: Path, env: dict, expected: IbFiles, pairs, timeout: float,
              report: dict) -> tuple[Answers, list, list]:
    """Every LFT block and SL2VL row of ``expected`` from the switches and every PathRecord of
    ``pairs`` (:func:`path_pairs`) from the SA, with one ``fabroute_ibread`` (umad2sim client
    ``env``, working directory ``cwd``) on directed routes from guids.json.  The queries are
    streamed to it block by block and its answers parsed as they come (PathRecord SLs straight
    into an array): memory O(switches x LID blocks + SL2VL rows) plus a byte per triple.
    Queries that fail (a MAD lost on a loaded machine) are asked again, only those, up to
    :data:`READ_ATTEMPTS` runs in all.  Returns (answers, LFT keys, SL2VL keys) for
    :func:`compare_read`; sets ``report["readback"]`` (``asked_again``: queries re-asked);
    raises :class:`RunFailed` when a reader run fails or does not finish within ``timeout`` +
    (its queries / 2000) seconds."""
    # from the HCA the client sits on: a live update's two sets may list their hosts in
    # another order (reconcile's map of the fixed fabric need not be the degraded one's)
    sw_routes, ca_routes = dr_paths(expected.guids, env.get("SIM_HOST"))
    queries, lft_keys, sl_keys = [], [], []
    top = expected.lfts.top
    for g in expected.lfts:
        route = sw_routes.get(g)
        if route is not None:
            for block in range(top // 64 + 1):
                lft_keys.append((g, block))
                queries.append(f"L {route} {block}\n")
    for g, (kind, rows) in expected.sl2vl.items():
        route = sw_routes.get(g) if kind == "Switch" else ca_routes.get(g)
        for (i, o) in rows:
            sl_keys.append((g, i, o, route))
            if route is not None:
                queries.append(f"S {route} {(i << 8 | o) if kind == 'Switch' else 0}\n")
    cmd = [str(tools / "fabroute_ibread"), str(READ_TIMEOUT_MS), str(READ_WINDOW)]

    def run(lines: list[str], sub) -> Answers:
        chunks = itertools.chain(["".join(lines).encode()], path_queries(expected, sub))
        return run_reader(cmd, cwd, env, chunks, len(lines), len(sub),
                          timeout + (len(lines) + len(sub)) / 2_000, report,
                          FIRST_MISMATCHES, LOG_TAIL)

    answers = run(queries, pairs)
    asked_again = 0
    for _ in range(READ_ATTEMPTS - 1):
        bad_l = [i for i, a in enumerate(answers.lines) if a.startswith("err")]
        bad_p = np.flatnonzero(answers.path_sls == NO_SL)
        if not bad_l and not len(bad_p):
            break
        asked_again += len(bad_l) + len(bad_p)
        again = run([queries[i] for i in bad_l], pairs[bad_p])
        for i, a in zip(bad_l, again.lines):
            answers.lines[i] = a
        answers.path_sls[bad_p] = again.path_sls
        answers.path_errors = again.path_errors
        answers.reasons = {int(bad_p[k]): r for k, r in again.reasons.items()}
    report["readback"] = {"lft_block_smps": len(lft_keys),
                          "sl2vl_smps": sum(1 for k in sl_keys if k[3] is not None),
                          "path_records": len(pairs), "asked_again": asked_again,
                          "processes": 1}
    return answers, lft_keys, sl_keys


def compare_read(expected: IbFiles, answers: Answers, lft_keys, sl_keys,
                 paths) -> tuple[dict, LftTable]:
    """The ``lft``, ``sl2vl`` and ``path_sl`` parts of a report from :func:`read_back`'s
    answers (``paths``: ``(pairs, pairs_total, stride, max_paths)``), and the LFTs read."""
    pairs, pairs_total, stride, max_paths = paths
    names = {int(s["guid"], 16): s["name"] for s in expected.guids["switches"]}
    it = iter(answers.lines)
    actual_lfts, _ = _lfts_read(lft_keys, it)
    parts = {"lft": compare_lfts(expected.lfts, actual_lfts, names),
             "sl2vl": _compare_sl2vl(expected, sl_keys, it),
             "path_sl": _compare_path_sl(expected, pairs, answers, pairs_total, stride,
                                         max_paths)}
    return parts, actual_lfts


def _lfts_read(lft_keys, answers) -> tuple[LftTable, int]:
    """The LFTs in the answers to ``lft_keys`` (``(switch GUID, block)``, one answer line each,
    taken from the iterator ``answers``) and how many blocks failed; a switch none of whose
    blocks was read has no section.  LID 0 is no unicast LID and stays absent."""
    width = 64 * (max((b for _, b in lft_keys), default=0) + 1)
    rows: dict[int, np.ndarray] = {}
    failed = 0
    for g, block in lft_keys:
        a = next(answers).split()
        if a[0] != "ok":
            failed += 1
            continue
        row = rows.get(g)
        if row is None:
            row = rows[g] = np.full(width, ABSENT, dtype=np.int16)
        ports = np.array(a[1:65], dtype=np.int16)
        row[block * 64:block * 64 + len(ports)] = ports
        if block == 0:
            row[0] = ABSENT
    return LftTable.of_rows(rows), failed


def read_values(expected: IbFiles, answers: Answers, lft_keys, sl_keys, pairs) -> dict:
    """The values :func:`read_back`'s answers hold, compared with nothing: ``lfts`` (an
    :class:`~tablegen.exports.infiniband.read.LftTable`; a switch none of whose blocks could
    be read has no section), ``sl2vl``
    ``{node GUID: {(in, out): 16 VLs or None when unread}}``, ``path_sls`` (``int8``, one SL
    per triple of ``pairs``, :data:`NO_SL` when unread) and ``errors`` (count of failed
    queries per kind).  O(LFT and SL2VL answers); the path SLs are not copied."""
    it = iter(answers.lines)
    lfts, failed = _lfts_read(lft_keys, it)
    errors = {"lft": failed, "sl2vl": 0, "path_sl": answers.path_errors}
    sl2vl: dict[int, dict] = {}
    for g, i, o, route in sl_keys:
        got = None
        if route is not None:
            a = next(it).split()
            got = tuple(int(x) for x in a[1:]) if a[0] == "ok" else None
        errors["sl2vl"] += got is None
        sl2vl.setdefault(g, {})[(i, o)] = got
    return {"lfts": lfts, "sl2vl": sl2vl, "path_sls": answers.path_sls, "errors": errors}


def _compare_sl2vl(ts: IbFiles, keys, answers) -> dict:
    mism, listed, errors, vls = 0, [], 0, Counter()
    for g, i, o, route in keys:
        exp = ts.sl2vl[g][1][(i, o)]
        if route is None:
            got, err = None, "no directed route"
        else:
            a = next(answers).split()
            got, err = (tuple(int(x) for x in a[1:]), None) if a[0] == "ok" else (None, a[-1])
            vls.update(got or ())
        if got != exp:
            mism += 1
            errors += err is not None
            if len(listed) < FIRST_MISMATCHES:
                listed.append({"node": f"0x{g:016x}", "name": _name_of(ts, g), "in": i, "out": o,
                               "expected": list(exp), "actual": list(got) if got else None,
                               **({"sls": [s for s in range(16) if got[s] != exp[s]]} if got
                                  else {"error": err})})
    return {"nodes": len(ts.sl2vl), "entries": len(keys), "mismatches": mism,
            "read_errors": errors, "vls_read": {str(v): n for v, n in sorted(vls.items())},
            "first_mismatches": listed}


def _compare_path_sl(ts: IbFiles, pairs, answers: Answers, total: int, stride: int,
                     max_paths: int) -> dict:
    """The ``path_sl`` part of the report: each triple's SL read against the first matching
    rule of the files (:class:`PathSlTable`), in blocks of 16 x :data:`CHUNK` triples.
    O(triples log rules), memory O(block)."""
    hosts, switches = ts.guids["hosts"], ts.guids["switches"]
    n_h = len(hosts)
    table, got = PathSlTable(ts), answers.path_sls
    mism = no_rule = 0
    first: dict[int, int] = {}            # triple index -> expected SL, first mismatches
    for a in range(0, len(pairs), CHUNK * 16):
        p = pairs[a:a + CHUNK * 16]
        exp, ruled = table.sls(p["src"], p["dst"], p["off"])
        no_rule += len(p) - int(np.count_nonzero(ruled))
        bad = got[a:a + len(p)] != exp
        mism += int(np.count_nonzero(bad))
        for k in np.flatnonzero(bad)[:max(0, FIRST_MISMATCHES - len(first))].tolist():
            first[a + k] = int(exp[k])
    listed = []
    for t, exp in first.items():
        i, j, off = (int(x) for x in pairs[t])
        src = int(hosts[i]["port_guid"], 16)
        dst_rec = hosts[j] if j < n_h else switches[j - n_h]
        dst = int(dst_rec["port_guid"] if j < n_h else dst_rec["guid"], 16)
        sl = int(got[t])
        err = answers.reasons.get(t, "") if sl == NO_SL else None
        listed.append({"src": f"0x{src:016x}", "src_name": hosts[i]["name"],
                       "dst": f"0x{dst:016x}", "dst_name": dst_rec["name"],
                       "slid": hosts[i]["lid"], "dlid": dst_rec["lid"] + off,
                       "offset": off, "expected": exp, "actual": None if err is not None else sl,
                       **({"error": err} if err else {})})
    counts = np.bincount(got[got >= 0], minlength=1)
    return {"pairs_total": total, "entries": len(pairs), "sampled": stride > 1,
            "sample": (f"every {stride}th (source HCA, destination, offset) triple, starting at "
                       f"the source index mod {stride} (max_paths={max_paths})"
                       if stride > 1 else "all"),
            "no_rule": no_rule, "mismatches": mism,
            "read_errors": int(np.count_nonzero(got < 0)),
            "sls_read": {str(v): int(n) for v, n in enumerate(counts.tolist()) if n},
            "first_mismatches": listed}
