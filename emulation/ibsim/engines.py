"""OpenSM's own routing engines on the ibsim fabric of a table set: run one, read its log,
read back what it programmed, and write that as InfiniBand files (``fabroute ib compare``).

:func:`run_engine` starts ibsim on ``fabric.net`` (as ``ib apply`` does,
:func:`emulation.ibsim.apply.start_ibsim`) and ``opensm -R <engine>`` with our LID plan pinned
(``guid2lid``, ``-x``, ``-l LMC``), QoS on with a one-level policy (so OpenSM programs SL2VL
tables and the SA asks the engine's ``path_sl`` hook for every PathRecord), and the options an
engine needs on a fabric that is no fat tree (:func:`engine_options`).  OpenSM falls back to
minhop when the engine fails, as it does in production: the log says so, and
:func:`parse_log` reads it.  After ``SUBNET UP`` one ``fabroute_ibread`` reads every LFT block,
every SL2VL row and the PathRecord SLs (:func:`emulation.ibsim.apply.read_back`), and
:func:`write_readback` writes them as ``lfts.dump``, ``sl2vl.dump`` and ``path-sl.txt`` beside
the fabric's ``fabric.net``, ``guids.json`` and ``guid2lid``.

``docs/infiniband.md``, *Comparing with OpenSM's routing engines*, has the commands and figures.
"""

from __future__ import annotations

import calendar
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from emulation.ibsim import apply as ib
from tablegen.errors import RunFailed
from tablegen.exports.infiniband.limits import NUM_SLS, VL_DROP
from tablegen.exports.infiniband.read import IbFiles, fabric_lids

#: engines of OpenSM 3.3.23 that ``-R`` accepts (``opensm --help``), ``file`` left out: it
#: loads LFTs, which the ``fabroute-<routing>`` engines do with our plugin
OPENSM_ENGINES = ("minhop", "updn", "dnup", "dfsssp", "sssp", "lash", "nue", "ftree", "dor",
                  "torus-2QoS")
DEFAULT_ENGINES = ("minhop", "updn", "dfsssp", "nue", "lash")
LOG_ERROR = " 0x01 -> "              # OpenSM's level mark of an error line
NO_ENGINE = "No routing engine able to successfully configure"
_STAMP = re.compile(r"^(\w{3}) +(\d+) (\d\d):(\d\d):(\d\d) (\d{6}) ")
_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
_USED = re.compile(r"(\S+) tables configured on all switches")
_FAILED = (re.compile(r"ucast_mgr_route: (\S+): cannot build (?:lid matrices|fwd tables)"),
           re.compile(r"Failed to setup routing engine '([^']+)'"),
           re.compile(r"cannot find or setup routing engine '([^']+)'"))


def engine_options(engine: str, scratch: Path, files: IbFiles) -> dict[str, str]:
    """The opensm.conf options ``engine`` needs here, beyond QoS (every engine gets it):

    * ``updn`` / ``dnup``: a root — without one they look for fat-tree roots, find none on a
      Slim Fly or Dragonfly ("disabling UPDN algorithm, no root nodes were found") and OpenSM
      falls back to minhop.  The root is the first switch of guids.json (``root_guid_file``).
    * ``nue``: ``nue_max_num_vls 0`` = every VL the ports offer (its default 1 forces
      everything onto VL 0, deadlock-free through escape paths, but single-lane), and
      ``nue_include_switches TRUE``: by default Nue leaves the paths to switch LIDs out of its
      deadlock avoidance (SA and management traffic), which our proof walks like any other.
    * ``lash``: ``lash_start_vl 0`` (its default, written out: the first of its lanes).
    * ``dfsssp`` / ``sssp`` / ``minhop`` and the others: nothing (DFSSSP takes the VLs the ports
      report: 8 on ibsim)."""
    if engine in ("updn", "dnup"):
        roots = scratch / "root-guids"
        roots.write_text(f"{files.guids['switches'][0]['guid']}\n")
        return {"root_guid_file": str(roots)}
    if engine == "nue":
        return {"nue_max_num_vls": "0", "nue_include_switches": "TRUE"}
    if engine == "lash":
        return {"lash_start_vl": "0"}
    return {}


def _stamp(line: str) -> float | None:
    """Seconds of an OpenSM log line's time stamp (``Nov 26 20:26:55 228966``) within its
    year (the log carries none; a run never spans New Year's night)."""
    m = _STAMP.match(line)
    if not m:
        return None
    mon, day, hh, mm, ss, us = m.groups()
    days = sum(calendar.monthrange(2001, k)[1] for k in range(1, _MONTHS.get(mon, 1)))
    return ((days + int(day)) * 24 + int(hh)) * 3600 + int(mm) * 60 + int(ss) + int(us) / 1e6


