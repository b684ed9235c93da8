"""``fabroute demo``: Slim Fly q = 5 through every part of fabroute — MIN, VAL_3h and UGAL-L
tables verified and exported; VAL_3h loaded into real OpenSM on ibsim and read back; VAL_3h
installed by the os-ken controller into Open vSwitch under Mininet, every host pair probed."""

from __future__ import annotations

import argparse
from pathlib import Path

from tablegen.cli import build_and_verify, console, force_option, print_failure, topology_of
from tablegen.errors import BadInput, RunFailed
from tablegen.exports.files import write_table_set
from tablegen.exports.outdir import (
    KINDS,
    check_out_dir,
    check_writable,
    own_kind,
    replaced_dir,
)

ROUTINGS = ("min", "val-3h", "ugal-l")
IB_DIR = "ib-val-3h"


def add_parser(sub) -> None:
    sp = sub.add_parser("demo", help="Slim Fly q=5: MIN, VAL_3h, UGAL-L tables, verified, "
                        "exported; VAL_3h loaded into OpenSM + ibsim and into Open vSwitch")
    sp.add_argument("--out", default="out/demo", metavar="DIR", help="directory of the "
                    "demo's table sets (DIR/ROUTING) and InfiniBand files (DIR/ib-val-3h)")
    force_option(sp)
    sp.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from rich.table import Table

    out = check_writable(args.out, "--out")
    _check_out(out, args.force)
    con = console()
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
        files, skipped = write_table_set(ts, rep, out / routing, ("json", "ib", "openflow"),
                                         force=args.force)
        for fmt, why in skipped.items():
            con.print(f"{routing}: {fmt} export skipped: {why}")
        table.add_row(routing, ",".join(rep.classes),
                      ",".join(str(c["max_hops"]) for c in rep.classes.values()),
                      str(ts.num_vcs), str(rep.cdg["dependencies"]), "yes", str(len(files)))
    con.print(table)
    if "val-3h" not in proven:
        return 1
    status |= _infiniband(proven["val-3h"], out / IB_DIR, con, args.force)
    return status | _emulation(proven["val-3h"], con)


def _check_out(out: Path, force: bool) -> None:
    """Refuse, before any work, an ``--out`` whose parts the demo must not replace: OUT
    itself a fabroute output (a batch, a table set, …) unless ``force``, and each directory
    the demo writes in it as :func:`~tablegen.exports.outdir.check_out_dir` does."""
    if out.is_dir() and (found := own_kind(out)) is not None and not force:
        raise BadInput(f"--out {out}: holds {KINDS[found]}, not {KINDS['demo']}; expected a "
                       "new path, an earlier demo's, or --force to replace its parts")
    for routing in ROUTINGS:
        check_out_dir(out / routing, kind="table-set", force=force)
    check_out_dir(out / IB_DIR, kind="ib-files", force=force)


def _routing(name: str) -> argparse.Namespace:
    return argparse.Namespace(routing=name, nonmin=None, vcs=None)


def _emulation(ts, con) -> int:
    """VAL_3h (``ts``, proven) installed by the os-ken controller into Open vSwitch under
    Mininet over TLS (mutual certificates), every host pair probed, sampled paths and VCs
    proven."""
    from rich.table import Table

    from emulation.mininet.ctl import free_port
    from emulation.mininet.session import run

    metrics, web = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    con.print(f"While it runs: the live fabric map on http://{web}/ and Prometheus metrics on "
              f"http://{metrics}/metrics (for a longer look: fabroute emulate SPEC --keep "
              "--web 127.0.0.1:8080 --metrics 127.0.0.1:9108)")
    try:
        with con.status("OpenFlow over TLS: Mininet + Open vSwitch, controller, probes…"):
            rep = run(ts, log=lambda *a: None, tls=True,
                      controller_extra=("--metrics", metrics, "--web", web))
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


def _infiniband(ts, out: Path, con, force: bool = False) -> int:
    """VAL_3h (``ts``, proven) on LMC 2 (offset 0 MIN, 1-3 VAL_3h trees) loaded into real
    OpenSM on ibsim."""
    from rich.table import Table

    from emulation.ibsim.apply import apply
    from tablegen.exports.infiniband.write import export_ib, ib_layers

    ib = ib_layers(ts, 2)
    with replaced_dir(out, kind="ib-files", force=force) as tmp:
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
