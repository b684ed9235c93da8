"""Adaptive UGAL-L (tablegen/routing/adaptive.py): the estimator, the split arithmetic, the
decision, and the OpenFlow program with decisions in it — pure logic, no switch."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from ofsim import Switch, mac_int, run_table

from tablegen.exports import openflow as of
from tablegen.exports.openflow_text import ofctl_flow, ofctl_group
from tablegen.routing.adaptive import (
    AdaptiveParams,
    AdaptiveUgal,
    PortEstimator,
    block_sizes,
    blocks_of,
    mm1b_occupancy,
    share_blocks,
)
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build

DATA = Path(__file__).parent / "data"


@functools.lru_cache(maxsize=None)
def ugal(spec: str):
    return build_tables(build(spec), "ugal-l")


# ---------------------------------------------------------------------------------------------
# estimator
# ---------------------------------------------------------------------------------------------
def test_mm1b_occupancy_is_the_finite_queue_mean():
    B = 32
    rho = np.array([0.0, 0.25, 0.5, 0.9, 1.0, 1.1, 2.0, 50.0])
    q = mm1b_occupancy(rho, B)
    # against the definition: P(n) ~ rho^n, n = 0..B
    for r, got in zip(rho, q):
        p = np.array([r ** n for n in range(B + 1)]) if r else np.eye(B + 1)[0]
        assert got == pytest.approx((np.arange(B + 1) * p).sum() / p.sum(), rel=1e-9, abs=1e-9)
    assert q[4] == B / 2 and np.all(np.diff(q) > 0) and q[-1] < B
    assert np.isnan(mm1b_occupancy(np.nan, B))
    assert mm1b_occupancy(1 + 1e-12, B) == pytest.approx(B / 2)


def test_estimator_offered_load_counts_drops_and_survives_resets():
    cap = np.array([[1000.0, 1000.0, 0.0]])      # bytes per second; port 2 does not exist
    est = PortEstimator(cap, AdaptiveParams(alpha=1.0, buffer=10), poll=1.0)
    est.update(0, 0.0, [0, 0, 0], [0, 0, 0], [0, 0, 0])
    assert np.isnan(est.occupancy(0.0)).all(), "one poll is no rate"
    # port 0: 800 B/s sent; port 1: 1000 B/s sent + 5 dropped packets of 100 B = 1.5x
    est.update(0, 1.0, [800, 1000, 0], [8, 10, 0], [0, 5, 0])
    assert est.rho[0, :2] == pytest.approx([0.8, 1.5])
    assert np.isnan(est.rho[0, 2])
    q = est.occupancy(1.0)
    assert q[0, :2] == pytest.approx(mm1b_occupancy(np.array([0.8, 1.5]), 10) + [0, 5])
    # a switch that reconnected: counters back to small numbers — no negative load
    est.update(0, 2.0, [10, 10, 0], [1, 1, 0], [0, 0, 0])
    assert est.rho[0, :2] == pytest.approx([0.8, 1.5])
    est.update(0, 3.0, [510, 10, 0], [6, 1, 0], [0, 0, 0])
    assert est.rho[0, :2] == pytest.approx([0.5, 0.0])
    # a silent switch ages out after max_age polls
    assert not np.isnan(est.occupancy(3.0 + 3.0)[0, :2]).any()
    assert np.isnan(est.occupancy(3.0 + 3.01)[0]).all()


def test_estimator_smooths_with_the_ewma():
    est = PortEstimator(np.array([[100.0]]), AdaptiveParams(alpha=0.25), poll=1.0)
    sent = 0
    est.update(0, 0, [0], [0], [0])
    for t, rate in enumerate([100, 0, 0, 0], start=1):
        sent += rate
        est.update(0, t, [sent], [sent], [0])
    assert est.rho[0, 0] == pytest.approx(0.75 ** 3)


def recorded(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def replay(rec: dict, params: AdaptiveParams):
    """Feed a recorded series of one switch's OpenFlow counters to the estimator as the
    controller does (drops: the port's ``tx_dropped`` plus its queue's ``tx_errors``);
    returns the ports, the poll times and the offered load and occupancy after each poll."""
    ports = sorted(rec["samples"][0]["ports"], key=int)
    cap = np.full((1, len(ports)), rec["capacity_bps"] / 8.0)
    t = np.array([x["t"] for x in rec["samples"]])
    est = PortEstimator(cap, params, poll=float(np.median(np.diff(t))))
    rhos, qs = [], []
    for x in rec["samples"]:
        c = [x["ports"][p] for p in ports]
        drops = [x["ports"][p]["tx_dropped"] + x["queues"].get(p, {}).get("tx_errors", 0)
                 for p in ports]
        est.update(0, x["t"], [y["tx_bytes"] for y in c], [y["tx_packets"] for y in c], drops)
        rhos.append(est.rho[0].copy())
        qs.append(est.occupancy(x["t"])[0])
    return ports, t, np.array(rhos), np.array(qs)


def test_estimator_on_recorded_overload():
    """Counters read from Open vSwitch (tests/data, recorded by the emulation: a port
    shaped to 1 Mbit/s offered twice that, its drops counted by its queue): the loaded
    port's estimate is the offered load (~2x, not the 1x it sends) and a full queue, an
    idle port's is empty."""
    rec = recorded("counters-overload.json")
    ports, t, rho, q = replay(rec, AdaptiveParams(buffer=rec["queue_packets"]))
    sent = {p: rec["samples"][-1]["ports"][p]["tx_bytes"] for p in ports}
    hot = ports.index(max(sent, key=sent.get))
    idle = [i for i, p in enumerate(ports) if sent[p] == 0]
    start = t[np.argmax(rho[:, hot] > 0.2)]             # the traffic starts (10 s of it)
    steady = (t > start + 2) & (t < start + 9.5)
    assert 1.8 < rho[steady, hot].min() and rho[steady, hot].max() < 2.2
    assert (q[steady, hot] > 1.7 * rec["queue_packets"]).all()
    assert idle and (rho[1:, idle] == 0).all() and (q[1:, idle] == 0).all()


