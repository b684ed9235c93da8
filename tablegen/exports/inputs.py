"""Reading files a user hands us, bounded: only regular files (a FIFO would hang the reader,
``/dev/zero`` never ends, a symlink may point anywhere or loop), never more than a stated
number of bytes, and every refusal a one-line :class:`~tablegen.errors.BadInput` naming the
file."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from tablegen.errors import BadInput

CHUNK = 1 << 20


def open_regular(path: Path, what: str | None = None) -> int:
    """A read-only descriptor of ``path``, which must be a regular file and not a symlink;
    O(1).  Opened non-blocking, so a FIFO is refused instead of waiting for a writer."""
    name = what or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadInput(f"{name}: missing; expected a file of the table set") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadInput(f"{name}: a symbolic link; expected a regular file") from None
        raise BadInput(f"{name}: cannot be opened ({e.strerror}); expected a readable regular "
                       "file") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
        raise BadInput(f"{name}: {kind}; expected a regular file")
    os.set_blocking(fd, True)
    return fd


def read_chunks(path: Path, cap: int, what: str | None = None) -> Iterator[bytes]:
    """The bytes of regular file ``path`` in chunks; :class:`BadInput` before reading when it
    holds more than ``cap`` bytes.  Memory O(chunk)."""
    fd = open_regular(path, what)
    try:
        size = os.fstat(fd).st_size
        if size > cap:
            raise BadInput(f"{what or path}: {size} bytes; expected at most {cap}")
        total = 0
        while chunk := os.read(fd, CHUNK):
            total += len(chunk)
            if total > cap:         # grew while we read
                raise BadInput(f"{what or path}: more than {cap} bytes; expected at most {cap}")
            yield chunk
    finally:
        os.close(fd)


def read_lines(path: Path, cap: int, what: str | None = None) -> Iterator[bytes]:
    """The lines of regular file ``path`` without their line feeds, at most ``cap`` bytes in all
    (:func:`read_chunks`).  Memory O(chunk + longest line)."""
    rest = b""
    for chunk in read_chunks(path, cap, what):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


def read_bytes(path: Path, cap: int, what: str | None = None) -> bytes:
    """All of regular file ``path``, at most ``cap`` bytes (:func:`read_chunks`)."""
    return b"".join(read_chunks(path, cap, what))
