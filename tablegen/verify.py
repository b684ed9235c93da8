"""Verification of a table set by walking the tables themselves.

:func:`verify` proves, for every source switch, destination switch and source choice (path
class and intermediate):

* delivery: the walk ends at the destination (no dead end, no loop);
* the path-length bound of the class (e.g. VAL_3h <= 3 hops on Slim Fly);
* deadlock freedom: the channel dependency graph (CDG) over channels ``(link, direction, VC)``
  is acyclic.  VCs never decrease along a path, so this is the same as one acyclic CDG per VC.

Method.  Deterministic classes (MIN, DSN-F), Valiant classes that leave phase 0 on reaching the
intermediate (VAL, group-level VAL) and VAL_3h are walked in compiled code
(:mod:`tablegen._walk`) without ever enumerating (source, intermediate, destination) triples:
phase 0 per (source, intermediate), phase 1 once per (switch, destination, VC); their
path-length histograms are exact.  VAL_nta's loop cut depends on both the intermediate and the
destination, so it walks the *header state space* instead: a state is
``(switch, class, phase, target, destination, vc)`` where, while a Valiant packet heads for its
intermediate, the destination is left free (it does not influence the route until the
intermediate is reached).  States are expanded hop by hop from all sources at once (NumPy,
deduplicated per hop); a state whose phase-0 leg ends expands to every destination the class
allows.  Leaving the destination free in phase 0 can only add paths (e.g. a VAL packet whose
destination equals its source), so the check is conservative: an acyclic result is a proof,
and a cycle, printed channel by channel, is a counter-example to inspect.  Dependencies
``in-channel -> out-channel`` are recorded in a dense bitmap of ``channels × (ports × VCs)``.

Complexity: O(sum over hops of live states) time, typically O(N^2 · D · V) for diameter D and
V VCs; memory O(N^2) per hop plus O(N R^2 V^2) bits for the dependency bitmap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .tables import TableSet


class VerificationError(RuntimeError):
    """The table set is wrong; the message says where."""


@dataclass
class Report:
    ok: bool
    routing: str
    topology: str
    switches: int
    num_vcs: int
    vcs_used: int
    classes: dict = field(default_factory=dict)   # name -> {"max_hops": .., "bound": .., "hist": {}}
    cdg: dict = field(default_factory=dict)        # channels, dependencies, per_vc
    errors: list = field(default_factory=list)
    cycle: list = field(default_factory=list)      # [{"switch", "port", "vc"}, …]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _join(pa, va, pb, vb):
    """All pairs ``(va[i], vb[j])`` with ``pa[i] == pb[j]``."""
    oa, ob = np.argsort(pa, kind="stable"), np.argsort(pb, kind="stable")
    pa, va, pb, vb = pa[oa], va[oa], pb[ob], vb[ob]
    lo = np.searchsorted(pb, pa, "left")
    cnt = np.searchsorted(pb, pa, "right") - lo
    total = int(cnt.sum())
    ia = np.repeat(np.arange(len(pa)), cnt)
    start = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
    return va[ia], vb[start + np.arange(total)]


def verify(ts: TableSet, max_cycle_print: int = 64) -> Report:
    """Walk ``ts`` and return a :class:`Report`; ``report.ok`` is False with ``errors`` (and a
    printed ``cycle`` for a cyclic CDG) when the tables are wrong."""
    topo = ts.topo
    n, r = topo.adj.shape
    V = ts.num_vcs
    adj, grp = topo.adj, topo.group
    nchan = n * r * V
    deps = np.zeros((nchan, r * V), dtype=bool)
    report = Report(ok=True, routing=ts.routing, topology=topo.name(), switches=n,
                    num_vcs=V, vcs_used=0)
    vc_seen = np.zeros(V, dtype=bool)
    ids = np.arange(n)
    fanout = any(c.table0 is not None and c.target0 != "dst" for c in ts.classes)
    on_path = _jump_sets(ts) if any(c.exit == "on_path" for c in ts.classes) else None

    for ci, c in enumerate(ts.classes):
        hist: dict[int, int] = {}
        compiled = _compiled_walker(c)
        if compiled is not None:
            hist, err = compiled(ts, c, deps, vc_seen)
            if err:
                report.errors.append(err)
            elif hist and max(hist) > c.max_hops:
                report.errors.append(f"class {c.name}: a path has {max(hist)} hops; the bound "
                                     f"is {c.max_hops}")
            report.classes[c.name] = _class_summary(c, hist)
            continue
        # Rows of the current hop: switch, phase, target (intermediate / exclusion group),
        # destination (-1: free), vc, in-channel (-1 at the source).
        if c.table0 is None or c.target0 == "dst":
            s, d = (a.astype(np.int32) for a in np.nonzero(~np.eye(n, dtype=bool)))
            rows = dict(u=s, ph=np.full(len(s), 0 if c.table0 else 1, dtype=np.int8),
                        t=np.full(len(s), -1, dtype=np.int32), d=d,
                        vc=np.full(len(s), c.vc_base, dtype=np.int8),
                        inc=np.full(len(s), -1, dtype=np.int32))
        else:
            m = topo.n_groups if c.target0 == "group" else n
            s, t = np.nonzero(np.ones((n, m), dtype=bool))
            keep = (grp[s] != t) if c.target0 == "group" else (s != t)
            s, t = s[keep], t[keep]
            rows = dict(u=s, ph=np.zeros(len(s), dtype=np.int8), t=t, d=np.full(len(s), -1),
                        vc=np.full(len(s), c.vc_base, dtype=np.int8), inc=np.full(len(s), -1))
        if len(rows["u"]) == 0 and n > 1:
            report.errors.append(f"class {c.name}: no source has a route choice")
        hop = 0
        while len(rows["u"]):
            if hop > c.max_hops:
                u, d = int(rows["u"][0]), int(rows["d"][0])
                report.errors.append(
                    f"class {c.name}: a path is longer than {c.max_hops} hops (loop?) — "
                    f"e.g. a packet at switch {u} toward {d} after {hop} hops")
                break
            rows, parent = _arrive(ts, c, rows, fanout, on_path, ids)
            # delivery (a destination equal to the source is no flow: drop it at hop 0)
            at_dst = rows["d"] == rows["u"]
            here = at_dst & ((rows["ph"] == 1) | (c.target0 == "dst")) & (hop > 0)
            rows_keep = ~at_dst if hop == 0 else True
            if here.any():
                hist[hop] = hist.get(hop, 0) + int(here.sum())
            live = ~here & rows_keep
            inc = {k: rows.pop(k) for k in ("_inc_key", "_inc_chan") if k in rows}
            rows = {k: v[live] for k, v in rows.items()}
            parent = parent[live] if parent is not None else None
            if not len(rows["u"]):
                break
            # lookup
            u, d, ph = rows["u"], rows["d"], rows["ph"]
            ph0 = ph == 0
            if c.table0 is None:
                j = ts.tables[c.table1][u, d]
            else:
                j = np.empty(len(u), dtype=np.int16)
                if c.table1 is not None:
                    j[~ph0] = ts.tables[c.table1][u[~ph0], d[~ph0]]
                tgt = d[ph0] if c.target0 == "dst" else rows["t"][ph0]
                j[ph0] = ts.tables[c.table0][u[ph0], tgt]
            bad = j < 0
            if bad.any():
                k = np.flatnonzero(bad)[0]
                report.errors.append(
                    f"class {c.name}: no table entry at switch {int(u[k])} for destination "
                    f"{int(d[k])} (phase {int(ph[k])}, target {int(rows['t'][k])})")
                break
            if c.exit == "first_hop":
                ph = np.ones_like(ph)
            elif c.exit == "port":
                ph = np.where(ph0 & ts.exit_port[u, j], 1, ph).astype(np.int8)
            vc = rows["vc"]
            vc_seen |= np.bincount(vc, minlength=V)[:V] > 0
            col = j.astype(np.int32) * V + vc
            out = u * (r * V) + col
            # dependencies in-channel -> out-channel, joined through the parent state
            if parent is None:
                ins, cols = rows["inc"], col
            else:
                pu, pi = np.unique(np.stack([parent, out]), axis=1)
                ins, outs = _join(inc["_inc_key"], inc["_inc_chan"], pu, pi)
                cols = outs % (r * V)
            if hop == 0 or parent is not None:
                has_in = ins >= 0
                ins, cols = ins[has_in], cols[has_in]
            deps[ins, cols] = True
            nvc = np.minimum(vc + ts.vc_inc[u, j], V - 1).astype(np.int8)
            nxt = dict(u=adj[u, j], ph=ph, t=rows["t"], d=d, vc=nvc, inc=out)
            rows = _dedupe(nxt, n, V) if fanout else nxt
            hop += 1
        report.classes[c.name] = _class_summary(c, hist)
    report.vcs_used = int(np.flatnonzero(vc_seen).max() + 1) if vc_seen.any() else 0
    _check_cdg(ts, deps, report, max_cycle_print)
    report.ok = not report.errors
    return report


def _compiled_walker(c):
    """The compiled walk for deterministic classes (MIN, DSN-F), for Valiant classes that
    leave phase 0 on reaching the intermediate and for VAL_3h; ``None`` for the state-space
    walk (VAL_nta)."""
    from ._walk import run, run_3h, run_reach

    if c.table0 is None or c.target0 == "dst":
        return run
    return {"reach": run_reach, "first_hop": run_3h}.get(c.exit)


def _class_summary(c, hist: dict) -> dict:
    return {"max_hops": max(hist) if hist else 0, "bound": c.max_hops,
            "hist": {str(k): v for k, v in sorted(hist.items())}}


def _dedupe(rows, n, V):
    key = ((((rows["ph"].astype(np.int64) * (n + 2) + rows["t"] + 1) * (n + 1) + rows["d"] + 1)
            * n + rows["u"]) * V + rows["vc"]) * (n * 64 * V + 1) + rows["inc"] + 1
    _, first = np.unique(key, return_index=True)
    return {k: v[first] for k, v in rows.items()}


def _arrive(ts: TableSet, c, rows, fanout, on_path, ids):
    """Phase-0 arrival rules; returns the rows after them and, for fan-out classes, the
    parent index of each row (``None`` without fan-out: each row keeps its own in-channel).
    The incidence parent -> in-channel rides along in ``rows`` for :func:`_join`."""
    n = ts.topo.n_switches
    if not fanout:
        return rows, None
    # unique keys (without the in-channel) and the incidence key -> in-channel
    key = (((rows["ph"].astype(np.int64) * (n + 2) + rows["t"] + 1) * (n + 1) + rows["d"] + 1)
           * n + rows["u"]) * ts.num_vcs + rows["vc"]
    ukey, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inc_key, inc_chan = inv.ravel(), rows["inc"]
    k = {f: v[first] for f, v in rows.items() if f != "inc"}
    nk = len(ukey)
    out_parts, par_parts = [], []
    ph0 = k["ph"] == 0
    keep = np.ones(nk, dtype=bool)
    if c.exit in ("reach", "on_path"):
        here = k["u"] if c.target0 == "switch" else ts.topo.group[k["u"]]
        reached = ph0 & (here == k["t"])
        if reached.any():
            # the phase-0 leg is over: expand to every destination the class allows
            pk = np.flatnonzero(reached)
            pp, dd = np.repeat(pk, n), np.tile(ids, len(pk))
            if c.target0 == "group":
                ok = ts.topo.group[dd] != k["t"][pp]
            else:
                ok = dd != k["t"][pp]
            pp, dd = pp[ok], dd[ok]
            out_parts.append(dict(u=k["u"][pp], ph=np.ones(len(pp), dtype=k["ph"].dtype),
                                  t=np.full(len(pp), -1), d=dd, vc=k["vc"][pp]))
            par_parts.append(pp)
            keep &= ~reached
        if c.exit == "on_path" and on_path is not None:
            cand = np.flatnonzero(ph0 & keep)
            jp, jd = on_path(k["u"][cand], k["t"][cand])
            pp = cand[jp]
            out_parts.append(dict(u=k["u"][pp], ph=np.ones(len(pp), dtype=k["ph"].dtype),
                                  t=np.full(len(pp), -1), d=jd, vc=k["vc"][pp]))
            par_parts.append(pp)
    kk = np.flatnonzero(keep)
    out_parts.insert(0, {f: v[kk] for f, v in k.items()})
    par_parts.insert(0, kk)
    rows = {f: np.concatenate([p[f] for p in out_parts]) for f in out_parts[0]}
    rows["_inc_key"], rows["_inc_chan"] = inc_key, inc_chan
    parent = np.concatenate(par_parts)
    return rows, parent


def _jump_sets(ts: TableSet):
    """For VAL_nta: a function mapping phase-0 states (u, I) to the destinations D for which
    u lies on the table path I -> D (where the loop cut sends the packet on to D)."""
    n = ts.topo.n_switches
    u, i, dst = ts.on_path_triples()
    code = u.astype(np.int64) * n + i

    def lookup(qu, qi):
        q = qu.astype(np.int64) * n + qi
        lo = np.searchsorted(code, q, "left")
        cnt = np.searchsorted(code, q, "right") - lo
        rep = np.repeat(np.arange(len(q)), cnt)
        pos = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
        return rep, dst[pos]

    return lookup


def _check_cdg(ts: TableSet, deps, report: Report, max_cycle_print: int) -> None:
    topo = ts.topo
    n, r = topo.adj.shape
    V = ts.num_vcs
    ins, cols = np.nonzero(deps)
    # in-channel (u, j, vc) ends at switch adj[u, j]; the out-channel leaves there
    u_in = ins // (r * V)
    j_in = (ins // V) % r
    w = topo.adj[u_in, j_in]
    outs = (w.astype(np.int64) * r + cols // V) * V + cols % V
    nchan = n * r * V
    per_vc = np.bincount(outs % V, minlength=V)
    report.cdg = {"channels": int(np.unique(np.concatenate([ins, outs])).size) if len(ins) else 0,
                  "dependencies": int(len(ins)),
                  "per_vc": {str(v): int(per_vc[v]) for v in range(V)}}
    if not len(ins):
        return
    g = coo_matrix((np.ones(len(ins), dtype=np.int8), (ins, outs)), shape=(nchan, nchan)).tocsr()
    ncomp, label = connected_components(g, directed=True, connection="strong")
    sizes = np.bincount(label)
    big = np.flatnonzero(sizes > 1)
    selfloop = ins == outs
    if not len(big) and not selfloop.any():
        return
    import networkx as nx

    if len(big):
        comp = big[np.argmin(sizes[big])]
        members = np.flatnonzero(label == comp)
        sub = nx.DiGraph()
        m = np.isin(ins, members) & np.isin(outs, members)
        sub.add_edges_from(zip(ins[m].tolist(), outs[m].tolist()))
        cyc = [a for a, _ in nx.find_cycle(sub)]
    else:
        cyc = [int(ins[selfloop][0])]
    report.cycle = [{"switch": int(ch // (r * V)),
                     "port": topo.port_number(int(ch // (r * V)), int((ch // V) % r)),
                     "to": int(topo.adj[ch // (r * V), (ch // V) % r]),
                     "vc": int(ch % V)} for ch in cyc[:max_cycle_print]]
    text = " -> ".join(f"{c['switch']}:{c['port']}(vc{c['vc']})" for c in report.cycle)
    report.errors.append(f"channel dependency graph has a cycle of {len(cyc)} channels: {text}")
