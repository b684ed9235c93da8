"""Shell completion (bash, zsh) and the manual page, both generated from fabroute's parsers.

Generated once, at install time (``make install``: ``fabroute completion --install .venv``),
never at start-up: the scripts are static (shtab), so completing a word runs no Python and
``fabroute --help`` imports neither library.  Imports nothing of ours: the caller passes the
parser.
"""

from __future__ import annotations

from pathlib import Path

SHELLS = ("bash", "zsh")


def completion(parser, shell: str) -> str:
    """The completion script of ``parser`` for ``shell`` (bash: ``source`` it, then
    ``complete -p fabroute`` shows it; zsh: a ``_fabroute`` file on ``$fpath``)."""
    import shtab

    return shtab.complete(parser, shell=shell)


def manpage(parser, version: str) -> str:
    """The roff text of ``man fabroute``: every sub-command (and ``ib``'s) with its options,
    their help and defaults (argparse-manpage)."""
    from argparse_manpage.manpage import Manpage

    page = Manpage(parser, {"project_name": "fabroute", "version": version,
                            "manual_title": "fabroute manual", "manual_section": 1,
                            "description": parser.description})
    return str(page)


#: where :func:`install` writes each file, under its prefix
FILES = {"bash": "share/bash-completion/completions/fabroute",
         "zsh": "share/zsh/site-functions/_fabroute",
         "man": "share/man/man1/fabroute.1"}


def install(parser, version: str, prefix: Path) -> dict:
    """Write the bash and zsh scripts and the man page under ``prefix`` (:data:`FILES`);
    returns ``{kind: path}``.  ``man fabroute`` finds ``PREFIX/share/man`` by itself when
    ``PREFIX/bin`` is on ``PATH`` (man-db's manpath), i.e. with the venv activated."""
    out = {}
    for kind, rel in FILES.items():
        text = manpage(parser, version) if kind == "man" else completion(parser, kind)
        path = prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        out[kind] = str(path)
    return out
