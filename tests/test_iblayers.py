"""InfiniBand layers, SLs and their verification under IB semantics (tablegen.exports.infiniband.layers), and
the files ``fabroute ib export`` writes from them.  The loading into real OpenSM is
tests/test_ib_apply.py."""

import functools
import json
import re

import numpy as np
import pytest

from fabroute.cli import main
from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.layers import build_layers, walk_layers
from tablegen.exports.infiniband.limits import IB_DATA_VLS
from tablegen.exports.infiniband.sls import assign_sls, ib_routing, sl2vl_array, verify_ib
from tablegen.exports.infiniband.write import export_ib, host_path_sls, ib_layers
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

from conftest import edited_copy


@functools.lru_cache(maxsize=None)
def routed(spec: str, routing: str, lmc: int):
    ts = build_tables(build(spec), routing)
    layers, rep = ib_routing(ts, lmc)
    return ts, layers, rep


def _paths(layers):
    """Switch sequence of every (layer, src, dst) path."""
    topo = layers.ts.topo
    chans, _ = walk_layers(topo, layers.nxt)
    L, n, _ = layers.nxt.shape
    out = {}
    for p, row in enumerate(chans):
        k, u, d = np.unravel_index(p, (L, n, n))
        hops = [int(c) for c in row if c >= 0]
        out[k, u, d] = [int(u)] + [int(topo.adj[c // topo.radix, c % topo.radix]) for c in hops]
    return out


# ---------------------------------------------------------------------------------------------
# layers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,routing", [("slimfly:q=5", "val"), ("slimfly:q=5", "val-3h"),
                                          ("slimfly:q=5", "ugal-l"),
                                          ("dragonfly:p=2,a=4,h=2", "val"),
                                          ("dsnf:n=32", "dsnf")])
def test_every_layer_delivers_within_its_bound_and_layer0_is_minimal(spec, routing):
    ts, layers, rep = routed(spec, routing, 2)
    assert rep["ok"], rep["errors"]
    n = ts.topo.n_switches
    for k, lay in enumerate(rep["layers"]):
        assert lay["max_hops"] <= lay["bound"]
        assert sum(lay["hist"].values()) == n * (n - 1)
    paths = _paths(layers)
    for (k, u, d), sw in paths.items():
        assert sw[-1] == d and len(set(sw)) == len(sw), "delivered, never revisiting a switch"
    if routing != "dsnf":
        assert np.array_equal(layers.nxt[0][~np.eye(n, dtype=bool)],
                              ts.tables["min"][~np.eye(n, dtype=bool)])


def test_val3h_layers_stay_within_three_hops_and_are_not_minimal():
    ts, layers, rep = routed("slimfly:q=7", "val-3h", 2)
    n = ts.topo.n_switches
    off = ~np.eye(n, dtype=bool)
    assert [lay["kind"] for lay in rep["layers"]] == ["min"] + ["val-3h"] * 3
    assert layers.hops[1:][:, off].max() == 3
    assert (layers.hops[1:][:, off] > layers.hops[0][off]).mean() > 0.5
    # the target of every non-minimal layer is a neighbour of the destination
    for k in range(1, 4):
        assert all(layers.target[k, d] in set(ts.topo.adj[d].tolist()) for d in range(n))


def test_valiant_layers_pass_their_target_or_shortcut_onto_its_path():
    ts, layers, _ = routed("slimfly:q=5", "val", 2)
    for (k, u, d), sw in _paths(layers).items():
        if k == 0 or u == d:
            continue
        t = int(layers.target[k, d])
        trunk = _min_path(ts, t, d)
        # the path reaches the trunk (target -> d on MIN) and then follows it to d
        first = next(i for i, x in enumerate(sw) if x in trunk)
        assert sw[first:] == trunk[trunk.index(sw[first]):]
        assert sw[:first + 1] == _min_path(ts, u, t)[:first + 1]


def _min_path(ts, u, d):
    x, out = u, [u]
    while x != d:
        x = int(ts.topo.adj[x, ts.tables["min"][x, d]])
        out.append(x)
    return out


def test_dragonfly_group_valiant_layers_visit_their_group():
    ts, layers, rep = routed("dragonfly:p=2,a=4,h=2", "val", 2)
    grp = ts.topo.group
    assert [lay["kind"] for lay in rep["layers"]][1:] == ["val-group"] * 3
    for (k, u, d), sw in _paths(layers).items():
        if k and grp[u] != grp[d]:
            assert int(layers.target[k, d]) in {int(grp[x]) for x in sw}
            assert len(sw) - 1 <= 5


def test_min_alternative_layers_are_minimal_and_differ():
    ts, layers, rep = routed("slimfly:q=7", "min", 2)
    assert np.array_equal(layers.hops[1], layers.hops[0])
    assert (layers.nxt[1] != layers.nxt[0]).any()
    alt = ts.alternatives.astype(np.int64)
    n = ts.topo.n_switches
    for k in range(4):
        j = layers.nxt[k].astype(np.int64)
        ok = ~np.eye(n, dtype=bool)
        assert ((alt[ok] >> j[ok]) & 1).all(), "every next hop is an equal-cost minimal one"


def test_layers_are_reproducible_from_the_seed():
    ts = build_tables(build("slimfly:q=5"), "val")
    a, b, c = (build_layers(ts, 2, seed) for seed in (1, 1, 2))
    assert np.array_equal(a.nxt, b.nxt) and not np.array_equal(a.target, c.target)


# ---------------------------------------------------------------------------------------------
# SLs and VLs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,routing,lmc,sls", [("slimfly:q=5", "min", 0, 1),
                                                  ("dragonfly:p=2,a=4,h=2", "min", 2, 1),
                                                  ("dsnf:n=32", "dsnf", 0, 1)])
