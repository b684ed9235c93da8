"""The ``standard`` OpenFlow 1.3 profile on a strict OpenFlow 1.3 switch (issue 26): Slim Fly
q = 5 under Mininet with CPqD's ofsoftswitch13 (``UserSwitch``: ``ofdatapath`` +
``ofprotocol``) as every switch and the real ``fabroute controller``.

Per routing: ``fabroute tables --openflow-profile standard`` (written and verified), served by
the controller; every switch read back and verified with no OpenFlow error; every ordered host
pair delivered once to the right host; ``--path-pairs`` sampled probes proven on the exact
switch path and VCs the tables promise (``emulation/mininet/pathcheck.py``, the check of
``tests/test_openflow_standard_ovs.py``).  Prints a Markdown table; exit 1 if any check fails.

    PATH=/work/ofss/prefix/bin:$PATH .venv/bin/python benchmarks/bench_ofss.py \\
        [--routings min,val,val-nta,val-3h,ugal-l] [--path-pairs 40]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROUTINGS = ["min", "val", "val-nta", "val-3h", "ugal-l"]


def run_routing(fnet, prober, port: int, tmp: Path, spec: str, routing: str,
                path_pairs: int) -> dict:
    """Serve ``routing``'s standard program to the net and check it; returns the figures
    (``ok`` False with ``why`` on the first failed check)."""
    from emulation.mininet.ctl import Controller
    from emulation.mininet.pathcheck import PathChecker, sample_pairs
    from tablegen.exports.files import load_table_dir

    fabroute = str(Path(sys.executable).parent / "fabroute")
    out = tmp / routing
    r = subprocess.run([fabroute, "tables", spec, "--routing", routing, "--formats",
                        "json,openflow", "--openflow-profile", "standard", "--out", str(out)],
                       capture_output=True, text=True)
    if r.returncode:
        return {"routing": routing, "ok": False, "why": (r.stdout + r.stderr)[-500:]}
    n = fnet.topo.n_switches
    ctl = Controller(out, port, tmp, name=f"ctl-{routing}")
    try:
        t_ver = ctl.wait_verified(n, timeout=300)
        st = ctl.status()
        flows = sum(v.get("flow_mods", 0) for v in st["per_switch"].values())
        groups = sum(v.get("group_mods", 0) for v in st["per_switch"].values())
        errors = sum(v.get("errors", 0) for v in st["per_switch"].values())
        repairs = sum(v.get("repairs", 0) for v in st["per_switch"].values())
        t0 = time.perf_counter()
        rep = prober.all_pairs()
        t_pairs = time.perf_counter() - t0
        ts = load_table_dir(out)
        t0 = time.perf_counter()
        with PathChecker(fnet, ts, prober, profile="standard") as pc:
            res = [pc.check(s, d) for s, d in sample_pairs(fnet, path_pairs, seed=26)]
        t_paths = time.perf_counter() - t0
        bad = [(x.src, x.dst, x.problems) for x in res if not x.ok]
        ok = (st["failed"] == 0 and groups == 0 and errors == 0 and rep.delivered == rep.pairs
              and rep.misdelivered == 0 and rep.duplicates == 0 and not bad)
        return {"routing": routing, "ok": ok, "verified_s": t_ver, "flow_mods": flows,
                "group_mods": groups, "errors": errors, "repairs": repairs, "pairs": rep.pairs, "delivered": rep.delivered,
                "misdelivered": rep.misdelivered, "duplicates": rep.duplicates,
                "pairs_s": t_pairs, "paths_ok": len(res) - len(bad), "paths": len(res),
                "paths_s": t_paths, "why": str(bad[:2]) if bad else ""}
    except Exception as e:                        # noqa: BLE001 - reported per routing
        return {"routing": routing, "ok": False, "why": f"{type(e).__name__}: {e}"[:1500]}
    finally:
        ctl.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="slimfly:q=5")
    ap.add_argument("--routings", default=",".join(ROUTINGS))
    ap.add_argument("--path-pairs", type=int, default=40)
    ap.add_argument("--workdir", help="keep table sets and controller logs here "
                    "(default: a temporary directory)")
    a = ap.parse_args()
    from emulation.mininet.ctl import free_port
    from emulation.mininet.net import emulate
    from emulation.mininet.ofss import available
    from emulation.mininet.probes import Prober
    from tablegen.topologies.spec import build

    why = available()
    if why:
        print(why, file=sys.stderr)
        return 2
    topo = build(a.spec)
    port = free_port()
    rows = []
    t0 = time.perf_counter()
    with (contextlib.nullcontext(a.workdir) if a.workdir else
          tempfile.TemporaryDirectory(prefix="bench-ofss-")) as d, \
            emulate(topo, controller_port=port, prefix="u", datapath="ofss") as fnet, \
            Prober(fnet) as prober:
        build_s = time.perf_counter() - t0
        for routing in a.routings.split(","):
            rows.append(run_routing(fnet, prober, port, Path(d), a.spec, routing,
                                    a.path_pairs))
            print(rows[-1], file=sys.stderr, flush=True)
    print(f"{a.spec}, ofsoftswitch13, {topo.n_switches} switches, {len(fnet.host_ids)} hosts; "
          f"net built in {build_s:.1f} s")
    print("| routing | verified (s) | flow-mods | group-mods | OpenFlow errors | repairs "
          "| pairs delivered | all pairs (s) | paths proven | path check (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "pairs" not in r:
            print(f"| {r['routing']} | failed: {r['why'][:200]} | | | | | | | | |")
            continue
        print(f"| {r['routing']} | {r['verified_s']:.1f} | {r['flow_mods']} | "
              f"{r['group_mods']} | {r['errors']} | {r['repairs']} | {r['delivered']}/{r['pairs']} | {r['pairs_s']:.1f} | "
              f"{r['paths_ok']}/{r['paths']} | {r['paths_s']:.1f} |")
    for r in rows:
        if not r["ok"]:
            print(f"FAILED {r['routing']}: {r['why']}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
