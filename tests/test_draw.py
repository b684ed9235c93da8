"""``fabroute draw`` and the layouts behind it (issue 28, item 5): every family's positions
are finite, inside the unit box and apart; every cable of the topology is listed exactly
once with the kind its construction gives it (rules restated here from the papers, not read
from the layout); the command writes a valid SVG and PNG, and a bad suffix is exit 2 with
nothing written."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np
import pytest

from fabroute.cli import main
from tablegen.drawing.positions import layout
from tablegen.topologies.spec import build

SPECS = ["slimfly:q=5", "slimfly:q=4", "dragonfly:p=2,a=4,h=2", "dsnf:n=64", "dsnf:n=32",
         "torus:x=5,y=3", "torus:x=2,y=3", "dsn:n=32", "dln:n=32", "slimfly:q=5,fail=0-1"]


@pytest.fixture(scope="module", params=SPECS)
def drawn(request):
    topo = build(request.param)
    return topo, layout(topo, hosts=True)


def _cables_of(topo) -> Counter:
    """Every cable as ``(a, b, kind)`` from the port table itself (each seen from both
    ends, so every count is halved)."""
    s, j = np.nonzero(topo.adj >= 0)
    ends = Counter((min(a, b), max(a, b), topo.kind_names[k]) for a, b, k in
                   zip(s.tolist(), topo.adj[s, j].tolist(), topo.link_kind[s, j].tolist()))
    assert all(c % 2 == 0 for c in ends.values())
    return Counter({e: c // 2 for e, c in ends.items()})


def test_positions_are_finite_in_the_box_and_apart(drawn):
    topo, lay = drawn
    xy = lay.xy
    assert xy.shape == (topo.n_switches, 2)
    assert np.isfinite(xy).all() and (xy >= 0).all() and (xy <= 1).all()
    gaps = np.linalg.norm(xy[:, None] - xy[None], axis=2) + np.eye(len(xy))
    assert gaps.min() > 1e-3
    doc = lay.to_dict()     # still apart once rounded for JSON
    assert len({(s["x"], s["y"]) for s in doc["switches"]}) == topo.n_switches


def test_every_cable_once_with_its_kind(drawn):
    topo, lay = drawn
    listed = Counter((min(a, b), max(a, b), lay.kinds[k])
                     for (a, b), k in zip(lay.cables.tolist(), lay.cable_kind.tolist()))
    assert listed == _cables_of(topo)
    assert sum(lay.kind_counts().values()) == len(lay.cables) == len(topo.links)


def _slimfly_kind(lab, a, b):
    (sa, xa, _), (sb, xb, _) = lab[a], lab[b]
    if sa != sb:
        return "cross"
    assert xa == xb, "no cable joins two groups of one subgraph"
    return "intra"


def _dsnf_kind(lab, p, a, b):
    (la, ka, sa), (lb, kb, sb) = lab[a], lab[b]
    m = 2 ** p
    if (la, sa) == (lb, sb) and abs(ka - kb) == 1:
        return "layer"
    if ka == kb and sa == sb and ({la, lb} == {1, p} or abs(la - lb) == 1):
        return "local"
    assert ka == kb == 0, (a, b)
    (la, sa), (lb, sb) = sorted([(la, sa), (lb, sb)])
    if (la, lb) == (1, p) and (sa - sb) % m == 1:
        return "ring"
    assert lb == la + 1 and (sb - sa) % m == 2 ** (p - la), (a, b)
    return "shortcut"


def _rule(topo):
    """The kind of cable ``a``–``b`` as the family's construction defines it."""
    lab = [tuple(r) for r in topo.labels.tolist()]
    if topo.kind == "slimfly":
        return lambda a, b: _slimfly_kind(lab, a, b)
    if topo.kind == "dragonfly":
        return lambda a, b: "local" if lab[a][0] == lab[b][0] else "global"
    if topo.kind == "dsnf":
        return lambda a, b: _dsnf_kind(lab, topo.params["p"], a, b)
    if topo.kind == "torus":
        return lambda a, b: "x" if lab[a][1] == lab[b][1] else "y"
    return None     # DSN-x, DLN-x: a ring plus shortcuts (test_kinds_follow_the_construction)


def test_kinds_follow_the_construction(drawn):
    topo, lay = drawn
    rule = _rule(topo)
    if rule is None:    # the ring joins i and i + 1 (mod n); shortcuts may join any pair
        n = topo.n_switches
        ring = lay.cables[lay.cable_kind == lay.kinds.index("ring")]
        assert sorted(tuple(sorted(c)) for c in ring.tolist()) == \
            sorted(tuple(sorted((i, (i + 1) % n))) for i in range(n))
        return
    for (a, b), k in zip(lay.cables.tolist(), lay.cable_kind.tolist()):
        assert lay.kinds[k] == rule(a, b), (a, b)


