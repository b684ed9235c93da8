"""Where Numba keeps its compiled functions when the installed sources are read-only.

Numba's ``cache=True`` writes next to the sources (``__pycache__``), else into
``~/.cache/numba``.  A user who can write neither (``nobody``, whose home is ``/nonexistent``,
or a service account over a root-owned install) got ``RuntimeError: cannot cache function``
from every command at start-up.  :func:`use_writable_cache` points ``NUMBA_CACHE_DIR`` at a
directory that user can write; the front doors (``fabroute.cli``, ``python -m
simulator.cli``) call it before anything imports Numba, which reads the variable once, at
import.  Imports nothing of ours and never Numba itself.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
#: The source directories holding ``@njit(cache=True)`` functions.
JIT_DIRS = ("tablegen/routing", "tablegen/exports", "tablegen/exports/infiniband", "simulator")


def _writable(src: Path) -> bool:
    """Can Numba write its in-tree cache for the modules in ``src``?"""
    cache = src / "__pycache__"
    return os.access(cache if cache.is_dir() else src, os.W_OK | os.X_OK)


def _private_dir(path: Path) -> bool:
    """Make ``path`` (mode 0700) if needed; true if it is a directory we own that nobody else
    can write.  The cache holds pickles Numba loads, so a directory another user could fill
    (e.g. one planted under /tmp) must never be used."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and os.access(path, os.W_OK | os.X_OK))


def _candidates(environ) -> list[Path]:
    """The user's cache directory (XDG), then a per-user directory in the temp directory."""
    out = []
    base = environ.get("XDG_CACHE_HOME") or (
        str(Path(environ["HOME"]) / ".cache") if environ.get("HOME") else "")
    if base and Path(base).is_absolute():
        out.append(Path(base) / "fabroute" / "numba")
    out.append(Path(tempfile.gettempdir()) / f"fabroute-numba-{os.getuid()}")
    return out


def use_writable_cache(environ=os.environ) -> str | None:
    """Set ``NUMBA_CACHE_DIR`` in ``environ`` when it is unset and some source directory of
    :data:`JIT_DIRS` is not writable (root and developers keep the in-tree cache).  Returns
    the directory set, or ``None`` (nothing to do, or no usable directory: then Numba's own
    error stands).  O(1) file-system calls; must run before the first ``import numba``."""
    if environ.get("NUMBA_CACHE_DIR") or all(_writable(_ROOT / d) for d in JIT_DIRS):
        return None
    for d in _candidates(environ):
        if _private_dir(d):
            environ["NUMBA_CACHE_DIR"] = str(d)
            return str(d)
    return None
