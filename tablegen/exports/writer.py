"""How every export writes its files: Jinja2 templates (the top-level ``templates/``, shipped as
``tablegen.exports.templates``), bulk rows, files replaced atomically, output directories
replaced whole.

The bulk formats (LFTs, SL2VL, the ibsim fabric, OpenFlow entries) define each kind of line as
a template macro; it is rendered once per export with a marker in place of each field, and
compiled code fills in the fields of every line (:class:`RowFormats`): an LFT has one line per
(switch, LID), 38M lines for a 2064-router Dragonfly, and a Slim Fly q = 19 VAL has 8M OpenFlow
entries, far beyond what a template loop renders in seconds.

Every file is written to ``<name>.tmp-<pid>`` and renamed over ``<name>`` (``os.replace``), so a
reader never sees a half-written file (:func:`atomic_write`), unless the whole directory is
renamed into place once complete (:func:`write_in_place`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np
from numba import njit, uint64

if TYPE_CHECKING:
    import jinja2

# ---------------------------------------------------------------------------------------------
# templates and atomic files
# ---------------------------------------------------------------------------------------------
_ENV: jinja2.Environment | None = None


def template_env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        import jinja2  # here, not at start-up: every command imports this module

        _ENV = jinja2.Environment(
            loader=jinja2.PackageLoader("tablegen.exports", "templates"), autoescape=False,
            trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
            undefined=jinja2.StrictUndefined)
    return _ENV


def macros(name: str):
    return template_env().get_template(name).module


Chunks = Iterable[bytes | str]
Job = tuple[str, Callable[[], Chunks]]     # (path relative to outdir, producer of the content)


def atomic_write(path: str, chunks: Chunks | bytes | str) -> str:
    """Write ``chunks`` to ``path`` via ``<name>.tmp-<pid>`` + ``os.replace``; on any error the
    temporary file is removed and ``path`` is left as it was.  Each chunk is written before
    the next is asked for: producers reuse their buffers.  (String paths: an export writes
    thousands of files.)"""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        write_in_place(tmp, chunks)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_in_place(path: str, chunks: Chunks | bytes | str) -> str:
    """Write ``chunks`` to ``path`` in place (for a directory that is itself renamed into
    place as a whole)."""
    if isinstance(chunks, (bytes, str)):
        chunks = (chunks,)
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c.encode() if isinstance(c, str) else c)
    return path


def run_jobs(outdir, jobs: list[Job], atomic: bool = True) -> list[str]:
    out = os.fspath(outdir)
    write = atomic_write if atomic else write_in_place
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


def rendered(tmpl: jinja2.Template, **kw) -> Chunks:
    # render() joins in one go; generate() would hand f.write thousands of tiny strings
    return (tmpl.render(**kw),)


def json_chunks(obj) -> Chunks:
    # no indent: only the compact form goes through json's C encoder (10x faster)
    return (json.dumps(obj, separators=(",", ":")), "\n")


# ---------------------------------------------------------------------------------------------
# bulk rows: a template macro rendered once, its fields filled in compiled code
# ---------------------------------------------------------------------------------------------
DEC, HEX, TEXT = 0, 1, 2     # field kinds: decimal, hex digits, index into a string table
MARK = "\x00"                  # stands for a field in a rendered macro; no format has NUL
DIGITS = {DEC: 19, HEX: 16}  # most digits of a non-negative int64


def row_fields(count: int) -> list[str]:
    """Markers for the arguments ``0 .. count - 1`` of a macro."""
    return [MARK + chr(0x41 + i) for i in range(count)]


class RowFormats:
    """Row formats for :func:`fill_rows`: each is a template macro's text rendered with
    :func:`row_fields` markers as some of its arguments, so the templates keep defining every
    line while compiled code writes millions of them (Jinja renders ~10^5 lines a second).
    ``strings`` is the table the :data:`TEXT` fields index."""

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
        first, *rest = str(text).split(MARK)
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
        """Freeze the formats into the arrays :func:`fill_rows` takes."""
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
                max(w, DIGITS[kind]) if kind != TEXT else self._text_width
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
        used = fill_rows(fmt, vals, self.p_start, self.p_len, self.field, self.nf,
                          self.consts, self.s_buf, self.s_off, self._out, ends, at, starts)
        return self._out[:used], ends, starts


@njit(cache=True)
def fill_rows(fmt, vals, p_start, p_len, field, nf, consts, s_buf, s_off, out, ends, at,
               starts):
    """Write row ``i``: the constant pieces of format ``fmt[i]`` with its fields between them
    (argument ``vals[i, arg]``, non-negative, as :data:`DEC`, :data:`HEX` or
    :data:`TEXT`).  Returns the bytes written; ``ends[i]`` is where row ``i`` ends,
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


def interleave(rows: RowFormats, blocks, u0: int, u1: int, split: int = 0):
    """Format ``blocks`` of rows of switches ``u0 .. u1 - 1`` so that each switch's rows come
    together, block by block.  A block is the switch of each of its rows (ascending), the
    format id(s) and the argument columns.  Returns the text (a view of ``rows``' buffer, see
    :meth:`RowFormats.fill`), where each switch's part starts and where its rows of the
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
def put_decimal(body, at, values, width):
    """Write ``values[i]`` as ``width`` decimal digits (zero-padded) at ``body[at[i]:]``."""
    for i in range(at.shape[0]):
        v = uint64(values[i])
        for c in range(width - 1, -1, -1):
            body[uint64(at[i] + c)] = 48 + v % uint64(10)
            v //= uint64(10)


def around(macro, *args) -> tuple[bytes, bytes]:
    """``macro(*args, bulk)`` without its last argument: the text before and after it."""
    head, tail = str(macro(*args, MARK)).split(MARK)
    return head.encode(), tail.encode()
