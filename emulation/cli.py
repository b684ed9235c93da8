"""``fabroute emulate`` (Mininet + Open vSwitch with the controller), ``fabroute ib apply`` and
``fabroute ib compare`` (OpenSM on ibsim): the sub-commands that run a table set on an
emulated fabric."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from controller.cli import adaptive_args, adaptive_of
from tablegen.cli import (
    SPEC_HELP,
    console,
    force_option,
    routing_args,
    topology_of,
    verified_tables,
)
from tablegen.errors import BadInput, RunFailed
from tablegen.limits import (
    duration_option,
    hosts_option,
    load_option,
    paths_option,
    prepare_option,
    rate_option,
    samples_option,
    switches_option,
    timeout_option,
)
from tablegen.output import emit

#: links of a loaded emulation when --link-mbit is not given (docs/emulation.md: the shaped
#: links, not the userspace datapath, are then the bottleneck on this machine's fabrics)
DEFAULT_LINK_MBIT = 1.0


def add_parsers(sub) -> None:
    sp = sub.add_parser("emulate", help="Mininet + Open vSwitch: install the tables with the "
                        "controller, probe every host pair, prove sampled paths and VCs")
    sp.add_argument("spec", help=SPEC_HELP)
    routing_args(sp)
    sp.add_argument("--check", choices=("all-pairs", "sample"), default="all-pairs",
                    help="probe every host pair, or only the --samples pairs")
    sp.add_argument("--samples", type=samples_option, default=12, help="host pairs whose exact path and "
                    "VCs are proven (Valiant: 2 intermediates each)")
    sp.add_argument("--hosts-per-switch", type=hosts_option, help="attach fewer hosts than the topology "
                    "has (faster on big fabrics)")
    sp.add_argument("--keep", action="store_true", help="leave the net and the controller up "
                    "until Ctrl-C")
    sp.add_argument("--tls", action="store_true", help="OpenFlow over TLS with mutual "
                    "certificates made for this run")
    sp.add_argument("--json", action="store_true", help="print the report as JSON (for "
                    "scripts) instead of text; with --traffic or a live update, no progress "
                    "log")
    sp.add_argument("--metrics", type=loopback_address, metavar="HOST:PORT", help="the "
                    "controller serves Prometheus metrics on http://HOST:PORT/metrics while "
                    "it runs (a loopback address; docs/operations.md)")
    sp.add_argument("--web", type=loopback_address, metavar="HOST:PORT", help="the "
                    "controller serves the live fabric map on http://HOST:PORT/ while it runs "
                    "(a loopback address; with --keep, for a look; docs/operations.md)")
    g = sp.add_argument_group("load (instead of the all-pairs probes)")
    g.add_argument("--traffic", action="append", metavar="PATTERN", help="run traffic: "
                   "uniform, worst-case (Dragonfly), adversarial (Slim Fly), ... (simulator "
                   "patterns); repeat for phases back to back, e.g. --traffic uniform "
                   "--traffic adversarial")
    g.add_argument("--load", type=load_option, default=0.5, help="each host's rate as a "
                   "fraction of the link capacity (default 0.5)")
    g.add_argument("--duration", type=duration_option, default=10.0,
                   help="seconds of each traffic phase (default 10)")
    g = sp.add_argument_group("live updates under a probe stream (instead of the probes)")
    g.add_argument("--expand", type=switches_option, metavar="N", help="DSN-F: grow the running fabric "
                   "by N switches (the controller applies the grown tables live, then the new "
                   "switches, hosts and cables join)")
    g.add_argument("--transform", action="store_true", help="DSN-F at n = p·2^p: the p-1 -> "
                   "p transformation of the running fabric (hold, move the cables, flip)")
    g.add_argument("--fail", metavar="A:B[,C:D...]", help="take these links down (switch ids "
                   "as in `fabroute topology SPEC --json`), let the controller route around "
                   "them, then bring them back")
    g.add_argument("--standby", action="store_true", help="two controllers on every switch: "
                   "a master and a standby (OpenFlow roles; with --kill-master)")
    g.add_argument("--kill-master", action="store_true", help="--standby: kill -9 the master "
                   "under the probe stream; the standby takes over, then repairs a link taken "
                   "down (the first of --fail, default switch 0 and its first neighbour)")
    g.add_argument("--rate", type=rate_option, default=200.0, help="probes per second per pair "
                   "(default 200)")
    g.add_argument("--fast-failover", action="store_true", help="--fail: the switches hold "
                   "FAST_FAILOVER groups on verified backup ports (MIN tables)")
    g.add_argument("--prepare-mib", type=prepare_option, metavar="MIB", help="--fail, "
                   "--standby: the controllers' --prepare-mib (repairs made ready while idle; "
                   "0: planned when the port goes down, as before)")
    g.add_argument("--no-link-repair", action="store_true", help="--fail: the controller "
                   "leaves the tables as they are (what the switches do alone)")
    adaptive_args(sp)
    sp.set_defaults(func=cmd_emulate)


def add_ib_parsers(ib) -> None:
    sp = ib.add_parser("apply", help="run ibsim + OpenSM (engine 'fabroute': our LFTs, SL2VL "
                       "and path SLs) on the files in DIR or DIR/ib, read LFTs, SL2VL tables and "
                       "PathRecord SLs back, compare (exit 1 on any mismatch)")
    sp.add_argument("dir", help="an `ib export` directory, or a `tables` one (its ib/)")
    sp.add_argument("--keep-logs", action="store_true",
                    help="keep the scratch directory (ibsim/OpenSM logs) and name it")
    sp.add_argument("--max-paths", type=paths_option, default=200_000,
                    help="PathRecords to read back before sampling deterministically "
                         "(0 = all; default 200000)")
    sp.add_argument("--json", action="store_true", help="print the report as JSON (for "
                    "scripts) instead of text")
    sp.set_defaults(func=cmd_ib_apply)

    from emulation.ibsim.update import add_ib_update_parser   # ib update (live growth / failures)
    add_ib_update_parser(ib)
    _add_ib_compare_parser(ib)


def _add_ib_compare_parser(ib) -> None:
    from emulation.ibsim.compare import EXPORTABLE
    from emulation.ibsim.engines import DEFAULT_ENGINES, OPENSM_ENGINES
    from tablegen.limits import lmc_option, seed_option

    sp = ib.add_parser("compare", help="OpenSM's routing engines and fabroute's routings on the "
                       "ibsim fabric of SPEC: each read back, verified under IB (deadlock "
                       "freedom), its hops and throughput bounds measured")
    sp.add_argument("spec", help=SPEC_HELP)
    sp.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help="OpenSM engines, "
                    f"comma-separated, of {','.join(OPENSM_ENGINES)} (default "
                    f"{','.join(DEFAULT_ENGINES)}; '' for none)").empty_ok = True
    sp.add_argument("--routings", help="fabroute routings run as engines fabroute-<routing>, "
                    f"of {','.join(EXPORTABLE)} (default: min, the topology's own, and with "
                    "--lmc >= 1 its Valiant variant; '' for none); at LMC 0 a routing whose "
                    "own paths do not fit 8 VLs runs as its IB variant: MIN as "
                    "fabroute-min-ib-climb (else -ib-phase on a DSN-F, else -ib-native), the others as "
                    "fabroute-<routing>-ib-native").empty_ok = True
    sp.add_argument("--lmc", type=lmc_option, default=0, help="LMC of every engine (0..7)")
    sp.add_argument("--seed", type=seed_option, default=1, help="seed of fabroute's Valiant "
                    "layers")
    sp.add_argument("--timeout", type=timeout_option, default=60.0, help="seconds from OpenSM's start "
                    "to SUBNET UP per engine (default 60)")
    sp.add_argument("--max-paths", type=paths_option, default=200_000, help="PathRecords read per "
                    "engine before sampling deterministically (0 = all; default 200000)")
    sp.add_argument("--adversarial", metavar="TRAFFIC", help="traffic of bound_adversarial "
                    "(default: adversarial on a Slim Fly, worst-case on a Dragonfly, "
                    "transpose on a DSN-F, shift elsewhere)")
    sp.add_argument("--opensm-set", action="append", default=[], metavar="KEY=VALUE",
                    help="an opensm.conf option for every OpenSM engine (repeatable), e.g. "
                         "lash_start_vl=7")
    sp.add_argument("--out", help="write compare.json, compare.png and per engine the read-"
                    "back table set here")
    force_option(sp)
    sp.add_argument("--json", action="store_true", help="print the JSON instead of a table")
    sp.set_defaults(func=cmd_ib_compare)


def loopback_address(text: str) -> str:
    """An argparse ``type=``: ``HOST:PORT`` on a loopback address, for what the emulation's
    controller serves over plain HTTP (the fabric runs on this machine only)."""
    from controller.openflow.launcher import is_loopback, split_host_port

    served = split_host_port(text)
    if served is None or not is_loopback(served[0]):
        raise argparse.ArgumentTypeError(f"{text!r:.60} is not a loopback HOST:PORT; expected "
                                         "e.g. 127.0.0.1:9108")
    return text


loopback_address.__name__ = "loopback HOST:PORT"


def _served(args) -> tuple[str, ...]:
    """The controller options that serve what an operator watches (``--metrics``, ``--web``)."""
    return tuple(x for opt in ("metrics", "web") if getattr(args, opt)
                 for x in (f"--{opt}", getattr(args, opt)))


def cmd_emulate(args) -> int:
    from emulation.mininet.session import run
    from simulator.traffic import parse

    con = console()
    topo = topology_of(args.spec)
    if args.hosts_per_switch is not None and not 1 <= args.hosts_per_switch <= int(
            topo.hosts.min(initial=1)):
        raise BadInput(f"emulate: --hosts-per-switch {args.hosts_per_switch}; expected 1.."
                       f"{int(topo.hosts.min(initial=1))} for {topo.name()}")
    for t in args.traffic or ():
        try:
            parse(t)
        except ValueError as e:
            raise BadInput(f"emulate: --traffic {e}") from None
    fail = None
    if args.fail is not None:
        from tablegen.topologies.failures import parse_failures, without_links

        fail = parse_failures(args.fail)
        without_links(topo, fail)          # a link that does not exist: exit 2, nothing run
    if sum((args.expand is not None, args.fail is not None, args.transform)) > 1:
        raise BadInput("emulate: --expand, --fail and --transform exclude each other; "
                       "expected one")
    if args.standby != args.kill_master:
        raise BadInput("emulate: --standby and --kill-master go together; expected both")
    if args.standby and (args.expand is not None or args.transform or args.fast_failover
                         or args.no_link_repair or args.traffic or (fail and len(fail) > 1)):
        raise BadInput("emulate: --standby --kill-master takes at most one --fail A:B; "
                       "expected no --expand, --transform, --traffic, --fast-failover or "
                       "--no-link-repair with it")
    if args.transform:
        topo = _before_transform(topo)
    if not 0 < args.rate <= 2000:
        raise BadInput(f"emulate: --rate {args.rate:g}; expected 0 < probes/s <= 2000")
    ts, _ = verified_tables(topo, args, con, "emulate")
    if ts is None:
        return 1
    if args.expand is not None or fail is not None or args.transform or args.standby:
        return _emulate_live(ts, args, fail, con)
    if args.traffic:
        return _emulate_load(ts, args, con)
    try:
        report = run(ts, check=args.check, samples=args.samples,
                     hosts_per_switch=args.hosts_per_switch, keep=args.keep, tls=args.tls,
                     controller_extra=_served(args), log=con.log,
                     on_report=lambda r: (emit(r, args.json), sys.stdout.flush()))
    except RunFailed as e:
        print(f"emulate: {e}", file=sys.stderr)
        return 1
    return 0 if report["ok"] else 1


def _before_transform(topo):
    """The full (p-1)-level DSN-F a ``dsnf:n=N`` SPEC at ``N = p·2^p`` transforms from."""
    from tablegen.topologies.dsnf import build_dsnf

    n, p = topo.n_switches, int(topo.params.get("p", 0))
    if topo.kind != "dsnf" or "fail" in topo.params or n != p * 2 ** p or p < 2:
        raise BadInput(f"emulate --transform: {topo.name()} is not a transformation point; "
                       "expected dsnf:n=N with N = p·2^p (24, 64, 160, …)")
    return build_dsnf(n, int(topo.hosts[0]), p=p - 1)


def _emulate_live(ts, args, fail, con) -> int:
    from emulation.mininet.liverun import run_expand, run_fail, run_transform
    from emulation.mininet.standbyrun import run_standby

    log = (lambda *_a, **_k: None) if args.json else con.log
    try:
        if args.standby:
            rep = run_standby(ts, fail[0] if fail else None, rate=args.rate,
                              prepare_mib=args.prepare_mib, log=log,
                              controller_extra=_served(args))
        elif args.transform:
            rep = run_transform(ts, rate=args.rate, log=log, controller_extra=_served(args))
        elif args.expand is not None:
            rep = run_expand(ts, args.expand, rate=args.rate, log=log,
                             controller_extra=_served(args))
        else:
            rep = run_fail(ts, fail, rate=args.rate, fast_failover=args.fast_failover,
                           repair=not args.no_link_repair, prepare_mib=args.prepare_mib,
                           log=log, controller_extra=_served(args))
    except RunFailed as e:
        print(f"emulate: {e}", file=sys.stderr)
        return 1
    emit(rep, args.json, indent=1)
    return 0 if rep["ok"] else 1


def _emulate_load(ts, args, con) -> int:
    from emulation.mininet.loadrun import run_load

    link = args.link_mbit or DEFAULT_LINK_MBIT
    log = (lambda *_a, **_k: None) if args.json else con.log
    try:
        rep = run_load(ts, [(t, args.duration) for t in args.traffic], load=args.load,
                       link_mbit=link, adaptive=adaptive_of(args),
                       hosts_per_switch=args.hosts_per_switch, tls=args.tls, log=log,
                       controller_extra=_served(args))
    except RunFailed as e:
        print(f"emulate: {e}", file=sys.stderr)
        return 1
    emit(rep, args.json, indent=1)
    return 0 if rep["ok"] else 1


def cmd_ib_apply(args) -> int:
    from emulation.ibsim.apply import apply

    try:
        rep = apply(Path(args.dir), keep_logs=args.keep_logs, max_paths=args.max_paths)
    except BadInput as e:
        raise BadInput(f"ib apply: {e}") from None
    except RunFailed as e:
        emit(dict(e.report, error=str(e), ok=False), args.json, indent=1)
        print(f"ib apply: {e}", file=sys.stderr)
        return 1
    emit(rep, args.json, indent=1)
    return 0 if rep["ok"] else 1


def cmd_ib_compare(args) -> int:
    """``fabroute ib compare``: the comparison's JSON or table on stdout; exit 1 when one of
    fabroute's own routings did not load and read back exactly (OpenSM engines that fail or
    fall back are results, not failures)."""
    import re

    from emulation.ibsim.compare import FABROUTE, compare

    options = {}
    for item in args.opensm_set:
        k, eq, v = item.partition("=")
        if not eq or not re.fullmatch(r"[a-z][a-z0-9_]*", k) or not re.fullmatch(r"\S+", v):
            raise BadInput(f"ib compare: --opensm-set {item!r}; expected KEY=VALUE, an "
                           "opensm.conf option name and a value without blanks")
        options[k] = v
    if not 0 < args.timeout <= 3600:
        raise BadInput(f"ib compare: --timeout {args.timeout:g}; expected 0 < seconds <= 3600")
    if args.max_paths < 0:
        raise BadInput(f"ib compare: --max-paths {args.max_paths}; expected 0 (all) or more")
    names = lambda v: [x for x in v.split(",") if x]   # noqa: E731
    con = console()
    doc = compare(args.spec, names(args.engines),
                  None if args.routings is None else names(args.routings), lmc=args.lmc,
                  seed=args.seed, timeout=args.timeout,
                  out=Path(args.out) if args.out else None, max_paths=args.max_paths,
                  options=options, adversarial=args.adversarial, log=con.log,
                  force=args.force)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        _print_compare(doc, args)
    ours = [r for r in doc["engines"] if r["engine"].startswith(FABROUTE)]
    return 1 if any(r.get("error") or r.get("mismatches") for r in ours) else 0


_PROVEN = {True: "yes", False: "NO", None: "not proven"}


def _print_compare(doc: dict, args) -> None:
    """The comparison as a table (hops: switch hops over every HCA pair and LID offset;
    bounds: of the injection bandwidth); errors and cycles as numbered notes below it."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{args.spec}, LMC {args.lmc}" + (f" -> {args.out}" if args.out else ""))
    for col in ("engine", "up", "fallback", "s", "SLs", "VLs", "dl-free", "max hops",
                "avg hops", "bound unif.", "bound adv.", "note"):
        t.add_column(col, justify="left" if col == "engine" else "right",
                     no_wrap=col == "engine")

    def f(v, fmt="{}"):
        return "-" if v is None else fmt.format(v)
    notes = []
    for r in doc["engines"]:
        note = r.get("error") or r.get("verify_error") or r.get("not_proven")
        if note:
            notes.append(f"[{len(notes) + 1}] {r['engine']}: {note}")
        t.add_row(r["engine"], "yes" if r["subnet_up"] else "NO", f(r["fell_back_to"]),
                  f(r["seconds"], "{:.2f}"), f(r["sls"]), f(r["vls"]),
                  _PROVEN[r["deadlock_free"]], f(r["max_hops"]),
                  f(r["avg_hops"], "{:.3f}"), f(r["bound_uniform"], "{:.3f}"),
                  f(r["bound_adversarial"], "{:.3f}"), f"[{len(notes)}]" if note else "")
    con = Console(width=max(Console().width, 120))
    con.print(t)
    for n in notes:
        con.print(n, highlight=False, soft_wrap=True)
