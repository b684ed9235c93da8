"""The ibnetdiscover reader (tablegen.fabrics.ibnetdiscover), the ibsim net writer for any
fabric (tablegen.fabrics.ibsim_net) and load_fabric (tablegen.fabrics.read).

tests/data/ibnetdiscover-small.txt is one real run of ``ibnetdiscover`` (infiniband-diags 44)
against ibsim simulating tests/data/ibnetdiscover-small.fabric.json (names with spaces, a
nameless switch, a cable between two ports of one switch); the ``ib`` tests run it live on
Slim Fly and DSN-F fabrics cabled with random GUIDs, permuted ports, missing and moved cables.
"""

import json
import re
from pathlib import Path

import pytest

from tablegen.errors import BadInput
from tablegen.exports.infiniband.read import parse_net
from tablegen.fabrics import read as fabric_read
from tablegen.fabrics.cabled import cabled
from tablegen.fabrics.fabric import Fabric
from tablegen.fabrics.ibnetdiscover import parse_ibnetdiscover
from tablegen.fabrics.ibsim_net import net_names, net_text
from tablegen.fabrics.read import load_fabric
from tablegen.topologies.spec import build

from conftest import ib_processes

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "ibnetdiscover-small.txt"
TRUTH = DATA / "ibnetdiscover-small.fabric.json"
NAMELESS = "0x248a070300aabb01"       # the truth's switch without a name


def _same_cabling(a: Fabric, b: Fabric) -> None:
    assert a.switches == b.switches
    assert a.hosts == b.hosts
    assert a.cables == b.cables


def _truth_as_discovered() -> Fabric:
    """The recorded fabric as ibnetdiscover reports it: the nameless switch carries the name
    the net file gave it (ibnetdiscover's own id for it)."""
    f = Fabric.load(TRUTH)
    assert f.switches[NAMELESS]["name"] == ""
    f.switches[NAMELESS]["name"] = "S-" + NAMELESS[2:]
    return f


def test_recorded_output_reads_back_as_its_fabric():
    got = parse_ibnetdiscover(RECORDED.read_text(), str(RECORDED))
    assert got.source == "ibnetdiscover"
    _same_cabling(got, _truth_as_discovered())
    assert got.switches["0x7cfe900300b4c5d6"]["name"] == "sw r2 u12 (spine)"
    assert got.hosts["0x0002c90300f00041"] == {"name": "login-1 mlx5_0",
                                               "switch": "0x7cfe900300b4c5d6", "port": 40}
    assert ((NAMELESS, 1), (NAMELESS, 2)) in got.cables


def test_load_fabric_tells_the_formats_apart(tmp_path):
    from_text = load_fabric(RECORDED)
    from_json = load_fabric(TRUTH)
    assert from_json == Fabric.load(TRUTH)
    _same_cabling(from_text, _truth_as_discovered())
    # detection is by content: the JSON under a .txt name is still a fabric file
    renamed = tmp_path / "cabling.txt"
    renamed.write_bytes(TRUTH.read_bytes())
    assert load_fabric(renamed) == from_json


@pytest.mark.parametrize("content,needle", [
    (b"hello world\n", "neither a fabric file"),
    (b"{\"format\": ", "not JSON"),
    (b"{\"format\": \"other\"}", "not a fabric file"),
    (b"Switch\t8 \"S-01\"\t\t# \"\xff\xfe\" base port 0 lid 1 lmc 0\n", "not UTF-8"),
])
def test_load_fabric_refuses_other_files_in_one_line(tmp_path, content, needle):
    p = tmp_path / "f"
    p.write_bytes(content)
    with pytest.raises(BadInput, match=needle) as e:
        load_fabric(p)
    assert "\n" not in str(e.value)
    with pytest.raises(BadInput, match="cannot be read"):
        load_fabric(tmp_path / "absent")


