"""Live OpenFlow updates (controller/openflow/update.py) without a switch: every message of
every phase is applied to a model of each switch's tables, phases reach the switches in
any order, and packets are walked through the mixed state by the OpenFlow interpreter of
the exporter's tests.  Per-packet consistency: every packet takes exactly the path of the
old program or exactly that of the new one (ordered: of both, for existing destinations)."""

import random

import numpy as np

import pytest
from ofsim import Switch, run_table

from controller.openflow import messages as msg
from controller.openflow.fabric import Fabric
from controller.openflow.update import Update
from tablegen.exports.openflow import host_macs
from tablegen.exports.openflow_text import ofctl_flow, ofctl_group
from tablegen.routing.build import build_tables
from tablegen.topologies.dsnf import add_nodes, build_dsnf
from tablegen.topologies.failures import without_links
from tablegen.topologies.spec import build


class Model:
    """Each switch's flows and groups as the messages leave them."""

    def __init__(self, fabric: Fabric, switches):
        self.flows, self.groups = {}, {}
        self.records = {}
        for u in switches:
            f, g = fabric.intended(u)
            self.flows[u] = {k: rec for k, (_, rec) in f.items()}
            self.groups[u] = {gid: rec for gid, (_, rec) in g.items()}

    def know(self, fabric: Fabric, switches):
        for u in switches:
            f, g = fabric.intended(u)
            self.records.update({(u, k): rec for k, (_, rec) in f.items()})
            self.records.update({(u, "g", gid): rec for gid, (_, rec) in g.items()})

    def apply(self, u: int, m):
        if isinstance(m, msg.parser.OFPFlowMod):
            key, _ = msg.canon_stats_flow(m)
            if m.command == msg.ofp.OFPFC_ADD:
                self.flows[u][key] = self.records[(u, key)]
            else:
                assert m.command == msg.ofp.OFPFC_DELETE_STRICT
                del self.flows[u][key]
        else:
            if m.command == msg.ofp.OFPGC_DELETE:
                del self.groups[u][m.group_id]
            else:
                self.groups[u][m.group_id] = self.records[(u, "g", m.group_id)]

    def switch(self, u: int) -> Switch:
        flows = "\n".join(ofctl_flow(f) for f in self.flows[u].values())
        groups = "\n".join(ofctl_group(g) for g in self.groups[u].values())
        return Switch(flows, groups or None)


def walk(switches, topo, hs: int, hd: int, udp: int | None = None, *, dead=frozenset(),
         macs=None, limit: int = 16):
    """Switches, ports and VCs a packet from host ``hs`` to host ``hd`` passes; ``None`` when
    it is dropped: no entry outputs it, or it leaves on a port of ``dead`` (``(switch,
    port)``: a failed cable).  ``macs``: the hosts' MACs (default the plan's)."""
    ht = topo.host_table()
    _, ss, ps = ht[hs].tolist()
    _, sd, pd = ht[hd].tolist()
    dst = int(host_macs(topo)[hd]) if macs is None else int(macs[hd].replace(":", ""), 16)
    l4 = {"dl_type": 0x0800, "nw_proto": 17, "tp_src": udp} if udp is not None else {}
    pkt = {"in_port": ps, "vlan": None, "dst": dst, "metadata": 0, "queue": None, **l4}
    sw, hops = ss, []
    while True:
        outputs = []
        run_table(switches[sw], 0, dict(pkt, chosen=[]),
                  lambda b: (udp or 0) % len(b), outputs)
        if not outputs:
            return None
        assert len(outputs) == 1
        port, after = outputs[0]
        if 1 <= port <= topo.hosts[sw]:
            assert (sw, port) == (sd, pd)
            return tuple(hops)
        if (sw, port) in dead:
            return None
        j = port - int(topo.hosts[sw]) - 1
        hops.append((sw, port, after["vlan"][1]))
        nxt = int(topo.adj[sw, j])
        pkt = {"in_port": int(topo.hosts[nxt]) + 1 + int(topo.peer[sw, j]),
               "vlan": list(after["vlan"]), "dst": after["dst"], "metadata": 0,
               "queue": None, **l4}
        sw = nxt
        assert len(hops) <= limit, "a loop"


