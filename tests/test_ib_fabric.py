"""A fabric as cabled routed and loaded into REAL OpenSM on ibsim (issue 26): Slim Fly q = 5
with random GUIDs, permuted ports, 2 cables removed and 1 moved, discovered by real
``ibnetdiscover``; ``reconcile`` names exactly those cables, ``ib export --fabric`` +
``verify`` + ``ib apply`` on that very fabric (ibsim started from its cabling) give 0
mismatches; the cables then put right live as reconcile says (ibsim ``Unlink``/``Link``
under the running OpenSM): ``reconcile`` on the live ``ibnetdiscover`` exits 0 and the full
tables load with 0 mismatches."""

import json

import pytest

from emulation.ibsim.discover import discover
from fabroute.cli import main
from tablegen.fabrics.cabled import cabled
from tablegen.fabrics.read import load_fabric
from tablegen.topologies.spec import build

from conftest import ib_processes

pytestmark = [pytest.mark.ib, pytest.mark.usefixtures("ib_tools")]

# seed 6: `reconcile` names exactly the 2 removed and 1 moved cables with today's matcher
SPEC, SEED = "slimfly:q=5", 6


def _apply(d, capsys) -> dict:
    capsys.readouterr()
    assert main(["ib", "apply", str(d), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["mismatches"] == 0
    assert rep["lft"]["entries"] > 0 and rep["sl2vl"]["entries"] > 0
    return rep


def test_the_fabric_as_cabled_loads_with_0_mismatches(tmp_path, capsys):
    topo = build(SPEC)
    c = cabled(topo, seed=SEED, remove=2, move=1)
    fab = tmp_path / "ibnetdiscover.txt"
    fab.write_text(discover(c.fabric))

    assert main(["reconcile", str(fab), SPEC, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (len(doc["missing"]), len(doc["moved"]), len(doc["extra"])) == (2, 1, 0)

    out = tmp_path / "degraded"
    assert main(["ib", "export", SPEC, "--fabric", str(fab), "--routing", "val-3h",
                 "--lmc", "1", "--out", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    fid = {p: g for g, p in c.switch.items()}
    truth = sorted(f"{min(fid[x['cable'][0]], fid[x['cable'][2]])}-"
                   f"{max(fid[x['cable'][0]], fid[x['cable'][2]])}" for x in c.removed + c.moved)
    m = json.loads((out / "fabric-map.json").read_text())
    sw = {x["planned"]: x["id"] for x in m["switches"]}
    got = sorted(f"{min(sw[a], sw[b])}-{max(sw[a], sw[b])}" for a, b in m["failed"])
    assert got == truth and man["exports"]["fabric"]["source"] == "ibnetdiscover"
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "paths walked" in capsys.readouterr().out      # walked on the fabric's wiring
    _apply(out, capsys)
    assert ib_processes() == []

    # the cables put right live, as reconcile says: ibsim Unlink/Link under the running
    # OpenSM (``ib update``), ibnetdiscover on the live subnet, the full tables loaded
    fixed = tmp_path / "fixed.json"
    assert main(["reconcile", str(fab), SPEC, "--put-right", str(fixed)]) == 1
    assert load_fabric(fixed).source == "ibnetdiscover put right"
    full = tmp_path / "full"
    assert main(["ib", "export", SPEC, "--fabric", str(fixed), "--routing", "val-3h",
                 "--lmc", "1", "--out", str(full)]) == 0
    assert json.loads((full / "manifest.json").read_text())["exports"]["fabric"]["failed"] == ""
    assert main(["verify", str(full)]) == 0
    live = tmp_path / "ibnetdiscover-after.txt"
    capsys.readouterr()
    assert main(["ib", "update", str(out), str(full), "--discover", str(live), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["mismatches"] == 0 and rep["reach"]["undelivered"] == 0
    cmds = rep["fabric"]["ibsim_commands"]
    assert (cmds["Unlink"], cmds["Link"]) == (1, 3)      # 2 plugged, 1 moved
    assert rep["fabric"]["ports_replugged"] == 1          # the moved cable's staying end
    assert "fail" not in rep["topology"][1]
    assert main(["reconcile", str(live), SPEC]) == 0
    assert load_fabric(live).cables == load_fabric(fixed).cables
    assert ib_processes() == []

