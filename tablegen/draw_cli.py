"""``fabroute draw SPEC|DIR --out FILE.svg|png [--hosts] [--json]``: a fabric in its
natural layout (:mod:`tablegen.drawing`), as the papers draw it; with ``--json`` the
positions document the live map uses (docs/drawing.md).  Exit 2 on bad input, nothing
written."""

from __future__ import annotations

from pathlib import Path

from tablegen.errors import BadInput
from tablegen.output import emit, json_option


def add_parsers(sub) -> None:
    from tablegen.cli import SPEC_HELP

    sp = sub.add_parser("draw", help="draw a fabric in its natural layout (Slim Fly's two "
                        "subgraphs, Dragonfly's groups, DSN-F's ring with its shortcuts) "
                        "into an SVG or PNG")
    sp.add_argument("spec", metavar="SPEC|DIR", help=SPEC_HELP + "; or a table directory "
                    "(its topology)")
    sp.add_argument("--out", metavar="FILE.svg|FILE.png", help="the drawing to write; its "
                    "suffix picks the format (.svg or .png); needed unless --json")
    sp.add_argument("--hosts", action="store_true", help="also draw every host, a small "
                    "dot beside its switch (and list them in --json)")
    json_option(sp, "the positions document (switches with x, y in a unit box, cables as "
                "[a, b, kind], groups; docs/drawing.md)")
    sp.set_defaults(func=cmd_draw)


def _format(out: str) -> str:
    """The format ``--out``'s suffix names (bad input for any other suffix)."""
    from tablegen.drawing.render import FORMATS

    fmt = Path(out).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise BadInput(f"draw: --out {out}: suffix {Path(out).suffix or '(none)'!r}; "
                       "expected a file ending in .svg or .png")
    return fmt


def cmd_draw(args) -> int:
    """Check ``--out`` (suffix, writable, in an existing directory), build the topology,
    place it, draw it; print a summary, or with ``--json`` the positions document."""
    from tablegen.cli import topology_of
    from tablegen.drawing.positions import layout
    from tablegen.exports.outdir import check_out_file

    if args.out is None and not args.json:
        raise BadInput("draw: no --out; expected --out FILE.svg|FILE.png, or --json for "
                       "the positions")
    fmt = None
    if args.out is not None:
        fmt = _format(args.out)
        check_out_file(args.out, "--out", in_dir=True)
    lay = layout(topology_of(args.spec), hosts=args.hosts)
    if fmt is not None:
        from tablegen.drawing.render import render

        render(lay, args.out, fmt)
    doc = lay.to_dict()
    if args.out is not None:
        doc["out"] = str(args.out)
    emit(doc, args.json, text=_summary)
    return 0


def _summary(doc: dict) -> list[str]:
    kinds = ", ".join(f"{k['kind']} {k['count']}" for k in doc["cable_kinds"])
    failed = f", {len(doc['failed'])} failed" if doc["failed"] else ""
    return [f"{doc['topology']}: {doc['n_switches']} switches, {doc['n_hosts']} hosts, "
            f"{doc['n_cables']} cables ({kinds}{failed}); layout {doc['layout']}",
            f"wrote {doc['out']}"]
