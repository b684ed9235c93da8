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
import os
import shutil
import zipfile
import zlib
from pathlib import Path

import numpy as np

from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.outdir import replaced_dir
from tablegen.exports.writer import Job, json_chunks, run_jobs
from tablegen.tables import PathClass, TableSet
from tablegen.topology import Topology

__all__ = ["FORMATS", "export_all", "export_json", "load_table_dir", "load_tables_json",
           "write_table_set"]

FORMATS = ("json", "ib", "openflow")
TOPOLOGY_FILE, TABLES_NPZ, REPORT_FILE = "topology.json", "tables.npz", "verify.json"
UPDATE_FILE = "update.json"         # `fabroute expand --out`: the diff from the set it replaces
MAX_TOPOLOGY_BYTES = 256 << 20   # topology.json of the largest supported fabric is ~10 MiB


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


def plan_json(ts: TableSet) -> list[Job]:
    return [("topology.json", lambda: json_chunks(ts.topo.to_dict())),
            ("tables.json", lambda: json_chunks(_tables_doc(ts)))]


def export_json(ts: TableSet, outdir) -> list[str]:
    """Write ``topology.json`` and ``tables.json`` into ``outdir``."""
    return run_jobs(outdir, plan_json(ts))


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
               lft_comments: bool | None = None, atomic: bool = True,
               binding=None, openflow_profile: str = "ovs") -> dict[str, list[str]]:
    """Write every requested format into ``outdir``; returns the written paths per format.

    All formats are planned (and every :class:`NotExpressible` raised) before the first file is
    written, so a rejected table set leaves ``outdir`` untouched.  Each file is replaced
    atomically (``<name>.tmp-<pid>``, then ``os.replace``) unless ``atomic=False``: then it
    is written in place, for an ``outdir`` that is itself renamed into place once complete
    (``fabroute tables`` does that; a rename per file costs 0.15 ms on ext4 here, 0.6 s for
    a 2064-router Dragonfly's 4,137 files).  ``binding``: the IB files of the bound fabric
    (:func:`~tablegen.exports.infiniband.write.plan_ib`).
    ``openflow_profile``: the OpenFlow program's profile
    (:data:`tablegen.exports.openflow.PROFILES`).
    """
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise NotExpressible(f"unknown export format(s) {unknown}; expected some of {list(FORMATS)}")
    # the formats' modules are imported here, not at start-up: every command imports this one
    from tablegen.exports.infiniband.write import plan_ib
    from tablegen.exports.openflow_text import plan_openflow

    planners = {"json": lambda: plan_json(ts),
                "ib": lambda: plan_ib(ts, lmc, lft_comments, seed, binding=binding),
                "openflow": lambda: plan_openflow(ts, openflow_profile)}
    plans = {f: planners[f]() for f in formats}
    return {f: run_jobs(outdir, jobs, atomic) for f, jobs in plans.items()}


# ---------------------------------------------------------------------------------------------
# table directories: what fabroute tables writes and every consumer loads
# ---------------------------------------------------------------------------------------------
def write_table_set(ts, rep, out: Path, formats, lmc: int | None = None, seed: int = 1,
                    jobs: int = 1, into: bool = False, update: dict | None = None,
                    force: bool = False, binding=None,
                    openflow_profile: str = "ovs") -> tuple[list[str], dict[str, str]]:
    """Write every export of ``ts`` into ``out`` as a whole, crash-safe
    (:func:`~tablegen.exports.outdir.replaced_dir`); ``into``: ``out`` is a new directory
    inside one that is itself being replaced (a batch of routings), written in place.  A
    format that cannot express the tables (e.g. InfiniBand when the SLs do not fit the VLs)
    is skipped and its reason returned (and recorded in the manifest's ``exports.skipped``);
    JSON, the NumPy tables, the report and the manifest are always written.  ``lmc`` None:
    the InfiniBand files of a routing with a non-minimal class carry it
    (:func:`~tablegen.exports.infiniband.write.default_lmc`), or, where that LMC cannot be
    expressed, LMC 0 with ``exports.ib.min_only`` saying they carry MIN only.  With ``jobs > 1`` the formats are written by that many forked
    processes side by side (each format has its own files).  ``update``: the diff from the
    table set this one replaces (:func:`tablegen.update.table_diff`), written as
    :data:`UPDATE_FILE` and bound by its hash (it cannot be derived from this set alone).
    ``force``: replace a fabroute output of another kind
    (:func:`~tablegen.exports.outdir.check_out_dir`).  ``binding``
    (:class:`~tablegen.fabrics.bind.Binding`): the set is bound to a fabric as cabled
    (:mod:`tablegen.exports.fabric_files`), its IB files keyed by the fabric's ids.
    ``openflow_profile``: the OpenFlow program's (:data:`tablegen.exports.openflow.PROFILES`),
    recorded in the manifest's ``exports.openflow_profile``."""
    if into:
        out.mkdir()
        return _write_files(ts, rep, out, formats, lmc, seed, jobs, update, binding,
                            openflow_profile)
    with replaced_dir(out, kind="table-set", force=force) as tmp:
        return _write_files(ts, rep, tmp, formats, lmc, seed, jobs, update, binding,
                            openflow_profile)


