"""The fabric file (tablegen.fabrics.fabric) and plans cabled on purpose with missing and moved
cables (tablegen.fabrics.cabled): round trips, contradictions refused, the truth consistent."""

import json

import pytest

from tablegen.errors import BadInput
from tablegen.fabrics.cabled import cabled, planned_cables
from tablegen.fabrics.fabric import Fabric, norm_id
from tablegen.fabrics.match import match, put_right
from tablegen.topologies.spec import build


@pytest.mark.parametrize("spec", ["slimfly:q=5", "dsnf:n=32", "dragonfly:p=2,a=4,h=2"])
def test_a_cabled_plan_maps_back_through_its_truth(spec, tmp_path):
    topo = build(spec)
    c = cabled(topo, seed=7, remove=2, move=2)
    f = c.fabric
    path = tmp_path / "fabric.json"
    f.save(path)
    assert Fabric.load(path) == f
    plan = set(planned_cables(topo))
    removed = {tuple(r["cable"]) for r in c.removed}
    moved = {tuple(m["cable"]) for m in c.moved}
    seen = set()
    for (a, pa), (b, pb) in f.cables:
        s, t = c.switch[a], c.switch[b]
        ps, pt = c.port[a][pa], c.port[b][pb]
        cable = (s, ps, t, pt) if (s, ps) < (t, pt) else (t, pt, s, ps)
        if cable in plan:
            seen.add(cable)
    assert len(removed) == 2 and len(moved) == 2 and not removed & moved
    assert seen == plan - removed - moved
    # hosts sit on the fabric ports of their plan ports 1..hosts[s]
    off = topo.host_offset
    for h, d in f.hosts.items():
        s = c.switch[d["switch"]]
        assert off[s] <= c.host[h] < off[s + 1] and c.port[d["switch"]][d["port"]] == \
            c.host[h] - off[s] + 1


def _doc():
    return cabled(build("dsnf:n=16"), seed=1).fabric.to_dict()


@pytest.mark.parametrize("edit,needle", [
    (lambda d: d["cables"].append(dict(d["cables"][0])), "expected one cable per port"),
    (lambda d: d["cables"].append({"a": d["cables"][0]["a"], "b": d["cables"][0]["a"]}),
     "to itself"),
    (lambda d: d["switches"].append(dict(d["switches"][0])), "listed twice"),
    (lambda d: d["cables"][0]["a"].__setitem__(1, 999), "expected 1 <= port <="),
    (lambda d: d["hosts"][0].__setitem__("port", d["cables"][0]["a"][1])
     or d["hosts"][0].__setitem__("switch", d["cables"][0]["a"][0]), "one cable per port"),
    (lambda d: d.__setitem__("format", "x"), "not a fabric file"),
    (lambda d: d["switches"][0].__setitem__("id", "0xzz"), "expected a GUID"),
    (lambda d: d["cables"][0].pop("b"), "lacks"),
])
def test_a_contradicting_fabric_is_one_line(edit, needle):
    d = _doc()
    edit(d)
    with pytest.raises(BadInput, match=needle) as e:
        Fabric.from_dict(json.loads(json.dumps(d)))
    assert "\n" not in str(e.value)


def test_truncated_file_and_ids(tmp_path):
    p = tmp_path / "f.json"
    p.write_text(json.dumps(_doc())[:500])
    with pytest.raises(BadInput, match="not JSON"):
        Fabric.load(p)
    assert norm_id("00:02:c9:03:00:a1") == "0x00000002c90300a1"
    assert norm_id(0x2C903) == norm_id("0x2C903") == "0x000000000002c903"
    with pytest.raises(BadInput):
        norm_id(True)


def test_put_right_carries_out_every_action():
    """Pure logic: the cabling after reconcile's actions maps onto the plan exactly, and an
    action with no free port is refused in one line."""
    topo = build("slimfly:q=5")
    c = cabled(topo, seed=6, remove=2, move=1)
    r = match(c.fabric, topo)
    fixed = put_right(c.fabric, r)
    assert match(fixed, topo).matches and not match(c.fabric, topo).matches
    assert len(fixed.cables) == len(topo.links)
    r.missing[0]["ports"][1] = None
    with pytest.raises(BadInput, match="no free port"):
        put_right(c.fabric, r)


def test_reconcile_put_right_writes_the_fixed_fabric(tmp_path, capsys):
    """``reconcile --put-right FILE`` writes a fabric that reconciles with exit 0; a FILE in
    no directory is one line, exit 2."""
    from fabroute.cli import main
    topo = build("slimfly:q=5")
    src = tmp_path / "f.json"
    cabled(topo, seed=6, remove=2, move=1).fabric.save(src)
    fixed = tmp_path / "fixed.json"
    assert main(["reconcile", str(src), "slimfly:q=5", "--put-right", str(fixed)]) == 1
    assert main(["reconcile", str(fixed), "slimfly:q=5"]) == 0
    capsys.readouterr()
    bad = tmp_path / "none" / "x.json"
    assert main(["reconcile", str(src), "slimfly:q=5", "--put-right", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--put-right" in err and "\n" not in err and not bad.parent.exists()
