"""Controller roles (``controller/openflow/roles.py``): generation ids compared as OpenFlow 1.3
does (wrapping around 2^64), the role requests a master, a standby and a deposed master send,
when a standby takes over, and the heartbeat over real sockets."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from os_ken.ofproto.ofproto_v1_3 import (
    OFPCR_ROLE_EQUAL,
    OFPCR_ROLE_MASTER,
    OFPCR_ROLE_NOCHANGE,
    OFPCR_ROLE_SLAVE,
)

from controller.openflow import roles as R
from clock import Clock
from refusal import refusal
from controller.openflow.roles import Roles, heartbeat_server, later, stale, watch_peer

TOP = (1 << 64) - 1



def test_stale_is_the_specs_signed_difference_with_wrap_around():
    assert stale(1, 2) and not stale(2, 1) and not stale(5, 5)
    # ids wrap: 0 comes after 2^64 - 1, so the older one is 2^64 - 1
    assert stale(TOP, 0) and not stale(0, TOP)
    assert not stale(3, TOP - 2)          # 3 is 6 steps after 2^64 - 3
    # half the circle apart: (int64)(2^63) is negative, so the larger id is the stale one
    assert stale(1 << 63, 0) and not stale(0, (1 << 63) + 1)
    assert later(TOP, 0) == 0 and later(0, TOP) == 0 and later(None, 7) == 7
    assert later(7, None) == 7 and later(9, 4) == 9


def test_master_claims_its_generation_standby_asks_slave_with_the_newest_known():
    m = Roles("master", generation=5)
    assert m.may_write() and m.request() == (OFPCR_ROLE_MASTER, 5)
    assert m.replied(1, OFPCR_ROLE_MASTER, 5) is None
    s = Roles("standby")
    assert not s.may_write()
    assert s.request() == (OFPCR_ROLE_NOCHANGE, 0)       # knows no generation yet
    # the switch tells its generation; the standby then asks SLAVE with it
    assert s.replied(1, OFPCR_ROLE_NOCHANGE, 5) == (OFPCR_ROLE_SLAVE, 5)
    assert s.replied(1, OFPCR_ROLE_SLAVE, 5) is None
    assert s.status()["switches"] == {"slave": 1}
    with pytest.raises(ValueError):
        Roles("equal")


def test_standby_takes_over_with_one_more_than_the_newest_generation():
    clock = Clock(100.0)
    s = Roles("standby", clock=clock)
    assert not s.silent()                    # never heard a master: never takes over
    clock.t += 60
    assert not s.silent()
    assert s.heartbeat(b'{"generation": 7, "cookie": "ab"}')["cookie"] == "ab"
    assert s.heartbeat(b"not json") is None and s.heartbeat(b'{"cookie": 1}') is None
    assert s.request() == (OFPCR_ROLE_SLAVE, 7)
    clock.t += R.SILENCE_S * 0.9
    assert not s.silent()
    clock.t += R.SILENCE_S * 0.2
    assert s.silent()
    g = s.take_over()
    assert g == 8 and s.may_write() and s.request() == (OFPCR_ROLE_MASTER, 8)
    assert s.takeover["by"] == "heartbeat silent" and s.takeover["generation"] == 8
    assert not s.silent()                     # a master does not take over again
    # a switch had seen a newer generation than the heartbeat's: the claim passes it
    t = Roles("standby", clock=clock)
    t.heartbeat(b'{"generation": 7}')
    t.replied(1, OFPCR_ROLE_SLAVE, 12)
    assert t.take_over() == 13
    # wrap-around: after 2^64 - 1 comes 0, which the switch takes as newer
    w = Roles("standby", clock=clock)
    w.heartbeat(json.dumps({"generation": TOP}).encode())
    assert w.take_over() == 0 and stale(TOP, 0)


def test_a_closed_heartbeat_connection_is_a_takeover_at_once():
    clock = Clock(100.0)
    s = Roles("standby", clock=clock)
    s.lost()                                  # not heard yet: nothing to lose
    assert not s.silent()
    s.heartbeat(b'{"generation": 1}')
    s.lost()
    assert s.silent()
    assert s.take_over() == 2 and s.takeover["by"] == "connection closed"


def test_a_stale_refusal_deposes_a_master_for_good():
    m = Roles("master", generation=1)
    assert m.refused_stale(3) is True
    assert m.state == "deposed" and not m.may_write()
    assert m.request() == (OFPCR_ROLE_NOCHANGE, 0)      # learn the switch's generation
    # Open vSwitch answers NOCHANGE with the connection's role (EQUAL: none given yet)
    assert m.replied(3, OFPCR_ROLE_EQUAL, 2) == (OFPCR_ROLE_SLAVE, 2)
    assert m.refused_stale(4) is False                  # already deposed
    assert not m.silent() and m.stale_refusals == 2
    assert m.status()["state"] == "deposed"


def test_heartbeat_over_sockets_and_takeover_when_the_master_dies():
    """The master's heartbeat server and the standby's watcher on real loopback sockets:
    the standby learns the generation and the program, and takes over within a few
    heartbeats of the master's socket closing."""
    master = Roles("master", generation=41)
    alive = threading.Event()
    alive.set()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    addr = srv.getsockname()
    program = {"cookie": "00ff", "version": 0, "failed": []}

    def spawn(f, *a, **k):
        threading.Thread(target=f, args=a, kwargs=k, daemon=True).start()

    spawn(heartbeat_server, srv, lambda: master.beat_line(program), spawn, time.sleep,
          0.05, alive.is_set)
    standby = Roles("standby")
    beats, took = [], threading.Event()
    spawn(watch_peer, addr, standby, lambda: (standby.take_over(), took.set()), time.sleep,
          beats.append, 0.05)
    deadline = time.monotonic() + 5
    while standby.heard is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert standby.known == 41 and standby.request() == (OFPCR_ROLE_SLAVE, 41)
    time.sleep(0.3)
    assert not took.is_set()
    assert beats == [dict(program, generation=41)]          # one beat per change, not per line
    alive.clear()                   # the master stops: its sender closes the connection
    t0 = time.monotonic()
    assert took.wait(3)
    assert time.monotonic() - t0 < 1.0
    assert standby.state == "master" and standby.generation == 42
    srv.close()


