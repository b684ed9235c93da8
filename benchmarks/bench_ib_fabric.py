"""The InfiniBand "Done when" of issue 26, one fabric per run: a plan cabled with random
GUIDs, permuted ports, REMOVE cables left out and MOVE moved, started in ibsim and read by
real ``ibnetdiscover``; ``reconcile`` (must name exactly those cables, exit 1), ``ib export
--fabric`` + ``verify`` + ``ib apply`` on it.  Then the cables are put right live, as
reconcile's actions say: the full tables are exported and verified for the cabling the
actions lead to (``reconcile --put-right``), and ``ib update DEGRADED FULL
--discover`` runs the degraded set on ibsim + OpenSM, carries the actions out with ibsim's
``Unlink``/``Link``, runs ``ibnetdiscover`` on the live subnet, loads the full tables and
reads them back; ``reconcile`` on that live ``ibnetdiscover`` must exit 0 and its cabling be
the one the full tables were made for.  Prints one JSON line of timings and outcomes.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ib_fabric.py slimfly:q=7 --remove 3 --move 2
    PYTHONPATH=. .venv/bin/python benchmarks/bench_ib_fabric.py dsnf:n=128 --remove 3 --move 2
    PYTHONPATH=. .venv/bin/python benchmarks/bench_ib_fabric.py dragonfly:p=2,a=4,h=2 --remove 3 --move 2
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from emulation.ibsim.discover import discover
from fabroute.cli import main
from tablegen.fabrics.cabled import cabled
from tablegen.fabrics.read import load_fabric
from tablegen.topologies.spec import build


def _run(argv) -> tuple[int, str, float]:
    """``fabroute ARGV``: exit status, stdout, seconds."""
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue(), round(time.perf_counter() - t0, 2)


def _round(spec, fabric, d: Path, routing: str, lmc: int, row: dict, tag: str,
           apply: bool = True) -> bool:
    rc, _, s = _run(["ib", "export", spec, "--fabric", str(fabric), "--routing", routing,
                     "--lmc", str(lmc), "--out", str(d)])
    row[f"{tag}_export"] = {"rc": rc, "s": s}
    if rc:
        return False
    rc, _, s = _run(["verify", str(d)])
    row[f"{tag}_verify"] = {"rc": rc, "s": s}
    if not apply:
        return rc == 0
    rc, text, s = _run(["ib", "apply", str(d), "--json"])
    rep = json.loads(text) if text.strip().startswith("{") else {}
    row[f"{tag}_apply"] = {"rc": rc, "s": s, "mismatches": rep.get("mismatches"),
                           "lft_entries": rep.get("lft", {}).get("entries")}
    return rc == 0


def main_(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--remove", type=int, default=3)
    ap.add_argument("--move", type=int, default=2)
    ap.add_argument("--routing", default="val-3h")
    ap.add_argument("--lmc", type=int, default=1)
    a = ap.parse_args(argv)
    topo = build(a.spec)
    c = cabled(topo, seed=a.seed, remove=a.remove, move=a.move)
    row: dict = {"spec": a.spec, "seed": a.seed, "remove": a.remove, "move": a.move,
                 "routing": a.routing, "lmc": a.lmc}
    with tempfile.TemporaryDirectory(prefix="bench-ib-fabric-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        fab = tmp / "ibnetdiscover.txt"
        fab.write_text(discover(c.fabric))
        row["ibnetdiscover_s"] = round(time.perf_counter() - t0, 2)
        rc, text, s = _run(["reconcile", str(fab), a.spec, "--json"])
        doc = json.loads(text) if rc in (0, 1) else {}
        fid = {p: g for g, p in c.switch.items()}
        truth = sorted(sorted((fid[x["cable"][0]], fid[x["cable"][2]]))
                       for x in c.removed + c.moved)
        named = sorted([sorted(m["between"]) for m in doc.get("missing", [])]
                       + [sorted([m["other_end"][0], m["plug_into"][0]])
                          for m in doc.get("moved", [])])
        row["reconcile"] = {"rc": rc, "s": s, "exact": named == truth,
                            "missing": len(doc.get("missing", [])),
                            "moved": len(doc.get("moved", []))}
        ok = rc == 1 and _round(a.spec, fab, tmp / "degraded", a.routing, a.lmc, row,
                                "degraded")
        # the technician carries out reconcile's actions on the running subnet: ibsim
        # Unlink/Link through ``ib update``, which then loads the full tables live
        fixed = tmp / "fixed.json"
        _run(["reconcile", str(fab), a.spec, "--put-right", str(fixed)])
        ok = _round(a.spec, fixed, tmp / "full", a.routing, a.lmc, row, "full",
                    apply=False) and ok
        live = tmp / "ibnetdiscover-after.txt"
        rc, text, s = _run(["ib", "update", str(tmp / "degraded"), str(tmp / "full"),
                            "--discover", str(live), "--json"])
        rep = json.loads(text) if text.strip().startswith("{") else {}
        row["update"] = {"rc": rc, "s": s, "mismatches": rep.get("mismatches"),
                         "ibsim_commands": rep.get("fabric", {}).get("ibsim_commands", {}),
                         "undelivered": rep.get("reach", {}).get("undelivered"),
                         "lft_entries": rep.get("after", {}).get("lft", {}).get("entries")}
        rc2, _, s2 = _run(["reconcile", str(live), a.spec])
        same = rc2 in (0, 1) and load_fabric(live).cables == load_fabric(fixed).cables
        row["fixed_reconcile"] = {"rc": rc2, "s": s2, "cabling_as_put_right": same}
        ok = rc == 0 and rc2 == 0 and same and ok
    row["ok"] = ok
    print(json.dumps(row))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main_())
