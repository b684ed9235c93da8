"""``fabroute controller``: serve a proven table directory to OpenFlow switches."""

from __future__ import annotations

from pathlib import Path

from tablegen.errors import BadInput


def add_parsers(sub) -> None:
    sp = sub.add_parser("controller", help="OpenFlow 1.3 controller (os-ken): install DIR's "
                        "tables into every switch that connects, verify, repair")
    sp.add_argument("dir", help="a 'fabroute tables' output directory")
    sp.add_argument("--listen", default="127.0.0.1:6653", help="HOST:PORT to listen on")
    sp.add_argument("--status", help="JSON file kept up to date with every switch's state")
    sp.add_argument("--log", help="log file (default stderr)")
    sp.set_defaults(func=cmd_controller)


def cmd_controller(args) -> int:
    from controller.openflow.launcher import run

    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"controller: --listen {args.listen!r}; expected HOST:PORT, e.g. "
                       "127.0.0.1:6653")
    ts = proven_tables(Path(args.dir))
    run(ts, args.listen, Path(args.status) if args.status else None,
        Path(args.log) if args.log else None)
    return 0


def proven_tables(d: Path):
    """The table set of ``d`` if, and only if, ``fabroute verify d`` would accept it: tables
    proven against what fabroute computes, every file checked against the manifest and
    derived again (:func:`tablegen.exports.files.prove_table_dir`).  Anything else is
    refused before a socket opens: one line, exit 2."""
    from tablegen.exports.files import prove_table_dir

    ts, rep, files = prove_table_dir(d)
    errors = rep.errors if not rep.ok else files["errors"] if not files["ok"] else []
    if errors:
        more = len(errors) + (files["error_count"] - len(files["errors"]) if files else 0) - 1
        raise BadInput(f"controller: {d} fails verification: {errors[0]}"
                       + (f" (and {more} more)" if more > 0 else "")
                       + "; expected a table set that 'fabroute verify' accepts")
    return ts