@pytest.mark.parametrize("args,what", [
    (["--role", "standby"], "needs --peer"),
    (["--peer", "127.0.0.1:6700"], "go with --role"),
    (["--generation", "3"], "go with --role"),
    (["--role", "master", "--peer", "6700"], "expected HOST:PORT"),
    (["--role", "master", "--peer", "h:70000"], "expected HOST:PORT"),
    (["--role", "standby", "--peer", "h:1", "--generation", "4"], "learns it"),
    (["--role", "master", "--peer", "h:1", "--lldp"], "no --lldp"),
    (["--role", "master", "--peer", "h:1", "--generation", str(1 << 64)], "generation id"),
    (["--role", "equal", "--peer", "h:1"], "invalid choice"),
    (["--serve-peer", "127.0.0.1:6701"], "go with --role"),
    (["--role", "master", "--peer", "h:1", "--serve-peer", "h:2"], "expected --role standby"),
    (["--role", "standby", "--peer", "h:1", "--serve-peer", "6701"], "--serve-peer '6701'"),
])
def test_controller_refuses_half_given_roles(tmp_path, capsys, args, what):
    assert what in refusal(["controller", str(tmp_path), *args], capsys)


@pytest.mark.parametrize("args,what", [
    (["--standby"], "go together"),
    (["--kill-master"], "go together"),
    (["--standby", "--kill-master", "--fail", "0:1,0:2"], "at most one --fail"),
    (["--standby", "--kill-master", "--fast-failover"], "at most one --fail"),
])
def test_emulate_refuses_standby_without_its_pair(capsys, args, what):
    assert what in refusal(["emulate", "slimfly:q=3", "--routing", "min", *args], capsys)


def test_a_standby_follows_the_program_its_masters_heartbeat_names():
    """The master routed around a cable (a two-phase update: version 1): the heartbeat
    names its cookie, version and failed cables; the standby computes the same proven
    tables, marks the cable failed in its own view and reads every switch against them."""
    import logging

    from controller.openflow.fabric import Fabric
    from controller.openflow.roleapp import RoleMixin
    from controller.openflow.update import Links
    from tablegen.routing.build import build_tables
    from tablegen.topologies.failures import without_links
    from tablegen.topologies.slimfly import build_slimfly
    from tablegen.verify import same_routing

    ts = build_tables(build_slimfly(3), "min")
    degraded, rep = same_routing(without_links(ts.topo, [(0, 1)]), ts)
    assert rep.ok
    master = Fabric(degraded, version=1)

    class Standby(RoleMixin):
        logger = logging.getLogger("test")

        def __init__(self):
            self.fabric = Fabric(ts)
            self._links = Links(ts)
            self.read = []
            for d in self.fabric.dpids:
                self.fabric.connected(d, conn=f"conn{d}")

        def _read(self, conn):
            self.read.append(conn)

    s = Standby()
    s.roles = Roles("master", 3)
    s.fabric.version = 0
    beat = json.loads(s.roles.beat_line({"cookie": f"{master.cookie:016x}", "version": 1,
                                         "failed": [[0, 1]]}))
    s._follow(beat)
    assert s.fabric.cookie == master.cookie and s.fabric.version == 1
    assert s._links.failed() == {(0, 1)}
    assert sorted(s.read) == sorted(f"conn{d}" for d in s.fabric.dpids)
    assert all(st.state == "reading" and st.conn == f"conn{d}"
               for d, st in s.fabric.switches.items())
    assert s.fabric.program(0) == master.program(0)
    # the same beat again changes nothing; a beat naming tables it cannot derive is ignored
    s.read.clear()
    s._follow(beat)
    s._follow(dict(beat, cookie="0123", version=0))
    assert s.read == [] and s.fabric.cookie == master.cookie
