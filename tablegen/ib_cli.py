"""tablegen's ``fabroute ib`` sub-commands: ``ib export`` (the InfiniBand files of a proven
table set, or of its IB-native variant) and ``ib import`` (IB files read back as a table
set).  :func:`add_ib_parsers` adds them; exit codes: :mod:`tablegen.errors`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tablegen.cli import (
    SPEC_HELP,
    bound_topology,
    console,
    fabric_option,
    force_option,
    routing_args,
    verified_tables,
)
from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.files import TABLES_NPZ, TOPOLOGY_FILE
from tablegen.exports.outdir import check_out_dir, replaced_dir
from tablegen.output import emit, json_option


def cmd_ib_export(args) -> int:
    from tablegen.exports.infiniband.climb import CLIMB
    from tablegen.exports.infiniband.lids import lid_plan
    from tablegen.exports.infiniband.native import VARIANT
    from tablegen.exports.infiniband.phases import PHASE
    from tablegen.exports.infiniband.sls import check_variant
    from tablegen.exports.infiniband.write import default_lmc, export_ib, ib_layers, ib_record
    from tablegen.exports.fabric_files import write_fabric_files
    from tablegen.exports.manifest import write_manifest
    from tablegen.exports.writer import json_chunks, write_in_place

    check_out_dir(args.out, kind="ib-export", force=args.force)    # before any work
    con = console()
    asked = [v for v, on in ((VARIANT, args.ib_native), (CLIMB, args.ib_climb),
                             (PHASE, args.ib_phase)) if on]
    if len(asked) > 1:
        raise BadInput(f"ib export: {' and '.join('--' + v for v in asked)}: expected one IB "
                       f"variant")
    variant = asked[0] if asked else None
    if variant and args.lmc is None:
        args.lmc = 0        # an IB variant is one tree per destination
    if variant:
        try:
            check_variant(variant, args.lmc, args.seed, args.routing)
        except NotExpressible as e:
            raise BadInput(f"ib export: --{variant}: {e}") from None
    topo, binding = bound_topology(args)
    try:
        if args.lmc is not None:
            lid_plan(topo, args.lmc)     # bad input before any work
    except NotExpressible as e:
        raise BadInput(f"ib export: --lmc {args.lmc}: {e}") from None
    ts, rep = verified_tables(topo, args, con, "ib export")
    if ts is None:
        return 1
    lmc, why = args.lmc if args.lmc is not None else default_lmc(ts), None
    while True:
        what = f"{variant} trees" if variant else f"InfiniBand layers (LMC {lmc})"
        try:
            with con.status(f"{what}, SLs, IB verification…"):
                ib = ib_layers(ts, lmc, args.seed, variant)
            break
        except NotExpressible as e:
            if args.lmc is not None or lmc == 0:
                raise BadInput(f"ib export: {e}") from None
            lmc, why = 0, f"LMC {lmc} cannot be expressed: {e}"
    manifest_ib = dict(ib_record(ts, lmc, args.seed, "", why),
                       **({"variant": variant} if variant else {}))
    if manifest_ib.get("min_only"):
        print(f"ib export: {args.out} carries MIN only: {manifest_ib['min_only']}",
              file=sys.stderr)
    with con.status(f"writing {args.out}…"), replaced_dir(Path(args.out), kind="ib-export",
                                                           force=args.force) as tmp:
        files = export_ib(ts, tmp, lmc=lmc, seed=args.seed, flat=True, ib=ib, binding=binding)
        ts.save_npz(tmp / TABLES_NPZ)
        write_in_place(str(tmp / TOPOLOGY_FILE), json_chunks(topo.to_dict()))
        bound = {} if binding is None else {"fabric": write_fabric_files(tmp, binding)}
        write_manifest(tmp, rep, {"json": False, "report": False, "openflow": False,
                                  "ib": manifest_ib, **bound}, kind="ib-export")
    layers, irep = ib
    summary = {"out": args.out, "routing": ts.routing, "topology": topo.name(), "lmc": lmc,
               "variant": variant, "files": sorted(Path(f).name for f in files),
               **{k: irep[k] for k in ("sls_used", "vls_used", "vl_max", "data_vls",
                                       "vl_scheme")},
               **({"fabric": binding.summary} if binding is not None else {}),
               **{k: layers.info[k] for k in ("escape_destinations",) if k in layers.info},
               "layers": [{k: lay[k] for k in ("offset", "kind", "max_hops", "hist")}
                          for lay in irep["layers"]]}
    emit(summary, args.json, _export_text)
    return 0


def _export_text(s: dict) -> list[str]:
    """``ib export``'s summary as text."""
    variant = f" ({s['variant']})" if s["variant"] else ""
    lines = [f"{s['routing']}{variant} on {s['topology']}, LMC {s['lmc']}: {len(s['files'])} "
             f"files -> {s['out']}",
             f"  {s['sls_used']} SLs, {s['vls_used']} VLs (max VL {s['vl_max']}) of "
             f"{s['data_vls']} data VLs"]
    for lay in s["layers"]:
        hist = " ".join(f"{h}:{c}" for h, c in lay["hist"].items())
        lines.append(f"  offset {lay['offset']} {lay['kind']}: max {lay['max_hops']} hops; "
                     f"hops:pairs {hist}")
    return lines


