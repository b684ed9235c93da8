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

from tablegen.errors import BadInput, TopologyError
from tablegen.exports.files import openflow_profile, write_table_set
from tablegen.exports.outdir import check_out_dir, replaced_dir
from tablegen.output import emit, json_option
from tablegen.topology import Topology
from tablegen.verify_cli import print_failure

#: the positional SPEC of every command that builds a topology
SPEC_HELP = ("topology SPEC kind:key=value,...: slimfly:q=5, dragonfly:p=2,a=4,h=2, "
             "dsnf:n=64, torus:x=4,y=4, ... (README, 'Topologies')")


def console():
    """The stderr console for logs and progress (:func:`tablegen.output.console`)."""
    from tablegen.output import console as stderr_console

    return stderr_console()


def topology_of(spec: str, fail: str | None = None) -> Topology:
    """The topology of a SPEC or of a table directory
    (:func:`~tablegen.exports.dirs.dir_topology`); ``fail``:
    ``a:b,c:d`` switch pairs whose cables have failed (:mod:`tablegen.topologies.failures`)."""
    from tablegen.topologies.spec import build

    from tablegen.exports.dirs import dir_topology

    topo = dir_topology(Path(spec)) if spec.strip() and Path(spec).is_dir() else build(spec)
    if fail is None:
        return topo
    from tablegen.topologies.failures import parse_failures, without_links

    return without_links(topo, parse_failures(fail))


def bound_topology(args):
    """``(topology, binding)`` that ``tables`` and ``ib export`` compute on: ``args.spec``
    (with ``--fail``), or with ``--fabric`` the plan without the cables that fabric lacks
    and the fabric's binding (:func:`tablegen.fabrics.bind.bind`; bad input when it does
    not map)."""
    if getattr(args, "fabric", None) is None:
        return topology_of(args.spec, getattr(args, "fail", None)), None
    if getattr(args, "fail", None):
        raise BadInput(f"--fail {args.fail} with --fabric: expected one of them (the "
                       "fabric's absent cables are its failed links)")
    from tablegen.fabrics.bind import bind
    from tablegen.fabrics.read import load_fabric

    binding, topo = bind(load_fabric(args.fabric), topology_of(args.spec))
    return topo, binding


def fabric_option(sp) -> None:
    """``--fabric FABRIC``: tables for a fabric as cabled (docs/real-fabrics.md)."""
    sp.add_argument("--fabric", metavar="FABRIC", help="route the fabric as cabled (a "
                    "fabric.json or ibnetdiscover output): mapped onto SPEC from its cabling, "
                    "the planned cables it lacks failed, its GUIDs and port numbers in the "
                    "IB files, the fabric bound in the manifest (docs/real-fabrics.md)")


def _tables(topo: Topology, args):
    """The tables of ``args.routing`` (a name of :mod:`tablegen.routing.names`, e.g.
    ``ugal-l-3h``, with ``args.nonmin`` its other spelling) on ``topo``."""
    from tablegen.routing.build import build_tables
    from tablegen.routing.names import resolve

    _check_vcs(getattr(args, "vcs", None))
    routing, nonmin = resolve(args.routing, getattr(args, "nonmin", None))
    return build_tables(topo, routing, nonmin=nonmin, vcs=getattr(args, "vcs", None))


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
    """``fabroute topology SPEC|DIR``: sizes, diameter and ASPL (``--json``: every switch,
    link and host)."""
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


def table_set_job(topo: Topology, args, out: Path, formats, jobs: int = 1,
                  into: Path | None = None, force: bool = False, binding=None):
    """Build, verify and write one routing (``args.routing``) into ``out`` (or, in a batch,
    into ``into``, the new directory that becomes ``out`` with the whole batch): what a
    forked worker of ``fabroute tables`` runs.  Returns a JSON-able summary; a table set that
    fails verification is not written (``verified`` false, its errors listed).  ``force``:
    ``out`` may replace a fabroute output of another kind; ``binding``: the fabric the set
    is bound to (:func:`bound_topology`)."""
    t0 = time.perf_counter()
    ts, rep = build_and_verify(topo, args)
    t1 = time.perf_counter()
    res = {"out": str(out), "routing": args.routing, "verified": rep.ok,
           "num_vcs": ts.num_vcs, "classes": rep.classes}
    if not rep.ok:
        return dict(res, errors=rep.errors)
    files, skipped = write_table_set(ts, rep, into or out, formats, jobs=jobs,
                                     into=into is not None, force=force, binding=binding,
                                     openflow_profile=args.openflow_profile)
    if "ib" in formats and "ib" not in skipped:
        man = json.loads(((into or out) / "manifest.json").read_text())
        if man["exports"]["ib"].get("min_only"):
            print(f"tables: {args.routing}: the InfiniBand files carry MIN only: "
                  f"{man['exports']['ib']['min_only']}", file=sys.stderr)
    return dict(res, files=len(files), skipped=skipped,
                seconds={"tables_and_verify": round(t1 - t0, 3),
                         "export": round(time.perf_counter() - t1, 3)})


