"""``fabroute controller``: serve a table directory to OpenFlow switches."""

from __future__ import annotations

from pathlib import Path

from tablegen.errors import BadInput
from tablegen.exports.files import load_table_dir


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

    ts = load_table_dir(Path(args.dir))
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"controller: --listen {args.listen!r}; expected HOST:PORT, e.g. "
                       "127.0.0.1:6653")
    run(ts, args.listen, Path(args.status) if args.status else None,
        Path(args.log) if args.log else None)
    return 0
