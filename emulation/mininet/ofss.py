"""CPqD's ofsoftswitch13 (``ofdatapath`` + ``ofprotocol``) as the emulation's switches: a strict
OpenFlow 1.3 software switch with no vendor extension, for the ``standard`` OpenFlow profile.

``build_net(topo, ..., datapath="ofss")`` (:mod:`emulation.mininet.net`) builds the same net as
with Open vSwitch, but every switch is a :func:`soft_switch_class` switch — a subclass of
Mininet's ``UserSwitch`` (Mininet's class for this switch) that, like the OVS bridges, runs no
shell: its two daemons are started as child processes of this process and ended by pid.  Per
switch, in the net's work directory: ``<name>.ofd`` (``ofdatapath``'s OpenFlow socket: the
controller's connection through ``ofprotocol``, and :class:`~emulation.mininet.ofclient.
FlowReader`'s), ``<name>-ofd.log`` and ``<name>-ofp.log``.

Three things of ofsoftswitch13 decide how the switch is started (docs/openflow.md):

* ``ofdatapath`` numbers its ports 1, 2, … in the order of ``-i``, so a switch's interfaces
  are given in port order and must have the port numbers 1..n (a fabric with other port
  numbers cannot be emulated with it);
* ``ofdatapath -d`` demands 12 hex digits but parses them with ``strtoll(arg, NULL, 12)``
  (base 12, ``udatapath/udatapath.c``): the digits ``c``–``f`` end the number and ``10``
  means 12.  :func:`dpid_arg` writes the datapath id in base 12, which that parse reads back
  as the intended id (ids up to ``12**12 - 1``);
* ``set_queue`` to a queue its port does not have drops the packet silently
  (``dp_ports_output``), and ports have no queue until one is configured — outside OpenFlow
  1.3, with ofsoftswitch13's ``dpctl queue-mod`` (its experimenter message).  The egress
  entries put each VC in its own queue, so :func:`configure_queues` gives every network
  port the queues 1 .. :data:`QUEUES` - 1 (queue 0 is the port's default), and
  ``ofdatapath`` runs with slicing (its ``tc`` queues behind those ids), not
  ``--no-slicing``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from tablegen.errors import RunFailed

__all__ = ["TOOLS", "QUEUES", "available", "configure_queues", "dpid_arg", "soft_switch_class",
           "MAX_DPID"]

TOOLS = ("ofdatapath", "ofprotocol", "dpctl")
#: queues per network port: one per VLAN PCP value, i.e. every VC a program can write
QUEUES = 8
#: the queues' minimum rate (``dpctl queue-mod``'s BW, tenths of a percent of the link)
QUEUE_MIN_RATE = 10
#: the largest datapath id ``ofdatapath -d`` can be given (12 base-12 digits)
MAX_DPID = 12 ** 12 - 1


def available() -> str | None:
    """``None`` when ``ofdatapath`` and ``ofprotocol`` are on ``PATH``; else why not."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return (f"{' and '.join(missing)} not on PATH: build CPqD's ofsoftswitch13 "
                "(github.com/CPqD/ofsoftswitch13, with netbee) and put its bin/ on PATH")
    return None


def dpid_arg(dpid: int) -> str:
    """The ``ofdatapath -d`` argument that makes the switch report datapath id ``dpid``
    (see the module doc: ofdatapath reads the 12 digits in base 12)."""
    if not 0 < dpid <= MAX_DPID:
        raise RunFailed(f"datapath id {dpid:#x}: ofsoftswitch13 can be given ids 1..{MAX_DPID:#x}"
                        " only (ofdatapath -d parses 12 digits in base 12)")
    digits = ""
    while dpid:
        dpid, r = divmod(dpid, 12)
        digits = "0123456789ab"[r] + digits
    return digits.rjust(12, "0")


