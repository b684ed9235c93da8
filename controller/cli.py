"""``fabroute controller``: serve a proven table directory to OpenFlow switches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tablegen.errors import BadInput
from tablegen.output import emit, json_option
from tablegen.limits import (
    DRAIN_S,
    PREPARE_MIB,
    SETTLE_S,
    drain_option,
    generation_option,
    hysteresis_option,
    link_mbit_option,
    poll_option,
    prepare_option,
    settle_option,
    split_bits_option,
)


def add_parsers(sub) -> None:
    sp = sub.add_parser("controller", help="OpenFlow 1.3 controller (os-ken): install DIR's "
                        "tables into every switch that connects, verify, repair")
    sp.add_argument("dir", help="a 'fabroute tables' output directory")
    sp.add_argument("--listen", default="127.0.0.1:6653", help="HOST:PORT to listen on")
    sp.add_argument("--status", help="JSON file kept up to date with every switch's state")
    sp.add_argument("--log", help="log file (default stderr)")
    sp.add_argument("--tls", metavar="PKI_DIR", help="OpenFlow over TLS with mutual "
                    "certificates from 'fabroute pki PKI_DIR' (a switch may claim only the "
                    "datapath ids its certificate carries)")
    sp.add_argument("--insecure-tcp", action="store_true", help="allow plain TCP on a "
                    "non-loopback address (switches unauthenticated; also plain HTTP "
                    "--metrics and --web there)")
    sp.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics on "
                    "http://HOST:PORT/metrics, e.g. 127.0.0.1:9108 (loopback unless "
                    "--insecure-tcp; default: off; docs/operations.md)")
    sp.add_argument("--web", metavar="HOST:PORT", help="serve the live fabric map on "
                    "http://HOST:PORT/ (the fabric in its natural layout: links coloured by "
                    "load, failed cables, verified switches, UGAL-L shares, updates; pushed "
                    "every --poll), e.g. 127.0.0.1:8080 (loopback unless --insecure-tcp; "
                    "default: off; docs/operations.md)")
    adaptive_args(sp)
    sp.add_argument("--decisions", metavar="FILE", help="UGAL-L: append every decision "
                    "round as one JSON line (time, mean non-minimal share, per destination)")
    sp.add_argument("--control", metavar="SOCKET", help="Unix socket for live updates "
                    "('fabroute load SOCKET NEWDIR')")
    sp.add_argument("--drain", type=drain_option, metavar="SECONDS", help="two-phase "
                    "updates: how long packets of the old version may stay in flight "
                    f"(default {DRAIN_S})")
    sp.add_argument("--no-link-repair", action="store_true", help="leave the tables as they "
                    "are when a port goes down or up (default: route around a failed cable, "
                    "restore the tables when it comes back)")
    sp.add_argument("--prepare-mib", type=prepare_option, default=PREPARE_MIB, metavar="MIB",
                    help="while idle, make the repair of every single cable failure ready "
                         "(tables, update, serialised messages) in at most MIB MiB; 0: none "
                         f"(default {PREPARE_MIB})")
    sp.add_argument("--fast-failover", action="store_true", help="MIN tables: FAST_FAILOVER "
                    "groups on verified backup ports, so the switches route around a failed "
                    "cable before the controller does")
    g = sp.add_argument_group("two controllers: a master and a standby (OpenFlow roles)")
    g.add_argument("--role", choices=("master", "standby"), help="the master claims the "
                   "switches (OpenFlow role MASTER with --generation) and sends a heartbeat on "
                   "--peer; the standby asks SLAVE, reads and compares but never writes, and "
                   "takes over (MASTER with a newer generation) when the heartbeat stops")
    g.add_argument("--peer", metavar="HOST:PORT", help="the heartbeat: the master listens "
                   "there, the standby connects to it")
    g.add_argument("--serve-peer", metavar="HOST:PORT", help="--role standby: once it has "
                   "taken over, it serves its own heartbeat there, so a new standby can stand "
                   "by it (default: none)")
    g.add_argument("--generation", type=generation_option, default=1, metavar="N",
                   help="--role master: the generation id it claims (default 1; a standby "
                   "that took over claims a newer one, which makes this one stale)")
    g = sp.add_argument_group("real switches (any datapath ids, any port numbers)")
    g.add_argument("--lldp", action="store_true", help="learn the cabling with LLDP, map it "
                   "onto the plan once it has settled and serve each datapath its planned "
                   "switch's program on its own ports (missing cables: failed links)")
    g.add_argument("--fabric", metavar="FILE", help="the cabling as a fabric file or "
                   "ibnetdiscover output (docs/real-fabrics.md) instead of learning it")
    g.add_argument("--fabric-out", metavar="FILE", help="--lldp: write the learned fabric "
                   "file here (on the map and on every cable plugged in later)")
    g.add_argument("--settle", type=settle_option, default=SETTLE_S, metavar="SECONDS",
                   help=f"--lldp: the cabling is complete after this long without a new "
                   f"cable, switch or host (default {SETTLE_S})")
    sp.set_defaults(func=cmd_controller)

    sp = sub.add_parser("load", help="apply a new table directory to a running controller "
                        "(--control SOCKET) as a live, consistent update; prints its report")
    sp.add_argument("socket", metavar="SOCKET", help="the controller's --control socket")
    sp.add_argument("dir", metavar="NEWDIR", nargs="?", help="the table directory to go to "
                    "(`fabroute tables` or `fabroute expand --out`)")
    sp.add_argument("--resume", action="store_true", help="a DSN-F p -> p+1 update holds "
                    "(no host injects) until the cables are moved: go on with it")
    json_option(sp, "the update's report")
    sp.set_defaults(func=cmd_load)

    sp = sub.add_parser("pki", help="certificates for OpenFlow over TLS: a CA and the "
                        "controller's (made once), and a switch certificate carrying the "
                        "datapath ids it may claim")
    sp.add_argument("dir", help="PKI directory: the CA and controller certificates are made "
                    "there once, the switch certificate each time")
    sp.add_argument("--dpids", required=True, help="datapath ids, e.g. 1-50 or 1,7,9-12")
    sp.add_argument("--name", default="switches", help="file name of the switch certificate "
                    "(NAME.pem, NAME.key)")
    json_option(sp, "the files written")
    sp.set_defaults(func=cmd_pki)


def adaptive_args(sp) -> None:
    """Options of UGAL-L's adaptive decisions (``controller``, ``emulate``)."""
    g = sp.add_argument_group("adaptive UGAL-L (tables of --routing ugal-l)")
    g.add_argument("--static", action="store_true", help="UGAL-L: keep every flow minimal "
                   "(no decisions from statistics)")
    g.add_argument("--poll", type=poll_option, default=1.0, metavar="SECONDS",
                   help="statistics poll and decision period (default 1.0)")
    g.add_argument("--link-mbit", type=link_mbit_option, metavar="MBIT",
                   help="capacity of every network port the estimator measures against "
                        "(default: each port's speed as the switch reports it)")
    g.add_argument("--split-bits", type=split_bits_option, default=3, metavar="BITS",
                   help="shares move in steps of 1/2^BITS of a destination's flows (default 3)")
    g.add_argument("--hysteresis", type=hysteresis_option, default=0.25,
                   help="dead band as a share of the queueing costs (default 0.25)")
    g.add_argument("--view", choices=("first-hop", "path"), default="first-hop",
                   help="a candidate's queue: its first hop's (UGAL-L, default) or the "
                        "fullest port on its way (the controller's global view)")


