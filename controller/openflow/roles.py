"""A master and a standby controller on the same switches: OpenFlow 1.3 roles with generation
ids (``fabroute controller DIR --role master|standby --peer HOST:PORT``), as plain logic.

:class:`Roles` decides which role request a controller sends a switch, what the switches'
replies and refusals mean, and when a standby takes over; the os-ken side
(``controller/openflow/roleapp.py``) only sends what it says.  The two controllers speak over
one TCP connection (the *heartbeat*): the master listens on ``--peer`` and sends a JSON line
every :data:`HEARTBEAT_S` — its generation id, and the cookie, version and failed cables of
the program its switches hold —, the standby connects to ``--peer`` and reads them.

Generation ids (OpenFlow 1.3 §6.3.7): the master claims ``MASTER`` with its generation
(``--generation``, default 1); the standby asks ``SLAVE`` with the newest generation it knows
(the heartbeat's, or a switch's role reply), and on takeover claims ``MASTER`` with one more.
A switch refuses a ``MASTER``/``SLAVE`` request whose generation is older than the newest it
has accepted — older as the spec compares them, ``(int64)(g - current) < 0``, so ids wrap
around 2^64 — with ``OFPET_ROLE_REQUEST_FAILED``/``OFPRRFC_STALE``: a deposed master (one
whose heartbeat the standby lost, and which comes back) cannot claim the switches again, and
its connections, demoted to ``SLAVE`` when the standby claimed them, cannot write
(``OFPBRC_IS_SLAVE``).  A controller whose claim is refused as stale steps down: it asks
``SLAVE`` with the switch's generation, writes nothing, and sends no heartbeat.

When the standby takes over: at once when the heartbeat connection ends (the master's
process died or exited: its kernel closes the socket, ``kill -9`` included), or after
:data:`SILENCE_S` without a heartbeat (a hung master, a cut cable).  The switches' own view
of the master (Open vSwitch's inactivity probe, 5 s by default) is slower than the takeover
should be; a takeover the master did not deserve (the controllers cut off from each other,
not from the switches) is safe: the newer generation demotes the old master on every switch
it claims.  A standby takes over only from a master it has heard: one that starts before its
master waits for it (two controllers never both claim the generation they start with).
"""

from __future__ import annotations

import json
import socket
import time

from os_ken.ofproto.ofproto_v1_3 import (
    OFPCR_ROLE_EQUAL,
    OFPCR_ROLE_MASTER,
    OFPCR_ROLE_NOCHANGE,
    OFPCR_ROLE_SLAVE,
)

__all__ = ["HEARTBEAT_S", "SILENCE_S", "Roles", "ROLE_NAMES", "heartbeat_server", "later",
           "stale", "watch_peer"]

HEARTBEAT_S = 0.2        # the master's heartbeat period
SILENCE_S = 1.0          # a standby takes over after this long without a heartbeat
_MASK = (1 << 64) - 1
ROLE_NAMES = {OFPCR_ROLE_NOCHANGE: "nochange", OFPCR_ROLE_EQUAL: "equal",
              OFPCR_ROLE_MASTER: "master", OFPCR_ROLE_SLAVE: "slave"}


def _signed(x: int) -> int:
    x &= _MASK
    return x - (1 << 64) if x >> 63 else x


def stale(generation: int, current: int) -> bool:
    """Whether a switch whose newest accepted generation id is ``current`` refuses
    ``generation`` as stale: ``(int64)(generation - current) < 0`` (OpenFlow 1.3 §6.3.7;
    the ids wrap around 2^64)."""
    return _signed(generation - current) < 0


def later(a: int | None, b: int | None) -> int | None:
    """The newer of two generation ids by the switches' comparison (``None``: unknown)."""
    if a is None or b is None:
        return b if a is None else a
    return b if stale(a, b) else a