def test_estimator_on_recorded_step():
    """A recorded load step 0.5x -> 1.5x -> 0.5x of a port's capacity (5 s each from t ~1 s):
    the estimate crosses 1 within three polls of each step, up and down."""
    rec = recorded("counters-step.json")
    ports, t, rho, q = replay(rec, AdaptiveParams(buffer=rec["queue_packets"]))
    sent = {p: rec["samples"][-1]["ports"][p]["tx_bytes"] for p in ports}
    p = ports.index(max(sent, key=sent.get))
    poll = float(np.median(np.diff(t)))
    start = t[np.argmax(rho[:, p] > 0.2)]               # the traffic starts
    up, down = start + 5, start + 10
    assert (rho[(t > start + 3 * poll) & (t < up - poll), p] < 0.8).all()
    assert (rho[(t > up + 3 * poll) & (t < down - poll), p] > 1.2).all()
    assert (rho[(t > down + 3 * poll) & (t < down + 5), p] < 0.8).all()
    assert q[(t > up + 3 * poll) & (t < down - poll), p].min() > 20 * np.nanmax(q[t < up - poll, p])


# ---------------------------------------------------------------------------------------------
# split arithmetic
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [1, 2, 3, 4, 6])
def test_share_blocks_partition_the_slots_and_sum_to_every_share(bits):
    blocks = share_blocks(bits)
    owner = [[b for b, (v, m) in enumerate(blocks) if s & m == v] for s in range(1 << bits)]
    assert all(len(o) == 1 for o in owner), "every slot in exactly one block"
    sizes = [sum(o == [b] for o in owner) for b in range(len(blocks))]
    assert sizes == block_sizes(bits)
    for m in range(0, (1 << bits) + 1):
        chosen = blocks_of(m, bits)
        assert sum(s for s, c in zip(sizes, chosen) if c) == m
    with pytest.raises(ValueError):
        blocks_of((1 << bits) + 1, bits)