def _write_files(ts, rep, d: Path, formats, lmc: int | None, seed: int, jobs: int,
                 update=None, binding=None, openflow_profile: str = "ovs"):
    from tablegen.exports.manifest import MANIFEST, write_manifest
    from tablegen.forked import run_forked

    def base():
        ts.save_npz(d / TABLES_NPZ)
        (d / REPORT_FILE).write_text(json.dumps(rep.to_dict(), indent=1))
        return export_all(ts, d, formats=("json",), atomic=False), {}, {}

    def export(fmt):
        def job():
            from tablegen.exports.infiniband.write import default_lmc, ib_record

            tries = ([lmc] if lmc is not None or fmt != "ib" else
                     sorted({default_lmc(ts), 0}, reverse=True))
            why = None      # why the first LMC tried could not be used
            for m in tries:
                try:
                    files = export_all(ts, d, formats=(fmt,), lmc=m, seed=seed, atomic=False,
                                       binding=binding, openflow_profile=openflow_profile)
                except NotExpressible as e:
                    shutil.rmtree(d / fmt, ignore_errors=True)  # nothing half-written
                    why, last = why or f"LMC {m} cannot be expressed: {e}", str(e)
                    continue
                return files, {}, ({"ib": ib_record(ts, m, seed, "ib/", why)}
                                   if fmt == "ib" else {})
            return {}, {fmt: last}, {}
        return job

    written, skipped, records = {}, {}, {}
    # the formats with the most text first, so that the JSON fills in behind them
    for w, s, info in run_forked([*(export(f) for f in formats if f != "json"), base], jobs):
        written.update(w)
        skipped.update(s)
        records.update(info)
    made = {f for f in formats if f not in skipped}
    extra = set()
    if update is not None:
        (d / UPDATE_FILE).write_text(json.dumps(update, indent=1) + "\n")
        extra.add(UPDATE_FILE)
    bound = {}
    if binding is not None:
        from tablegen.exports.fabric_files import FABRIC_FILE, MAP_FILE, write_fabric_files

        bound = {"fabric": write_fabric_files(d, binding)}
        extra |= {FABRIC_FILE, MAP_FILE}
    write_manifest(d, rep, {"json": True, "report": True, "openflow": "openflow" in made,
                            **({"openflow_profile": openflow_profile}
                               if "openflow" in made else {}),
                            "ib": records.get("ib"),
                            **({"skipped": skipped} if skipped else {}), **bound})
    files = sorted({str(Path(f).relative_to(d)) for fs in written.values() for f in fs}
                   | {TABLES_NPZ, REPORT_FILE, MANIFEST} | extra)
    return files, skipped


def load_table_dir(d: Path) -> TableSet:
    """The table set in a ``fabroute tables`` directory (``topology.json``, ``tables.npz``),
    read bounded (regular files only, :data:`MAX_TOPOLOGY_BYTES`, arrays no larger than the
    topology allows) and shape-checked (:meth:`TableSet.check`); not yet proven: that is
    :func:`tablegen.verify.verify`.  :class:`~tablegen.errors.BadInput` naming the directory or
    the file when it holds none."""
    d = Path(d)
    if not d.is_dir():
        raise BadInput(f"DIR={d} is not a directory; expected the --out of 'fabroute tables'")
    from tablegen.exports.inputs import open_regular, read_bytes

    # what numpy, zipfile and zlib raise on damaged files (zipfile: RuntimeError and
    # NotImplementedError for flag bits a damaged header sets, e.g. "encrypted")
    unreadable = (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, EOFError,
                  RuntimeError, zipfile.BadZipFile, zlib.error)
    path = d / TOPOLOGY_FILE
    try:
        topo = Topology.from_dict(json.loads(read_bytes(path, MAX_TOPOLOGY_BYTES)))
        path = d / TABLES_NPZ
        os.close(open_regular(path))        # a FIFO or a link is refused, not read
        ts = TableSet.load_npz(path, topo)
        ts.check()
        return ts
    except BadInput:
        raise
    except unreadable as e:
        raise BadInput(f"DIR={d} holds no readable table set: {path.name}: "
                       f"{type(e).__name__}: {e}; expected the {TOPOLOGY_FILE} and {TABLES_NPZ} "
                       "'fabroute tables' writes") from None


