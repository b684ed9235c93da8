"""Output directories, crash-safe: every writer of a directory (``fabroute tables``,
``fabroute ib export``, the demo, the emulation's table set) goes through :func:`replaced_dir`.

The new directory is built beside the old one (``.NAME.tmp-PID``, same filesystem), every
file and directory in it is fsync'ed, and then ONE atomic step puts it in place:
``rename`` when ``NAME`` does not exist yet, ``renameat2(RENAME_EXCHANGE)`` when it does (the
old tree then sits under the temporary name and is removed).  A reader, or a crash at any
moment, sees the complete old directory or the complete new one, never a mix and never
nothing.  (Where the filesystem cannot exchange — not ext4, xfs, btrfs or tmpfs — two
renames are the fallback, and a crash between them leaves ``NAME`` missing with the old tree
in ``.NAME.old-PID``.)

One writer at a time: ``.NAME.lock`` is ``flock``'ed for the whole run; a second writer is
refused (exit 2) with the holder's PID.  Leftovers of writers that died (a ``SIGKILL`` gives
them no chance to clean up: ``.NAME.tmp-PID`` and ``.NAME.old-PID`` of a PID that is no
longer alive) are removed when the next writer takes the lock.  A directory fabroute did
not write is never replaced, one of another kind (a batch by an IB export, …) only with
``--force`` (:func:`check_out_dir`, :data:`KINDS`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from tablegen.durable import fsync_dir, fsync_file
from tablegen.errors import BadInput

# What marks a directory as fabroute's own output, which a new run may replace: the manifest,
# the index of a batch of routings, (older sets, the demo's InfiniBand directory) a table
# set's or an IB export's core files, or a comparison's JSON and chart (ib compare).
OUTPUT_MARKERS = (("manifest.json",), ("routings.json",), ("topology.json", "tables.npz"),
                  ("fabric.net", "guids.json"), ("compare.json", "compare.png"))
# The kinds of output directory, each named where its writer records it (``kind`` in
# manifest.json, routings.json or compare.json) and in refusals.  A writer replaces a
# directory of its own kind (the same command run again) and, with ``--force``, one of
# another kind; never a directory fabroute did not write.
KINDS = {"table-set": "a table set (fabroute tables with one routing, expand --out, ib import)",
         "batch": "a batch of routings (fabroute tables with several, routings.json)",
         "ib-export": "an InfiniBand export (fabroute ib export)",
         "ib-files": "InfiniBand files (the demo's ib-val-3h)",
         "ib-compare": "an ib compare output (compare.json and the engines' files)",
         "compare": "a compare output (compare.json, compare.png)",
         "demo": "the demo's output (fabroute demo)"}
_MAX_INDEX_BYTES = 64 << 20         # a manifest.json, routings.json or compare.json
NAME_MAX, PATH_MAX = 255, 4096
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2
_libc = ctypes.CDLL(None, use_errno=True)


def check_out_dir(out, what: str = "--out", kind: str | None = None,
                  force: bool = False) -> Path:
    """Refuse, before any work is done, an output path that :func:`replaced_dir` must not
    replace: empty, ``.``, ``/``, the working directory or one it lies in, a path through
    something other than a directory, a name too long for its temporary sibling, an
    existing directory that is neither empty nor fabroute's output (:func:`kind_of`; not
    even with ``force``) — replacing removes the old tree — or, unless ``force``, one of
    another kind than ``kind`` (one of :data:`KINDS`; ``None``: any fabroute output)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"output kind {kind!r}; expected one of {sorted(KINDS)}")
    if str(out).strip() in ("", "."):
        raise BadInput(f"{what} {str(out)!r}; expected a path to a new directory or to one "
                       "fabroute wrote")
    out = check_writable(out, what, lock=True)     # also refuses a path through a file
    if out.exists() and not out.is_dir():
        raise BadInput(f"{what} {out}: {out} is not a directory; expected a directory path")
    real, cwd = out.resolve(), Path.cwd().resolve()
    if real == real.parent or real == cwd or real in cwd.parents:
        raise BadInput(f"{what} {out}: it is / or holds the working directory; expected a "
                       "path to a new directory or to one fabroute wrote")
    if not (out.is_dir() and any(out.iterdir())):
        return out
    found = kind_of(out)
    if found is None:
        raise BadInput(f"{what} {out}: an existing directory fabroute did not write (no "
                       "manifest.json); expected a new path or an earlier fabroute output "
                       "(it would be replaced; --force does not replace other directories)")
    if kind is not None and found != kind and not force:
        raise BadInput(f"{what} {out}: holds {KINDS[found]}, not {KINDS[kind]}; expected a "
                       "new path, the same kind of output, or --force to replace it")
    return out