def parse_log(text: str, engine: str) -> dict:
    """What OpenSM's log says about a run started with ``-R engine``:

    ``subnet_up`` (it logged ``SUBNET UP``), ``used`` (the engine of the first ``<name> tables
    configured on all switches``), ``fell_back_to`` (``used`` when it is not ``engine``: the
    engine failed and OpenSM routed with minhop, or the next of its list), ``failed`` (engines
    the log says could not be set up or build their tables), ``no_engine`` (no engine routed
    at all: ``-R …,no_fallback`` and the engine failed — OpenSM then never comes up),
    ``errors`` (every error line's message, the harmless ``no_fallback`` setup line left out),
    ``seconds`` (first line's time stamp to ``SUBNET UP``'s, None without one).  O(lines)."""
    first = up = None
    used = None
    failed: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        t = _stamp(line)
        if first is None and t is not None:
            first = t
        msg = line.split(" -> ", 1)[-1].strip()
        if up is None and msg == "SUBNET UP":
            up = t if t is not None else first
        if used is None and (m := _USED.search(msg)):
            used = m.group(1)
        for pat in _FAILED:
            if (m := pat.search(msg)) and m.group(1) != "no_fallback":
                failed.append(m.group(1))
        if LOG_ERROR in line and "'no_fallback'" not in msg:
            errors.append(msg)
    requested = engine.split(",")[0]
    return {"subnet_up": up is not None, "used": used,
            "fell_back_to": used if used is not None and used != requested else None,
            "failed": sorted(set(failed)), "no_engine": NO_ENGINE in text, "errors": errors,
            "seconds": round(up - first, 3) if up is not None and first is not None else None}


def run_engine(files: IbFiles, engine: str, *, timeout: float, pairs, options=None,
               log_copy: Path | None = None) -> dict:
    """Run ibsim + ``opensm -R engine`` on the fabric of ``files`` (its GUIDs, LIDs and LMC)
    and read back every LFT, SL2VL row and the PathRecord SL of each ``pairs`` triple
    (:func:`emulation.ibsim.apply.path_pairs`; queries that fail are asked again by
    :func:`~emulation.ibsim.apply.read_back`).  ``options``: opensm.conf lines for every
    engine (``{key: value}``, after the engine's own).  ``timeout``: seconds from OpenSM's start
    to ``SUBNET UP``.  ``log_copy``: where OpenSM's log is kept.

    Returns ``{"engine", "subnet_up", "fell_back_to", "seconds", "log" (:func:`parse_log`),
    "readback" (:func:`emulation.ibsim.apply.read_values`, None when not read), "error"}``;
    an engine that fails, falls back or never comes up is a result, not an exception.  Both
    processes are stopped by PID on return, error or Ctrl-C; the scratch directory removed."""
    tools = ib.build_tools()
    lim = files.guids["ibsim_limits"]
    sock, scratch = ib.new_scratch()
    ibsim = opensm = None
    res: dict = {"engine": engine, "subnet_up": False, "fell_back_to": None, "seconds": None,
                 "log": None, "readback": None, "error": None}
    osm_log = scratch / "opensm.log"
    try:
        for sub in ("osm-tmp", "osm-cache"):
            (scratch / sub).mkdir()
        shutil.copy(files.dir / "guid2lid", scratch / "osm-cache" / "guid2lid")
        (scratch / "qos-policy.conf").write_text(ib.QOS_POLICY)
        conf = {"qos": "TRUE", "qos_policy_file": str(scratch / "qos-policy.conf"),
                "dump_files_dir": str(scratch / "osm-tmp"),
                **engine_options(engine, scratch, files), **(options or {})}
        (scratch / "opensm.conf").write_text(
            f"# fabroute ib compare: engine {engine}\n"
            + "".join(f"{k} {v}\n" for k, v in conf.items()))
        base_env, client_env, osm_env = ib.run_envs(sock, scratch, files.guids, tools)
        report: dict = {"engine": engine, "socket": sock}
        ibsim = ib.start_ibsim(files.dir / "fabric.net", lim, scratch, base_env,
                               max(timeout, 30.0), report)
        t0 = time.perf_counter()
        cmd = [ib._which("opensm"), "-F", str(scratch / "opensm.conf"), "-d2", "-e", "-f",
               str(osm_log), "-s", "0", "-x", "-l", str(files.lmc), "-R", engine]
        with open(scratch / "opensm.out", "wb") as out:
            opensm = subprocess.Popen(cmd, cwd=scratch, env=osm_env, stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT)
        why = ib._wait_for(opensm, osm_log, "SUBNET UP", timeout, fail=(NO_ENGINE,))
        wall = time.perf_counter() - t0
        res["log"] = parse_log(osm_log.read_text(errors="replace") if osm_log.exists()
                               else "", engine)
        res.update(subnet_up=res["log"]["subnet_up"], fell_back_to=res["log"]["fell_back_to"],
                   seconds=res["log"]["seconds"])
        if why:
            res["seconds"] = round(wall, 3)     # up to where we gave up
            res["error"] = f"opensm {why}"
            res["log_tail"] = ib._tails((osm_log, ib.LOG_TAIL), (scratch / "opensm.out", 4))
            return res
        try:
            answers, lft_keys, sl_keys = ib.read_back(tools, scratch, client_env, files, pairs,
                                                      max(timeout, 30.0), report)
        except RunFailed as e:
            res["error"] = f"read-back: {e}"
            return res
        res["readback"] = ib.read_values(files, answers, lft_keys, sl_keys, pairs)
        return res
    finally:
        ib._stop(opensm)    # OpenSM first: without its ibsim it ignores SIGTERM
        ib._stop(ibsim)
        if log_copy is not None and osm_log.exists():
            log_copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(osm_log, log_copy)
        shutil.rmtree(scratch, ignore_errors=True)


