"""Build, configure and tear down a Mininet + Open vSwitch (userspace datapath) emulation of a
fabroute fabric, fast.

``emulate(topo, ...)`` is the entry point: a context manager that starts OVS if needed, builds
the net (:class:`FabricNet`) and always tears it down — on success, on an exception, on
Ctrl-C and on SIGTERM.  ``install_from_files(fnet, D)`` loads ``fabroute tables --formats
json,openflow --out D`` into every bridge with ``ovs-ofctl`` (the controller-free baseline).

What is fast here and why (``docs/emulation.md`` has the measurements):

* Mininet's per-link ``ip link add`` / ``ifconfig`` shell round trips are replaced by one
  ``ip -batch`` in the root namespace that creates every veth pair (host ends created directly
  inside the host's namespace) and brings the switch ends up; Mininet still owns the
  :class:`~mininet.link.Link`/``Intf`` objects (no commands run from them).
* Switches get no shell process (:class:`FabricSwitch`); OVS is configured by Mininet's batch
  startup, i.e. one ``ovs-vsctl`` transaction for all bridges and ports (with
  ``ofport_request`` = fabroute port and ``mtu_request``).
* Host shells (one network namespace each) are started from a thread pool.
* Every host is configured by one ``ip -batch`` file (address, MTU, up, the static neighbour
  table of every other emulated host) run in its namespace, all hosts in parallel; IPv6 is
  disabled per namespace through ``/proc/sys`` from this process (``setns``).
* Teardown: one ``ovs-vsctl del-br`` transaction, one ``ip -batch`` deleting the veths, the
  host shells killed by pid.  No ``mn -c`` (it is machine-wide: it would remove other
  people's bridges and ``/tmp/*.log``); :func:`leftovers` / :func:`cleanup_leftovers` find
  and remove what an interrupted run of *this* prefix left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from emulation.mininet import shaping
from emulation.mininet.ofss import TOOLS as ofss_tools
from emulation.mininet.ofss import configure_queues, soft_switch_class
from emulation.mininet.topo import IP_PREFIX, FabricTopo, host_name, switch_name
from tablegen.errors import RunFailed
from tablegen.topology import Topology

__all__ = ["FabricNet", "build_net", "cleanup_leftovers", "emulate",
           "ensure_ovs", "install_from_files", "clear_tables", "leftovers", "netns", "netns_fd",
           "require_tools", "link_group", "HOST_MTU", "SWITCH_MTU"]

#: MTU of the host interfaces (IP packets up to 1500 bytes, frames up to 1514 untagged)
HOST_MTU = 1500
#: ``mtu_request`` of every switch port: room for the pipeline's VLAN tag (4 bytes; MPLS
#: would add 4 per label — the issue's measured MPLS drop of full-size frames) with margin
SWITCH_MTU = 1600
OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


# ---------------------------------------------------------------------------------------------
# tools and Open vSwitch
# ---------------------------------------------------------------------------------------------
APT_OF = {"ovs-vsctl": "openvswitch-switch", "ovs-ofctl": "openvswitch-switch",
          "ovs-appctl": "openvswitch-switch", "mnexec": "mininet", "ip": "iproute2",
          "nsenter": "util-linux", "ethtool": "ethtool"}


def require_tools(*names: str) -> None:
    """Raise :class:`RunFailed` naming the apt package of every missing tool."""
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pk = sorted({APT_OF.get(n, n) for n in missing})
        raise RunFailed(f"missing tool(s) {', '.join(missing)}; install with: "
                        f"apt-get install {' '.join(pk)}")
    if os.geteuid() != 0:
        raise RunFailed("the emulation needs root (network namespaces, OVS)")


def _run(cmd, *, check=True, timeout=120, input=None) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                       shell=isinstance(cmd, str))
    if check and r.returncode != 0:
        raise RunFailed(f"{cmd if isinstance(cmd, str) else ' '.join(cmd)} failed "
                        f"(exit {r.returncode}): {(r.stderr or r.stdout).strip()[:2000]}")
    return r.stdout


def _del_ssl(tries: int = 5) -> None:
    """Remove ``ovs-vswitchd``'s SSL identity, checked by reading it back: a run that left it
    behind would offer its key to the next run's controller."""
    err = ""
    for _ in range(tries):
        d = subprocess.run(["ovs-vsctl", "--timeout=30", "del-ssl"], capture_output=True,
                           text=True)
        g = subprocess.run(["ovs-vsctl", "--timeout=30", "get-ssl"], capture_output=True,
                           text=True)
        if g.returncode == 0 and "Private key" not in g.stdout:
            return
        err = (d.stderr or g.stderr or g.stdout).strip()
        time.sleep(0.5)
    raise RunFailed(f"ovs-vsctl del-ssl left the SSL identity in place: {err[:500]}")


