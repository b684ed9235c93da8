"""One vocabulary of routing names for every command (``fabroute routings`` lists it).

A name is either a routing whose tables fabroute builds (``min``, ``val-3h``, ``ugal-l-3h``,
``par-3h``, ``dsnf``, ...: the tablegen routing plus the non-minimal class it fixes) or a
decision rule the simulator runs on such tables (``ugal-l-cr``, ``ugal-g-*``, ``ugal-sdn*``).
Table commands (``tables``, ``path``, ``ib export``, ``emulate``, ``expand``) take the first
kind, ``--nonmin`` being another spelling of the class (``ugal-l --nonmin val-3h`` is
``ugal-l-3h``); the simulator's commands take both.  Pure data: nothing here loads NumPy or
Numba, so every command's start-up reads it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tablegen.errors import BadInput

#: commands that build tables from a routing name (the SPEC forms of them)
TABLE_COMMANDS = ("tables", "path", "ib export", "emulate", "expand")
#: commands of the flit-level simulator and its analytic bound
SIMULATOR_COMMANDS = ("simulate", "sweep", "analyze --throughput-bound")

_KIM = "Kim et al., ISCA 2008"
_YEB = "Yébenes et al., 2017"
_PAR = "Jiang et al., ISCA 2009; Yébenes et al. §V"


@dataclass(frozen=True)
class Routing:
    """One routing name: the tables it runs on, and what it fixes beyond them.

    Attributes:
        tables: the tablegen routing (:data:`tablegen.routing.build.ROUTINGS`).
        nonmin: the non-minimal class of UGAL-L / PAR it fixes (``None``: the topology's
            default, or no such class).
        config: the simulator keys it fixes (``simulator.config.SimConfig``); a name with a
            decision rule beyond the tables' (``ugal_rule``, ``ugal_cr``, UGAL-G, SDN) is the
            simulator's only.
        what: one line saying what it is.
        paper: where it comes from.
    """

    tables: str
    nonmin: str | None
    config: dict = field(default_factory=dict)
    what: str = ""
    paper: str = ""

    @property
    def simulator_only(self) -> bool:
        """True when the name is a decision rule beyond the tables (not a table routing)."""
        return any(k != "ugal" or v != "local" for k, v in self.config.items())

    @property
    def commands(self) -> tuple[str, ...]:
        return SIMULATOR_COMMANDS if self.simulator_only else TABLE_COMMANDS + SIMULATOR_COMMANDS


_LOCAL = {"ugal": "local"}
_VARIANTS = {"ori": "val", "nta": "val-nta", "3h": "val-3h"}

ROUTINGS: dict[str, Routing] = {
    "min": Routing("min", None, {}, "minimal paths (Dragonfly: hierarchical local-global-local)",
                   f"{_KIM} §4.1; {_YEB} §II-B"),
    "val": Routing("val", None, {}, "Valiant through a random intermediate switch (Dragonfly: "
                   "group)", f"{_YEB} §II-B; {_KIM} §4.1"),
    "val-nta": Routing("val-nta", None, {}, "Valiant without turn-arounds (the loop cut out)",
                       f"{_YEB} §IV"),
    "val-3h": Routing("val-3h", None, {}, "one hop toward the intermediate, then minimal",
                      f"{_YEB} Alg. 1"),
    "ugal-l": Routing("ugal-l", None, dict(_LOCAL), "UGAL-L: minimal or the default "
                      "non-minimal class (Slim Fly val-3h, Dragonfly val-group, else val), "
                      "chosen at the source", f"{_KIM} §4.2"),
    **{f"ugal-l-{v}": Routing("ugal-l", nm, dict(_LOCAL), f"UGAL-L with non-minimal class {nm}",
                              f"{_YEB} §III") for v, nm in _VARIANTS.items()},
    "ugal-l-vch": Routing("ugal-l", None, {"ugal": "local", "ugal_rule": "vch"},
                          "UGAL-L_VC_H: queues compared per VC", f"{_KIM} §4.2"),
    "ugal-l-cr": Routing("ugal-l", None, {"ugal": "local", "ugal_rule": "vch", "ugal_cr": True},
                         "UGAL-L_CR: UGAL-L_VC_H with credits delayed by the credit round "
                         "trip", f"{_KIM} §4.3"),
    "par": Routing("par", None, dict(_LOCAL), "PAR: UGAL-L at the source and again at the "
                   "second switch (default non-minimal class)", _PAR),
    **{f"par-{v}": Routing("par", nm, dict(_LOCAL), f"PAR with non-minimal class {nm}", _PAR)
       for v, nm in _VARIANTS.items()},
    "ugal-g": Routing("ugal-l", None, {"ugal": "global"}, "UGAL-G: global queue knowledge "
                      "(the config's ugal_g_reading)", f"{_KIM} §4.2"),
    "ugal-g-bh": Routing("ugal-l", None, {"ugal": "global", "ugal_g_reading": "backlog-hops"},
                         "UGAL-G: path backlog times hops", f"{_KIM} §4.2"),
    "ugal-g-b": Routing("ugal-l", None, {"ugal": "global", "ugal_g_reading": "backlog"},
                        "UGAL-G: path backlog", f"{_KIM} §4.2"),
    "ugal-g-c": Routing("ugal-l", None, {"ugal": "global", "ugal_g_reading": "credits-hops"},
                        "UGAL-G: credits times hops", f"{_KIM} §4.2"),
    "ugal-sdn": Routing("ugal-l", None, {"ugal": "sdn"}, "adaptive UGAL-L decided by the "
                        "OpenFlow controller's estimator every poll_cycles",
                        f"fabroute (docs/openflow.md) after {_KIM} §4.2"),
    **{f"ugal-sdn-{v}": Routing("ugal-l", nm, {"ugal": "sdn"}, f"ugal-sdn with non-minimal "
                                f"class {nm}", "fabroute (docs/openflow.md)")
       for v, nm in _VARIANTS.items()},
    "dsnf": Routing("dsnf", None, {}, "DSN-F's own routing with dateline VCs (dsnf topologies)",
                    "Truong et al. §III-B"),
}


def _unknown(name: str, names) -> BadInput:
    return BadInput(f"routing {name!r:.40} is unknown; expected one of {', '.join(names)} "
                    "(`fabroute routings` says what each is)")


def simulator_routing(value: str) -> str:
    """``--routing`` of a simulator command: a name of :data:`ROUTINGS` (argparse ``type``)."""
    if value not in ROUTINGS:
        raise _unknown(value, ROUTINGS)
    return value


def table_routing(value: str) -> str:
    """One ``--routing`` name of a table command: a table routing of :data:`ROUTINGS`; a
    simulator-only name gets one line saying which tables it runs on."""
    r = ROUTINGS.get(value)
    if r is None:
        raise _unknown(value, [n for n, r in ROUTINGS.items() if not r.simulator_only])
    if r.simulator_only:
        use = next(n for n, t in ROUTINGS.items()
                   if not t.simulator_only and (t.tables, t.nonmin) == (r.tables, r.nonmin))
        raise BadInput(f"routing {value} is a simulator decision rule on the {use} tables; "
                       f"use --routing {use} (the simulator commands take {value})")
    return value


def table_routings(value: str) -> str:
    """``--routing A,B,...`` of ``tables``: each a :func:`table_routing`, none twice."""
    names = value.split(",")
    for n in names:
        table_routing(n)
    if len(set(names)) < len(names):
        raise BadInput(f"routings {value} name a routing twice; expected distinct routings")
    return value


def option(check):
    """``check`` (:func:`simulator_routing`, :func:`table_routing`, :func:`table_routings`)
    as an argparse ``type``: its message becomes the parser's one-line error (argparse
    would replace a plain ``ValueError``'s with its own)."""
    import argparse

    def parse(value: str) -> str:
        try:
            return check(value)
        except BadInput as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = check.__name__
    return parse