def check_writable(path, what: str, lock: bool = False) -> Path:
    """Refuse, in one line and before any work, an output ``path`` that cannot be created:
    a name longer than ``NAME_MAX`` bytes (``lock``: also its ``.NAME.lock-PID`` sibling),
    a path longer than ``PATH_MAX``, or a nearest existing ancestor this process cannot
    create entries in (read-only, another user's, or a pseudo filesystem such as ``/proc``).
    The ancestor is probed by creating and removing a file in it, because ``os.access``
    answers yes to root even where the kernel will refuse.  Returns ``Path(path)``."""
    if not str(path).strip():
        raise BadInput(f"{what} is empty; expected a path")
    path = Path(path)
    if "\0" in str(path):
        raise BadInput(f"{what} {str(path)!r}: holds a NUL byte; expected a path")
    if len(os.fsencode(path.absolute())) >= PATH_MAX:
        raise BadInput(f"{what} {str(path):.60}…: the path is longer than {PATH_MAX} bytes; "
                       "expected a shorter path")
    for part in path.parts:
        room = len(f".{part}.lock-{2**22}") if lock and part == path.name else len(part)
        if len(os.fsencode(part)) > NAME_MAX or room > NAME_MAX:
            raise BadInput(f"{what} {str(path):.60}…: the name {part:.20}… is too long "
                           f"({len(os.fsencode(part))} bytes{', with its lock file' * lock}; "
                           f"at most {NAME_MAX}); expected a shorter name")
    base = path.absolute().parent       # an existing file at path is the caller's concern
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise BadInput(f"{what} {path}: {base} is not a directory; expected a directory path")
    try:
        fd, probe = tempfile.mkstemp(prefix=".fabroute-probe-", dir=base)
    except OSError as e:
        raise BadInput(f"{what} {path}: cannot create files in {base} ({e.strerror}); "
                       "expected a writable location") from None
    os.close(fd)
    os.unlink(probe)
    return path


def check_out_file(path, what: str, in_dir: bool = False) -> Path:
    """:func:`check_writable` for an output file (a log, a status or results file): also
    refuse a path that is a directory; with ``in_dir``, one whose directory does not exist
    (a file written by one rename beside it)."""
    path = check_writable(path, what)
    if in_dir and not path.absolute().parent.is_dir():
        raise BadInput(f"{what} {path}: no directory {path.parent}; expected a file in an "
                       "existing directory")
    if path.is_dir():
        raise BadInput(f"{what} {path}: is a directory; expected a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise BadInput(f"{what} {path}: the file is not writable; expected a file this user "
                       "may write")
    return path


def kind_of(d: Path) -> str | None:
    """The kind (:data:`KINDS`) of output directory ``d``, ``None`` when fabroute did not
    write it: the ``kind`` its manifest.json, routings.json or compare.json records, else
    (outputs older than that key) inferred from its files — a manifest whose IB files lie at
    the top an IB export, any other a table set, routings.json a batch, compare.json with
    ``families`` a compare and with ``engines`` an ib compare, ``fabric.net`` and
    ``guids.json`` without a manifest the demo's IB files; a directory holding only table
    sets a batch written before routings.json, table sets and IB files the demo's."""
    d = Path(d)
    found = own_kind(d)
    if found is not None:
        return found
    kids = list(d.iterdir())
    inner = [own_kind(k) if k.is_dir() and not k.is_symlink() else None for k in kids]
    if not kids or None in inner:
        return None
    if set(inner) == {"table-set"}:
        return "batch"
    return "demo" if set(inner) == {"table-set", "ib-files"} else None


