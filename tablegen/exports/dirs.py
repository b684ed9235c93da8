"""What a directory argument names: the table set of a directory or of a batch of
routings (``routings.json``), and the fabric it was built on, for the commands that take a
table directory where they take a SPEC (``topology``, ``analyze``, ``path``, ...)."""

from __future__ import annotations

import json
from pathlib import Path

from tablegen.errors import BadInput
from tablegen.exports.files import MAX_TOPOLOGY_BYTES, TOPOLOGY_FILE
from tablegen.exports.inputs import read_bytes
from tablegen.topology import Topology


def set_dir(d: Path, routing: str | None = None) -> Path:
    """The table set directory ``d`` names: ``d`` itself, or in a batch of routings
    (``routings.json``) the one of ``routing`` (default: the first one written)."""
    if (d / TOPOLOGY_FILE).exists() or not (d / "routings.json").exists():
        return d
    try:
        batch = json.loads(read_bytes(d / "routings.json", 1 << 20))
        names = [r for r in batch["written"] if isinstance(r, str)]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{d}/routings.json is unreadable ({type(e).__name__}); expected the "
                       "batch `fabroute tables --routing A,B` writes") from None
    if routing is not None and routing not in names:
        raise BadInput(f"--routing {routing}: {d} holds the routings {', '.join(names)}; "
                       "expected one of them")
    if not names:
        raise BadInput(f"{d} holds no verified routing; expected a batch with one")
    return d / (routing or names[0])


def dir_topology(d: Path) -> Topology:
    """The fabric of a table directory (``fabroute tables``, ``ib export``, ``ib import``; a
    batch: its routings'): the topology fabroute builds from its ``topology.json``'s name and
    hosts, which must be the stored one."""
    from tablegen.verify import rebuilt_topology

    path = set_dir(d) / TOPOLOGY_FILE
    try:
        stored = Topology.from_dict(json.loads(read_bytes(path, MAX_TOPOLOGY_BYTES)))
    except BadInput:
        raise
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise BadInput(f"{path} is unreadable ({type(e).__name__}); expected a table "
                       "directory of `fabroute tables`, `ib export` or `ib import`") from None
    topo = rebuilt_topology(stored)
    if topo.to_dict() != stored.to_dict():
        raise BadInput(f"{path} is not the fabric fabroute builds for {stored.name()}; "
                       f"expected a directory `fabroute verify {d}` proves")
    return topo
