"""Load a fabric as cabled from whatever describes it: a ``fabric.json``
(:meth:`~tablegen.fabrics.fabric.Fabric.load`'s format) or the text real ``ibnetdiscover``
prints (:mod:`tablegen.fabrics.ibnetdiscover`), told apart by content, not by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tablegen.errors import BadInput
from tablegen.fabrics.fabric import MAX_FILE_BYTES, Fabric
from tablegen.fabrics.ibnetdiscover import parse_ibnetdiscover

# a Switch/Ca section line or the GUID line before one, at the start of a line
_IBND = re.compile(rb"^\s*(?:(?:Switch|Ca)\s+\d+\s+\"[SH]-|(?:switchguid|caguid)=0x)", re.M)


def load_fabric(path) -> Fabric:
    """The :class:`Fabric` in ``path``: JSON (a file starting with ``{``) is a fabric file,
    text with ``Switch``/``Ca`` sections is ``ibnetdiscover`` output.  Reads at most
    :data:`~tablegen.fabrics.fabric.MAX_FILE_BYTES`; :class:`BadInput` in one line on a
    missing, oversized or unrecognised file and on whatever its reader refuses."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e.strerror}); expected a fabric file or "
                       "ibnetdiscover output") from None
    if len(data) > MAX_FILE_BYTES:
        raise BadInput(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; expected a fabric "
                       "file or ibnetdiscover output")
    if data.lstrip().startswith(b"{"):
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            raise BadInput(f"{path}: starts like JSON but is not JSON; expected a fabric "
                           "file") from None
        return Fabric.from_dict(doc, str(path))
    if not _IBND.search(data):
        raise BadInput(f"{path}: neither a fabric file (JSON) nor ibnetdiscover output "
                       "(no Switch or Ca section); expected one of them")
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BadInput(f"{path}:{line}: bytes that are not UTF-8; expected ibnetdiscover's "
                       "text output") from None
    return parse_ibnetdiscover(text, str(path))
