"""A Mininet ``Topo`` of any fabroute :class:`~tablegen.topology.Topology`, with our numbers.

Plans (``docs/emulation.md``):

* **switch** ``s`` is the Mininet switch / OVS bridge ``<prefix>s<s>`` with datapath id
  ``tablegen.exports.openflow.dpid(s) = s + 1`` — the plan of ``docs/formats.md`` that the exported
  files and the controller (``switch_of_dpid``) use; any other datapath id is refused.
* **ports**: every OVS OpenFlow port number is the fabroute port number — host ``e`` of
  switch ``s`` on port ``e + 1``, network port index ``j`` on ``hosts[s] + 1 + j`` (Mininet's
  ``port1``/``port2`` become OVS ``ofport_request``).  Interface names follow:
  ``<switch>-eth<port>``; a host's only interface is ``<host>-eth0``.
* **host** ``h`` (fabroute host id) is ``<prefix>h<h>`` with MAC ``host_macs(topo)[h]``
  (``02:GG:GG:LL:LL:EE``) and IPv4 :func:`host_ip` ``= 10.0.0.0 + h + 1`` in ``10.0.0.0/8``
  (``h = 0`` → ``10.0.0.1``, ``h = 255`` → ``10.0.1.0``; up to 2^24 − 2 hosts).
* ``wiring`` (:class:`Wiring`, :func:`random_wiring`): the net looks like a real fabric
  instead — every switch with a random datapath id and its own port numbers, some cables
  left out (``controller --lldp`` learns it; issue 26).  Interface names then carry the
  OpenFlow port numbers the switch really has.
* ``hosts_per_switch=k`` attaches only the first ``k`` hosts of every switch (ports
  ``1..k``); their ids, MACs, IPs and ports stay those of the full topology, so the tables
  need no change.  The host ports left out simply have no interface.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import numpy as np
from mininet.topo import Topo

from tablegen.exports.openflow import dpid, host_macs, mac_str
from tablegen.fabrics.fabric import Fabric, norm_id
from tablegen.topology import Topology

__all__ = ["FabricTopo", "Wiring", "random_wiring", "host_ip", "host_of_ip", "switch_name", "host_name", "emulated_hosts"]

IP_BASE = int(ipaddress.IPv4Address("10.0.0.0"))
IP_PREFIX = 8


def host_ip(h: int) -> str:
    """IPv4 address of fabroute host ``h``: ``10.0.0.0 + h + 1`` (dotted quad, no prefix)."""
    if not 0 <= h < (1 << 24) - 2:
        raise ValueError(f"host {h}: the 10.0.0.0/8 plan holds hosts 0 .. {(1 << 24) - 3}")
    return str(ipaddress.IPv4Address(IP_BASE + h + 1))


def host_of_ip(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip)) - IP_BASE - 1


def switch_name(s: int, prefix: str = "") -> str:
    return f"{prefix}s{s}"


def host_name(h: int, prefix: str = "") -> str:
    return f"{prefix}h{h}"


def emulated_hosts(topo: Topology, hosts_per_switch: int | None = None) -> np.ndarray:
    """``int64[H', 3]`` rows ``[host, switch, port]`` of the hosts the emulation attaches."""
    ht = topo.host_table()
    if hosts_per_switch is not None:
        if hosts_per_switch < 1:
            raise ValueError(f"hosts_per_switch={hosts_per_switch}; expected >= 1")
        ht = ht[ht[:, 2] <= hosts_per_switch]
    return ht


@dataclass
class Wiring:
    """How the emulated switches differ from the plan: ``dpids[s]`` (datapath id of switch
    ``s``), ``ports[s][planned port]`` (its OpenFlow port number) and ``left_out`` (planned
    cables ``(a, port_a, b, port_b)``, rows of ``topo.links``, not built)."""

    dpids: list[int]
    ports: list[dict[int, int]]
    left_out: list[tuple[int, int, int, int]] = field(default_factory=list)

    def port(self, s: int, p: int) -> int:
        return self.ports[s][p]

    def fabric(self, topo: Topology) -> Fabric:
        """The fabric file an operator would write for this emulated fabric (datapath ids,
        its own port numbers, the hosts' MACs, the cables built): what ``fabroute controller
        --fabric`` is given instead of learning it by LLDP."""
        macs = mac_str(host_macs(topo))
        ids = [norm_id(d) for d in self.dpids]
        switches = {ids[s]: {"name": switch_name(s), "ports": int(topo.hosts[s]) + topo.radix}
                    for s in range(topo.n_switches)}
        hosts = {norm_id(macs[h]): {"name": host_name(h), "switch": ids[s],
                                    "port": self.port(s, p)}
                 for h, s, p in topo.host_table().tolist()}
        gone = set(self.left_out)
        cables = [((ids[a], self.port(a, pa)), (ids[b], self.port(b, pb)))
                  for a, pa, b, pb in topo.links.tolist() if (a, pa, b, pb) not in gone]
        return Fabric("inventory", switches, hosts, cables)

    def planned(self, s: int, port: int) -> int | None:
        """The planned port of switch ``s``'s OpenFlow port ``port``."""
        return next((p for p, q in self.ports[s].items() if q == port), None)


def random_wiring(topo: Topology, seed: int = 1, leave_out: int = 1) -> Wiring:
    """Random 63-bit datapath ids, every switch's ports permuted (numbers 1 .. its planned
    port count) and ``leave_out`` random cables left out; deterministic per seed."""
    rng = np.random.default_rng(seed)
    n = topo.n_switches
    dpids: list[int] = []
    while len(dpids) < n:
        d = int(rng.integers(1, 2**63))
        if d not in dpids:
            dpids.append(d)
    ports = []
    for s in range(n):
        width = int(topo.hosts[s]) + topo.radix
        ports.append({p + 1: int(q) + 1 for p, q in enumerate(rng.permutation(width))})
    links = [tuple(int(x) for x in r) for r in topo.links.tolist()]
    pick = rng.choice(len(links), leave_out, replace=False).tolist() if leave_out else []
    return Wiring(dpids, ports, [links[i] for i in sorted(pick)])


class FabricTopo(Topo):
    """Switches, hosts and links of ``topo`` with fabroute's port numbers (see module doc).

    ``prefix`` is prepended to every node name (two emulations on one machine need different
    prefixes; interface names must stay within Linux's 15 characters).  Besides Mininet's
    graph it keeps ``hosts_table`` (:func:`emulated_hosts`) and, indexed by fabroute host id
    over the whole topology, ``macs`` and ``ips`` (no prefix length).

    ``emulation.mininet.net.build_net`` realises this topo in bulk instead of with ``Mininet.build()``
    (docs/emulation.md, *Building fast*)."""

    def build(self, topo: Topology, hosts_per_switch: int | None = None, prefix: str = "",
              wiring: Wiring | None = None):
        self.hosts_table = emulated_hosts(topo, hosts_per_switch)
        self.macs = macs = mac_str(host_macs(topo))
        self.ips = [host_ip(h) for h in range(topo.n_hosts)]
        longest = len(f"{switch_name(topo.n_switches - 1, prefix)}-eth"
                      f"{int(topo.hosts.max()) + topo.radix}")
        if longest > 15:
            raise ValueError(f"prefix {prefix!r}: interface names reach {longest} characters; "
                             "Linux allows 15")
        w = wiring
        of = (lambda s, p: p) if w is None else w.port      # noqa: E731
        for s in range(topo.n_switches):
            self.addSwitch(switch_name(s, prefix),
                           dpid=f"{dpid(s) if w is None else w.dpids[s]:016x}")
        for h, s, port in self.hosts_table.tolist():
            name = host_name(h, prefix)
            self.addHost(name, ip=f"{self.ips[h]}/{IP_PREFIX}", mac=macs[h])
            self.addLink(name, switch_name(s, prefix), port1=0, port2=of(s, port))
        gone = set() if w is None else set(w.left_out)
        for a, pa, b, pb in topo.links.tolist():
            if (a, pa, b, pb) not in gone:
                self.addLink(switch_name(a, prefix), switch_name(b, prefix), port1=of(a, pa),
                             port2=of(b, pb))
