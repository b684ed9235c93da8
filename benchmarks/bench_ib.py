"""InfiniBand round trip: export, load into OpenSM on ibsim, read back, compare — and OpenSM's
own minhop on the same fabric.

Per case (each ``fabroute`` step in its own process, so wall time includes start-up):

1. ``fabroute ib export SPEC --routing R [--lmc L] --out DIR``            (export)
2. ``fabroute ib apply DIR``: ibsim + OpenSM (engine ``fabroute``), read back LFTs, SL2VL,
   PathRecord SLs, compare; its report's timings are recorded                 (apply)
3. ibsim + ``opensm -R minhop`` (no plugin, no QoS) on the same ``fabric.net``: seconds from
   OpenSM's start to ``SUBNET UP``                                            (minhop)
4. the same with ``-R file -U lfts.dump`` (no plugin, no QoS): our LFTs alone  (file)

Usage::

    .venv/bin/python benchmarks/bench_ib.py [--case sf13 ...] [--json out.json] [--keep]

Cases: sf13 (Slim Fly q=13 MIN, the issue's benchmark), sf17, sf19, sf23 (larger Slim Flies,
MIN), sf5-val3h (Slim Fly q=5 VAL_3h, LMC 2).  Prints one JSON object per case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emulation.ibsim import apply as ib_apply  # noqa: E402
from tablegen.exports.infiniband.read import load_ib_files  # noqa: E402

FABROUTE = [sys.executable, "-m", "fabroute.cli"]
CASES = {
    "sf13": ("slimfly:q=13", "min", 0),
    "sf17": ("slimfly:q=17", "min", 0),
    "sf19": ("slimfly:q=19", "min", 0),
    "sf23": ("slimfly:q=23", "min", 0),
    "sf5-val3h": ("slimfly:q=5", "val-3h", 2),
}


def _timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    return time.perf_counter() - t, res


def opensm_only(d: Path, engine: list[str], timeout: float = 1800) -> dict:
    """ibsim on ``d/fabric.net`` + OpenSM with ``engine`` (e.g. ``["-R", "minhop"]``), no
    plugin and no QoS; seconds from OpenSM's start to SUBNET UP.  Stops both by PID."""
    ts = load_ib_files(d)
    lim = ts.guids["ibsim_limits"]
    sock = f"fabroute-bench-{os.getpid()}-{time.monotonic_ns()}"
    scratch = Path(tempfile.mkdtemp(prefix=f"{sock}-"))
    for sub in ("osm-tmp", "osm-cache"):
        (scratch / sub).mkdir()
    shutil.copy(ts.dir / "guid2lid", scratch / "osm-cache" / "guid2lid")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["IBSIM_SOCKNAME"] = sock
    cenv = dict(env, LD_PRELOAD=ib_apply.UMAD2SIM, SIM_HOST=ts.guids["hosts"][0]["name"],
                OSM_TMP_DIR=str(scratch / "osm-tmp"), OSM_CACHE_DIR=str(scratch / "osm-cache"))
    ibsim = osm = None
    try:
        with open(scratch / "ibsim.log", "wb") as log:
            ibsim = subprocess.Popen(
                [ib_apply._which("ibsim"), "-s", "-n", "-N", str(lim["N"]), "-S", str(lim["S"]),
                 "-P", str(lim["P"]), "-L", str(lim["L"]), str(ts.dir / "fabric.net")],
                cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        why = ib_apply._wait_for(ibsim, scratch / "ibsim.log", "Network simulator ready.", 300)
        if why:
            raise RuntimeError(f"ibsim {why}")
        t = time.perf_counter()
        with open(scratch / "opensm.out", "wb") as out:
            osm = subprocess.Popen(
                [ib_apply._which("opensm"), "-d2", "-e", "-f", str(scratch / "opensm.log"),
                 "-s", "0", "-x", "-l", str(ts.lmc), *engine],
                cwd=scratch, env=cenv, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT)
        why = ib_apply._wait_for(osm, scratch / "opensm.log", "SUBNET UP", timeout)
        if why:
            raise RuntimeError(f"opensm {why}")
        up = time.perf_counter() - t
        log = (scratch / "opensm.log").read_text(errors="replace")
        return {"subnet_up_s": round(up, 2),
                "tables_configured": next((l.split("-> ", 1)[1] for l in log.splitlines()
                                           if "tables configured" in l), None)}
    finally:
        ib_apply._stop(osm)
        ib_apply._stop(ibsim)
        shutil.rmtree(scratch, ignore_errors=True)


def run_case(name: str, keep: bool) -> dict:
    spec, routing, lmc = CASES[name]
    work = Path(tempfile.mkdtemp(prefix=f"bench-ib-{name}-"))
    d = work / "ib"
    row: dict = {"case": name, "spec": spec, "routing": routing, "lmc": lmc}
    try:
        cmd = FABROUTE + ["ib", "export", spec, "--routing", routing, "--lmc", str(lmc),
                          "--out", str(d)]
        t, res = _timed(cmd)
        if res.returncode:
            raise RuntimeError(f"export failed: {res.stderr.strip()[-500:]}")
        row["export_s"] = round(t, 2)
        row["export_cmd"] = "fabroute " + " ".join(cmd[3:])
        row["files_mib"] = round(sum(f.stat().st_size for f in d.iterdir()) / 2**20, 1)
        cmd = FABROUTE + ["ib", "apply", str(d), "--json"]
        timecmd = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
        t, res = _timed(timecmd + cmd)
        rep = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
        if timecmd:
            try:
                row["apply_peak_rss_mib"] = round(int(res.stderr.strip().splitlines()[-1]) / 1024)
            except (ValueError, IndexError):
                pass
        row["apply_s"] = round(t, 2)
        row["apply_exit"] = res.returncode
        if "error" in rep or not rep:
            row["apply_error"] = rep.get("error") or res.stderr.strip()[-500:]
        else:
            row["apply_timings"] = rep["timings"]
            row["readback"] = rep["readback"]
            for k in ("lft", "sl2vl", "path_sl"):
                row[k] = {"entries": rep[k]["entries"], "mismatches": rep[k]["mismatches"]}
            row["path_sl"]["sampled"] = rep["path_sl"]["sampled"]
            row["path_sl"]["pairs_total"] = rep["path_sl"]["pairs_total"]
            g = json.loads((d / "guids.json").read_text())
            row["switches"], row["hosts"] = len(g["switches"]), len(g["hosts"])
        row["minhop"] = opensm_only(d, ["-R", "minhop"])
        row["file_engine_only"] = opensm_only(d, ["-R", "file,no_fallback",
                                                  "-U", str(d / "lfts.dump")])
    finally:
        if keep:
            row["dir"] = str(work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", choices=list(CASES))
    ap.add_argument("--json", help="append the rows (JSON lines) to this file")
    ap.add_argument("--keep", action="store_true", help="keep the exported files")
    args = ap.parse_args(argv)
    missing = ib_apply.binaries_missing()
    if missing:
        print(f"bench_ib: missing {', '.join(missing)}; {ib_apply.APT_HINT}", file=sys.stderr)
        return 2
    ib_apply.build_tools()          # not part of the timings
    for name in args.case or ["sf13"]:
        row = run_case(name, args.keep)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