class Roles:
    """One controller's role (``master`` or ``standby`` as configured) and what it knows of
    the switches' generation ids.  ``state``: ``master`` (may write), ``standby`` (reads only,
    watches the master), ``deposed`` (a switch refused its claim as stale: reads only, for
    good).  Times are the caller's clock (``time.monotonic``) except in :attr:`takeover`,
    which holds Unix times for reports."""

    def __init__(self, role: str, generation: int = 1, clock=time.monotonic):
        if role not in ("master", "standby"):
            raise ValueError(f"role {role!r}; expected master or standby")
        self.role = role
        self.state = role
        self.generation = generation & _MASK if role == "master" else None   # our claim
        self.known: int | None = self.generation      # the newest generation heard of
        self.clock = clock
        self.heard: float | None = None               # the last heartbeat (standby)
        self.gone = False                             # the heartbeat connection ended
        self.beat: dict = {}                          # the master's last heartbeat
        self.switches: dict[int, tuple[str, int]] = {}  # dpid -> (role, generation) replied
        self.stale_refusals = 0                       # role requests refused as stale
        self.takeover: dict | None = None

    def may_write(self) -> bool:
        """Only a master sends flow-mods, group-mods, packet-outs."""
        return self.state == "master"

    def request(self) -> tuple[int, int]:
        """The role request ``(role, generation id)`` to send a switch now: the master its
        claim; a standby or deposed controller ``SLAVE`` with the newest generation it knows,
        or ``NOCHANGE`` to learn the switch's first (its reply is answered by
        :meth:`replied`)."""
        if self.state == "master":
            return OFPCR_ROLE_MASTER, self.generation
        if self.known is None:
            return OFPCR_ROLE_NOCHANGE, 0
        return OFPCR_ROLE_SLAVE, self.known

    def replied(self, dpid: int, role: int, generation: int) -> tuple[int, int] | None:
        """A switch's role reply; the next request to send it, or ``None`` when it already
        holds us in the role we want."""
        self.switches[dpid] = (ROLE_NAMES.get(role, str(role)), generation)
        self.known = later(self.known, generation)
        want = OFPCR_ROLE_MASTER if self.state == "master" else OFPCR_ROLE_SLAVE
        return None if role == want else self.request()

    def refused_stale(self, dpid: int) -> bool:
        """A switch refused our role request as stale; True when this makes a master step
        down (it then asks ``SLAVE`` once it knows the switch's generation: :meth:`request`
        gives ``NOCHANGE`` first)."""
        self.stale_refusals += 1
        self.switches[dpid] = ("refused-stale", self.generation or 0)
        self.known = None          # newer than anything we knew: ask the switch
        if self.state == "master":
            self.state = "deposed"
            return True
        return False

    # -- the heartbeat ----------------------------------------------------------------------
    def beat_line(self, program: dict) -> bytes:
        """The master's heartbeat: its generation and ``program`` (cookie, version, failed
        cables of what its switches hold), one JSON line."""
        return (json.dumps(dict(program, generation=self.generation)) + "\n").encode()

    def heartbeat(self, line: bytes) -> dict | None:
        """A heartbeat line from the master: remembered, its generation learned; the parsed
        beat, or ``None`` for a line that is not one (ignored)."""
        try:
            beat = json.loads(line)
            generation = int(beat["generation"]) & _MASK
        except (ValueError, KeyError, TypeError):
            return None
        self.heard = self.clock()
        self.gone = False
        self.beat = beat
        self.known = later(self.known, generation)
        return beat

    def lost(self) -> None:
        """The heartbeat connection ended (the master's process is gone)."""
        if self.heard is not None:
            self.gone = True

    def silent(self) -> bool:
        """Whether a standby should take over now: it has heard its master, and the
        heartbeat connection ended or stayed silent for :data:`SILENCE_S`."""
        return self.state == "standby" and self.heard is not None and (
            self.gone or self.clock() - self.heard > SILENCE_S)

    def take_over(self) -> int:
        """Become master; the generation to claim: one more than the newest known."""
        self.generation = ((self.known or 0) + 1) & _MASK
        self.known = self.generation
        self.state = "master"
        since = self.clock() - self.heard if self.heard is not None else None
        self.takeover = {"t_claimed": time.time(), "generation": self.generation,
                         "silent_s": None if since is None else round(since, 4),
                         "by": "connection closed" if self.gone else "heartbeat silent"}
        return self.generation

    def status(self) -> dict:
        """JSON-ready: role, state, generations, the switches' last replies, takeover."""
        roles = [r for r, _ in self.switches.values()]
        return {"role": self.role, "state": self.state,
                "generation": self.generation, "known": self.known,
                "master_heard": self.heard is not None,
                "switches": {r: roles.count(r) for r in sorted(set(roles))},
                "stale_refusals": self.stale_refusals, "takeover": self.takeover}


# -- the heartbeat's sockets (plain sockets: green under the controller's eventlet hub) ------
def heartbeat_server(sock, beat, spawn, sleep, period: float = HEARTBEAT_S,
                     alive=lambda: True) -> None:
    """The master's side: accept every standby on the listening ``sock`` and send it
    ``beat()`` every ``period`` seconds while ``alive()`` (a deposed master stops, and closes
    the connections, so its standby does not wait on it)."""
    while alive():
        conn, _ = sock.accept()
        spawn(_send_beats, conn, beat, sleep, period, alive)


def _send_beats(conn, beat, sleep, period, alive) -> None:
    with conn:
        try:
            while alive():
                conn.sendall(beat())
                sleep(period)
        except OSError:          # the standby went away; it reconnects if it comes back
            return


def watch_peer(addr: tuple[str, int], roles: Roles, on_silent, sleep, on_beat=None,
               period: float = HEARTBEAT_S) -> None:
    """The standby's side: keep a connection to the master's heartbeat at ``addr``, feed
    its lines to ``roles`` (and each changed beat to ``on_beat``), reconnect when it fails;
    call ``on_silent()`` once when :meth:`Roles.silent` says so, then return."""
    conn, buf, last = None, b"", None
    while roles.state == "standby":
        if conn is None:
            try:
                conn = socket.create_connection(addr, timeout=period)
                buf = b""
            except OSError:
                conn = None
                roles.lost()
        if conn is not None:
            try:
                data = conn.recv(4096)
            except socket.timeout:
                data = None
            except OSError:
                data = b""
            if data == b"":
                conn.close()
                conn = None
                roles.lost()
            elif data:
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    beat = roles.heartbeat(line)
                    if beat is not None and on_beat is not None and beat != last:
                        last = beat
                        on_beat(beat)
        if roles.silent():
            if conn is not None:
                conn.close()
            on_silent()
            return
        if conn is None:
            sleep(period / 4)
