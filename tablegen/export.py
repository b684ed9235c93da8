"""Export a :class:`~tablegen.tables.TableSet` to the files other tools load.

Formats (``docs/formats.md`` specifies every file, its schema and the address plans):

* ``json`` — ``topology.json`` (:meth:`Topology.to_dict`) and ``tables.json`` (the table set,
  arrays as base64; :func:`load_tables_json` reads it back exactly).  Written with
  :func:`json.dump`, not a template.
* ``ib`` — InfiniBand: ``ib/fabric.net`` (ibsim fabric), ``ib/lfts.dump`` (LFTs for OpenSM's
  ``file`` routing engine), ``ib/sl2vl.dump``, ``ib/path-sl.txt``, ``ib/guid2lid`` (OpenSM
  LID cache) and ``ib/guids.json`` (our ids -> GUIDs, ports, LIDs).
* ``openflow`` — OpenFlow 1.3 for Open vSwitch: ``openflow/s<id>.flows`` (and
  ``s<id>.groups`` for routings with a source choice) per switch, ``openflow/manifest.json``.

Every text format is a Jinja2 template of the ``fabroute_templates`` package.  The two bulk
formats (LFTs, SL2VL) render each distinct line once through a template macro and assemble
the per-switch bodies with NumPy: an LFT has one line per (switch, LID), 38M lines for a
2064-router Dragonfly, far beyond what a template loop renders in seconds.

Every file is written to ``<name>.tmp-<pid>`` and renamed over ``<name>`` (``os.replace``), so
a reader never sees a half-written file; all checks that can reject a table set run before the
first file of an :func:`export_all` call is written.

Address plans (fixed, documented in ``docs/formats.md``):

* GUIDs: switch ``s`` -> ``SWITCH_GUID_BASE + s`` (node = port GUID, as on a switch);
  host ``h`` -> node GUID ``HCA_GUID_BASE + h * HCA_GUID_STRIDE``, port-1 GUID node + 1
  (ibsim numbers HCA port GUIDs node + port).  ``0x02`` in the top byte marks locally
  administered EUI-64s.
* LIDs: switch ``s`` -> ``s + 1``; host ``h`` -> ``first + h * 2**lmc`` with ``first`` the
  smallest multiple of ``2**lmc`` above the switch LIDs.
* MACs: ``02:GG:GG:LL:LL:EE`` — group ``G`` of the destination switch (``Topology.group``),
  its rank ``L`` inside the group, host index ``E`` on that switch; one masked match per
  destination group (``ff:ff:ff:00:00:00``) or switch (``ff:ff:ff:ff:ff:00``).
* VLAN: VID 0 = phase 1; VID ``1 + t`` = phase 0 toward target ``t`` (a switch, or a
  Dragonfly group); VID 1 = DSN-F pre-work.  PCP = the VC of the packet's next hop.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np

from . import openflow as of
from .tables import PathClass, TableSet
from .topology import Topology

__all__ = [
    "ExportError", "FORMATS", "HCA_GUID_BASE", "HCA_GUID_STRIDE", "LidPlan", "SWITCH_GUID_BASE",
    "export_all", "export_ib", "export_json", "export_openflow", "host_macs", "host_node_guid",
    "host_path_sls", "host_port_guid", "ib_layers", "lft_class", "lft_lids", "lft_row",
    "lid_plan", "load_tables_json", "path_sl_rows", "switch_guid",
]

FORMATS = ("json", "ib", "openflow")

SWITCH_GUID_BASE = 0x02FAB00100000000
HCA_GUID_BASE = 0x02FAB00200000000
HCA_GUID_STRIDE = 0x10
MAX_UNICAST_LID = 0xBFFF          # 0xC000 and above are multicast LIDs
MAX_IB_PORT = 254                 # port numbers are 8 bit; 255 is reserved
LFT_COMMENT_LINES = 10_000_000    # LFT lines (switches x LIDs) up to which entries keep their
                                  # "# <type> portguid ...: '<name>'" tail (~75 instead of 11 B)

class ExportError(ValueError):
    """The table set cannot be expressed in a format; the message is one line."""


# ---------------------------------------------------------------------------------------------
# templates and atomic files
# ---------------------------------------------------------------------------------------------
_ENV: jinja2.Environment | None = None


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(
            loader=jinja2.PackageLoader("fabroute_templates", ""), autoescape=False,
            trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
            undefined=jinja2.StrictUndefined)
    return _ENV


def _macros(name: str):
    return _env().get_template(name).module


Chunks = Iterable[bytes | str]
_Job = tuple[str, Callable[[], Chunks]]     # (path relative to outdir, producer of the content)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def _atomic_write(path: Path, chunks: Chunks | bytes | str) -> str:
    """Write ``chunks`` to ``path`` via ``<name>.tmp-<pid>`` + ``os.replace``; on any error the
    temporary file is removed and ``path`` is left as it was."""
    path = Path(path)
    tmp = _tmp_name(path)
    if isinstance(chunks, (bytes, str)):
        chunks = (chunks,)
    try:
        with open(tmp, "wb") as f:
            for c in chunks:
                f.write(c.encode() if isinstance(c, str) else c)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return str(path)


def _run_jobs(outdir, jobs: list[_Job]) -> list[str]:
    out = Path(outdir)
    written = []
    made: set[Path] = set()
    for rel, produce in jobs:
        p = out / rel
        if p.parent not in made:
            p.parent.mkdir(parents=True, exist_ok=True)
            made.add(p.parent)
        written.append(_atomic_write(p, produce()))
    return written


def _rendered(tmpl: jinja2.Template, **kw) -> Chunks:
    # render() joins in one go; generate() would hand f.write thousands of tiny strings
    return (tmpl.render(**kw),)


def _json_chunks(obj) -> Chunks:
    # no indent: only the compact form goes through json's C encoder (10x faster)
    return (json.dumps(obj, separators=(",", ":")), "\n")


# ---------------------------------------------------------------------------------------------
# address plans
# ---------------------------------------------------------------------------------------------
def switch_guid(s):
    """Node (= port) GUID of switch ``s`` (int or array)."""
    return np.uint64(SWITCH_GUID_BASE) + np.asarray(s, dtype=np.uint64)


def host_node_guid(h):
    return np.uint64(HCA_GUID_BASE) + np.asarray(h, dtype=np.uint64) * np.uint64(HCA_GUID_STRIDE)


def host_port_guid(h):
    """GUID of the (only) port 1 of host ``h``'s HCA."""
    return host_node_guid(h) + np.uint64(1)


