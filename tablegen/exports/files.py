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

Every text format is a Jinja2 template of the ``fabroute_templates`` package.  The bulk
ones (LFTs, SL2VL, the ibsim fabric, OpenFlow entries) define each kind of line as a macro;
it is rendered once per export with a marker in place of each field, and compiled code fills
in the fields of every line (:class:`_RowFormats`): an LFT has one line per (switch, LID),
38M lines for a 2064-router Dragonfly, and a Slim Fly q = 19 VAL has 8M OpenFlow entries,
far beyond what a template loop renders in seconds.

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

import jinja2
import numpy as np
from numba import njit, uint64

from tablegen.errors import NotExpressible
from tablegen.exports import openflow as of
from tablegen.tables import PathClass, TableSet
from tablegen.topology import Topology

__all__ = [
    "NotExpressible", "FORMATS", "HCA_GUID_BASE", "HCA_GUID_STRIDE", "LidPlan", "SWITCH_GUID_BASE",
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


def _atomic_write(path: str, chunks: Chunks | bytes | str) -> str:
    """Write ``chunks`` to ``path`` via ``<name>.tmp-<pid>`` + ``os.replace``; on any error the
    temporary file is removed and ``path`` is left as it was.  Each chunk is written before
    the next is asked for: producers reuse their buffers.  (String paths: an export writes
    thousands of files.)"""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        _write(tmp, chunks)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def _write(path: str, chunks: Chunks | bytes | str) -> str:
    """Write ``chunks`` to ``path`` in place (for a directory that is itself renamed into
    place as a whole)."""
    if isinstance(chunks, (bytes, str)):
        chunks = (chunks,)
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c.encode() if isinstance(c, str) else c)
    return path


def _run_jobs(outdir, jobs: list[_Job], atomic: bool = True) -> list[str]:
    out = os.fspath(outdir)
    write = _atomic_write if atomic else _write
    written = []
    made: set[str] = set()
    for rel, produce in jobs:
        p = os.path.join(out, rel)
        parent = os.path.dirname(p)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        written.append(write(p, produce()))
    return written


def _rendered(tmpl: jinja2.Template, **kw) -> Chunks:
    # render() joins in one go; generate() would hand f.write thousands of tiny strings
    return (tmpl.render(**kw),)


def _json_chunks(obj) -> Chunks:
    # no indent: only the compact form goes through json's C encoder (10x faster)
    return (json.dumps(obj, separators=(",", ":")), "\n")


# ---------------------------------------------------------------------------------------------
# bulk rows: a template macro rendered once, its fields filled in compiled code
# ---------------------------------------------------------------------------------------------
_DEC, _HEX, _TEXT = 0, 1, 2     # field kinds: decimal, hex digits, index into a string table
_MARK = "\x00"                  # stands for a field in a rendered macro; no format has NUL
_DIGITS = {_DEC: 19, _HEX: 16}  # most digits of a non-negative int64


def _fields(count: int) -> list[str]:
    """Markers for the arguments ``0 .. count - 1`` of a macro."""
    return [_MARK + chr(0x41 + i) for i in range(count)]


