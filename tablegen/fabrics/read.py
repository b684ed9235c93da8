"""Fabric files read for the commands (the readers of issue 26 extend this)."""

from __future__ import annotations

from tablegen.fabrics.fabric import Fabric


def load_fabric(path) -> Fabric:
    """The fabric of a ``fabric.json`` (:meth:`Fabric.load`)."""
    return Fabric.load(path)
