"""Export a :class:`~tablegen.tables.TableSet` to the files other tools load.

Formats (``docs/formats.md`` specifies every file, its schema and the address plans):

* ``json`` — ``topology.json`` (:meth:`Topology.to_dict`) and ``tables.json`` (the table set,
  arrays as base64; :func:`load_tables_json` reads it back exactly).  Written with
  :func:`json.dump`, not a template.  This module.
* ``ib`` — InfiniBand (:mod:`tablegen.exports.infiniband.write`): ``ib/fabric.net`` (ibsim
  fabric), ``ib/lfts.dump`` (LFTs for OpenSM's ``file`` routing engine), ``ib/sl2vl.dump``,
  ``ib/path-sl.txt``, ``ib/guid2lid`` (OpenSM LID cache) and ``ib/guids.json`` (our ids ->
  GUIDs, ports, LIDs).
* ``openflow`` — OpenFlow 1.3 for Open vSwitch (:mod:`tablegen.exports.openflow_text`):
  ``openflow/s<id>.flows`` (and ``s<id>.groups`` for routings with a source choice) per
  switch, ``openflow/manifest.json``.

:func:`export_all` plans every requested format (so every check that can reject a table set
runs) before the first file is written; :mod:`tablegen.exports.writer` writes them.
"""

from __future__ import annotations

import base64
import json

import numpy as np

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.write import plan_ib
from tablegen.exports.openflow_text import plan_openflow
from tablegen.exports.writer import Job, json_chunks, run_jobs
from tablegen.tables import PathClass, TableSet
from tablegen.topology import Topology

__all__ = ["FORMATS", "export_all", "export_json", "load_tables_json"]

FORMATS = ("json", "ib", "openflow")
                                  # "# <type> portguid ...: '<name>'" tail (~75 instead of 11 B)



# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------
def _encode(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    le = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return {"encoding": f"{a.dtype.name}-le-base64", "dtype": a.dtype.name,
            "shape": list(a.shape), "data": base64.b64encode(le.tobytes()).decode("ascii")}


def _decode(d: dict) -> np.ndarray:
    dt = np.dtype(d["dtype"]).newbyteorder("<")
    raw = base64.b64decode(d["data"])
    return np.frombuffer(raw, dtype=dt).astype(dt.newbyteorder("="), copy=True).reshape(d["shape"])


def _tables_doc(ts: TableSet) -> dict:
    doc = {"format": "fabroute-tables", "version": 1, **ts.meta()}
    doc["tables"] = {k: _encode(v) for k, v in ts.tables.items()}
    doc["alternatives"] = _encode(ts.alternatives)
    doc["vc_inc"] = _encode(ts.vc_inc)
    doc["exit_port"] = None if ts.exit_port is None else _encode(ts.exit_port)
    return doc


def _plan_json(ts: TableSet) -> list[Job]:
    return [("topology.json", lambda: json_chunks(ts.topo.to_dict())),
            ("tables.json", lambda: json_chunks(_tables_doc(ts)))]


def export_json(ts: TableSet, outdir) -> list[str]:
    """Write ``topology.json`` and ``tables.json`` into ``outdir``."""
    return run_jobs(outdir, _plan_json(ts))


def load_tables_json(path, topo: Topology) -> TableSet:
    """Read a ``tables.json`` written by :func:`export_json` for ``topo``; the arrays come back
    with their dtypes and shapes, so the result equals the exported table set."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format") != "fabroute-tables":
        raise NotExpressible(f"{path}: not a fabroute tables.json (format {doc.get('format')!r})")
    if doc["topology"] != topo.name():
        raise NotExpressible(f"{path}: tables of {doc['topology']}, not of {topo.name()}")
    tables = {k: _decode(v) for k, v in doc["tables"].items()}
    for k, v in tables.items():
        if v.shape[0] != topo.n_switches:
            raise NotExpressible(f"{path}: table {k} has {v.shape[0]} rows for "
                                 f"{topo.n_switches} switches")
    return TableSet(
        topo=topo, routing=doc["routing"], classes=[PathClass(**c) for c in doc["classes"]],
        tables=tables, alternatives=_decode(doc["alternatives"]), vc_inc=_decode(doc["vc_inc"]),
        num_vcs=int(doc["num_vcs"]), vc_scheme=doc["vc_scheme"],
        exit_port=None if doc["exit_port"] is None else _decode(doc["exit_port"]),
        params=doc["params"])


# ---------------------------------------------------------------------------------------------
# all formats
# ---------------------------------------------------------------------------------------------
def export_all(ts: TableSet, outdir, *, formats=FORMATS, lmc: int = 0, seed: int = 1,
               lft_comments: bool | None = None, atomic: bool = True) -> dict[str, list[str]]:
    """Write every requested format into ``outdir``; returns the written paths per format.

    All formats are planned (and every :class:`NotExpressible` raised) before the first file is
    written, so a rejected table set leaves ``outdir`` untouched.  Each file is replaced
    atomically (``<name>.tmp-<pid>``, then ``os.replace``) unless ``atomic=False``: then it
    is written in place, for an ``outdir`` that is itself renamed into place once complete
    (``fabroute tables`` does that; a rename per file costs 0.15 ms on ext4 here, 0.6 s for
    a 2064-router Dragonfly's 4,137 files).
    """
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise NotExpressible(f"unknown export format(s) {unknown}; expected some of {list(FORMATS)}")
    planners = {"json": lambda: _plan_json(ts),
                "ib": lambda: plan_ib(ts, lmc, lft_comments, seed),
                "openflow": lambda: plan_openflow(ts)}
    plans = {f: planners[f]() for f in formats}
    return {f: run_jobs(outdir, jobs, atomic) for f, jobs in plans.items()}
