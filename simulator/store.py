"""The results store of a sweep: one JSON line per finished load point, appended as the point
finishes, so that an interrupted sweep resumes where it stopped (``docs/simulator.md``,
*Sweeps on Dask*).

A record is ``{"format", "version", "key", "inputs", "result", "worker", "pid", "seconds",
"finished"}``.  ``inputs`` is everything a point's result depends on: the topology SPEC, the
routing name, traffic, load, seed, forced VC count, the full :class:`SimConfig` the point
runs with (the routing's overrides applied), the digest of the table set it simulates
(:func:`table_digest`), the simulator's model version
(:data:`simulator.config.MODEL_VERSION`, raised whenever a change of the simulator alters a
result for the same inputs) and the digest of the simulator's sources (:func:`code_digest`);
``key`` is the SHA-256 of ``inputs`` without that last digest, as canonical JSON
(:func:`point_key`), format and version included.  The code digest only makes every worker
of one sweep run the client's sources; keying on it would throw every stored point away at
any edit of the engine, also one that changes no result (a new option off by default), and
a figure at 10,830 nodes is hours of points.  ``worker`` .. ``finished`` say where
and when it ran; they never reach the sweep's JSON.

Each record is one ``write`` of one line, then ``fsync``.  Reading ignores a torn last line
(a crash mid-write), any line that is not a record of this format, and every record whose
key is not the SHA-256 of its inputs or not one the sweep asks for; the first record of a
key wins.  Before appending, a torn tail is cut off (:meth:`Store.open`).  One sweep at a
time writes a store (``flock``).  The sweep's JSON and PNG are replaced whole
(:func:`tablegen.durable.atomic_write`, :func:`~tablegen.durable.atomic_path`: temporary
file, ``fsync``, ``rename``).
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
from pathlib import Path

from tablegen.durable import fsync_dir
from tablegen.errors import BadInput

FORMAT = "fabroute-sweep-point"
VERSION = 1
#: The sources a point's result depends on besides its inputs and tables (the table builder
#: is covered by the tables' digest): the engine, the run method, traffic, ``ugal-sdn``'s
#: loop, SimConfig's derived values, and the UGAL rules and adaptive controller it compiles.
CODE_FILES = ("simulator/engine.py", "simulator/run.py", "simulator/traffic.py",
              "simulator/sdn.py", "simulator/config.py", "tablegen/routing/ugal.py",
              "tablegen/routing/adaptive.py")
_MARK = b'{"format":"%s"' % FORMAT.encode()     #: how every record line starts
_ROOT = Path(__file__).resolve().parents[1]
_CODE: list[str] = []


def canonical(obj) -> bytes:
    """``obj`` as canonical JSON (sorted keys, no spaces, ASCII; NumPy scalars as numbers)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=plain).encode()


def plain(x):
    """``json.dumps``' ``default``: NumPy scalars and arrays as numbers and lists."""
    if hasattr(x, "tolist"):            # NumPy scalars and arrays
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON-serialisable")


def table_digest(ts) -> str:
    """SHA-256 over a table set's content: routing, topology name, classes, VC count and
    scheme, params, then every array (``tables`` by name, ``alternatives``, ``vc_inc``,
    ``exit_port``, and the topology's ``adj``, ``hosts``, ``link_kind``) as dtype, shape and
    little-endian bytes.  O(bytes of the arrays)."""
    from dataclasses import asdict

    import numpy as np

    h = hashlib.sha256(b"fabroute-tableset-1\n")
    h.update(canonical({"routing": ts.routing, "topology": ts.topo.name(),
                        "classes": [asdict(c) for c in ts.classes], "num_vcs": ts.num_vcs,
                        "vc_scheme": ts.vc_scheme, "params": ts.params}))
    arrays = [(f"tables/{k}", ts.tables[k]) for k in sorted(ts.tables)]
    arrays += [("alternatives", ts.alternatives), ("vc_inc", ts.vc_inc),
               ("exit_port", ts.exit_port), ("topo/adj", ts.topo.adj),
               ("topo/hosts", ts.topo.hosts), ("topo/link_kind", ts.topo.link_kind)]
    for name, a in arrays:
        if a is None:
            h.update(f"\n{name}:none".encode())
            continue
        a = np.ascontiguousarray(a)
        le = a.astype(a.dtype.newbyteorder("<"), copy=False)
        h.update(f"\n{name}:{le.dtype.str}:{list(a.shape)}\n".encode())
        h.update(le.tobytes())
    return h.hexdigest()


def code_digest() -> str:
    """SHA-256 over :data:`CODE_FILES` (path and bytes), once per process."""
    if not _CODE:
        h = hashlib.sha256()
        for rel in CODE_FILES:
            h.update(f"{rel}\n".encode() + (_ROOT / rel).read_bytes() + b"\n")
        _CODE.append(h.hexdigest())
    return _CODE[0]


def point_inputs(spec: str, routing: str, traffic: str, load: float, seed: int,
                 vcs: int | None, config: dict, tables: str, code: str) -> dict:
    """What a point's key covers (see the module docstring)."""
    from simulator.config import MODEL_VERSION

    return {"format": FORMAT, "version": VERSION, "model": MODEL_VERSION, "spec": spec,
            "routing": routing, "traffic": traffic, "load": float(load), "seed": int(seed),
            "vcs": vcs, "config": config, "tables": tables, "code": code}


