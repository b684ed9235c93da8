"""``fabroute verify DIR`` (:func:`verify_dir`): a table directory proven — its tables
against what fabroute computes, every file against the manifest and the tables, the
InfiniBand semantics of its IB files (or, where none were written, what InfiniBand would make
of the tables, never reported as files that passed) — or every routing of a batch (the OUT of
``fabroute tables`` with several routings).  Exit codes: :mod:`tablegen.errors`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.files import TOPOLOGY_FILE


def print_failure(errors, what: str | None = None, where: str = "") -> None:
    """Verify's errors on stderr; with ``what`` (``cmd: routing on topology``) the line
    saying nothing was written."""
    for e in errors:
        print(f"verify: {e}", file=sys.stderr)
    if what is not None:
        print(f"{what} failed verification; nothing written{where}", file=sys.stderr)


def verify_dir(args) -> int:
    """``fabroute verify DIR``: a table set (or IB export) proven, or every routing of a batch
    (the OUT of ``tables`` with several, :func:`_verify_batch`); exit 1 when one fails."""
    from tablegen.exports.outdir import kind_of

    d = Path(args.dir)
    if d.is_dir() and not (d / TOPOLOGY_FILE).exists() and kind_of(d) == "batch":
        return _verify_batch(d, args)
    status, doc = _verify_set(d, args)
    if args.json:
        print(json.dumps(doc, indent=1))
    return status


def _verify_batch(d: Path, args) -> int:
    """Every routing of batch ``d``: those its routings.json lists (one it lists as not
    written is a failure) and every table set in it, each proven as ``verify DIR/ROUTING``
    would; a set that does not load fails its routing, not the command."""
    from tablegen.exports.outdir import _json

    index = _json(d / "routings.json")
    listed = [r for r in index.get("routings", []) if isinstance(r, str)]
    present = sorted(k.name for k in d.iterdir() if k.is_dir() and not k.is_symlink())
    names = listed + [r for r in present if r not in listed]
    if not args.json:
        print(f"{d}: a batch of {len(names)} routings"
              f"{' on ' + index['topology'] if isinstance(index.get('topology'), str) else ''}")
    docs, failed = {}, []
    for r in names:
        if (d / r).is_dir():
            status, doc = _verify_set(d / r, args, in_batch=True)
        else:
            why = f"{d / r}: not written (listed in routings.json; its tables failed " \
                  "verification when 'fabroute tables' ran)"
            print(f"verify: {why}", file=sys.stderr)
            if not args.json:
                print(f"{r}: FAILED; not written")
            status, doc = 1, {"ok": False, "routing": r, "errors": [why]}
        docs[r] = doc
        if status:
            failed.append(r)
    if args.json:
        print(json.dumps({"dir": str(d), "kind": "batch", "ok": not failed,
                          "topology": index.get("topology"), "routings": docs}, indent=1))
    else:
        print(f"{d}: {len(names) - len(failed)} of {len(names)} routings verified"
              + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _verify_set(d: Path, args, in_batch: bool = False) -> tuple[int, dict]:
    """Prove table directory ``d`` (tables, files, InfiniBand), printing its text report
    unless ``args.json``; returns ``(exit status, JSON report)``.  ``in_batch``: a set that
    does not load is a failure (exit 1), not bad input."""
    from tablegen.exports.files import prove_table_dir
    from tablegen.exports.infiniband.read import find_ib_dir, load_ib_files
    from tablegen.exports.infiniband.verify_files import verify_ib_files
    from tablegen.routing.imported import IMPORTED

    try:
        ts, rep, files = prove_table_dir(d)
    except BadInput as e:
        if not in_batch:
            raise
        print(f"verify: {e}", file=sys.stderr)
        if not args.json:
            print(f"{d.name}: FAILED; {e}")
        return 1, {"ok": False, "routing": d.name, "errors": [str(e)]}
    ib = ib_files = binding = None
    exported = (files or {}).get("exports", {}).get("ib")
    # a set bound to a fabric as cabled: its IB files are walked on that fabric's wiring
    bound = (files or {}).get("exports", {}).get("fabric")
    if rep.ok and ts.routing == IMPORTED:
        ib, ib_files = _imported_ib(ts, files, args, d)
    elif rep.ok and files["ok"] and not exported:
        # no IB files: what InfiniBand would make of the tables, never a verdict on files
        lmc, seed, variant = _ib_params(exported, args, d)
        ib = dict(_ib_report(ts, lmc, seed, variant), exported=False,
                  not_exported=_not_exported(files.get("exports", {})))
    elif rep.ok and files["ok"] and not args.walk_ib_files and not bound:
        # the IB files are byte for byte what the proven layers give (derived again above):
        # their semantics are the layers', proven on the arrays (verify_ib)
        lmc, seed, variant = _ib_params(exported, args, d)
        ib = _ib_report(ts, lmc, seed, variant)
    elif rep.ok:
        # asked for, or the files differ: walk every packet through the files themselves
        try:
            ib_dir = find_ib_dir(d, required=False)
            ib_files = load_ib_files(ib_dir) if ib_dir is not None else None
        except BadInput as e:
            if files["ok"]:     # the files the manifest vouches for must load
                raise BadInput(f"verify: {e}") from None
            files["errors"].append(str(e))
        else:
            exported = exported if ib_files is None else {
                "lmc": ib_files.lmc, "seed": int(ib_files.guids.get("ib", {}).get("seed", 1))}
            lmc, seed, variant = _ib_params(exported, args, d)
            if bound and files["ok"]:
                from tablegen.exports.fabric_files import load_bound

                binding, _ = load_bound(d, bound, ts.topo)     # proven by prove_table_dir
            ib = (verify_ib_files(ib_files, ts, binding=binding) if ib_files is not None
                  else _ib_report(ts, lmc, seed, variant))
    if ib is not None and ib.get("exported", True):
        ib["min_only"] = _min_only(ts, ib, (files or {}).get("exports", {}).get("ib"))
    if not args.json:
        print(f"{rep.topology} {rep.routing}: {'OK' if rep.ok else 'FAILED'}; "
              f"VCs used {rep.vcs_used} of {rep.num_vcs}; CDG {rep.cdg.get('dependencies', 0)} "
              f"dependencies, acyclic={not rep.cycle}")
        for name, c in rep.classes.items():
            print(f"  {name}: max {c['max_hops']} hops (bound {c['bound']}, recomputed)")
        if files is not None:
            print(f"  files: {files['checked']} of {files['files']} in the manifest checked, "
                  f"{files['derived']} derived again from the proven tables: "
                  f"{'OK' if files['ok'] else 'FAILED'}")
            exports = files.get("exports", {})
            if exports.get("openflow"):
                print(f"  OpenFlow program: profile {exports.get('openflow_profile', 'ovs')}")
        if bound:
            print(f"  fabric: {bound.get('file')} (sha256 {str(bound.get('sha256'))[:16]}…, "
                  f"{bound.get('switches')} switches, {bound.get('hosts')} hosts): every cable "
                  f"the tables use is one of its cables where the map puts it: "
                  f"{'OK' if files['ok'] else 'FAILED'}; failed links "
                  f"{bound.get('failed') or 'none'}")
        if ib is not None:
            _print_ib(ib)
    doc = dict(rep.to_dict(), files=files, ib=ib)
    if not rep.ok:
        print_failure(rep.errors)
        return 1, doc
    status = 0
    if not files["ok"]:
        for e in files["errors"]:
            print(f"verify (files): {e}", file=sys.stderr)
        if files["error_count"] > len(files["errors"]):
            print(f"verify (files): … {files['error_count']} errors in all", file=sys.stderr)
        status = 1
    if ib is not None and ib.get("min_only"):
        print(f"verify: {d}: the InfiniBand files carry MIN only: {ib['min_only']}",
              file=sys.stderr)
    if ib is not None and not ib["ok"] and ib.get("expressible", True):
        what = "InfiniBand files" if ib_files is not None else "InfiniBand"
        for e in ib["errors"]:
            print(f"verify ({what}): {e}", file=sys.stderr)
        status = 1
    return status, doc


def _not_exported(exports: dict) -> str:
    """Why a table set's manifest (``exports``) records no InfiniBand files."""
    why = exports.get("skipped", {}).get("ib") if isinstance(exports.get("skipped"), dict) \
        else None
    if why:
        return f"fabroute tables skipped it: {why}"
    if "skipped" in exports or exports.get("json"):
        return "no InfiniBand files were asked for (--formats without ib)"
    return "the manifest records no InfiniBand files"