def own_kind(d: Path) -> str | None:
    """:func:`kind_of` from ``d``'s own files, not its sub-directories': ``None`` when they
    mark no fabroute output."""
    if not any(all((d / f).is_file() for f in marker) for marker in OUTPUT_MARKERS):
        return None
    for index, default in (("manifest.json", None), ("routings.json", "batch"),
                           ("compare.json", None)):
        if not (d / index).is_file():
            continue
        doc = _json(d / index)
        if isinstance(doc.get("kind"), str) and doc["kind"] in KINDS:
            return doc["kind"]
        if index == "manifest.json":
            # an IB export's files lie at the top (exports.ib.prefix ""), a set's in ib/
            return "ib-export" if (d / "fabric.net").is_file() else "table-set"
        if index == "compare.json":
            return "ib-compare" if "engines" in doc or (d / "exports").is_dir() else "compare"
        return default
    if (d / "topology.json").is_file() and (d / "tables.npz").is_file():
        return "table-set"
    return "ib-files"


def _json(path: Path) -> dict:
    """``path`` parsed as a JSON object, ``{}`` when it is not one (a damaged index still
    marks fabroute's output; its kind is then inferred)."""
    from tablegen.exports.inputs import read_bytes

    try:
        doc = json.loads(read_bytes(path, _MAX_INDEX_BYTES))
    except (BadInput, OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def fsync_tree(d: Path) -> None:
    """fsync every file and directory below ``d`` (directories after their entries)."""
    for root, dirs, files in os.walk(d, topdown=False):
        for name in files:
            fsync_file(os.path.join(root, name))
        fsync_dir(root)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock(out: Path) -> int:
    """``flock`` ``.NAME.lock`` beside ``out``; :class:`BadInput` naming the holder when
    another writer has it.  Re-checks that the locked file is still the one at the path (a
    writer that finished may have just removed it)."""
    path = out.with_name(f".{out.name}.lock")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise BadInput(f"--out {out}: another fabroute (PID {holder}) is writing it; "
                           "expected one writer at a time") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def _remove_stale(out: Path) -> None:
    """Remove ``.NAME.tmp-PID`` / ``.NAME.old-PID`` beside ``out`` whose PID is dead."""
    pat = re.compile(rf"^\.{re.escape(out.name)}\.(?:tmp|old)-(\d+)$")
    for p in out.parent.iterdir():
        m = pat.match(p.name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap ``a`` and ``b`` (``renameat2(RENAME_EXCHANGE)``); False where the
    filesystem or kernel cannot."""
    fn = getattr(_libc, "renameat2", None)
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def replaced_dir(out: Path, sync: bool = True, kind: str | None = None, force: bool = False):
    """Yield an empty sibling temporary directory; when the block succeeds it replaces
    ``out`` in one atomic step (see the module doc), when it raises (Ctrl-C included) it is
    removed and ``out`` stays as it was.  ``sync=False`` skips the fsyncs (a scratch
    directory nobody must find after a power loss).  ``kind``, ``force``: what
    :func:`check_out_dir` allows to be replaced (callers check first, before their work)."""
    out = check_out_dir(out, kind=kind, force=force)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(out)
    try:
        _remove_stale(out)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            yield tmp
            if sync:
                fsync_tree(tmp)
            if out.exists():
                if _exchange(tmp, out):     # tmp now holds the old tree
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    old = out.with_name(f".{out.name}.old-{os.getpid()}")
                    out.rename(old)
                    tmp.rename(out)
                    shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(out)
            if sync:
                fsync_dir(out.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(out.with_name(f".{out.name}.lock"))
        os.close(lock)
