"""The natural layout of every fabric as plain data: where each switch (and optionally each
host) sits, every cable with its kind, the labels of groups and subgraphs.  Pure numpy; the
picture is :mod:`tablegen.drawing.render`, the same data as JSON feeds ``fabroute draw
--json`` and the controller's live map (plain JS + SVG).

Coordinates lie in the unit box ``[0, 1]²`` with x to the right and **y downward** (SVG's
convention: a page puts them straight into a ``viewBox="0 0 1 1"``); the aspect ratio of
the family's figure is kept and the figure centred, so a square viewport shows it undistorted.

Layouts, each the paper's figure:

* Slim Fly (Besta & Hoefler, MMS graphs; ``shared/papers/slimfly-topology-slides.txt``):
  the two subgraphs side by side, each as ``q`` groups (columns, ``(s, x)``) of ``q``
  routers (``y`` from the top).  A group's routers sit on a shallow arc, not a straight
  line, so its intra-group cables are distinct chords; the cables between the subgraphs
  cross the gap between them.
* Dragonfly (Kim et al. 2008, ``shared/papers/dragonfly-topology-and-ugal.txt``): the ``g``
  groups on a circle, clockwise from the top; the ``a`` routers of a group on a small
  circle around its place (local cables: the group's clique; global cables: chords between
  groups).
* DSN-F (Truong et al., Fig. 1(a), ``shared/papers/dsnf-expandable-low-degree-topology.txt``):
  the layer-0 nodes on a ring in id order (super-node by super-node, level 1 first),
  clockwise from the top; layer ``k`` on the concentric ring ``k`` further out, each node
  beside its layer-0 namesake; shortcuts are the chords across the ring.
* torus (Dally & Seitz): the ``x × y`` grid, each row and column slightly bowed so that a
  wrap-around cable is not drawn over its ring.
* anything else (DSN-x, DLN-x, a family added later, a topology whose labels do not fit
  its family's layout): the switches on a circle in id order.  This never fails.

Sizes (``q``, ``g``, ``p``, ...) are read from the switches' labels, not from the name's
parameters, so a topology read from an older table directory is placed alike.

Complexity: O(N + L + H) time and memory for N switches, L cables and H hosts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tablegen.topologies.failures import failed_pairs
from tablegen.topology import Topology

__all__ = ["KIND_TEXT", "Layout", "layout"]

#: What each cable kind of a family is, as the legend names it (a kind not listed is named
#: by itself).
KIND_TEXT = {
    "slimfly": {"intra": "intra-group (inside one subgraph)",
                "cross": "between the two subgraphs"},
    "dragonfly": {"local": "local (inside a group)", "global": "global (between groups)"},
    "dsnf": {"ring": "Pred/Succ (the ring)", "shortcut": "shortcut",
             "local": "Local_Pred/Local_Succ (inside a super-node)",
             "layer": "Layer_Link (between layers)"},
    "torus": {"x": "x rings", "y": "y rings"},
    "dsn": {"ring": "ring", "shortcut": "shortcut"},
    "dln": {"ring": "ring", "shortcut": "random shortcut"},
    "fattree": {"edge": "edge to aggregation (inside a pod)", "core": "aggregation to core"},
}

#: room left around the figure inside the unit box (for labels)
_MARGIN = 0.07


@dataclass(eq=False)
class Layout:
    """A fabric placed in the unit box (module docstring: coordinates).

    Attributes:
        topology: the topology's name (a SPEC of it).
        family: its kind (``slimfly``, ``dragonfly``, ``dsnf``, ...).
        style: which layout placed it (``slimfly-subgraphs``, ``dragonfly-groups``,
            ``dsnf-ring``, ``torus-grid``, ``circle``).
        xy: ``float64[N, 2]`` position of every switch.
        cables: ``int64[L, 2]`` the switch pair of every cable, each cable once (parallel
            cables once each), in the order of :attr:`Topology.links`.
        cable_kind: ``int64[L]`` index into :attr:`kinds` of every cable.
        kinds: the topology's cable kinds (``Topology.kind_names``).
        group: ``int64[N]`` the group of every switch (``Topology.group``).
        label_names, labels: the names of the label fields and every switch's label
            (``int[N, len(label_names)]``).
        groups: ``{"id", "label", "x", "y"}`` where each group's name goes (none for
            families without groups).
        subgraphs: ``{"label", "x", "y"}`` names of larger parts (Slim Fly's subgraphs).
        failed: switch pairs whose cables the topology's name fails (``fail=``).
        n_hosts: hosts of the fabric.
        host_xy, host_switch: every host's position and switch (``None`` unless asked for).
    """

    topology: str
    family: str
    style: str
    xy: np.ndarray
    cables: np.ndarray
    cable_kind: np.ndarray
    kinds: tuple[str, ...]
    group: np.ndarray
    label_names: tuple[str, ...]
    labels: np.ndarray
    groups: list[dict]
    subgraphs: list[dict]
    failed: list[tuple[int, int]]
    n_hosts: int
    host_xy: np.ndarray | None = None
    host_switch: np.ndarray | None = None

    @property
    def n_switches(self) -> int:
        return int(len(self.xy))

    def kind_counts(self) -> dict[str, int]:
        """Cables of each kind that the fabric has (kinds without a cable left out)."""
        counts = np.bincount(self.cable_kind, minlength=len(self.kinds))
        return {k: int(c) for k, c in zip(self.kinds, counts) if c}

    def kind_text(self, kind: str) -> str:
        """The legend's name of cable ``kind`` (:data:`KIND_TEXT`)."""
        return KIND_TEXT.get(self.family, {}).get(kind, kind)

    def to_dict(self) -> dict:
        """The layout as one JSON-ready document: ``topology``, ``family``, ``layout``,
        counts, ``switches`` (``id``, ``x``, ``y``, ``group``, ``label``), ``cables`` as
        ``[a, b, kind]``, ``cable_kinds`` (``kind``, ``text``, ``count``), ``failed`` as
        ``[a, b]``, ``groups``, ``subgraphs`` and, when placed, ``hosts`` (``id``,
        ``switch``, ``x``, ``y``).  Coordinates rounded to 5 decimals.  O(N + L + H)."""
        xy = np.round(self.xy, 5).tolist()
        names = list(self.label_names)
        switches = [{"id": i, "x": x, "y": y, "group": g, "label": dict(zip(names, lab))}
                    for i, ((x, y), g, lab) in enumerate(zip(xy, self.group.tolist(),
                                                             self.labels.tolist()))]
        kinds = self.kinds
        doc = {
            "topology": self.topology,
            "family": self.family,
            "layout": self.style,
            "coordinates": "unit box, x to the right, y downward",
            "n_switches": self.n_switches,
            "n_hosts": self.n_hosts,
            "n_cables": int(len(self.cables)),
            "switches": switches,
            "cables": [[a, b, kinds[k]] for (a, b), k in zip(self.cables.tolist(),
                                                              self.cable_kind.tolist())],
            "cable_kinds": [{"kind": k, "text": self.kind_text(k), "count": c}
                            for k, c in self.kind_counts().items()],
            "failed": [[a, b] for a, b in self.failed],
            "groups": self.groups,
            "subgraphs": self.subgraphs,
        }
        if self.host_xy is not None:
            doc["hosts"] = [{"id": h, "switch": s, "x": x, "y": y} for h, (s, (x, y)) in
                            enumerate(zip(self.host_switch.tolist(),
                                          np.round(self.host_xy, 5).tolist()))]
        return doc


def layout(topo: Topology, hosts: bool = False) -> Layout:
    """``topo`` in its family's natural layout (module docstring), with ``hosts`` every
    host placed as well (a small fan beside its switch, pointing away from the figure's
    centre).  Falls back to the circle when a family's layout cannot place every switch
    apart (never raises for a valid topology).  O(N + L + H)."""
    place = _FAMILIES.get(topo.kind)
    try:
        raw, groups, subgraphs, style = place(topo) if place else (None, [], [], "")
    except (IndexError, ValueError):    # labels not of the family's shape (a hand-made file)
        raw = None
    if raw is None or not _apart(raw):
        raw, groups, subgraphs, style = _circle(topo)
    fit = _fitter(raw)
    xy = fit(raw)
    links = topo.links
    a, pa, b = links[:, 0], links[:, 1], links[:, 2]
    kind = topo.link_kind[a, pa - topo.hosts[a] - 1].astype(np.int64)
    out = Layout(
        topology=topo.name(), family=topo.kind, style=style, xy=xy,
        cables=np.stack([a, b], axis=1).astype(np.int64), cable_kind=kind,
        kinds=tuple(topo.kind_names), group=np.asarray(topo.group, dtype=np.int64),
        label_names=tuple(topo.label_names), labels=np.asarray(topo.labels),
        groups=[dict(g, **_point(fit, g["x"], g["y"])) for g in groups],
        subgraphs=[dict(s, **_point(fit, s["x"], s["y"])) for s in subgraphs],
        failed=failed_pairs(topo.params), n_hosts=topo.n_hosts)
    if hosts:
        out.host_switch, out.host_xy = _hosts(topo, xy, out.cables)
    return out


# -- the families ------------------------------------------------------------------------------
def _slimfly(topo: Topology):
    """Slim Fly: subgraph ``s`` left (0) or right (1), group ``x`` its column, router ``y``
    its row; a column bends into an arc (chords for the intra-group cables), a row into a
    shallow curve (distinct cables between the subgraphs).  O(N)."""
    q = int(topo.labels[:, 2].max()) + 1
    s, x, y = (topo.labels[:, i].astype(float) for i in range(3))
    gap = 1.5       # columns between the subgraphs: room for their cables to fan out
    cx = x + s * (q + gap)
    # rows bent (convex, so no three routers of a row in line): router (1, 0, c) meets
    # (0, x, c) for every x, and on a straight row those q cables would lie on each other
    t = x / max(q - 1, 1)
    raw = np.stack([cx + 0.35 * np.sin(math.pi * (y + 0.5) / q), y + 0.5 * t + 0.25 * t * t],
                   axis=1)
    groups = [{"id": si * q + xi, "label": f"({si},{xi})", "x": xi + si * (q + gap) + 0.15,
               "y": -0.7} for si in (0, 1) for xi in range(q)]
    subgraphs = [{"label": f"subgraph {si}", "x": si * (q + gap) + (q - 1) / 2 + 0.15,
                  "y": -1.4} for si in (0, 1)]
    return raw, groups, subgraphs, "slimfly-subgraphs"


def _dragonfly(topo: Topology):
    """Dragonfly: group ``G`` at angle ``2πG/g`` on the unit circle (clockwise from the
    top), its ``a`` routers on a circle of radius ``0.45 sin(π/g)`` around it.  O(N)."""
    g, a = (int(v) + 1 for v in topo.labels.max(axis=0)[:2])
    G, r = topo.labels[:, 0].astype(float), topo.labels[:, 1].astype(float)
    phi = 2 * math.pi * G / g - math.pi / 2
    small = 0.45 * math.sin(math.pi / g)
    theta = phi + 2 * math.pi * (r + 0.5) / a
    raw = np.stack([np.cos(phi) + small * np.cos(theta),
                    np.sin(phi) + small * np.sin(theta)], axis=1)
    out = 1 + small + 0.08
    groups = [{"id": i, "label": f"G{i}",
               "x": out * math.cos(2 * math.pi * i / g - math.pi / 2),
               "y": out * math.sin(2 * math.pi * i / g - math.pi / 2)} for i in range(g)]
    return raw, groups, [], "dragonfly-groups"


def _dsnf(topo: Topology):
    """DSN-F: node ``{l, 0, s}`` at position ``s·p + l - 1`` of ``p·2^p`` around the ring
    (clockwise from the top), layer ``k`` at radius ``1 + 0.18 k``.  O(N)."""
    p = int(topo.labels[:, 0].max())
    lvl, k, s = (topo.labels[:, i].astype(float) for i in range(3))
    ring = p * 2 ** p
    ang = 2 * math.pi * (s * p + lvl - 1) / ring - math.pi / 2
    rad = 1 + 0.18 * k
    raw = np.stack([rad * np.cos(ang), rad * np.sin(ang)], axis=1)
    out = 1 + 0.18 * float(k.max()) + 0.12
    groups = []
    for si in range(2 ** p):
        mid = 2 * math.pi * (si * p + (p - 1) / 2) / ring - math.pi / 2
        groups.append({"id": si, "label": f"S{si}", "x": out * math.cos(mid),
                       "y": out * math.sin(mid)})
    return raw, groups, [], "dsnf-ring"


def _torus(topo: Topology):
    """Torus: switch ``(i, j)`` at column ``i``, row ``j``; rows and columns bowed by a
    quarter of their pitch at the ends, so the wrap-around cable is a chord beside its
    ring, not on it.  O(N)."""
    nx, ny = (int(v) + 1 for v in topo.labels.max(axis=0)[:2])
    i, j = topo.labels[:, 0].astype(float), topo.labels[:, 1].astype(float)
    bow_i = ((i - (nx - 1) / 2) / max((nx - 1) / 2, 1)) ** 2
    bow_j = ((j - (ny - 1) / 2) / max((ny - 1) / 2, 1)) ** 2
    raw = np.stack([i + 0.25 * bow_j, j + 0.25 * bow_i], axis=1)
    return raw, [], [], "torus-grid"


def _circle(topo: Topology):
    """Any fabric: switch ``i`` at angle ``2πi/N`` (clockwise from the top).  O(N)."""
    n = topo.n_switches
    ang = 2 * math.pi * np.arange(n) / max(n, 1) - math.pi / 2
    return np.stack([np.cos(ang), np.sin(ang)], axis=1), [], [], "circle"


_FAMILIES = {"slimfly": _slimfly, "dragonfly": _dragonfly, "dsnf": _dsnf, "torus": _torus}


# -- helpers -----------------------------------------------------------------------------------
def _apart(raw: np.ndarray) -> bool:
    """Every position finite and no two switches on one spot (to 1e-9 of the figure)."""
    if not np.isfinite(raw).all():
        return False
    if len(raw) <= 1:
        return True
    span = float(np.ptp(raw, axis=0).max())
    if span == 0:
        return False
    snapped = np.round(raw / span * 1e9)
    return len(np.unique(snapped, axis=0)) == len(raw)


def _fitter(raw: np.ndarray):
    """The map of raw coordinates into the unit box: one scale for both axes (the aspect
    kept), the figure centred, :data:`_MARGIN` left on every side."""
    lo, hi = raw.min(axis=0), raw.max(axis=0)
    scale = (1 - 2 * _MARGIN) / max(float((hi - lo).max()), 1e-12)
    shift = 0.5 - (lo + hi) / 2 * scale
    return lambda pts: np.asarray(pts, dtype=float) * scale + shift


def _point(fit, x: float, y: float) -> dict:
    """A label's place in the unit box (kept inside it)."""
    px, py = np.clip(fit([x, y]), 0.0, 1.0)
    return {"x": round(float(px), 5), "y": round(float(py), 5)}


def _hosts(topo: Topology, xy: np.ndarray, cables: np.ndarray):
    """``(switch, xy)`` of every host: a fan of its switch's hosts, pointing away from the
    figure's centre, at 0.3 of the shorter of the shortest cable and ``1/√N`` (the spacing
    of switches) from its switch.  O(N + L + H)."""
    n = topo.n_switches
    sw = np.repeat(np.arange(n), topo.hosts)
    if not len(sw):
        return sw.astype(np.int64), np.zeros((0, 2))
    seat = np.arange(len(sw)) - topo.host_offset[:-1][sw]
    count = topo.hosts[sw].astype(float)
    lengths = np.linalg.norm(xy[cables[:, 0]] - xy[cables[:, 1]], axis=1) if len(cables) \
        else np.zeros(0)
    lengths = lengths[lengths > 0]
    dist = 0.3 * min(float(lengths.min()) if len(lengths) else 1.0, 1 / math.sqrt(n))
    away = xy - xy.mean(axis=0)
    base = np.arctan2(away[:, 1], away[:, 0])
    base[np.hypot(away[:, 0], away[:, 1]) < 1e-12] = -math.pi / 2     # the centre: up
    fan = np.where(count > 1, (seat - (count - 1) / 2) / np.maximum(count - 1, 1), 0.0)
    ang = base[sw] + 0.6 * math.pi * fan
    pos = xy[sw] + dist * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    return sw.astype(np.int64), np.clip(pos, 0.0, 1.0)
