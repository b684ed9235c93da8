"""InfiniBand files (any router's: OpenSM's engines read back from ibsim, or our own export)
turned into a fabroute table set: what ``fabroute ib import DIR --out TABLEDIR`` writes and
``fabroute ib compare`` measures every engine with.

Input: ``fabric.net``, ``guids.json``, ``guid2lid`` and ``lfts.dump`` (plus ``sl2vl.dump`` and
``path-sl.txt``), read with every check of :func:`~tablegen.exports.infiniband.read.load_ib_files`,
on a fabric fabroute builds: ``guids.json`` names the topology, whose wiring, GUIDs and LIDs the
files must have.  An LFT forwards per destination LID, so the set holds one table per
(destination host index, LID offset) (:mod:`tablegen.routing.imported` says why and how); an
entry no destination-based table can hold — a host's LID sent out of a port without a cable,
into another host, or at its own switch anywhere but into the host — is a route that does not
deliver, listed in ``problems`` and left out (``-1``), so :func:`tablegen.verify.verify` fails.

The written directory (:func:`write_imported`): ``topology.json``, ``tables.npz``,
``verify.json``, ``ib/`` (the six files, copied) and ``manifest.json`` binding them;
``fabroute verify`` proves the tables (delivery, loop freedom, ``N - 1`` hop bound) and walks the
IB files (:func:`verify_imported`: every (HCA, LID) packet with its SL and VLs, the CDG over
``(switch, out port, VL)``, and every host-LID entry of ``lfts.dump`` against the tables).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.infiniband.read import IB_FILES, IbFiles
from tablegen.routing.imported import (IMPORTED, class_name, class_names,
                                       imported_table_set)
from tablegen.tables import TableSet
from tablegen.topology import Topology

IB_PREFIX = "ib/"             # where an imported set keeps the files it was made from
FIRST_PROBLEMS = 10


@dataclass(eq=False)
class Imported:
    """An imported table set, the files it came from and the entries that could not be held
    (``problems``: the first :data:`FIRST_PROBLEMS` lines; ``problem_count`` all of them)."""

    ts: TableSet
    files: IbFiles
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0


def fabric_topology(f: IbFiles) -> Topology:
    """The topology ``guids.json`` names, held against the files: every switch and HCA record
    (id, GUID, LID, ports, where the HCA is cabled) as fabroute's address plan gives it, and
    ``fabric.net``'s cables as the topology's.  :class:`BadInput` naming the first difference.
    O(N R + H)."""
    from tablegen.exports.infiniband.lids import host_port_guid, lid_plan, switch_guid

    where = f.dir / "guids.json"
    name = f.guids.get("topology")
    if not isinstance(name, str):
        raise BadInput(f"{where}: no 'topology' name; expected the name fabroute wrote there")
    try:
        topo = _named_topology(name, f)
        plan = lid_plan(topo, f.lmc)
    except (BadInput, NotExpressible) as e:
        raise BadInput(f"{where}: topology {name!r}: {e}") from None
    n, r = topo.adj.shape
    sws, hosts = f.guids["switches"], f.guids["hosts"]
    if (len(sws), len(hosts)) != (n, topo.n_hosts):
        raise BadInput(f"{where}: {len(sws)} switches and {len(hosts)} HCAs; expected "
                       f"{n} and {topo.n_hosts} for {topo.name()}")
    ht = topo.host_table()
    try:
        got = [(int(s["id"]), int(s["guid"], 16), int(s["lid"]), int(s["num_ports"]))
               for s in sws]
        got_h = [(int(h["id"]), int(h["port_guid"], 16), int(h["lid"]), int(h["switch"]),
                  int(h["switch_port"])) for h in hosts]
    except (KeyError, ValueError, TypeError) as e:
        raise BadInput(f"{where}: a switch or HCA record lacks {e}; expected the records "
                       "fabroute writes") from None
    want = list(zip(range(n), switch_guid(np.arange(n)).tolist(), plan.switch_lid.tolist(),
                    (topo.hosts + r).tolist()))
    want_h = list(zip(ht[:, 0].tolist(), host_port_guid(ht[:, 0]).tolist(),
                      plan.host_lid.tolist(), ht[:, 1].tolist(), ht[:, 2].tolist()))
    for what, a, b, fields in (("switch", got, want, "id, GUID, LID, ports"),
                               ("HCA", got_h, want_h, "id, port GUID, LID, switch, port")):
        bad = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if bad is not None:
            raise BadInput(f"{where}: {what} record {bad} has ({fields}) = {list(a[bad])}; "
                           f"expected {list(b[bad])} ({topo.name()}, LMC {f.lmc})")
    _check_cables(f, topo)
    return topo


def _named_topology(name: str, f: IbFiles) -> Topology:
    """The topology of a ``Topology.name()`` (``kind:k=v,...``, every parameter of the built
    fabric, e.g. DSN-F's ``p``, which a SPEC does not take), rebuilt as ``fabroute verify``
    rebuilds a stored one (:func:`tablegen.verify.rebuilt_topology`); hosts per switch, for the
    kinds that take them, from the HCA records."""
    from types import SimpleNamespace

    from tablegen.verify import rebuilt_topology

    kind, _, rest = name.partition(":")
    params: dict = {}
    for item in filter(None, rest.split(",")):
        k, eq, v = item.partition("=")
        if not eq or k in params:
            raise BadInput(f"{item!r:.40} is not a new key=value; expected kind:k=v,...")
        params[k] = int(v) if v.lstrip("-").isdigit() else v
    try:
        per = np.bincount([int(h["switch"]) for h in f.guids["hosts"]],
                          minlength=len(f.guids["switches"]))
    except (KeyError, ValueError, TypeError) as e:
        raise BadInput(f"an HCA record lacks {e}") from None
    return rebuilt_topology(SimpleNamespace(kind=kind, params=params, hosts=per,
                                            name=lambda: name))


def _check_cables(f: IbFiles, topo: Topology) -> None:
    """fabric.net's switch-to-switch cables must be the topology's (ports included)."""
    from tablegen.exports.infiniband.lids import SWITCH_GUID_BASE

    n = topo.n_switches
    have = set()
    for g, (kind, ports) in f.net.items():
        if kind == "Hca":
            continue
        u = g - SWITCH_GUID_BASE
        for p, (pg, pp) in ports.items():
            if 0 <= pg - SWITCH_GUID_BASE < n:
                have.add((u, p, pg - SWITCH_GUID_BASE, pp))
    s, j = np.nonzero(topo.adj >= 0)
    t = topo.adj[s, j]
    want = set(zip(s.tolist(), (topo.hosts[s] + 1 + j).tolist(), t.tolist(),
                   (topo.hosts[t] + 1 + topo.peer[s, j]).tolist()))
    if have != want:
        a, b = sorted(have - want), sorted(want - have)
        what = (f"cable {a[0][0]}:{a[0][1]} - {a[0][2]}:{a[0][3]} is not in the topology" if a
                else f"cable {b[0][0]}:{b[0][1]} - {b[0][2]}:{b[0][3]} is missing")
        raise BadInput(f"{f.dir / 'fabric.net'}: {what} ({len(a)} extra, {len(b)} missing "
                       f"switch-to-switch cables); expected the cables of {topo.name()}")


def lft_array(f: IbFiles, topo: Topology) -> np.ndarray:
    """``int16[N, top LID + 1]``: the out port of every (switch id, LID) of ``lfts.dump``."""
    from tablegen.exports.infiniband.lids import SWITCH_GUID_BASE

    width = f.lfts.top + 1
    lft = np.zeros((topo.n_switches, width), dtype=np.int16)
    lft[[g - SWITCH_GUID_BASE for g in f.lfts]] = f.lfts.dense(width, 0)
    return lft


def import_files(f: IbFiles, engine: str | None = None) -> Imported:
    """The table set of the LFTs in ``f`` (:mod:`tablegen.routing.imported`), entries that no
    destination-based table holds as ``problems``.  :class:`BadInput` when the files are not
    of a fabric fabroute builds (:func:`fabric_topology`).

    Complexity: O(N^2 · hosts per switch · 2^LMC) for the tables, plus a compiled walk of each
    distinct table for the longest path (the hop-indexed VC count)."""
    from tablegen.exports.infiniband.lids import lid_plan
    from tablegen.routing.walk import table_lengths

    topo = fabric_topology(f)
    plan = lid_plan(topo, f.lmc)
    lft = lft_array(f, topo)
    n, r = topo.adj.shape
    hosts, off = topo.hosts.astype(np.int64), topo.host_offset
    rows = np.arange(n)[:, None]
    tables: dict[str, np.ndarray] = {}
    seen: dict[bytes, str] = {}
    table_of, problems, count = [], [], 0
    for name in class_names(topo, f.lmc):
        e, k = _class_key(name)
        has = hosts > e                     # destination switches with an e-th host
        h = off[:-1] + np.minimum(e, np.maximum(hosts - 1, 0))
        lids = np.where(has, plan.host_lid[np.minimum(h, topo.n_hosts - 1)] + k,
                        plan.switch_lid)       # no e-th host: the switch's own route
        port = lft[:, lids].astype(np.int64)                  # [u, d]
        j = port - hosts[:, None] - 1
        ok = (j >= 0) & (j < r)
        ok &= topo.adj[rows, np.clip(j, 0, r - 1)] >= 0
        tab = np.where(ok, j, -1).astype(np.int16)
        diag = np.arange(n)
        tab[diag, diag] = -1
        want_here = np.where(has, e + 1, 0)          # at d itself: into the host (switch: 0)
        bad = ~ok
        bad[diag, diag] = port[diag, diag] != want_here
        for u, d in np.argwhere(bad & has[None, :]).tolist():
            count += 1
            if len(problems) < FIRST_PROBLEMS:
                problems.append(_problem(topo, lft, int(u), int(d), int(lids[d]), e, k,
                                         int(port[u, d])))
        key = tab.tobytes()
        if key not in seen:
            seen[key] = name
            tables[name] = tab
        table_of.append(seen[key])
    longest = 1
    for tab in tables.values():
        try:
            longest = max(longest, int(table_lengths(topo, tab).max(initial=0)))
        except RuntimeError:
            pass                # a loop or a dead end: verify reports it on the tables
    ts = imported_table_set(topo, tables, table_of, f.lmc, engine, longest)
    return Imported(ts, f, problems, count)


def _class_key(name: str) -> tuple[int, int]:
    e, _, k = name[1:].partition("o")
    return int(e), int(k or 0)


def _problem(topo, lft, u, d, lid, e, k, port) -> str:
    where = f"switch {u} forwards LID 0x{lid:04x} (host {e} of switch {d}, offset {k})"
    if u == d:
        return f"{where} to port {port}, not into the host (port {e + 1})"
    if 1 <= port <= topo.hosts[u]:
        return f"{where} into its own host port {port}"
    return f"{where} to port {port}, which has no cable to another switch"


def verify_imported(f: IbFiles, ts: TableSet) -> dict:
    """Prove the IB files of an imported set: :func:`verify_ib_files`' walk of every
    (HCA, LID) packet with its path-SL and SL2VL VLs and its acyclic CDG over (switch, out port,
    VL), with the ``N - 1`` hop bound of ``ts``; the files' agreement with the table set is
    checked entry by entry against ``ts``'s per-host tables (every host LID at every switch)
    instead of against layers fabroute would build.  Returns its report (``ok``, ``errors``,
    ``sls_used``, ``vls_used``, ``cdg``, ``layers`` …) with ``deadlock_free``: delivered and
    acyclic.  O(H · T · D) for H HCAs, T LIDs, D hops."""
    from tablegen.exports.infiniband.verify_files import verify_ib_files

    rep = verify_ib_files(f, ts)
    # its last check holds the LFTs against the layers build_layers makes of ts — one tree
    # per offset, which per-host tables are not; that comparison is replaced by ours
    layer_diff = "lfts.dump differs from the table set's layers"
    rep["errors"] = [e for e in rep["errors"] if not e.startswith(layer_diff)]
    rep["tables"] = _agreement(f, ts, rep["errors"])
    for lay in rep.get("layers", ()):
        lay["kind"] = IMPORTED
    rep["ok"] = not rep["errors"]
    rep["deadlock_free"] = rep["ok"]
    return rep


def _agreement(f: IbFiles, ts: TableSet, errors: list[str]) -> dict:
    """Every host-LID entry of ``lfts.dump`` against the port ``ts`` gives it."""
    from tablegen.exports.infiniband.lids import lid_plan

    topo = ts.topo
    plan = lid_plan(topo, f.lmc)
    lft = lft_array(f, topo)
    n = topo.n_switches
    ht = topo.host_table()
    cls = {c.name: c for c in ts.classes}
    diff, first, total = 0, None, 0
    for h, d, hp in ht.tolist():
        e = hp - 1
        for k in range(1 << f.lmc):
            j = ts.tables[cls[class_name(e, k, f.lmc)].table1][:, d].astype(np.int64)
            want = np.where(j >= 0, topo.hosts + 1 + j, 0)
            want[d] = hp
            lid = int(plan.host_lid[h]) + k
            got = lft[:, lid] if lid < lft.shape[1] else np.zeros(n, np.int16)
            bad = np.flatnonzero(got != want)
            total += n
            diff += len(bad)
            if len(bad) and first is None:
                u = int(bad[0])
                first = f"switch {u} LID 0x{lid:04x}: port {int(got[u])} in the file, " \
                        f"{int(want[u])} in the tables"
    if first:
        errors.append(f"lfts.dump differs from the imported tables in {diff} of {total} "
                      f"host-LID entries, e.g. {first}")
    return {"lft_entries": total, "lft_mismatches": diff}


def hop_stats(ts: TableSet) -> dict:
    """Switch hops of every (source HCA, destination HCA, LID offset) path of an imported set
    (hosts of one switch: 0 hops), each offset weighing alike: ``max_hops``, ``avg_hops`` and
    ``hist`` (hops -> paths).  O(N^2) per distinct table."""
    from tablegen.routing.walk import table_lengths

    topo = ts.topo
    lmc = int(ts.params["lmc"])
    hosts = topo.hosts.astype(np.int64)
    lengths = {name: table_lengths(topo, t).astype(np.int64) for name, t in ts.tables.items()}
    hist = np.zeros(topo.n_switches + 1, dtype=np.int64)
    for c in ts.classes:
        e, _ = _class_key(c.name)
        w = hosts[:, None] * (hosts[None, :] > e) - np.diag(hosts > e)   # pairs, minus self
        np.add.at(hist, lengths[c.table1].ravel(), w.ravel())
    paths = int(hist.sum())
    used = np.flatnonzero(hist)
    return {"paths": paths, "lmc": lmc, "max_hops": int(used.max(initial=0)),
            "avg_hops": float((hist * np.arange(len(hist))).sum() / paths) if paths else 0.0,
            "hist": {str(int(x)): int(hist[x]) for x in used}}


def write_imported(imp: Imported, rep, dest: Path) -> list[str]:
    """Write the table set of ``imp`` with its verification report ``rep`` into the new
    directory ``dest`` (inside a :func:`~tablegen.exports.outdir.replaced_dir`): the tables,
    the topology, the report, the IB files it came from under ``ib/``, and the manifest last.
    Returns the files written."""
    from tablegen.exports.files import REPORT_FILE, TABLES_NPZ, TOPOLOGY_FILE
    from tablegen.exports.manifest import write_manifest
    from tablegen.exports.writer import json_chunks, write_in_place

    dest = Path(dest)
    dest.mkdir(exist_ok=True)
    imp.ts.save_npz(dest / TABLES_NPZ)
    write_in_place(str(dest / TOPOLOGY_FILE), json_chunks(imp.ts.topo.to_dict()))
    (dest / REPORT_FILE).write_text(json.dumps(rep.to_dict(), indent=1))
    (dest / IB_PREFIX).mkdir()
    for name in IB_FILES:
        shutil.copyfile(imp.files.dir / name, dest / IB_PREFIX / name)
    write_manifest(dest, rep, {"json": False, "report": True, "openflow": False, "ib": None,
                               "imported": {"prefix": IB_PREFIX, "lmc": imp.files.lmc,
                                            "engine": imp.ts.params["engine"]}})
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


def import_dir(src: Path, out: Path, engine: str | None = None, force: bool = False) -> dict:
    """``fabroute ib import``: the files of ``src`` (or ``src/ib``) imported, their tables
    proven (:func:`tablegen.verify.verify_stored`) and the IB files walked
    (:func:`verify_imported`); written into ``out`` (crash-safe, one rename) only when every
    pair is delivered.  Returns ``{"ok", …}``: when not ok, ``errors`` and nothing written;
    when ok, the counts, hops and the IB verification (``ib.deadlock_free`` is reported, not
    required: importing a routing that can deadlock is what comparing it needs).
    :class:`BadInput` for files that do not load or are of no fabric fabroute builds.
    ``force``: ``out`` may replace a fabroute output of another kind than a table set."""
    from tablegen.exports.infiniband.read import load_ib_files
    from tablegen.exports.outdir import replaced_dir
    from tablegen.verify import verify_stored

    f = load_ib_files(src)
    imp = import_files(f, engine)
    rep = verify_stored(imp.ts)
    if imp.problems or not rep.ok:
        more = ([f"… {imp.problem_count} such entries in all"]
                if imp.problem_count > len(imp.problems) else [])
        return {"ok": False, "errors": imp.problems + more + [f"verify: {e}" for e in rep.errors]
                + [f"the LFTs of {f.dir} on {imp.ts.topo.name()} do not deliver every pair; "
                   "nothing written"]}
    ib = verify_imported(f, imp.ts)
    with replaced_dir(Path(out), kind="table-set", force=force) as tmp:
        files = write_imported(imp, rep, tmp)
    hops = hop_stats(imp.ts)
    return {"ok": True, "out": str(out), "from": str(f.dir), "topology": imp.ts.topo.name(),
            "lmc": f.lmc, "engine": engine, "classes": len(imp.ts.classes),
            "tables": len(imp.ts.tables), "files": files, "max_hops": hops["max_hops"],
            "avg_hops": round(hops["avg_hops"], 4),
            "ib": {k: ib.get(k) for k in ("ok", "deadlock_free", "sls_used", "vls_used",
                                          "errors")}}