def soft_switch_class(workdir: str):
    """Mininet switch class (a ``UserSwitch``) whose daemons keep their sockets and logs in
    ``workdir``."""
    from mininet.node import UserSwitch

    class SoftSwitch(UserSwitch):
        """ofsoftswitch13 without a shell: ``ofdatapath`` over the switch's interfaces in
        port order, ``ofprotocol`` relaying it out of band to the controller."""

        dpidLen = 16                    # the topo's 16-digit ids; dpid_arg() converts them

        def __init__(self, name, **kw):
            self.procs: list[subprocess.Popen] = []
            self.network_ports: list[int] = []
            super().__init__(name, **kw)

        def startShell(self, mnopts=None):
            self.shell = None
            self.pid = None
            self.execed = False

        def cmd(self, *args, **kwargs):
            # Mininet's few per-interface commands (``ifconfig lo up``) run in the root
            # namespace, where the switch's interfaces are
            r = subprocess.run(" ".join(str(a) for a in args), shell=True, text=True,
                               capture_output=True)
            return r.stdout

        def socket_path(self) -> str:
            return os.path.join(workdir, f"{self.name}.ofd")

        def start(self, controllers):
            ports = sorted((p, str(i)) for i, p in self.ports.items() if str(i) != "lo")
            if [p for p, _ in ports] != list(range(1, len(ports) + 1)):
                raise RunFailed(f"switch {self.name}: ports {[p for p, _ in ports]}; "
                                "ofsoftswitch13 numbers its ports 1..n in order")
            sock = self.socket_path()
            ctl = ",".join(f"tcp:{c.IP()}:{c.port}" for c in controllers)
            self.network_ports = sorted(p for i, p in self.ports.items()
                                        if str(i) != "lo" and _to_switch(i))
            self._spawn("ofd", ["ofdatapath", "-i", ",".join(n for _, n in ports),
                                f"punix:{sock}", "-d", dpid_arg(int(self.dpid, 16)),
                                "--no-local-port"])
            if ctl:
                self._spawn("ofp", ["ofprotocol", f"unix:{sock}", ctl, "--fail=closed",
                                    "--out-of-band"])

        def _spawn(self, tag: str, argv: list[str]) -> None:
            with open(os.path.join(workdir, f"{self.name}-{tag}.log"), "w") as log:
                self.procs.append(subprocess.Popen(argv, stdout=log, stderr=log,
                                                   stdin=subprocess.DEVNULL,
                                                   start_new_session=True))

        def stop(self, deleteIntfs=True):
            _end(self.procs)
            self.procs.clear()

        @classmethod
        def batchShutdown(cls, switches, run=None):
            # every daemon signalled first, then waited for: one switch at a time costs a
            # wait per daemon
            _end([p for sw in switches for p in sw.procs])
            for sw in switches:
                sw.procs.clear()
            return switches

        def terminate(self):
            self.stop()

        def exited(self) -> list[str]:
            """The daemons of this switch that have exited (empty: both run)."""
            return [" ".join(p.args[:1]) for p in self.procs if p.poll() is not None]

    return SoftSwitch


def _end(procs: list) -> None:
    """SIGTERM to every process of ``procs`` that runs, then wait (SIGKILL after 5 s)."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def _to_switch(intf) -> bool:
    link = intf.link
    if link is None:
        return False
    other = link.intf2 if link.intf1 is intf else link.intf1
    return hasattr(other.node, "dpid")


def configure_queues(switches, workers: int = 8, wait: float = 30.0) -> float:
    """Give every network port of the running ``switches`` (:func:`soft_switch_class`) the
    queues 1 .. QUEUES - 1 (``dpctl queue-mod``, see the module doc); returns the seconds
    it took.  Raises :class:`RunFailed` naming the switch whose daemon did not come up or
    refused a queue."""
    t0 = time.perf_counter()

    def one(sw) -> None:
        deadline = time.monotonic() + wait
        while not os.path.exists(sw.socket_path()):
            if sw.exited() or time.monotonic() > deadline:
                raise RunFailed(f"switch {sw.name}: ofdatapath did not open "
                                f"{sw.socket_path()} (exited: {sw.exited()})")
            time.sleep(0.05)
        for port in sw.network_ports:
            for q in range(1, QUEUES):
                r = subprocess.run(["dpctl", f"unix:{sw.socket_path()}", "queue-mod", str(port),
                                    str(q), str(QUEUE_MIN_RATE)], capture_output=True,
                                   text=True, timeout=30)
                if r.returncode:
                    raise RunFailed(f"switch {sw.name}: dpctl queue-mod {port} {q} failed: "
                                    f"{(r.stderr or r.stdout).strip()[:300]}")

    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, switches))
    return time.perf_counter() - t0
