"""How fast a failed cable is routed around (issue 27, "Reaction"): ``fabroute emulate SPEC
--routing R --fail A:B --json`` run N times under its probe stream (Mininet + Open vSwitch,
the real controller); per run the ms from the link going down to the port-status event and
to the new program in force (the flip's last barrier reply), the probes lost and misrouted,
whether the repair was prepared.  Prints one JSON line per run and a summary line; with
``--out`` also ``repair.json`` and ``repair.png`` (in-force time per run).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_repair.py slimfly:q=5 --routing min --runs 10
    PYTHONPATH=. .venv/bin/python benchmarks/bench_repair.py slimfly:q=5 --routing min --runs 3 --prepare-mib 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def one(spec: str, routing: str, fail: str, prepare_mib: int | None) -> dict:
    cmd = [sys.executable, "-m", "fabroute.cli", "emulate", spec, "--routing", routing,
           "--fail", fail, "--json"]
    if prepare_mib is not None:
        cmd += ["--prepare-mib", str(prepare_mib)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    try:
        rep = json.loads(run.stdout)
    except ValueError:
        return {"rc": run.returncode, "error": run.stderr.strip().splitlines()[-1:]}
    w = rep.get("loss_window", {})
    return {"rc": run.returncode, "ok": rep.get("ok"),
            "prepared": rep.get("update", {}).get("prepared"),
            "port_status_ms": w.get("port_status_ms"), "in_force_ms": w.get("in_force_ms"),
            "lost_to_ms": w.get("lost_to_ms"), "probes": rep.get("probes_sent"),
            "lost": rep.get("lost"), "misrouted": rep.get("misrouted"),
            "install_messages": next((p["messages"] for p in rep.get("update", {})
                                      .get("phases", []) if p["name"] == "install"), None),
            "prepared_repairs": rep.get("prepared")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--routing", default="min")
    ap.add_argument("--fail", default="0:1")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--prepare-mib", type=int)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    rows = []
    for i in range(a.runs):
        r = one(a.spec, a.routing, a.fail, a.prepare_mib)
        rows.append(r)
        print(json.dumps(dict(run=i, **r)), flush=True)
    done = [r for r in rows if r.get("in_force_ms") is not None]
    summary = {"spec": a.spec, "routing": a.routing, "fail": a.fail, "runs": a.runs,
               "prepare_mib": a.prepare_mib, "completed": len(done),
               "median_in_force_ms": statistics.median(r["in_force_ms"] for r in done)
               if done else None,
               "in_force_ms": [r["in_force_ms"] for r in done],
               "misrouted": sum(r["misrouted"] or 0 for r in done),
               "lost": [r["lost"] for r in done],
               "all_prepared": all(r["prepared"] for r in done),
               "all_ok": all(r.get("ok") for r in rows)}
    print(json.dumps(summary))
    if a.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "repair.json").write_text(json.dumps({"summary": summary, "runs": rows},
                                                      indent=1))
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.bar(range(len(done)), [r["in_force_ms"] for r in done], color="tab:blue",
               label="new program in force")
        ax.bar(range(len(done)), [r["port_status_ms"] for r in done], color="tab:gray",
               label="port status")
        ax.set_xlabel("run")
        ax.set_ylabel("ms after the link went down")
        ax.set_title(f"{a.spec} {a.routing} --fail {a.fail}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.out / "repair.png", dpi=120)
    return 0 if summary["all_ok"] and summary["misrouted"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
