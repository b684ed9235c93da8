"""Files that survive a crash: written beside their place, fsynced, renamed over it in one
step, the directory fsynced (POSIX ``rename`` is atomic; without the fsyncs a power loss can
leave the new name pointing at an empty file).  One implementation for every single file
fabroute writes — fabric files, ``ibnetdiscover`` captures, sweep results and plots; whole
output directories go through :mod:`tablegen.exports.outdir`, which uses the same fsyncs."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["atomic_path", "atomic_write", "fsync_dir", "fsync_file"]


def fsync_file(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path`` (same suffix, for writers that read it);
    when the block ends, the file is fsynced and renamed over ``path``, and the directory
    fsynced.  On an error the temporary file is removed and ``path`` left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(path, data: bytes | str) -> None:
    """``data`` into ``path`` whole (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