def paths(model, ids, topo, pairs):
    sws = {u: model.switch(u) for u in ids}
    out = {(hs, hd, udp): walk(sws, topo, hs, hd, udp) for hs, hd, udp in pairs}
    assert None not in out.values(), "a frame was dropped"
    return out


def host_pairs(topo, hosts, rng, k=150):
    h = [int(x) for x in topo.host_offset[hosts]]
    pairs = [(a, b) for a in h for b in h if a != b]
    rng.shuffle(pairs)
    return [(a, b, None if i % 2 else 49152 + (7 * i) % 4096)
            for i, (a, b) in enumerate(pairs[:k])]


def check_consistent(old_ts, new_ts, cabled, mode, seeds=4):
    """Every phase reaching a random part of the switches (earlier phases everywhere):
    every packet between hosts of the old fabric takes its old-program or new-program path."""
    old = Fabric(old_ts)
    upd = Update(old, new_ts, mode)
    n_old = old_ts.topo.n_switches
    ids = range(n_old)
    phases = list(upd.phases(ids))
    rng = random.Random(1)
    pairs = host_pairs(cabled, list(ids), rng)
    base = Model(old, ids)
    base.know(upd.new, ids)
    want_old = paths(base, ids, cabled, pairs)
    final = Model(old, ids)
    final.know(upd.new, ids)
    for ph in phases:
        for d, ms in ph.msgs.items():
            for m in ms:
                final.apply(d - 1, m)
    want_new = paths(final, ids, cabled, pairs)
    assert final.flows == Model(upd.new, ids).flows, "the phases end in the new program"
    mixed = 0
    for k in range(len(phases)):
        for seed in range(seeds):
            r = random.Random(seed)
            m = Model(old, ids)
            m.know(upd.new, ids)
            for i, ph in enumerate(phases[:k + 1]):
                for d, ms in ph.msgs.items():
                    if i < k or r.random() < 0.5:
                        for x in ms:
                            m.apply(d - 1, x)
            got = paths(m, ids, cabled, pairs)
            for key, p in got.items():
                assert p in (want_old[key], want_new[key]), (ph.name, key)
                if mode == "ordered":
                    assert p == want_old[key] == want_new[key]
            mixed += sum(got[key] != want_new[key] for key in got)
    return upd, want_old, want_new, mixed


@pytest.mark.parametrize("spec,routing", [("slimfly:q=5", "min"),
                                          ("dragonfly:p=2,a=4,h=2", "ugal-l"),
                                          ("dragonfly:p=2,a=4,h=2", "val")])
def test_two_phase_failure_update_is_per_packet_consistent(spec, routing):
    topo = build(spec)
    a, b = sorted(topo.edge_set())[1]
    old = build_tables(topo, routing)
    new = build_tables(without_links(topo, [(a, b)]), routing)
    upd, want_old, want_new, mixed = check_consistent(old, new, topo, "two-phase")
    assert upd.mode == "two-phase" and upd.new.version == 1
    assert sum(want_old[k] != want_new[k] for k in want_old) > 0, "the update changes paths"
    assert mixed > 0, "some packets took the old path in a mixed state"
    # the new program never uses the failed cable
    used = {(s, int(topo.adj[s, p - int(topo.hosts[s]) - 1])) for path in want_new.values()
            for s, p, _ in path}
    assert (a, b) not in used and (b, a) not in used


def test_two_phase_back_restores_version_zero():
    topo = build("slimfly:q=5")
    deg = without_links(topo, [(0, 1)])
    old = Fabric(build_tables(topo, "min"))
    there = Update(old, build_tables(deg, "min"))
    back = Update(there.new, build_tables(topo, "min"))
    assert there.new.version == 1 and back.new.version == 0
    assert back.new.intended(0)[0].keys() == old.intended(0)[0].keys()
    assert back.new.cookie == old.cookie


def test_ordered_growth_keeps_every_existing_path():
    t64 = build_dsnf(64)
    t72 = add_nodes(t64, 8)[0]
    old, new = build_tables(t64, "dsnf"), build_tables(t72, "dsnf")
    upd, want_old, want_new, _ = check_consistent(old, new, t72, "ordered")
    assert upd.mode == "ordered" and upd.new.version == 0
    assert want_old == want_new
    # the existing switches gain the new destinations' entries and the new cables' ports
    assert sum(ph.count() for ph in upd.phases(range(64)) if ph.name == "add") > 0


