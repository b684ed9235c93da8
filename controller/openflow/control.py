"""The client side of the controller's control socket (``fabroute controller --control``):
one JSON request line, one JSON reply line (``controller/openflow/app.py`` serves it)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tablegen.errors import BadInput

__all__ = ["request"]


def request(path: Path, req: dict, timeout: float = 300.0) -> dict:
    """Send ``req`` to the controller listening on Unix socket ``path``; its reply.
    :class:`BadInput` when nothing listens there."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError as e:
        s.close()
        raise BadInput(f"load: {path}: {e.strerror}; expected the --control socket of a "
                       "running 'fabroute controller'") from None
    with s, s.makefile("rwb") as f:
        f.write(json.dumps(req).encode() + b"\n")
        f.flush()
        line = f.readline()
    if not line:
        raise BadInput(f"load: {path}: the controller closed the connection without a reply")
    return json.loads(line)