def adaptive_of(args) -> dict | None:
    """The launcher's ``adaptive`` argument from :func:`adaptive_args`' options."""
    if args.static:
        return None
    return {"poll": args.poll, "link_bps": args.link_mbit * 1e6 if args.link_mbit else None,
            "split_bits": args.split_bits, "hysteresis": args.hysteresis, "view": args.view}


def cmd_controller(args) -> int:
    from controller.openflow.launcher import is_loopback, run, split_host_port
    from controller.tls import Pki

    listen = split_host_port(args.listen, need_host=False)
    if listen is None:
        raise BadInput(f"controller: --listen {args.listen!r}; expected HOST:PORT, e.g. "
                       "127.0.0.1:6653")
    tls = None
    if args.tls:
        tls = Pki(Path(args.tls))
        tls.check_controller()
    elif not is_loopback(listen[0]) and not args.insecure_tcp:
        raise BadInput(f"controller: --listen {args.listen}: plain TCP leaves switches "
                       "unauthenticated; expected a loopback address, --tls PKI_DIR, or "
                       "--insecure-tcp")
    for opt, example in (("metrics", "127.0.0.1:9108"), ("web", "127.0.0.1:8080")):
        text = getattr(args, opt)
        if not text:
            continue
        served = split_host_port(text)
        if served is None:
            raise BadInput(f"controller: --{opt} {text!r}; expected HOST:PORT, e.g. "
                           f"{example}")
        if not is_loopback(served[0]) and not args.insecure_tcp:
            raise BadInput(f"controller: --{opt} {text}: plain HTTP shows the "
                           "fabric's state to anyone who reaches it; expected a loopback "
                           "address or --insecure-tcp")
    from controller.openflow.update import profile_of, proven_tables
    from tablegen.exports.outdir import check_out_file, check_writable

    for opt in ("status", "log", "decisions"):   # refused before a switch is served
        if getattr(args, opt):
            check_out_file(getattr(args, opt), f"--{opt}")
    if args.control:
        check_writable(args.control, "--control")
    if args.fabric_out:
        check_out_file(args.fabric_out, "--fabric-out")
    if (args.fabric_out or args.settle != SETTLE_S) and not args.lldp:
        raise BadInput("controller: --fabric-out and --settle go with --lldp; expected "
                       "--lldp")
    if args.lldp and args.fabric:
        raise BadInput("controller: --lldp learns the cabling, --fabric FILE gives it; "
                       "expected one of them")
    roles = _roles(args)
    ts = proven_tables(Path(args.dir))
    # the program follows the profile the set was written and verified in
    learner = None
    if args.lldp or args.fabric:
        from controller.openflow.learn import Learner
        from tablegen.fabrics.read import load_fabric

        given = load_fabric(args.fabric) if args.fabric else None
        learner = Learner(ts, args.settle, Path(args.fabric_out) if args.fabric_out
                          else None, given, profile_of(Path(args.dir)))
    run(ts, args.listen, Path(args.status) if args.status else None,
        Path(args.log) if args.log else None, tls, adaptive_of(args),
        Path(args.decisions) if args.decisions else None,
        Path(args.control) if args.control else None, args.drain, not args.no_link_repair,
        args.fast_failover, profile_of(Path(args.dir)), learner, args.prepare_mib,
        roles, args.peer, args.serve_peer, args.metrics, args.poll, args.web)
    return 0