def test_minimal_routings_need_one_sl(spec, routing, lmc, sls):
    _, layers, rep = routed(spec, routing, lmc)
    assert rep["ok"] and rep["sls_used"] == sls and rep["vls_used"] == 2 and rep["vl_max"] == 1


@pytest.mark.parametrize("spec,routing,lmc", [("slimfly:q=5", "val-3h", 2),
                                              ("dragonfly:p=2,a=4,h=2", "val", 2),
                                              ("dsnf:n=64", "dsnf", 0)])
def test_sls_break_every_cycle_and_are_needed(spec, routing, lmc):
    ts, layers, rep = routed(spec, routing, lmc)
    assert rep["ok"] and rep["sls_used"] >= 2
    assert rep["vls_used"] == rep["sls_used"] + 1 <= IB_DATA_VLS
    # negative control: the same paths all on SL 0 deadlock (a cycle is found and printed)
    flat = build_layers(ts, lmc)
    bad = verify_ib(flat, sl2vl_array(ts.topo, 1))
    assert not bad["ok"] and "cycle" in bad["errors"][0]


def test_verify_ib_catches_a_loop_and_a_broken_bound():
    ts = build_tables(build("slimfly:q=5"), "val-3h")
    layers = assign_sls(build_layers(ts, 1))
    vl = sl2vl_array(ts.topo, layers.num_sls)
    layers.bounds[1] = 2
    rep = verify_ib(layers, vl)
    assert not rep["ok"] and "bound is 2" in rep["errors"][0]
    u, d = 0, int(np.flatnonzero(layers.hops[0, 0] == 2)[0])
    v = int(ts.topo.adj[u, layers.nxt[0, u, d]])
    layers.nxt[0, v, d] = np.flatnonzero(ts.topo.adj[v] == u)[0]    # back to u: a loop
    rep = verify_ib(layers, vl)
    assert not rep["ok"] and "loops" in rep["errors"][0]


def test_too_many_sls_is_a_clear_error():
    ts = build_tables(build("dsnf:n=64"), "dsnf")
    with pytest.raises(NotExpressible, match=r"more than 2 SLs needed.*8 data VLs"):
        assign_sls(build_layers(ts, 0), max_sls=2)


