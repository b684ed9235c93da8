"""The manifest that binds a table directory to its proof, and the check of every file in it.

``fabroute tables`` (and ``fabroute ib export``) write ``manifest.json`` last, inside the
directory that is then renamed into place: the SHA-256 and size of every other file, how each
export was made (formats, InfiniBand LMC and seed, layout) and the key facts of the
verification report.  :func:`check_files` is what ``fabroute verify`` and the controller run
after the tables themselves are proven (:func:`tablegen.verify.verify`): every file listed and
no other, each file's hash, and every file that can be derived from the proven tables (JSON,
OpenFlow flows and groups, every InfiniBand file, the report) derived again and compared byte
for byte, naming the file and the first line that differs.  ``tables.npz`` is the proof's own
input: it is bound by its hash alone (its zip entries carry timestamps).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from tablegen.errors import BadInput
from tablegen.exports.inputs import open_regular, read_bytes, read_chunks

MANIFEST = "manifest.json"
FORMAT = "fabroute-manifest"
VERSION = 1
MAX_MANIFEST_BYTES = 64 << 20       # ~300,000 files at most; a Dragonfly of 2,064 routers has 4,137
MAX_FILE_BYTES = 64 << 30           # larger than any export of a supported size (LFTs ~3 GiB)
FIRST_ERRORS = 10                   # file errors listed; the count says how many there were


def _sha256(chunks: Iterable[bytes]) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    for c in chunks:
        h.update(c)
        n += len(c)
    return h.hexdigest(), n


def proof_facts(rep) -> dict:
    """What a verification report says that the manifest keeps: the routing, topology, VC
    counts, every class's longest path and bound, the CDG's size."""
    return {"ok": rep.ok, "routing": rep.routing, "topology": rep.topology,
            "num_vcs": rep.num_vcs, "vcs_used": rep.vcs_used,
            "classes": {k: {"max_hops": c["max_hops"], "bound": c["bound"]}
                        for k, c in rep.classes.items()},
            "cdg_dependencies": rep.cdg.get("dependencies", 0)}


def write_manifest(d: Path, rep, exports: dict, kind: str = "table-set") -> Path:
    """Write ``d/manifest.json`` over every regular file below ``d``; ``exports`` says how the
    files were made (``{"json": bool, "openflow": bool, "openflow_profile": "ovs" |
    "standard" (with "openflow"), "ib": {"lmc", "seed", "prefix"} | None, "report": bool}``); ``kind``: what the directory is
    (:data:`tablegen.exports.outdir.KINDS`: ``table-set`` or ``ib-export``), which decides
    what may replace it.  O(bytes in ``d``) to hash."""
    d = Path(d)
    files = {}
    for root, dirs, names in os.walk(d):
        dirs.sort()
        for name in sorted(names):
            p = Path(root, name)
            rel = p.relative_to(d).as_posix()
            if rel == MANIFEST:
                continue
            with open(p, "rb") as f:
                digest, size = _sha256(iter(lambda: f.read(1 << 20), b""))
            files[rel] = {"bytes": size, "sha256": digest}
    doc = {"format": FORMAT, "version": VERSION, "kind": kind, "exports": exports,
           "proof": proof_facts(rep), "files": files}
    out = d / MANIFEST
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


def load_manifest(d: Path) -> dict:
    """``d/manifest.json`` parsed and shape-checked; :class:`BadInput` naming it otherwise."""
    path = Path(d) / MANIFEST
    what = str(path)
    try:
        doc = json.loads(read_bytes(path, MAX_MANIFEST_BYTES, what))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{what}: not JSON ({e}); expected the manifest fabroute writes") from None
    ok = (isinstance(doc, dict) and doc.get("format") == FORMAT
          and doc.get("version") == VERSION and isinstance(doc.get("files"), dict)
          and isinstance(doc.get("exports"), dict) and isinstance(doc.get("proof"), dict)
          and all(isinstance(v, dict) and isinstance(v.get("sha256"), str)
                  and isinstance(v.get("bytes"), int) for v in doc["files"].values()))
    if not ok:
        raise BadInput(f"{what}: not a {FORMAT} version {VERSION} document; expected the "
                       "manifest 'fabroute tables' writes")
    return doc


def _listed(d: Path) -> set[str]:
    out = set()
    for root, dirs, names in os.walk(d):
        for name in names + [x for x in dirs if Path(root, x).is_symlink()]:
            out.add(Path(root, name).relative_to(d).as_posix())
    return out - {MANIFEST}


def _first_difference(path: Path, expected: Iterable[bytes | str], what: str,
                      cap: int) -> tuple[str | None, str, int]:
    """Compare file ``path`` with the chunks a producer yields, reading both in step; returns
    (first difference or None, sha256 of the file, its size).  Memory O(chunk)."""
    fd = open_regular(path, what)
    try:
        # the file object owns fd from here: os.fdopen(closefd=False) is not honoured under
        # eventlet's patched os (the controller proves directories in its hub)
        f = open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    h = hashlib.sha256()
    size = line = 0
    with f:
        if (n := os.fstat(fd).st_size) > cap:
            raise BadInput(f"{what}: {n} bytes; expected at most {cap}")
        for chunk in expected:
            want = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
            got = f.read(len(want))
            h.update(got)
            size += len(got)
            if got != want:
                at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                          min(len(got), len(want)))
                line += got.count(b"\n", 0, at)
                if at < len(got):
                    return f"{what}: line {line + 1} differs from what the proven tables " \
                           "give", "", size
                return f"{what}: ends at line {line + 1}, before what the proven " \
                       "tables give", "", size
            line += got.count(b"\n")
        if f.read(1):
            return f"{what}: goes on after line {line}, past what the proven tables " \
                   "give", "", size
    return None, h.hexdigest(), size


def check_files(d: Path, derive, hashed: set[str], facts: dict) -> dict:
    """Check every file of directory ``d`` against its manifest: only the files it lists, each
    with its hash; ``derive(exports)`` (the manifest's ``exports``) gives path -> producer of
    every file that can be made again from the proven tables, and those are compared byte for
    byte; the files in ``hashed`` are bound by their hash alone; ``facts`` (:func:`proof_facts`
    of a fresh verification) must equal the manifest's.  Returns ``{"ok", "files",
    "checked", "derived", "errors", "error_count"}``; :class:`BadInput` when the manifest
    itself is missing or unreadable.  O(bytes in ``d`` + what ``derive`` produces)."""
    d = Path(d)
    man = load_manifest(d)
    errors: list[str] = []
    listed = man["files"]
    present = _listed(d)
    for rel in sorted(present - listed.keys()):
        errors.append(f"{d / rel}: not in {MANIFEST}; expected only the files it lists")
    if man["proof"] != facts:
        key = next(k for k in facts if man["proof"].get(k) != facts.get(k))
        errors.append(f"{d / MANIFEST}: proof.{key} is {man['proof'].get(key)!r}, but verifying "
                      f"the tables gives {facts[key]!r}")
    derived = derive(man["exports"])
    for rel in sorted(derived.keys() - listed.keys()):
        errors.append(f"{d / rel}: the manifest's exports include it, but it is not listed")
    checked = 0
    for rel, entry in sorted(listed.items()):
        path = d / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            errors.append(f"{d / MANIFEST}: lists {rel!r}; expected paths inside the directory")
            continue
        try:
            if rel in derived:
                diff, digest, size = _first_difference(path, derived[rel](), str(path),
                                                       MAX_FILE_BYTES)
                if diff:
                    errors.append(diff)
                    continue
            elif rel in hashed:
                digest, size = _sha256(read_chunks(path, MAX_FILE_BYTES, str(path)))
            else:
                errors.append(f"{path}: the manifest's exports do not make it; expected only "
                              "files fabroute writes")
                continue
        except BadInput as e:
            errors.append(str(e))
            continue
        checked += 1
        if (digest, size) != (entry["sha256"], entry["bytes"]):
            errors.append(f"{path}: its SHA-256 or size differs from {MANIFEST}'s")
    return {"ok": not errors, "files": len(listed), "checked": checked,
            "derived": len(derived), "exports": man["exports"], "errors": errors[:FIRST_ERRORS],
            "error_count": len(errors)}

