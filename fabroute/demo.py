"""``fabroute demo``: Slim Fly q = 5 through every part of fabroute — MIN, VAL_3h and UGAL-L
tables verified and exported; VAL_3h loaded into real OpenSM on ibsim and read back; VAL_3h
installed by the os-ken controller into Open vSwitch under Mininet, every host pair probed."""

from __future__ import annotations

import argparse
from pathlib import Path

from tablegen.cli import build_and_verify, console, print_failure, topology_of
from tablegen.errors import BadInput, RunFailed
from tablegen.exports.files import write_table_set
from tablegen.exports.outdir import replaced_dir

ROUTINGS = ("min", "val-3h", "ugal-l")


def add_parser(sub) -> None:
    sp = sub.add_parser("demo", help="Slim Fly q=5: MIN, VAL_3h, UGAL-L tables, verified, "
                        "exported; VAL_3h loaded into OpenSM + ibsim and into Open vSwitch")
    sp.add_argument("--out", default="out/demo", metavar="DIR", help="directory for the "
                    "three table sets and the IB export")
    sp.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from rich.table import Table

    con = console()
    out = Path(args.out)
    topo = topology_of("slimfly:q=5")
    table = Table(title=f"fabroute demo: {topo.name()} ({topo.n_switches} switches, "
                        f"{topo.n_hosts} hosts) -> {out}")
    for col in ("routing", "classes", "max hops", "VCs", "CDG deps", "verified", "files"):
        table.add_column(col)
    status = 0
    proven = {}     # each routing built and proven once: the IB and OpenFlow runs reuse it
    for routing in ROUTINGS:
        ts, rep = build_and_verify(topo, _routing(routing), con)
        if not rep.ok:
            print_failure(rep.errors)
            status = 1
            continue
        proven[routing] = ts
        files, skipped = write_table_set(ts, rep, out / routing, ("json", "ib", "openflow"))
        for fmt, why in skipped.items():
            con.print(f"{routing}: {fmt} export skipped: {why}")
        table.add_row(routing, ",".join(rep.classes),
                      ",".join(str(c["max_hops"]) for c in rep.classes.values()),
                      str(ts.num_vcs), str(rep.cdg["dependencies"]), "yes", str(len(files)))
    con.print(table)
    if "val-3h" not in proven:
        return 1
    status |= _infiniband(proven["val-3h"], out / "ib-val-3h", con)
    return status | _emulation(proven["val-3h"], con)


def _routing(name: str) -> argparse.Namespace:
    return argparse.Namespace(routing=name, nonmin=None, vcs=None)


def _emulation(ts, con) -> int:
    """VAL_3h (``ts``, proven) installed by the os-ken controller into Open vSwitch under
    Mininet over TLS (mutual certificates), every host pair probed, sampled paths and VCs
    proven."""
    from rich.table import Table

    from emulation.mininet.session import run

    try:
        with con.status("OpenFlow over TLS: Mininet + Open vSwitch, controller, probes…"):
            rep = run(ts, log=lambda *a: None, tls=True)
    except RunFailed as e:
        con.print(f"[red]emulation: {e}")
        return 1
    t = Table(title=f"OpenFlow {ts.routing} over TLS on Open vSwitch (Mininet, os-ken)")
    for col in ("switches verified after", "flow-mods", "host pairs", "delivered",
                "paths proven", "mismatches"):
        t.add_column(col)
    t.add_row(f"{rep['times']['verified_after']:.1f} s", str(rep["flow_mods"]),
              str(rep["pairs"]), str(rep["delivered"]), str(rep["path_checks"]),
              str(rep["path_mismatches"]))
    con.print(t)
    return 0 if rep["ok"] else 1


def _infiniband(ts, out: Path, con) -> int:
    """VAL_3h (``ts``, proven) on LMC 2 (offset 0 MIN, 1-3 VAL_3h trees) loaded into real
    OpenSM on ibsim."""
    from rich.table import Table

    from emulation.ibsim.apply import apply
    from tablegen.exports.infiniband.write import export_ib, ib_layers

    ib = ib_layers(ts, 2)
    with replaced_dir(out) as tmp:
        export_ib(ts, tmp, lmc=2, flat=True, ib=ib)
    with con.status("InfiniBand: ibsim + OpenSM load, read back, compare…"):
        try:
            rep = apply(out)
        except (RunFailed, BadInput) as e:
            con.print(f"[red]InfiniBand: {e}")
            return 1
    t = Table(title=f"InfiniBand {ts.routing} LMC 2 ({ib[1]['sls_used']} SLs, "
                    f"{ib[1]['vls_used']} VLs) in OpenSM + ibsim")
    for col in ("kind", "entries", "mismatches"):
        t.add_column(col)
    for kind in ("lft", "sl2vl", "path_sl"):
        t.add_row(kind, str(rep[kind]["entries"]), str(rep[kind]["mismatches"]))
    con.print(t)
    return 0 if rep["ok"] else 1
