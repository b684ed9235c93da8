"""``fabroute controller DIR``: run the os-ken application on a proven table directory.

os-ken 4.x ships no ``osken-manager``; this is ours.  Facts of os-ken 4.2 it works around:
``os_ken.base.app_manager`` must be imported before ``os_ken.controller.controller``
(circular import otherwise); with the default native hub a switch disconnect never reaches
``DEAD_DISPATCHER``, so the eventlet hub is selected before os-ken is imported; the hub's
threads cannot be joined on SIGTERM, so the handler exits the process; without eventlet's
monkey patching (which ``osken-manager`` applies) a TLS handshake blocks every switch's
connection and Open vSwitch times out.  os-ken listens with
``eventlet.listen``, which sets ``SO_REUSEPORT``: a second controller could bind the same port
and take half of the switches, and a failed bind happens in a green thread, after which the
process went on and exited 0.  So the launcher binds the socket itself, without
``SO_REUSEPORT``, before os-ken starts (a port in use or an address not on this machine is
one line, exit 2), and hands os-ken that socket.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
import time
import warnings
from pathlib import Path

from tablegen.errors import BadInput, NotExpressible

# a switch that answers no echo request for ECHO_INTERVAL * ECHO_UNANSWERED seconds (and a
# connection that never says hello) is disconnected
ECHO_INTERVAL = 10
ECHO_UNANSWERED = 3
# the same warning at most 5 times a minute, a kind of warning (whatever its arguments) 50
LOG_BURST, LOG_KIND_BURST, LOG_PERIOD = 5, 50, 60.0


def fabric_of(table_set, adaptive: dict | None = None, fast_failover: bool = False,
              profile: str = "ovs", learner=None):
    """The controller's :class:`~controller.openflow.fabric.Fabric` of ``table_set``; tables the
    pipeline cannot express (more than 8 VCs, VIDs or MACs out of plan, split bits beyond the
    L4 source port) are bad input: :class:`~tablegen.errors.BadInput` with OpenFlow's one-line
    reason; ``profile``: the OpenFlow profile of its programs.  ``adaptive`` (``poll``,
    ``link_bps``, ``split_bits``, ``hysteresis``, ``view``): UGAL-L tables get adaptive
    decisions; other routings have none to make.  ``learner``
    (:class:`controller.openflow.learn.Learner`): real switches, mapped by LLDP or a fabric
    file (the decisions read their statistics on the switches' own port numbers)."""

    from controller.openflow.fabric import Fabric
    from tablegen.exports.openflow import SPLIT_BITS
    from tablegen.routing.adaptive import AdaptiveParams

    try:
        if learner is not None:
            fabric = learner.fabric(table_set, fast_failover=fast_failover)
        else:
            fabric = Fabric(table_set, (adaptive or {}).get("split_bits", SPLIT_BITS),
                            fast_failover=fast_failover, profile=profile)
    except NotExpressible as e:
        raise BadInput(f"controller: {e}") from None
    if adaptive is not None and fabric.plan_.decide is not None:
        params = AdaptiveParams(split_bits=adaptive["split_bits"],
                                hysteresis=adaptive["hysteresis"],
                                view=adaptive.get("view", "first-hop"))
        fabric.adapt(params, adaptive["poll"], adaptive["link_bps"])
    return fabric


def split_host_port(text: str, need_host: bool = True) -> tuple[str, int] | None:
    """``(host, port)`` of ``HOST:PORT`` — a port 1..65535, a host unless ``need_host`` is
    False — else None; the host as written (``[::1]`` keeps its brackets)."""
    host, sep, port = text.rpartition(":")
    if not sep or (need_host and not host) or not (port.isascii() and port.isdigit()) \
            or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, option: str = "--listen") -> socket.socket:
    """A listening socket on ``host:port`` that no other process can share (no
    ``SO_REUSEPORT``; ``SO_REUSEADDR`` only lets a restart reuse a port in TIME_WAIT).
    :class:`BadInput` naming ``option`` when the port is taken or the address is not this
    machine's."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host.strip("[]"), port))
        s.listen(128)
    except OSError as e:
        s.close()
        why = {errno.EADDRINUSE: "the port is in use (another controller?)",
               errno.EADDRNOTAVAIL: "the address is not one of this machine's",
               errno.EACCES: "permission denied"}.get(e.errno, e.strerror)
        raise BadInput(f"controller: {option} {host}:{port}: {why}; expected a free port on "
                       "an address of this machine") from None
    return s


def bind_control(path: Path) -> socket.socket:
    """The control socket (``--control``): a Unix socket only this user may connect to
    (mode 0600); a stale socket file left by a dead controller is replaced, anything else
    at ``path`` is refused (:class:`BadInput`)."""
    import stat

    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None:
        if not stat.S_ISSOCK(mode):
            raise BadInput(f"controller: --control {path} exists and is not a socket; expected "
                           "a new path (or a socket a controller left)")
        path.unlink()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
        os.chmod(path, 0o600)
        s.listen(8)
    except OSError as e:
        s.close()
        raise BadInput(f"controller: --control {path}: {e.strerror}; expected a writable "
                       "directory") from None
    return s


class RateLimit(logging.Filter):
    """Warnings and errors: each message at most ``burst`` times per ``period`` seconds, and
    each kind of message (its format string) at most ``kind_burst`` times, whatever its
    arguments; the next one that passes says how many were dropped, and a traceback is kept
    only on the first of a kind in a period.  40 KB of garbage from one peer wrote 4 MB of
    tracebacks before.  Information (a switch verified, repaired) always passes."""

    def __init__(self, burst: int = LOG_BURST, period: float = LOG_PERIOD,
                 kind_burst: int = LOG_KIND_BURST, clock=time.monotonic):
        super().__init__()
        self.burst, self.kind_burst, self.period, self.clock = burst, kind_burst, period, clock
        self._windows: dict[tuple, list] = {}    # key -> [start, passed, dropped, traced]

    def _window(self, key, now: float) -> list:
        w = self._windows.get(key)
        if w is None or now - w[0] >= self.period:
            if len(self._windows) > 10_000:      # bounded: forget every expired window
                self._windows = {k: v for k, v in self._windows.items()
                                 if now - v[0] < self.period}
            w = self._windows[key] = [now, 0, w[2] if w else 0, False]
        return w

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        now = self.clock()
        kind = self._window((record.name, record.levelno, str(record.msg)), now)
        one = self._window((record.name, record.levelno, record.getMessage()[:300]), now)
        if kind[1] >= self.kind_burst or one[1] >= self.burst:
            kind[2] += 1
            return False
        kind[1] += 1
        one[1] += 1
        if kind[2]:
            record.msg = f"{record.msg} [{kind[2]} like it suppressed]"
            kind[2] = 0
        if record.exc_info and kind[3]:
            record.exc_info = record.exc_text = None
        kind[3] = kind[3] or bool(record.exc_info)
        return True


def run(table_set, listen: str = "127.0.0.1:6653", status: Path | None = None,
        log_file: Path | None = None, tls=None, adaptive: dict | None = None,
        decisions: Path | None = None, control: Path | None = None,
        drain: float | None = None, repair_links: bool = True,
        fast_failover: bool = False, profile: str = "ovs", learner=None,
        prepare_mib: int | None = None, roles=None, peer: str | None = None,
        serve_peer: str | None = None, metrics: str | None = None,
        metrics_poll: float = 1.0, web: str | None = None) -> None:
    """Serve ``table_set`` to every switch that connects to ``listen`` (``host:port``) until
    SIGTERM/SIGINT; over TLS with mutual certificates when ``tls`` (a
    :class:`controller.tls.Pki`) is given; UGAL-L with adaptive decisions (``adaptive``, see
    :func:`fabric_of`), each round appended to ``decisions`` (JSON lines); live updates
    over the Unix socket ``control`` (``fabroute load``), two-phase ones waiting ``drain``
    seconds, and cables routed around / restored on port down / up unless not
    ``repair_links``; FAST_FAILOVER groups on verified backup ports with
    ``fast_failover``; programs in OpenFlow profile ``profile``; real switches (any datapath
    ids and port numbers) mapped by ``learner`` (:class:`controller.openflow.learn.Learner`);
    at most ``prepare_mib`` MiB of repairs made ready while idle
    (:class:`controller.openflow.prepared.Prepared`; 0: none); one of two controllers when
    ``roles`` (:class:`controller.openflow.roles.Roles`) is given: a master sends its
    heartbeat on ``peer`` (``host:port``, bound here), a standby watches the master's there
    and, once it has taken over, serves its own on ``serve_peer`` (bound here, at start);
    Prometheus metrics on ``metrics`` (``host:port``, bound here: ``/metrics`` answers as
    soon as the controller listens), port statistics polled every ``metrics_poll`` seconds
    when no UGAL-L decisions poll them (``controller/openflow/metrics.py``); the live map
    on ``web`` (``host:port``, bound here, pushed every poll: ``controller/openflow/web.py``).
    Never returns.  Refuses (:func:`fabric_of`, :func:`bind`) before anything listens."""
    fabric = fabric_of(table_set, adaptive, fast_failover, profile, learner)
    host, _, port = listen.rpartition(":")
    ctl = bind_control(control) if control is not None else None
    server = bind(host, int(port))
    beats = None
    if roles is not None and roles.state == "master":
        beats = bind(*_host_port(peer), "--peer")
    later_beats = bind(*_host_port(serve_peer), "--serve-peer") if serve_peer else None
    metrics_sock = bind(*_host_port(metrics), "--metrics") if metrics else None
    web_sock = bind(*_host_port(web), "--web") if web else None
    os.environ.setdefault("OSKEN_HUB_TYPE", "eventlet")
    # eventlet's import-time notice ("Eventlet is deprecated", nine lines on stderr) is for
    # os-ken's maintainers, not for the operator reading the controller's log
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    from os_ken.lib import hub  # noqa: I001  (the order of these imports matters)

    hub.patch(thread=False)     # as osken-manager does: TLS handshakes must yield, not block
    from os_ken.base import app_manager         # before os_ken.controller (circular import)
    from os_ken import cfg
    from os_ken.controller import controller  # noqa: F401  registers the ofp-listen options
    from controller.openflow.app import FabrouteApp

    handler = (logging.FileHandler(log_file) if log_file else logging.StreamHandler())
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.addFilter(RateLimit())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    cfg.CONF(args=[], project="os_ken")
    cfg.CONF.set_override("ofp_listen_host", host)
    cfg.CONF.set_override("ofp_tcp_listen_port", int(port))
    cfg.CONF.set_override("ofp_ssl_listen_port", int(port))
    cfg.CONF.set_override("echo_request_interval", ECHO_INTERVAL)
    cfg.CONF.set_override("maximum_unreplied_echo_requests", ECHO_UNANSWERED)
    if tls is not None:
        cert, key = tls.controller
        cfg.CONF.set_override("ctl_cert", str(cert))
        cfg.CONF.set_override("ctl_privkey", str(key))
        cfg.CONF.set_override("ca_certs", str(tls.ca))
    from eventlet.greenio import GreenSocket

    green = GreenSocket(server)
    hub.listen = lambda *_a, **_k: green         # os-ken's StreamServer takes our socket
    FabrouteApp.fabric = fabric
    FabrouteApp.status_path = status
    FabrouteApp.decisions_path = decisions
    FabrouteApp.control = GreenSocket(ctl) if ctl is not None else None
    FabrouteApp.repair_links = repair_links
    FabrouteApp.learner = learner
    if metrics_sock is not None:
        FabrouteApp.metrics_sock = GreenSocket(metrics_sock)
    if web_sock is not None:
        FabrouteApp.web_sock = GreenSocket(web_sock)
    FabrouteApp.metrics_poll = metrics_poll
    FabrouteApp.roles = roles
    if roles is not None:
        FabrouteApp.peer = GreenSocket(beats) if beats is not None else _host_port(peer)
        if later_beats is not None:
            FabrouteApp.serve_peer = GreenSocket(later_beats)
    if drain is not None:
        FabrouteApp.drain = drain
    if prepare_mib is not None:
        FabrouteApp.prepare_bytes = prepare_mib << 20

    def stop(signum, _frame):
        logging.getLogger("fabroute").info("signal %d: exiting", signum)
        logging.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log = logging.getLogger("fabroute")
    log.info("serving %s %s on %s (cookie 0x%016x)", table_set.routing,
             table_set.topo.name(), listen, fabric.cookie)
    if roles is not None:
        log.info("role %s, heartbeat %s %s%s", roles.role, "on" if beats else "of the master at",
                 peer, f", generation {roles.generation}" if roles.generation is not None else "")
    if learner is not None:
        log.info("real switches: %s", "map of the fabric file (%d datapaths)" % len(
            learner.assignment.switch) if learner.given is not None else
            "cabling learned by LLDP (settled after %.1f s without news)" % learner.settle)
    if fabric.decisions is not None:
        d = fabric.decisions
        log.info("adaptive UGAL-L: statistics every %.2f s, shares in steps of 1/%d per "
                 "destination %s", d.poll, 1 << d.p.split_bits, d.ugal.keys)
    if metrics_sock is not None:
        log.info("Prometheus metrics on http://%s/metrics", metrics)
    if web_sock is not None:
        log.info("live fabric map on http://%s/", web)
    if tls is None:
        log.warning("plain TCP, no TLS: switches are not authenticated%s (--tls DIR for "
                    "OpenFlow over TLS)", "; loopback only" if is_loopback(host) else "")
    else:
        log.info("TLS with mutual certificates (CA %s); a switch may claim only the datapath "
                 "ids its certificate carries", tls.ca)
    app_manager.AppManager.run_apps(["controller.openflow.app"])
    sys.exit(0)
