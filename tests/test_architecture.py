"""The layering of docs/architecture.md, checked on the sources: every import (module level and
inside functions) read with ``ast``; no circle; nothing imports upward; the front door is
imported by nobody; only command-line modules import command-line modules."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tablegen", "controller", "emulation", "simulator", "fabroute")

# Rank of each layer, lowest first: a module may import its own layer and layers below.
# Data flows topology -> routing -> tables -> {verify, exports} -> {controller, emulation,
# simulator} -> CLI.  ``tables`` (the model) sits below ``routing`` because routing builds it.
LAYERS = [
    ("tablegen.durable", "tablegen.errors", "tablegen.forked", "tablegen.limits",
     "tablegen.numba_cache", "tablegen.output"),
    ("tablegen.topology",),
    ("tablegen.topologies", "tablegen.fabrics", "tablegen.tables"),
    ("tablegen.routing",),
    ("tablegen.verify", "tablegen.update", "tablegen.backup", "tablegen.analysis",
     "tablegen.drawing"),
    ("tablegen.exports",),
    ("tablegen.cli", "tablegen.ib_cli", "tablegen.verify_cli", "tablegen.fabric_cli",
     "tablegen.draw_cli", "tablegen.design_cli"),
    ("controller",),
    ("emulation", "simulator"),
    ("fabroute",),
]
# Same rank, still one way: the ibsim runner builds the OpenSM plugin that the controller
# package holds; the simulator never touches the emulation.
FORBIDDEN = {("controller", "emulation"), ("controller", "simulator"),
             ("simulator", "emulation"), ("simulator", "controller")}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _imports(path: Path, module: str, known) -> set[str]:
    """Modules of ours that ``path`` imports: ``from a.b import c`` is ``a.b.c`` when that is
    a module, else ``a.b``."""
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                     for a in node.names]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in PACKAGES)
    return out


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for mod, path in mods.items():
        for target in _imports(path, mod, mods):
            assert target in mods, f"{mod} imports {target}, which is not a module of ours"
            if target != mod:
                g.add_edge(mod, target)
    return g


def _rank(module: str) -> int:
    for r, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return r
    raise AssertionError(f"{module} is in no layer of LAYERS; add it where it belongs")


def test_the_graph_sees_every_module_and_known_imports(graph):
    assert {"tablegen.routing.build", "tablegen.exports.infiniband.read",
            "emulation.ibsim.apply", "controller.openflow.app", "fabroute.cli"} <= set(graph)
    assert graph.has_edge("fabroute.cli", "tablegen.cli")
    assert graph.has_edge("tablegen.routing.build", "tablegen.routing.walk")
    assert graph.has_edge("emulation.ibsim.apply", "tablegen.exports.infiniband.read")


def test_no_import_circle(graph):
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import circles: {cycles}"


def test_imports_flow_one_way(graph):
    upward = [(a, b) for a, b in graph.edges
              if _rank(b) > _rank(a)
              or (a.split(".")[0], b.split(".")[0]) in FORBIDDEN]
    assert not upward, "imports against the layering of docs/architecture.md: " + ", ".join(
        f"{a} -> {b}" for a, b in upward)


def _command_line(module: str) -> bool:
    return module.rsplit(".", 1)[-1] in ("cli", "ib_cli", "fabric_cli", "draw_cli",
                                        "design_cli")


def test_nothing_imports_the_front_door_or_a_command_line_below(graph):
    bad = [(a, b) for a, b in graph.edges
           if (b.startswith("fabroute") and not a.startswith("fabroute"))
           or (_command_line(b) and not (_command_line(a) or a.startswith("fabroute")))]
    assert not bad, f"imports of a command line from below it: {bad}"


def test_a_planted_circle_and_an_upward_import_are_caught(graph):
    g = graph.copy()
    g.add_edge("tablegen.topology", "tablegen.routing.build")
    assert any(len(c) > 1 for c in nx.strongly_connected_components(g))
    assert _rank("tablegen.routing.build") > _rank("tablegen.topology")


# Modules stay small enough to read; the compiled simulator kernel is one numba unit.
LONGEST = 750
EXCEPTIONS = {"simulator.engine": 1000}


def test_no_module_is_too_long():
    long = {m: n for m, p in _modules().items()
            if (n := len(p.read_text().splitlines())) > EXCEPTIONS.get(m, LONGEST)}
    assert not long, f"modules over {LONGEST} lines: {long}"
