"""Tests of the export layer: every file is parsed back and checked against the tables.

The OpenFlow files are executed by a small OpenFlow 1.3 pipeline interpreter (tuple-space
lookup per table, the handful of actions the exporter emits) for every pair of hosts, and the
path it takes must be the path ``TableSet.walk`` takes.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from ofsim import Switch, bucket_target, mac_int, run_table

from tablegen.errors import NotExpressible
from tablegen.exports import openflow as of
from tablegen.exports import openflow_text
from tablegen.exports.files import export_all, export_json, load_tables_json
from tablegen.exports.infiniband.lids import lid_plan
from tablegen.exports.infiniband.write import export_ib, path_sl_rows
from tablegen.exports.openflow import host_macs
from tablegen.exports.openflow_text import export_openflow
from tablegen.exports.writer import DEC, HEX, TEXT, RowFormats, row_fields, run_jobs
from tablegen.routing.build import build_tables
from tablegen.topologies.baselines import build_torus
from tablegen.topologies.dragonfly import build_dragonfly
from tablegen.topologies.dsnf import build_dsnf
from tablegen.topologies.slimfly import build_slimfly


@functools.lru_cache(maxsize=None)
def tables(kind: str, routing: str):
    topo = {"sf5": lambda: build_slimfly(5), "df": lambda: build_dragonfly(2, 4, 2),
            "dsnf": lambda: build_dsnf(64, 2), "torus": lambda: build_torus(4, 4)}[kind]()
    return build_tables(topo, routing)


@functools.lru_cache(maxsize=None)
def exported(kind: str, routing: str, tmp_root: str, profile: str = "ovs") -> Path:
    out = Path(tmp_root) / f"{kind}-{routing}-{profile}"
    export_all(tables(kind, routing), out, openflow_profile=profile)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("export"))


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,routing", [("sf5", "min"), ("sf5", "val-nta"), ("sf5", "ugal-l"),
                                          ("df", "val"), ("dsnf", "dsnf")])
def test_tables_json_round_trip(tmp_path, kind, routing):
    ts = tables(kind, routing)
    export_json(ts, tmp_path)
    back = load_tables_json(tmp_path / "tables.json", ts.topo)
    assert (back.routing, back.classes, back.num_vcs, back.vc_scheme, back.params) == (
        ts.routing, ts.classes, ts.num_vcs, ts.vc_scheme, ts.params)
    assert back.tables.keys() == ts.tables.keys()
    pairs = [(back.tables[k], ts.tables[k]) for k in ts.tables]
    pairs += [(back.alternatives, ts.alternatives), (back.vc_inc, ts.vc_inc)]
    if ts.exit_port is not None:
        pairs.append((back.exit_port, ts.exit_port))
    else:
        assert back.exit_port is None
    for a, b in pairs:
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    doc = json.loads((tmp_path / "tables.json").read_text())
    assert doc["tables"][ts.classes[-1].table1]["encoding"] == "int16-le-base64"
    topo = json.loads((tmp_path / "topology.json").read_text())
    assert {"switches", "links", "hosts"} <= topo.keys()
    assert len(topo["links"]) == len(ts.topo.links)


def test_tables_json_rejects_other_topology(tmp_path):
    export_json(tables("sf5", "min"), tmp_path)
    with pytest.raises(NotExpressible):
        load_tables_json(tmp_path / "tables.json", tables("df", "min").topo)


# ---------------------------------------------------------------------------------------------
# InfiniBand
# ---------------------------------------------------------------------------------------------
LFT_HEAD = re.compile(r"^Unicast lids \[0-(\d+)\] of switch Lid (\d+) guid 0x([0-9a-f]{16}) "
                      r"\('([^']*)'\):$")
LFT_ENTRY = re.compile(r"^0x([0-9a-f]{4}) (\d{3})(\s|$)")


def parse_lfts(path: Path) -> dict[str, dict[int, int]]:
    lfts: dict[str, dict[int, int]] = {}
    cur = None
    for line in path.read_text().splitlines():
        if m := LFT_HEAD.match(line):
            cur = lfts.setdefault("0x" + m.group(3), {})
        elif m := LFT_ENTRY.match(line):
            cur[int(m.group(1), 16)] = int(m.group(2))
    return lfts


def ib_maps(out: Path):
    g = json.loads((out / "ib" / "guids.json").read_text())
    peer = {}      # (switch guid, port) -> ("switch", guid, port) | ("host", port guid)
    for sw in g["switches"]:
        for p in sw["ports"]:
            kind = "host" if "host" in p else "switch"
            peer[(sw["guid"], p["port"])] = (kind, p["peer_guid"], p["peer_port"])
    return g, peer


@pytest.mark.parametrize("kind", ["sf5", "df"])
def test_lfts_cover_every_switch_and_lid_and_deliver(root, kind):
    ts = tables(kind, "min")
    out = exported(kind, "min", root)
    g, peer = ib_maps(out)
    lfts = parse_lfts(out / "ib" / "lfts.dump")
    lids = {sw["lid"] for sw in g["switches"]} | {h["lid"] for h in g["hosts"]}
    assert len(lids) == ts.topo.n_switches + ts.topo.n_hosts
    assert set(lfts) == {sw["guid"] for sw in g["switches"]}
    for sw in g["switches"]:
        lft = lfts[sw["guid"]]
        assert set(lft) == lids
        assert lft[sw["lid"]] == 0
    for h in g["hosts"]:
        assert lfts[g["switches"][h["switch"]]["guid"]][h["lid"]] == h["switch_port"]
    # follow the LFTs from every switch to every host
    for sw in g["switches"]:
        for h in g["hosts"]:
            cur, hops = sw["guid"], 0
            while True:
                port = lfts[cur][h["lid"]]
                kind_, guid, _ = peer[(cur, port)]
                if kind_ == "host":
                    assert guid == h["port_guid"]
                    break
                cur, hops = guid, hops + 1
                assert hops <= ts.cls("min").max_hops


def test_lft_entries_parse_like_opensm(root):
    # osm_ucast_file.c: "0x<lid>" then white space, the port, white space, then optionally
    # " portguid 0x<hex>" followed by white space or ':'.
    text = (exported("sf5", "min", root) / "ib" / "lfts.dump").read_text().splitlines()
    entries = [l for l in text if l.startswith("0x")]
    assert entries and all(re.match(r"^0x[0-9a-f]+\s+\d+\s.* portguid 0x[0-9a-f]{16}[:\s]", l)
                           for l in entries)
    assert all(" guid 0x" in l for l in text if l.startswith("Unicast lids"))


def test_lft_with_lmc_routes_every_lid_of_a_host(tmp_path):
    ts = tables("df", "min")
    export_ib(ts, tmp_path, lmc=2)
    g, _ = ib_maps(tmp_path)
    lfts = parse_lfts(tmp_path / "ib" / "lfts.dump")
    for h in g["hosts"]:
        lo, hi = h["lids"]
        assert lo % 4 == 0 and hi == lo + 3
        for lft in lfts.values():
            assert lft[lo] == lft[lo + 1] == lft[lo + 2] == lft[hi]
    assert all(len(lft) == ts.topo.n_switches + 4 * ts.topo.n_hosts for lft in lfts.values())


def test_lft_without_comments(tmp_path):
    ts = tables("sf5", "min")
    export_ib(ts, tmp_path, lft_comments=False)
    compact = parse_lfts(tmp_path / "ib" / "lfts.dump")
    export_ib(ts, tmp_path, lft_comments=True)
    assert compact == parse_lfts(tmp_path / "ib" / "lfts.dump")


SL2VL_HEAD = re.compile(r'^(Switch|Channel Adapter) 0x([0-9a-f]{16}), base LID (\d+), "([^"]*)"$')
SL2VL_ROW = re.compile(r"^(\d+)\s+(\d+)\s+:((?:\s+\d+){16})\s*$")


def parse_sl2vl(path: Path) -> dict[str, dict[tuple[int, int], int]]:
    out: dict[str, dict] = {}
    cur = None
    for line in path.read_text().splitlines():
        if m := SL2VL_HEAD.match(line):
            cur = out.setdefault("0x" + m.group(2), {})
        elif m := SL2VL_ROW.match(line):
            cur[(int(m.group(1)), int(m.group(2)))] = tuple(int(v) for v in m.group(3).split())
    return out


@pytest.mark.parametrize("kind", ["sf5", "df"])
def test_sl2vl_minimal_routing_needs_no_sl(root, kind):
    # VL 0 entering from a host (or port 0), VL 1 entering from a switch, whatever the SL;
    # HCAs send on VL 0; one path-SL row: "* * * 0".
    ts = tables(kind, "min")
    out = exported(kind, "min", root)
    g, _ = ib_maps(out)
    sl2vl = parse_sl2vl(out / "ib" / "sl2vl.dump")
    for sw in g["switches"]:
        rows = sl2vl[sw["guid"]]
        p = int(ts.topo.hosts[sw["id"]])
        assert {o for _, o in rows} == {q["port"] for q in sw["ports"]}
        assert {i for i, _ in rows} == set(range(sw["num_ports"] + 1))
        for (i, o), vls in rows.items():
            assert vls == ((0,) * 16 if i <= p else (1,) * 16), (sw["id"], i, o)
    assert all(r == {(0, 0): (0,) * 16} for guid, r in sl2vl.items()
               if guid in {h["port_guid"] for h in g["hosts"]})
    assert (out / "ib" / "path-sl.txt").read_text().splitlines()[-1] == "* * * 0"


NET_NODE = re.compile(r'^(Switch|Hca)\s+(\d+)\s+"([^"]+)"')
NET_PORT = re.compile(r'^\[(\d+)\]\s+"([^"]+)"\[(\d+)\]')


def test_ibsim_net_lists_both_link_ends_hcas_first(root):
    ts = tables("sf5", "min")
    topo = ts.topo
    out = exported("sf5", "min", root)
    g, _ = ib_maps(out)
    name_to_sw = {sw["name"]: sw["id"] for sw in g["switches"]}
    name_to_host = {h["name"]: h["id"] for h in g["hosts"]}
    records, cur, guid = [], None, None
    for line in (out / "ib" / "fabric.net").read_text().splitlines():
        if line.startswith(("switchguid=", "caguid=")):
            guid = line.split("=")[1]
        elif m := NET_NODE.match(line):
            cur = (m.group(1), m.group(3), int(m.group(2)), guid, [])
            records.append(cur)
            guid = None
        elif m := NET_PORT.match(line):
            cur[4].append((int(m.group(1)), m.group(2), int(m.group(3))))
    assert records[0][0] == "Hca"
    kinds = [r[0] for r in records]
    assert kinds == ["Hca"] * topo.n_hosts + ["Switch"] * topo.n_switches
    sw_ends, host_ends = set(), set()
    for kind, name, nports, guid, ports in records:
        assert guid is not None and name.endswith(guid[2:]), "absolute GUID line before record"
        for port, peer, peer_port in ports:
            if kind == "Switch":
                assert nports == int(topo.hosts[name_to_sw[name]]) + topo.radix
                if peer in name_to_sw:
                    sw_ends.add((name_to_sw[name], port, name_to_sw[peer], peer_port))
                else:
                    host_ends.add(("sw", name_to_sw[name], port, name_to_host[peer]))
            else:
                host_ends.add(("hca", name_to_host[name], port, name_to_sw[peer], peer_port))
    links = {tuple(int(v) for v in row) for row in topo.links}
    assert sw_ends == links | {(b, pb, a, pa) for a, pa, b, pb in links}
    ht = topo.host_table()
    assert host_ends == ({("sw", s, p, h) for h, s, p in ht.tolist()}
                         | {("hca", h, 1, s, p) for h, s, p in ht.tolist()})


def test_lid_plan_aligns_host_lids():
    topo = tables("sf5", "min").topo
    plan = lid_plan(topo, lmc=2)
    assert list(plan.switch_lid[:3]) == [1, 2, 3]
    assert np.all(plan.host_lid % 4 == 0) and plan.host_lid[0] > topo.n_switches
    assert plan.top == plan.host_lid[-1] + 3
    with pytest.raises(NotExpressible):
        lid_plan(topo, lmc=8)


def _first_match(rows, src, dst, off):
    for s, d, o, sl in rows:
        if s in ("*", src) and d in ("*", dst) and o in ("*", str(off)):
            return sl
    raise AssertionError("no row matches")


def test_path_sl_rows_are_compact_and_exact():
    guids = [f"0x{i:016x}" for i in range(6)]
    assert path_sl_rows(np.zeros((6, 6, 2), dtype=int), guids) == [("*", "*", "*", 0)]
    rng = np.random.default_rng(3)
    sl = np.zeros((6, 6, 2), dtype=int)
    sl[:, 2, :] = 3                         # a whole destination on SL 3
    sl[4, 5, :] = 1                         # one pair, both offsets
    sl[1, 0, 1] = 2                         # one path
    sl[:, 3, :] = rng.integers(0, 4, (6, 2))
    rows = path_sl_rows(sl, guids)
    assert rows[-1] == ("*", "*", "*", 0)
    assert ("*", guids[2], "*", 3) in rows and (guids[4], guids[5], "*", 1) in rows
    for i, j, k in np.ndindex(*sl.shape):
        assert _first_match(rows, guids[i], guids[j], k) == sl[i, j, k]
    assert len(rows) < sl.size


def test_guid2lid_pins_the_plan(root):
    out = exported("sf5", "min", root)
    g, _ = ib_maps(out)
    text = (out / "ib" / "guid2lid").read_text()
    recs = [l.split() for l in text.split("\n\n") if l.strip()]
    got = {r[0]: (int(r[1], 16), int(r[2], 16)) for r in recs}
    want = {sw["guid"]: (sw["lid"], sw["lid"]) for sw in g["switches"]}
    want |= {h["port_guid"]: tuple(h["lids"]) for h in g["hosts"]}
    assert got == want


def simulate_all(ts, out: Path):
    """Send a packet between every pair of hosts; compare each path with ``ts.walk``."""
    topo = ts.topo
    man = json.loads((out / "openflow" / "manifest.json").read_text())
    switches = []
    for s in man["switches"]:
        flows = (out / "openflow" / s["flows"]).read_text()
        groups = (out / "openflow" / s["groups"]).read_text() if s["groups"] else None
        switches.append(Switch(flows, groups))
    macs = [mac_int(h["mac"]) for h in man["hosts"]]
    assert macs == host_macs(topo).tolist()
    ht = topo.host_table()
    ingress = man["ingress"]
    vid_base = of.plan(ts, profile=man["profile"]).vid_base if "profile" in man else 0
    cls = ts.cls(man["choice_class"] if ingress["choice"] else ingress["class"])
    memo, walks = {}, {}
    checked = 0
    for hs, ss, ps in ht.tolist():
        for hd, sd, pd in ht.tolist():
            if hd == hs:
                continue        # OpenFlow drops a frame sent back out of its ingress port
            choice = hs * 7 + hd * 13
            # half the packets UDP (the source-choice table splits them by source port, or by
            # the IPv4 addresses in the standard profile: those of the emulation's plan), half
            # other traffic (the SELECT group, or the standard profile's table-miss entry)
            l4 = {"dl_type": 0x0800, "nw_proto": 17, "tp_src": 49152 + choice,
                  "nw_src": 0x0A000001 + hs, "nw_dst": 0x0A000001 + hd} if choice % 2 else {}
            pkt = {"in_port": ps, "vlan": None, "dst": macs[hd], "metadata": 0, "queue": None,
                   "vid_base": vid_base, **l4}
            sw, hops, chosen = ss, [], []
            while True:
                key = (sw, pkt["in_port"], tuple(pkt["vlan"] or ()), pkt["dst"],
                       pkt.get("tp_src"), pkt.get("nw_dst"))
                if key not in memo:
                    outputs, notes = [], []

                    def pick(buckets, notes=notes, choice=choice):
                        b = choice % len(buckets)
                        notes.append(bucket_target(buckets[b]))
                        return b

                    fresh = dict(pkt, vlan=None if pkt["vlan"] is None else list(pkt["vlan"]),
                                 chosen=notes)
                    run_table(switches[sw], 0, fresh, pick, outputs)
                    assert len(outputs) == 1
                    memo[key] = (outputs[0], notes)
                (port, after), notes = memo[key]
                chosen += notes
                if 1 <= port <= topo.hosts[sw]:
                    assert (sw, port) == (sd, pd) and after["vlan"] is None
                    break
                j = port - int(topo.hosts[sw]) - 1
                hops.append((sw, port, after["queue"]))
                nxt = int(topo.adj[sw, j])
                pkt = {"in_port": int(topo.hosts[nxt]) + 1 + int(topo.peer[sw, j]),
                       "vlan": list(after["vlan"]), "dst": after["dst"], "metadata": 0,
                       "queue": None, **l4}
                sw = nxt
                assert len(hops) <= cls.max_hops + 2
            if ss == sd:
                assert hops == [], "hosts of one switch talk directly"
                continue
            inter = chosen[0] if chosen else -1
            if (ss, sd, inter) not in walks:
                w = ts.walk(ss, sd, cls, inter)
                walks[(ss, sd, inter)] = list(zip(w["switches"][:-1], w["ports"], w["vcs"]))
            assert hops == walks[(ss, sd, inter)], (hs, hd, inter)
            checked += 1
    return checked


@pytest.mark.parametrize("kind,routing", [("sf5", "min"), ("sf5", "val-3h"), ("df", "val"),
                                          ("sf5", "val-nta"), ("sf5", "val"), ("df", "min"),
                                          ("dsnf", "dsnf"), ("df", "ugal-l")])
@pytest.mark.parametrize("profile", of.PROFILES)
def test_openflow_pipeline_follows_the_tables(root, kind, routing, profile):
    ts = tables(kind, routing)
    out = exported(kind, routing, root, profile)
    n = ts.topo.n_hosts
    assert simulate_all(ts, out) == n * n - int((ts.topo.hosts ** 2).sum())


@pytest.mark.parametrize("kind,routing,chunk_rows", [
    ("sf5", "min", None), ("sf5", "val", None), ("sf5", "val-nta", 1), ("sf5", "val-3h", None),
    ("sf5", "ugal-l", 3000), ("df", "min", 1), ("df", "val", None), ("df", "ugal-l", None),
    ("df", "val-3h", None), ("dsnf", "dsnf", 5000), ("torus", "val", None)])
@pytest.mark.parametrize("profile", of.PROFILES)
def test_openflow_files_are_the_program_entries(tmp_path, monkeypatch, kind, routing,
                                                chunk_rows, profile):
    """The files are made in compiled code from arrays; every line must be the ovs-ofctl
    text of tablegen.exports.openflow.program()'s entry (what the controller installs), in its order,
    whatever the chunks of switches formatted at a time."""
    if chunk_rows is not None:
        monkeypatch.setattr(openflow_text, "OF_CHUNK_ROWS", chunk_rows)
    ts = tables(kind, routing)
    export_openflow(ts, tmp_path, profile)
    p = of.plan(ts, profile=profile)
    for u in range(ts.topo.n_switches):
        prog = of.program(p, u)
        lines = (tmp_path / "openflow" / f"s{u:04d}.flows").read_text().splitlines()
        assert [l for l in lines if not l.startswith("#")] == [openflow_text.ofctl_flow(f)
                                                              for f in prog.flows]
        assert (tmp_path / "openflow" / f"s{u:04d}.groups").exists() == bool(prog.groups)
        if prog.groups:
            lines = (tmp_path / "openflow" / f"s{u:04d}.groups").read_text().splitlines()
            assert lines[1:] == [x for g in prog.groups
                                 for x in (f"# {g.note}", openflow_text.ofctl_group(g))]


def test_row_formats_write_numbers_and_strings_like_python():
    rows = RowFormats(["", "ab", "xyz"])
    a, b, c = row_fields(3)
    f = rows.add(f"<{a}|{b}|{c}|{a}>\n", [DEC, (HEX, 4), TEXT])
    g = rows.add(f"{b}\n", [DEC, DEC])
    rows.compile()
    rng = np.random.default_rng(1)
    vals = np.stack([rng.integers(0, 2**63 - 1, 200) >> rng.integers(0, 63, 200),
                     rng.integers(0, 2**40, 200) >> rng.integers(0, 40, 200),
                     rng.integers(0, 3, 200)], axis=1)
    vals[:3] = [[0, 0, 0], [9, 0xFFFF, 1], [2**63 - 1, 0x10000, 2]]
    fmt = np.where(np.arange(200) % 3, f, g)
    text, ends, at = rows.fill(fmt, vals, at=1)
    want = [f"<{x}|{y:04x}|{['', 'ab', 'xyz'][z]}|{x}>\n" if k == f else f"{y}\n"
            for k, (x, y, z) in zip(fmt.tolist(), vals.tolist())]
    assert bytes(text).decode() == "".join(want)
    assert ends.tolist() == np.cumsum([len(w) for w in want]).tolist()
    starts = (ends - [len(w) for w in want]).tolist()
    for w, k, y, i, s0 in zip(want, fmt.tolist(), vals[:, 1].tolist(), at.tolist(), starts):
        assert w[i - s0:].startswith(f"{y:04x}" if k == f else str(y))


def test_openflow_ugal_starts_minimal_and_ships_the_valiant_group(root):
    out = exported("df", "ugal-l", root)
    man = json.loads((out / "openflow" / "manifest.json").read_text())
    assert man["ingress"] == {"class": "min", "pcp": 1, "vid": 0, "choice": False}
    assert man["choice_class"] == "val-group"
    assert "group_id=1,type=select" in (out / "openflow" / man["switches"][0]["groups"]).read_text()


def test_openflow_files_per_switch_and_groups(root):
    out = exported("sf5", "val-3h", root)
    ts = tables("sf5", "val-3h")
    files = sorted(p.name for p in (out / "openflow").iterdir())
    n = ts.topo.n_switches
    assert len([f for f in files if f.endswith(".flows")]) == n
    assert len([f for f in files if f.endswith(".groups")]) == n
    text = (out / "openflow" / "s0000.groups").read_text()
    line = next(l for l in text.splitlines() if l.startswith("group_id="))
    weights = [int(w) for w in re.findall(r"bucket=weight:(\d+)", line)]
    assert sum(weights) == n - 1, "uniform over every other switch"
    assert not list((out / "openflow").glob("*.tmp-*"))


def test_openflow_dragonfly_aggregates_remote_groups(tmp_path):
    ts = build_tables(build_dragonfly(2, 8, 4), "min")     # 33 groups of 8 routers
    export_openflow(ts, tmp_path)
    text = (tmp_path / "openflow" / "s0000.flows").read_text()
    fwd = [l for l in text.splitlines() if l.startswith(f"table={of.T_FWD},") and "dl_vlan=0,dl_dst=" in l]
    group = [l for l in fwd if "/ff:ff:ff:00:00:00" in l]
    assert len(group) == ts.topo.n_groups - 1
    assert len(fwd) - len(group) - int(ts.topo.hosts[0]) == 8 - 1   # own group, per switch


# ---------------------------------------------------------------------------------------------
# errors and atomic writes
# ---------------------------------------------------------------------------------------------
def test_rejected_export_writes_nothing(tmp_path):
    ts = build_tables(build_slimfly(13), "min")        # 3,380 hosts x 16 LIDs > 0xBFFF
    with pytest.raises(NotExpressible, match="lower the LMC"):
        export_all(ts, tmp_path, lmc=4)
    assert list(tmp_path.iterdir()) == []


def test_failing_producer_leaves_no_partial_file(tmp_path):
    (tmp_path / "a.txt").write_text("old\n")

    def broken():
        yield "new first half\n"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_jobs(tmp_path, [("b.txt", lambda: ["complete\n"]), ("a.txt", broken)])
    assert (tmp_path / "a.txt").read_text() == "old\n"
    assert (tmp_path / "b.txt").read_text() == "complete\n"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]


def test_unwritable_target_leaves_no_temp_file(tmp_path):
    (tmp_path / "ib" / "sl2vl.dump").mkdir(parents=True)      # os.replace onto a directory fails
    with pytest.raises(OSError):
        export_ib(tables("sf5", "min"), tmp_path)
    assert not list((tmp_path / "ib").glob("*.tmp-*"))
    assert parse_lfts(tmp_path / "ib" / "lfts.dump")          # finished before, complete


def test_unknown_format():
    with pytest.raises(NotExpressible, match="unknown export format"):
        export_all(tables("sf5", "min"), "/nonexistent", formats=("pdf",))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_openflow_group_majority_is_the_most_used_lowest_port(seed):
    """The group entries' port per (switch, remote group): the port most of the group's
    switches are reached by, the lowest on a tie, against a plain count; an own group and
    a group reached fewer than twice by one port get switch entries."""
    topo = build_dragonfly(2, 4, 2)
    rng = np.random.default_rng(seed)
    table = build_tables(topo, "min").tables["min"].copy()
    n = topo.n_switches
    mixed = rng.random((n, n)) < 0.4                      # ties and minorities on purpose
    table[mixed] = rng.integers(0, topo.radix, mixed.sum())
    table[np.eye(n, dtype=bool)] = -1
    grp, G = topo.group, topo.n_groups
    use, maj, exc = of._aggregate(table, grp, G)
    for u in range(n):
        for g in range(G):
            counts = np.bincount(table[u][(grp == g) & (table[u] >= 0)],
                                 minlength=topo.radix)
            assert maj[u, g] == int(np.argmax(counts))
            assert use[u, g] == (g != grp[u] and counts.max() >= 2)
    covered = use[np.arange(n)[:, None], grp[None, :]] & (table == maj[:, grp])
    assert np.array_equal(exc, (table >= 0) & ~covered)