# ---------------------------------------------------------------------------------------------
# the decision
# ---------------------------------------------------------------------------------------------
def occupancy(rho, B):
    """The estimator's occupancy of an offered load (``PortEstimator.occupancy``)."""
    return mm1b_occupancy(rho, B) + B * np.maximum(rho - 1, 0)


def fluid(a: AdaptiveUgal, hot_key: np.ndarray, load: float, base: float, B: float):
    """Port occupancies of a fluid model: every source ``u`` sends ``load`` (in link
    capacities) toward its key ``hot_key[u]``: the minimal share on the minimal port, the
    non-minimal share spread as the source choice spreads it, plus ``base`` everywhere."""
    n = a.n
    s = a.fraction()[np.arange(n), hot_key]
    rho = np.full(a.w_nm.shape, base)
    rho[np.arange(n), a.j_min[np.arange(n), hot_key]] += load * (1 - s)
    rho += load * s[:, None] * a.w_nm
    return occupancy(rho, B), rho


@pytest.mark.parametrize("spec", ["slimfly:q=5", "dragonfly:p=2,a=4,h=2"])
def test_decision_moves_to_nonminimal_under_adversarial_load_and_settles(spec):
    ts = ugal(spec)
    p = AdaptiveParams()
    a = AdaptiveUgal(ts, p)
    n = ts.topo.n_switches
    rng = np.random.default_rng(3)
    hot = np.array([rng.choice(np.flatnonzero(a.valid[u])) for u in range(n)])
    history = []
    for _ in range(30):
        q, rho = fluid(a, hot, load=2.0, base=0.1, B=p.buffer)
        a.decide(q)
        history.append(a.share[np.arange(n), hot].copy())
    h = np.array(history)
    assert (h[1] > 0).all(), "the first round already moves every source"
    assert (h[-1] > 0).all() and (h[-1] < a.slots).any()
    _, rho = fluid(a, hot, load=2.0, base=0.1, B=p.buffer)
    assert rho[np.arange(n), a.j_min[np.arange(n), hot]].max() < 1.2, "minimal port relieved"
    flips = (np.diff(np.sign(np.diff(h[-12:], axis=0)), axis=0) != 0).sum(axis=0)
    assert flips.max() <= 4, "settled, no flapping"
    # the load goes away: the shares come back to minimal, and rise again with it
    for _ in range(30):
        q, _ = fluid(a, hot, load=0.0, base=0.3, B=p.buffer)
        a.decide(q)
    assert a.share.max() == 0
    q, _ = fluid(a, hot, load=2.0, base=0.1, B=p.buffer)
    a.decide(q)
    assert (a.share[np.arange(n), hot] > 0).all(), "reacts at once again"


def test_decision_stays_minimal_under_balanced_load_and_without_estimates():
    ts = ugal("slimfly:q=5")
    a = AdaptiveUgal(ts, AdaptiveParams())
    R = ts.topo.radix
    for rho in (0.1, 0.5, 0.9, 1.0):
        q = np.full((ts.topo.n_switches, R), float(mm1b_occupancy(rho, 32)))
        assert len(a.decide(q)) == 0 and a.share.max() == 0
    a.share[:] = 4
    q = np.full((ts.topo.n_switches, R), 1.0)
    q[7] = np.nan                                   # switch 7 stopped answering
    a.decide(q)
    assert a.share[7].max() == 0, "no estimate: minimal"
    assert a.share[8, a.valid[8]].min() > 0 and a.share[~a.valid].max() == 0


