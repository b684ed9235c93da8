"""``simulate`` and ``sweep`` subcommands; ``add_parsers(subparsers)`` adds them to a CLI.

    fabroute simulate SPEC --routing R --traffic T --load X [--config FILE] [--seed S]
    fabroute sweep SPEC --routing R [R ...] --traffic T --loads 0.1,0.2,... [--config FILE]
                   [--seed S] [--workers W] [--out PATH] [--scheduler local|tcp://HOST:PORT]
                   [--store FILE]
    fabroute sweep --experiment simulator/experiments/dragonfly-fig8a.toml [--out PATH]
    fabroute growth --experiment simulator/experiments/dsnf-growth.toml [--out PATH] [-j W]

An experiment file with ``vary = "KEY"`` and ``values = [...]`` (and ``references``) sweeps
that SimConfig key at fixed loads instead (:mod:`simulator.vary`).  ``growth`` runs DSN-F
grown in steps (:mod:`simulator.growth`).
"""

from __future__ import annotations

import json
import sys

from simulator.config import ROUTINGS, SimConfig, load_experiment
from tablegen.errors import BadInput
from tablegen.output import emit, json_option, num
from tablegen.limits import (MAX_JOBS, MAX_POINTS, MAX_VCS, SEED_BOUND, jobs_option,
                             number_option, seed_option, vcs_option)
from tablegen.routing.names import option, simulator_routing

_ROUTING = option(simulator_routing)


def _traffic_help(extra: str = "") -> str:
    from simulator.traffic import TRAFFICS

    return (f"traffic pattern: {', '.join(TRAFFICS)}; parameters as NAME:KEY=V "
            f"(adversarial:A=2,B=11){extra}")


