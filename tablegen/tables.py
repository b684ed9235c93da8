"""The table model: per-switch, destination-based forwarding tables with virtual channels.

Every consumer (verify, exports, the OpenFlow controller, the InfiniBand export, the
simulator) reads this one model, so what is simulated is exactly what is installed.

Header state
------------
A packet carries ``(dst, phase, inter, vc)`` (see ``docs/routing.md``):

* ``dst`` — destination switch (the host behind it is delivered on its host port);
* ``phase`` — ``0`` while the packet heads for its phase-0 target, ``1`` afterwards;
* ``inter`` — the phase-0 target when it is an intermediate (a switch, or a Dragonfly group);
  ``-1`` when the phase-0 table is indexed by the destination itself (DSN-F pre-work);
* ``vc`` — the virtual channel of the packet's next hop.

At switch ``u`` a packet is processed by :func:`TableSet.step`:

1. *arrival*: in phase 0, if the class's ``exit`` rule holds at ``u`` the packet enters phase 1
   (``reach``: ``u`` is the intermediate / lies in the intermediate group; ``on_path``: ``u``
   lies on the phase-1 table path from the intermediate to ``dst`` — VAL_nta's loop cut);
2. *delivery*: in phase 1 (or in a phase 0 indexed by ``dst``) at ``u == dst``;
3. *lookup*: network port index ``j = tables[name][u, target]`` where ``name``/``target`` are
   the phase's table and target;
4. *departure*: in phase 0, if the class's exit rule is ``first_hop`` (VAL_3h), or ``port`` and
   ``exit_port[u, j]`` (DSN-F: leaving on a Shortcut/Succ starts MAIN), the packet enters
   phase 1;
5. the hop uses VC ``vc``; the header's VC becomes ``min(vc + vc_inc[u, j], num_vcs - 1)``.

A path *class* (MIN, a Valiant variant, DSN-F) says which tables the phases use, where a
source may put the intermediate, the exit rule and the VC the first hop uses.  A routing is
one class (MIN, VAL …) or a choice between classes made at the source (UGAL-L).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict, dataclass, field

import numpy as np

from tablegen.limits import MAX_VCS  # VCs a table set may use
from tablegen.topology import Topology

NO_PORT = -1
VC_SCHEMES = ("hop", "global", "dateline", "updown")


@dataclass(frozen=True)
class PathClass:
    """How packets of one class are routed.

    Attributes:
        name: ``min``, ``val``, ``val-nta``, ``val-3h``, ``val-group``, ``dsnf``.
        table1: table used in phase 1 (indexed by ``dst``).
        table0: table used in phase 0, or ``None`` for single-phase classes.
        target0: what phase 0 is indexed by: ``switch`` (an intermediate switch),
            ``group`` (an intermediate group) or ``dst``.
        exit: phase-0 exit rule: ``reach``, ``on_path``, ``first_hop`` or ``port``.
        inter: which intermediates a source may pick: ``switch`` (any switch but source and
            destination), ``switch-3h`` (those whose VAL_3h path does not turn around),
            ``group`` (any group but the source's and the destination's) or ``none``.
        vc_base: VC of the first hop.
        max_hops: the bound on path length that ``verify`` enforces.
    """

    name: str
    table1: str
    table0: str | None = None
    target0: str = "dst"
    exit: str = "reach"
    inter: str = "none"
    vc_base: int = 0
    max_hops: int = 0


@dataclass
class Header:
    dst: int
    phase: int = 1
    inter: int = -1
    vc: int = 0


@dataclass(eq=False)
class TableSet:
    """Forwarding tables of one routing on one topology.

    Attributes:
        topo: the topology.
        routing: routing name (``min``, ``val``, ``val-nta``, ``val-3h``, ``ugal-l``, ``dsnf``).
        classes: the path classes a source chooses from (UGAL-L: MIN first, then non-minimal).
        tables: ``int16[N, T]`` network port index per (switch, target); ``-1`` at the target.
        alternatives: ``uint[N, N]`` bit ``j`` set when network port ``j`` is an equal-cost
            minimal alternative toward the destination (multipath consumers: ECMP, LMC, SELECT
            groups).  Bit ``tables['min'][u, d]`` is always among them.
        vc_inc: ``uint8[N, R]`` 1 where traversing network port ``j`` of ``u`` raises the VC.
        exit_port: ``bool[N, R]`` for classes with ``exit == 'port'``.
        num_vcs: number of VCs the tables use (VCs saturate at ``num_vcs - 1``).
        vc_scheme: ``hop`` (hop-indexed), ``global`` (Kim et al.: +1 after each global hop),
            ``dateline`` (ring datelines), ``updown`` (fat-tree MIN: one VC).
        params: routing parameters (tie-break, UGAL threshold and rule, non-minimal variant).
    """

    topo: Topology
    routing: str
    classes: list[PathClass]
    tables: dict[str, np.ndarray]
    alternatives: np.ndarray
    vc_inc: np.ndarray
    num_vcs: int
    vc_scheme: str
    exit_port: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    _on_path: dict = field(default_factory=dict, repr=False)

    # -- invariants ----------------------------------------------------------------------------
    def check(self) -> None:
        """Raise ``ValueError`` (one line) unless every array has the shape, dtype kind and range
        the model requires: what the compiled walks index without bounds checks.  Run on any
        table set read from a file, before :func:`tablegen.verify.verify`.  O(N^2)."""
        n, r = self.topo.adj.shape
        targets = {"switch": n, "dst": n, "group": self.topo.n_groups}
        if not 1 <= self.num_vcs <= MAX_VCS:
            raise ValueError(f"num_vcs={self.num_vcs}; expected 1..{MAX_VCS}")
        if self.vc_scheme not in VC_SCHEMES:
            raise ValueError(f"vc_scheme={self.vc_scheme!r}; expected one of {VC_SCHEMES}")
        if not self.classes:
            raise ValueError("no path class; expected at least one")
        for name, t in self.tables.items():
            if t.ndim != 2 or t.shape[0] != n or t.shape[1] not in (n, self.topo.n_groups) \
                    or t.dtype.kind not in "iu":
                raise ValueError(f"table {name}: shape {t.shape} dtype {t.dtype}; expected "
                                 f"integers of shape ({n}, {n} or {self.topo.n_groups})")
            bad = t[(t < NO_PORT) | (t >= r)]
            if bad.size:
                raise ValueError(f"table {name}: port index {int(bad[0])}; expected "
                                 f"{NO_PORT}..{r - 1}")
        for c in self.classes:
            for tab, target in ((c.table1, "dst"), (c.table0, c.target0)):
                if tab is None:
                    continue
                if tab not in self.tables or target not in targets \
                        or self.tables[tab].shape[1] != targets[target]:
                    raise ValueError(f"class {c.name}: table {tab!r} toward {target!r} is not "
                                     f"among the tables {sorted(self.tables)} with that width")
            if not 0 <= c.vc_base < self.num_vcs or c.max_hops < 0:
                raise ValueError(f"class {c.name}: vc_base={c.vc_base}, max_hops={c.max_hops}; "
                                 f"expected 0 <= vc_base < {self.num_vcs}, max_hops >= 0")
        for name, a in (("vc_inc", self.vc_inc), ("exit_port", self.exit_port)):
            if a is not None and (a.shape != (n, r) or a.dtype.kind not in "iub"
                                  or (a.size and not 0 <= int(a.min()) <= int(a.max()) <= 1)):
                raise ValueError(f"{name}: shape {a.shape} dtype {a.dtype}; expected 0/1 of "
                                 f"shape ({n}, {r})")
        rr = self.params.get("reroute")
        if rr is not None and (len(self.classes) != 3 or self.classes[0].name != "min"
                               or self.classes[2].name != rr or self.classes[2].vc_base < 1):
            raise ValueError(f"params.reroute={rr!r:.60}; expected the third of the classes "
                             "[min, non-minimal, re-route] with vc_base >= 1")
        if any(c.exit == "port" for c in self.classes) and self.exit_port is None:
            raise ValueError("a class leaves phase 0 by port, but there is no exit_port array")
        if self.alternatives.shape != (n, n) or self.alternatives.dtype.kind != "u":
            raise ValueError(f"alternatives: shape {self.alternatives.shape} dtype "
                             f"{self.alternatives.dtype}; expected unsigned of shape ({n}, {n})")

    # -- lookups -------------------------------------------------------------------------------
    def cls(self, name: str | None = None) -> PathClass:
        if name is None:
            return self.classes[-1]
        for c in self.classes:
            if c.name == name:
                return c
        raise KeyError(f"routing {self.routing} has no path class {name!r}; "
                       f"expected one of {[c.name for c in self.classes]}")

    def start(self, src: int, dst: int, cls: PathClass, inter: int = -1) -> Header:
        """Header a source switch writes for a packet of class ``cls``."""
        if cls.table0 is None:
            return Header(dst, 1, -1, cls.vc_base)
        return Header(dst, 0, inter if cls.target0 != "dst" else -1, cls.vc_base)

    def on_path(self, u: int, src: int, dst: int) -> bool:
        """Whether ``u`` lies on the phase-1 table path from ``src`` to ``dst``."""
        t = self.tables[self.classes[-1].table1]
        x, seen = src, 0
        while True:
            if x == u:
                return True
            if x == dst or seen > self.topo.n_switches:
                return False
            x = int(self.topo.adj[x, t[x, dst]])
            seen += 1

    def on_path_triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All ``(u, I, D)`` with ``u != I`` on the phase-1 table path I -> D (where VAL_nta's
        loop cut sends a packet heading for I on to D), sorted by ``(u, I)``.  Walks every
        (I, D) path once: O(N^2 L) for paths of length L."""
        n = self.topo.n_switches
        t = self.tables[self.classes[-1].table1]
        I, D = np.nonzero(~np.eye(n, dtype=bool))
        x = I.copy()
        us, ii, dd = [], [], []
        for _ in range(n + 1):
            if not len(x):
                break
            x = self.topo.adj[x, t[x, D]]
            us.append(x), ii.append(I), dd.append(D)
            more = x != D
            x, I, D = x[more], I[more], D[more]
        u, i, d = (np.concatenate(a) for a in (us, ii, dd))
        order = np.argsort(u.astype(np.int64) * n + i, kind="stable")
        return u[order], i[order], d[order]

    def step(self, u: int, h: Header, cls: PathClass) -> tuple[int, int, Header]:
        """Process ``h`` at switch ``u``: returns ``(port_index, vc, new_header)``, with
        ``port_index == -1`` when the packet is delivered at ``u``."""
        h = Header(h.dst, h.phase, h.inter, h.vc)
        if h.phase == 0:
            if cls.exit == "reach":
                here = u if cls.target0 == "switch" else int(self.topo.group[u])
                if here == h.inter:
                    h.phase = 1
            elif cls.exit == "on_path" and self.on_path(u, h.inter, h.dst):
                h.phase = 1
        if u == h.dst and (h.phase == 1 or cls.target0 == "dst"):
            return NO_PORT, h.vc, h
        if h.phase == 0:
            target = h.dst if cls.target0 == "dst" else h.inter
            j = int(self.tables[cls.table0][u, target])
            if cls.exit == "first_hop" or (cls.exit == "port" and self.exit_port[u, j]):
                h.phase = 1
        else:
            j = int(self.tables[cls.table1][u, h.dst])
        if j < 0:
            raise RuntimeError(f"no route at switch {u} for header {h}")
        vc = h.vc
        h.vc = min(vc + int(self.vc_inc[u, j]), self.num_vcs - 1)
        return j, vc, h

    def walk(self, src: int, dst: int, cls: PathClass | str | None = None,
             inter: int = -1) -> dict:
        """Follow the tables from ``src`` to ``dst``: switches, out ports (port numbers) and
        VCs per hop.  Raises ``RuntimeError`` on a loop or a missing entry."""
        cls = self.cls(cls) if not isinstance(cls, PathClass) else cls
        h = self.start(src, dst, cls, inter)
        u, switches, ports, vcs = src, [src], [], []
        limit = 4 * self.topo.n_switches + 4
        while True:
            j, vc, h = self.step(u, h, cls)
            if j == NO_PORT:
                break
            ports.append(self.topo.port_number(u, j))
            vcs.append(vc)
            u = int(self.topo.adj[u, j])
            switches.append(u)
            if len(switches) > limit:
                raise RuntimeError(f"loop routing {src} -> {dst} via {inter}")
        return {"switches": switches, "ports": ports, "vcs": vcs}

    def candidates(self, src: int, dst: int, cls: PathClass) -> np.ndarray:
        """Intermediates a source may pick for ``cls`` (empty for single-phase classes)."""
        n = self.topo.n_switches
        if cls.inter == "none":
            return np.empty(0, dtype=np.int64)
        if cls.inter == "group":
            g = np.arange(self.topo.n_groups)
            return g[(g != self.topo.group[src]) & (g != self.topo.group[dst])]
        ids = np.arange(n)
        ok = (ids != src) & (ids != dst)
        if cls.inter == "switch-3h":
            nbr = self.topo.adj[src, self.tables[cls.table0][src, ids[ok]]]
            # A first hop N whose minimal path to dst returns through src would turn around.
            back = np.array([self.on_path(src, int(x), dst) for x in nbr])
            if not back.all():
                sel = np.flatnonzero(ok)
                ok[sel[back]] = False
        return ids[ok]

    # -- serialisation -------------------------------------------------------------------------
    def meta(self) -> dict:
        return {
            "routing": self.routing,
            "topology": self.topo.name(),
            "num_vcs": self.num_vcs,
            "vc_scheme": self.vc_scheme,
            "classes": [asdict(c) for c in self.classes],
            "tables": {k: list(v.shape) for k, v in self.tables.items()},
            "params": self.params,
        }

    def save_npz(self, path) -> None:
        """An ``.npz`` that :func:`numpy.load` reads, deflated at level 1 rather than
        :func:`numpy.savez_compressed`'s 6: five times faster for twice the size (DSN-F
        n = 4096 MIN, 48 MiB of arrays: 8.1 MiB in 0.3 s instead of 4.0 MiB in 1.6 s)."""
        arrays = {f"table_{k}": v for k, v in self.tables.items()}
        arrays["alternatives"] = self.alternatives
        arrays["vc_inc"] = self.vc_inc
        if self.exit_port is not None:
            arrays["exit_port"] = self.exit_port
        arrays["meta"] = np.frombuffer(json.dumps(self.meta()).encode(), np.uint8)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
            for name, a in arrays.items():
                # a fixed time stamp: the same tables give the same bytes (the manifest's hash)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type, info._compresslevel = zipfile.ZIP_DEFLATED, 1
                with z.open(info, "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)

    @classmethod
    def load_npz(cls, path, topo: Topology) -> "TableSet":
        """Read what :meth:`save_npz` wrote for ``topo``; ``ValueError`` before anything is
        decompressed when an entry is larger than arrays over ``topo`` can be."""
        n, r = topo.adj.shape
        cap = 8 * n * max(n, r) + (1 << 20)         # uint64 N x N alternatives, plus headers
        with zipfile.ZipFile(path) as zf:
            big = [i for i in zf.infolist() if i.file_size > cap]
        if big:
            raise ValueError(f"entry {big[0].filename} holds {big[0].file_size} bytes; expected "
                             f"at most {cap} for {topo.name()}")
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            tables = {k[len("table_"):]: z[k] for k in z.files if k.startswith("table_")}
            return cls(
                topo=topo, routing=meta["routing"],
                classes=[PathClass(**c) for c in meta["classes"]], tables=tables,
                alternatives=z["alternatives"], vc_inc=z["vc_inc"], num_vcs=meta["num_vcs"],
                vc_scheme=meta["vc_scheme"],
                exit_port=z["exit_port"] if "exit_port" in z.files else None,
                params=meta["params"])
