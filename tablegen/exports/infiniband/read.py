"""Read an exported InfiniBand table set back: ``fabric.net``, ``guids.json``, ``guid2lid``,
``lfts.dump``, ``sl2vl.dump`` and ``path-sl.txt`` (``docs/formats.md``), each parsed and checked
against the others; the parsers also read what OpenSM and ibsim print (``dump_fts``, SL2VL
tables).  Whatever does not fit is :class:`~tablegen.errors.BadInput` naming the file and the
line.  ``fabroute verify`` proves the files through :mod:`tablegen.exports.infiniband.verify_files`;
:mod:`emulation.ibsim.apply` loads them into OpenSM and compares what it reads back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tablegen.errors import BadInput
from tablegen.exports.infiniband.limits import IB_DATA_VLS, MAX_UNICAST_LID, NO_PORT, VL_DROP
from tablegen.exports.inputs import read_bytes, read_lines

IB_FILES = ("fabric.net", "guids.json", "guid2lid", "lfts.dump", "sl2vl.dump", "path-sl.txt")
# the lines of the files and of OpenSM's dumps that the parsers key on
LFT_HEADER = re.compile(rb"Unicast lids \[[^\]]*\] of switch .*? guid (0x[0-9a-fA-F]+)")
SL2VL_NODE = re.compile(r"(Switch|Channel Adapter|Router) (0x[0-9a-fA-F]+)\b")
NET_GUID = re.compile(r"(?:switchguid|caguid)=(0x[0-9a-fA-F]+)")
NET_NODE = re.compile(r'(Switch|Hca)\s+\d+\s+"([^"]+)"')
NET_PORT = re.compile(r'\[(\d+)\]\s+"([^"]+)"\[(\d+)\]')
MAX_IB_FILE_BYTES = 16 << 30     # LFTs of the largest supported fabric with comments: ~3 GiB


def _read(path: Path) -> str:
    """A file of the set as text: a regular file, at most :data:`MAX_IB_FILE_BYTES`."""
    return read_bytes(path, MAX_IB_FILE_BYTES).decode(errors="replace")


# -- parsing -----------------------------------------------------------------------------------
ABSENT = -1          # an LftTable cell whose LID the switch's table does not list


@dataclass(eq=False)
class LftTable:
    """The LFTs of a fabric as one array: ``ports[k, lid]`` is the out port switch
    ``guids[k]`` lists for ``lid``, :data:`ABSENT` where it lists none.  Two bytes per
    (switch, LID): 36 MB for 1,024 switches and 17,408 LIDs.  Loading DSN-F 1,024's 2.1 M
    entries takes 65 MB this way, 552 MB as ``{GUID: {LID: port}}`` dicts."""
    guids: list[int]
    ports: np.ndarray                 # int16[len(guids), widest LID + 1]

    def __post_init__(self):
        self._at = {g: k for k, g in enumerate(self.guids)}

    def __len__(self) -> int:
        return len(self.guids)

    def __iter__(self):
        return iter(self.guids)

    def __contains__(self, g) -> bool:
        return g in self._at

    def row(self, g: int) -> np.ndarray | None:
        """Switch ``g``'s cells (a view), None when the table has no section for it."""
        k = self._at.get(g)
        return None if k is None else self.ports[k]

    def forwarding(self, g: int, width: int) -> np.ndarray:
        """What switch ``g`` does with LIDs ``0 .. width - 1``: its port, :data:`NO_PORT` where
        it lists none or has no section (the switch drops those)."""
        row = self.row(g)
        return _filled(np.empty((0,), np.int16) if row is None else row, width, NO_PORT)

    def dense(self, width: int, fill: int) -> np.ndarray:
        """``int16[len(self), width]``: every section's ports for LIDs ``0 .. width - 1`` (rows
        in :attr:`guids` order), ``fill`` where a section lists none."""
        return _filled(self.ports, width, fill)

    @property
    def entries(self) -> int:
        """The entries the sections list."""
        return int(np.count_nonzero(self.ports != ABSENT))

    @property
    def top(self) -> int:
        """The largest LID any section lists (0 for none)."""
        cols = np.flatnonzero((self.ports != ABSENT).any(axis=0))
        return int(cols[-1]) if len(cols) else 0

    @classmethod
    def of_rows(cls, rows: dict[int, np.ndarray]) -> LftTable:
        """The table of ``{GUID: int16 cells}`` (rows of any widths)."""
        width = max((len(r) for r in rows.values()), default=1)
        ports = np.full((len(rows), width), ABSENT, dtype=np.int16)
        for k, r in enumerate(rows.values()):
            ports[k, :len(r)] = r
        return cls(list(rows), ports)