def _min_only(ts, ib: dict, exported: dict | None) -> str | None:
    """Why the IB files carry the routing's minimal paths only: what the manifest records, or
    (older manifests, imported sets) what their LMC gives."""
    from tablegen.exports.infiniband.write import min_only

    if isinstance(exported, dict) and "min_only" in exported:
        return exported["min_only"]
    return min_only(ts, int(ib.get("lmc", 0))) if "lmc" in ib else None


def _imported_ib(ts, files: dict, args, d: Path):
    """``(report, files)`` of the IB files an imported set was made from (``d/ib``): every
    (HCA, LID) packet walked with its SL and VLs, the CDG, each host-LID entry against the
    tables (:func:`tablegen.exports.infiniband.imports.verify_imported`).  Files that do not
    load are a failed file check when the manifest does not vouch for them, else bad input."""
    from tablegen.exports.infiniband.imports import IB_PREFIX, verify_imported
    from tablegen.exports.infiniband.read import load_ib_files

    lmc = int(ts.params["lmc"])
    if args.lmc not in (None, lmc) or args.seed is not None:
        what = "--seed" if args.seed is not None else f"--lmc {args.lmc}"
        raise BadInput(f"verify: {what}, but {d} holds imported tables (LMC {lmc}, no seed); "
                       f"expected no --seed and no --lmc or --lmc {lmc}")
    try:
        f = load_ib_files(d / IB_PREFIX)
    except BadInput as e:
        if files["ok"]:
            raise BadInput(f"verify: {e}") from None
        files["errors"].append(str(e))
        return None, None
    return verify_imported(f, ts), f


