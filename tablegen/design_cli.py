"""``fabroute cost SPEC`` and ``fabroute design --endpoints N``: the Slim Fly paper's cost,
power and structure analysis of one fabric, or of every topology family sized to about N
endpoints (:mod:`tablegen.analysis.design`; docs/design.md).  Exit 2 on bad input (an
unknown family, N out of a family's range, a price file with a missing or negative price),
nothing written."""

from __future__ import annotations

from tablegen.errors import BadInput
from tablegen.limits import MAX_HOSTS, int_option
from tablegen.output import emit, json_option, num

#: Failure orders a resilience may average over (each costs O(log L) connectivity tests).
MAX_SEEDS = 1000


def _common(sp) -> None:
    sp.add_argument("--prices", metavar="FILE", help="TOML price file (the model's constants; "
                    "default: the paper's, tablegen/analysis/prices.toml)")
    sp.add_argument("--seeds", type=int_option(1, MAX_SEEDS, "seed count"), default=20,
                    help="random cable-failure orders for the disconnection resilience")
    sp.add_argument("--diameter-seeds", type=int_option(1, MAX_SEEDS, "seed count"),
                    default=5, help="failure orders for the "
                    "diameter resilience (the costlier test)")
    sp.add_argument("--slack", type=int_option(0, 255, "hop count"), default=0,
                    help="diameter resilience: the fabric survives while its diameter grows "
                    "by at most this many hops")


def add_parsers(sub) -> None:
    from tablegen.cli import SPEC_HELP

    from tablegen.analysis.design import FAMILIES

    sp = sub.add_parser("cost", help="cost and power of a fabric under the Slim Fly paper's "
                        "model: routers, radix, cables by kind, cost and power per endpoint, "
                        "average distance, bisection, resilience")
    sp.add_argument("spec", metavar="SPEC|DIR", help=SPEC_HELP + "; or a table directory")
    _common(sp)
    json_option(sp, "the cost document (docs/design.md)")
    sp.set_defaults(func=cmd_cost)

    sp = sub.add_parser("design", help="every topology family sized to about N endpoints, "
                        "ranked by cost and power per endpoint, with bisection and "
                        "resilience")
    sp.add_argument("--endpoints", "-n", type=int_option(1, MAX_HOSTS, "endpoint count"),
                    required=True, metavar="N",
                    help="the number of endpoints to size every family to")
    sp.add_argument("--families", metavar="F,F,...", default=",".join(FAMILIES),
                    help="the families to compare (default: all eight, "
                    + ", ".join(FAMILIES) + ")")
    sp.add_argument("--plot", metavar="FILE.png", help="also write cost and power per "
                    "endpoint against N (N/16 .. 2N) for every family, as the paper's plots")
    _common(sp)
    json_option(sp, '{"families": [...]} (docs/design.md)')
    sp.set_defaults(func=cmd_design)


def _prices(args):
    from tablegen.analysis.cost import load_prices

    return load_prices(args.prices)


def cmd_cost(args) -> int:
    """Load the prices, build the fabric, print its cost document."""
    from tablegen.analysis.design import evaluate
    from tablegen.cli import topology_of

    prices = _prices(args)
    doc = evaluate(topology_of(args.spec), prices, args.seeds, args.diameter_seeds,
                   args.slack)
    doc["prices"] = prices.source
    emit(doc, args.json, text=_cost_text)
    return 0


def cmd_design(args) -> int:
    """Check the families, N and the plot path; size, evaluate and rank every family."""
    from tablegen.analysis.design import FAMILIES, curves, design, plot
    from tablegen.exports.outdir import check_out_file

    prices = _prices(args)
    families = [f.strip().lower() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise BadInput(f"design: --families {args.families!r:.60}: unknown "
                       f"{', '.join(unknown) or '(none given)'}; expected some of "
                       f"{', '.join(FAMILIES)}")
    if args.plot is not None:
        if not args.plot.lower().endswith(".png"):
            raise BadInput(f"design: --plot {args.plot}; expected a file ending in .png")
        check_out_file(args.plot, "--plot", in_dir=True)
    doc = design(args.endpoints, prices, families, args.seeds, args.diameter_seeds,
                 args.slack)
    doc["prices"] = prices.source
    if args.plot is not None:
        doc["curves"] = curves(args.endpoints, prices, families)
        plot(doc["curves"], args.plot)
        doc["plot"] = args.plot
    emit(doc, args.json, text=_design_text)
    return 0


def _cost_text(d: dict) -> list[str]:
    r, b = d["resilience"], d["bisection"]
    return [
        f"{d['spec']}: {num(d['routers'])} routers of radix {d['radix']}, "
        f"{num(d['endpoints'])} endpoints, {d['racks']} racks",
        f"  cables      {num(d['cables']['electric'])} electric, {num(d['cables']['fiber'])} "
        f"fiber (+ {num(d['cables']['endpoint'])} endpoint cables, not priced)",
        f"  cost        ${d['cost']['total']:,.0f} (routers ${d['cost']['routers']:,.0f}, "
        f"cables ${d['cost']['cables']:,.0f}); ${d['cost_per_endpoint']:,.0f} per endpoint",
        f"  power       {d['power_w']:,.0f} W; {d['power_per_endpoint_w']:.2f} W per endpoint",
        f"  avg distance {num(d['avg_distance'])} router hops",
        f"  bisection   {num(b['cut_cables'])} cables, {num(b['fraction'])} of N/2 endpoint "
        "links (METIS)",
        f"  resilience  {r['disconnect']['mean']:.1%} of cables fail before it disconnects, "
        f"{r['diameter']['mean']:.1%} before its diameter {num(r['diameter']['base'])} grows"
        + (f" by more than {r['diameter']['slack']}" if r["diameter"]["slack"] else "")
        + f" ({r['seeds']}/{r['diameter_seeds']} seeds)",
        f"  prices      {d['prices']}",
    ]


def _design_text(d: dict) -> list[str]:
    head = (f"{'family':<10} {'spec':<46} {'N':>7} {'routers':>7} {'k':>3} {'electric':>8} "
            f"{'fiber':>7} {'$/endp':>7} {'W/endp':>6} {'dist':>5} {'bisect':>6} "
            f"{'disc':>5} {'diam':>5}")
    lines = [f"families sized to about {num(d['endpoints'])} endpoints, cheapest first "
             f"(prices {d['prices']})", head]
    for f in d["families"]:
        dist = "-" if f["avg_distance"] is None else f"{f['avg_distance']:.2f}"
        frac = f["bisection"]["fraction"]
        lines.append(
            f"{f['family']:<10} {f['spec'][:46]:<46} {f['endpoints']:>7} {f['routers']:>7} "
            f"{f['radix']:>3} {f['cables']['electric']:>8} {f['cables']['fiber']:>7} "
            f"{f['cost_per_endpoint']:>7.0f} {f['power_per_endpoint_w']:>6.2f} {dist:>5} "
            f"{'-' if frac is None else f'{frac:.2f}':>6} "
            f"{f['resilience']['disconnect']['mean']:>5.0%} "
            f"{f['resilience']['diameter']['mean']:>5.0%}")
    if "plot" in d:
        lines.append(f"wrote {d['plot']}")
    return lines