def test_each_family_in_its_own_layout():
    styles = {s: layout(build(s)).style for s in
              ("slimfly:q=5", "dragonfly:p=2,a=4,h=2", "dsnf:n=64", "torus:x=4,y=4",
               "dsn:n=32")}
    assert styles == {"slimfly:q=5": "slimfly-subgraphs",
                      "dragonfly:p=2,a=4,h=2": "dragonfly-groups",
                      "dsnf:n=64": "dsnf-ring", "torus:x=4,y=4": "torus-grid",
                      "dsn:n=32": "circle"}
    sf = layout(build("slimfly:q=5"))
    # the two subgraphs side by side: every router of subgraph 0 left of subgraph 1's
    left, right = sf.xy[sf.labels[:, 0] == 0, 0], sf.xy[sf.labels[:, 0] == 1, 0]
    assert left.max() < right.min()
    assert [s["label"] for s in sf.subgraphs] == ["subgraph 0", "subgraph 1"]
    assert len(sf.groups) == 10
    # DSN-F: layer 0 on one circle around the box's centre
    ring = layout(build("dsnf:n=64"))
    radius = np.linalg.norm(ring.xy - 0.5, axis=1)
    assert np.ptp(radius) < 1e-9


def test_labels_that_do_not_fit_fall_back_to_the_circle():
    topo = build("slimfly:q=5")
    odd = dataclasses.replace(topo, labels=np.zeros_like(topo.labels))
    lay = layout(odd)
    assert lay.style == "circle"
    assert len(np.unique(np.round(lay.xy, 6), axis=0)) == topo.n_switches
    assert len(lay.cables) == len(topo.links)
    narrow = dataclasses.replace(build("dsnf:n=32"), labels=np.zeros((32, 1), dtype=np.int32))
    assert layout(narrow).style == "circle"


def test_hosts_sit_beside_their_switch(drawn):
    topo, lay = drawn
    assert len(lay.host_xy) == topo.n_hosts
    assert lay.host_switch.tolist() == topo.host_table()[:, 1].tolist()
    # nearer to its own switch than to any other, and not on it
    dist = np.linalg.norm(lay.host_xy[:, None] - lay.xy[None], axis=2)
    assert (dist.argmin(axis=1) == lay.host_switch).all()
    assert dist.min() > 0
    assert "hosts" in lay.to_dict() and "hosts" not in layout(topo).to_dict()


def test_failed_cables_are_listed_not_drawn_as_cables():
    lay = layout(build("slimfly:q=5,fail=0-1"))
    doc = lay.to_dict()
    assert doc["failed"] == [[0, 1]]
    assert not any({a, b} == {0, 1} for a, b, _ in doc["cables"])


def test_the_document_is_json(drawn):
    topo, lay = drawn
    doc = json.loads(json.dumps(lay.to_dict()))
    assert doc["topology"] == topo.name() and doc["n_cables"] == len(doc["cables"])
    assert {k["kind"] for k in doc["cable_kinds"]} == {c[2] for c in doc["cables"]}
    assert all(0 <= g["x"] <= 1 and 0 <= g["y"] <= 1 for g in doc["groups"])


# -- the command -------------------------------------------------------------------------------
def test_draw_writes_an_svg(tmp_path, capsys):
    out = tmp_path / "sf.svg"
    assert main(["draw", "slimfly:q=5", "--out", str(out)]) == 0
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    text = " ".join(" ".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))
    assert "slimfly:q=5,p=4,xi=2: 50 switches, 200 hosts, 175 cables" in text
    assert "between the two subgraphs (125)" in text and "intra-group" in text
    said = capsys.readouterr().out
    assert "175 cables (intra 50, cross 125)" in said and f"wrote {out}" in said
    assert [p.name for p in tmp_path.iterdir()] == ["sf.svg"]     # no temporary left


def test_draw_writes_a_png_with_hosts_and_json(tmp_path, capsys):
    out = tmp_path / "df.png"
    assert main(["draw", "dragonfly:p=2,a=4,h=2", "--out", str(out), "--hosts",
                 "--json"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(capsys.readouterr().out)
    assert doc["out"] == str(out) and len(doc["hosts"]) == doc["n_hosts"] == 72
    assert {k["kind"]: k["count"] for k in doc["cable_kinds"]} == {"local": 54, "global": 36}


def test_json_alone_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["draw", "dsnf:n=64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"] == "dsnf-ring"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["--out", "f.pdf"], ["--out", "fabric"], ["--out", "f.svg.x"],
                                  []])
def test_bad_output_is_exit_2_and_nothing_written(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["draw", "slimfly:q=5", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "expected" in err
    assert not list(tmp_path.iterdir())


def test_bad_spec_is_exit_2_and_nothing_written(tmp_path, capsys):
    assert main(["draw", "slimfly:q=6", "--out", str(tmp_path / "f.svg")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_a_table_directory_draws_its_topology(tmp_path, capsys):
    d = tmp_path / "set"
    assert main(["tables", "dsnf:n=16", "--routing", "min", "--formats", "json", "--out",
                 str(d)]) == 0
    capsys.readouterr()
    assert main(["draw", str(d), "--json"]) == 0
    from_dir = json.loads(capsys.readouterr().out)
    assert main(["draw", "dsnf:n=16", "--json"]) == 0
    assert from_dir == json.loads(capsys.readouterr().out)
