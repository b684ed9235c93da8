"""``fabroute reconcile FABRIC SPEC``: the cabled fabric mapped onto its plan from the
cabling alone (:mod:`tablegen.fabrics.match`) and every difference as a technician's action.
Exit 0 when the fabric matches, 1 when it differs, 2 on bad input (docs/real-fabrics.md)."""

from __future__ import annotations

import json

from tablegen.exports.outdir import check_out_file
from tablegen.output import json_option


def add_parsers(sub) -> None:
    sp = sub.add_parser("reconcile", help="map a cabled fabric (fabric.json) onto its plan "
                        "from the cabling alone and list the cables to plug, move or remove")
    sp.add_argument("fabric", metavar="FABRIC", help="the fabric as cabled: a fabric.json "
                    "(docs/real-fabrics.md)")
    sp.add_argument("spec", metavar="SPEC", help="the planned topology (e.g. slimfly:q=7) or "
                    "a table directory")
    sp.add_argument("--put-right", metavar="FILE", help="also write the fabric file as it "
                    "will be once every cable action is carried out (for `ib export --fabric` "
                    "of the full tables ahead of the fix)")
    json_option(sp, "the map and the actions")
    sp.set_defaults(func=_cmd_reconcile)


def _cmd_reconcile(args) -> int:
    from tablegen.cli import topology_of
    from tablegen.fabrics.match import match, put_right
    from tablegen.fabrics.read import load_fabric

    if args.put_right:
        check_out_file(args.put_right, "--put-right", in_dir=True)
    fabric = load_fabric(args.fabric)
    topo = topology_of(args.spec)
    result = match(fabric, topo)
    if args.put_right:
        put_right(fabric, result).save(args.put_right)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        _print_text(result, topo.name())
    return 0 if result.matches else 1


def _print_text(r, name: str) -> None:
    """The actions as a table for people."""
    seed, image = r.seed
    print(f"fabric mapped onto {name}: {len(r.switch)} switches, {len(r.host)} hosts "
          f"(switch {seed} taken as planned switch {image}; the map is chosen "
          "deterministically among equally good ones)")
    rows = [("plug", f"{a} port {pa}", f"{b} port {pb}")
            for (a, b), (pa, pb) in ((m["between"], m["ports"]) for m in r.missing)]
    rows += [("move", f"{m['unplug'][0]} port {m['unplug'][1]}",
              f"-> {m['plug_into'][0]} port {m['plug_into'][1]} "
              f"(other end {m['other_end'][0]} port {m['other_end'][1]})") for m in r.moved]
    rows += [("remove", f"{e['ends'][0][0]} port {e['ends'][0][1]}",
              f"{e['ends'][1][0]} port {e['ends'][1][1]}") for e in r.extra]
    rows += [("plug host", f"planned host {h['host']}", f"{h['at'][0]} port {h['at'][1]}")
             for h in r.hosts_missing]
    rows += [("unplanned host", h["host"], f"{h['at'][0]} port {h['at'][1]}")
             for h in r.hosts_extra]
    if not rows:
        print("matches: every cable and host where the plan puts it")
        return
    print(f"differs: {len(r.missing)} missing, {len(r.moved)} moved, {len(r.extra)} extra "
          "cables")
    w0, w1 = (max(len(str(x[i])) for x in rows) for i in (0, 1))
    for action, a, b in rows:
        print(f"{action:<{w0}}  {a:<{w1}}  {b}")