def _filled(cells: np.ndarray, width: int, fill: int) -> np.ndarray:
    """``cells`` cut or padded to ``width`` columns, :data:`ABSENT` and the padding ``fill``."""
    out = np.full(cells.shape[:-1] + (width,), fill, dtype=np.int16)
    w = min(width, cells.shape[-1])
    out[..., :w] = np.where(cells[..., :w] == ABSENT, fill, cells[..., :w])
    return out


def parse_lfts(lines: Iterable[bytes], what: str) -> LftTable:
    """The :class:`LftTable` of an ``opensm-lfts.dump``-style file or of ``dump_fts -n``
    output (same section header / ``0x<lid> <port>`` lines), given as lines
    (:func:`~tablegen.exports.inputs.read_lines` streams a file).  LID 0 is skipped (dump_fts
    -a prints it; it is no unicast LID).  Memory: the table plus one section's entries."""
    rows: dict[int, np.ndarray] = {}
    guid, lids, ports = None, [], []

    def close():
        if guid is not None:
            row = np.full(max(lids, default=0) + 1, ABSENT, dtype=np.int16)
            row[lids] = ports
            rows[guid] = row

    for no, line in enumerate(lines, 1):
        if line.startswith(b"0x"):
            if guid is None:
                raise BadInput(f"{what}:{no}: LFT entry before any 'Unicast lids' switch line")
            parts = line.split(None, 2)
            try:
                lid, port = int(parts[0], 16), int(parts[1])
            except (ValueError, IndexError):
                raise BadInput(f"{what}:{no}: {line[:60]!r} is no '0x<lid> <port>' "
                               f"entry") from None
            if not 0 <= lid <= MAX_UNICAST_LID or not 0 <= port <= NO_PORT:
                raise BadInput(f"{what}:{no}: {line[:60]!r}: expected a unicast LID (at most "
                               f"0x{MAX_UNICAST_LID:04X}) and a port 0..{NO_PORT}")
            if lid:
                lids.append(lid)
                ports.append(port)
        elif line.startswith(b"Unicast lids"):
            m = LFT_HEADER.match(line)
            if m is None:
                raise BadInput(f"{what}:{no}: switch line without ' guid 0x<hex>'")
            close()
            guid, lids, ports = int(m.group(1), 16), [], []
            if guid in rows:
                raise BadInput(f"{what}:{no}: switch 0x{guid:016x} listed twice")
    close()
    return LftTable.of_rows(rows)


def parse_sl2vl(text: str, what: str) -> dict[int, tuple[str, dict[tuple[int, int], tuple]]]:
    """``{GUID: (kind, {(in, out): (VL of SL0, ..., VL of SL15)})}`` from an
    ``opensm-sl2vl.dump``-style file (kind ``Switch`` / ``Channel Adapter``; the GUID is the
    switch's node GUID or the CA's port GUID)."""
    out: dict[int, tuple[str, dict]] = {}
    cur: dict | None = None
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s[0].isdigit():
            if cur is None:
                raise BadInput(f"{what}:{no}: SL2VL row before any 'Switch 0x…' / "
                               f"'Channel Adapter 0x…' line")
            head, sep, tail = s.partition(":")
            try:
                i, o = (int(x) for x in head.split())
                vls = tuple(int(x) for x in tail.split())
                if not sep or len(vls) != 16:
                    raise ValueError
            except ValueError:
                raise BadInput(f"{what}:{no}: {s[:60]!r} is no '<in> <out> : <16 VLs>' row") \
                    from None
            if (i, o) in cur:
                raise BadInput(f"{what}:{no}: row ({i}, {o}) listed twice")
            cur[(i, o)] = vls
            continue
        m = SL2VL_NODE.match(s)
        if m is None:
            raise BadInput(f"{what}:{no}: {s[:60]!r} is neither a node line nor an SL2VL row")
        guid = int(m.group(2), 16)
        if guid in out:
            raise BadInput(f"{what}:{no}: node 0x{guid:016x} listed twice")
        cur = {}
        out[guid] = (m.group(1), cur)
    return out


