"""Change a running :class:`~emulation.mininet.net.FabricNet`: add switches with their hosts,
add cables, take links down and up — the emulation side of live table updates.

Growth comes in two steps because the controller wants to program the new switches before
any cable reaches them (a cable that appears first would carry traffic into a switch with an
empty table, or let old switches forward into it):

1. :func:`add_switches` ``(fnet, new_topo, diff)`` — the new switches' bridges (datapath id
   ``s + 1``, the same Mininet/OVS settings and controller target as the bridges that
   :func:`~emulation.mininet.net.build_net` made), their hosts (namespaces, the new
   topology's MAC/IP plan, static neighbour tables) and the host links; every existing host
   learns the new hosts' neighbour entries.  No cable between switches yet: the new bridges
   hold only host ports, and the old bridges are not touched.
2. :func:`add_cables` ``(fnet, rows)`` — the veth pairs of ``(a, port_a, b, port_b)`` rows
   (``CableDiff.added`` of ``tablegen.topologies.dsnf.add_nodes``), both ends attached with
   ``ofport_request`` = the fabroute port number in one ``ovs-vsctl`` transaction.

Both work in bulk, like :func:`~emulation.mininet.net.build_net`: host shells from a thread
pool, one ``ip -batch`` for all veths, one ``ovs-vsctl`` transaction for all bridges or all
ports (it returns once ``ovs-vswitchd`` has them), one ``ip -batch`` per host namespace run in
parallel.  Cost is ``O(new switches + new hosts + cables)`` commands in a constant number of
processes, plus one process per existing host for its neighbour entries (``O(H · new
hosts)`` lines in all).  Each step's completion is returned as ``time.monotonic()``.

:func:`set_link` takes the cable(s) between two switches down or up on both veth ends — what
Mininet's ``link a b down`` does (``ifconfig`` on both interfaces), in one ``ip -batch``.
The kernel drops what is sent into a down veth from the moment the command returns;
``ovs-vswitchd`` sees the link state change by netlink shortly after and reports it to the
controller (``OFPT_PORT_STATUS``).

The :class:`FabricNet` is updated in place (``topo``, ``hosts``, ``mac``, ``ip``,
``bridges``, ``host_pid``, Mininet's node and link lists), so :meth:`FabricNet.stop` tears the
grown net down as usual (the new veths are in the prefix's interface group).  Between
:func:`add_switches` and :func:`add_cables`, ``fnet.topo`` is already the new topology:
:meth:`FabricNet.switch_ports` then lists ports whose cables are still to come.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from emulation.mininet.net import (HOST_MTU, SWITCH_MTU, FabricNet, _configure_hosts,
                                   _ip_batch, _parallel, _run, _write, link_group, netns)
from emulation.mininet.topo import IP_PREFIX, emulated_hosts, host_ip, host_name, switch_name
from tablegen.errors import BadInput, RunFailed
from tablegen.exports.openflow import dpid, host_macs, mac_str
from tablegen.topology import Topology

__all__ = ["add_switches", "add_cables", "set_link", "cables_between"]


def add_switches(fnet: FabricNet, new_topo: Topology, diff, *, workers: int = 8) -> dict:
    """Add the switches of ``new_topo`` beyond ``fnet.topo`` with their hosts, but none of the
    cables of ``diff.added`` (``(a, port_a, b, port_b)`` rows; see :func:`add_cables`).

    ``new_topo`` must keep every existing switch, host count, link, host MAC and IP (what
    ``tablegen.topologies.dsnf.add_nodes`` guarantees; checked), and ``diff.added`` must be
    exactly its links that ``fnet.topo`` lacks.  A net built with ``hosts_per_switch=k``
    attaches the first ``k`` hosts of every new switch too.  Shaped nets are refused: the
    new ports would need their own queues and a larger ``ovs-vswitchd`` send buffer.

    Steps, in this order (returned as ``time.monotonic()`` of their completion):
    ``hosts`` — the new hosts' shells, IPv6 off, host veths created and up, address, MTU and
    the static neighbour table of every emulated host (old and new); ``bridges`` — the new
    bridges with their host ports, one ``ovs-vsctl`` transaction (the controller target,
    ``fail_mode=secure``, ``datapath_type=netdev``, ``protocols=OpenFlow13`` and
    ``mtu_request`` as at build time; their ``ofport`` numbers checked); ``neighbours`` —
    every existing host has a permanent neighbour entry for every new host.

    Cost: a constant number of bulk commands plus one process per existing host (``workers``
    at a time), ``O(H · new hosts)`` neighbour lines in all."""
    old = fnet.topo
    _check_growth(fnet, old, new_topo, diff)
    hps = None if len(fnet.hosts) == old.n_hosts else int(fnet.hosts[:, 2].max())
    ht = emulated_hosts(new_topo, hps)
    new_hosts = ht[ht[:, 1] >= old.n_switches]
    new_sw = list(range(old.n_switches, new_topo.n_switches))
    old_ids = fnet.host_ids
    net, prefix = fnet.net, fnet.prefix
    times = {}
    # the plan of the grown fabric (existing hosts keep theirs: checked above)
    fnet.topo = new_topo
    fnet.mac = mac_str(host_macs(new_topo))
    fnet.ip = [host_ip(h) for h in range(new_topo.n_hosts)]
    fnet.bridges = fnet.bridges + [switch_name(s, prefix) for s in new_sw]
    # hosts: shells (= namespaces) in parallel, registered with Mininet and the net
    ids = new_hosts[:, 0].tolist()
    with ThreadPoolExecutor(workers) as ex:
        nodes = list(ex.map(lambda h: net.host(host_name(h, prefix), ip=_cidr(fnet, h),
                                               mac=fnet.mac[h]), ids))
    for h, node in zip(ids, nodes):
        net.hosts.append(node)
        net.nameToNode[node.name] = node
        fnet.host_pid[h] = node.pid
        with netns(node.pid):
            for k in ("all", "default"):
                _write(f"/proc/sys/net/ipv6/conf/{k}/disable_ipv6", "1")
    fnet.hosts = np.vstack([fnet.hosts, new_hosts])
    switches = [net.addSwitch(switch_name(s, prefix), batch=True, dpid=f"{dpid(s):016x}")
                for s in new_sw]
    sw_ends = [f"{fnet.bridges[s]}-eth{p}" for _, s, p in new_hosts.tolist()]
    if ids:
        _host_links(fnet, new_hosts, sw_ends, workers)
    times["hosts"] = time.monotonic()
    # bridges: Mininet's own start commands (controller, dpid, fail mode, datapath type,
    # protocols, host ports with ofport_request and mtu_request), one transaction
    for sw in switches:
        sw.start(net.controllers)
    type(switches[0]).batchStartup(switches, run=lambda cmd, shell=True: _run(cmd))
    _check_ofports(dict(zip(sw_ends, new_hosts[:, 2].tolist())))
    times["bridges"] = time.monotonic()
    # every existing host learns the new hosts (one ip -batch per host, in parallel)
    cmds = []
    for h in old_ids:
        dev = fnet.host_ifname(h)
        path = os.path.join(fnet.workdir, f"grow-neigh-h{h}.ip")
        with open(path, "w") as f:
            f.write("".join(f"neigh replace {fnet.ip[o]} lladdr {fnet.mac[o]} dev {dev} "
                            "nud permanent\n" for o in ids))
        cmds.append(f"mnexec -a {fnet.host_pid[h]} ip -batch {path}")
    _parallel(cmds, "neighbour entries of the new hosts", workers)
    times["neighbours"] = time.monotonic()
    return times


def add_cables(fnet: FabricNet, rows) -> dict:
    """Create the cables ``rows`` (``(a, port_a, b, port_b)``, links of ``fnet.topo``, e.g.
    ``CableDiff.added`` after :func:`add_switches`): one ``ip -batch`` makes every veth pair
    ``<bridge a>-eth<port_a>`` ↔ ``<bridge b>-eth<port_b>`` (IPv6 off, then up), one
    ``ovs-vsctl`` transaction attaches both ends of all of them with ``ofport_request`` =
    the port number and ``mtu_request``; the ``ofport`` numbers are checked.  Returns
    ``time.monotonic()`` of ``veths`` (pairs exist and are up) and ``ports`` (``ovs-vswitchd``
    has every new port: the cables carry traffic from here on).  ``O(cables)``."""
    rows = [tuple(int(x) for x in r) for r in rows]
    if not rows:
        raise BadInput("add_cables: no cables")
    links = set(map(tuple, fnet.topo.links.tolist()))
    bad = [r for r in rows if r not in links]
    if bad:
        raise BadInput(f"add_cables: {bad[:3]} are not links (a, port_a, b, port_b) of "
                       f"{fnet.topo.name()}")
    # (a net wired like a real fabric: the switches' own port numbers; the cable is no longer
    # left out)
    rows_of = [(a, fnet.ofport(a, pa), b, fnet.ofport(b, pb)) for a, pa, b, pb in rows]
    if fnet.wiring is not None:
        fnet.wiring.left_out = [c for c in fnet.wiring.left_out if c not in rows]
    ends = [(f"{fnet.bridges[a]}-eth{pa}", f"{fnet.bridges[b]}-eth{pb}")
            for a, pa, b, pb in rows_of]
    present = set(os.listdir("/sys/class/net"))
    dup = [x for e in ends for x in e if x in present]
    if dup:
        raise BadInput(f"add_cables: interface(s) {dup[:3]} exist already")
    grp = link_group(fnet.prefix)
    _ip_batch([f"link add name {x} mtu {SWITCH_MTU} group {grp} type veth peer name {y} "
               f"mtu {SWITCH_MTU} group {grp}" for x, y in ends], fnet.workdir,
              "grow-cable-veths")
    names = [x for e in ends for x in e]
    _up(fnet, names, "grow-cable-up")
    times = {"veths": time.monotonic()}
    want = {}
    cmd = ["ovs-vsctl", "--timeout=120"]
    for (a, pa, b, pb), (x, y) in zip(rows_of, ends):
        for s, p, name in ((a, pa, x), (b, pb, y)):
            want[name] = p
            cmd += ["--", "add-port", fnet.bridges[s], name, "--", "set", "Interface", name,
                    f"ofport_request={p}", f"mtu_request={SWITCH_MTU}"]
    _run(cmd)
    times["ports"] = time.monotonic()
    for a, pa, b, pb in rows_of:                    # Mininet's view (no commands)
        fnet.net.addLink(fnet.bridges[a], fnet.bridges[b], port1=pa, port2=pb)
    _check_ofports(want)
    return times


def cables_between(fnet: FabricNet, a: int, b: int) -> list[tuple[int, int, int, int]]:
    """The links ``(a, port_a, b, port_b)`` of ``fnet.topo`` between switches ``a`` and ``b``
    (either order in the table, returned with ``a`` first; parallel cables all listed).
    ``O(links)``."""
    out = []
    for x, px, y, py in fnet.topo.links.tolist():
        if (x, y) == (a, b):
            out.append((x, px, y, py))
        elif (y, x) == (a, b):
            out.append((y, py, x, px))
    return out


def set_link(fnet: FabricNet, a: int, b: int, up: bool) -> float:
    """Take every cable between switches ``a`` and ``b`` down (``up=False``) or up: both veth
    ends, one ``ip -batch`` (Mininet's ``link a b down|up``).  Returns ``time.monotonic()``
    right after the kernel applied it — from then on the veths drop what is sent into them
    (down) or carry it (up).  Raises :class:`BadInput` if ``a`` and ``b`` are not linked.
    ``O(links)`` to find the cables, one process."""
    cables = cables_between(fnet, a, b)
    if not cables:
        raise BadInput(f"set_link: switches {a} and {b} are not linked in {fnet.topo.name()}")
    state = "up" if up else "down"
    _ip_batch([f"link set dev {fnet.bridges[s]}-eth{fnet.ofport(s, p)} {state}"
               for x, px, y, py in cables
               for s, p in ((x, px), (y, py))], fnet.workdir, f"link-{a}-{b}")
    return time.monotonic()


# ---------------------------------------------------------------------------------------------
def _cidr(fnet: FabricNet, h: int) -> str:
    return f"{fnet.ip[h]}/{IP_PREFIX}"


def _host_links(fnet: FabricNet, new_hosts: np.ndarray, sw_ends: list[str], workers: int) -> None:
    """The new hosts' veths (host end created in the host's namespace), up, known to Mininet,
    and the hosts configured (address, MTU, static neighbours of every emulated host)."""
    net, grp = fnet.net, link_group(fnet.prefix)
    _ip_batch([f"link add name {y} mtu {SWITCH_MTU} group {grp} type veth peer name "
               f"{fnet.host_ifname(h)} mtu {HOST_MTU} address {fnet.mac[h]} netns "
               f"{fnet.host_pid[h]}" for (h, _, _), y in zip(new_hosts.tolist(), sw_ends)],
              fnet.workdir, "grow-host-veths")
    _up(fnet, sw_ends, "grow-host-up")
    for h, s, p in new_hosts.tolist():
        net.addLink(host_name(h, fnet.prefix), fnet.bridges[s], port1=0, port2=p,
                    params1={"ip": _cidr(fnet, h)}, addr1=fnet.mac[h])
    _configure_hosts(fnet, fnet.kernel_sockets, workers, new_hosts[:, 0].tolist())


def _up(fnet: FabricNet, names: list[str], tag: str) -> None:
    """IPv6 off on root-namespace interfaces (no router solicitations or MLD reaching the
    bridges), then up — one ``ip -batch``."""
    for n in names:
        _write(f"/proc/sys/net/ipv6/conf/{n}/disable_ipv6", "1")
    _ip_batch([f"link set dev {n} up" for n in names], fnet.workdir, tag)


def _check_growth(fnet: FabricNet, old: Topology, new: Topology, diff) -> None:
    if fnet.stopped:
        raise BadInput("add_switches: the net is stopped")
    if fnet.link_mbit is not None:
        raise BadInput("add_switches: the net is shaped (link_mbit); growing a shaped net is "
                       "not supported")
    n = old.n_switches
    if new.n_switches <= n:
        raise BadInput(f"add_switches: {new.name()} has no switch beyond {old.name()}'s {n}")
    if not np.array_equal(new.hosts[:n], old.hosts):
        raise BadInput(f"add_switches: {new.name()} changes the hosts of existing switches")
    before = set(map(tuple, old.links.tolist()))
    after = set(map(tuple, new.links.tolist()))
    if not before <= after:
        raise BadInput(f"add_switches: {new.name()} drops cables of {old.name()}: "
                       f"{sorted(before - after)[:3]}")
    added = set(tuple(int(x) for x in r) for r in diff.added)
    if added != after - before:
        raise BadInput(f"add_switches: diff.added ({len(added)} cables) is not the "
                       f"{len(after - before)} cables {new.name()} adds")
    macs = mac_str(host_macs(new))
    ids = fnet.host_ids
    if any(macs[h] != fnet.mac[h] for h in ids):
        raise BadInput(f"add_switches: {new.name()} changes the MAC plan of existing hosts")


def _check_ofports(want: dict[str, int]) -> None:
    """Every interface of ``want`` is an OVS port with OpenFlow number ``want[name]``."""
    if not want:
        return
    out = _run(["ovs-vsctl", "--timeout=30", "--format=json", "--columns=name,ofport", "list",
                "Interface", *want])
    got = {row[0]: row[1] for row in json.loads(out)["data"]}
    bad = [f"{n}: ofport {got.get(n)}" for n, p in want.items() if got.get(n) != p]
    if bad:
        raise RunFailed(f"{len(bad)} new OVS port(s) did not get their fabroute port number "
                        f"(ofport_request): {', '.join(bad[:5])}")


def renumbered(topo: Topology, relabel) -> Topology:
    """``topo`` (a renumbered fabric: the running net's switch ``i`` is its switch
    ``relabel[i]``) in the running net's ids (DSN-F ``p -> p + 1`` renumbers every switch;
    the bridges keep their names and datapaths).  Ports, hosts and link kinds stay.
    ``O(N R)``."""
    inv = np.asarray(relabel, dtype=np.int64)      # net id -> topo id
    m = np.empty_like(inv)                         # topo id -> net id
    m[inv] = np.arange(len(inv))
    adj = np.where(topo.adj >= 0, m[np.maximum(topo.adj, 0)], -1)[inv].astype(np.int32)
    return Topology(kind=topo.kind, params=dict(topo.params), label_names=topo.label_names,
                    labels=topo.labels[inv], hosts=topo.hosts[inv], adj=adj,
                    peer=topo.peer[inv], link_kind=topo.link_kind[inv],
                    kind_names=topo.kind_names, cabinet=topo.cabinet[inv],
                    group=topo.group[inv])


def rewire(fnet: FabricNet, new_topo: Topology) -> dict:
    """Move the running net's cables to those of ``new_topo`` (same switches and hosts, in
    the net's ids: :func:`renumbered`): cables only the old topology has are unplugged
    (both ports deleted from their bridges in one ``ovs-vsctl`` transaction, the veth pairs
    in one ``ip -batch``), then those only the new one has are plugged (:func:`add_cables`);
    a cable between the same switches on other ports is both.  Returns counts and
    ``time.monotonic()`` of ``unplugged`` and ``ports``.  ``O(cables)``."""
    if new_topo.n_switches != fnet.topo.n_switches or not np.array_equal(new_topo.hosts,
                                                                        fnet.topo.hosts):
        raise BadInput(f"rewire: {new_topo.name()} has other switches or hosts than "
                       f"{fnet.topo.name()}; expected the same ones")
    def cables(t):          # each cable once, from its smaller (switch, port) end
        return {tuple(x for e in sorted(((a, pa), (b, pb))) for x in e)
                for a, pa, b, pb in t.links.tolist()}

    before, after = cables(fnet.topo), cables(new_topo)
    gone, new = sorted(before - after), sorted(after - before)
    times = {}
    if gone:
        cmd = ["ovs-vsctl", "--timeout=120"]
        for a, pa, b, pb in gone:
            for s, p in ((a, pa), (b, pb)):
                cmd += ["--", "--if-exists", "del-port", fnet.bridges[s], f"{fnet.bridges[s]}-eth{p}"]
        _run(cmd)
        _ip_batch([f"link del dev {fnet.bridges[a]}-eth{pa}" for a, pa, _, _ in gone],
                  fnet.workdir, "rewire-unplug")
        names = {f"{fnet.bridges[s]}-eth{p}" for a, pa, b, pb in gone
                 for s, p in ((a, pa), (b, pb))}
        for link in [x for x in fnet.net.links if x.intf1.name in names]:  # Mininet's view
            fnet.net.links.remove(link)
            for intf in (link.intf1, link.intf2):
                intf.delete()           # QuietIntf: bookkeeping only, no command
    times["unplugged"] = time.monotonic()
    fnet.topo = new_topo
    if new:
        times.update(add_cables(fnet, new))
    return {"removed": len(gone), "added": len(new), **times}