def test_max_sls_is_exact():
    """DSN-F n = 64 needs exactly 4 SLs: max_sls=4 gives SLs 0..3, max_sls=3 is refused (and
    at LMC 0 the error does not ask for a lower LMC)."""
    ts = build_tables(build("dsnf:n=64"), "dsnf")
    layers = assign_sls(build_layers(ts, 0), max_sls=4)
    assert layers.num_sls == 4 and int(layers.sl.max()) == 3
    with pytest.raises(NotExpressible, match=r"more than 3 SLs needed") as e:
        assign_sls(build_layers(ts, 0), max_sls=3)
    assert "lower the LMC" not in str(e.value) and "LMC 0 cannot be lowered" in str(e.value)
    # with LMC > 0 fewer layers can help: Dragonfly VAL at LMC 2 needs exactly 3 SLs
    df = build_tables(build("dragonfly:p=2,a=4,h=2"), "val")
    assert assign_sls(build_layers(df, 2), max_sls=3).num_sls == 3
    with pytest.raises(NotExpressible, match=r"more than 2 SLs needed.*; lower the LMC$"):
        assign_sls(build_layers(df, 2), max_sls=2)


def _plain_first_fit(layers, max_sls):
    """The definition of assign_sls's SLs, spelled out: longest paths first (ties in path
    order), each on the lowest SL whose dependency graph stays acyclic; None if one fits
    none."""
    chans, _ = walk_layers(layers.ts.topo, layers.nxt)
    length = (chans >= 0).sum(axis=1)
    sl = np.zeros(len(chans), dtype=np.uint8)
    graphs = [{} for _ in range(max_sls)]

    def reaches(g, a, b):
        stack, seen = [a], {a}
        while stack:
            x = stack.pop()
            if x == b:
                return True
            for y in g.get(x, ()):
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return False

    for p in np.argsort(-length, kind="stable")[:int((length >= 3).sum())].tolist():
        hops = chans[p, 1:length[p]].tolist()
        for s, g in enumerate(graphs):
            new = [(a, b) for a, b in zip(hops[:-1], hops[1:]) if b not in g.get(a, ())]
            for a, b in new:
                g.setdefault(a, set()).add(b)
            if not any(reaches(g, b, a) for a, b in new):
                sl[p] = s
                break
            for a, b in new:
                g[a].discard(b)
        else:
            return None
    return sl.reshape(layers.nxt.shape)


@pytest.mark.parametrize("spec,routing,lmc,max_sls", [
    ("slimfly:q=5", "val-3h", 2, 7), ("dragonfly:p=2,a=4,h=2", "val", 2, 7),
    ("dragonfly:p=2,a=4,h=2", "val", 2, 2), ("dsnf:n=64", "dsnf", 1, 7),
    ("dsnf:n=64", "dsnf", 0, 3), ("dsnf:n=100", "dsnf", 0, 7), ("dsnf:n=64", "val-3h", 1, 7)])
def test_sl_first_fit_is_the_plain_one(spec, routing, lmc, max_sls):
    """assign_sls keeps a topological order per SL (Pearce-Kelly) and stops at the first path
    that fits no SL; the SLs and the verdict are those of the plain first fit."""
    layers = build_layers(build_tables(build(spec), routing), lmc)
    want = _plain_first_fit(layers, max_sls)
    if want is None:
        with pytest.raises(NotExpressible, match=f"more than {max_sls} SLs needed"):
            assign_sls(layers, max_sls=max_sls)
    else:
        assert np.array_equal(assign_sls(layers, max_sls=max_sls).sl, want)


def test_too_many_sls_is_found_early_on_a_large_fabric():
    """DSN-F n = 1024 needs more than 7 SLs; the first fit fails within its first 7 % of
    paths and says so without walking the rest (it used to take ~30 s and a GiB)."""
    ts = build_tables(build("dsnf:n=1024"), "dsnf")
    with pytest.raises(NotExpressible, match=r"more than 7 SLs needed.*LMC 0 cannot be lowered"):
        assign_sls(build_layers(ts, 0))