def write_routings(topo: Topology, routings, out: Path, formats, *, nonmin=None, vcs=None,
                   jobs: int = 1, done=None, force: bool = False,
                   binding=None, openflow_profile: str = "ovs") -> list[dict]:
    """:func:`table_set_job` for each of ``routings`` into ``out / routing``, ``jobs``
    routings and formats at a time in forked processes (:mod:`tablegen.forked`: once a
    routing is verified its formats are jobs of their own; a single routing writes ``out``
    itself).  The batch is one unit: every routing is written into one new directory that
    replaces ``out`` when all have ended (:func:`~tablegen.exports.outdir.replaced_dir`),
    with ``routings.json`` listing what it holds; so ``out`` holds the old batch or the
    new one, never a mix.  The minimal tables several routings share are computed once,
    before the fork.  ``done(summary)`` is called as each routing ends.  ``out`` replaces a
    directory of the same kind (a table set, a batch), with ``force`` any fabroute output
    (:func:`~tablegen.exports.outdir.check_out_dir`).  ``openflow_profile``: the OpenFlow
    program's (:data:`tablegen.exports.openflow.PROFILES`)."""
    from tablegen.exports.outdir import replaced_dir
    from tablegen.forked import run_forked
    from tablegen.routing.build import share_minimal_tables

    if len(routings) == 1:
        ns = argparse.Namespace(routing=routings[0], nonmin=nonmin, vcs=vcs,
                                openflow_profile=openflow_profile)
        res = table_set_job(topo, ns, out, formats, jobs, force=force, binding=binding)
        if done is not None:
            done(res)
        return [res]
    share_minimal_tables(topo, routings)
    with replaced_dir(out, kind="batch", force=force) as tmp:
        tasks = [functools.partial(table_set_job, topo,
                                   argparse.Namespace(routing=r, nonmin=nonmin, vcs=vcs,
                                                      openflow_profile=openflow_profile),
                                   out / r, formats, jobs, tmp / r, binding=binding)
                 for r in routings]
        results = run_forked(tasks, jobs, None if done is None else lambda _i, r: done(r))
        (tmp / "routings.json").write_text(json.dumps(
            {"kind": "batch", "topology": topo.name(), "routings": list(routings),
             "written": [r["routing"] for r in results if r["verified"]]}, indent=1) + "\n")
    return results


def cmd_tables(args) -> int:
    from tablegen.exports.files import FORMATS as EXPORT_FORMATS
    from tablegen.forked import cpu_count
    from tablegen.routing.build import check_routing
    from tablegen.routing.names import resolve, table_routings

    formats = tuple(args.formats.split(","))
    unknown = [f for f in formats if f not in EXPORT_FORMATS]
    if unknown:
        raise BadInput(f"--formats {args.formats}: {', '.join(unknown)} unknown; expected "
                       f"a comma-separated subset of {','.join(EXPORT_FORMATS)}")
    routings = table_routings(args.routing).split(",")
    _check_vcs(args.vcs)      # before the workers start, not in each of them
    jobs = args.jobs if args.jobs is not None else cpu_count()
    if jobs < 1:
        raise BadInput(f"--jobs {jobs}; expected at least 1 worker process")
    check_out_dir(args.out, kind="batch" if len(routings) > 1 else "table-set",
                  force=args.force)
    topo, binding = bound_topology(args)
    for r in routings:
        try:
            check_routing(topo.kind, *resolve(r, args.nonmin), degraded="fail" in topo.params)
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
                   vcs=args.vcs, jobs=jobs, done=done, force=args.force, binding=binding,
                   openflow_profile=args.openflow_profile)
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
    from tablegen.verify_cli import verify_dir

    return verify_dir(args)


