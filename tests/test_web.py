"""The live fabric map's server (controller/openflow/web.py) without a switch: eventlet's WSGI
server on a loopback port in this process's hub, asked over real HTTP by a green client —
the page and its files, the layout, the state (a Fabric-less view, then a Fabric with
UGAL-L decisions and a cable down), the server-sent event stream parsed event by event, the
bound on streams (``--web``'s address checks: beside ``--metrics``' in tests/test_metrics.py).
The page in real Chromium under load: tests/test_web_ovs.py."""

from __future__ import annotations

import functools
import json
import time
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():     # eventlet's import-time notice is for os-ken's maintainers
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    import eventlet
    from eventlet.green import socket

from controller.openflow.fabric import Fabric
from controller.openflow.metrics import View, snapshot
from controller.openflow.update import Links
from controller.openflow.web import PAGE, Web, serve
from tablegen.drawing.positions import layout
from tablegen.routing.adaptive import AdaptiveParams
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from test_metrics import port_stats


@functools.lru_cache(maxsize=None)
def tables(spec: str, routing: str):
    return build_tables(build(spec), routing)


class Server:
    """``web`` served on a free loopback port by a green thread (ended on exit)."""

    def __init__(self, web: Web):
        self.web = web

    def __enter__(self):
        self.sock = eventlet.listen(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = eventlet.spawn(serve, self.sock, self.web)
        return self

    def __exit__(self, *exc):
        self.thread.kill()
        self.sock.close()

    def connect(self, path: str):
        """A green socket that sent ``GET path``; its file for reading the reply."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return s, s.makefile("rb")

    def get(self, path: str) -> tuple[int, dict, bytes]:
        """Status, headers (lower-case names) and body of ``GET path``."""
        s, f = self.connect(path)
        try:
            status, headers = head(f)
            return status, headers, f.read(int(headers["content-length"]))
        finally:
            f.close()
            s.close()


def head(f) -> tuple[int, dict]:
    status = int(f.readline().split()[1])
    headers = {}
    while (line := f.readline().strip()):
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def events(f):
    """Server-sent events from a chunked stream: ``{field: value}`` per event."""
    buf = b""
    while True:
        size = int(f.readline().strip(), 16)
        buf += f.read(size)
        f.readline()
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            ev = dict(line.split(": ", 1) for line in block.decode().split("\n")
                      if ": " in line)
            if "data" in ev:
                yield ev


def test_page_layout_and_state_before_any_switch():
    topo = build("slimfly:q=5")
    web = Web(lambda: View(fabric=None), topo, poll=0.5)
    with Server(web) as srv:
        status, h, body = srv.get("/")
        assert status == 200 and h["content-type"].startswith("text/html")
        assert body == (PAGE / "index.html").read_bytes() and b'src="map.js"' in body
        for path, ctype in (("/map.js", "text/javascript"), ("/map.css", "text/css")):
            status, h, body = srv.get(path)
            assert status == 200 and h["content-type"].startswith(ctype) and len(body) > 500
        status, h, body = srv.get("/layout.json")
        lay = json.loads(body)
        assert status == 200 and h["content-type"] == "application/json"
        assert lay == {**json.loads(json.dumps(layout(topo).to_dict())), "poll": 0.5}
        assert len(lay["switches"]) == 50 and len(lay["cables"]) == 175
        assert srv.get("/layout.json")[2] is not body and srv.get("/layout.json")[2] == body
        status, _, body = srv.get("/state.json")
        st = json.loads(body)
        assert status == 200 and st["fabric"] is None and st["switches"] == []
        assert st["role"] == {"role": "single", "state": "master"} and st["seq"] == 0
        status, _, body = srv.get("/metrics")
        assert status == 404 and b"/events" in body


def test_state_and_events_of_a_fabric_with_shares_and_a_cable_down():
    ts = tables("slimfly:q=5", "ugal-l")
    topo = ts.topo
    fab = Fabric(ts)
    fab.adapt(AdaptiveParams(), poll=1.0, link_bps=8e6)
    for d in (1, 2):
        fab.connected(d, conn=object())
    dec = fab.decisions
    links = Links(ts)
    b = int(topo.adj[3, 0])
    assert links.port(3, int(topo.hosts[3]) + 1, False)
    u0 = fab.switch_of(1)
    stats = port_stats(topo, u0, np.arange(1, topo.radix + 1) * 1000.0)
    view = View(fabric=fab, links=links, ports={1: (100.0, stats)})
    web = Web(lambda: view, topo, poll=0.2)
    with Server(web) as srv:
        assert web.push() is False and web.seq == 0, "no client: nothing computed"
        s, f = srv.connect("/events")
        try:
            status, h = head(f)
            assert status == 200 and h["content-type"] == "text/event-stream"
            stream = events(f)
            first = next(stream)
            assert first["event"] == "state" and first["id"] == "0"
            st = json.loads(first["data"])
            assert st["failures"]["cables"] == [[min(3, b), max(3, b)]]
            assert [x["switch"] for x in st["switches"]] == [fab.switch_of(1),
                                                              fab.switch_of(2)]
            # compact: network ports as [switch, port, peer switch, load, tx_bytes, time],
            # UGAL-L's non-zero shares only (none yet) with the count of every pair
            hs = int(topo.hosts[u0])
            assert st["ports"] == [[u0, hs + 1 + j, int(topo.adj[u0, j]), None,
                                    (j + 1) * 1000, 100.0]
                                   for j in range(topo.radix) if topo.adj[u0, j] >= 0]
            assert st["ugal"]["pairs"] == [] and st["ugal"]["n_pairs"] == int(
                dec.ugal.valid.sum()) > 0
            assert st["ugal"]["by_source"] == [0.0] * 50
            # a detour: the next push carries it, the same bytes for every stream
            dec.ugal.share[0, 5] = 2
            eventlet.sleep(0)
            assert web.clients == 1 and web.push() is True and web.seq == 1
            ev = next(stream)
            assert ev["id"] == "1"
            st = json.loads(ev["data"])
            share = 2 / dec.ugal.slots
            assert st["ugal"]["pairs"] == [[0, 5, share]]
            assert st["ugal"]["by_source"][0] == pytest.approx(
                share / int(dec.ugal.valid[0].sum()))
            assert sum(st["ugal"]["by_source"][1:]) == 0
            want = snapshot(view)
            assert [p for p in want["ugal"]["pairs"] if p[2] > 0] == [(0, 5, share)]
            assert {k: v for k, v in st.items() if k not in ("ports", "ugal", "time", "seq")} == \
                json.loads(json.dumps({k: v for k, v in want.items()
                                       if k not in ("ports", "ugal")}))
            # the loop pushes every poll by itself
            loop = eventlet.spawn(web.loop)
            try:
                ids = [int(next(stream)["id"]) for _ in range(3)]
            finally:
                loop.kill()
            assert ids == [2, 3, 4]
            # a cable event pushes at once, not at the next poll
            web.poll = 600.0
            loop = eventlet.spawn(web.loop)
            try:
                eventlet.sleep(0.05)
                t = time.monotonic()
                web.wake()
                assert next(stream)["id"] == "5" and time.monotonic() - t < 5
            finally:
                loop.kill()
        finally:
            f.close()
            s.close()
        for _ in range(50):             # the server notices the closed stream on its next write
            web.push()
            eventlet.sleep(0.01)
            if web.clients == 0:
                break
        assert web.clients == 0


def test_streams_are_bounded():
    topo = build("dragonfly:p=2,a=4,h=2")
    web = Web(lambda: View(fabric=None), topo, max_clients=2)
    with Server(web) as srv:
        open_ = [srv.connect("/events") for _ in range(2)]
        try:
            for _, f in open_:
                assert head(f)[0] == 200
                next(events(f))
            assert web.clients == 2
            status, _, body = srv.get("/events")
            assert status == 503 and b"at most 2" in body
            assert srv.get("/state.json")[0] == 200, "the page's JSON is still served"
        finally:
            for s, f in open_:
                f.close()
                s.close()


def test_push_encodes_once_for_every_stream(monkeypatch):
    web = Web(lambda: View(fabric=None), build("dragonfly:p=2,a=4,h=2"))
    calls = []
    real = web.encode
    monkeypatch.setattr(web, "encode", lambda: calls.append(1) or real())
    got = []
    web.clients = 3
    waiters = [eventlet.spawn(lambda: got.append(web._next.wait())) for _ in range(3)]
    eventlet.sleep(0)
    web.push()
    for w in waiters:
        w.wait()
    assert len(calls) == 1 and len(got) == 3 and got[0] is got[1] is got[2]
    assert np.all([g.startswith(b"event: state\nid: 1\n") for g in got])
