"""The fabric a table directory is bound to (``tables --fabric``, ``ib export --fabric``;
docs/real-fabrics.md): the fabric file, normalised (``fabric.json``), and the map onto the
plan (``fabric-map.json``, :class:`~tablegen.fabrics.bind.Binding`), both written into the
directory and recorded in the manifest's ``exports.fabric`` (the fabric file's SHA-256 and
the map's counts); read back and proven against each other by :func:`load_bound`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tablegen.errors import BadInput
from tablegen.exports.inputs import read_bytes
from tablegen.fabrics.bind import Binding, check_binding
from tablegen.fabrics.fabric import MAX_FILE_BYTES, Fabric
from tablegen.topology import Topology

FABRIC_FILE, MAP_FILE = "fabric.json", "fabric-map.json"


def fabric_bytes(fabric: Fabric) -> bytes:
    """The fabric file as written into a table directory (one normal form, so its hash names
    the cabling, not how a reader spaced it)."""
    return (json.dumps(fabric.to_dict(), indent=1) + "\n").encode()


def write_fabric_files(d: Path, binding: Binding) -> dict:
    """Write ``fabric.json`` and ``fabric-map.json`` into ``d`` (a directory being built,
    renamed into place later); returns the manifest's ``exports.fabric`` record."""
    data = fabric_bytes(binding.fabric)
    (Path(d) / FABRIC_FILE).write_bytes(data)
    (Path(d) / MAP_FILE).write_text(json.dumps(binding.to_dict(), indent=1) + "\n")
    return {"file": FABRIC_FILE, "map": MAP_FILE, "sha256": hashlib.sha256(data).hexdigest(),
            "source": binding.fabric.source, **binding.summary}


def load_bound(d: Path, record, topo: Topology) -> tuple[Binding | None, list[str]]:
    """The binding of table directory ``d`` whose manifest records ``record``
    (``exports.fabric``) for tables on ``topo``, and why it does not hold (empty when it
    does): the fabric file's SHA-256 against the record, the map against the fabric
    (:func:`~tablegen.fabrics.bind.check_binding`)."""
    d = Path(d)
    if not (isinstance(record, dict) and record.get("file") == FABRIC_FILE
            and record.get("map") == MAP_FILE and isinstance(record.get("sha256"), str)):
        return None, [f"{d / 'manifest.json'}: exports.fabric {record!r:.80}; expected file, "
                      "map and sha256"]
    try:
        data = read_bytes(d / FABRIC_FILE, MAX_FILE_BYTES, str(d / FABRIC_FILE))
        if hashlib.sha256(data).hexdigest() != record["sha256"]:
            return None, [f"{d / FABRIC_FILE}: its SHA-256 is not the one the manifest binds "
                          "the tables to; expected the fabric they were computed for"]
        try:
            fabric = Fabric.from_dict(json.loads(data), str(d / FABRIC_FILE))
            doc = json.loads(read_bytes(d / MAP_FILE, MAX_FILE_BYTES, str(d / MAP_FILE)))
        except (ValueError, RecursionError):
            return None, [f"{d}: {FABRIC_FILE} or {MAP_FILE} is not JSON; expected the files "
                          "'tables --fabric' writes"]
        binding = Binding.from_dict(doc, str(d / MAP_FILE))
    except BadInput as e:
        return None, [str(e)]
    binding.fabric = fabric
    errors = [f"{d / MAP_FILE}: {e}" for e in check_binding(binding, fabric, topo)]
    return (binding if not errors else None), errors