def test_ordered_refused_where_the_diff_does_not_allow_it():
    topo = build("slimfly:q=5")
    old = Fabric(build_tables(topo, "min"))
    with pytest.raises(ValueError, match="expected two-phase"):
        Update(old, build_tables(without_links(topo, [(0, 1)]), "min"), "ordered")


def test_decisions_belong_to_no_version_and_survive_a_two_phase_update():
    """UGAL-L's decision entries match any version and write no VID or PCP, so a version-1
    program's decisions are the version-0 ones, a two-phase update neither installs nor
    flips them, and its flip is table 0's host entries only (two per host port)."""
    from tablegen.exports.openflow import T_DECIDE, VERSION_BIT, decision_flows

    topo = build("dragonfly:p=2,a=4,h=2")
    deg = without_links(topo, [(0, 1)])
    old = Fabric(build_tables(topo, "ugal-l"))
    upd = Update(old, build_tables(deg, "ugal-l"))
    fab = upd.new
    shares = {k: 8 for k in range(fab.topo.n_groups)}
    flows = decision_flows(fab.plan_, 0, shares)
    assert flows == decision_flows(old.plan_, 0, shares)
    mods = fab.decided(0, flows)
    assert mods and all(m.command == msg.ofp.OFPFC_MODIFY_STRICT for m in mods)
    for f in flows:
        assert f.table == T_DECIDE and all(a[0] == "goto_table" for a in f.actions)
        vid, mask = dict(f.match)["vlan_vid"]
        assert not mask & VERSION_BIT                   # any version
    for u in range(topo.n_switches):
        install, flip = upd.two_phase(u)
        assert not any(m.table_id == T_DECIDE for m in install + flip
                       if isinstance(m, msg.parser.OFPFlowMod))
        assert len(flip) == 2 * int(topo.hosts[u])      # each host's tag and delivery


def test_fast_failover_groups_route_around_every_backed_cable():
    """The FAST_FAILOVER program forwards exactly as the plain one while every port is up,
    and with any backed cable down every pair is still delivered (the patched tables the
    backups were proven with)."""
    from tablegen.backup import fast_failover

    topo = build("dragonfly:p=2,a=4,h=2")
    ts = build_tables(topo, "min")
    ids = range(topo.n_switches)
    ff, plain = Fabric(ts, fast_failover=True), Fabric(ts)
    assert ff.status()["fast_failover"]["entries"] > 0
    pairs = host_pairs(topo, list(ids), random.Random(3), k=400)
    pairs = [(a, b, None) for a, b, _ in pairs]
    with_ff, without = Model(ff, ids), Model(plain, ids)
    assert paths(with_ff, ids, topo, pairs) == paths(without, ids, topo, pairs)
    backed = ff.plan_.ff["cables"]
    assert len(backed) == len(topo.edge_set()) == len(fast_failover(ts))  # every cable here
    for u, v in backed[::9]:
        dead = {(a, topo.port_number(a, int(j))) for a, b in ((u, v), (v, u))
                for j in np.flatnonzero(topo.adj[a] == b)}
        sws = {s: with_ff.switch(s) for s in ids}
        for s in sws:
            sws[s].dead = {p for x, p in dead if x == s}
        lost_plain = 0
        plain_sws = {s: without.switch(s) for s in ids}
        for hs, hd, _ in pairs:
            got = walk(sws, topo, hs, hd, dead=dead, limit=12)
            assert got is not None, ("lost with fast failover", u, v, hs, hd)
            assert all((s, p) not in dead for s, p, _ in got)
            lost_plain += walk(plain_sws, topo, hs, hd, dead=dead, limit=12) is None
        assert lost_plain > 0, "without the groups these pairs are lost"