@dataclass
class PathSlRules:
    """``path-sl.txt``: ``src dst offset|* sl`` lines, first match wins.  Indexed like the
    plugin does it: per wildcard class (src/dst exact or ``*``) a dict from the (src, dst) key
    to that key's rules in file order.  Where no rule matches, the SL matrix: ``group`` lines
    put ports in groups (``group_of``, port GUID -> group), ``row`` lines give a source
    group's SL toward every destination group (``matrix``, group -> ``uint8`` array)."""
    rules: list[tuple[int | None, int | None, int | None, int]] = field(default_factory=list)
    index: list[dict] = field(default_factory=lambda: [{}, {}, {}, {}])
    group_of: dict[int, int] = field(default_factory=dict)
    matrix: dict[int, np.ndarray] = field(default_factory=dict)
    _dense: tuple | None = field(default=None, repr=False, compare=False)

    def add(self, src, dst, off, sl):
        idx = len(self.rules)
        self.rules.append((src, dst, off, sl))
        cls = (src is None) * 2 + (dst is None)
        self.index[cls].setdefault((src, dst), []).append((idx, off, sl))

    def sl(self, src: int, dst: int, off: int) -> int | None:
        """The SL of the first rule matching (src port GUID, dst port GUID, LID offset), else
        the matrix's (source group, destination group) SL; None for neither."""
        best, sl = None, None
        for cls in range(4):
            key = (None if cls & 2 else src, None if cls & 1 else dst)
            for idx, o, s in self.index[cls].get(key, ()):
                if best is not None and idx >= best:
                    break
                if o is None or o == off:
                    best, sl = idx, s
                    break
        if sl is None:
            return self.matrix_sl(src, dst)
        return sl

    def matrix_sl(self, src: int, dst: int) -> int | None:
        row = self.matrix.get(self.group_of.get(src, -1))
        g = self.group_of.get(dst, -1)
        return None if row is None or not 0 <= g < len(row) else int(row[g])

    def matrix_sls(self, src_group: np.ndarray, dst_group: np.ndarray):
        """The matrix's SLs for arrays of source and destination groups (-1: a port in none),
        broadcast together: ``(uint8 SL, bool given)``; the SL is 0 where none is given.
        The dense ``G x G`` form is built at the first call (after parsing)."""
        if not self.matrix:
            shape = np.broadcast_shapes(np.shape(src_group), np.shape(dst_group))
            return np.zeros(shape, dtype=np.uint8), np.zeros(shape, dtype=bool)
        if self._dense is None:
            G = max(max(self.group_of.values(), default=0), max(self.matrix)) + 1
            sl = np.zeros((G, G), dtype=np.uint8)
            given = np.zeros((G, G), dtype=bool)
            for g, row in self.matrix.items():
                sl[g, :len(row)], given[g, :len(row)] = row[:G], True
            self._dense = sl, given
        sl, given = self._dense
        G = len(sl)
        ok = (src_group >= 0) & (dst_group >= 0) & (src_group < G) & (dst_group < G)
        g, c = np.where(ok, src_group, 0), np.where(ok, dst_group, 0)
        return sl[g, c], ok & given[g, c]

    def groups(self, guids) -> np.ndarray:
        """``int64`` group of each port GUID, -1 for a port in none."""
        return np.array([self.group_of.get(g, -1) for g in guids], dtype=np.int64)


_HEX = np.full(256, 255, dtype=np.uint8)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)
_HEX[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16, dtype=np.uint8)
MAX_GROUPS = 1 << 16


