"""Repairs made ready while idle (controller/openflow/prepared.py, issue 27): the bytes a
prepared repair sends are exactly the messages the ordinary update path would send, the
memory bound holds, and a repair is only handed out for the fabric it was made from."""

import pytest

from controller.openflow.fabric import Fabric
from controller.openflow.prepared import Encoder, Prepared, serialised
from controller.openflow.update import Links, Update
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build


@pytest.fixture(scope="module")
def df():
    ts = build_tables(build("dragonfly:p=2,a=4,h=2"), "min")
    return ts, Fabric(ts)


def _run(p, fab, links, switches):
    steps = sum(1 for _ in p.work(fab, links, switches))
    return steps


def test_prepared_bytes_are_the_update_messages(df):
    ts, fab = df
    links = Links(ts)
    n = ts.topo.n_switches
    p = Prepared(1 << 30, 0.5)
    assert _run(p, fab, links, range(n)) == len(links.cables()) * n
    assert p.complete and len(p.ready) == len(links.cables()) and p.left_out == 0
    for failed in list(p.ready)[:6]:
        r = p.ready[failed]
        (c,) = failed
        fresh = Update(fab, links.target_for(failed))
        assert fresh.new.cookie == r.update.new.cookie
        for u in range(n):
            d = fab.dpid_of(u)
            want = [b"".join(serialised(m) for m in part) for part in fresh.two_phase(u)]
            got = [ph.msgs.get(d, b"") for ph in r.phases]
            assert got == want, (c, u)
            assert [ph.counts.get(d, 0) for ph in r.phases] == \
                [len(part) for part in fresh.two_phase(u)]
    assert sum(r.size for r in p.ready.values()) == p.size


def test_encoder_patches_only_the_cookie(df):
    ts, fab = df
    enc = Encoder()
    from controller.openflow import messages as msg
    for f in fab.program(0).flows[:50]:
        for cookie in (0, 1, 0x7FFF_FFFF_FFFF_FFFF):
            assert enc.flow(f, cookie) == serialised(msg.flow_mod(f, cookie))


def test_budget_and_basis(df):
    ts, fab = df
    links = Links(ts)
    n = ts.topo.n_switches
    one = Prepared(1 << 30, 0.5)
    _run(one, fab, links, range(n))
    size = max(r.size for r in one.ready.values())
    small = Prepared(3 * size, 0.5)
    _run(small, fab, links, range(n))
    assert 1 <= len(small.ready) <= 3 and small.size <= 3 * size
    assert small.left_out == len(links.cables()) - len(small.ready) and small.complete
    failed = next(iter(small.ready))
    assert small.take(fab, failed, range(n)) is small.ready[failed]
    assert small.take(fab, failed, range(n - 1)) is small.ready[failed]    # a subset
    assert small.take(Fabric(ts), failed, range(n)) is None                # another basis
    assert small.take(fab, frozenset(), range(n)) is None
    assert small.stale(fab, range(n - 1)) and not small.stale(fab, range(n))
    off = Prepared(0, 0.5)
    _run(off, fab, links, range(n))
    assert off.complete and not off.ready


def test_phases_for_keeps_the_live_switches_and_ends_with_remove(df):
    ts, fab = df
    links = Links(ts)
    p = Prepared(1 << 30, 0.5)
    _run(p, fab, links, range(ts.topo.n_switches))
    r = next(iter(p.ready.values()))
    live = [0, 3, 5]
    phases = list(r.phases_for(live))
    assert [ph.name for ph in phases] == ["install", "flip", "remove"]
    keep = {fab.dpid_of(u) for u in live}
    assert all(set(ph.msgs) <= keep for ph in phases)
    assert phases[1].wait == 0.5 and phases[0].count() > 0


def test_a_failed_cable_coming_back_is_prepared_first(df):
    ts, fab = df
    links = Links(ts)
    links.down.add((0, 0))
    failed = links.failed()
    deg = Fabric(links.target())
    p = Prepared(1 << 30, 0.5)
    gen = p.work(deg, links, range(ts.topo.n_switches))
    for _ in range(ts.topo.n_switches):
        next(gen)
    next(gen, None)                      # the first candidate is stored
    assert frozenset() in p.ready and failed not in p.ready
    assert p.ready[frozenset()].update.new.ts is ts
