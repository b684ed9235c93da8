"""The topology value object shared by every fabroute consumer.

A :class:`Topology` holds switches, their hosts and their links with explicit, deterministic
port numbers.  Port numbering is the same everywhere (tables, OpenFlow, InfiniBand, the
simulator):

* ports ``1 .. hosts[s]`` of switch ``s`` connect its hosts, host ``e`` on port ``e + 1``;
* network port index ``j`` (0-based, ``0 <= j < radix``) is port number ``hosts[s] + 1 + j``.
  Which neighbour sits on which index is defined by each topology's constructor and documented
  there (``docs/topologies.md``).  A network port may be unconnected (neighbour ``-1``): DSN-F
  keeps fixed port slots so that expansion never renumbers a port.

Host ids are switch-major: host ``e`` of switch ``s`` is ``host_offset[s] + e`` (for a uniform
concentration ``p`` that is ``s * p + e``, the numbering of Yébenes et al. Algorithm 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tablegen.errors import TopologyError


@dataclass(eq=False)
class Topology:
    """Switches, hosts and links of one fabric.

    Attributes:
        kind: topology family (``slimfly``, ``dragonfly``, ``dsnf``, ``torus``, ``dsn``, ``dln``,
            ``fattree``, ``fbfly``, ``hypercube``, ``jellyfish``).
        params: resolved construction parameters (JSON-serialisable), e.g. ``{"q": 5, "xi": 2}``.
        label_names: names of the label fields, e.g. ``("s", "x", "y")``.
        labels: ``int32[N, len(label_names)]`` label of every switch.
        hosts: ``int32[N]`` hosts (concentration) of every switch.
        adj: ``int32[N, R]`` neighbour switch on network port index ``j`` (``-1``: unconnected).
        peer: ``int32[N, R]`` network port index at the neighbour that the link arrives on.
        link_kind: ``int8[N, R]`` index into ``kind_names`` (``-1``: unconnected).
        kind_names: names of the link kinds (``local``, ``global``, ``shortcut`` ...).
        cabinet: ``int32[N]`` cabinet of every switch in the floor layout.
        group: ``int32[N]`` group of every switch where the family has groups (Dragonfly groups,
            Slim Fly ``(s, x)`` columns, DSN-F super-nodes), else the switch id.
    """

    kind: str
    params: dict
    label_names: tuple[str, ...]
    labels: np.ndarray
    hosts: np.ndarray
    adj: np.ndarray
    peer: np.ndarray
    link_kind: np.ndarray
    kind_names: tuple[str, ...]
    cabinet: np.ndarray
    group: np.ndarray
    _links: np.ndarray | None = field(default=None, repr=False)
    #: derived data computed once per topology (e.g. the minimal tables every routing shares)
    memo: dict = field(default_factory=dict, repr=False)

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def n_switches(self) -> int:
        return int(self.adj.shape[0])

    @property
    def radix(self) -> int:
        """Network port slots per switch (the width of :attr:`adj`)."""
        return int(self.adj.shape[1])

    @property
    def n_hosts(self) -> int:
        return int(self.hosts.sum())

    @property
    def host_offset(self) -> np.ndarray:
        off = np.zeros(self.n_switches + 1, dtype=np.int64)
        np.cumsum(self.hosts, out=off[1:])
        return off

    @property
    def degree(self) -> np.ndarray:
        return (self.adj >= 0).sum(axis=1)

    @property
    def n_groups(self) -> int:
        return int(self.group.max()) + 1

    def name(self) -> str:
        inner = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.kind}:{inner}"

    # -- ports ---------------------------------------------------------------------------------
    def port_number(self, switch: int, index: int) -> int:
        """Port number of network port ``index`` on ``switch``."""
        return int(self.hosts[switch]) + 1 + int(index)

    def port_index(self, switch: int, port: int) -> int:
        """Network port index of port number ``port`` (``-1`` for a host port)."""
        return int(port) - int(self.hosts[switch]) - 1

    def host_of(self, host: int) -> tuple[int, int]:
        """``(switch, port)`` that ``host`` is attached to."""
        off = self.host_offset
        s = int(np.searchsorted(off, host, side="right") - 1)
        return s, int(host - off[s]) + 1

    def label(self, switch: int) -> tuple[int, ...]:
        return tuple(int(v) for v in self.labels[switch])

    @property
    def links(self) -> np.ndarray:
        """``int64[L, 4]`` undirected links ``[a, port_a, b, port_b]`` (port numbers), each once,
        listed from the end with the smaller ``(switch, port)``, sorted."""
        if self._links is None:
            s, j = np.nonzero(self.adj >= 0)
            t = self.adj[s, j]
            k = self.peer[s, j]
            keep = (s < t) | ((s == t) & (j < k))
            s, j, t, k = s[keep], j[keep], t[keep], k[keep]
            self._links = np.stack(
                [s, self.hosts[s] + 1 + j, t, self.hosts[t] + 1 + k], axis=1
            ).astype(np.int64)
        return self._links

    def host_table(self) -> np.ndarray:
        """``int64[H, 3]`` rows ``[host, switch, port]``."""
        sw = np.repeat(np.arange(self.n_switches), self.hosts)
        off = self.host_offset
        h = np.arange(self.n_hosts)
        return np.stack([h, sw, h - off[sw] + 1], axis=1)

    def edge_set(self) -> set[tuple[int, int]]:
        """Undirected switch pairs that are linked (parallel links collapse)."""
        l = self.links
        return {(int(min(a, b)), int(max(a, b))) for a, _, b, _ in l}

    def to_networkx(self):
        import networkx as nx

        g = nx.MultiGraph() if self._has_parallel() else nx.Graph()
        g.add_nodes_from(range(self.n_switches))
        g.add_edges_from((int(a), int(b)) for a, _, b, _ in self.links)
        return g

    def _has_parallel(self) -> bool:
        l = self.links
        pairs = np.sort(l[:, [0, 2]], axis=1)
        return len(np.unique(pairs, axis=0)) != len(pairs)

    def check(self) -> None:
        """Raise :class:`TopologyError` if the port arrays are inconsistent."""
        s, j = np.nonzero(self.adj >= 0)
        t, k = self.adj[s, j], self.peer[s, j]
        if not (np.array_equal(self.adj[t, k], s) and np.array_equal(self.peer[t, k], j)):
            raise TopologyError(f"{self.name()}: port map is not symmetric")
        if np.any((self.adj < 0) != (self.link_kind < 0)):
            raise TopologyError(f"{self.name()}: link kinds do not match the port map")

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "params": self.params,
            "label_names": list(self.label_names),
            "switches": [
                {"id": s, "label": self.label(s), "hosts": int(self.hosts[s]),
                 "group": int(self.group[s]), "cabinet": int(self.cabinet[s])}
                for s in range(self.n_switches)
            ],
            "links": [[int(v) for v in row] for row in self.links],
            "link_kinds": [self.kind_names[self.link_kind[a, self.port_index(a, pa)]]
                           for a, pa, _, _ in self.links],
            "hosts": [[int(v) for v in row] for row in self.host_table()],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Topology":
        n = len(d["switches"])
        hosts = np.array([sw["hosts"] for sw in d["switches"]], dtype=np.int32)
        kind_names = tuple(sorted(set(d["link_kinds"])))
        b = TopologyBuilder(n, hosts, kind_names)
        # Links carry explicit port numbers; place them on exactly those slots.
        for (a, pa, t, pt), kname in zip(d["links"], d["link_kinds"]):
            b.put(a, pa - hosts[a] - 1, t, pt - hosts[t] - 1, kname)
        labels = np.array([sw["label"] for sw in d["switches"]], dtype=np.int32)
        return b.build(
            kind=d["kind"], params=d["params"], label_names=tuple(d["label_names"]),
            labels=labels, group=np.array([sw["group"] for sw in d["switches"]]),
            cabinet=np.array([sw["cabinet"] for sw in d["switches"]]),
        )


class TopologyBuilder:
    """Collects links port by port and produces a :class:`Topology`.

    ``add(a, b, kind)`` gives each end its next free network port index, so a constructor
    defines the port order by the order of its ``add`` calls.  ``put`` places a link on
    explicit port indices (fixed slots).
    """

    def __init__(self, n: int, hosts, kind_names: tuple[str, ...]):
        self.n = n
        self.hosts = np.broadcast_to(np.asarray(hosts, dtype=np.int32), (n,)).copy()
        self.kind_names = tuple(kind_names)
        self._kind = {k: i for i, k in enumerate(self.kind_names)}
        self._ports: list[dict[int, tuple[int, int, int]]] = [dict() for _ in range(n)]
        self._next = [0] * n

    def add(self, a: int, b: int, kind: str) -> None:
        ja, jb = self._next[a], self._next[b] + (1 if a == b else 0)
        self.put(a, ja, b, jb, kind)

    def put(self, a: int, ja: int, b: int, jb: int, kind: str) -> None:
        a, ja, b, jb = int(a), int(ja), int(b), int(jb)
        for s, j in ((a, ja), (b, jb)):
            if j in self._ports[s]:
                raise TopologyError(f"switch {s} port index {j} is used twice")
        k = self._kind[kind]
        self._ports[a][ja] = (b, jb, k)
        self._ports[b][jb] = (a, ja, k)
        self._next[a] = max(self._next[a], ja + 1)
        self._next[b] = max(self._next[b], jb + 1)

    def build(self, *, kind, params, label_names, labels, group=None, cabinet=None,
              radix: int | None = None) -> Topology:
        r = max([max(p) + 1 for p in self._ports if p] + [radix or 0])
        adj = np.full((self.n, r), -1, dtype=np.int32)
        peer = np.full((self.n, r), -1, dtype=np.int32)
        lk = np.full((self.n, r), -1, dtype=np.int8)
        for s, ports in enumerate(self._ports):
            for j, (t, k, kk) in ports.items():
                adj[s, j], peer[s, j], lk[s, j] = t, k, kk
        ids = np.arange(self.n, dtype=np.int32)
        topo = Topology(
            kind=kind, params=dict(params), label_names=tuple(label_names),
            labels=np.asarray(labels, dtype=np.int32).reshape(self.n, -1),
            hosts=self.hosts, adj=adj, peer=peer, link_kind=lk, kind_names=self.kind_names,
            cabinet=(ids // 16 if cabinet is None else np.asarray(cabinet, dtype=np.int32)),
            group=(ids if group is None else np.asarray(group, dtype=np.int32)),
        )
        topo.check()
        return topo


#: Entry of :func:`distance_matrix` for a pair with no path.
UNREACHABLE = 255

def distance_matrix(topo: Topology) -> np.ndarray:
    """Hop distances between all pairs of switches.

    Breadth-first search from every switch at once on bit sets: row ``v`` of the frontier
    holds one bit per source, and one BFS level is an OR of the frontier rows of ``v``'s
    neighbours, so each level costs ``R`` row gathers of ``N / 64`` words per switch.  The
    level of each newly reached pair is OR-ed into 8 bit planes, which are unpacked into bytes
    only once at the end.

    Parameters
    ----------
    topo : Topology
        Any topology; links are undirected and parallel links count once.

    Returns
    -------
    uint8[N, N]
        ``d[u, v]`` hops from ``u`` to ``v``, 0 on the diagonal, :data:`UNREACHABLE` (255) if
        there is no path.  Symmetric.

    Raises
    ------
    ValueError
        If some reachable distance is 255 or more (does not fit ``uint8``).

    Notes
    -----
    Complexity: O(D * N * R * N / 64) word operations plus O(N^2) to unpack, D the diameter and
    R the radix; O(N^2) memory.  A 64x64 torus (N = 4096, D = 64) takes about 0.2 s, several
    times faster than ``scipy.sparse.csgraph.shortest_path`` (unweighted Dijkstra from every
    source), which also returns a float64 matrix 8 times larger.
    """
    return hop_distances(topo.adj, topo.name())


def hop_distances(adj: np.ndarray, name: str) -> np.ndarray:
    """:func:`distance_matrix` of any cabling given as ``adj[v, j]``, the switch on port
    ``j`` of switch ``v`` (-1 for none); ``name`` names it in the error."""
    n = len(adj)
    if n == 0:
        return np.zeros((0, 0), dtype=np.uint8)
    w = (n + 63) // 64
    # Row n stays zero: unconnected ports (-1) gather from it.
    adj = np.where(adj >= 0, adj, n)
    ids = np.arange(n)
    visited = np.zeros((n + 1, w), dtype="<u8")
    visited[ids, ids >> 6] = np.left_shift(np.uint64(1), (ids & 63).astype(np.uint64))
    frontier = visited.copy()
    planes = np.zeros((8, n, w), dtype="<u8")
    level = 0
    while True:
        level += 1
        reach = np.zeros((n, w), dtype="<u8")
        for col in adj.T:
            reach |= frontier[col]
        new = reach & ~visited[:n]
        if not new.any():
            break
        if level >= UNREACHABLE:  # a bad input (e.g. dsn:n=4096,x=1), not a fault: exit 2
            raise TopologyError(f"{name}: a hop distance is >= {UNREACHABLE}, which "
                                f"does not fit uint8; expected a diameter <= {UNREACHABLE - 1}")
        visited[:n] |= new
        frontier[:n] = new
        for b in range(8):
            if level >> b & 1:
                planes[b] |= new
    # Unreached pairs get every plane set, i.e. 255.
    lost = ~visited[:n]
    dist = np.zeros((n, n), dtype=np.uint8)
    for b in range(8):
        bits = np.unpackbits((planes[b] | lost).view(np.uint8), axis=1, bitorder="little")
        dist |= bits[:, :n] << np.uint8(b)
    return dist