def parse_path_sl(text: str, what: str) -> PathSlRules:
    rules = PathSlRules()
    for no, line in enumerate(text.splitlines(), 1):
        toks = line.split("#", 1)[0].split()
        if not toks:
            continue
        if toks[0] in ("group", "row"):
            _matrix_line(rules, toks, line, what, no)
            continue
        try:
            if len(toks) != 4:
                raise ValueError
            src, dst = (None if t == "*" else int(t, 16) for t in toks[:2])
            off = None if toks[2] == "*" else int(toks[2], 0)
            sl = int(toks[3], 0)
            if not 0 <= sl <= 15 or (off is not None and not 0 <= off <= 127):
                raise ValueError
        except ValueError:
            raise BadInput(f"{what}:{no}: {line.strip()[:60]!r} is no "
                           f"'src_guid|* dst_guid|* offset|* sl' line (SL 0-15)") from None
        rules.add(src, dst, off, sl)
    return rules


def _matrix_line(rules: PathSlRules, toks: list[str], line: str, what: str, no: int) -> None:
    """A ``group <port GUID> <group>`` or ``row <group> <one hex SL per group>`` line."""
    try:
        if len(toks) != 3:
            raise ValueError
        if toks[0] == "group":
            guid, g = int(toks[1], 16), int(toks[2], 0)
            if not 0 <= g < MAX_GROUPS or guid in rules.group_of:
                raise ValueError
            rules.group_of[guid] = g
            return
        g = int(toks[1], 0)
        row = _HEX[np.frombuffer(toks[2].encode("ascii"), dtype=np.uint8)]
        if not 0 <= g < MAX_GROUPS or g in rules.matrix or len(row) > MAX_GROUPS \
                or (row == 255).any():
            raise ValueError
        rules.matrix[g] = row
    except (ValueError, UnicodeEncodeError):
        raise BadInput(f"{what}:{no}: {line.strip()[:60]!r} is no 'group port_guid group' or "
                       f"'row group hex_sls' line (groups 0-{MAX_GROUPS - 1}, each listed "
                       f"once)") from None


# -- the input: files, cross-checks -------------------------------------------------------------
@dataclass
class IbFiles:
    dir: Path                       # the directory holding the files (DIR or DIR/ib)
    guids: dict
    lmc: int
    lfts: LftTable
    sl2vl: dict
    path_sl: PathSlRules
    radix: dict[int, int]           # switch GUID -> ports
    ca_ports: dict[int, dict]       # CA port GUID -> host record
    port_guids: set[int]            # switch GUIDs + CA port GUIDs
    net: dict[int, tuple[str, dict[int, tuple[int, int]]]]   # parse_net(fabric.net)


def find_ib_dir(d, required: bool = True) -> Path | None:
    """``d`` itself when it holds the files (``fabroute ib export``), else ``d/ib``
    (``fabroute tables``); None when neither holds any and not ``required``."""
    d = Path(d)
    if not d.is_dir():
        raise BadInput(f"DIR={d} is not a directory; expected the --out of 'fabroute ib export' "
                       f"or 'fabroute tables'")
    for cand in (d, d / "ib"):
        if (cand / "fabric.net").is_file() or (cand / "lfts.dump").is_file():
            missing = [f for f in IB_FILES if not (cand / f).is_file()]
            if missing:
                raise BadInput(f"{cand} lacks {', '.join(missing)} (an incomplete InfiniBand "
                               f"export)")
            return cand
    if not required:
        return None
    raise BadInput(f"DIR={d} holds no InfiniBand export (missing fabric.net, lfts.dump, ... in "
                   f"DIR or DIR/ib); expected 'fabroute ib export SPEC --routing R --out DIR' or "
                   f"'fabroute tables SPEC --routing R --out DIR' with the ib format")


def load_guids(path: Path) -> dict:
    try:
        guids = json.loads(_read(path))
        if guids.get("format") != "fabroute-ib-guids":
            raise ValueError(f"format {guids.get('format')!r}")
        for key in ("switches", "hosts", "ibsim_limits"):
            if key not in guids:
                raise KeyError(key)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise BadInput(f"{path} is no fabroute-ib-guids file ({type(e).__name__}: {e})") from None
    if not guids["hosts"]:
        raise BadInput(f"{path}: no HCA to attach OpenSM to")
    return guids