def _hex16(values) -> list[str]:
    return [f"{v:016x}" for v in np.asarray(values, dtype=np.uint64).tolist()]


@dataclass(frozen=True)
class LidPlan:
    """LIDs of every switch and host; host ``h`` owns ``host_lid[h] .. + 2**lmc - 1``."""

    lmc: int
    switch_lid: np.ndarray
    host_lid: np.ndarray
    top: int


def lid_plan(topo: Topology, lmc: int = 0) -> LidPlan:
    """Switches get LIDs ``1..N``; host base LIDs follow, aligned to ``2**lmc`` (an LMC port
    answers to ``base | offset``, so the base must have ``lmc`` zero low bits)."""
    if not 0 <= lmc <= 7:
        raise ExportError(f"lmc={lmc}; expected 0..7")
    n, h = topo.n_switches, topo.n_hosts
    step = 1 << lmc
    host = _first_host_lid(n, lmc) + np.arange(h, dtype=np.int64) * step
    top = int(host[-1]) + step - 1 if h else n
    if top > MAX_UNICAST_LID:
        fits = [m for m in range(8) if _top_lid(n, h, m) <= MAX_UNICAST_LID]
        raise ExportError(f"{topo.name()}: LMC {lmc} needs LIDs up to 0x{top:X}, beyond the "
                          f"unicast limit 0x{MAX_UNICAST_LID:X}; lower the LMC (to "
                          f"{max(fits) if fits else 'none: too many ports'})")
    return LidPlan(lmc, np.arange(1, n + 1, dtype=np.int64), host, top)