def test_decision_moves_exactly_outside_the_dead_band():
    """On random occupancies: a share rises where the minimal cost (wait = occupancy + 1,
    times hops) exceeds the non-minimal one by more than the band (a share of the queueing
    part, plus the floor), falls where it is below by more than the band, holds in between;
    against the last move the band is doubled per reversal in a row (at most 4x)."""
    ts = ugal("slimfly:q=5")
    p = AdaptiveParams(hysteresis=0.25, floor=0.5)
    a = AdaptiveUgal(ts, p)
    rng = np.random.default_rng(11)
    for _ in range(20):
        a.share[:] = rng.integers(0, a.slots + 1, size=a.share.shape)
        a.last[:] = rng.integers(-1, 2, size=a.share.shape)
        a.flips[:] = rng.integers(0, 4, size=a.share.shape)
        last, before = a.last.copy(), a.share.copy()
        widen = 2.0 ** np.minimum(a.flips, 2)
        q = rng.gamma(1.0, 4.0, size=(ts.topo.n_switches, ts.topo.radix))
        qm, qn, hm, hn = a.costs(q)
        A, B = (qm + 1) * hm, (qn + 1) * hn
        a.decide(q)
        v = a.valid
        band = 0.25 * 0.5 * (qm * hm + qn * hn)
        up = v & (A > B + band * np.where(last == -1, widen, 1) + 0.5)
        down = v & ~up & (A + band * np.where(last == 1, widen, 1) <= B)
        hold = v & ~up & ~down
        assert (a.share[up] >= np.minimum(before[up] + 1, a.slots)).all()
        assert (a.share[down] <= np.maximum(before[down] - 1, 0)).all()
        assert (a.share[hold] == before[hold]).all() and hold.any() and up.any() and down.any()


# ---------------------------------------------------------------------------------------------
# the program with decisions: every packet stays in a verified class
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["slimfly:q=5", "dragonfly:p=2,a=4,h=2"])
def test_decided_program_keeps_every_packet_in_a_verified_class(spec):
    """Install random shares (all-minimal and all-non-minimal included) into UGAL-L's
    program, execute it for UDP packets of every host pair and every split slot: each packet
    takes the minimal path or the non-minimal class's path through the intermediate its
    source port picks (``TableSet.walk``), on the VCs the walk gives, the share of slots
    that go non-minimal is the decided one, and all these paths together have an acyclic
    channel dependency graph."""
    ts = ugal(spec)
    topo = ts.topo
    p = of.plan(ts)
    d = p.decide
    mn, nm = ts.classes
    rng = np.random.default_rng(7)
    K = topo.n_groups if d["keys"] == "group" else topo.n_switches
    shares = rng.integers(0, (1 << d["bits"]) + 1, size=(topo.n_switches, K))
    shares[0], shares[1] = 0, 1 << d["bits"]
    switches = [Switch("\n".join(ofctl_flow(f) for f in of.program(p, u, shares[u]).flows),
                       "\n".join(ofctl_group(g) for g in of.program(p, u).groups))
                for u in range(topo.n_switches)]
    macs = [mac_int(m) for m in p.host_mac]
    ht = topo.host_table()
    key_of = topo.group if d["keys"] == "group" else np.arange(topo.n_switches)
    cdg = nx.DiGraph()
    walks = {}
    for hs, ss, ps in ht.tolist():
        if ps != 1:
            continue                              # one host per switch: the tables are per switch
        for hd, sd, pd in ht.tolist():
            if sd == ss or pd != 1:
                continue
            k = int(key_of[sd])
            went = 0
            for slot in range(1 << d["bits"]):
                # the choice slot varies with the split slot: every intermediate gets used
                sport = (slot << d["shift"]) | ((slot * 5 + sd) & ((1 << d["shift"]) - 1))
                sw, pkt, hops, chosen = ss, {"in_port": ps, "vlan": None, "dst": macs[hd],
                                             "metadata": 0, "queue": None, "dl_type": 0x0800,
                                             "nw_proto": 17, "tp_src": sport}, [], []
                while True:
                    outputs = []
                    pkt["chosen"] = chosen
                    run_table(switches[sw], 0, pkt, lambda b: 0, outputs)
                    (port, after), = outputs
                    if 1 <= port <= topo.hosts[sw]:
                        assert (sw, port) == (sd, pd) and after["vlan"] is None
                        break
                    j = port - int(topo.hosts[sw]) - 1
                    hops.append((sw, j, after["queue"]))
                    nxt = int(topo.adj[sw, j])
                    pkt = {"in_port": int(topo.hosts[nxt]) + 1 + int(topo.peer[sw, j]),
                           "vlan": list(after["vlan"]), "dst": after["dst"], "metadata": 0,
                           "queue": None, "dl_type": 0x0800, "nw_proto": 17, "tp_src": sport}
                    sw = nxt
                    assert len(hops) <= nm.max_hops
                cls, inter = (nm, chosen[0]) if chosen else (mn, -1)
                went += bool(chosen)
                if (ss, sd, cls.name, inter) not in walks:
                    w = ts.walk(ss, sd, cls, inter)
                    walks[ss, sd, cls.name, inter] = list(zip(w["switches"][:-1],
                                                              [topo.port_index(s, q) for s, q in
                                                               zip(w["switches"], w["ports"])],
                                                              w["vcs"]))
                assert hops == walks[ss, sd, cls.name, inter], (ss, sd, slot, cls.name, inter)
                for a, b in zip(hops, hops[1:]):
                    cdg.add_edge(a, b)
            own = int(key_of[ss]) == k            # a Dragonfly group's own switches: MIN
            assert went == (0 if own else shares[ss, k]), (ss, sd, went, shares[ss, k])
    assert nx.is_directed_acyclic_graph(cdg), nx.find_cycle(cdg)