def write_readback(values: dict, base: IbFiles, pairs, dest: Path, title: str) -> list[str]:
    """Write what :func:`emulation.ibsim.apply.read_values` read from a fabric as IB files in
    ``dest``: ``lfts.dump`` (every LID of guids.json at every switch, as read; a switch that
    could not be read is left out, which the loaders refuse), ``sl2vl.dump`` (every row read;
    one that could not be read maps every SL to VL 15), ``path-sl.txt`` (the SL of every triple
    read, compacted by :func:`~tablegen.exports.infiniband.write.path_sl_rows`; triples not
    read — a sample on a large fabric — take the most common SL read), and the fabric's
    ``fabric.net``, ``guids.json`` and ``guid2lid`` copied from ``base``.  ``pairs``: the
    triples of :func:`emulation.ibsim.apply.path_pairs`, ``values["path_sls"]`` their SLs
    (:data:`~emulation.ibsim.apply.NO_SL`: not read).  Returns the problems to report (counts
    of what could not be read).  O(switches x LIDs + rows + triples), vectorised over the
    triples."""
    from tablegen.exports.infiniband.write import path_sl_rows

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("fabric.net", "guids.json", "guid2lid"):
        shutil.copyfile(base.dir / name, dest / name)
    guids = base.guids
    lids = sorted(fabric_lids(guids))
    top = lids[-1] if lids else 0
    lines = [f"# fabroute ib compare: LFTs read back from ibsim ({title})\n"]
    for s in guids["switches"]:
        g = int(s["guid"], 16)
        if g not in values["lfts"]:
            continue
        got = values["lfts"].forwarding(g, top + 1).tolist()
        lines.append(f"Unicast lids [0-{top}] of switch Lid {s['lid']} guid 0x{g:016x} "
                     f"('{s['name']}'):\n")
        lines += [f"0x{lid:04x} {got[lid]:03d}\n" for lid in lids]
        lines.append(f"{len(lids)} lids dumped\n")
    (dest / "lfts.dump").write_text("".join(lines))

    head = "#in out : " + " ".join(f"{k:<2d}" for k in range(NUM_SLS)) + "\n" + "#" + "-" * 56
    out = [f"# fabroute ib compare: SL2VL tables read back from ibsim ({title})\n"]
    names = {int(s["guid"], 16): (s["name"], s["lid"], "Switch") for s in guids["switches"]}
    names.update((int(h["port_guid"], 16), (h["name"], h["lid"], "Channel Adapter"))
                 for h in guids["hosts"])
    for g, rows in values["sl2vl"].items():
        name, lid, kind = names[g]
        out.append(f"{kind} 0x{g:016x}, base LID {lid}, \"{name}\"\n{head}\n")
        for (i, o), vls in sorted(rows.items(), key=lambda r: (r[0][1], r[0][0])):
            vls = vls if vls is not None else (VL_DROP,) * NUM_SLS
            out.append(f"{i:<3d} {o:<3d} :" + "".join(f" {v:<2d}" for v in vls) + "\n")
        out.append("#" + "-" * 56 + "\n\n")
    (dest / "sl2vl.dump").write_text("".join(out))

    hosts, switches = guids["hosts"], guids["switches"]
    n_h, n_off = len(hosts), 1 << base.lmc
    sls = values["path_sls"]
    read = sls != ib.NO_SL
    common = int(np.bincount(sls[read]).argmax()) if read.any() else 0
    sl = np.full((n_h, n_h + len(switches), n_off), common, dtype=np.uint8)
    to_host = read & (pairs["dst"] < n_h)
    sl[pairs["src"][to_host], pairs["dst"][to_host], pairs["off"][to_host]] = sls[to_host]
    to_sw = read & ~to_host         # a switch has one LID: every offset alike
    sl[pairs["src"][to_sw], pairs["dst"][to_sw], :] = sls[to_sw][:, None]
    src = [h["port_guid"] for h in hosts]
    dst = src + [s["guid"] for s in switches]
    rules = path_sl_rows(sl, src, dst)
    (dest / "path-sl.txt").write_text(
        f"# fabroute ib compare: PathRecord SLs read back from OpenSM's SA ({title})\n"
        "# src_port_guid dst_port_guid dlid_offset|* sl   ('*' = any; first match wins)\n"
        + "".join(f"{a} {b} {c} {d}\n" for a, b, c, d in rules))
    return [f"{n} {kind} queries failed" for kind, n in values["errors"].items() if n]