def test_load_fabric_reads_at_most_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(fabric_read, "MAX_FILE_BYTES", 1000)
    with pytest.raises(BadInput, match="larger than"):
        load_fabric(RECORDED)
    small = tmp_path / "small.json"
    small.write_text(json.dumps(Fabric("x", {"0x1": {"name": "", "ports": 2}}).to_dict()))
    assert load_fabric(small).switch_ids == ["0x0000000000000001"]


def _lines():
    return RECORDED.read_text().splitlines(keepends=True)


def test_every_truncation_is_refused():
    """Cut at any line boundary: a link listed once, or the initiating CA (printed after every
    switch) without a section; the cut that keeps only the nameless switch and its own loop
    cable is caught by the latter alone."""
    lines = _lines()
    last_link = max(i for i, s in enumerate(lines) if s.startswith("["))
    for cut in range(last_link):
        with pytest.raises(BadInput) as e:
            parse_ibnetdiscover("".join(lines[:cut]), "cut")
        assert "\n" not in str(e.value)
    # a cut inside a link line (before its comment) leaves a line that is no link
    half = lines[last_link][:lines[last_link].index("\t") + 5]
    with pytest.raises(BadInput, match=rf"cut:{last_link + 1}: .*expected a Switch/Ca"):
        parse_ibnetdiscover("".join(lines[:last_link]) + half, "cut")


def _edited(old: str, new: str, count: int = 1) -> str:
    text = RECORDED.read_text()
    assert text.count(old) >= count, old
    return text.replace(old, new, count)


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize("old,new,at,needle", [
    # switch 0x2c90300a1b2d0 lists its cable to ...b2c3 on port 35, which lists port 36
    ("[36]\t\"S-0002c90300a1b2c3\"[35]", "[36]\t\"S-0002c90300a1b2c3\"[34]",
     "[36]\t\"S-0002c90300a1b2c3\"[34]", "listed only here"),
    ("[7]\t\"S-7cfe900300b4c5d6\"[2]", "[7]\t\"S-7cfe900300b4c5d6\"[3]",
     "[2]\t\"S-0002c90300a1b2d0\"[7]", "but line 31 has .* expected both listings of a "
     "link to agree"),
    ("[1](2c90300f00031) \t\"S-", "[1](2c90300f00099) \t\"S-", "[1](2c90300f00031) \t\t#",
     "port GUID of 0x0002c90300f00030\\[1\\] is 0x0002c90300f00031 here"),
    ("[17]\t\"H-", "[37]\t\"H-", "[37]\t\"H-", "port 37 of switch .* has 36 ports"),
    ("[3]\t\"S-248a070300aabb01\"[8]", "[3]\t\"S-248a070300aabb01\"[8\n",
     "[3]\t\"S-248a070300aabb01\"[8\n", "expected a Switch/Ca section line"),
    ("switchguid=0x2c90300a1b2d0(2c90300a1b2d0)\nSwitch\t36 \"S-0002c90300a1b2d0\"",
     "switchguid=0x2c90300a1b2c3(2c90300a1b2c3)\nSwitch\t36 \"S-0002c90300a1b2c3\"",
     "Switch\t36 \"S-0002c90300a1b2c3\"\t\t# \"sw-r1-u12", "second section"),
    ("Switch\t40 \"S-7cfe900300b4c5d6", "Switch\t40 \"S-7cfe900300b4c5d7", "Switch\t40",
     "follows the GUID line of"),
    ("[17]\t\"H-0002c90300f00020\"[1](2c90300f00021) ", "[17]\t\"S-0002c90300f00020\"[1]",
     "[17]\t\"S-", "line 62 makes it a CA; expected one kind per GUID"),
    ("Ca\t1 \"H-0002c90300f00020\"", "Rt\t1 \"R-0002c90300f00020\"", "Rt\t1",
     "router 0x0002c90300f00020; expected switches and CAs only"),
])
def test_an_inconsistent_output_is_one_line_naming_its_line(old, new, at, needle):
    text = _edited(old, new)
    with pytest.raises(BadInput, match=needle) as e:
        parse_ibnetdiscover(text, "x")
    msg = str(e.value)
    assert "\n" not in msg
    assert re.match(rf"x:{_line_of(text, at)}: ", msg), msg