def _first_host_lid(n: int, lmc: int) -> int:
    step = 1 << lmc
    return -(-(n + 1) // step) * step


def _top_lid(n: int, h: int, lmc: int) -> int:
    """Highest LID of the plan: ``N`` switch LIDs, then ``H`` aligned blocks of ``2**lmc``."""
    return _first_host_lid(n, lmc) + h * (1 << lmc) - 1 if h else n


def host_macs(topo: Topology) -> np.ndarray:
    """``uint64[H]`` MAC address of every host (:func:`tablegen.openflow.host_macs`)."""
    try:
        return of.host_macs(topo)
    except of.OpenFlowError as e:
        raise ExportError(str(e)) from None


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


def _plan_json(ts: TableSet) -> list[_Job]:
    return [("topology.json", lambda: _json_chunks(ts.topo.to_dict())),
            ("tables.json", lambda: _json_chunks(_tables_doc(ts)))]


def export_json(ts: TableSet, outdir) -> list[str]:
    """Write ``topology.json`` and ``tables.json`` into ``outdir``."""
    return _run_jobs(outdir, _plan_json(ts))


def load_tables_json(path, topo: Topology) -> TableSet:
    """Read a ``tables.json`` written by :func:`export_json` for ``topo``; the arrays come back
    with their dtypes and shapes, so the result equals the exported table set."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format") != "fabroute-tables":
        raise ExportError(f"{path}: not a fabroute tables.json (format {doc.get('format')!r})")
    if doc["topology"] != topo.name():
        raise ExportError(f"{path}: tables of {doc['topology']}, not of {topo.name()}")
    tables = {k: _decode(v) for k, v in doc["tables"].items()}
    for k, v in tables.items():
        if v.shape[0] != topo.n_switches:
            raise ExportError(f"{path}: table {k} has {v.shape[0]} rows for "
                              f"{topo.n_switches} switches")
    return TableSet(
        topo=topo, routing=doc["routing"], classes=[PathClass(**c) for c in doc["classes"]],
        tables=tables, alternatives=_decode(doc["alternatives"]), vc_inc=_decode(doc["vc_inc"]),
        num_vcs=int(doc["num_vcs"]), vc_scheme=doc["vc_scheme"],
        exit_port=None if doc["exit_port"] is None else _decode(doc["exit_port"]),
        params=doc["params"])


# ---------------------------------------------------------------------------------------------
# InfiniBand
# ---------------------------------------------------------------------------------------------
def lft_class(ts: TableSet) -> PathClass:
    """The class whose routes fill LID offset 0 (layer 0): MIN when the routing has it
    (UGAL-L), else its only class (a Valiant variant's layer 0 is its phase-1 MIN table;
    DSN-F's is its own routing)."""
    names = [c.name for c in ts.classes]
    return ts.cls("min") if "min" in names else ts.classes[-1]


def _ib_names(topo: Topology):
    n, h = topo.n_switches, topo.n_hosts
    sw_hex = _hex16(switch_guid(np.arange(n)))
    hn_hex = _hex16(host_node_guid(np.arange(h)))
    hp_hex = _hex16(host_port_guid(np.arange(h)))
    return sw_hex, [f"S-{g}" for g in sw_hex], hn_hex, hp_hex, [f"H-{g}" for g in hn_hex]


def ib_layers(ts: TableSet, lmc: int = 0, seed: int = 1):
    """LMC layers with SLs (:func:`tablegen.iblayers.ib_routing`) and their IB verification
    report; raises :class:`ExportError` when they do not fit or fail verification."""
    from .iblayers import IbError, ib_routing

    lid_plan(ts.topo, lmc)        # the LID budget first: cheap, and the clearest error
    try:
        layers, rep = ib_routing(ts, lmc, seed)
    except IbError as e:
        raise ExportError(str(e)) from None
    if not rep["ok"]:
        raise ExportError(f"{ts.routing} on {ts.topo.name()} (LMC {lmc}) fails InfiniBand "
                          f"verification: {rep['errors'][0]}")
    return layers, rep


def _plan_ib(ts: TableSet, lmc: int = 0, lft_comments: bool | None = None, seed: int = 1,
             prefix: str = "ib/", ib=None) -> list[_Job]:
    topo = ts.topo
    n, r = topo.adj.shape
    nports = topo.hosts.astype(np.int64) + r
    if nports.max(initial=0) > MAX_IB_PORT:
        raise ExportError(f"{topo.name()}: a switch has {int(nports.max())} ports; InfiniBand "
                          f"numbers at most {MAX_IB_PORT}")
    plan = lid_plan(topo, lmc)
    layers, rep = ib if ib is not None else ib_layers(ts, lmc, seed)
    missing = [f"class {c.name}: LID offsets >= 1 carry it; needs LMC >= 1"
               for c in ts.classes[1:] if lmc == 0]
    names = _ib_names(topo)
    if lft_comments is None:
        lft_comments = n * (n + topo.n_hosts * (1 << lmc)) <= LFT_COMMENT_LINES
    return [
        (prefix + "fabric.net", lambda: _ibsim_chunks(ts, plan, names)),
        (prefix + "guids.json",
         lambda: _json_chunks(_guids_doc(ts, plan, names, layers, rep, missing))),
        (prefix + "guid2lid", lambda: _guid2lid_chunks(topo, plan, names)),
        (prefix + "lfts.dump", lambda: _lft_chunks(ts, plan, names, layers, missing,
                                                   lft_comments)),
        (prefix + "sl2vl.dump", lambda: _sl2vl_chunks(ts, plan, names, layers)),
        (prefix + "path-sl.txt", lambda: _path_sl_chunks(ts, plan, names, layers)),
    ]


def export_ib(ts: TableSet, outdir, *, lmc: int = 0, seed: int = 1,
              lft_comments: bool | None = None, flat: bool = False, ib=None) -> list[str]:
    """Write the InfiniBand files into ``outdir/ib`` (``flat``: into ``outdir`` itself).

    ``lmc``/``seed`` choose the layers (:func:`ib_layers`); ``ib`` passes a
    ``(layers, report)`` pair computed already.

    ``lft_comments=False`` drops the ``# <type> portguid 0x…: '<name>'`` tail of every LFT
    line (about 6x smaller files); OpenSM then cannot remap LIDs it assigned differently, so
    load ``ib/guid2lid`` with ``honor_guid2lid_file TRUE``.  ``None`` (default) keeps the tail
    up to :data:`LFT_COMMENT_LINES` LFT lines (switches x LIDs) and drops it beyond: a
    2064-router Dragonfly would otherwise write 2.8 GB.
    """
    return _run_jobs(outdir, _plan_ib(ts, lmc, lft_comments, seed, "" if flat else "ib/", ib))


def _ibsim_limits(topo: Topology, plan: LidPlan) -> dict:
    n, r = topo.adj.shape
    ports = int((topo.hosts.astype(np.int64) + r + 1).sum()) + topo.n_hosts
    return {"N": n + topo.n_hosts, "S": n, "P": ports, "L": -(-(plan.top + 1) // 64) * 64}


def _ibsim_chunks(ts: TableSet, plan: LidPlan, names) -> Chunks:
    topo = ts.topo
    n, r = topo.adj.shape
    sw_hex, sw_name, hn_hex, _, h_name = names
    ht = topo.host_table()
    hcas = [(hn_hex[h], h_name[h], sw_name[s], p, int(plan.host_lid[h]),
             int(plan.switch_lid[s])) for h, s, p in ht.tolist()]
    off = topo.host_offset
    switches = []
    for s in range(n):
        hs = int(topo.hosts[s])
        ports = [(e + 1, h_name[int(off[s]) + e], 1, int(plan.host_lid[int(off[s]) + e]))
                 for e in range(hs)]
        for j in np.flatnonzero(topo.adj[s] >= 0).tolist():
            t = int(topo.adj[s, j])
            ports.append((hs + 1 + j, sw_name[t], int(topo.hosts[t]) + 1 + int(topo.peer[s, j]),
                          int(plan.switch_lid[t])))
        switches.append((sw_hex[s], sw_name[s], hs + r, int(plan.switch_lid[s]), ports))
    return _rendered(
        _env().get_template("ibsim.net.j2"), routing=ts.routing, topology=topo.name(),
        n_switches=n, n_hosts=topo.n_hosts, n_links=len(topo.links), lmc=plan.lmc,
        switch_base=f"0x{SWITCH_GUID_BASE:016x}", hca_base=f"0x{HCA_GUID_BASE:016x}",
        hca_stride=f"0x{HCA_GUID_STRIDE:x}", limits=_ibsim_limits(topo, plan), hcas=hcas,
        switches=switches)


def _guids_doc(ts: TableSet, plan: LidPlan, names, layers, rep: dict, missing) -> dict:
    topo = ts.topo
    n, r = topo.adj.shape
    sw_hex, sw_name, hn_hex, hp_hex, h_name = names
    off = topo.host_offset
    switches = []
    for s in range(n):
        hs = int(topo.hosts[s])
        ports = [{"port": e + 1, "ib_port": e + 1, "host": int(off[s]) + e,
                  "peer": h_name[int(off[s]) + e], "peer_guid": "0x" + hp_hex[int(off[s]) + e],
                  "peer_port": 1} for e in range(hs)]
        for j in np.flatnonzero(topo.adj[s] >= 0).tolist():
            t = int(topo.adj[s, j])
            pp = int(topo.hosts[t]) + 1 + int(topo.peer[s, j])
            ports.append({"port": hs + 1 + j, "ib_port": hs + 1 + j, "switch": t,
                          "peer": sw_name[t], "peer_guid": "0x" + sw_hex[t], "peer_port": pp})
        switches.append({"id": s, "name": sw_name[s], "guid": "0x" + sw_hex[s],
                         "lid": int(plan.switch_lid[s]), "num_ports": hs + r, "ports": ports})
    step = 1 << plan.lmc
    hosts = [{"id": h, "name": h_name[h], "node_guid": "0x" + hn_hex[h],
              "port_guid": "0x" + hp_hex[h], "lid": int(plan.host_lid[h]),
              "lids": [int(plan.host_lid[h]), int(plan.host_lid[h]) + step - 1],
              "switch": s, "switch_port": p}
             for h, s, p in topo.host_table().tolist()]
    return {
        "format": "fabroute-ib-guids", "version": 1, "routing": ts.routing,
        "topology": topo.name(), "lmc": plan.lmc, "top_lid": plan.top,
        "guid_plan": {"switch_base": f"0x{SWITCH_GUID_BASE:016x}",
                      "hca_base": f"0x{HCA_GUID_BASE:016x}", "hca_stride": HCA_GUID_STRIDE,
                      "hca_port_guid": "node_guid + 1"},
        "lft_class": layers.kinds[0], "not_in_lfts": missing,
        "ibsim_limits": _ibsim_limits(topo, plan),
        "ib": dict({k: rep[k] for k in ("layers", "sls_used", "vls_used", "vl_max",
                                        "data_vls", "shortcuts", "cdg")},
                   seed=layers.info["seed"]),
        "switches": switches, "hosts": hosts,
    }


def _guid2lid_chunks(topo: Topology, plan: LidPlan, names) -> Chunks:
    sw_hex, _, _, hp_hex, _ = names
    step = 1 << plan.lmc
    rows = [(g, int(lid), int(lid)) for g, lid in zip(sw_hex, plan.switch_lid.tolist())]
    rows += [(g, int(lid), int(lid) + step - 1) for g, lid in zip(hp_hex, plan.host_lid.tolist())]
    return _rendered(_env().get_template("guid2lid.j2"), rows=rows)


def lft_lids(ts: TableSet, plan: LidPlan):
    """Per assigned LID (ascending): the LID, its switch, the port at that switch (0 for the
    switch itself), whether it is a host's, the switch or host id, and its layer (LID offset;
    switch LIDs use layer 0)."""
    topo = ts.topo
    n = topo.n_switches
    step = 1 << plan.lmc
    ht = topo.host_table()
    lids = np.concatenate([plan.switch_lid, (plan.host_lid[:, None] + np.arange(step)).ravel()])
    dst = np.concatenate([np.arange(n), np.repeat(ht[:, 1], step)])
    local = np.concatenate([np.zeros(n, dtype=np.int64), np.repeat(ht[:, 2], step)])
    is_host = np.concatenate([np.zeros(n, dtype=bool), np.ones(len(ht) * step, dtype=bool)])
    who = np.concatenate([np.arange(n), np.repeat(ht[:, 0], step)])
    layer = np.concatenate([np.zeros(n, dtype=np.int64), np.tile(np.arange(step), len(ht))])
    return lids, dst, local, is_host, who, layer


def lft_row(topo: Topology, lids, layers, u: int) -> np.ndarray:
    """Switch ``u``'s out port for every LID of ``lids`` (:func:`lft_lids`): layer ``k``'s
    next hop for a LID of offset ``k``; at the LID's own switch its local port (0 for the
    switch's own LID)."""
    _, dst, local, _, _, layer = lids
    port = layers.nxt[layer, u, dst].astype(np.intp) + (int(topo.hosts[u]) + 1)
    here = dst == u
    port[here] = local[here]
    return port


def _lft_chunks(ts: TableSet, plan: LidPlan, names, layers, missing, comments: bool) -> Chunks:
    topo = ts.topo
    n = topo.n_switches
    sw_hex, sw_name, _, hp_hex, h_name = names
    m = _macros("lfts.dump.j2")
    all_lids = lft_lids(ts, plan)
    lids, _, _, is_host, who, _ = all_lids
    # One rendered line per LID with a "PPP" placeholder; every switch shares the text.
    lines, offs, pos = [], np.empty(len(lids), dtype=np.int64), 0
    for k, (lid, host, w) in enumerate(zip(lids.tolist(), is_host.tolist(), who.tolist())):
        if host:
            line = str(m.entry(lid, "PPP", "Channel Adapter", hp_hex[w], h_name[w], comments))
        else:
            line = str(m.entry(lid, "PPP", "Switch", sw_hex[w], sw_name[w], comments))
        offs[k] = pos + line.index("PPP")
        pos += len(line)
        lines.append(line)
    base = np.frombuffer("".join(lines).encode("ascii"), dtype=np.uint8)
    footer = str(m.footer(plan.top)).encode()
    kinds = [f"{k}={kind}" for k, kind in enumerate(layers.kinds)]
    yield str(m.preamble(ts.routing, topo.name(), kinds, missing, plan.lmc, comments))
    # the three digit bytes of every line, and their ASCII text for ports 0..999
    at = (offs[:, None] + np.arange(3)).ravel()
    digits = np.array([list(f"{p:03d}".encode()) for p in range(1000)], dtype=np.uint8)
    for u in range(n):
        body = base.copy()
        body[at] = digits[lft_row(topo, all_lids, layers, u)].ravel()
        yield str(m.header(plan.top, int(plan.switch_lid[u]), sw_hex[u], sw_name[u])).encode()
        yield memoryview(body)
        yield footer


def _sl2vl_chunks(ts: TableSet, plan: LidPlan, names, layers) -> Chunks:
    from .iblayers import sl2vl_array

    topo = ts.topo
    n, r = topo.adj.shape
    sw_hex, sw_name, _, hp_hex, h_name = names
    m = _macros("sl2vl.dump.j2")
    vl = sl2vl_array(topo, layers.num_sls)
    vecs, vid = np.unique(vl.reshape(-1, vl.shape[-1]), axis=0, return_inverse=True)
    vid = vid.reshape(vl.shape[:-1])
    V = len(vecs)
    P = int((topo.hosts.astype(np.int64) + r).max(initial=0))
    # every distinct row text once: index ((in * (P + 1) + out) * V + vector id)
    rowtab = np.array([str(m.row(i, o, vec)) for i in range(P + 1) for o in range(P + 1)
                       for vec in vecs.tolist()], dtype=object)
    yield str(m.preamble(ts.routing, topo.name(), layers.num_sls))
    foot = str(m.node_footer())
    for s in range(n):
        hs = int(topo.hosts[s])
        # slot of every port number: management port 0 and host ports -> 0, net j -> 1 + j
        slot = np.concatenate([np.zeros(hs + 1, dtype=np.int64), 1 + np.arange(r)])
        outs = np.concatenate([np.arange(1, hs + 1), hs + 1 + np.flatnonzero(topo.adj[s] >= 0)])
        ins = np.arange(hs + r + 1)
        v = vid[s][slot[ins][:, None], slot[outs][None, :]]
        idx = ((ins[:, None] * (P + 1) + outs[None, :]) * V + v).T.ravel()
        yield str(m.node_header("Switch", sw_hex[s], int(plan.switch_lid[s]), sw_name[s]))
        yield "".join(rowtab[idx].tolist())
        yield foot
    ca_row = str(m.row(0, 0, [0] * 16)) + foot      # HCAs send on VL 0 whatever the SL
    for h in range(topo.n_hosts):
        yield str(m.node_header("Channel Adapter", hp_hex[h], int(plan.host_lid[h]), h_name[h]))
        yield ca_row


def path_sl_rows(sl: np.ndarray, src_guids: list[str],
                 dst_guids: list[str] | None = None) -> list[tuple[str, str, str, int]]:
    """Compact ``sl[src port, dst port, LMC offset]`` into first-match-wins rows
    ``(src, dst, offset, sl)`` with ``*`` wildcards: per-path exceptions (``offset`` ``*``
    when all offsets agree) first, then one ``* dst * sl`` row per destination whose paths
    all agree but differ from the most common SL, then ``* * * <most common SL>``.
    ``dst_guids`` defaults to ``src_guids``."""
    dst_guids = src_guids if dst_guids is None else dst_guids
    sl = np.asarray(sl)
    if sl.size == 0:
        return [("*", "*", "*", 0)]
    default = int(np.bincount(sl.ravel()).argmax())
    rows: list[tuple[str, str, str, int]] = []
    by_dst = []
    for d in range(sl.shape[1]):
        col = sl[:, d, :]
        first = int(col.flat[0])
        if (col == first).all():
            if first != default:
                by_dst.append(("*", dst_guids[d], "*", first))
            continue
        major = int(np.bincount(col.ravel()).argmax())
        if major != default:
            by_dst.append(("*", dst_guids[d], "*", major))
        for src in np.flatnonzero((col != major).any(axis=1)).tolist():
            offs = col[src]
            if (offs == offs[0]).all():
                rows.append((src_guids[src], dst_guids[d], "*", int(offs[0])))
            else:
                rows += [(src_guids[src], dst_guids[d], str(k), int(v))
                         for k, v in enumerate(offs.tolist()) if v != major]
    return rows + by_dst + [("*", "*", "*", default)]


def host_path_sls(layers) -> np.ndarray:
    """``uint8[H, H + N, 2**lmc]``: the SL of every (source host, destination port, LID
    offset); destination ports are the hosts, then the switches (port 0, LMC 0: layer 0's
    route, the same SL on every offset)."""
    topo = layers.ts.topo
    sw = topo.host_table()[:, 1]
    to_hosts = layers.sl[:, sw[:, None], sw[None, :]].transpose(1, 2, 0)
    to_switches = np.repeat(layers.sl[0][sw][:, :, None], layers.num_layers, axis=2)
    return np.concatenate([to_hosts, to_switches], axis=1)


def _path_sl_chunks(ts: TableSet, plan: LidPlan, names, layers) -> Chunks:
    sw_hex, _, _, hp_hex, _ = names
    if layers.num_sls == 1:
        rows = [("*", "*", "*", 0)]       # never materialise H^2 zeros
    else:
        guids = ["0x" + g for g in hp_hex]
        rows = path_sl_rows(host_path_sls(layers), guids, guids + ["0x" + g for g in sw_hex])
    return _rendered(_env().get_template("path-sl.txt.j2"), routing=ts.routing,
                     topology=ts.topo.name(), lmc=plan.lmc, rows=rows)


# ---------------------------------------------------------------------------------------------
# OpenFlow
# ---------------------------------------------------------------------------------------------
def _plan_openflow(ts: TableSet) -> list[_Job]:
    try:
        p = of.plan(ts)
    except of.OpenFlowError as e:
        raise ExportError(str(e)) from None
    n = ts.topo.n_switches
    width = max(4, len(str(n - 1)))
    jobs: list[_Job] = []
    for u in range(n):
        name = f"openflow/s{u:0{width}d}"
        jobs.append((name + ".flows", lambda u=u: _of_flows(p, u, width)))
        if p.choice is not None:
            jobs.append((name + ".groups", lambda u=u: _of_groups(p, u)))
    jobs.append(("openflow/manifest.json", lambda: _json_chunks(_of_manifest(p, width))))
    return jobs


def export_openflow(ts: TableSet, outdir) -> list[str]:
    """Write ``outdir/openflow/s<id>.flows`` (+ ``.groups``) and ``manifest.json``."""
    return _run_jobs(outdir, _plan_openflow(ts))


def _of_groups(p, u: int) -> Chunks:
    prog = of.program(p, u)
    return _rendered(_env().get_template("openflow.groups.j2"), sw=u, dpid=f"{prog.dpid:016x}",
                     routing=p.ts.routing, topology=p.ts.topo.name(),
                     groups=[(g.note, of.ofctl_group(g)) for g in prog.groups])


def _of_flows(p, u: int, width: int) -> Chunks:
    prog = of.program(p, u)
    return _rendered(
        _env().get_template("openflow.flows.j2"), sw=u, dpid=f"{prog.dpid:016x}",
        routing=p.ts.routing, topology=p.ts.topo.name(), vcs=p.V, t_choice=of.T_CHOICE,
        t_arrive=of.T_ARRIVE, t_fwd=of.T_FWD, t_egress=of.T_EGRESS,
        groups_file=(f"s{u:0{width}d}.groups" if prog.groups else None),
        flows=[of.ofctl_flow(f) for f in prog.flows])


def _of_manifest(p, width: int) -> dict:
    ts, topo = p.ts, p.ts.topo
    n = topo.n_switches
    rank = of.group_rank(topo)
    return {
        "format": "fabroute-openflow", "version": 2, "routing": ts.routing,
        "topology": topo.name(), "openflow": "1.3", "vcs": p.V,
        "tables": {"ingress": of.T_INGRESS, "choice": of.T_CHOICE, "phase_exit": of.T_ARRIVE,
                   "forward": of.T_FWD, "egress": of.T_EGRESS},
        "ingress": {"class": ts.classes[0].name, **p.ingress},
        "choice_class": None if p.choice is None else p.choice.name,
        "mac_layout": "02:GG:GG:LL:LL:EE (group, rank in group, host index)",
        "masks": {"group": of.GROUP_MASK, "switch": of.SWITCH_MASK},
        "switches": [{"id": s, "dpid": f"{of.dpid(s):016x}", "group": int(topo.group[s]),
                      "rank": int(rank[s]), "mac_prefix": p.sw_prefix[s],
                      "flows": f"s{s:0{width}d}.flows",
                      "groups": (f"s{s:0{width}d}.groups" if p.choice else None)}
                     for s in range(n)],
        "hosts": [{"id": h, "switch": s, "port": q, "mac": p.host_mac[h]}
                  for h, s, q in topo.host_table().tolist()],
    }


# ---------------------------------------------------------------------------------------------
# all formats
# ---------------------------------------------------------------------------------------------
def export_all(ts: TableSet, outdir, *, formats=FORMATS, lmc: int = 0, seed: int = 1,
               lft_comments: bool | None = None) -> dict[str, list[str]]:
    """Write every requested format into ``outdir``; returns the written paths per format.

    All formats are planned (and every :class:`ExportError` raised) before the first file is
    written, so a rejected table set leaves ``outdir`` untouched.
    """
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ExportError(f"unknown export format(s) {unknown}; expected some of {list(FORMATS)}")
    planners = {"json": lambda: _plan_json(ts),
                "ib": lambda: _plan_ib(ts, lmc, lft_comments, seed),
                "openflow": lambda: _plan_openflow(ts)}
    plans = {f: planners[f]() for f in formats}
    return {f: _run_jobs(outdir, jobs) for f, jobs in plans.items()}