def resolve(name: str, nonmin: str | None = None) -> tuple[str, str | None]:
    """``(tablegen routing, non-minimal class)`` of a table routing name and ``--nonmin``
    (the other spelling of the class); a class both name and ``--nonmin`` give differently
    is refused in one line."""
    r = ROUTINGS[table_routing(name)]
    if r.nonmin is not None and nonmin is not None and nonmin != r.nonmin:
        raise BadInput(f"--routing {name} means --nonmin {r.nonmin}, but --nonmin {nonmin} "
                       f"is given; expected one of them (e.g. --routing {r.tables} "
                       f"--nonmin {nonmin})")
    return r.tables, r.nonmin if r.nonmin is not None else nonmin


def listing() -> list[dict]:
    """Every routing once: name, the tables it runs on, what it is, the commands that take
    it and its paper (``fabroute routings --json``)."""
    return [{"name": n, "tables": r.tables, "nonmin": r.nonmin, "what": r.what,
             "commands": list(r.commands), "paper": r.paper} for n, r in ROUTINGS.items()]


def text() -> str:
    """:func:`listing` as lines: name, where it runs (all commands or the simulator's), what
    it is, its paper."""
    rows = listing()
    width = max(len(r["name"]) for r in rows)
    lines = [f"{r['name']:<{width}}  "
             f"{'simulator' if ROUTINGS[r['name']].simulator_only else 'all':<9}  "
             f"{r['what']} [{r['paper']}]" for r in rows]
    return "\n".join(lines + [f"all: {', '.join(TABLE_COMMANDS)} and the simulator's; "
                              f"simulator: {', '.join(SIMULATOR_COMMANDS)} (on the tables "
                              "it names)"])