def test_a_port_guid_on_two_cas_is_refused():
    text = _edited("(2c90300f00021)", "(2c90300f00011)", 2)
    with pytest.raises(BadInput, match="port GUID 0x0002c90300f00011 is used twice") as e:
        parse_ibnetdiscover(text, "x")
    first, last = [no for no, line in enumerate(text.splitlines(), 1)
                   if line.startswith("[1](2c90300f00011)")]
    assert str(e.value).startswith(f"x:{last}: ") and f"also at line {first}" in str(e.value)


def test_a_self_cabled_port_and_a_ca_to_ca_link_are_refused():
    text = _edited("[1]\t\"S-248a070300aabb01\"[2]", "[1]\t\"S-248a070300aabb01\"[1]")
    text = text.replace("[2]\t\"S-248a070300aabb01\"[1]", "")
    with pytest.raises(BadInput, match="cabled to itself"):
        parse_ibnetdiscover(text)
    ca_ca = ('caguid=0x10\nCa\t1 "H-0000000000000010"\t\t# "a"\n'
             '[1](11) \t"H-0000000000000020"[1] (21) \t\t# lid 1 lmc 0 "b" lid 2 4xSDR\n'
             'caguid=0x20\nCa\t1 "H-0000000000000020"\t\t# "b"\n'
             '[1](21) \t"H-0000000000000010"[1] (11) \t\t# lid 2 lmc 0 "a" lid 1 4xSDR\n')
    with pytest.raises(BadInput, match="cabled to CA .* directly"):
        parse_ibnetdiscover(ca_ca)
    with pytest.raises(BadInput, match="no Switch or Ca section"):
        parse_ibnetdiscover("#\n# nothing\n")


def test_net_text_wires_what_the_fabric_says():
    f = Fabric.load(TRUTH)
    names = net_names(f)
    assert names[NAMELESS] == "S-" + NAMELESS[2:] and names["0x0002c90300f00011"] == \
        "node017 HCA-1"
    net = parse_net(net_text(f), "net")
    sw_links = {((f"0x{g:016x}", p), (f"0x{peer:016x}", pp))
                for g, (kind, ports) in net.items() if kind == "Switch"
                for p, (peer, pp) in ports.items() if f"0x{peer:016x}" in f.switches}
    assert sw_links == set(f.cables) | {(b, a) for a, b in f.cables}
    for h, d in f.hosts.items():             # the CA of port GUID h has node GUID h - 1
        node = int(h, 16) - 1
        assert net[node] == ("Hca", {1: (int(d["switch"], 16), d["port"])})
    # a host whose node GUID would be another node's id cannot be simulated
    bad = Fabric("x", {"0x0000000000000010": {"name": "", "ports": 4}},
                 {"0x0000000000000011": {"name": "", "switch": "0x0000000000000010",
                                         "port": 1}})
    with pytest.raises(BadInput, match="another node's id"):
        net_text(bad)


@pytest.mark.ib
@pytest.mark.usefixtures("ib_tools")
@pytest.mark.parametrize("spec", ["slimfly:q=5", "dsnf:n=32"])
def test_real_ibnetdiscover_on_a_miscabled_fabric_reads_back_exactly(spec, tmp_path):
    from emulation.ibsim.discover import discover

    c = cabled(build(spec), seed=11, remove=2, move=1)
    assert len(c.removed) == 2 and len(c.moved) == 1
    text = discover(c.fabric, keep=tmp_path / "run")
    assert ib_processes() == [], "ibsim of this test still runs"
    assert (tmp_path / "run" / "fabric.net").read_text() == net_text(c.fabric)
    path = tmp_path / "ibnetdiscover.txt"
    path.write_text(text)
    got = load_fabric(path)
    assert got.source == "ibnetdiscover"
    _same_cabling(got, c.fabric)
    # the moved cable's far end sits on a switch that is no neighbour in the plan
    m = c.moved[0]
    end = tuple(m["to"])
    assert any(end in cable for cable in got.cables)