def _ib_params(exported: dict | None, args, d: Path) -> tuple[int, int, str | None]:
    """LMC, seed and IB variant of the InfiniBand check: those the files were exported with
    (the command line may only repeat LMC and seed), else the command line's or 0, 1 and
    none."""
    if not exported:
        return (args.lmc if args.lmc is not None else 0,
                args.seed if args.seed is not None else 1, None)
    for key in ("lmc", "seed"):
        given = getattr(args, key)
        if given is not None and given != exported[key]:
            raise BadInput(f"verify: --{key} {given}, but the InfiniBand files in {d} were "
                           f"exported with {key} {exported[key]}; expected no --{key} or "
                           f"--{key} {exported[key]}")
    return exported["lmc"], exported["seed"], exported.get("variant")


def _ib_report(ts, lmc: int, seed: int, variant: str | None = None) -> dict:
    """InfiniBand semantics of a table set without exported IB files: layers, SLs, per-VL
    CDG computed from the tables (:func:`tablegen.exports.infiniband.sls.verify_ib`).  A
    routing IB cannot express (too many VLs or LIDs) gives ``expressible: False``: what
    ``fabroute tables`` skips, not a fault of the table set."""
    from tablegen.exports.infiniband.lids import lid_plan
    from tablegen.exports.infiniband.sls import ib_routing
    from tablegen.exports.infiniband.write import check_source_routed

    try:
        check_source_routed(ts)
        lid_plan(ts.topo, lmc)
        return dict(ib_routing(ts, lmc, seed, variant)[1], expressible=True)
    except NotExpressible as e:
        return {"ok": False, "expressible": False, "lmc": lmc, "errors": [str(e)]}


_SCHEME = {"path": ", one VL per path", "turn": ", per-hop VLs"}


def _print_ib(ib: dict) -> None:
    if not ib.get("exported", True):
        state = ("not expressible; " + ib["errors"][0] if "layers" not in ib else
                 f"{'would hold' if ib['ok'] else 'would FAIL'}; {ib['sls_used']} SLs, "
                 f"{ib['vls_used']} VLs")
        print(f"  InfiniBand: not exported ({ib['not_exported']}); computed from the tables "
              f"at LMC {ib['lmc']}, no files: {state}")
        return
    if "layers" not in ib:
        state = "FAILED" if ib.get("expressible", True) else "not expressible"
        print(f"  InfiniBand (LMC {ib['lmc']}): {state}; {ib['errors'][0]}")
        return
    label = f", {ib['variant']} variant" if ib.get("variant") else ""
    print(f"  InfiniBand (LMC {ib['lmc']}{label}): {'OK' if ib['ok'] else 'FAILED'}; "
          f"{ib['sls_used']} SLs, {ib['vls_used']} VLs (max VL {ib['vl_max']}) of "
          f"{ib['data_vls']} data VLs{_SCHEME.get(ib.get('vl_scheme'), '')}; "
          f"CDG {ib['cdg']['dependencies']} dependencies")
    if ib.get("min_only"):
        print(f"    carries MIN only: {ib['min_only']}")
    files = ib.get("source") == "files"
    if files:
        lft = ib["tables"]
        same = (f"; LFTs {'equal' if lft.get('lft_mismatches') == 0 else 'differ from'} the "
                f"table set's layers ({lft['lft_entries']} entries)" if lft else "")
        print(f"    from the files in {ib['dir']}: {ib['paths']} (HCA, LID) paths walked"
              f"{same}")
    unit = "paths" if files else "pairs"
    rows = [(f"offset {lay['offset']} {lay['kind']}", lay) for lay in ib["layers"]]
    if files:
        rows.append(("switch LIDs", ib["switch_lids"]))
    for name, lay in rows:
        hist = " ".join(f"{h}:{c}" for h, c in lay["hist"].items())
        print(f"    {name}: max {lay['max_hops']} hops (bound {lay['bound']}); "
              f"hops:{unit} {hist}")
