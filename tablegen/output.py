"""One output convention for every ``fabroute`` command: readable text on stdout by default,
the JSON document (keys unchanged) with ``--json``; logs and progress go to stderr.

:func:`json_option` adds the flag, :func:`emit` prints a result either way, :func:`render`
is the text of any JSON-able document (nested dicts indented, numbers rounded, short lists on
one line) for commands without a text form of their own.  Imports nothing of ours.
"""

from __future__ import annotations

import json
import sys

#: a list of plain values up to this many items is printed on one line
_INLINE = 12


def console():
    """The stderr console every command logs and shows progress on: ``log`` prints one line
    as it is (no time column, no ``file.py:123`` source marker, no wrapping or padding to the
    terminal's width), so logs read and grep alike on a terminal and in a file."""
    from rich.console import Console

    class _Console(Console):
        def log(self, *objects, **_kw):
            self.print(*objects, soft_wrap=True, highlight=False)

    return _Console(stderr=True)


def json_option(sp, what: str = "the result") -> None:
    """``--json``: print ``what`` as one JSON document (the keys scripts parse) instead of
    text."""
    sp.add_argument("--json", action="store_true",
                    help=f"print {what} as JSON (for scripts) instead of text")


def num(v) -> str:
    """A number for people: integers as they are (thousands separated from 10,000 on),
    floats to 3 decimals (3 significant digits below 0.01)."""
    if isinstance(v, bool) or v is None:
        return {True: "yes", False: "no", None: "-"}[v]
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.3f}" if abs(v) >= 0.01 else f"{v:.3g}"
    return str(v)


def _plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _short(v) -> bool:
    """A plain value, or a short list of them (printed ``[a, b]``)."""
    return _plain(v) or (isinstance(v, list) and len(v) <= _INLINE and all(map(_plain, v)))


def _inline(v) -> str:
    return num(v) if _plain(v) else "[" + ", ".join(num(x) for x in v) + "]"


def render(doc, indent: int = 0) -> list[str]:
    """The lines of ``doc`` (a JSON-able value) as text: ``key: value`` with the keys of one
    dict aligned, nested dicts and long lists indented below their key."""
    pad = " " * indent
    if isinstance(doc, dict):
        if not doc:
            return [pad + "-"]
        width = max(len(str(k)) for k in doc)
        lines = []
        for k, v in doc.items():
            head = f"{pad}{str(k):<{width}}"
            if _plain(v):
                lines.append(f"{head}: {num(v)}")
            elif isinstance(v, list) and len(v) <= _INLINE and all(map(_short, v)):
                lines.append(f"{head}: {', '.join(map(_inline, v)) if v else '-'}")
            else:
                lines.append(f"{head}:")
                lines.extend(render(v, indent + 2))
        return lines
    if isinstance(doc, list):
        if all(_plain(x) for x in doc):
            text = ", ".join(num(x) for x in doc[:50])
            return [pad + (text + (f", … ({len(doc)} in all)" if len(doc) > 50 else "")
                           if doc else "-")]
        lines = []
        for i, x in enumerate(doc):
            lines.append(f"{pad}[{i}]")
            lines.extend(render(x, indent + 2))
        return lines
    return [pad + num(doc)]


def emit(doc, as_json: bool, text=None, indent: int | None = None) -> None:
    """Print ``doc``: JSON with ``as_json`` (``indent`` as ``json.dumps``), else the lines
    ``text(doc)`` returns (default :func:`render`)."""
    if as_json:
        print(json.dumps(doc, indent=indent))
        return
    sys.stdout.write("".join(line + "\n" for line in (text or render)(doc)))