def _roles(args):
    """The controller's :class:`~controller.openflow.roles.Roles` (``None`` without
    ``--role``); bad input for a half-given or unsupported combination."""
    if args.role is None:
        if args.peer or args.serve_peer or args.generation != 1:
            raise BadInput("controller: --peer, --serve-peer and --generation go with --role; "
                           "expected --role master or --role standby")
        return None
    if not args.peer:
        raise BadInput(f"controller: --role {args.role} needs --peer HOST:PORT (the "
                       "heartbeat between master and standby)")
    from controller.openflow.launcher import split_host_port

    for opt in ("peer", "serve_peer"):
        text = getattr(args, opt)
        if text and split_host_port(text) is None:
            raise BadInput(f"controller: --{opt.replace('_', '-')} {text!r}; expected "
                           "HOST:PORT, e.g. 127.0.0.1:6700")
    if args.serve_peer and args.role != "standby":
        raise BadInput("controller: --serve-peer is a standby's heartbeat once it has taken "
                       "over; a master serves its own on --peer (expected --role standby)")
    if args.role == "standby" and args.generation != 1:
        raise BadInput("controller: --generation is the master's claim; a standby learns it "
                       "from the heartbeat (expected no --generation with --role standby)")
    if args.lldp or args.fabric:
        raise BadInput("controller: --role serves the planned datapath ids and ports; "
                       "expected no --lldp or --fabric with it")
    from controller.openflow.roles import Roles

    return Roles(args.role, args.generation)


def cmd_load(args) -> int:
    from controller.openflow.control import request

    if args.resume == (args.dir is not None):
        raise BadInput("load: give NEWDIR or --resume; expected one of them")
    if args.resume:
        rep = request(Path(args.socket), {"resume": True})
    else:
        d = Path(args.dir)
        if not d.is_dir():
            raise BadInput(f"load: NEWDIR={d} is not a directory; expected the --out of "
                           "'fabroute tables' or 'fabroute expand'")
        rep = request(Path(args.socket), {"load": str(d.resolve())})
    if rep.get("bad_input"):
        raise BadInput(rep["error"])
    if args.json:
        print(json.dumps(rep))
    elif rep.get("ok"):
        phases = ", ".join(f"{p['name']} {p['messages']} msgs {p['seconds'] * 1e3:.0f} ms"
                           for p in rep.get("phases", []))
        print(f"{rep.get('mode')}: {rep.get('from', '')} -> {rep.get('to', '')}; {phases}; "
              + ("holding: move the cables, then 'fabroute load SOCKET --resume'"
                 if rep.get("held") else f"verified {rep.get('verified', '-')} switches"))
    else:
        print(f"load: {rep.get('error', 'failed')}", file=sys.stderr)
    return 0 if rep.get("ok") else 1


def cmd_pki(args) -> int:
    from controller.tls import make_pki, parse_dpids

    emit(make_pki(Path(args.dir), parse_dpids(args.dpids), args.name), args.json)
    return 0