def ensure_ovs(wait: float = 180.0) -> bool:
    """Start Open vSwitch (``ovs-ctl start --system-id=random --no-monitor --no-mlockall``)
    unless ``ovs-vswitchd`` runs; then wait (up to ``wait`` s) until it answers — a busy
    ``ovs-vswitchd`` (e.g. still taking the ports of a previous net down) is not restarted.
    Idempotent; returns whether it started OVS."""
    require_tools("ovs-vsctl", "ovs-ofctl", "ovs-appctl")
    started = False
    if not (_alive("ovsdb-server") and _alive("ovs-vswitchd")):
        if not os.path.exists(OVS_CTL):
            raise RunFailed(f"{OVS_CTL} not found; apt-get install openvswitch-switch")
        _run([OVS_CTL, "start", "--system-id=random", "--no-monitor", "--no-mlockall"],
             timeout=60)
        started = True
    r = subprocess.run(["ovs-appctl", f"--timeout={int(wait)}", "version"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RunFailed("ovs-vswitchd does not answer ovs-appctl within "
                        f"{wait:.0f} s: {r.stderr.strip()}; see "
                        "/var/log/openvswitch/ovs-vswitchd.log")
    return started


def _alive(daemon: str) -> bool:
    try:
        pid = int(Path(f"/var/run/openvswitch/{daemon}.pid").read_text().strip())
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------------------------------------
# network namespaces
# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def netns(pid: int):
    """Run the body with the calling thread in the network namespace of process ``pid``;
    sockets created inside stay in that namespace after the body returns."""
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        with netns_fd(fd):
            yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def netns_fd(fd: int):
    """Like :func:`netns` for an open namespace file descriptor."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise RunFailed(f"setns: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:     # pragma: no cover - cannot recover
                os._exit(70)
    finally:
        os.close(own)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


# ---------------------------------------------------------------------------------------------
# Mininet classes with no per-object shell commands
# ---------------------------------------------------------------------------------------------
def _mininet():
    try:
        from mininet.link import Intf, Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host, OVSSwitch, RemoteController
    except ImportError as e:              # pragma: no cover - environment
        raise RunFailed(f"cannot import mininet ({e}); apt-get install mininet and use a "
                        "venv with --system-site-packages") from None
    return Intf, Link, Host, OVSSwitch, RemoteController, Mininet, setLogLevel


def _classes():
    Intf, Link, Host, OVSSwitch, RemoteController, Mininet, setLogLevel = _mininet()

    class QuietIntf(Intf):
        """An interface created (and deleted) in bulk by :class:`FabricNet`: it records its
        MAC/IP but runs no command."""

        def config(self, mac=None, ip=None, **_params):
            self.mac = mac
            if ip is not None:
                self.ip, self.prefixLen = ip.split("/")[0], int(ip.split("/")[1])
            return {}

        def delete(self):
            self.node.delIntf(self)
            self.link = None

    class PrecreatedLink(Link):
        """A veth pair already made by the net's ``ip -batch``."""

        def __init__(self, node1, node2, **kw):
            kw.setdefault("intf", QuietIntf)
            super().__init__(node1, node2, **kw)

        @classmethod
        def makeIntfPair(cls, *args, **kw):
            return None

    class FabricSwitch(OVSSwitch):
        """OVS bridge without a shell process: commands run as subprocesses; batch startup
        (one ``ovs-vsctl`` for all bridges) sets ``ofport_request`` and ``mtu_request``."""

        mtu = SWITCH_MTU

        @classmethod
        def isOldOVS(cls):                # OVS 3.x; Mininet's check warns per call
            return False

        def startShell(self, mnopts=None):
            self.shell = None
            self.pid = None
            self.execed = False

        def cmd(self, *args, **kwargs):
            return _run(" ".join(str(a) for a in args), check=False)

        def terminate(self):
            self.cleanup()

        def intfOpts(self, intf):
            return super().intfOpts(intf) + f" mtu_request={self.mtu}"

        @classmethod
        def batchShutdown(cls, switches, run=None):
            if switches:
                # --no-wait: ovs-vswitchd needs ~20 ms per port to take a userspace-datapath
                # port down; the next ovs-vsctl that waits (e.g. the next build) absorbs it
                _run("ovs-vsctl --no-wait --timeout=60 " + " -- ".join(
                    f"--if-exists del-br {s.name}" for s in switches), check=False)
            return switches

    class NoCheckController(RemoteController):
        def checkListening(self):
            return None

    return QuietIntf, PrecreatedLink, FabricSwitch, NoCheckController, Host, Mininet, setLogLevel


# ---------------------------------------------------------------------------------------------
# the net
# ---------------------------------------------------------------------------------------------
@dataclass
class FabricNet:
    """A running emulation of ``topo``.

    ``hosts``: ``int64[H', 3]`` rows ``[host, switch, port]`` of the emulated hosts;
    ``host_pid[h]``: pid of host ``h``'s shell (its network namespace);
    ``bridge[s]``: OVS bridge name of switch ``s``; ``ip[h]``/``mac[h]`` of every host id.
    """

    topo: Topology
    net: object
    prefix: str
    hosts: np.ndarray
    controller_port: int | None
    mac: list
    ip: list
    bridges: list
    host_pid: dict = field(default_factory=dict)
    times: dict = field(default_factory=dict)
    #: ``time.perf_counter()`` at ``net.start()``: bridges connect to the controller from then
    started: float = 0.0
    workdir: str = ""
    stopped: bool = False
    tls: bool = False              # set-ssl was configured for this net
    #: capacity of every switch egress port (Mbit/s; ``None``: not shaped) and its queue
    link_mbit: float | None = None
    queue_packets: int | None = None
    #: ``ovs-vswitchd``'s send buffer before shaping raised it (restored by :meth:`stop`)
    ovs_sndbuf: int | None = None
    #: hosts built with TX checksum offload off (``kernel_sockets``); hosts added later match
    kernel_sockets: bool = False
    #: a real fabric's look (:class:`~emulation.mininet.topo.Wiring`): other datapath ids
    #: and port numbers, cables left out; ``None``: the plan's
    wiring: object = None
    #: the switches: ``"ovs"`` (Open vSwitch bridges) or ``"ofss"`` (ofsoftswitch13,
    #: :mod:`emulation.mininet.ofss`)
    datapath: str = "ovs"

    def ofport(self, s: int, p: int) -> int:
        """The OpenFlow port number of switch ``s``'s planned port ``p``."""
        return p if self.wiring is None else self.wiring.port(s, p)

    def bridge(self, s: int) -> str:
        return self.bridges[s]

    def of_socket(self, s: int) -> str:
        """Unix socket on which switch ``s`` answers OpenFlow 1.3 besides its controller
        connection (OVS: the bridge's ``.mgmt``; ofsoftswitch13: ``ofdatapath``'s listener)."""
        if self.datapath == "ofss":
            return os.path.join(self.workdir, f"{self.bridges[s]}.ofd")
        return os.path.join(os.environ.get("OVS_RUNDIR", "/var/run/openvswitch"),
                            f"{self.bridges[s]}.mgmt")

    def host(self, h: int):
        return self.net.get(host_name(h, self.prefix))

    def host_ifname(self, h: int) -> str:
        return f"{host_name(h, self.prefix)}-eth0"

    @property
    def host_ids(self) -> list[int]:
        return self.hosts[:, 0].tolist()

    def switch_ports(self, s: int) -> list[int]:
        """OpenFlow port numbers of switch ``s`` that have an interface (emulated hosts'
        ports, then network ports)."""
        return _switch_ports(self.topo, s, self.hosts, self.wiring)

    def switch_port_names(self) -> list[str]:
        """Every switch-side interface (``<bridge>-eth<port>``): the ports that shaping caps."""
        return [f"{self.bridges[s]}-eth{p}" for s in range(self.topo.n_switches)
                for p in self.switch_ports(s)]

    def ofctl(self, *args: str, check=True, timeout=60) -> str:
        return _run(["ovs-ofctl", "-O", "OpenFlow13", *args], check=check, timeout=timeout)

    # -- teardown -----------------------------------------------------------------------------
    def stop(self) -> None:
        """Tear everything down: bridges (one ``ovs-vsctl`` transaction), veths (one
        ``ip -batch``), host shells; then whatever of this prefix is left."""
        if self.stopped:
            return
        self.stopped = True
        t0 = time.perf_counter()
        try:
            self.net.stop()        # bridges: one --no-wait del-br transaction; host shells
        finally:
            if self.tls:
                _del_ssl()
            if self.ovs_sndbuf is not None:
                shaping.restore_send_buffer(self.ovs_sndbuf)
            _run(["ip", "link", "del", "group", str(link_group(self.prefix))], check=False)
            cleanup_leftovers(self.prefix, self.topo.n_switches)
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self.times["stop"] = time.perf_counter() - t0


def link_group(prefix: str) -> int:
    """Linux interface group of this prefix's switch-side veth ends: ``ip link del group G``
    removes them all in one kernel batch (per-interface deletes cost ~15 ms each)."""
    return 0x0FAB0000 | (zlib.crc32(prefix.encode()) & 0xFFFF)


def _switch_ports(topo: Topology, s: int, hosts: np.ndarray, wiring=None) -> list[int]:
    hp = hosts[hosts[:, 1] == s, 2].tolist()
    net = (topo.hosts[s] + 1 + np.flatnonzero(topo.adj[s] >= 0)).tolist()
    if wiring is None:
        return hp + net
    gone = {(x, px) for a, pa, b, pb in wiring.left_out for x, px in ((a, pa), (b, pb))}
    return [wiring.port(s, p) for p in hp + net if (s, p) not in gone]


def _del_veths(names: list[str]) -> None:
    if not names:
        return
    existing = set(os.listdir("/sys/class/net"))
    cmds = [f"link del dev {n}" for n in names if n in existing]
    if cmds:
        subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(cmds) + "\n",
                       text=True, capture_output=True)


def leftovers(prefix: str = "", n_switches: int | None = None) -> dict:
    """Bridges, root-namespace interfaces and host shells that an emulation with this
    ``prefix`` left behind (``n_switches``: only bridges ``<prefix>s0 .. s<n-1>``)."""
    rb = re.compile(rf"^{re.escape(prefix)}s(\d+)$")
    ri = re.compile(rf"^{re.escape(prefix)}[sh](\d+)-eth\d+$")
    out = subprocess.run(["ovs-vsctl", "--timeout=10", "list-br"], capture_output=True,
                         text=True).stdout.split()
    br = [b for b in out if rb.match(b) and (n_switches is None or
                                               int(rb.match(b).group(1)) < n_switches)]
    ifs = [i for i in os.listdir("/sys/class/net") if ri.match(i)]
    shells = []
    tag = re.compile(rf"^bash\0--norc\0--noediting\0-is\0mininet:{re.escape(prefix)}h\d+\0")
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if tag.match(f.read().decode(errors="replace")):
                        shells.append(int(p))
            except OSError:
                pass
    return {"bridges": br, "interfaces": ifs, "host_shells": shells,
            "qos": [u for rows in shaping.qos_rows(prefix).values() for u in rows]}


def cleanup_leftovers(prefix: str = "", n_switches: int | None = None) -> dict:
    """Remove :func:`leftovers` of this prefix (targeted; never ``mn -c``).  Returns what was
    found."""
    left = leftovers(prefix, n_switches)
    if left["bridges"]:
        _run("ovs-vsctl --no-wait --timeout=60 " + " -- ".join(f"--if-exists del-br {b}"
                                                     for b in left["bridges"]), check=False)
    for pid in left["host_shells"]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _del_veths(left["interfaces"])
    if left["qos"]:
        shaping.remove(prefix)
    return left


def build_net(topo: Topology, *, controller_port: int | None = None,
              hosts_per_switch: int | None = None, prefix: str = "",
              controller_ip: str = "127.0.0.1", tcp: bool = False,
              kernel_sockets: bool = False,
              workers: int = 8, tls: tuple[str, str, str] | None = None,
              link_mbit: float | None = None,
              queue_packets: int = shaping.DEFAULT_QUEUE_PACKETS,
              wiring=None, datapath: str = "ovs",
              standby_port: int | None = None) -> FabricNet:
    """Build and start the emulation (see the module doc); the caller must :meth:`~FabricNet.
    stop` it — use :func:`emulate`.  ``controller_port=None``: bridges without a controller
    (tables from files); otherwise a ``RemoteController`` at ``controller_ip:port`` (the
    caller starts the controller process; switches connect when it listens).  ``tls``:
    ``(key, certificate, CA certificate)`` of the switches — OVS then connects over TLS
    (``ovs-vsctl set-ssl`` is one identity for the whole ``ovs-vswitchd``; it is removed again
    when the net stops).  ``kernel_sockets=True`` (or its older name ``tcp=True``) turns off
    TX checksum offload in the hosts (``ethtool -K <if> tx off``): without it the userspace
    datapath forwards what the hosts' kernel TCP and UDP sockets send with the checksum left
    to the (absent) hardware, and the receiving kernel drops it; frames built whole (the
    probes, :mod:`emulation.mininet.traffic`) need no such thing.  ``link_mbit``: every
    switch egress port capped at that many Mbit/s with a ``queue_packets``-packet queue
    (:mod:`emulation.mininet.shaping`; ``None``: no shaping).  ``wiring``
    (:class:`~emulation.mininet.topo.Wiring`): random datapath ids, permuted port numbers,
    cables left out — a net that looks like a real fabric (``controller --lldp``).
    ``datapath="ofss"``: the switches are CPqD's ofsoftswitch13 instead of OVS bridges
    (:mod:`emulation.mininet.ofss`; no TLS, no shaping).  ``standby_port``: a second
    controller at ``controller_ip:standby_port`` on every bridge (``ovs-vsctl
    set-controller BR tcp:…:P1 tcp:…:P2``: a master and a standby)."""
    tx_off = tcp or kernel_sockets
    ofss = datapath == "ofss"
    if datapath not in ("ovs", "ofss"):
        raise RunFailed(f"datapath {datapath!r}: expected ovs or ofss")
    if ofss and (tls is not None or link_mbit is not None):
        raise RunFailed("the ofsoftswitch13 emulation has no TLS and no link shaping")
    tools = (["ovs-vsctl", "ovs-ofctl", "ovs-appctl"] if not ofss else list(ofss_tools)) + \
        ["mnexec", "ip"] + (["ethtool"] if tx_off else [])
    require_tools(*tools)
    t_ovs = time.perf_counter()
    if not ofss:
        ensure_ovs()
    t_ovs = time.perf_counter() - t_ovs
    QuietIntf, PrecreatedLink, FabricSwitch, NoCheckController, Host, Mininet, setLogLevel = \
        _classes()
    setLogLevel("error")
    stale = leftovers(prefix, None)
    if any(stale.values()):
        cleanup_leftovers(prefix, None)
    times = {"ovs_ready": t_ovs}
    t0 = time.perf_counter()
    ft = FabricTopo(topo, hosts_per_switch=hosts_per_switch, prefix=prefix, wiring=wiring)
    hosts = ft.hosts_table
    bridges = [switch_name(s, prefix) for s in range(topo.n_switches)]
    workdir = tempfile.mkdtemp(prefix="fabroute-emu-")
    switch_cls = soft_switch_class(workdir) if ofss else partial(
        FabricSwitch, datapath="user", protocols="OpenFlow13", failMode="secure")
    # the topo is realised below, not by Mininet.build(): that starts host shells one by one
    # and runs commands per link (Slim Fly q=5: ~8 s build, ~10 s start)
    net = Mininet(topo=ft, switch=switch_cls, host=Host, link=PrecreatedLink, intf=QuietIntf,
                  controller=None, build=False, autoSetMacs=False, autoStaticArp=False,
                  waitConnected=False)
    fnet = FabricNet(topo, net, prefix, hosts, controller_port, ft.macs, ft.ips, bridges,
                     times=times, workdir=workdir, kernel_sockets=tx_off, wiring=wiring,
                     datapath=datapath)
    try:
        if tls is not None:
            _run(["ovs-vsctl", "set-ssl", *tls])
            fnet.tls = True
        if controller_port is not None:
            net.addController(NoCheckController("c0", ip=controller_ip, port=controller_port,
                                                protocol="ssl" if tls else "tcp"))
        if standby_port is not None:
            net.addController(NoCheckController("c1", ip=controller_ip, port=standby_port,
                                                protocol="ssl" if tls else "tcp"))
        # hosts: one shell (= network namespace) each, started in parallel
        names = [host_name(h, prefix) for h in hosts[:, 0].tolist()]
        with ThreadPoolExecutor(workers) as ex:
            nodes = list(ex.map(lambda n: Host(n, **ft.nodeInfo(n)), names))
        for node in nodes:
            net.hosts.append(node)
            net.nameToNode[node.name] = node
        for h, node in zip(hosts[:, 0].tolist(), nodes):
            fnet.host_pid[h] = node.pid
        times["hosts"] = time.perf_counter() - t0
        for name in ft.switches(sort=False):
            net.addSwitch(name, batch=True, **ft.nodeInfo(name))
        # no IPv6 in the host namespaces (set before the interfaces arrive)
        for h, pid in fnet.host_pid.items():
            with netns(pid):
                for k in ("all", "default"):
                    _write(f"/proc/sys/net/ipv6/conf/{k}/disable_ipv6", "1")
        # every veth pair in one ip -batch (root namespace; host ends created in the host's)
        t1 = time.perf_counter()
        links = [info for _, _, info in ft.links(withInfo=True)]
        root_ifs, batch, grp = [], [], link_group(prefix)
        for info in links:
            a, b = info["node1"], info["node2"]
            x, y = f"{a}-eth{info['port1']}", f"{b}-eth{info['port2']}"
            if ft.isSwitch(a):
                batch.append(f"link add name {x} mtu {SWITCH_MTU} group {grp} type veth peer "
                             f"name {y} mtu {SWITCH_MTU} group {grp}")
                root_ifs += [x, y]
            else:                                   # host -> its switch
                batch.append(f"link add name {y} mtu {SWITCH_MTU} group {grp} type veth peer "
                             f"name {x} mtu {HOST_MTU} address {ft.nodeInfo(a)['mac']} "
                             f"netns {net.nameToNode[a].pid}")
                root_ifs.append(y)
        _ip_batch(batch, fnet.workdir, "veths")
        for name in root_ifs:                 # no IPv6 chatter from the switch ends either
            _write(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "1")
        _ip_batch([f"link set dev {n} up" for n in root_ifs], fnet.workdir, "up")
        times["veths"] = time.perf_counter() - t1
        # Mininet's view of the same links (no commands)
        for info in links:
            a = info["node1"]
            ends = {} if ft.isSwitch(a) else {"params1": {"ip": ft.nodeInfo(a)["ip"]},
                                              "addr1": ft.nodeInfo(a)["mac"]}
            net.addLink(a, info["node2"], port1=info["port1"], port2=info["port2"], **ends)
        # hosts: address, MTU, up, static neighbours — one ip -batch per host, in parallel
        t2 = time.perf_counter()
        _configure_hosts(fnet, tx_off, workers)
        times["host_config"] = time.perf_counter() - t2
        net.built = True
        t3 = fnet.started = time.perf_counter()
        net.start()                           # one ovs-vsctl transaction for every bridge
        times["ovs"] = time.perf_counter() - t3
        if ofss:                # it numbers its ports itself (SoftSwitch.start)
            times["queues"] = configure_queues(net.switches, workers)
        else:
            _check_ports(fnet)
        if link_mbit is not None:
            t4 = time.perf_counter()
            fnet.link_mbit, fnet.queue_packets = link_mbit, queue_packets
            ports = fnet.switch_port_names()
            shaping.shape(ports, link_mbit, queue_packets, prefix)
            fnet.ovs_sndbuf = shaping.raise_send_buffer(len(ports), queue_packets,
                                                        fnet.bridges[0], fnet.switch_ports(0)[0])
            times["shaping"] = time.perf_counter() - t4
        times["build"] = time.perf_counter() - t0
        return fnet
    except BaseException:
        fnet.stop()
        raise


def _ip_batch(lines: list[str], workdir: str, tag: str, pid: int | None = None) -> None:
    path = os.path.join(workdir, f"{tag}.ip")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    cmd = (["mnexec", "-a", str(pid)] if pid else []) + ["ip", "-batch", path]
    _run(cmd)


def _configure_hosts(fnet: FabricNet, tx_off: bool, workers: int,
                     ids: list[int] | None = None) -> None:
    """Address, MTU, up and the static neighbour table (every emulated host) of the hosts
    ``ids`` (default: all; ``emulation.mininet.grow`` passes the hosts it adds)."""
    every = fnet.hosts[:, 0].tolist()
    ids = every if ids is None else ids
    neigh = {h: f"neigh replace {fnet.ip[h]} lladdr {fnet.mac[h]} dev {{dev}} nud permanent"
             for h in every}
    procs = []
    for h in ids:
        dev = fnet.host_ifname(h)
        lines = ["link set dev lo up", f"link set dev {dev} mtu {HOST_MTU} up",
                 f"addr add {fnet.ip[h]}/{IP_PREFIX} dev {dev}"]
        lines += [neigh[o].format(dev=dev) for o in every if o != h]
        path = os.path.join(fnet.workdir, f"h{h}.ip")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        cmd = ["mnexec", "-a", str(fnet.host_pid[h]), "ip", "-batch", path]
        if tx_off:
            cmd = ["sh", "-c", " ".join(cmd) + f" && mnexec -a {fnet.host_pid[h]} ethtool -K "
                   f"{dev} tx off >/dev/null"]
        procs.append((h, cmd))
    errors = []
    for i in range(0, len(procs), workers * 4):
        running = [(h, subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)) for h, c in procs[i:i + workers * 4]]
        for h, p in running:
            _, err = p.communicate(timeout=120)
            if p.returncode:
                errors.append(f"host {h}: {err.strip()[:300]}")
    if errors:
        raise RunFailed("host configuration failed: " + "; ".join(errors[:5]))