def openflow_profile(exports: dict) -> str:
    """The OpenFlow profile a manifest's ``exports`` record (``ovs`` when it names none: the
    only program before profiles existed); :class:`BadInput` for any other value."""
    from tablegen.exports.openflow import PROFILES

    profile = exports.get("openflow_profile", "ovs")
    if profile not in PROFILES:
        raise BadInput(f"manifest.json: exports.openflow_profile {profile!r}; expected one "
                       f"of {', '.join(PROFILES)}")
    return profile


def derived_files(ts: TableSet, exports: dict, rep, binding=None) -> dict:
    """Path -> producer of every file that ``exports`` (a manifest's record of how a set was
    written) says can be made again from the proven table set ``ts`` and its report ``rep``
    (and, for a set bound to a fabric, its ``binding``)."""
    ex = exports
    jobs = {TOPOLOGY_FILE: lambda: json_chunks(ts.topo.to_dict())}
    if ex.get("json"):
        jobs.update(plan_json(ts))
    if ex.get("report"):
        jobs[REPORT_FILE] = lambda: (json.dumps(rep.to_dict(), indent=1),)
    if ex.get("openflow"):
        from tablegen.exports.openflow_text import plan_openflow

        jobs.update(plan_openflow(ts, openflow_profile(ex)))
    ib = ex.get("ib")
    if ib:
        from tablegen.exports.infiniband.write import plan_ib

        if not (isinstance(ib, dict) and isinstance(ib.get("lmc"), int)
                and isinstance(ib.get("seed"), int) and ib.get("prefix") in ("", "ib/")):
            raise BadInput(f"manifest.json: exports.ib {ib!r}; expected lmc, seed and prefix")
        jobs.update(plan_ib(ts, ib["lmc"], None, ib["seed"], ib["prefix"],
                            variant=ib.get("variant"), binding=binding))
    return jobs


def prove_table_dir(d: Path):
    """Load table directory ``d`` (:func:`~tablegen.exports.files.load_table_dir`), prove its
    tables against what fabroute computes (:func:`tablegen.verify.verify_stored`) and, when
    they hold, every file against the manifest and the tables
    (:func:`tablegen.exports.manifest.check_files`).  Returns
    ``(table set, report, files report or None)``; a missing or unreadable manifest is a
    failed file check, not bad input: the set is not what was verified."""
    from tablegen.exports.infiniband.read import IB_FILES
    from tablegen.exports.manifest import FIRST_ERRORS, check_files, proof_facts
    from tablegen.routing.imported import IMPORTED
    from tablegen.verify import verify_stored

    ts = load_table_dir(d)
    rep = verify_stored(ts)
    if not rep.ok:
        return ts, rep, None
    # an imported set's IB files (ib/, exports.infiniband.imports) are its source, not
    # derived from it: bound by their hash
    source = {f"ib/{n}" for n in IB_FILES} if ts.routing == IMPORTED else set()
    try:
        binding, bound_errors, bound = _bound_fabric(d, ts)
        files = check_files(d, lambda ex: derived_files(ts, ex, rep, binding),
                            {TABLES_NPZ, UPDATE_FILE} | source | bound, proof_facts(rep))
    except (BadInput, NotExpressible) as e:
        files = {"ok": False, "files": 0, "checked": 0, "derived": 0, "errors": [str(e)],
                 "error_count": 1}
    else:
        if bound_errors:
            files["errors"] = (bound_errors + files["errors"])[:FIRST_ERRORS]
            files["error_count"] += len(bound_errors)
            files["ok"] = False
    return ts, rep, files


def _bound_fabric(d: Path, ts: TableSet):
    """For a set bound to a fabric (its manifest's ``exports.fabric``): the binding proven
    against the fabric file (:func:`~tablegen.exports.fabric_files.load_bound`), why it
    does not hold, and the two files bound by their hash; ``(None, [], set())`` otherwise."""
    from tablegen.exports.manifest import load_manifest

    record = load_manifest(d)["exports"].get("fabric")
    if record is None:
        return None, [], set()
    from tablegen.exports.fabric_files import FABRIC_FILE, MAP_FILE, load_bound

    binding, errors = load_bound(d, record, ts.topo)
    return binding, errors, {FABRIC_FILE, MAP_FILE}