#: --routing's help: the names are listed, one line each, by `fabroute routings`
ROUTING_HELP = "routing name (see `fabroute routings`; e.g. min, val-3h, ugal-l, par-3h)"


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="flit-level simulation of one load point")
    p.add_argument("spec", metavar="SPEC|DIR", help="topology SPEC, e.g. "
                   "dragonfly:p=2,a=4,h=2, or a proven table directory (fabroute tables / ib "
                   "import: its tables; --routing unused)")
    p.add_argument("--routing", "-r", default="min", type=_ROUTING,
                   metavar="ROUTING", help=ROUTING_HELP)
    p.add_argument("--traffic", "-t", default="uniform", help=_traffic_help())
    p.add_argument("--load", "-l", type=number_option, required=True, help="offered load, "
                   "flits per cycle per host, 0 < LOAD <= 1")
    p.add_argument("--config", "-c", help="TOML/JSON file of SimConfig keys")
    p.add_argument("--seed", "-s", type=seed_option, default=1, help="0 <= SEED < 2**32")
    p.add_argument("--vcs", type=vcs_option, help="force the number of VCs of the tables, "
                   f"1..{MAX_VCS}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one SimConfig key (repeatable)")
    json_option(p, "the whole result (every counter, the config)")
    p.set_defaults(func=cmd_simulate)

    s = subparsers.add_parser("sweep", help="latency vs offered load for several routings")
    s.add_argument("spec", nargs="?", help="topology SPEC (or --experiment)")
    s.add_argument("--experiment", "-e", help="experiment file (simulator/experiments/*.toml)")
    s.add_argument("--routing", "-r", nargs="+", metavar="ROUTING",
                   help="routings (see `fabroute routings`), or ROUTING@SPEC")
    s.add_argument("--traffic", "-t", help=_traffic_help(" (default: the experiment's, "
                                                          "else uniform)"))
    s.add_argument("--loads", help="comma-separated offered loads, e.g. 0.1,0.2,0.3 (at most "
                   f"{MAX_POINTS:,} points, routings × loads)")
    s.add_argument("--config", "-c", help="TOML/JSON file of SimConfig keys")
    s.add_argument("--seed", "-s", type=seed_option, help="0 <= SEED < 2**32")
    s.add_argument("--workers", "-j", type=jobs_option, help=f"local worker processes, "
                   f"1..{MAX_JOBS} (default: one per CPU; 1: in this process)")
    s.add_argument("--scheduler", default="local", help="local (a Dask cluster on this "
                   "machine) or the address of a running `dask scheduler`, tcp://HOST:PORT")
    s.add_argument("--store", help="results store, one JSON line per finished point; a "
                   "re-run reuses its points (default: OUT.points.jsonl)")
    s.add_argument("--out", "-o", help="output path without suffix (.json and .png)")
    s.add_argument("--vcs", type=vcs_option, help=f"1..{MAX_VCS}")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one SimConfig key (repeatable)")
    s.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    json_option(s, "the summary (out, store, reused, computed, failed, points)")
    s.set_defaults(func=cmd_sweep)

    g = subparsers.add_parser("growth", help="DSN-F grown in steps: saturation and latency "
                              "per size, beside diameter and ASPL (simulator.growth)")
    g.add_argument("--experiment", "-e", required=True,
                   help="growth experiment file (simulator/experiments/dsnf-growth.toml)")
    g.add_argument("--workers", "-j", type=jobs_option, help=f"processes, 1..{MAX_JOBS}")
    g.add_argument("--out", "-o", help="output path without suffix (.json and .png)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    json_option(g, "the results per size and routing")
    g.set_defaults(func=cmd_growth)


def add_bound_args(parser) -> None:
    """``--routing`` / ``--traffic`` / ``--seed`` / ``--class`` for a throughput-bound
    command (the topology SPEC is the caller's positional argument)."""
    parser.add_argument("--routing", "-r", default="min", type=_ROUTING,
                        metavar="ROUTING", help=ROUTING_HELP)
    parser.add_argument("--traffic", "-t", default="uniform", help=_traffic_help())
    parser.add_argument("--seed", "-s", type=seed_option, default=1, help="0 <= SEED < 2**32")
    parser.add_argument("--class", dest="cls", help="bound only this path class")


def add_throughput_bound(analyze) -> None:
    """Give tablegen's ``analyze`` sub-parser ``--throughput-bound`` and its options: the
    bound needs the simulator's traffic patterns and intermediate rule."""
    analyze.add_argument("--throughput-bound", action="store_true",
                         help="1 / max channel load of the routing's tables under --traffic")
    add_bound_args(analyze)
    # None until given: analyze without --throughput-bound refuses them instead of ignoring
    defaults = {k: analyze.get_default(k) for k in ("routing", "traffic", "seed")}
    analyze.set_defaults(**dict.fromkeys(defaults))
    plain = analyze.get_default("func")

    def run(args):
        given = [k for k in (*defaults, "cls") if getattr(args, k) is not None]
        if not args.throughput_bound:
            if given:       # else silently ignored, and the user believes them applied
                k = given[0].replace("cls", "class")
                raise BadInput(f"analyze: --{k} applies to the throughput bound; expected "
                               "--throughput-bound with it, or no --" + k)
            return plain(args)
        for k, v in defaults.items():
            if getattr(args, k) is None:
                setattr(args, k, v)
        return cmd_throughput_bound(args)

    analyze.set_defaults(func=run)


def cmd_throughput_bound(args) -> int:
    """``fabroute analyze SPEC --throughput-bound``: 1 / max channel load of the routing's
    tables under ``--traffic`` (:mod:`simulator.bound`); SPEC may be a proven table directory
    (e.g. ``fabroute ib import``'s), whose tables are bounded instead (``--routing`` unused)."""
    from simulator.bound import cmd_bound, throughput_bound
    from tablegen.topologies.spec import build

    ts = _proven_dir(args.spec, "analyze --throughput-bound")
    if ts is False:
        return 1
    topo = ts.topo if ts is not None else build(args.spec)
    try:
        b = (throughput_bound(ts, args.traffic, args.seed, args.cls) if ts is not None
             else cmd_bound(args, topo))
    except ValueError as e:
        raise BadInput(f"analyze --throughput-bound: {e}") from None
    if ts is not None:
        args.routing = ts.routing
    if args.json:
        print(json.dumps(b, indent=1))
        return 0
    print(f"{topo.name()}, {args.routing}, {args.traffic}:")
    for name, c in b["classes"].items():
        print(f"  {name:>10}: bound {c['bound']:.4f} of the injection bandwidth "
              f"(max channel load {c['max_load']:.3f}, limited by {c['limited_by']})")
    if b.get("mix"):
        print(f"  best fixed split: bound {b['mix']['bound']:.4f}")
    return 0


def _proven_dir(spec: str, cmd: str):
    """The table set of ``spec`` when it names a table directory (``fabroute tables``, ``ib
    export``, ``ib import``) that :func:`~tablegen.exports.files.prove_table_dir` proves;
    ``None`` for a topology SPEC; ``False`` (exit 1, the reasons printed) for a directory
    that does not prove: nothing unproven is run."""
    from pathlib import Path

    if not Path(spec).is_dir():
        return None
    from tablegen.exports.files import prove_table_dir

    ts, rep, files = prove_table_dir(Path(spec))
    if rep.ok and files["ok"]:
        return ts
    for e in rep.errors + (files["errors"] if files else []):
        print(f"{cmd}: {spec}: {e}", file=sys.stderr)
    return False


def _config(path, sets) -> SimConfig:
    """A SimConfig file, or the ``[config]`` of an experiment file, plus ``--set`` keys."""
    cfg = load_experiment(path)[1] if path else SimConfig()
    return cfg.replace(**_sets(sets)) if sets else cfg


def _sets(sets) -> dict:
    out = {}
    for item in sets:
        k, eq, v = item.partition("=")
        if not eq:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[k] = json.loads(v)
        except (json.JSONDecodeError, RecursionError):     # a word, or absurdly nested
            out[k] = v
    return out


def cmd_simulate(args) -> int:
    from simulator.run import simulate, tables_for
    from simulator.traffic import parse
    from tablegen.topologies.spec import build

    try:                        # bad input: one line, exit 2, before any simulation
        cfg = _config(args.config, args.set)
        parse(args.traffic)
        if not 0 < args.load <= 1:
            raise ValueError(f"--load {args.load}; expected 0 < load <= 1 (flits per cycle "
                             "per host)")
        ts = _proven_dir(args.spec, "simulate")     # a table directory: its own tables
        if ts is False:
            return 1
        ts, over = (ts, {}) if ts is not None else tables_for(build(args.spec), args.routing,
                                                               args.vcs)
    except (ValueError, KeyError, OSError) as e:
        raise BadInput(f"simulate: {e}") from None
    if over:
        cfg = cfg.replace(**over)
    with _compiling():
        r = simulate(ts, cfg, args.traffic, args.load, args.seed)
    emit(r, args.json, _simulate_text, indent=1)
    return 1 if r["deadlock"] or r["status"] != "ok" else 0


def _compiling():
    """A status line on stderr while the simulator is compiled (Numba's cache is cold: first
    run, or the sources changed; :func:`simulator.run.compile_pending`), else nothing."""
    import contextlib

    from simulator.run import compile_pending
    from tablegen.output import console

    if not compile_pending():
        return contextlib.nullcontext()
    con, what = console(), "compiling the simulator (first run only, ~40 s; cached after)"
    if not con.is_terminal:     # a live status shows only on a terminal: a log line instead
        con.log(f"simulate: {what}…")
        return contextlib.nullcontext()
    return con.status(f"{what}… then simulating")


def _simulate_text(r: dict) -> list[str]:
    """The measures of one simulated point people read first (``--json``: every one)."""
    lat = lambda k: num(r.get(k)) if r.get(k) is not None else "-"   # noqa: E731
    util = r.get("channel_util") or {}
    return [f"{r.get('topology')}, {r.get('routing')}, {r.get('traffic')} at load "
            f"{num(r.get('offered'))}: {r.get('status')}"
            + (" (SATURATED)" if r.get("saturated") else "")
            + (" (DEADLOCK)" if r.get("deadlock") else ""),
            f"  accepted     {num(r.get('accepted'))} flits/cycle/host (offered "
            f"{num(r.get('offered_measured'))})",
            f"  latency      avg {lat('latency_avg')}, p50 {lat('latency_p50')}, p99 "
            f"{lat('latency_p99')}, max {lat('latency_max')} cycles",
            f"  hops         avg {lat('hops_avg')}; non-minimal share "
            f"{lat('nonmin_share')}",
            f"  channels     utilisation avg {num(util.get('avg'))}, max "
            f"{num(util.get('max'))}",
            f"  cycles       {num(r.get('cycles'))}  (--json: every counter and the config)"]


def _int_in(name: str, v, lo: int, hi: int) -> int:
    """An experiment file's integer (TOML/JSON may hold any type): ``lo <= v <= hi``."""
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ValueError(f"{name}={v!r:.40}; expected an integer {lo} <= {name} <= {hi}")
    return v


def _loads(text: str | None, listed) -> list[float]:
    """``--loads`` (or the experiment's ``loads`` list): numbers ``0 < load <= 1``."""
    try:
        loads = [float(x) for x in text.split(",")] if text else listed or []
    except ValueError:
        raise ValueError(f"--loads {text!r:.60}; expected comma-separated numbers "
                         "0 < load <= 1") from None
    if not isinstance(loads, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 1
            for x in loads):
        raise ValueError(f"--loads {loads!r:.60}; expected 0 < load <= 1")
    return [float(x) for x in loads]


def _experiment_names(args, exp: dict) -> tuple:
    """SPEC, routings and traffic from the command line or the experiment file, each of the
    type it must have (a file may hold anything)."""
    spec = args.spec or exp.get("spec")
    routings = args.routing or exp.get("routings")
    traffic = args.traffic or exp.get("traffic", "uniform")
    if spec is not None and not isinstance(spec, str):
        raise ValueError(f"spec={spec!r:.40}; expected a topology SPEC string")
    if routings is not None and not (isinstance(routings, list)
                                     and all(isinstance(r, str) for r in routings)):
        raise ValueError(f"routings={routings!r:.40}; expected a list of routing names")
    if not isinstance(traffic, str):
        raise ValueError(f"traffic={traffic!r:.40}; expected a traffic pattern name")
    for r in routings or []:
        if r.partition("@")[0] not in ROUTINGS:
            raise ValueError(f"routing {r!r:.40} is unknown; expected one of "
                             f"{', '.join(ROUTINGS)} (or ROUTING@SPEC)")
    return spec, routings, traffic


def _vary(exp: dict, cfg: SimConfig) -> tuple | None:
    """An experiment's ``vary`` (a SimConfig key), ``values`` (each one checked as that key)
    and ``references`` (routing names), or None when it varies nothing."""
    if "vary" not in exp and "values" not in exp:
        return None
    key, values, refs = exp.get("vary"), exp.get("values"), exp.get("references", [])
    if not isinstance(key, str) or key not in cfg.to_dict():
        raise ValueError(f"vary={key!r:.40}; expected a SimConfig key")
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_POINTS:
        raise ValueError(f"values={values!r:.40}; expected a list of 1..{MAX_POINTS:,} "
                         f"values of {key}")
    for v in values:
        cfg.replace(**{key: v})
    if not (isinstance(refs, list) and all(isinstance(r, str) and r in ROUTINGS
                                           for r in refs)):
        raise ValueError(f"references={refs!r:.60}; expected a list of routing names")
    return key, values, refs


def _check_specs(spec: str, routings) -> None:
    """Build every topology a sweep names (SPEC and each ``ROUTING@SPEC``) before any point
    runs, so that an inadmissible one is bad input (exit 2, nothing written), not a failed
    point in a results file; a table directory is proven when its points run."""
    from pathlib import Path

    from tablegen.topologies.spec import build

    for s in dict.fromkeys([spec] + [r.partition("@")[2] for r in routings if "@" in r]):
        if not Path(s).is_dir():
            build(s)


def _check_outputs(out, store) -> None:
    """The files a sweep writes (``OUT.json``, ``OUT.png``, ``--store``) can be created."""
    from tablegen.exports.outdir import check_out_file

    if out:
        for suffix in (".json", ".png"):
            check_out_file(f"{out}{suffix}", "--out")
    if store:
        check_out_file(store, "--store")


def cmd_sweep(args) -> int:
    """``fabroute sweep``: prints ``{"out", "store", "reused", "computed", "failed",
    "points"}``; each failed point also as one line on stderr; exit 1 if any failed."""
    from simulator.cluster import check_scheduler
    from simulator.sweep import sweep
    from simulator.traffic import parse
    from simulator.vary import sweep_values

    exp: dict = {}
    cfg = None
    try:
        if args.experiment:
            exp, cfg = load_experiment(args.experiment)
            if args.config or args.set:     # one dict: a key in both must not come twice
                cfg = cfg.replace(**{**(_config(args.config, []).to_dict() if args.config
                                        else {}), **_sets(args.set)})
        else:
            cfg = _config(args.config, args.set)
        spec, routings, traffic = _experiment_names(args, exp)
        parse(traffic)
        loads = _loads(args.loads, exp.get("loads"))
        seed = _int_in("seed", args.seed if args.seed is not None else exp.get("seed", 1),
                       0, SEED_BOUND - 1)
        workers = args.workers or exp.get("workers")
        if workers is not None:
            _int_in("workers", workers, 1, MAX_JOBS)
        vary = _vary(exp, cfg)
    except (ValueError, KeyError, OSError) as e:
        raise BadInput(f"sweep: {e}") from None
    if not (spec and routings and loads):
        raise BadInput("sweep: needs SPEC, --routing and --loads (or --experiment FILE)")
    _check_specs(spec, routings)
    scheduler = check_scheduler(args.scheduler)
    runs = len(routings) * len(vary[1]) + len(vary[2]) if vary else len(routings)
    if runs * len(loads) > MAX_POINTS:
        raise BadInput(f"sweep: {runs} routings (× values) × {len(loads)} loads = "
                       f"{runs * len(loads):,} load points, above the largest "
                       f"supported {MAX_POINTS:,}; expected fewer loads or routings")
    out = args.out or exp.get("out") or (f"out/sim/{exp['name']}" if exp.get("name") else None)
    _check_outputs(out, args.store)
    common = dict(seed=seed, workers=workers, out=out, title=exp.get("figure"),
                  progress=not args.quiet, vcs=args.vcs, scheduler=scheduler, store=args.store)
    from simulator.run import compile_pending

    if not args.quiet and compile_pending():    # the bar stays at 0 meanwhile
        from tablegen.output import console

        console().log("sweep: compiling the simulator first (first run only, ~40 s; cached "
                      "after)")
    if vary:
        res = sweep_values(spec, routings, traffic, loads, vary[0], vary[1], vary[2], cfg,
                           **common)
    else:
        res = sweep(spec, routings, traffic, loads, cfg, **common)
    summary = [{"routing": p["routing_name"], "offered": p["offered"],
                **({vary[0]: p["vary_value"]} if vary else {}),
                "accepted": round(p["accepted"], 4),
                "latency_avg": p["latency_avg"] and round(p["latency_avg"], 2),
                "saturated": p["saturated"]} for p in res["points"]]
    run = res["run"]
    emit({"out": str(out) if out else None, "store": run["store"],
          "reused": run["reused"], "computed": run["computed"], "failed": res["failed"],
          "points": summary}, args.json, _sweep_text, indent=1)
    print(f"sweep: {len(res['points']) + len(res['failed'])} points: {run['reused']} reused"
          f"{' from ' + run['store'] if run['store'] else ''}, {run['computed']} computed, "
          f"{len(res['failed'])} failed", file=sys.stderr)
    for f in res["failed"]:
        at = f" with {vary[0]}={f['vary_value']}" if vary and f["vary_value"] is not None else ""
        print(f"sweep: failed: {f['routing']} on {f['spec']}{at}, {f['traffic']} at load "
              f"{f['load']:g}, seed {f['seed']}: {f['error']}", file=sys.stderr)
    return 1 if res["failed"] else 0


def _sweep_text(doc: dict) -> list[str]:
    """The sweep's points as a table: one row per routing and offered load."""
    pts = doc["points"]
    extra = [k for k in (pts[0] if pts else {}) if k not in (
        "routing", "offered", "accepted", "latency_avg", "saturated")]
    width = max([len("routing")] + [len(p["routing"]) for p in pts])
    head = f"{'routing':<{width}} " + "".join(f"{k:>10} " for k in extra)
    lines = [head + f"{'offered':>8} {'accepted':>9} {'latency':>9}  saturated"]
    for p in pts:
        lines.append(f"{p['routing']:<{width}} " + "".join(f"{num(p[k]):>10} " for k in extra)
                     + f"{num(p['offered']):>8} {num(p['accepted']):>9} "
                     f"{num(p['latency_avg']):>9}  {num(p['saturated'])}")
    if doc["out"]:
        lines.append(f"wrote {doc['out']}.json and {doc['out']}.png")
    return lines


def cmd_growth(args) -> int:
    """``fabroute growth -e FILE``: :func:`simulator.growth.growth` from an experiment file;
    prints per (network, routing) the saturation interval and the latencies."""
    from simulator.growth import growth, load

    try:
        exp, cfg = load(args.experiment)
    except (ValueError, KeyError, OSError) as e:
        raise BadInput(f"growth: {e}") from None
    out = args.out or exp.get("out") or (f"out/sim/{exp['name']}" if exp.get("name") else None)
    _check_outputs(out, None)
    res = growth(exp["spec"], exp["sizes"], exp["routings"], exp["traffic"], exp["loads"], cfg,
                 exp["search_steps"], exp["seed"], args.workers or exp["workers"], out,
                 exp.get("figure"), not args.quiet)
    summary = [{k: x[k] for k in ("n", "p", "routing", "bound", "saturation", "first_saturated",
                                  "accepted_at_saturation", "latency")}
               for x in res["results"]]
    emit({"out": str(out) if out else None, "results": summary}, args.json, indent=1)
    return 0


def main(argv=None) -> int:
    """``python -m simulator.cli simulate|sweep ...`` (the same commands as ``fabroute``)."""
    import argparse

    from tablegen.numba_cache import use_writable_cache

    use_writable_cache()    # before the commands import Numba (see tablegen.numba_cache)
    ap = argparse.ArgumentParser(prog="python -m simulator.cli")
    add_parsers(ap.add_subparsers(dest="cmd", required=True))
    a = ap.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
