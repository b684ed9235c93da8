"""A :class:`~tablegen.drawing.positions.Layout` drawn with matplotlib into an SVG or a PNG
(``fabroute draw``): cables coloured by kind (DSN-F in the colours of its paper's Fig. 1:
shortcuts red, the ring blue, Local_Pred/Succ brown, layer links black), failed cables
dashed, a legend naming every kind with its count, a title with the topology's name and
its switches, hosts and cables.  Written crash-safe (:func:`tablegen.durable.atomic_path`).

matplotlib's object interface (``Figure``), not ``pyplot``: no global state, no backend
to choose.  SVGs keep their text as text and carry no date, so a drawing regenerated from
the same fabric is the same file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tablegen.drawing.positions import Layout
from tablegen.durable import atomic_path

__all__ = ["FORMATS", "render"]

#: the formats ``fabroute draw`` writes, by the suffix of ``--out``
FORMATS = ("svg", "png")

#: colour of each cable kind (DSN-F's as in its paper's Fig. 1); other kinds take the
#: fallback colours in turn
COLOURS = {"intra": "#1f4e99", "cross": "#d9822b", "local": "#1f4e99", "global": "#d9822b",
           "ring": "#1f77b4", "shortcut": "#d62728", "layer": "#222222", "x": "#1f4e99",
           "y": "#2a9d8f"}
_DSNF_LOCAL = "#8c564b"
_FALLBACK = ("#6a3d9a", "#33a02c", "#b15928", "#e31a1c", "#1f78b4", "#ff7f00")
_FAILED = "#c2185b"
#: switches and group labels are named in the picture up to these counts
_MAX_IDS, _MAX_GROUP_LABELS = 128, 64


def _colour(family: str, kind: str, i: int) -> str:
    if family == "dsnf" and kind == "local":
        return _DSNF_LOCAL
    return COLOURS.get(kind, _FALLBACK[i % len(_FALLBACK)])


def render(lay: Layout, path, fmt: str) -> None:
    """Draw ``lay`` into ``path`` as ``fmt`` (one of :data:`FORMATS`), replacing it in one
    rename.  O(N + L + H) drawing primitives (one collection per cable kind)."""
    from matplotlib import rc_context
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    xy = lay.xy
    pts = [xy] + [np.array([[g["x"], g["y"]]]) for g in (*lay.groups, *lay.subgraphs)]
    if lay.host_xy is not None and len(lay.host_xy):
        pts.append(lay.host_xy)
    allp = np.vstack(pts)
    lo, hi = allp.min(axis=0) - 0.03, allp.max(axis=0) + 0.03
    w, h = hi - lo
    width = 11.0
    fig = Figure(figsize=(width, max(3.5, width * h / w) + 1.3), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(hi[1], lo[1])       # y grows downward, as in the layout (and SVG)
    ax.set_aspect("equal")
    ax.set_axis_off()

    n, n_cables = lay.n_switches, len(lay.cables)
    lw = 1.3 if n_cables <= 300 else 0.8 if n_cables <= 3000 else 0.3
    seg = np.stack([xy[lay.cables[:, 0]], xy[lay.cables[:, 1]]], axis=1)
    length = np.linalg.norm(seg[:, 0] - seg[:, 1], axis=1)
    handles = []
    kinds = [(k, i) for i, k in enumerate(lay.kinds) if (lay.cable_kind == i).any()]
    # long cables first and fainter, so the short ones (a group's, a ring's) stay readable
    kinds.sort(key=lambda ki: -float(length[lay.cable_kind == ki[1]].mean()))
    for z, (kind, i) in enumerate(kinds):
        mine = lay.cable_kind == i
        colour = _colour(lay.family, kind, i)
        alpha = 0.45 if np.median(length[mine]) > 0.25 else 0.9
        ax.add_collection(LineCollection(seg[mine], colors=colour, linewidths=lw,
                                         alpha=alpha, zorder=1 + z))
        handles.append(Line2D([], [], color=colour, lw=2, alpha=alpha,
                              label=f"{lay.kind_text(kind)} ({int(mine.sum())})"))
    if lay.failed:
        fail = np.array(lay.failed)
        ax.add_collection(LineCollection(np.stack([xy[fail[:, 0]], xy[fail[:, 1]]], axis=1),
                                         colors=_FAILED, linewidths=max(lw, 1.0) * 1.6,
                                         linestyles="--", zorder=len(kinds) + 1))
        handles.append(Line2D([], [], color=_FAILED, lw=2, ls="--",
                              label=f"failed ({len(lay.failed)} switch pairs)"))

    size = float(np.clip(4000 / n, 3, 130))
    if lay.host_xy is not None and len(lay.host_xy):
        ax.add_collection(LineCollection(
            np.stack([xy[lay.host_switch], lay.host_xy], axis=1), colors="#999999",
            linewidths=0.5, zorder=len(kinds) + 2))
        ax.scatter(lay.host_xy[:, 0], lay.host_xy[:, 1], s=size / 5, c="#9e9e9e",
                   zorder=len(kinds) + 3, linewidths=0)
        handles.append(Line2D([], [], color="#9e9e9e", marker="o", ls="", markersize=4,
                              label=f"hosts ({lay.n_hosts})"))
    ax.scatter(xy[:, 0], xy[:, 1], s=size, c="#263238", edgecolors="white",
               linewidths=0.6, zorder=len(kinds) + 4)
    if n <= _MAX_IDS:
        for i, (x, y) in enumerate(xy):
            ax.text(x, y, str(i), ha="center", va="center", fontsize=5.5, color="white",
                    zorder=len(kinds) + 5)
    if len(lay.groups) <= _MAX_GROUP_LABELS:
        for g in lay.groups:
            ax.text(g["x"], g["y"], g["label"], ha="center", va="center", fontsize=8,
                    color="#455a64")
    for s in lay.subgraphs:
        ax.text(s["x"], s["y"], s["label"], ha="center", va="center", fontsize=11,
                fontweight="bold", color="#263238")
    failed = f", {len(lay.failed)} failed" if lay.failed else ""
    ax.set_title(f"{lay.topology}: {n} switches, {lay.n_hosts} hosts, "
                 f"{n_cables} cables{failed}", fontsize=12)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3),
               frameon=False, fontsize=9)

    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "fabroute"}), \
            atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format=fmt, dpi=100,
                    metadata={"Date": None} if fmt == "svg" else None)