class _RowFormats:
    """Row formats for :func:`_fill_rows`: each is a template macro's text rendered with
    :func:`_fields` markers as some of its arguments, so the templates keep defining every
    line while compiled code writes millions of them (Jinja renders ~10^5 lines a second).
    ``strings`` is the table the :data:`_TEXT` fields index."""

    def __init__(self, strings: list[str]):
        self._consts: list[str] = []
        self._formats: list[tuple[list[tuple[int, int]], list[tuple[int, int, int]]]] = []
        self._pos = 0
        data = "".join(strings).encode("ascii")
        self.s_buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8)
        self.s_off = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in strings], out=self.s_off[1:])
        self._text_width = max((len(s) for s in strings), default=0)
        self._out = np.empty(0, dtype=np.uint8)

    def add(self, text, kinds: list) -> int:
        """Register ``text`` (a rendered macro); ``kinds[i]``, the kind of field ``i``, may be
        ``(kind, w)`` for numbers zero-padded to ``w`` digits.  Returns the format id."""
        first, *rest = str(text).split(_MARK)
        pieces, fields = [self._const(first)], []
        for part in rest:
            arg = ord(part[0]) - 0x41
            kind, width = kinds[arg] if isinstance(kinds[arg], tuple) else (kinds[arg], 1)
            fields.append((arg, kind, width))
            pieces.append(self._const(part[1:]))
        self._formats.append((pieces, fields))
        return len(self._formats) - 1

    def _const(self, s: str) -> tuple[int, int]:
        self._consts.append(s)
        self._pos += len(s)
        return self._pos - len(s), len(s)

    def compile(self) -> None:
        """Freeze the formats into the arrays :func:`_fill_rows` takes."""
        nf, F = len(self._formats), max(len(f) for _, f in self._formats)
        self.p_start = np.zeros((nf, F + 1), dtype=np.int64)
        self.p_len = np.zeros((nf, F + 1), dtype=np.int64)
        self.field = np.zeros((nf, max(F, 1), 3), dtype=np.int64)     # argument, kind, width
        self.nf = np.array([len(f) for _, f in self._formats], dtype=np.int64)
        self.bound = np.zeros(nf, dtype=np.int64)      # longest row of each format
        for i, (pieces, fields) in enumerate(self._formats):
            self.p_start[i, :len(pieces)], self.p_len[i, :len(pieces)] = zip(*pieces)
            if fields:
                self.field[i, :len(fields)] = fields
            self.bound[i] = sum(n for _, n in pieces) + sum(
                max(w, _DIGITS[kind]) if kind != _TEXT else self._text_width
                for _, kind, w in fields)
        self.consts = np.frombuffer("".join(self._consts).encode("ascii"), dtype=np.uint8)

    def fill(self, fmt: np.ndarray, vals: np.ndarray, at: int = -1):
        """The text of rows ``fmt[i]`` with arguments ``vals[i]``: ``(bytes, end of row i,
        where argument at of row i starts)``.  The bytes are a view of a buffer the next
        call overwrites (growing it would page-fault fresh memory, slow in VMs)."""
        need = int(self.bound[fmt].sum())
        if len(self._out) < need:
            self._out = np.empty(need, dtype=np.uint8)
        ends = np.empty(len(fmt), dtype=np.int64)
        starts = np.empty(len(fmt) if at >= 0 else 0, dtype=np.int64)
        used = _fill_rows(fmt, vals, self.p_start, self.p_len, self.field, self.nf,
                          self.consts, self.s_buf, self.s_off, self._out, ends, at, starts)
        return self._out[:used], ends, starts


@njit(cache=True)
def _fill_rows(fmt, vals, p_start, p_len, field, nf, consts, s_buf, s_off, out, ends, at,
               starts):
    """Write row ``i``: the constant pieces of format ``fmt[i]`` with its fields between them
    (argument ``vals[i, arg]``, non-negative, as :data:`_DEC`, :data:`_HEX` or
    :data:`_TEXT`).  Returns the bytes written; ``ends[i]`` is where row ``i`` ends,
    ``starts[i]`` where its argument ``at`` starts.  Positions are unsigned: with signed
    ones every store checks for a negative index, 2.5x slower."""
    pos = uint64(0)
    for i in range(fmt.shape[0]):
        f = fmt[i]
        for k in range(nf[f] + 1):
            a, n = uint64(p_start[f, k]), uint64(p_len[f, k])
            for c in range(n):
                out[pos + c] = consts[a + c]
            pos += n
            if k == nf[f]:
                break
            arg, kind, width = field[f, k, 0], field[f, k, 1], field[f, k, 2]
            if arg == at:
                starts[i] = pos
            v = vals[i, arg]
            if kind == 2:
                a, n = uint64(s_off[v]), uint64(s_off[v + 1] - s_off[v])
                for c in range(n):
                    out[pos + c] = s_buf[a + c]
                pos += n
                continue
            n, w = uint64(1), v // 10 if kind == 0 else v >> 4
            while w:
                n, w = n + uint64(1), w // 10 if kind == 0 else w >> 4
            n = max(n, uint64(width))
            last = pos + n - uint64(1)
            if kind == 0:
                for c in range(n):
                    q = v // 10
                    out[last - c] = 48 + v - 10 * q
                    v = q
            else:
                for c in range(n):
                    d = v & 15
                    out[last - c] = 48 + d if d < 10 else 87 + d
                    v >>= 4
            pos += n
        ends[i] = pos
    return pos


