"""The live fabric map (``fabroute controller DIR --web HOST:PORT``): one page, plain JS and
SVG with no build step, served by eventlet's WSGI server in the controller's hub.

Routes: ``/`` the page (``controller/openflow/page/``, package data), ``/map.js`` and
``/map.css`` its script and style, ``/layout.json`` the planned fabric in its natural
layout (:func:`tablegen.drawing.positions.layout`, computed and encoded once),
``/state.json`` the controller's state now (:func:`controller.openflow.metrics.snapshot`,
the numbers ``/metrics`` exports, plus ``seq`` and ``time``) and ``/events``, server-sent
events of that state as the page draws it (:func:`compact`: a quarter of the bytes, which
matters while a repair keeps the hub busy): at once, then every poll (:meth:`Web.loop`) and at once when a cable
fails or comes back (:meth:`Web.wake`: the map must not wait for a poll, nor for the
repair the event starts).  A push encodes the state
once and hands the same bytes to every client (an :class:`eventlet.event.Event` replaced
per push, so a slow client skips states instead of queueing them); at most
:data:`MAX_CLIENTS` streams at once (more: 503), and without a client nothing is computed.
docs/operations.md.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Callable

import eventlet
from eventlet import wsgi
from eventlet.event import Event
from eventlet.queue import Empty, LightQueue

from controller.openflow.metrics import View, snapshot
from tablegen.drawing.positions import layout

__all__ = ["MAX_CLIENTS", "PAGE", "Web", "compact", "serve"]

#: event streams served at once; the page is for a few operators, not a public site
MAX_CLIENTS = 8
#: the page's files (package data)
PAGE = Path(__file__).with_name("page")
_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
          "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/map.js": ("map.js", "text/javascript; charset=utf-8"),
          "/map.css": ("map.css", "text/css; charset=utf-8")}
_JSON = "application/json"


class Web:
    """The map's data: ``view()`` gives the state (the app's ``metrics_view``), ``topo`` the
    planned topology the layout places; ``poll`` seconds between pushes."""

    def __init__(self, view: Callable[[], View], topo, poll: float = 1.0,
                 max_clients: int = MAX_CLIENTS):
        self.view = view
        self.topo = topo
        self.poll = poll
        self.max_clients = max_clients
        self.clients = 0
        self.seq = 0            # states pushed so far
        self.pushed_at = None   # unix time of the last push
        self._layout: bytes | None = None
        self._next = Event()
        self._wake = LightQueue(1)

    def layout_json(self) -> bytes:
        """``/layout.json``: the layout as :meth:`Layout.to_dict` writes it, plus ``poll``."""
        if self._layout is None:
            doc = layout(self.topo).to_dict()
            doc["poll"] = self.poll
            self._layout = json.dumps(doc, separators=(",", ":")).encode()
        return self._layout

    def state(self) -> dict:
        """The snapshot with ``seq`` (the pushes so far) and ``time`` (unix time)."""
        snap = snapshot(self.view())
        snap["seq"] = self.seq
        snap["time"] = time.time()
        return snap

    def encode(self) -> bytes:
        """The state, :func:`compact`, as one server-sent event (``event: state``, ``id``: its
        ``seq``)."""
        body = json.dumps(compact(self.state()), separators=(",", ":"))
        return f"event: state\nid: {self.seq}\ndata: {body}\n\n".encode()

    def push(self) -> bool:
        """Encode the state once and wake every stream with it; nothing without a client.
        True when pushed."""
        if not self.clients:
            return False
        self.seq += 1
        msg = self.encode()
        self.pushed_at = time.time()
        ev, self._next = self._next, Event()
        ev.send(msg)
        return True

    def wake(self) -> None:
        """Push now rather than at the next poll (a cable failed or came back)."""
        if self._wake.empty():
            self._wake.put_nowait(True)

    def loop(self) -> None:
        """Push every ``poll`` seconds and on :meth:`wake`, forever (a green thread of the
        hub)."""
        log = logging.getLogger("fabroute.web")
        while True:
            try:
                self._wake.get(timeout=self.poll)
            except Empty:
                pass
            try:
                self.push()
            except Exception:       # a bad state must not end the map's stream for good
                log.exception("live map: push failed")

    def stream(self):
        """An event stream's body: the state now, then every push, until the client goes
        (the server closes the generator: the client is counted out)."""
        self.clients += 1
        try:
            yield b"retry: 2000\n\n" + self.encode()
            while True:
                yield self._next.wait()
        finally:
            self.clients -= 1

    def app(self, environ, start_response):
        """The WSGI application (module docstring: routes)."""
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return _reply(start_response, "405 Method Not Allowed", "text/plain",
                          b"GET only\n")
        if path in _FILES:
            name, ctype = _FILES[path]
            return _reply(start_response, "200 OK", ctype, (PAGE / name).read_bytes())
        if path == "/layout.json":
            return _reply(start_response, "200 OK", _JSON, self.layout_json())
        if path == "/state.json":
            body = json.dumps(self.state(), separators=(",", ":")).encode()
            return _reply(start_response, "200 OK", _JSON, body)
        if path == "/events":
            if self.clients >= self.max_clients:
                return _reply(start_response, "503 Service Unavailable", "text/plain",
                              f"at most {self.max_clients} live maps at once\n".encode())
            # each event leaves at once instead of waiting for eventlet's 4 KiB chunks
            environ["eventlet.minimum_write_chunk_size"] = 0
            start_response("200 OK", [("Content-Type", "text/event-stream"),
                                      ("Cache-Control", "no-store"),
                                      ("X-Accel-Buffering", "no")])
            return self.stream()
        return _reply(start_response, "404 Not Found", "text/plain",
                      b"not here: /, /layout.json, /state.json, /events\n")


def compact(snap: dict) -> dict:
    """What the page draws of a :meth:`Web.state`, smaller: ``ports`` only the network
    ports, each ``[switch, port, peer switch, load, tx_bytes, time]``; UGAL-L's ``pairs``
    only the non-zero shares, with ``n_pairs`` (every valid pair) and ``by_source`` (the
    mean share of each source switch over its pairs); the rest as it is.  O(ports + pairs)."""
    out = dict(snap)
    out["ports"] = [[p["switch"], p["port"], int(p["peer"][1:].partition(":")[0]), p["load"],
                     p["tx_bytes"], p["time"]] for p in snap["ports"]
                    if p["peer"].startswith("s")]
    ug = snap["ugal"]
    if ug is not None and ug["pairs"] is not None:
        n = snap["fabric"]["switches"]
        total, count = [0.0] * n, [0] * n
        for u, _, v in ug["pairs"]:
            total[u] += v
            count[u] += 1
        out["ugal"] = {**ug, "pairs": [p for p in ug["pairs"] if p[2] > 0],
                       "n_pairs": len(ug["pairs"]),
                       "by_source": [t / c if c else 0.0 for t, c in zip(total, count)]}
    return out


def _reply(start_response, status: str, ctype: str, body: bytes):
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store")])
    return [body]


def serve(sock, web: Web) -> None:
    """Serve the map on the listening green socket ``sock`` forever (eventlet's WSGI
    server in the hub, as ``/metrics`` is served: no thread reads the state while an event
    changes it); a few connections beyond the streams for the page and its JSON."""
    wsgi.server(sock, web.app, log=logging.getLogger("fabroute.web"), log_output=False,
                max_size=web.max_clients + 8)