def test_decision_flows_differ_only_in_their_actions():
    ts = ugal("slimfly:q=5")
    p = of.plan(ts)
    a = {(f.table, f.priority, f.match): f.actions for f in of.decision_flows(p, 3)}
    full = np.full(ts.topo.n_switches, 1 << p.decide["bits"])
    b = {(f.table, f.priority, f.match): f.actions for f in of.decision_flows(p, 3, full)}
    assert a.keys() == b.keys() and all(a[k] != b[k] for k in a)
    assert {x[-1] for x in a.values()} == {("goto_table", of.T_ARRIVE)}
    assert {x[-1] for x in b.values()} == {("goto_table", of.T_CHOICE)}
    assert len(a) == (ts.topo.n_switches - 1) * 2 * (p.decide["bits"] + 1)


def test_split_bits_that_do_not_fit_the_source_port_are_refused():
    from tablegen.errors import NotExpressible

    ts = ugal("slimfly:q=5")
    assert of.plan(ts, split_bits=6).decide["shift"] == 5
    with pytest.raises(NotExpressible, match="split bits"):
        of.plan(build_tables(build("slimfly:q=19"), "ugal-l", nonmin="val"), split_bits=6)


@pytest.mark.parametrize("spec", ["slimfly:q=5", "dragonfly:p=2,a=4,h=2"])
def test_path_view_sees_the_fullest_port_on_the_way(spec):
    """``view="path"``: the minimal candidate's queue is the fullest port of its path (to the
    destination, or into its group); a port two hops away moves the share in the path view
    and not in UGAL-L's first-hop view."""
    ts = ugal(spec)
    topo = ts.topo
    R = topo.radix
    path = AdaptiveUgal(ts, AdaptiveParams(view="path"))
    local = AdaptiveUgal(ts, AdaptiveParams())
    for u in range(topo.n_switches):
        for k in np.flatnonzero(path.valid[u])[:4].tolist():
            d = k if path.keys == "switch" else int(np.flatnonzero(path.key_of == k)[0])
            w = ts.walk(u, d, "min")
            hops = [s * R + topo.port_index(s, p) for s, p in zip(w["switches"], w["ports"])]
            if path.keys == "group":
                inside = [i for i, s in enumerate(w["switches"]) if topo.group[s] == k]
                hops = hops[:inside[0]]
            got = path.min_path[u, k]
            assert got[got >= 0].tolist() == hops
    u = 0
    k = next(k for k in np.flatnonzero(path.valid[u]) if (path.min_path[u, k] >= 0).sum() >= 2)
    far = path.min_path[u, k][1]
    q = np.full((topo.n_switches, R), 0.5)
    q.ravel()[far] = 60.0
    path.decide(q)
    local.decide(q)
    assert path.share[u, k] > 0 and local.share[u, k] == 0
    with pytest.raises(ValueError, match="view"):
        AdaptiveUgal(ts, AdaptiveParams(view="global"))