def _interleave(rows: _RowFormats, blocks, u0: int, u1: int, split: int = 0):
    """Format ``blocks`` of rows of switches ``u0 .. u1 - 1`` so that each switch's rows come
    together, block by block.  A block is the switch of each of its rows (ascending), the
    format id(s) and the argument columns.  Returns the text (a view of ``rows``' buffer, see
    :meth:`_RowFormats.fill`), where each switch's part starts and where its rows of the
    first ``split`` blocks end."""
    U = u1 - u0
    counts = np.stack([np.bincount(sw - u0, minlength=U) for sw, _, _ in blocks])
    start = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=0), out=start[1:])
    before = np.cumsum(counts, axis=0) - counts
    fmt = np.empty(start[-1], dtype=np.int64)
    vals = np.zeros((start[-1], max(len(cols) for _, _, cols in blocks)), dtype=np.int64)
    for k, (sw, f, cols) in enumerate(blocks):
        s = sw - u0
        first = np.cumsum(counts[k]) - counts[k]
        pos = start[s] + before[k, s] + np.arange(len(s)) - first[s]
        fmt[pos] = f
        for i, col in enumerate(cols):
            vals[pos, i] = col
    buf, ends, _ = rows.fill(fmt, vals)
    at = np.concatenate([[0], ends])
    return buf, at[start], at[start[:-1] + counts[:split].sum(axis=0)]


@njit(cache=True)
def _put_decimal(body, at, values, width):
    """Write ``values[i]`` as ``width`` decimal digits (zero-padded) at ``body[at[i]:]``."""
    for i in range(at.shape[0]):
        v = uint64(values[i])
        for c in range(width - 1, -1, -1):
            body[uint64(at[i] + c)] = 48 + v % uint64(10)
            v //= uint64(10)