def _check_ports(fnet: FabricNet) -> None:
    """Every bridge port's OpenFlow number must be the fabroute port number."""
    out = _run(["ovs-vsctl", "--timeout=30", "--format=json", "--columns=name,ofport",
                "list", "Interface"])
    got = {row[0]: row[1] for row in json.loads(out)["data"]}
    bad = []
    for s in range(fnet.topo.n_switches):
        for p in fnet.switch_ports(s):
            name = f"{fnet.bridges[s]}-eth{p}"
            if got.get(name) != p:
                bad.append(f"{name}: ofport {got.get(name)}")
    if bad:
        raise RunFailed(f"{len(bad)} OVS port(s) did not get their fabroute port number "
                        f"(ofport_request): {', '.join(bad[:5])}")


@contextlib.contextmanager
def emulate(topo: Topology, **kw):
    """``with emulate(topo, controller_port=..., hosts_per_switch=..., prefix=...) as fnet:``
    — build the net (:func:`build_net`) and always tear it down, also on Ctrl-C and SIGTERM
    (SIGTERM is turned into ``KeyboardInterrupt`` while the body runs in the main thread).
    Holds a machine-wide lock (:data:`LOCK_PATH`, ``lock_timeout`` s) for the net's life."""
    old = None
    import threading
    t_lock = time.perf_counter()
    lock = _lock(kw.pop("lock_timeout", 900.0))
    t_lock = time.perf_counter() - t_lock
    if threading.current_thread() is threading.main_thread():
        def _term(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        old = signal.signal(signal.SIGTERM, _term)
    fnet = None
    try:
        fnet = build_net(topo, **kw)
        fnet.times["lock_wait"] = t_lock
        yield fnet
    finally:
        try:
            if fnet is not None:
                fnet.stop()
        finally:
            os.close(lock)
            if old is not None:
                signal.signal(signal.SIGTERM, old)


LOCK_PATH = "/run/lock/fabroute-emulation.lock"


def _lock(timeout: float) -> int:
    """One emulation at a time on this machine (``flock`` on :data:`LOCK_PATH`): two nets
    would fight over OVS's single userspace datapath thread and the 2 cores."""
    import fcntl
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise RunFailed(f"another emulation holds {LOCK_PATH} for more than "
                                f"{timeout:.0f} s") from None
            time.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# tables from files (controller-free baseline)
# ---------------------------------------------------------------------------------------------
def clear_tables(fnet: FabricNet) -> None:
    """Delete every flow and group of every bridge (one atomic ``ovs-ofctl bundle`` each)."""
    path = os.path.join(fnet.workdir, "clear.bundle")
    with open(path, "w") as f:
        f.write("flow delete\ngroup delete group_id=all\n")
    _parallel([f"ovs-ofctl -O OpenFlow13 bundle {b} {path}" for b in fnet.bridges],
              "clearing tables")


def _parallel(cmds: list[str], what: str, workers: int = 8) -> None:
    errs = []
    for i in range(0, len(cmds), workers):
        procs = [subprocess.Popen(c, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for c in cmds[i:i + workers]]
        for p in procs:
            _, err = p.communicate(timeout=300)
            if p.returncode:
                errs.append(err.strip()[:300])
    if errs:
        raise RunFailed(f"{what}: {len(errs)} failure(s): {'; '.join(errs[:3])}")


def install_from_files(fnet: FabricNet, table_dir, *, replace: bool = True,
                       workers: int = 8) -> dict:
    """Load ``table_dir/openflow/s<id>.groups`` (if present) and ``s<id>.flows`` into every
    bridge — one ``ovs-ofctl -O OpenFlow13 bundle`` per bridge (an atomic OpenFlow bundle: with
    ``replace``, "delete every flow and group, add the groups, add the flows" commits as one
    transaction, so a bridge never forwards with half a table).  The bundle lines are the
    files' lines prefixed with ``group add`` / ``flow add`` (the ``add-groups`` /
    ``add-flows`` syntax).  Refuses a directory written for another fabric.  Returns
    ``{"flows": n, "groups": n, "seconds": t, "routing": r}``."""
    d = Path(table_dir)
    man_path = d / "openflow" / "manifest.json"
    if not man_path.exists():
        raise RunFailed(f"{man_path} missing; run fabroute tables SPEC --routing R "
                        f"--formats json,openflow --out {d}")
    man = json.loads(man_path.read_text())
    if man.get("topology") != fnet.topo.name() or len(man["switches"]) != fnet.topo.n_switches:
        raise RunFailed(f"{d}: tables for {man.get('topology')}, the net emulates "
                        f"{fnet.topo.name()}")
    t0 = time.perf_counter()
    n_flows = n_groups = 0
    cmds = []
    for sw in man["switches"]:
        s = sw["id"]
        lines = ["flow delete", "group delete group_id=all"] if replace else []
        if sw.get("groups"):
            g = _lines(d / "openflow" / sw["groups"])
            n_groups += len(g)
            lines += ["group add " + x for x in g]
        fl = _lines(d / "openflow" / sw["flows"])
        n_flows += len(fl)
        lines += ["flow add " + x for x in fl]
        path = os.path.join(fnet.workdir, f"s{s}.bundle")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        cmds.append(f"ovs-ofctl -O OpenFlow13 bundle {fnet.bridges[s]} {path}")
    _parallel(cmds, f"installing {d}", workers)
    dt = time.perf_counter() - t0
    fnet.times["install"] = dt
    return {"flows": n_flows, "groups": n_groups, "seconds": dt, "routing": man["routing"]}


def _lines(p: Path) -> list[str]:
    with open(p) as f:
        return [x.strip() for x in f if x.strip() and not x.startswith("#")]
