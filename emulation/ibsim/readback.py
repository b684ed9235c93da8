"""The streaming half of ``ib apply``'s read-back (:func:`emulation.ibsim.apply.read_back`):
PathRecord queries built block by block from the triples of
:func:`~emulation.ibsim.apply.path_pairs`, ONE ``fabroute_ibread`` fed by a writer thread while
its answers are parsed as they come — LFT and SL2VL answers kept as lines, PathRecord SLs
straight into an ``int8`` array — and ``path-sl.txt`` evaluated for arrays of triples
(:class:`PathSlTable`).  Nothing here holds a Python object per triple: 12 bytes a triple
(the triples), one byte (the SLs read), and blocks of :data:`CHUNK` lines.

The reader's protocol (``fabroute_ibread.c``): one answer line per query line, in order;
``P <slid> <dlid>`` is answered ``ok <sl> <dlid>`` or ``err <reason>``.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tablegen.errors import RunFailed
from tablegen.exports.infiniband.read import IbFiles

CHUNK = 1 << 16                # PathRecord queries built / answers parsed per block
#: one (source HCA index, destination index (HCAs, then switches), LID offset) triple
PAIR_DTYPE = np.dtype([("src", np.int32), ("dst", np.int32), ("off", np.int32)])
NO_SL = -1                     # a PathRecord SL not read (its query failed)


@dataclass
class Answers:
    """What one ``fabroute_ibread`` run answered, in query order: ``lines``, the LFT and SL2VL
    answer lines (a few per switch); ``path_sls``, the SL of each PathRecord triple (``int8``,
    :data:`NO_SL` where the query failed); ``path_errors``, how many failed; ``reasons``, the
    last word of the first few failed answers, by triple index."""
    lines: list[str]
    path_sls: np.ndarray
    path_errors: int = 0
    reasons: dict[int, str] = field(default_factory=dict)


def path_queries(ts: IbFiles, pairs):
    """``P <slid> <dlid>`` query lines of ``pairs``, :data:`CHUNK` lines a block as bytes,
    built by NumPy from a table of right-aligned LID digits (the reader's ``sscanf`` skips
    the padding)."""
    hosts, switches = ts.guids["hosts"], ts.guids["switches"]
    host_lid = np.array([h["lid"] for h in hosts], dtype=np.int64)
    dst_lid = np.concatenate([host_lid, np.array([s["lid"] for s in switches], np.int64)])
    top = int(dst_lid.max(initial=0)) + (1 << ts.lmc)
    w = len(str(top))
    digits = np.array([f"{v:>{w}}" for v in range(top + 1)], dtype=f"S{w}")
    digits = digits.view(np.uint8).reshape(-1, w)
    for a in range(0, len(pairs), CHUNK):
        p = pairs[a:a + CHUNK]
        buf = np.empty((len(p), 2 * w + 4), dtype=np.uint8)
        buf[:, 0] = ord("P")
        buf[:, 1] = buf[:, w + 2] = ord(" ")
        buf[:, -1] = ord("\n")
        buf[:, 2:w + 2] = digits[host_lid[p["src"]]]
        buf[:, w + 3:2 * w + 3] = digits[dst_lid[p["dst"]] + p["off"]]
        yield buf.tobytes()


def run_reader(cmd: list[str], cwd: Path, env: dict, chunks, n_lines: int, n_paths: int,
               limit: float, report: dict, keep: int = 10, tail: int = 15) -> Answers:
    """Run the reader ``cmd``, a writer thread feeding its stdin from ``chunks`` (bytes), and
    parse its stdout as it comes: ``n_lines`` answer lines kept as text, then ``n_paths``
    PathRecord answers (:func:`_path_answers`; the reasons of the first ``keep`` failures
    kept).  Killed (by its PID) after ``limit`` seconds, on errors and on Ctrl-C.
    :class:`RunFailed` when it times out, or exits with a status or answers other than once
    per query (then with the last ``tail`` lines of its stderr)."""
    ans = Answers([], np.full(n_paths, NO_SL, dtype=np.int8))
    expired, failed = threading.Event(), []
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err)

        def feed() -> None:
            try:
                for chunk in chunks:
                    proc.stdin.write(chunk)
            except (BrokenPipeError, ValueError):      # it died: its status tells why
                pass
            except BaseException as e:                 # a bug of ours: stop it, raise below
                failed.append(e)
                proc.kill()
            finally:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

        def expire() -> None:
            expired.set()
            proc.kill()

        writer = threading.Thread(target=feed, name="fabroute_ibread-stdin", daemon=True)
        timer = threading.Timer(limit, expire)
        timer.daemon = True
        try:
            writer.start()
            timer.start()
            n = _parse_answers(proc.stdout, ans, n_lines, keep)
            rc = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            writer.join()
            proc.stdout.close()
        if failed:
            raise failed[0]
        if rc == 0 and n == n_lines + n_paths:
            return ans
        if expired.is_set():
            raise RunFailed("fabroute_ibread did not finish in time", report)
        err.seek(0)
        raise RunFailed(f"fabroute_ibread exited with status {rc} after {n} of "
                        f"{n_lines + n_paths} answers",
                        dict(report, log_tail=err.read().decode(errors="replace")
                             .splitlines()[-tail:]))


def _parse_answers(out, ans: Answers, n_lines: int, keep: int) -> int:
    """Read answers from the binary stream ``out`` into ``ans``: ``n_lines`` lines as text,
    the rest block by block as PathRecord answers.  Returns the number of lines read."""
    n = 0
    while n < n_lines:
        line = out.readline()
        if not line:
            return n
        ans.lines.append(line.decode(errors="replace").rstrip("\n"))
        n += 1
    rest = b""
    while block := out.read(CHUNK * 16):
        buf = rest + block
        cut = buf.rfind(b"\n") + 1
        rest = buf[cut:]
        n += _path_answers(buf[:cut], ans, n - n_lines, keep)
    if rest:                                   # a last line without its newline
        n += _path_answers(rest + b"\n", ans, n - n_lines, keep)
    return n


def _path_answers(buf: bytes, ans: Answers, i0: int, keep: int) -> int:
    """Parse the whole lines of ``buf``, the answers of triples ``i0``, ``i0 + 1``, …, into
    ``ans``: ``ok <sl> <dlid>`` gives the SL, any other line is a failed query (the reasons
    of the first ``keep`` kept).  Vectorised; returns the number of lines."""
    if not buf:
        return 0
    b = np.frombuffer(buf + bytes(6), dtype=np.uint8)
    ends = np.flatnonzero(b == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    c = [b[starts + k].astype(np.int16) for k in range(6)]
    digit = [(x >= 48) & (x <= 57) for x in c]
    sep = [(x == 32) | (x == 10) for x in c]
    ok = (c[0] == ord("o")) & (c[1] == ord("k")) & (c[2] == 32) & digit[3]
    two = ok & digit[4] & sep[5]
    good = (ok & sep[4]) | two
    sl = np.where(two, (c[3] - 48) * 10 + c[4] - 48, c[3] - 48)
    take = max(0, min(len(ends), len(ans.path_sls) - i0))  # more answers than queries: counted
    ans.path_sls[i0:i0 + take] = np.where(good, sl, NO_SL)[:take]
    bad = np.flatnonzero(~good[:take])
    ans.path_errors += len(bad)
    for k in bad[:max(0, keep - len(ans.reasons))].tolist():
        words = buf[starts[k]:ends[k]].decode(errors="replace").split()
        ans.reasons[i0 + k] = words[-1] if words else ""
    return len(ends)


def sls_used(path_sls: np.ndarray) -> int:
    """How many distinct SLs ``path_sls`` (:func:`emulation.ibsim.apply.read_values`) holds,
    unread ones left out."""
    return int(np.count_nonzero(np.bincount(path_sls[path_sls >= 0], minlength=1)))


class PathSlTable:
    """``path-sl.txt`` (:class:`~tablegen.exports.infiniband.read.PathSlRules`: first matching
    rule wins, as the plugin applies it) as lookup tables over (source HCA index, destination
    index, offset), evaluated for arrays of triples at once: the first rule of each wildcard
    class — ``* *`` per offset, ``* dst`` per (destination, offset), ``src *`` per (source,
    offset) — in dense arrays, the ``src dst`` rules as sorted keys (binary search).  A rule
    for no triple (a switch as source, an offset beyond the LMC) is left out.  Built in
    O(rules log rules + ports x offsets)."""

    def __init__(self, ts: IbFiles):
        hosts, switches = ts.guids["hosts"], ts.guids["switches"]
        n_h = len(hosts)
        self.n_dst, self.n_off = n_h + len(switches), 1 << ts.lmc
        src_of = {int(h["port_guid"], 16): i for i, h in enumerate(hosts)}
        dst_of = dict(src_of)
        dst_of.update((int(s["guid"], 16), n_h + k) for k, s in enumerate(switches))
        rules = ts.path_sl.rules
        self.none = len(rules)                       # no rule: after every rule
        self.sl = np.array([r[3] for r in rules] + [0], dtype=np.uint8)   # the QoS level's 0
        self.dense = [np.full((n, self.n_off), self.none, dtype=np.int64)
                      for n in (1, self.n_dst, n_h)]          # * *, * dst, src *
        found: list[list] = [[], [], [], []]      # per class: (row or key, offset|-1, rule)
        for k, (src, dst, off, _) in enumerate(rules):
            i = 0 if src is None else src_of.get(src)
            j = 0 if dst is None else dst_of.get(dst)
            if i is None or j is None or (off is not None and off >= self.n_off):
                continue
            o = -1 if off is None else off
            if src is None:
                found[0 if dst is None else 1].append((j, o, k))
            else:
                found[2 if dst is None else 3].append((i if dst is None
                                                       else i * self.n_dst + j, o, k))
        for table, f in zip(self.dense, found):
            row, off, k = np.array(f, dtype=np.int64).reshape(-1, 3).T
            every = off < 0
            np.minimum.at(table, row[every], k[every][:, None])
            np.minimum.at(table, (row[~every], off[~every]), k[~every])
        key, off, k = np.array(found[3], dtype=np.int64).reshape(-1, 3).T
        every = off < 0
        self.exact_any = _first_rules(key[every], k[every])
        self.exact_off = _first_rules(key[~every] * self.n_off + off[~every], k[~every])
        # the SL matrix, for the triples no rule matches: the group of each port
        self.path_sl = ps = ts.path_sl
        self.group = np.full(self.n_dst, -1, dtype=np.int64)
        self.group[list(dst_of.values())] = ps.groups(dst_of)

    def sls(self, src, dst, off) -> tuple[np.ndarray, np.ndarray]:
        """(``uint8`` SL, whether a rule matched) of each triple of the index arrays ``src``,
        ``dst``, ``off``; no rule gives SL 0 (the QoS policy's level).  O(n log rules)."""
        src, dst, off = (np.asarray(x, dtype=np.int64) for x in (src, dst, off))
        best = np.minimum(self.dense[0][0, off], self.dense[1][dst, off])
        np.minimum(best, self.dense[2][src, off], out=best)
        key = src * self.n_dst + dst
        np.minimum(best, _lookup(*self.exact_any, key, self.none), out=best)
        np.minimum(best, _lookup(*self.exact_off, key * self.n_off + off, self.none), out=best)
        sl, matched = self.sl[best], best != self.none
        if self.path_sl.matrix:
            # hosts' indices as sources are theirs as destinations
            msl, given = self.path_sl.matrix_sls(self.group[src], self.group[dst])
            take = given & ~matched
            sl[take] = msl[take]
            matched |= take
        return sl, matched


def _first_rules(keys: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct ``keys`` and the first (lowest) rule index of each."""
    order = np.lexsort((ks, keys))
    keys, ks = keys[order], ks[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return keys[first], ks[first]


def _lookup(keys: np.ndarray, ks: np.ndarray, q: np.ndarray, none: int) -> np.ndarray:
    if not len(keys):
        return np.full(len(q), none, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[pos] == q, ks[pos], none)