def test_no_single_hop_detour_exists_in_a_moore_graph():
    """Slim Fly q = 5 (Hoffman-Singleton, girth 5): the only path of length 2 from another
    neighbour of u to v runs through u, so no backup port avoids u -- the controller's
    repair is the only one."""
    from tablegen.backup import fast_failover

    assert fast_failover(build_tables(build("slimfly:q=5"), "min")) == {}
    assert len(fast_failover(build_tables(build("slimfly:q=7"), "min"))) > 0


def test_rewiring_update_holds_then_forwards_the_transformed_fabric_with_old_addresses():
    """DSN-F 64, p = 3 -> 4: every switch is renumbered and 79 cables move.  The update
    installs the new version, then *holds* (hosts inject nothing; nothing is in flight while
    cables move), then flips.  Each physical switch keeps its datapath and each host its MAC;
    after the flip every pair is delivered over the new cables by the new tables."""
    from tablegen.topologies.dsnf import transform

    old_t = build_dsnf(64, p=3)
    new_t, _, relabel = transform(64)
    old = Fabric(build_tables(old_t, "dsnf"))
    new_ts = build_tables(new_t, "dsnf")
    upd = Update(old, new_ts, relabel=relabel)
    assert upd.mode == "rewire" and upd.new.version == 1
    fab = upd.new
    inv = {int(r): i for i, r in enumerate(relabel)}
    assert all(fab.dpid_of(r) == old.dpid_of(inv[r]) for r in range(64))
    assert fab.plan_.host_mac[int(new_t.host_offset[5])] == \
        old.plan_.host_mac[int(old_t.host_offset[inv[5]])]
    phases = list(upd.phases(range(64)))
    assert [p.name for p in phases] == ["install", "hold", "flip", "remove"]
    assert phases[1].pause and not phases[2].pause
    # model by datapath: what the messages leave at each physical switch
    flows = {old.dpid_of(u): {k: r for k, (_, r) in old.intended(u)[0].items()} for u in range(64)}
    groups = {d: {} for d in flows}
    rec = {}
    for u in range(64):
        for k, (_, r) in old.intended(u)[0].items():
            rec[(old.dpid_of(u), k)] = r
        for k, (_, r) in fab.intended(relabel[u])[0].items():
            rec[(old.dpid_of(u), k)] = r
    for d, ms in phases[1].msgs.items():            # hold entries: the old stamps, dropping
        for m in ms:
            key, _ = msg.canon_stats_flow(m)
            f = rec[(d, key)]
            rec[(d, key, "hold")] = type(f)(f.table, f.priority, f.match, ())

    def apply(ph):
        for d, ms in ph.msgs.items():
            for m in ms:
                if isinstance(m, msg.parser.OFPFlowMod):
                    key, _ = msg.canon_stats_flow(m)
                    if m.command == msg.ofp.OFPFC_DELETE_STRICT:
                        del flows[d][key]
                    else:
                        flows[d][key] = rec.get((d, key, "hold")) if ph.name == "hold" \
                            else rec[(d, key)]

    def switches(ids_to_dpid):
        return {u: Switch("\n".join(ofctl_flow(f) for f in flows[d].values()), None)
                for u, d in ids_to_dpid.items()}

    rng = random.Random(5)
    pairs = [(a, b) for a in range(64) for b in range(64) if a != b]
    rng.shuffle(pairs)
    pairs = pairs[:300]
    apply(phases[0])
    olds = switches({u: old.dpid_of(u) for u in range(64)})
    assert all(walk(olds, old_t, a, b, macs=old.plan_.host_mac, limit=30) is not None
               for a, b in pairs)
    apply(phases[1])                                # held: hosts inject nothing
    held = switches({u: old.dpid_of(u) for u in range(64)})
    assert all(walk(held, old_t, a, b, macs=old.plan_.host_mac) is None for a, b in pairs)
    apply(phases[2])                                # cables moved, flipped: the new fabric
    news = switches({r: fab.dpid_of(r) for r in range(64)})
    # host h of new switch r is the old host of switch inv[r]: same MAC (fab.plan_.host_mac)
    assert all(walk(news, new_t, a, b, macs=fab.plan_.host_mac, limit=30) is not None
               for a, b in pairs)
    apply(phases[3])
    assert flows == {fab.dpid_of(r): {k: f for k, (_, f) in fab.intended(r)[0].items()}
                     for r in range(64)}