@pytest.mark.parametrize("spec,routing", [("slimfly:q=5", "val"), ("dsnf:n=64", "dsnf")])
def test_verify_ib_reports_a_broken_walk_like_walk_layers(spec, routing):
    """verify_ib walks in compiled code; its message for a missing entry or a loop is the one
    walk_layers raises for the same layers (the earliest hop, then the lowest path)."""
    ts = build_tables(build(spec), routing)
    topo = ts.topo
    n = topo.n_switches
    rng = np.random.default_rng(3)
    kinds = set()
    for trial in range(20):
        layers = assign_sls(build_layers(ts, 1))
        for _ in range(3):
            k, u, d = rng.integers(0, 2), *rng.integers(0, n, 2)
            if u != d:
                net = np.flatnonzero(topo.adj[u] >= 0)
                layers.nxt[k, u, d] = -1 if trial % 2 else rng.choice(net)
        try:
            walk_layers(topo, layers.nxt)
            want = None
        except NotExpressible as e:
            want = str(e)
        rep = verify_ib(layers, sl2vl_array(topo, layers.num_sls))
        if want is not None:
            assert rep["errors"] == [want]
            kinds.add("loops" if "loops" in want else "entry")
    assert kinds == {"loops", "entry"}


def test_dsnf_phase_walk_errors_name_the_switch():
    ts = build_tables(build("dsnf:n=64"), "dsnf")
    cls = ts.classes[-1]
    t0 = ts.tables[cls.table0]
    u, d = 5, 40
    while u != d and ts.exit_port[u, t0[u, d]]:      # a phase-0 hop of 5's own walk to 40
        u = int(ts.topo.adj[u, t0[u, d]])
    t0[u, d] = -1
    with pytest.raises(NotExpressible, match=f"no dsnf entry at switch {u} toward {d}"):
        build_layers(ts, 0)


# ---------------------------------------------------------------------------------------------
# the exported files say exactly what the layers say
# ---------------------------------------------------------------------------------------------
SL2VL_HEAD = re.compile(r"^(Switch|Channel Adapter) 0x([0-9a-f]{16}), base LID (\d+)")
SL2VL_ROW = re.compile(r"^(\d+)\s+(\d+)\s+:((?:\s+\d+){16})\s*$")


@pytest.fixture(scope="module")
def sf5_val3h(tmp_path_factory):
    out = tmp_path_factory.mktemp("ib") / "sf5"
    ts, layers, rep = routed("slimfly:q=5", "val-3h", 2)
    export_ib(ts, out, lmc=2, flat=True, ib=(layers, rep))
    return ts, layers, out


def test_lfts_route_every_lid_offset_by_its_layer(sf5_val3h):
    ts, layers, out = sf5_val3h
    topo = ts.topo
    g = json.loads((out / "guids.json").read_text())
    by_guid = {s["guid"]: s["id"] for s in g["switches"]}
    lid_of = {}
    for h in g["hosts"]:
        for k in range(4):
            lid_of[h["lid"] + k] = (h["switch"], h["switch_port"], k)
    sw, checked = None, 0
    for line in (out / "lfts.dump").read_text().splitlines():
        if m := re.match(r"Unicast lids .* guid (0x[0-9a-f]+)", line):
            sw = by_guid[m.group(1)]
        elif line.startswith("0x") and int(line.split()[0], 16) in lid_of:
            d, local, k = lid_of[int(line.split()[0], 16)]
            port = int(line.split()[1])
            want = local if sw == d else int(topo.hosts[sw]) + 1 + int(layers.nxt[k, sw, d])
            assert port == want
            checked += 1
    assert checked == topo.n_switches * topo.n_hosts * 4


def test_sl2vl_file_is_the_verified_array(sf5_val3h):
    ts, layers, out = sf5_val3h
    topo = ts.topo
    vl = sl2vl_array(topo, layers.num_sls)
    g = json.loads((out / "guids.json").read_text())
    sid = {s["guid"][2:]: s["id"] for s in g["switches"]}
    cur, rows = None, 0
    for line in (out / "sl2vl.dump").read_text().splitlines():
        if m := SL2VL_HEAD.match(line):
            cur = sid.get(m.group(2))
        elif (m := SL2VL_ROW.match(line)) and cur is not None:
            i, o = int(m.group(1)), int(m.group(2))
            p = int(topo.hosts[cur])
            slot = lambda port: 0 if port <= p else port - p  # noqa: E731
            got = [int(v) for v in m.group(3).split()]
            assert got == vl[cur, slot(i), slot(o)].tolist()
            rows += 1
    assert rows > 0 and g["ib"]["sls_used"] == layers.num_sls == 2