def check_lid_space(path: Path, guids: dict, lmc: int) -> None:
    if not 0 <= lmc <= 7:
        raise BadInput(f"{path}: LMC {lmc} is outside InfiniBand's 0..7")
    n_sw, n_h, step = len(guids["switches"]), len(guids["hosts"]), 1 << lmc
    first = -(-(n_sw + 1) // step) * step           # the first aligned LID after the switches
    top = first + n_h * step - 1
    if top > MAX_UNICAST_LID:
        fit = max(l for l in range(8) if -(-(n_sw + 1) // (1 << l)) * (1 << l)
                  + n_h * (1 << l) - 1 <= MAX_UNICAST_LID) \
            if n_sw + n_h < MAX_UNICAST_LID else None
        raise BadInput(f"{path}: LMC {lmc} needs LIDs up to 0x{top:04x} ({n_h} HCAs x {step} LIDs "
                       f"after {n_sw} switches) but unicast LIDs end at 0x{MAX_UNICAST_LID:04X}"
                       + (f"; LMC {fit} fits" if fit is not None else ""))
    for h in guids["hosts"]:
        lo, hi = h.get("lids", [h["lid"], h["lid"] + step - 1])
        if lo != h["lid"] or hi - lo + 1 != step or lo % step or hi > MAX_UNICAST_LID:
            raise BadInput(f"{path}: host {h['name']} has LIDs {lo}..{hi}; LMC {lmc} needs "
                           f"{step} LIDs from a multiple of {step}, up to "
                           f"0x{MAX_UNICAST_LID:04X}")


def parse_net(text: str, what: str) -> dict[int, tuple[str, dict[int, tuple[int, int]]]]:
    """``{node GUID: (kind, {port: (peer node GUID, peer port)})}`` from an ibsim ``net`` file
    whose records each follow a ``switchguid=`` / ``caguid=`` line (kind ``Switch`` /
    ``Hca``) — the wiring ibsim simulates, hence what a packet really crosses."""
    nodes: dict[int, tuple[str, dict]] = {}
    by_name: dict[str, int] = {}
    links: list[tuple[int, int, int, str, int]] = []
    guid = cur = None
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if m := NET_GUID.match(s):
            guid = int(m.group(1), 16)
        elif m := NET_NODE.match(s):
            if guid is None:
                raise BadInput(f"{what}:{no}: {m.group(1)} record without a guid= line before it")
            if guid in nodes:
                raise BadInput(f"{what}:{no}: node 0x{guid:016x} listed twice")
            nodes[guid] = (m.group(1), {})
            by_name[m.group(2)] = cur = guid
            guid = None
        elif m := NET_PORT.match(s):
            if cur is None:
                raise BadInput(f"{what}:{no}: port line before any Switch / Hca record")
            links.append((no, cur, int(m.group(1)), m.group(2), int(m.group(3))))
    for no, g, port, peer, peer_port in links:
        if peer not in by_name:
            raise BadInput(f"{what}:{no}: port {port} of 0x{g:016x} leads to {peer!r}, which is "
                           f"no node of this file")
        nodes[g][1][port] = (by_name[peer], peer_port)
    return nodes


def load_ib_files(d, *, lfts_file=None, sl2vl_file=None, path_sl_file=None) -> IbFiles:
    """Read and cross-check the files of ``d`` (or the override files), raising
    :class:`BadInput` on anything OpenSM would silently ignore or mis-program."""
    ib = find_ib_dir(d)
    guids = load_guids(ib / "guids.json")
    lmc = int(guids.get("lmc", 0))
    check_lid_space(ib / "guids.json", guids, lmc)
    try:
        radix = {int(s["guid"], 16): int(s["num_ports"]) for s in guids["switches"]}
        ca_ports = {int(h["port_guid"], 16): h for h in guids["hosts"]}
        ca_nodes = {int(h["node_guid"], 16) for h in guids["hosts"]}
    except (KeyError, ValueError, TypeError) as e:
        raise BadInput(f"{ib / 'guids.json'}: switch/host record without {e}") from None
    net = parse_net(_read(ib / "fabric.net"), str(ib / "fabric.net"))
    want = set(radix) | ca_nodes
    if net.keys() != want:
        extra, lack = sorted(net.keys() - want), sorted(want - net.keys())
        raise BadInput(f"{ib / 'fabric.net'} and {ib / 'guids.json'} describe different fabrics: "
                       + (f"0x{extra[0]:016x} ({len(extra)} GUIDs) only in fabric.net" if extra
                          else f"0x{lack[0]:016x} ({len(lack)} GUIDs) not in fabric.net"))
    ports = set(radix) | set(ca_ports)
    check_guid2lid(ib / "guid2lid", ports)

    lf = Path(lfts_file) if lfts_file is not None else ib / "lfts.dump"
    sf = Path(sl2vl_file) if sl2vl_file is not None else ib / "sl2vl.dump"
    pf = Path(path_sl_file) if path_sl_file is not None else ib / "path-sl.txt"
    for f in (lf, sf, pf):
        if not f.is_file():
            raise BadInput(f"{f} does not exist")
    lfts = check_lfts(lf, radix, guids)
    sl2vl = check_sl2vl(sf, guids, radix, ca_ports)
    rules = parse_path_sl(_read(pf), str(pf))
    for no, (src, dst, off, _) in enumerate(rules.rules):
        for g, what in ((src, "source"), (dst, "destination")):
            if g is not None and g not in ports:
                raise BadInput(f"{pf}: rule {no + 1}: {what} 0x{g:016x} is no port of this fabric "
                               f"(guids.json: switch GUIDs and HCA port GUIDs)")
        if off is not None and off >= 1 << lmc:
            raise BadInput(f"{pf}: rule {no + 1}: LID offset {off} but LMC {lmc} gives "
                           f"offsets 0..{(1 << lmc) - 1}")
    stray = next((g for g in rules.group_of if g not in ports), None)
    if stray is not None:
        raise BadInput(f"{pf}: group of 0x{stray:016x}, which is no port of this fabric "
                       f"(guids.json: switch GUIDs and HCA port GUIDs)")
    return IbFiles(ib, guids, lmc, lfts, sl2vl, rules, radix, ca_ports, ports, net)


def check_guid2lid(path: Path, ports: set[int]) -> None:
    for no, line in enumerate(_read(path).splitlines(), 1):
        toks = line.split()
        if not toks or toks[0].startswith("#"):
            continue
        try:
            g = int(toks[0], 16)
        except ValueError:
            raise BadInput(f"{path}:{no}: {line[:60]!r} is no '<guid> <lid> <lid>' line") from None
        if g not in ports:
            raise BadInput(f"{path}:{no}: 0x{g:016x} is no port of this fabric (guids.json)")


def fabric_lids(guids: dict) -> dict[int, str]:
    """Every LID guids.json assigns (each switch's, each HCA's 2^LMC) -> its node's name."""
    step = 1 << int(guids.get("lmc", 0))
    lids = {int(sw["lid"]): sw["name"] for sw in guids["switches"]}
    for h in guids["hosts"]:
        lids.update((int(h["lid"]) + k, h["name"]) for k in range(step))
    return lids


def check_lfts(path: Path, radix: dict[int, int], guids: dict) -> LftTable:
    """Every switch must list every LID of the fabric, each with a real port: OpenSM's file
    engine sets what a file omits to 255 (no port), and a read-back cannot tell that from a
    file that said 255, so a gap or a 255 would pass the comparison while dropping traffic.
    The file is read line by line (:func:`parse_lfts`); the checks are per switch row."""
    lfts = parse_lfts(read_lines(path, MAX_IB_FILE_BYTES), str(path))
    alien = [g for g in lfts if g not in radix]
    if alien:
        raise BadInput(f"{path}: switch 0x{alien[0]:016x} is not in this fabric (guids.json; "
                       f"{len(alien)} such switches: a file of another fabric?)")
    want = fabric_lids(guids)
    width = max(lfts.ports.shape[1], max(want, default=0) + 1)
    wanted = np.zeros(width, dtype=bool)
    wanted[list(want)] = True
    for g in lfts:
        row = lfts.row(g)
        listed = np.zeros(width, dtype=bool)
        listed[:len(row)] = row != ABSENT
        bad = np.flatnonzero((row != ABSENT) & (row > radix[g]))
        if len(bad):
            lid, p = int(bad[0]), int(row[bad[0]])
            if p == NO_PORT:
                raise BadInput(f"{path}: switch 0x{g:016x} LID 0x{lid:04x} -> port {NO_PORT} "
                               f"(no port); expected a port 0..{radix[g]}: every LID needs a "
                               f"route")
            raise BadInput(f"{path}: switch 0x{g:016x} LID 0x{lid:04x} -> port {p} is beyond "
                           f"its {radix[g]} ports")
        lack = np.flatnonzero(wanted & ~listed)
        if len(lack):
            raise BadInput(f"{path}: switch 0x{g:016x} has no entry for LID 0x{int(lack[0]):04x} "
                           f"({want[int(lack[0])]}) and {len(lack) - 1} more; expected one for "
                           f"each of the {len(want)} LIDs in guids.json")
        extra = np.flatnonzero(listed & ~wanted)
        if len(extra):
            raise BadInput(f"{path}: switch 0x{g:016x} LID 0x{int(extra[0]):04x} belongs to no "
                           f"port of this fabric; expected only the {len(want)} LIDs in "
                           f"guids.json")
    absent = sorted(set(radix) - set(lfts))
    if absent:
        raise BadInput(f"{path}: {len(absent)} switches of the fabric have no LFT section "
                       f"(first 0x{absent[0]:016x})")
    return lfts


def check_sl2vl(path: Path, guids: dict, radix: dict[int, int], ca_ports: dict) -> dict:
    tables = parse_sl2vl(_read(path), str(path))
    known = {"Switch": radix, "Channel Adapter": ca_ports}
    alien = [(g, kind) for g, (kind, _) in tables.items() if g not in known.get(kind, ())]
    if alien:
        g, kind = alien[0]
        raise BadInput(f"{path}: {kind.lower()} 0x{g:016x} is not in this fabric (guids.json; "
                       f"{len(alien)} such nodes: a file of another fabric?)")
    for g, (kind, rows) in tables.items():
        top = radix[g] if kind == "Switch" else 0
        for (i, o), vls in rows.items():
            if i > top or o > top:
                raise BadInput(f"{path}: {kind.lower()} 0x{g:016x} row ({i}, {o}): port "
                               f"{max(i, o)} is beyond its {top} ports"
                               + (" (a CA has the single row '0 0')" if not top else ""))
            bad = [v for v in vls if v >= IB_DATA_VLS and v != VL_DROP]
            if bad:
                raise BadInput(f"{path}: {kind.lower()} 0x{g:016x} row ({i}, {o}): VL {bad[0]} "
                               f"is beyond the {IB_DATA_VLS} data VLs of ibsim's ports (0-"
                               f"{IB_DATA_VLS - 1}, or 15 = drop)")
    for s in guids["switches"]:
        g = int(s["guid"], 16)
        if g not in tables:
            raise BadInput(f"{path}: switch 0x{g:016x} ({s['name']}) has no SL2VL section")
        kind, rows = tables[g]
        if kind != "Switch":
            raise BadInput(f"{path}: 0x{g:016x} is a switch, listed as {kind}")
        outs = sorted(p.get("ib_port", p["port"]) for p in s["ports"])
        need = [(i, o) for o in outs for i in range(radix[g] + 1)]
        lack = [k for k in need if k not in rows]
        if lack:
            raise BadInput(f"{path}: switch 0x{g:016x} ({s['name']}) lacks {len(lack)} of its "
                           f"{len(need)} (in, out) rows, first ({lack[0][0]}, {lack[0][1]})")
    for g, h in ca_ports.items():
        if g not in tables or (0, 0) not in tables[g][1]:
            raise BadInput(f"{path}: channel adapter port 0x{g:016x} ({h['name']}) has no "
                           f"SL2VL section with row '0 0'")
        if tables[g][0] != "Channel Adapter":
            raise BadInput(f"{path}: 0x{g:016x} is a channel adapter port, listed as "
                           f"{tables[g][0]}")
    return tables
