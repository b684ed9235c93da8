"""tablegen's sub-commands of ``fabroute``: ``topology``, ``tables``, ``verify``, ``path``,
``analyze``, ``expand`` and ``compare`` (:func:`add_parsers`; ``ib export`` and ``ib import``
are :mod:`tablegen.ib_cli`), and the steps other packages' commands share: a topology from its SPEC,
tables built and verified, the ``--routing`` options.  Exit codes: :mod:`tablegen.errors`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from pathlib import Path

from tablegen.errors import BadInput, NotExpressible, TopologyError
from tablegen.exports.files import TABLES_NPZ, TOPOLOGY_FILE, write_table_set
from tablegen.exports.outdir import check_out_dir, replaced_dir
from tablegen.output import emit, json_option
from tablegen.topology import Topology

#: the positional SPEC of every command that builds a topology
SPEC_HELP = ("topology SPEC kind:key=value,...: slimfly:q=5, dragonfly:p=2,a=4,h=2, "
             "dsnf:n=64, torus:x=4,y=4, ... (README, 'Topologies')")


def console():
    """The stderr console for logs and progress (:func:`tablegen.output.console`)."""
    from tablegen.output import console as stderr_console

    return stderr_console()


def topology_of(spec: str, fail: str | None = None) -> Topology:
    """The topology of a SPEC; ``fail``: ``a:b,c:d`` switch pairs whose cables have failed
    (:mod:`tablegen.topologies.failures`)."""
    from tablegen.topologies.spec import build

    topo = build(spec)
    if fail is None:
        return topo
    from tablegen.topologies.failures import parse_failures, without_links

    return without_links(topo, parse_failures(fail))


def _tables(topo: Topology, args):
    from tablegen.routing.build import build_tables

    _check_vcs(getattr(args, "vcs", None))
    return build_tables(topo, args.routing, nonmin=getattr(args, "nonmin", None),
                        vcs=getattr(args, "vcs", None))


def _check_vcs(vcs: int | None) -> None:
    """``--vcs``: ``1 <= vcs <= MAX_VCS`` (:mod:`tablegen.limits`), for callers that did not
    parse it with ``limits.vcs_option``."""
    from tablegen.limits import check_vcs

    if vcs is not None:
        check_vcs(vcs)


def _switch(topo: Topology, value: int, what: str) -> int:
    if not 0 <= value < topo.n_switches:
        raise BadInput(f"{what}={value} is not a switch of {topo.name()}; "
                       f"expected 0 <= {what} < {topo.n_switches}")
    return value


# -- commands ------------------------------------------------------------------------------
def cmd_topology(args) -> int:
    topo = topology_of(args.spec)
    if args.json:
        json.dump(topo.to_dict(), sys.stdout)
        print()
        return 0
    from tablegen.analysis.layout import analyze

    a = analyze(topo)
    print(f"{topo.name()}: {topo.n_switches} switches, {topo.n_hosts} hosts, "
          f"{len(topo.links)} links, network radix {int(topo.degree.max())}, "
          f"diameter {a['diameter']}, ASPL {a['aspl']:.3f}")
    return 0


def cmd_analyze(args) -> int:
    from tablegen.analysis.layout import analyze

    topo = topology_of(args.spec)
    a = dict(topology=topo.name(), **analyze(topo))
    emit(a, args.json, indent=1)
    return 0


def build_and_verify(topo: Topology, args, con=None):
    """Build the tables, verify them and tighten the VC count to what the tables use."""
    from tablegen.verify import tighten, verify

    status = con.status if con is not None else (lambda _msg: contextlib.nullcontext())
    t0 = time.perf_counter()
    with status(f"{args.routing}: computing tables on {topo.name()}…"):
        ts = _tables(topo, args)
    t1 = time.perf_counter()
    with status(f"{args.routing}: verifying (walks, channel dependency graph)…"):
        rep = verify(ts)
    t2 = time.perf_counter()
    if getattr(args, "vcs", None) is None:
        tighten(ts, rep)
    if con is not None:
        con.log(f"{args.routing}: tables {t1 - t0:.2f} s, verify {t2 - t1:.2f} s")
    return ts, rep


def verified_tables(topo: Topology, args, con, cmd: str):
    """:func:`build_and_verify`, printing the failure (:func:`_print_failure`) and
    returning ``(None, report)`` when the tables fail."""
    ts, rep = build_and_verify(topo, args, con)
    if rep.ok:
        return ts, rep
    print_failure(rep.errors, f"{cmd}: {args.routing} on {topo.name()}")
    return None, rep


def print_failure(errors, what: str | None = None, where: str = "") -> None:
    """Verify's errors on stderr; with ``what`` (``cmd: routing on topology``) the line
    saying nothing was written."""
    for e in errors:
        print(f"verify: {e}", file=sys.stderr)
    if what is not None:
        print(f"{what} failed verification; nothing written{where}", file=sys.stderr)


def table_set_job(topo: Topology, args, out: Path, formats, jobs: int = 1,
                  into: Path | None = None):
    """Build, verify and write one routing (``args.routing``) into ``out`` (or, in a batch,
    into ``into``, the new directory that becomes ``out`` with the whole batch): what a
    forked worker of ``fabroute tables`` runs.  Returns a JSON-able summary; a table set that
    fails verification is not written (``verified`` false, its errors listed)."""
    t0 = time.perf_counter()
    ts, rep = build_and_verify(topo, args)
    t1 = time.perf_counter()
    res = {"out": str(out), "routing": args.routing, "verified": rep.ok,
           "num_vcs": ts.num_vcs, "classes": rep.classes}
    if not rep.ok:
        return dict(res, errors=rep.errors)
    files, skipped = write_table_set(ts, rep, into or out, formats, jobs=jobs,
                                     into=into is not None)
    return dict(res, files=len(files), skipped=skipped,
                seconds={"tables_and_verify": round(t1 - t0, 3),
                         "export": round(time.perf_counter() - t1, 3)})


def write_routings(topo: Topology, routings, out: Path, formats, *, nonmin=None, vcs=None,
                   jobs: int = 1, done=None) -> list[dict]:
    """:func:`table_set_job` for each of ``routings`` into ``out / routing``, ``jobs``
    routings and formats at a time in forked processes (:mod:`tablegen.forked`: once a
    routing is verified its formats are jobs of their own; a single routing writes ``out``
    itself).  The batch is one unit: every routing is written into one new directory that
    replaces ``out`` when all have ended (:func:`~tablegen.exports.outdir.replaced_dir`),
    with ``routings.json`` listing what it holds; so ``out`` holds the old batch or the
    new one, never a mix.  The minimal tables several routings share are computed once,
    before the fork.  ``done(summary)`` is called as each routing ends."""
    from tablegen.exports.outdir import replaced_dir
    from tablegen.forked import run_forked
    from tablegen.routing.build import share_minimal_tables

    if len(routings) == 1:
        ns = argparse.Namespace(routing=routings[0], nonmin=nonmin, vcs=vcs)
        res = table_set_job(topo, ns, out, formats, jobs)
        if done is not None:
            done(res)
        return [res]
    share_minimal_tables(topo, routings)
    with replaced_dir(out) as tmp:
        tasks = [functools.partial(table_set_job, topo,
                                   argparse.Namespace(routing=r, nonmin=nonmin, vcs=vcs),
                                   out / r, formats, jobs, tmp / r)
                 for r in routings]
        results = run_forked(tasks, jobs, None if done is None else lambda _i, r: done(r))
        (tmp / "routings.json").write_text(json.dumps(
            {"topology": topo.name(), "routings": list(routings),
             "written": [r["routing"] for r in results if r["verified"]]}, indent=1) + "\n")
    return results


def cmd_tables(args) -> int:
    from tablegen.exports.files import FORMATS as EXPORT_FORMATS
    from tablegen.forked import cpu_count
    from tablegen.routing.build import check_routing

    formats = tuple(args.formats.split(","))
    unknown = [f for f in formats if f not in EXPORT_FORMATS]
    if unknown:
        raise BadInput(f"--formats {args.formats}: {', '.join(unknown)} unknown; expected "
                       f"a comma-separated subset of {','.join(EXPORT_FORMATS)}")
    routings = args.routing.split(",")
    if len(set(routings)) < len(routings):
        raise BadInput(f"--routing {args.routing}: a routing is named twice; expected "
                       "distinct routings")
    _check_vcs(args.vcs)      # before the workers start, not in each of them
    jobs = args.jobs if args.jobs is not None else cpu_count()
    if jobs < 1:
        raise BadInput(f"--jobs {jobs}; expected at least 1 worker process")
    check_out_dir(args.out)
    topo = topology_of(args.spec, args.fail)
    for r in routings:
        try:
            check_routing(topo.kind, r, args.nonmin, degraded="fail" in topo.params)
        except TopologyError as e:
            raise BadInput(f"--routing {r}: {e}") from None
    con = console()
    status = 0

    def done(res):
        nonlocal status
        if not res["verified"]:
            print_failure(res["errors"], f"tables: {res['routing']} on {topo.name()}",
                           f" into {res['out']}")
            status = 1
        else:
            for fmt, why in res["skipped"].items():
                print(f"tables: {res['routing']}: {fmt} export skipped: {why}",
                      file=sys.stderr)
        doc = {k: v for k, v in res.items() if k not in ("errors", "seconds")}
        emit(doc, args.json, lambda d: [_tables_line(d, res.get("seconds"))])
        sys.stdout.flush()

    # a log line, not a live status: its refresh thread must not be running at a fork
    con.log(f"{args.routing} on {topo.name()}: tables, verify, {args.formats}"
            + (f" ({jobs} workers)" if len(routings) > 1 and jobs > 1 else "") + "…")
    write_routings(topo, routings, Path(args.out), formats, nonmin=args.nonmin,
                   vcs=args.vcs, jobs=jobs, done=done)
    return status


def _tables_line(d: dict, seconds: dict | None) -> str:
    """One routing of ``fabroute tables`` as a line of text."""
    if not d["verified"]:
        return f"{d['routing']}: FAILED verification; nothing written into {d['out']}"
    hops = ", ".join(f"{n} ≤{c['max_hops']} hops" for n, c in d["classes"].items())
    took = (f" in {seconds['tables_and_verify'] + seconds['export']:.1f} s"
            if seconds else "")
    skipped = f"; skipped: {', '.join(d['skipped'])}" if d["skipped"] else ""
    return (f"{d['routing']}: verified ({hops}; {d['num_vcs']} VCs), {d['files']} files "
            f"-> {d['out']}{took}{skipped}")


def cmd_verify(args) -> int:
    from tablegen.exports.files import prove_table_dir
    from tablegen.exports.infiniband.read import find_ib_dir, load_ib_files
    from tablegen.exports.infiniband.verify_files import verify_ib_files
    from tablegen.routing.imported import IMPORTED

    d = Path(args.dir)
    ts, rep, files = prove_table_dir(d)
    ib = ib_files = None
    exported = (files or {}).get("exports", {}).get("ib")
    if rep.ok and ts.routing == IMPORTED:
        ib, ib_files = _imported_ib(ts, files, args, d)
    elif rep.ok and files["ok"] and not args.walk_ib_files:
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
            ib = (verify_ib_files(ib_files, ts) if ib_files is not None
                  else _ib_report(ts, lmc, seed, variant))
    if args.json:
        print(json.dumps(dict(rep.to_dict(), files=files, ib=ib), indent=1))
    else:
        print(f"{rep.topology} {rep.routing}: {'OK' if rep.ok else 'FAILED'}; "
              f"VCs used {rep.vcs_used} of {rep.num_vcs}; CDG {rep.cdg.get('dependencies', 0)} "
              f"dependencies, acyclic={not rep.cycle}")
        for name, c in rep.classes.items():
            print(f"  {name}: max {c['max_hops']} hops (bound {c['bound']}, recomputed)")
        if files is not None:
            print(f"  files: {files['checked']} of {files['files']} in the manifest checked, "
                  f"{files['derived']} derived again from the proven tables: "
                  f"{'OK' if files['ok'] else 'FAILED'}")
        if ib is not None:
            _print_ib(ib)
    if not rep.ok:
        print_failure(rep.errors)
        return 1
    status = 0
    if not files["ok"]:
        for e in files["errors"]:
            print(f"verify (files): {e}", file=sys.stderr)
        if files["error_count"] > len(files["errors"]):
            print(f"verify (files): … {files['error_count']} errors in all", file=sys.stderr)
        status = 1
    if ib is not None and not ib["ok"] and ib.get("expressible", True):
        what = "InfiniBand files" if ib_files is not None else "InfiniBand"
        for e in ib["errors"]:
            print(f"verify ({what}): {e}", file=sys.stderr)
        status = 1
    return status


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

    try:
        lid_plan(ts.topo, lmc)
        return dict(ib_routing(ts, lmc, seed, variant)[1], expressible=True)
    except NotExpressible as e:
        return {"ok": False, "expressible": False, "lmc": lmc, "errors": [str(e)]}


_SCHEME = {"path": ", one VL per path", "turn": ", per-hop VLs"}


def _print_ib(ib: dict) -> None:
    if "layers" not in ib:
        state = "FAILED" if ib.get("expressible", True) else "not expressible"
        print(f"  InfiniBand (LMC {ib['lmc']}): {state}; {ib['errors'][0]}")
        return
    label = f", {ib['variant']} variant" if ib.get("variant") else ""
    print(f"  InfiniBand (LMC {ib['lmc']}{label}): {'OK' if ib['ok'] else 'FAILED'}; "
          f"{ib['sls_used']} SLs, {ib['vls_used']} VLs (max VL {ib['vl_max']}) of "
          f"{ib['data_vls']} data VLs{_SCHEME.get(ib.get('vl_scheme'), '')}; "
          f"CDG {ib['cdg']['dependencies']} dependencies")
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


def cmd_path(args) -> int:
    topo = topology_of(args.spec)
    ts = _tables(topo, args)
    src, dst = _switch(topo, args.src, "src"), _switch(topo, args.dst, "dst")
    cls = ts.cls(args.cls) if args.cls else ts.classes[-1]
    inter = -1
    if cls.inter != "none":
        cands = ts.candidates(src, dst, cls)
        via = args.via
        if via is not None and cls.inter == "group":
            # --via names a switch; group-level Valiant detours through that switch's group
            via = int(topo.group[_switch(topo, via, "via")])
        if via is None:
            inter = int(cands[0]) if len(cands) else -1
        elif via not in set(cands.tolist()):
            shown = cands.tolist()
            more = "…" if len(shown) > 20 else ""
            what = f"--via {args.via}" + (f" (group {via})" if via != args.via else "")
            raise BadInput(f"{what} is not an intermediate {cls.name} may use from "
                           f"{src} to {dst}; expected one of {shown[:20]}{more}"
                           + (" (groups)" if cls.inter == "group" else ""))
        else:
            inter = via
    elif args.via is not None:
        raise BadInput(f"--via {args.via}: class {cls.name} of routing {args.routing} has no "
                       "intermediate")
    path = ts.walk(src, dst, cls, inter)
    if cls.inter == "group":
        path["via_group"] = inter
    path.update(routing=ts.routing, cls=cls.name,
                via=args.via if cls.inter == "group" and args.via is not None else inter,
                labels=[list(topo.label(s)) for s in path["switches"]])
    if args.json:
        print(json.dumps(path))
    else:
        for i, s in enumerate(path["switches"]):
            hop = (f" --port {path['ports'][i]} vc {path['vcs'][i]}-->"
                   if i < len(path["ports"]) else "")
            print(f"{s} {tuple(topo.label(s))}{hop}")
    return 0


def _proven_dir(d: Path, cmd: str):
    """The table set of directory ``d`` when it and every file in it are proven, else
    ``None`` with the reasons printed (exit 1): nothing unproven is used."""
    from tablegen.exports.files import prove_table_dir

    ts, rep, files = prove_table_dir(d)
    if rep.ok and files["ok"]:
        return ts, files["exports"]
    print_failure(rep.errors + (files["errors"] if files else []),
                  f"{cmd}: {d}")
    return None, None


def _grown(topo: Topology, args) -> tuple[Topology, object]:
    """The DSN-F ``topo`` grows into (``--add``, ``--to``, ``--transform``) and the
    relabelling of its switches (``None``: ids kept)."""
    from tablegen.topologies.dsnf import add_nodes, transform

    if topo.kind != "dsnf" or "fail" in topo.params:
        raise BadInput(f"expand: {topo.name()} is not an intact dsnf fabric; expected dsnf:n=N "
                       "without failed links")
    n, p = topo.n_switches, int(topo.params["p"])
    if args.transform:
        if n != (p + 1) * 2 ** (p + 1):
            raise BadInput(f"expand --transform: {topo.name()} is not at a transformation "
                           f"point; expected n = (p+1)·2^(p+1) = {(p + 1) * 2 ** (p + 1)} with "
                           f"p={p} (grow there first)")
        new, _, relabel = transform(n, int(topo.hosts[0]))
        return new, relabel
    count = args.add if args.to is None else args.to - n
    if count < 1:
        what = f"--to {args.to}" if args.to is not None else f"--add {args.add}"
        raise BadInput(f"expand: {what} on {topo.name()}; expected a size above {n}")
    return add_nodes(topo, count)[0], None


def cmd_expand(args) -> int:
    from tablegen.update import table_diff

    if sum(x is not None and x is not False for x in (args.add, args.to, args.transform)) > 1:
        raise BadInput("expand: --add, --to and --transform exclude each other; expected one")
    if args.add is None and args.to is None and not args.transform:
        args.add = 1
    src = Path(args.spec)
    formats, lmc, seed = ("json", "ib", "openflow"), 0, 1
    if args.out is not None:
        check_out_dir(args.out)
    if src.is_dir():
        old, exports = _proven_dir(src, "expand")
        if old is None:
            return 1
        formats = tuple(f for f in ("json", "ib", "openflow") if exports.get(f))
        if exports.get("ib"):
            lmc, seed = exports["ib"]["lmc"], exports["ib"]["seed"]
        routing, nonmin = old.routing, old.params.get("nonmin")
        new_topo, relabel = _grown(old.topo, args)
    else:
        topo = topology_of(args.spec)
        if topo.kind == "dsnf" and args.transform and "fail" not in topo.params:
            from tablegen.topologies.dsnf import build_dsnf

            p = int(topo.params["p"])
            if topo.n_switches == p * 2**p:  # the full network before the transformation
                topo = build_dsnf(topo.n_switches, int(topo.hosts[0]), p=p - 1)
        routing, nonmin = args.routing, None
        new_topo, relabel = _grown(topo, args)      # bad input before any table is built
        old, _ = verified_tables(topo, argparse.Namespace(routing=routing, nonmin=None,
                                                          vcs=None), None, "expand")
        if old is None:
            return 1
    ns = argparse.Namespace(routing=routing, nonmin=nonmin, vcs=None)
    new, rep = verified_tables(new_topo, ns, None, "expand")
    if new is None:
        return 1
    diff = table_diff(old, new, relabel)
    if args.out is not None:
        write_table_set(new, rep, Path(args.out), formats, lmc, seed, update=diff)
    if args.json:
        print(json.dumps(diff))
    else:
        e, c = diff["entries"], diff["cables"]
        print(f"{diff['from']} -> {diff['to']} ({routing}): entries +{e['added']} "
              f"~{e['changed']} -{e['removed']} (existing destinations changed: "
              f"{e['old_destinations_changed']}); cables +{len(c['added'])} "
              f"-{len(c['removed'])} replugged {len(c['replugged'])}; VCs {diff['vcs']['old']} "
              f"-> {diff['vcs']['new']}; update: {diff['order']['consistency']}")
        if args.out is not None:
            print(f"wrote {args.out} (with update.json)")
    return 0


def cmd_diff(args) -> int:
    from tablegen.update import relation, table_diff

    a, _ = _proven_dir(Path(args.dir_a), "diff")
    if a is None:
        return 1
    b, _ = _proven_dir(Path(args.dir_b), "diff")
    if b is None:
        return 1
    how, relabel = relation(a.topo, b.topo)
    diff = dict(table_diff(a, b, relabel), relation=how)
    if args.json:
        print(json.dumps(diff))
        return 0
    e, c = diff["entries"], diff["cables"]
    print(f"{diff['from']} ({a.routing}) -> {diff['to']} ({b.routing}): {how}")
    for name, t in diff["tables"].items():
        print(f"  {name:10} +{t['added']} ~{t['changed']} -{t['removed']} "
              f"={t['unchanged']}")
    print(f"  switches with changes: {len(e['per_switch'])}; cables +{len(c['added'])} "
          f"-{len(c['removed'])} replugged {len(c['replugged'])}; VCs {diff['vcs']['old']} -> "
          f"{diff['vcs']['new']}; update: {diff['order']['consistency']}")
    return 0


def cmd_compare(args) -> int:
    from tablegen.analysis.compare import run

    try:
        sizes = [int(v) for v in args.sizes.split(",")]
        expand = tuple(int(v) for v in args.expansion.split(",")) if args.expansion else None
    except ValueError:
        raise BadInput(f"compare: --sizes {args.sizes!r} / --expansion {args.expansion!r}; "
                       "expected comma-separated integers") from None
    if expand is not None and (len(expand) != 3 or expand[2] <= 0 or expand[1] < expand[0]):
        raise BadInput(f"compare: --expansion {args.expansion}; expected START,STOP,STEP")
    res = run(sizes, Path(args.out), expand)
    if args.json:
        print(json.dumps(res))
        return 0
    for f, rows in res["families"].items():
        print(f"{f:6} " + "  ".join(f"n={r['n']}: D={r['diameter']} ASPL={r['aspl']:.2f} "
                                    f"cable={r['cable_m']:.2f}m" for r in rows))
    print(f"wrote {args.out}/compare.json and compare.png")
    return 0


def routing_args(sp, several: bool = False) -> None:
    """``--routing`` (one, or with ``several`` a comma-separated list), ``--nonmin``, ``--vcs``."""
    from tablegen.limits import MAX_VCS, vcs_option
    from tablegen.routing.build import NONMIN, ROUTINGS

    if several:     # names checked by routing.check_routing, one by one
        sp.add_argument("--routing", required=True, help="a routing, or several "
                        f"separated by commas (each into OUT/ROUTING); of {','.join(ROUTINGS)}")
    else:
        sp.add_argument("--routing", required=True, choices=ROUTINGS, help="the routing: "
                        f"{', '.join(ROUTINGS)} (`fabroute routings` describes each)")
    sp.add_argument("--nonmin", choices=NONMIN, help="UGAL-L's non-minimal class")
    sp.add_argument("--vcs", type=vcs_option, help=f"force the VC count, 1..{MAX_VCS} "
                    "(fewer than needed fail verify)")


def add_parsers(sub) -> None:
    """Add tablegen's sub-commands to ``sub`` (an argparse sub-parsers object)."""
    from tablegen.limits import MAX_JOBS, jobs_option, lmc_option, seed_option

    sp = sub.add_parser("topology", help="build a topology and print it")
    sp.add_argument("spec", help=SPEC_HELP)
    json_option(sp, "the whole topology (switches, hosts, links, ports)")
    sp.set_defaults(func=cmd_topology)

    sp = sub.add_parser("tables", help="compute, verify and export the tables")
    sp.add_argument("spec", help=SPEC_HELP)
    routing_args(sp, several=True)
    sp.add_argument("--out", required=True, metavar="DIR", help="directory to write (one "
                    "routing: the table set; several: DIR/ROUTING each, and routings.json)")
    sp.add_argument("--formats", default="json,ib,openflow", help="comma-separated subset of "
                    "json (tables + proof), ib (InfiniBand files in DIR/ib), openflow "
                    "(ovs-ofctl flows)")
    json_option(sp, "each routing's summary (a line each: out, routing, verified, "
                "num_vcs, classes, files, skipped)")
    sp.add_argument("--fail", metavar="A:B[,C:D...]", help="tables for the fabric without "
                    "the cables between these switch pairs (ids as in `fabroute topology SPEC "
                    "--json`), still verified")
    sp.add_argument("--jobs", type=jobs_option, help="worker processes: routings (or one "
                    "routing's formats) written side by side, 1.."
                    f"{MAX_JOBS} (default: the CPUs available)")
    sp.set_defaults(func=cmd_tables)

    sp = sub.add_parser("verify", help="verify an exported table set, and under InfiniBand "
                        "semantics: the IB files in DIR or DIR/ib themselves (every HCA-to-LID "
                        "path through lfts.dump, sl2vl.dump and path-sl.txt, the CDG per VL, "
                        "agreement with the tables), else layers and SLs computed from them "
                        "(a routing InfiniBand cannot express is reported, not failed)")
    sp.add_argument("dir", help="a table directory written by `fabroute tables` (one "
                    "routing), `ib export` or `ib import`")
    sp.add_argument("--lmc", type=lmc_option, help="InfiniBand LMC (0..7) when DIR holds no "
                    "IB files (default 0; with IB files only theirs is accepted)")
    sp.add_argument("--seed", type=seed_option, help="seed of the Valiant layers' targets "
                    "(0 <= SEED < 2**32) when DIR "
                    "holds no IB files (default 1; with IB files only theirs is accepted)")
    sp.add_argument("--walk-ib-files", action="store_true", help="also walk every (HCA, "
                    "LID) packet through the InfiniBand files themselves (done anyway when a "
                    "file differs from what the proven tables give; slow on big fabrics)")
    json_option(sp, "the proof report")
    sp.set_defaults(func=cmd_verify)

    sp = sub.add_parser("path", help="the path, ports and VCs a packet takes")
    sp.add_argument("spec", help=SPEC_HELP)
    routing_args(sp)
    sp.add_argument("--src", type=int, required=True, help="source switch id, 0 <= SRC < "
                    "switches (ids as in `fabroute topology SPEC --json`)")
    sp.add_argument("--dst", type=int, required=True, help="destination switch id")
    sp.add_argument("--via", type=int, help="intermediate switch of a Valiant class (group-"
                    "level VAL: the group of this switch)")
    sp.add_argument("--class", dest="cls", help="path class of a UGAL-L routing (min or the "
                    "non-minimal one; default the non-minimal)")
    json_option(sp, "the path (switches, ports, vcs, labels, class, via)")
    sp.set_defaults(func=cmd_path)

    sp = sub.add_parser("analyze", help="diameter, ASPL, degrees, cable lengths; with "
                        "--throughput-bound the saturation bound of a routing under a traffic")
    sp.add_argument("spec", metavar="SPEC|DIR", help=SPEC_HELP + "; with --throughput-bound "
                    "also a proven table directory")
    json_option(sp, "the metrics")
    sp.set_defaults(func=cmd_analyze)

    sp = sub.add_parser("expand", help="DSN-F expansion: the grown tables, cables and the "
                        "update between them")
    sp.add_argument("spec", metavar="DIR|SPEC", help="a table directory (its routing and "
                    "formats are kept) or a dsnf SPEC")
    sp.add_argument("--add", type=int, help="switches to add (same p; default 1)")
    sp.add_argument("--to", type=int, metavar="N", help="grow to N switches (same p)")
    sp.add_argument("--transform", action="store_true",
                    help="the p -> p+1 transformation at n = (p+1)·2^(p+1), e.g. dsnf:n=64")
    sp.add_argument("--routing", default="dsnf", help="with a SPEC (default dsnf)")
    sp.add_argument("--out", metavar="NEWDIR", help="write the grown, verified table set here "
                    "with update.json (the diff and the order to apply it)")
    json_option(sp, "the diff")
    sp.set_defaults(func=cmd_expand)

    sp = sub.add_parser("diff", help="entries, VCs and cables that change between two table "
                        "sets of one fabric, and the order that applies them consistently")
    sp.add_argument("dir_a", metavar="DIR_A", help="the table set running now (a `fabroute "
                    "tables` directory)")
    sp.add_argument("dir_b", metavar="DIR_B", help="the table set to go to")
    json_option(sp, "the diff")
    sp.set_defaults(func=cmd_diff)

    sp = sub.add_parser("compare", help="DSN-F vs torus, DSN-x, DLN-4: JSON + PNG")
    sp.add_argument("--sizes", default="128,256,512,1024,2048,4096", help="comma-separated "
                    "switch counts to compare the families at")
    sp.add_argument("--expansion", help="START,STOP,STEP: grow DSN-F (paper Fig. 4: "
                    "1024,2048,64)")
    sp.add_argument("--out", default="out/compare", metavar="DIR", help="directory for "
                    "compare.json and compare.png")
    json_option(sp, "the comparison (compare.json's document)")
    sp.set_defaults(func=cmd_compare)