def cmd_ib_import(args) -> int:
    """``fabroute ib import DIR --out TABLEDIR`` (:func:`~tablegen.exports.infiniband.imports.
    import_dir`): exit 1, nothing written, when the LFTs do not deliver every pair."""
    from tablegen.exports.infiniband.imports import import_dir

    check_out_dir(args.out, kind="table-set", force=args.force)
    try:
        res = import_dir(Path(args.dir), Path(args.out), args.engine, force=args.force)
    except BadInput as e:
        raise BadInput(f"ib import: {e}") from None
    for e in res.get("errors", ()):
        print(f"ib import: {e}", file=sys.stderr)
    if res["ok"]:
        emit(res, args.json)
    return 0 if res["ok"] else 1


def add_ib_parsers(ib) -> None:
    """Add ``export`` and ``import`` to the ``fabroute ib`` sub-parsers."""
    from tablegen.limits import lmc_option, seed_option

    sp = ib.add_parser("export", help="LMC layers, SLs and SL2VL for OpenSM + ibsim: writes "
                       "fabric.net, guids.json, guid2lid, lfts.dump, sl2vl.dump, path-sl.txt")
    sp.add_argument("spec", help=SPEC_HELP)
    routing_args(sp)
    sp.add_argument("--lmc", type=lmc_option, help="LIDs per host = 2^LMC (0..7); "
                    "offset k is routed by layer k (0 = minimal, others the routing's "
                    "non-minimal paths); default 1 for a routing with a non-minimal class "
                    "(0, said on stderr and in the manifest, where 1 cannot be expressed), "
                    "else 0; LMC 0 carries a non-minimal routing's MIN paths only")
    sp.add_argument("--seed", type=seed_option, default=1, help="seed of the Valiant layers' "
                    "targets, 0 <= SEED < 2**32")
    sp.add_argument("--ib-native", action="store_true", help="the routing's IB-native variant "
                    "(labelled so in every file): per destination a tree chosen on the "
                    "channel dependency graph, nearest the routing's own, and an up*/down* "
                    "escape layer; for fabrics where the routing's own paths do not fit 8 VLs "
                    "(LMC 0)")
    sp.add_argument("--ib-climb", action="store_true", help="with --routing min: the "
                    "near-minimal ib-climb variant (labelled so in every file): per "
                    "destination a shortest-path tree (detours of a few hops, at most 12 hops) "
                    "and an SL per switch pair whose VLs climb, turn by turn, at the breaks of "
                    "a global channel order; for fabrics where MIN does not fit 8 VLs (LMC 0)")
    sp.add_argument("--ib-phase", action="store_true", help="with --routing min on DSN-F: "
                    "the ib-phase variant (labelled so in every file): load-balanced trees "
                    "whose paths go clockwise, then counter-clockwise around the ring, VLs by "
                    "direction and an SL-chosen dateline; it scales where ib-climb's labels "
                    "run out (DSN-F n >= 2,048; LMC 0)")
    sp.add_argument("--out", required=True, metavar="DIR", help="directory to write the IB "
                    "files into (with the tables and a manifest: `verify DIR` proves it)")
    fabric_option(sp)
    json_option(sp, "the export's summary")
    force_option(sp)
    sp.set_defaults(func=cmd_ib_export)

    sp = ib.add_parser("import", help="turn IB files (fabric.net, guids.json, guid2lid, "
                       "lfts.dump, sl2vl.dump, path-sl.txt in DIR or DIR/ib: an export, or "
                       "what ib compare read back) into a table set that verify, analyze "
                       "--throughput-bound and the simulator take; one table per destination "
                       "host index and LID offset")
    sp.add_argument("dir", help="directory holding the IB files (or DIR/ib)")
    sp.add_argument("--out", required=True, metavar="TABLEDIR", help="table directory to "
                    "write (verify, simulate and analyze take it)")
    force_option(sp)
    sp.add_argument("--engine", help="name of the router the files come from (recorded)")
    json_option(sp, "the import's report")
    sp.set_defaults(func=cmd_ib_import)