def cmd_path(args) -> int:
    """``fabroute path SPEC|DIR``: the switches, ports and VCs of one packet; with a table
    directory its proven tables (``--routing`` may only repeat their routing)."""
    if Path(args.spec).is_dir():
        ts = _path_tables(Path(args.spec), args)
        if ts is None:
            return 1
        topo = ts.topo
    else:
        if args.routing is None:
            raise BadInput(f"path: --routing is needed with the SPEC {args.spec!r:.60}; "
                           "expected --routing ROUTING (or a table directory)")
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
        raise BadInput(f"--via {args.via}: class {cls.name} of routing {ts.routing} has no "
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


def _path_tables(d: Path, args):
    """The proven tables of directory ``d`` for ``path`` (in a batch, ``--routing``'s);
    ``--routing``/``--nonmin`` must name them, ``--vcs`` is theirs."""
    from tablegen.exports.dirs import set_dir
    from tablegen.routing.names import resolve

    if args.vcs is not None:
        raise BadInput(f"path: --vcs {args.vcs} with the table directory {d}; expected no "
                       "--vcs (the directory's tables carry their VCs)")
    ts, _ = _proven_dir(set_dir(d, args.routing), "path")
    if ts is None or args.routing is None:
        return ts
    routing, nonmin = resolve(args.routing, args.nonmin)
    have = ts.params.get("nonmin")
    if routing != ts.routing or nonmin not in (None, have):
        held = ts.routing + (f" (non-minimal class {have})" if have else "")
        raise BadInput(f"path: --routing {args.routing}"
                       f"{f' --nonmin {args.nonmin}' if args.nonmin else ''}, but {d} holds "
                       f"{held} tables; expected no --routing or theirs")
    return ts


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


def _before_transform(topo: Topology, args) -> Topology:
    """For ``--transform``: a DSN-F at ``n = p·2^p`` names the transformation point, so the
    network before it (``p - 1`` levels, full) is transformed; any other ``topo`` as is."""
    if topo.kind == "dsnf" and args.transform and "fail" not in topo.params:
        from tablegen.topologies.dsnf import build_dsnf

        p = int(topo.params["p"])
        if p >= 2 and topo.n_switches == p * 2**p:
            return build_dsnf(topo.n_switches, int(topo.hosts[0]), p=p - 1)
    return topo


def cmd_expand(args) -> int:
    from tablegen.update import table_diff

    if sum(x is not None and x is not False for x in (args.add, args.to, args.transform)) > 1:
        raise BadInput("expand: --add, --to and --transform exclude each other; expected one")
    if args.add is None and args.to is None and not args.transform:
        args.add = 1
    src = Path(args.spec)
    formats, lmc, seed, profile = ("json", "ib", "openflow"), 0, 1, "ovs"
    if args.out is not None:
        check_out_dir(args.out, kind="table-set", force=args.force)
    if src.is_dir():
        old, exports = _proven_dir(src, "expand")
        if old is None:
            return 1
        formats = tuple(f for f in ("json", "ib", "openflow") if exports.get(f))
        profile = openflow_profile(exports)
        if exports.get("ib"):
            lmc, seed = exports["ib"]["lmc"], exports["ib"]["seed"]
        routing, nonmin = old.routing, old.params.get("nonmin")
        before = _before_transform(old.topo, args)
        new_topo, relabel = _grown(before, args)
        if before is not old.topo:      # the directory holds the transformation's result
            from tablegen.verify import same_routing

            old, _ = same_routing(before, old)
    else:
        topo = _before_transform(topology_of(args.spec), args)
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
        write_table_set(new, rep, Path(args.out), formats, lmc, seed, update=diff,
                        force=args.force, openflow_profile=profile)
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
    print(f"{diff['from']} ({a.routing}) -> {diff['to']} ({b.routing}): "
          f"{'the same table sets' if diff['same'] else 'the table sets differ'} "
          f"(fabric: {how})")
    for d in diff["differences"]:
        change = (f"{d['changed']} entries differ" if "changed" in d
                  else f"{_shown(d['old'])} -> {_shown(d['new'])}")
        print(f"  {d['what']}: {change}")
    for name, t in diff["tables"].items():
        print(f"  table {name:10} +{t['added']} ~{t['changed']} -{t['removed']} "
              f"={t['unchanged']}")
    print(f"  switches with changed entries: {len(e['per_switch'])}; cables "
          f"+{len(c['added'])} -{len(c['removed'])} replugged {len(c['replugged'])}; VCs "
          f"{diff['vcs']['old']} -> {diff['vcs']['new']} (VC increments changed: "
          f"{diff['vcs']['vc_inc_changed']}); update: {diff['order']['consistency']}")
    return 0


def _shown(v) -> str:
    """A difference's value as text: lists and dicts as JSON, not Python reprs."""
    return v if isinstance(v, str) else json.dumps(v)


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
    check_out_dir(args.out, kind="compare", force=args.force)
    with replaced_dir(Path(args.out), kind="compare", force=args.force) as tmp:
        res = run(sizes, tmp, expand)
    if args.json:
        print(json.dumps(res))
        return 0
    for f, rows in res["families"].items():
        print(f"{f:6} " + "  ".join(f"n={r['n']}: D={r['diameter']} ASPL={r['aspl']:.2f} "
                                    f"cable={r['cable_m']:.2f}m" for r in rows))
    print(f"wrote {args.out}/compare.json and compare.png")
    return 0


def cmd_routings(args) -> int:
    """``fabroute routings``: every routing name once (:mod:`tablegen.routing.names`)."""
    from tablegen.routing.names import listing, text

    print(json.dumps({"routings": listing()}, indent=1, ensure_ascii=False) if args.json
          else text())
    return 0


def routing_args(sp, several: bool = False, required: bool = True) -> None:
    """``--routing`` (one, or with ``several`` a comma-separated list; names of
    :mod:`tablegen.routing.names`, checked as the command line is parsed), ``--nonmin``,
    ``--vcs``."""
    from tablegen.limits import MAX_VCS, vcs_option
    from tablegen.routing.build import NONMIN
    from tablegen.routing.names import option, table_routing, table_routings

    if several:
        sp.add_argument("--routing", required=True, type=option(table_routings),
                        metavar="ROUTING[,ROUTING...]", help="a routing, or several "
                        "separated by commas (each into OUT/ROUTING); see `fabroute routings`")
    else:
        sp.add_argument("--routing", required=required, type=option(table_routing),
                        metavar="ROUTING", help="see `fabroute routings`"
                        + ("" if required else " (with a table directory: optional, theirs)"))
    sp.add_argument("--nonmin", choices=NONMIN, help="UGAL-L's and PAR's non-minimal class "
                    "(another spelling: --routing ugal-l-3h is ugal-l --nonmin val-3h)")
    sp.add_argument("--vcs", type=vcs_option, help=f"force the VC count, 1..{MAX_VCS} "
                    "(fewer than needed fail verify)")


def force_option(sp) -> None:
    """``--force``: the output directory may replace a fabroute output of another kind."""
    sp.add_argument("--force", action="store_true", help="replace --out even when it holds "
                    "a fabroute output of another kind (a batch, a table set, an IB export, "
                    "a comparison…); the same kind is replaced anyway, a directory fabroute "
                    "did not write never")


def openflow_profile_option(sp) -> None:
    """``--openflow-profile``: the pipeline the OpenFlow program is written for."""
    from tablegen.exports.openflow import PROFILES

    sp.add_argument("--openflow-profile", choices=PROFILES, default="ovs",
                    help="the OpenFlow program: ovs (default; Open vSwitch's resubmit in the "
                    "SELECT group, flows split by masked L4 source ports) or standard (plain "
                    "OpenFlow 1.3 for hardware switches: no vendor action or match, the "
                    "source choice by IPv4 address bits); recorded in the manifest, which "
                    "verify and the controller follow")


def add_parsers(sub) -> None:
    """Add tablegen's sub-commands to ``sub`` (an argparse sub-parsers object)."""
    from tablegen.limits import (
        MAX_JOBS,
        jobs_option,
        lmc_option,
        seed_option,
        switch_option,
        switches_option,
    )

    from tablegen.routing.names import option, table_routing
    from tablegen.topologies.spec import GRAMMAR

    sp = sub.add_parser("topology", help="build a topology and print it", epilog=GRAMMAR,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("spec", metavar="SPEC|DIR", help=SPEC_HELP + "; or a table directory "
                    "(its topology)")
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
    openflow_profile_option(sp)
    force_option(sp)
    json_option(sp, "each routing's summary (a line each: out, routing, verified, "
                "num_vcs, classes, files, skipped)")
    sp.add_argument("--fail", metavar="A:B[,C:D...]", help="tables for the fabric without "
                    "the cables between these switch pairs (ids as in `fabroute topology SPEC "
                    "--json`), still verified")
    fabric_option(sp)
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
    sp.add_argument("spec", metavar="SPEC|DIR", help=SPEC_HELP + ", with --routing; or a "
                    "proven table directory (its tables)")
    routing_args(sp, required=False)
    sp.add_argument("--src", type=switch_option, required=True, help="source switch id, "
                    "0 <= SRC < switches (ids as in `fabroute topology SPEC --json`)")
    sp.add_argument("--dst", type=switch_option, required=True, help="destination switch id")
    sp.add_argument("--via", type=switch_option, help="intermediate switch of a Valiant "
                    "class (group-level VAL: the group of this switch)")
    sp.add_argument("--class", dest="cls", help="path class of a UGAL-L routing (min or the "
                    "non-minimal one; default the non-minimal)")
    json_option(sp, "the path (switches, ports, vcs, labels, class, via)")
    sp.set_defaults(func=cmd_path)

    sp = sub.add_parser("analyze", help="diameter, ASPL, degrees, cable lengths; with "
                        "--throughput-bound the saturation bound of a routing under a traffic")
    sp.add_argument("spec", metavar="SPEC|DIR", help=SPEC_HELP + "; or a table directory "
                    "(its topology, or with --throughput-bound its proven tables)")
    json_option(sp, "the metrics")
    sp.set_defaults(func=cmd_analyze)

    sp = sub.add_parser("expand", help="DSN-F expansion: the grown tables, cables and the "
                        "update between them")
    sp.add_argument("spec", metavar="DIR|SPEC", help="a table directory (its routing and "
                    "formats are kept) or a dsnf SPEC")
    sp.add_argument("--add", type=switches_option, help="switches to add (same p; default 1)")
    sp.add_argument("--to", type=switches_option, metavar="N",
                    help="grow to N switches (same p)")
    sp.add_argument("--transform", action="store_true",
                    help="the p -> p+1 transformation at n = (p+1)·2^(p+1), e.g. dsnf:n=64")
    sp.add_argument("--routing", default="dsnf", type=option(table_routing),
                    help="with a SPEC (default dsnf); see `fabroute routings`")
    sp.add_argument("--out", metavar="NEWDIR", help="write the grown, verified table set here "
                    "with update.json (the diff and the order to apply it)")
    force_option(sp)
    json_option(sp, "the diff")
    sp.set_defaults(func=cmd_expand)

    sp = sub.add_parser("diff", help="entries, VCs and cables that change between two table "
                        "sets of one fabric, and the order that applies them consistently")
    sp.add_argument("dir_a", metavar="DIR_A", help="the table set running now (a `fabroute "
                    "tables` directory)")
    sp.add_argument("dir_b", metavar="DIR_B", help="the table set to go to")
    json_option(sp, "the diff")
    sp.set_defaults(func=cmd_diff)

    sp = sub.add_parser("routings", help="every routing name once: what it is, the "
                        "commands that take it, its paper")
    json_option(sp, "the list")
    sp.set_defaults(func=cmd_routings)

    sp = sub.add_parser("compare", help="DSN-F vs torus, DSN-x, DLN-4: JSON + PNG")
    sp.add_argument("--sizes", default="128,256,512,1024,2048,4096", help="comma-separated "
                    "switch counts to compare the families at")
    sp.add_argument("--expansion", help="START,STOP,STEP: grow DSN-F (paper Fig. 4: "
                    "1024,2048,64)")
    sp.add_argument("--out", default="out/compare", metavar="DIR", help="directory for "
                    "compare.json and compare.png")
    force_option(sp)
    json_option(sp, "the comparison (compare.json's document)")
    sp.set_defaults(func=cmd_compare)