def test_path_sl_file_gives_every_path_its_sl(sf5_val3h):
    ts, layers, out = sf5_val3h
    g = json.loads((out / "guids.json").read_text())
    rows = [l.split() for l in (out / "path-sl.txt").read_text().splitlines()
            if l and not l.startswith("#")]
    want = host_path_sls(layers)
    hosts = [h["port_guid"] for h in g["hosts"]]
    dsts = hosts + [s["guid"] for s in g["switches"]]
    index = {}
    for src, dst, off, sl in rows:
        index.setdefault((src, dst), []).append((off, int(sl)))

    def lookup(src, dst, k):
        for key in ((src, dst), ("*", dst), ("*", "*")):
            for off, sl in index.get(key, []):
                if off in ("*", str(k)):
                    return sl
        raise AssertionError("no row")

    rng = np.random.default_rng(0)
    for i, j, k in zip(rng.integers(0, len(hosts), 3000), rng.integers(0, len(dsts), 3000),
                       rng.integers(0, 4, 3000)):
        assert lookup(hosts[i], dsts[j], k) == want[i, j, k]
    assert set(np.unique(want).tolist()) == {0, 1}


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
def test_cli_ib_export_then_verify(tmp_path, capsys):
    out = tmp_path / "df"
    assert main(["ib", "export", "dragonfly:p=2,a=4,h=2", "--routing", "val", "--lmc", "1",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["files"] == ["fabric.net", "guid2lid", "guids.json", "lfts.dump",
                                "path-sl.txt", "sl2vl.dump"]
    assert [lay["kind"] for lay in summary["layers"]] == ["min", "val-group"]
    assert main(["verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert "InfiniBand (LMC 1): OK; 2 SLs, 3 VLs (max VL 2) of 8 data VLs" in text
    assert "offset 1 val-group: max 5 hops" in text


def test_cli_ib_export_rejects_an_lmc_beyond_the_lid_space(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["ib", "export", "slimfly:q=13", "--routing", "min", "--lmc", "4",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "0xbfff" in err.lower() and "lower the LMC" in err
    assert not out.exists()


def test_ib_layers_rejects_before_writing(tmp_path):

    ts = build_tables(build("dsnf:n=32"), "dsnf")
    with pytest.raises(NotExpressible, match="expected 0..7"):
        ib_layers(ts, 8)


# ---------------------------------------------------------------------------------------------
# fabroute verify DIR proves the exported files themselves
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sf5_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("ibv") / "sf5"
    assert main(["ib", "export", "slimfly:q=5", "--routing", "val-3h", "--lmc", "2",
                 "--out", str(out)]) == 0
    return out


def _verify(capsys, d, *extra):
    code = main(["verify", str(d), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_walks_the_unmodified_files(sf5_export, capsys):
    capsys.readouterr()
    code, out, err = _verify(capsys, sf5_export, "--json")
    assert code == 0, err
    ib = json.loads(out)["ib"]          # by default: the layers proven on the arrays, since
    assert ib["ok"] and "source" not in ib and ib["lmc"] == 2     # the files equal them
    assert (ib["sls_used"], ib["vls_used"], ib["vl_max"]) == (2, 3, 2)
    code, out, err = _verify(capsys, sf5_export, "--json", "--walk-ib-files")
    assert code == 0, err
    ib = json.loads(out)["ib"]
    assert ib["ok"] and ib["source"] == "files" and ib["errors"] == []
    # every (HCA, other HCA, offset) and (HCA, switch) packet: 200 x (199 x 4 + 50)
    assert ib["paths"] == 200 * (199 * 4 + 50)
    assert ib["tables"] == {"lft_entries": 50 * (50 + 200 * 4), "lft_mismatches": 0}
    assert [lay["kind"] for lay in ib["layers"]] == ["min"] + ["val-3h"] * 3
    assert [lay["max_hops"] for lay in ib["layers"]] == [2, 3, 3, 3]
    assert all(sum(lay["hist"].values()) == 200 * 199 for lay in ib["layers"])
    assert (ib["sls_used"], ib["vls_used"], ib["vl_max"]) == (2, 3, 2)
    code, out, _ = _verify(capsys, sf5_export, "--walk-ib-files")
    assert code == 0 and "(HCA, LID) paths walked; LFTs equal the table set's layers" in out


def _cycle_is_real(guids: dict, text: str) -> list[int]:
    """The VLs of a printed cycle ``u:port(vlX) -> ...``, after checking that each channel
    leads to the switch of the next one, the last back to the first."""
    chans = [(int(u), int(p), int(v)) for u, p, v in re.findall(r"(\d+):(\d+)\(vl(\d+)\)", text)]
    assert len(chans) >= 2
    wire = {(s["id"], q["port"]): q.get("switch") for s in guids["switches"] for q in s["ports"]}
    for (u, p, _), (w, _, _) in zip(chans, chans[1:] + chans[:1]):
        assert wire[u, p] == w
    return sorted({v for _, _, v in chans})


def test_verify_rejects_the_sl2vl_edit_with_its_cycle(sf5_export, tmp_path, capsys):
    """The audit's repro: SL 1 mapped to VL 1 instead of 2 on every switch-to-switch row."""
    d = edited_copy(sf5_export, tmp_path / "sl2vl", "sl2vl.dump",
                lambda t: re.sub(r"(?m)^([0-9]+ +[0-9]+ +:) 1  2 ", r"\1 1  1 ", t))
    code, out, err = _verify(capsys, d)
    assert code == 1 and "InfiniBand (LMC 2): FAILED" in out
    [line] = [l for l in err.splitlines() if "cycle" in l]
    assert line.startswith("verify (InfiniBand files): IB channel dependency graph of the files "
                           "has a cycle of")
    guids = json.loads((d / "guids.json").read_text())
    assert _cycle_is_real(guids, line) == [1]
    # the tables alone (what verify used to recompute) are still fine
    code, out, _ = _verify(capsys, d, "--json")
    rep = json.loads(out)
    assert code == 1 and rep["ok"] and not rep["ib"]["ok"]
    assert rep["ib"]["tables"]["lft_mismatches"] == 0


def test_verify_rejects_an_lft_loop_with_the_path(sf5_export, tmp_path, capsys):
    """Switch v sends one host LID back to the switch u that routes it through v."""
    g = json.loads((sf5_export / "guids.json").read_text())
    sw = {s["id"]: s for s in g["switches"]}
    host = next(h for h in g["hosts"] if h["switch"] == 7)
    lid = f"0x{host['lid']:04x}"

    def port_at(text, s, lid):
        sec = text.split(f" guid {sw[s]['guid']} ", 1)[1]
        return int(re.search(rf"(?m)^{lid} (\d+)", sec).group(1))

    text = (sf5_export / "lfts.dump").read_text()
    v = next(q["switch"] for q in sw[0]["ports"] if q["port"] == port_at(text, 0, lid))
    back = next(q["port"] for q in sw[v]["ports"] if q.get("switch") == 0)

    def edit(t):
        head, sec = t.split(f" guid {sw[v]['guid']} ", 1)
        sec = re.sub(rf"(?m)^{lid} \d+", f"{lid} {back:03d}", sec, count=1)
        return head + f" guid {sw[v]['guid']} " + sec

    d = edited_copy(sf5_export, tmp_path / "loop", "lfts.dump", edit)
    code, _, err = _verify(capsys, d)
    assert code == 1
    loop = next(l for l in err.splitlines() if "paths loop" in l)
    # host 0 sits on switch 0: its packet enters there on VL 0, bounces off v, meets 0 again
    assert loop.endswith(f"paths loop, e.g. {g['hosts'][0]['name']} -> LID {lid} = "
                         f"{host['name']} offset 0 (min), SL 0: 0:{port_at(text, 0, lid)}(vl0) "
                         f"-> {v}:{back}(vl1) -> 0 again: a loop")
    assert any(f"switch {v} LID {lid} (offset 0, min): port {back} in the file" in l
               for l in err.splitlines())
    # source HCAs one per SL block find the same: the first failure is kept across blocks
    from tablegen.exports.files import load_table_dir
    from tablegen.exports.infiniband.read import load_ib_files
    from tablegen.exports.infiniband.verify_files import verify_ib_files

    ts, files = load_table_dir(d), load_ib_files(d)
    whole, split = verify_ib_files(files, ts), verify_ib_files(files, ts, block_cells=1)
    assert not whole["ok"] and len(whole["errors"]) == 3
    for key in ("errors", "layers", "switch_lids", "cdg", "paths"):
        assert split[key] == whole[key], key


@pytest.mark.parametrize("name,edit,needle", [
    # every path on SL 0: the switch-to-switch hops share VL 1 and deadlock
    ("path-sl.txt", lambda t: "* * * 0\n" + t, "has a cycle of"),
    # SL 0 dropped on every switch's host-to-switch rows
    ("sl2vl.dump", lambda t: re.sub(r"(?m)^(1 +\d+ +:) 0 ", r"\1 15", t),
     "paths meet VL 15 (drop), e.g."),
])
def test_verify_reads_path_sls_and_drops_from_the_files(sf5_export, tmp_path, capsys, name,
                                                         edit, needle):
    d = edited_copy(sf5_export, tmp_path / "e", name, edit)
    code, _, err = _verify(capsys, d)
    assert code == 1 and needle in err, err


def test_verify_enforces_each_offsets_hop_bound_from_the_tables(sf5_export):
    """The bound comes from the table set, not from the files: a VAL_3h class bounded to 2
    hops makes the (unchanged) 3-hop paths of offsets 1-3 fail."""
    import dataclasses

    from tablegen.exports.files import load_table_dir
    from tablegen.exports.infiniband.read import load_ib_files
    from tablegen.exports.infiniband.verify_files import verify_ib_files

    ts = load_table_dir(sf5_export)
    files = load_ib_files(sf5_export)
    three = sum(lay["hist"].get("3", 0) for lay in verify_ib_files(files, ts)["layers"])
    ts.classes = [dataclasses.replace(c, max_hops=2) for c in ts.classes]
    rep = verify_ib_files(files, ts)
    [err] = rep["errors"]
    assert three > 0 and err.startswith(f"{three} (HCA, LID) paths exceed their LID offset's "
                                        f"hop bound, e.g. ")
    assert re.search(r"offset [123] \(val-3h\), SL \d: .* \(3 hops; the bound is 2\)$", err)


def test_verify_lmc_or_seed_other_than_the_files_is_bad_input(sf5_export, capsys):
    for flag, value in (("--lmc", "1"), ("--seed", "2")):
        code, out, err = _verify(capsys, sf5_export, flag, value)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert f"{flag} {value}, but the InfiniBand files" in err


def test_verify_checks_the_ib_files_of_a_tables_directory(tmp_path, capsys):
    """`fabroute tables` puts the files in DIR/ib: VL 0 on every hop (SL 0 entering from a
    switch edited from VL 1 to 0) lets Slim Fly MIN's 2-hop paths close a cycle on VL 0."""
    out = tmp_path / "t"
    assert main(["tables", "slimfly:q=5", "--routing", "min", "--formats", "json,ib",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert _verify(capsys, out)[0] == 0
    f = out / "ib" / "sl2vl.dump"
    text = f.read_text()
    f.write_text(re.sub(r"(?m)^((?:[5-9]|1[01]) +\d+ +:) 1 ", r"\1 0 ", text))
    code, out_text, err = _verify(capsys, out)
    assert code == 1 and f"from the files in {out / 'ib'}" in out_text
    files, line = err.splitlines()      # the edit, then what it breaks
    assert files.startswith("verify (files): ") and "sl2vl.dump: line" in files
    assert line.startswith("verify (InfiniBand files): IB channel dependency graph of the files "
                           "has a cycle of")
    assert _cycle_is_real(json.loads((out / "ib" / "guids.json").read_text()), line) == [0]