def _around(macro, *args) -> tuple[bytes, bytes]:
    """``macro(*args, bulk)`` without its last argument: the text before and after it."""
    head, tail = str(macro(*args, _MARK)).split(_MARK)
    return head.encode(), tail.encode()


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
        raise NotExpressible(f"lmc={lmc}; expected 0..7")
    n, h = topo.n_switches, topo.n_hosts
    step = 1 << lmc
    host = _first_host_lid(n, lmc) + np.arange(h, dtype=np.int64) * step
    top = int(host[-1]) + step - 1 if h else n
    if top > MAX_UNICAST_LID:
        fits = [m for m in range(8) if _top_lid(n, h, m) <= MAX_UNICAST_LID]
        raise NotExpressible(f"{topo.name()}: LMC {lmc} needs LIDs up to 0x{top:X}, beyond the "
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
    """``uint64[H]`` MAC address of every host (:func:`tablegen.exports.openflow.host_macs`)."""
    return of.host_macs(topo)


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
    """LMC layers with SLs (:func:`tablegen.exports.infiniband.layers.ib_routing`) and their IB verification
    report; raises :class:`NotExpressible` when they do not fit or fail verification."""
    from tablegen.exports.infiniband.layers import ib_routing

    lid_plan(ts.topo, lmc)        # the LID budget first: cheap, and the clearest error
    layers, rep = ib_routing(ts, lmc, seed)
    if not rep["ok"]:
        raise NotExpressible(f"{ts.routing} on {ts.topo.name()} (LMC {lmc}) fails InfiniBand "
                             f"verification: {rep['errors'][0]}")
    return layers, rep


def _plan_ib(ts: TableSet, lmc: int = 0, lft_comments: bool | None = None, seed: int = 1,
             prefix: str = "ib/", ib=None) -> list[_Job]:
    topo = ts.topo
    n, r = topo.adj.shape
    nports = topo.hosts.astype(np.int64) + r
    if nports.max(initial=0) > MAX_IB_PORT:
        raise NotExpressible(f"{topo.name()}: a switch has {int(nports.max())} ports; InfiniBand "
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
    H = topo.n_hosts
    sw_hex, sw_name, hn_hex, _, h_name = names
    m = _macros("ibsim.net.j2")
    yield str(m.preamble(
        ts.routing, topo.name(), n, H, len(topo.links), plan.lmc, f"0x{SWITCH_GUID_BASE:016x}",
        f"0x{HCA_GUID_BASE:016x}", f"0x{HCA_GUID_STRIDE:x}", _ibsim_limits(topo, plan)))
    rows = _RowFormats(hn_hex + h_name + sw_hex + sw_name)
    hn, hname, sx, sname = 0, H, 2 * H, 2 * H + n          # where each string list starts
    D, T = _DEC, _TEXT
    f = _fields(6)
    hca = rows.add(m.hca(f[0], f[1], f[2], f[3], f[4], plan.lmc, f[5]), [T, T, T, D, D, D])
    sw = rows.add(m.switch(*f[:4]), [T, D, T, D])
    port = rows.add(m.port(*f[:4]), [D, T, D, D])
    rows.compile()
    h, hsw, hport = topo.host_table().T
    # HCAs first: ibsim attaches clients (and the SM) to the first port it parses
    text, _, _ = rows.fill(np.full(H, hca), np.stack(
        [hn + h, hname + h, sname + hsw, hport, plan.host_lid, plan.switch_lid[hsw]], axis=1))
    yield memoryview(text)
    s = np.arange(n)
    ns, nj = np.nonzero(topo.adj >= 0)
    t = topo.adj[ns, nj].astype(np.int64)
    first = topo.hosts.astype(np.int64) + 1           # port number of network index 0
    text, _, _ = _interleave(rows, [
        (s, sw, (sx + s, first + r - 1, sname + s, plan.switch_lid)),
        (hsw, port, (hport, hname + h, np.ones(H, dtype=np.int64), plan.host_lid)),
        (ns, port, (first[ns] + nj, sname + t, first[t] + topo.peer[ns, nj],
                    plan.switch_lid[t]))], 0, n)
    yield memoryview(text)


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


def lft_row(topo: Topology, lids, layers, u: int,
            out: np.ndarray | None = None) -> np.ndarray:
    """Switch ``u``'s out port for every LID of ``lids`` (:func:`lft_lids`): layer ``k``'s
    next hop for a LID of offset ``k``; at the LID's own switch its local port (0 for the
    switch's own LID).  The exporter writes these ports and ``fabroute verify`` compares
    the file with them."""
    _, dst, local, _, _, layer = lids
    if out is None:
        out = np.empty(len(dst), dtype=np.intp)
    _lft_ports(layers.nxt, layer, dst, local, u, int(topo.hosts[u]) + 1, out)
    return out


@njit(cache=True)
def _lft_ports(nxt, layer, dst, local, u, first, out):
    """:func:`lft_row` (``first``: the port number of ``u``'s network port 0)."""
    for i in range(dst.shape[0]):
        out[i] = local[i] if dst[i] == u else nxt[layer[i], u, dst[i]] + first


def _lft_chunks(ts: TableSet, plan: LidPlan, names, layers, missing, comments: bool) -> Chunks:
    topo = ts.topo
    n = topo.n_switches
    sw_hex, sw_name, _, hp_hex, h_name = names
    m = _macros("lfts.dump.j2")
    all_lids = lft_lids(ts, plan)
    lids, _, _, is_host, who, _ = all_lids
    # every LID's line once, port 000; per switch only the port digits change
    rows = _RowFormats(hp_hex + h_name + sw_hex + sw_name)
    lid, port, guid, name = _fields(4)
    fields = [(_HEX, 4), (_DEC, 3), _TEXT, _TEXT]
    ca = rows.add(m.entry(lid, port, "Channel Adapter", guid, name, comments), fields)
    sw = rows.add(m.entry(lid, port, "Switch", guid, name, comments), fields)
    rows.compile()
    H = topo.n_hosts
    vals = np.stack([lids, np.zeros_like(lids), np.where(is_host, who, 2 * H + who),
                     np.where(is_host, H + who, 2 * H + n + who)], axis=1)
    body, _, at = rows.fill(np.where(is_host, ca, sw), vals, at=1)
    footer = str(m.footer(plan.top)).encode()
    kinds = [f"{k}={kind}" for k, kind in enumerate(layers.kinds)]
    yield str(m.preamble(ts.routing, topo.name(), kinds, missing, plan.lmc, comments))
    ports = np.empty(len(lids), dtype=np.intp)
    for u in range(n):
        # the body is rewritten in place: each chunk is written before the next is made
        _put_decimal(body, at, lft_row(topo, all_lids, layers, u, ports), 3)
        yield str(m.header(plan.top, int(plan.switch_lid[u]), sw_hex[u], sw_name[u])).encode()
        yield memoryview(body)
        yield footer


def _sl2vl_chunks(ts: TableSet, plan: LidPlan, names, layers) -> Chunks:
    from tablegen.exports.infiniband.layers import sl2vl_array

    topo = ts.topo
    n, r = topo.adj.shape
    sw_hex, sw_name, _, hp_hex, h_name = names
    m = _macros("sl2vl.dump.j2")
    vl = sl2vl_array(topo, layers.num_sls)
    vecs, vid = _unique_rows(vl.reshape(-1, vl.shape[-1]))
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
    # HCAs send on VL 0 whatever the SL
    rows = _RowFormats(hp_hex + h_name)
    guid, lid, name = _fields(3)
    ca = rows.add(str(m.node_header("Channel Adapter", guid, lid, name)) +
                  str(m.row(0, 0, [0] * 16)) + foot, [_TEXT, _DEC, _TEXT])
    rows.compile()
    H = topo.n_hosts
    h = np.arange(H)
    text, _, _ = rows.fill(np.full(H, ca), np.stack([h, plan.host_lid, H + h], axis=1))
    yield memoryview(text)


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the ``uint8[M, 16]`` array ``a`` and each row's index among them
    (np.unique(axis=0) compares the 16 bytes as a record: 30x slower)."""
    key = np.ascontiguousarray(a).view(np.uint64)
    order = np.lexsort(key.T[::-1])
    k = key[order]
    new = np.concatenate([[True], (k[1:] != k[:-1]).any(axis=1)])
    inverse = np.empty(len(a), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return a[order[new]], inverse


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
OF_CHUNK_ROWS = 1 << 17         # flow entries formatted at a time (about 16 MB of text)


def _plan_openflow(ts: TableSet) -> list[_Job]:
    p = of.plan(ts)
    n = ts.topo.n_switches
    width = max(4, len(str(n - 1)))
    text = _OfText(p, width)
    jobs: list[_Job] = []
    for u in range(n):
        name = f"openflow/s{u:0{width}d}"
        jobs.append((name + ".flows", lambda u=u: text.flows(u)))
        if p.choice is not None:
            jobs.append((name + ".groups", lambda u=u: text.groups(u)))
    jobs.append(("openflow/manifest.json", lambda: _json_chunks(_of_manifest(p, width))))
    return jobs


def export_openflow(ts: TableSet, outdir) -> list[str]:
    """Write ``outdir/openflow/s<id>.flows`` (+ ``.groups``) and ``manifest.json``."""
    return _run_jobs(outdir, _plan_openflow(ts))


class _OfText:
    """The ``.flows`` and ``.groups`` files of every switch: the entries and groups of
    :func:`tablegen.exports.openflow.program` in its order, built as arrays for a chunk of switches
    at a time (program() makes one Python record per entry: minutes for the 8M entries of a
    Slim Fly q = 19 VAL).  Files are asked for in switch order; each chunk's text lives until
    the next chunk is made."""

    def __init__(self, p, width: int):
        topo = p.ts.topo
        self.p, self.width = p, width
        n, H = topo.n_switches, topo.n_hosts
        self.sw_str, self.grp_str = H, H + n          # where the string table's parts start
        self.rows = _RowFormats(p.host_mac + p.sw_prefix + p.grp_prefix)
        tables = {"t_ingress": of.T_INGRESS, "t_choice": of.T_CHOICE, "t_arrive": of.T_ARRIVE,
                  "t_fwd": of.T_FWD, "t_egress": of.T_EGRESS}
        m = _env().get_template("openflow.flows.j2").make_module(tables)
        self.groups_m = _env().get_template("openflow.groups.j2").make_module(tables)
        self.flows_file = m.file
        add, a, b, c = self.rows.add, *_fields(3)
        D, X, T = _DEC, _HEX, _TEXT
        ing = p.ingress
        self.f = {
            "to_host": add(m.to_host(a, b), [T, D]),
            "tag": add(m.tag(a, ing["pcp"], None if ing["choice"] else
                             of.OFPVID_PRESENT | ing["vid"]), [D]),
            "from_switch": add(m.from_switch(a), [D]),
            "choice_group": add(m.choice_group(), []),
            "arrive": add(m.arrive(a), [D]),
            "on_path": add(m.on_path(a, b), [D, T]),
            "arrive_miss": add(m.arrive_miss(), []),
            "deliver": add(m.deliver(a, b, c), [D, T, D]),
            "egress": add(m.egress(a, b, c), [D, D, D]),
            "egress_back": add(m.egress_back(a, b, c), [D, D, D]),
        }
        for leave in (False, True):
            self.f["to_group", leave] = add(m.to_group(a, b, leave, c), [D, T, D])
            self.f["to_switch", leave] = add(m.to_switch(a, b, leave, c), [D, T, D])
            self.f["to_target", leave] = add(m.to_target(a, leave, b), [D, D])
        self.rows.compile()
        # buffers of their own: their text is written with the flows'
        self.bucket_rows, self.choice_rows = _RowFormats([]), _RowFormats([])
        if p.choice is not None:
            self.f["bucket"] = self.bucket_rows.add(self.groups_m.bucket(a, b, p.choice.vc_base),
                                                    [D, D])
            self.bucket_rows.compile()
            self.f["choice"] = self.choice_rows.add(m.choice(*_fields(4)), [D, X, X, D])
            self.choice_rows.compile()
        self._slots: dict[bytes, tuple[int, np.ndarray]] = {}
        self._choice_text: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._choice_buf = np.empty(0, dtype=np.uint8)
        self._chunk: tuple[int, int, dict] = (0, 0, {})
        r = topo.radix
        per_switch = (3 * int(topo.hosts.max(initial=0)) + r * (1 + 2 * p.V)
                      + n * (1 + len(p.phase_tables) + len(p.vid_targets))
                      + (len(p.on_path[0]) // n if p.on_path else 0))
        self.chunk = max(1, OF_CHUNK_ROWS // per_switch)

    def flows(self, u: int) -> Chunks:
        p = self.p
        head, tail = _around(self.flows_file, u, f"{of.dpid(u):016x}", p.ts.routing,
                             p.ts.topo.name(), p.V,
                             f"s{u:0{self.width}d}.groups" if p.choice else None)
        u0, _, text = self._text(u)
        buf, start, mid, choice = text["flows"]
        i = u - u0
        view = memoryview(buf)
        return (head, view[start[i]:mid[i]], *self._choice_rows(*choice[i]),
                view[mid[i]:start[i + 1]], tail)

    def groups(self, u: int) -> Chunks:
        p = self.p
        head, tail = _around(self.groups_m.file, u, f"{of.dpid(u):016x}", p.ts.routing,
                             p.ts.topo.name(), p.choice.name)
        u0, _, text = self._text(u)
        buf, start, _ = text["groups"]
        return head, memoryview(buf)[start[u - u0]:start[u - u0 + 1]], tail

    def _text(self, u: int) -> tuple[int, int, dict]:
        """The chunk of switches holding ``u``: first and last + 1 switch, and per kind its
        text (see :meth:`_make`)."""
        u0, u1, _ = self._chunk
        if not u0 <= u < u1:
            u0, u1 = u, min(self.p.ts.topo.n_switches, u + self.chunk)
            self._chunk = u0, u1, self._make(u0, u1)
        return self._chunk

    def _make(self, u0: int, u1: int) -> dict:
        """Text of switches ``u0 .. u1 - 1``: the flows' bytes, where each switch's part
        starts and where its source-choice entries go, and those entries per switch (layout
        and VIDs); the groups' bytes and where each switch's part starts."""
        flows, choice, buckets = self._blocks(u0, u1)
        text = {"flows": (*_interleave(self.rows, flows, u0, u1, 3), choice)}
        if buckets:
            text["groups"] = _interleave(self.bucket_rows, buckets, u0, u1)
        return text

    def _choice_rows(self, key: bytes | None = None, vid=None) -> tuple:
        """A switch's source-choice entries: those of the first switch with the same slots
        (``key``), formatted once, with the VIDs ``vid`` written over theirs — 8M of a Slim
        Fly q = 19 VAL export's 9M entries.  ``vlan_vid`` values are 0x1000 | VID, VID <=
        4094: always four digits."""
        if key is None:
            return ()
        if key not in self._choice_text:
            bits, _ = self._slots[key]
            S = len(vid) // 2
            args = np.stack([np.repeat([of.IPPROTO_UDP, of.IPPROTO_TCP], S),
                             np.tile(np.arange(S), 2), np.full(2 * S, (1 << bits) - 1), vid],
                            axis=1)
            text, _, at = self.choice_rows.fill(np.full(2 * S, self.f["choice"]), args, at=3)
            self._choice_text[key] = text.copy(), at
        text, at = self._choice_text[key]
        if len(self._choice_buf) < len(text):
            self._choice_buf = np.empty(len(text), dtype=np.uint8)
        out = self._choice_buf[:len(text)]
        out[:] = text
        _put_decimal(out, at, vid, 4)
        return (memoryview(out),)

    def _blocks(self, u0: int, u1: int):
        """The rows of :func:`tablegen.exports.openflow.program` for switches ``u0 .. u1 - 1``, block
        by block in its order, but for the source choice's (after the first three blocks):
        per switch its slot layout and VIDs (:meth:`_choice_rows`); and the groups'
        buckets."""
        p, f = self.p, self.f
        ts, topo = p.ts, p.ts.topo
        n, G = topo.n_switches, topo.n_groups
        grp = topo.group.astype(np.int64)
        pn = topo.hosts.astype(np.int64) + 1          # port number of network index 0
        sws = np.arange(u0, u1)
        off = topo.host_offset
        h = np.arange(off[u0], off[u1])
        hsw = np.repeat(sws, topo.hosts[u0:u1])
        hport = h - off[hsw] + 1
        ns, nj = np.nonzero(topo.adj[u0:u1] >= 0)
        ns += u0
        blocks, buckets = [], []

        def put(sw, fmt, *cols):
            blocks.append((sw, fmt, cols))

        # 0 ingress
        put(hsw, f["to_host"], h, hport)
        put(hsw, f["tag"], hport)
        put(ns, f["from_switch"], pn[ns] + nj)
        # 1 source choice
        bk = {}
        for c in {id(c): c for c in [p.choice, *p.vid_targets] if c is not None}.values():
            if c is p.choice or c.inter == "switch-3h":
                bk[c.name] = [of.buckets(p, u, c) for u in range(u0, u1)]
        choice = [()] * (u1 - u0)
        if p.choice is not None:
            choice, (t, w) = self._choice(bk[p.choice.name])
            put(sws, f["choice_group"])
            buckets.append((np.repeat(sws, [len(x) for x in t]), f["bucket"],
                            (np.concatenate(w), of.OFPVID_PRESENT | (1 + np.concatenate(t)))))
        # 2 phase exit
        for c in p.vid_targets:
            if c.exit in ("reach", "on_path"):
                put(sws, f["arrive"], 1 + (sws if c.target0 == "switch" else grp[sws]))
            if c.exit == "on_path" and p.on_path is not None:
                ou, oi, od = p.on_path
                lo, hi = np.searchsorted(ou, [u0, u1])
                keep = oi[lo:hi] != ou[lo:hi]
                put(ou[lo:hi][keep].astype(np.int64), f["on_path"], 1 + oi[lo:hi][keep],
                    self.sw_str + od[lo:hi][keep])
        put(sws, f["arrive_miss"])
        # 3 forwarding
        for vid in p.deliver_vids:
            put(hsw, f["deliver"], np.full(len(h), vid), h, hport)
        for vid, use, maj, er, ec, split, table, leave in p.phase_tables:
            s, g = np.nonzero(use[u0:u1])
            s += u0
            j = maj[s, g]
            lv = leave[s, j] if leave is not None else np.zeros(len(s), dtype=bool)
            put(s, np.where(lv, f["to_group", True], f["to_group", False]), np.full(len(s), vid),
                self.grp_str + g, pn[s] + j)
            s, d = er[split[u0]:split[u1]], ec[split[u0]:split[u1]]
            j = table[s, d].astype(np.int64)
            lv = leave[s, j] if leave is not None else np.zeros(len(s), dtype=bool)
            put(s, np.where(lv, f["to_switch", True], f["to_switch", False]),
                np.full(len(s), vid), self.sw_str + d, pn[s] + j)
        for c in p.vid_targets:
            if c.inter == "switch-3h":
                s = np.repeat(sws, [len(b) for b in bk[c.name]])
                t = np.array([x[0] for b in bk[c.name] for x in b], dtype=np.int64)
            elif c.target0 == "group":
                s, t = np.nonzero(np.arange(G)[None, :] != grp[sws][:, None])
                s += u0
            else:
                s, t = np.nonzero(np.arange(n)[None, :] != sws[:, None])
                s += u0
            j = ts.tables[c.table0][s, t].astype(np.int64)
            lv = (np.ones(len(s), dtype=bool) if c.exit == "first_hop" else
                  ts.exit_port[s, j] if c.exit == "port" else np.zeros(len(s), dtype=bool))
            put(s, np.where(lv, f["to_target", True], f["to_target", False]), 1 + t, pn[s] + j)
        # 4 egress: per port and VC, the back-out entry right after (Valiant phase 0 only)
        V, K = p.V, 2 if p.vid_targets else 1
        s = np.repeat(ns, V * K)
        port = np.repeat(pn[ns] + nj, V * K)
        v = np.tile(np.repeat(np.arange(V), K), len(ns))
        nv = np.minimum(v + np.repeat(ts.vc_inc[ns, nj].astype(np.int64), V * K), V - 1)
        back = np.tile(np.arange(K), len(ns) * V) == 1
        put(s, np.where(back, f["egress_back"], f["egress"]), port, v, nv)
        return blocks, choice, buckets

    def _choice(self, bks) -> tuple:
        """Per switch (buckets ``bks``): its source-choice slot layout (the key of
        ``self._slots``) and VIDs, UDP then TCP; and the buckets' targets and weights."""
        tw = [np.array(b, dtype=np.int64).reshape(-1, 2) for b in bks]
        same: dict[bytes, list[int]] = {}
        for i, x in enumerate(tw):
            same.setdefault(x[:, 1].tobytes(), []).append(i)
        choice: list = [None] * len(bks)
        for key, members in same.items():
            if key not in self._slots:
                bits, owner = of.choice_slots(tw[members[0]][:, 1].tolist())
                self._slots[key] = bits, np.array(owner, dtype=np.int64)
            owner = self._slots[key][1]
            t = np.stack([tw[i][:, 0] for i in members])
            vid = np.tile(of.OFPVID_PRESENT | (1 + t[:, owner]), 2)
            for k, i in enumerate(members):
                choice[i] = key, vid[k]
        return choice, ([x[:, 0] for x in tw], [x[:, 1] for x in tw])


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
                "ib": lambda: _plan_ib(ts, lmc, lft_comments, seed),
                "openflow": lambda: _plan_openflow(ts)}
    plans = {f: planners[f]() for f in formats}
    return {f: _run_jobs(outdir, jobs, atomic) for f, jobs in plans.items()}