def point_key(inputs: dict) -> str:
    """SHA-256 of ``inputs`` without the code digest, with only the config keys that differ
    from :class:`~simulator.config.SimConfig`'s defaults: a new key whose default keeps the
    old behaviour (a mechanism off by default) leaves every stored point's key as it was."""
    from simulator.config import SimConfig

    default = SimConfig().to_dict()
    cfg = inputs.get("config")
    if isinstance(cfg, dict):
        cfg = {k: v for k, v in cfg.items() if k not in default or default[k] != v}
    return hashlib.sha256(canonical({**{k: v for k, v in inputs.items() if k != "code"},
                                     "config": cfg})).hexdigest()


def _full_config_key(inputs: dict) -> str:
    """The key of records written before :func:`point_key` dropped default config values
    (2026-11-26): the whole config.  Read, never written."""
    return hashlib.sha256(canonical({k: v for k, v in inputs.items() if k != "code"})
                          ).hexdigest()


def record(inputs: dict, result: dict, worker: str, pid: int, seconds: float) -> dict:
    return {"format": FORMAT, "version": VERSION, "key": point_key(inputs), "inputs": inputs,
            "result": result, "worker": worker, "pid": pid, "seconds": round(seconds, 3),
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")}


def _valid(line: bytes):
    """The record on ``line`` if it is one whose key matches its inputs, else None."""
    try:
        r = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(r, dict) and r.get("format") == FORMAT and r.get("version") == VERSION
            and isinstance(r.get("inputs"), dict) and isinstance(r.get("result"), dict)):
        return None
    try:
        key = point_key(r["inputs"])
        ok = r.get("key") in (key, _full_config_key(r["inputs"]))
    except (TypeError, ValueError):
        return None
    return {**r, "key": key} if ok else None


class Store:
    """A JSON-lines results store at ``path`` (see the module docstring)."""

    def __init__(self, path):
        self.path = Path(path)
        self._fd: int | None = None
        self._new = False
        if self.path.exists() and not self.path.is_file():
            raise BadInput(f"sweep: store {str(self.path)!r:.80} is not a regular file; "
                           "expected a .jsonl results store (or a path to create one)")
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise BadInput(f"sweep: store {str(self.path)!r:.80}: its parent is not a "
                           "directory; expected a path in a directory")
        if self.path.is_file():         # refused now, before any work, as open() would
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                ok = _is_store(fd)
            finally:
                os.close(fd)
            if not ok:
                raise BadInput(_not_a_store(self.path))

    def read(self, wanted: set[str]) -> dict[str, dict]:
        """The first valid record of each key in ``wanted`` (nothing if there is no store).
        A last line without its newline is torn: ignored.  O(bytes of the store)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise BadInput(f"sweep: store {str(self.path)!r:.80}: {e.strerror}; expected a "
                           "readable .jsonl results store") from None
        out: dict[str, dict] = {}
        for line in data.split(b"\n")[:-1]:         # the part after the last newline: torn
            r = _valid(line)
            if r is not None and r["key"] in wanted and r["key"] not in out:
                out[r["key"]] = r
        return out

    def open(self) -> "Store":
        """Create (or open) the store for appending: exclusive ``flock`` (another sweep
        writing it is bad input), and a torn last line cut off."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BadInput(f"sweep: store {str(self.path)!r:.80} is being written by another "
                           "sweep; expected one sweep per store (or --store elsewhere)") from None
        if not _is_store(fd):
            os.close(fd)
            raise BadInput(_not_a_store(self.path))
        size = os.fstat(fd).st_size
        keep = _complete(fd, size)
        if keep < size:                 # a torn last line: cut it off before appending
            os.ftruncate(fd, keep)
            os.fsync(fd)
        self._fd = fd
        self._new = new
        if new:
            fsync_dir(self.path.parent)
        return self

    def append(self, rec: dict) -> None:
        """One record as one line: one ``write``, then ``fsync``."""
        line = json.dumps(rec, separators=(",", ":"), default=plain).encode() + b"\n"
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)          # releases the lock
            self._fd = None

    def __enter__(self):
        return self.open()

    def __exit__(self, exc_type, *_):
        # a sweep interrupted before its first point leaves no empty store it made behind
        # (while the lock is held: no other sweep can have written it meanwhile)
        if (exc_type is not None and self._fd is not None and self._new
                and os.fstat(self._fd).st_size == 0):
            self.path.unlink(missing_ok=True)
        self.close()


def _not_a_store(path: Path) -> str:
    return (f"sweep: {str(path)!r:.80} is not a sweep results store (its first line is no "
            "point record); expected a .jsonl store written by fabroute sweep, or a new path")


def _is_store(fd: int) -> bool:
    """Empty, or its first line a record of this format (a first line without its newline:
    the start of one, torn), so that a file that is not a store is never cut or appended."""
    head = os.pread(fd, 1 << 16, 0)
    first, nl, _ = head.partition(b"\n")
    if not nl:
        return _MARK.startswith(first[:len(_MARK)])
    try:
        r = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(r, dict) and r.get("format") == FORMAT


def _complete(fd: int, size: int) -> int:
    """Bytes of the file up to and including its last newline (read backwards)."""
    pos = size
    while pos > 0:
        n = min(1 << 16, pos)
        i = os.pread(fd, n, pos - n).rfind(b"\n")
        if i >= 0:
            return pos - n + i + 1
        pos -= n
    return 0
