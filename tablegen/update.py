"""What changes between two table sets of one fabric: entries, cables, and a safe order.

The same fabric grown (DSN-F expansion, new switches take the next ids), transformed (DSN-F
``p -> p + 1``, every switch relabelled) or degraded (failed links, :mod:`tablegen.topologies.
failures`).  Entries are compared by the *next switch* they send a packet to after mapping old
switch ids to new ones, so a port renumbered under relabelling is no change; cables are
compared as switch pairs with both port ends.

The order (``order``) is what the controller applies (``docs/updates.md`` has the proofs):

* ``ordered`` -- no entry toward an existing destination changes, no cable is removed or
  moved and every VC increment stays: new destinations' entries at existing switches first,
  then the new switches' programs, then the cables.  Every packet between existing hosts is
  forwarded by entries and cables that no step touches, so old and new program route it
  identically, and a packet toward a new host meets either its new entries or none (a drop
  before the host exists, never a wrong port).
* ``two-phase`` (Reitblatt et al., SIGCOMM 2012) otherwise: add the cables, install the new
  program beside the old under the other version tag, flip the ingress entries to stamp it,
  wait until the old version's packets have drained, remove the old program, then the cables
  that went away.  A packet carries one version from its first switch on and only entries
  of that version (or entries equal in both) match it.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from tablegen.errors import BadInput
from tablegen.tables import TableSet
from tablegen.topology import Topology

__all__ = ["cable_diff", "relation", "set_differences", "table_diff"]


def relation(old: Topology, new: Topology) -> tuple[str, np.ndarray | None]:
    """How ``new`` follows from ``old`` -- ``same``, ``grown`` (DSN-F, same ``p``, new ids
    appended), ``transformed`` (DSN-F ``p -> p + 1`` at ``n = p' 2^p'``) -- with ``degraded``
    / ``restored`` appended when failed links differ, and the relabelling (``None``: ids
    kept).  Both are topologies whose names fabroute rebuilds them from (proven table
    directories), so the names decide.  :class:`BadInput` for two different fabrics.
    O(n) (the transformation's relabelling)."""
    a, b = dict(old.params), dict(new.params)
    fa, fb = a.pop("fail", None), b.pop("fail", None)
    how, relabel = None, None
    if old.kind == new.kind == "dsnf" and {"n", "p"} <= a.keys() and {"n", "p"} <= b.keys():
        (na, pa), (nb, pb) = (a["n"], a["p"]), (b["n"], b["p"])
        rest = {k: v for k, v in a.items() if k not in ("n", "p")} == \
            {k: v for k, v in b.items() if k not in ("n", "p")}
        if rest and pa == pb and nb >= na:
            how = "same" if nb == na else "grown"
        elif rest and pb == pa + 1 and na == nb == pb * 2**pb and not fa:
            from tablegen.topologies.dsnf import transform

            how, relabel = "transformed", transform(nb, int(np.unique(new.hosts)[0]))[2]
    elif old.kind == new.kind and a == b:
        how = "same"
    if how is None:
        raise BadInput(f"{new.name()} is neither {old.name()} nor a growth, transformation or "
                       "degraded copy of it; expected two table sets of one fabric")
    if fa != fb:
        how += ", degraded" if fb else ", restored"
    return how, relabel


def _next_switch(ts: TableSet, name: str) -> np.ndarray:
    t = ts.tables[name]
    rows = np.arange(t.shape[0])[:, None]
    return np.where(t >= 0, ts.topo.adj[rows, np.maximum(t, 0)], -1)


def _index(ts: TableSet, name: str) -> str | None:
    """What the columns of table ``name`` are: ``switch`` or ``group`` (``None``: neither)."""
    cols = ts.tables[name].shape[1]
    if cols == ts.topo.n_switches:
        return "switch"
    return "group" if cols == ts.topo.n_groups else None


def cable_diff(old: Topology, new: Topology, relabel: np.ndarray | None = None) -> dict:
    """Cables of ``new`` that ``old`` lacks, cables of ``old`` that ``new`` lacks, and cables
    joining the same two switches on other ports (``replugged``), in new switch ids.

    Rows: ``added``/``removed`` ``[a, port_a, b, port_b, kind]``; ``replugged`` ``[a, b,
    kind, [old port_a, old port_b], [new port_a, new port_b]]`` with ``a <= b``.  Parallel
    cables of one pair are matched on identical ports first.  O(L log L).
    """
    m = np.arange(old.n_switches) if relabel is None else np.asarray(relabel)

    def cables(t: Topology, ids) -> dict:
        out = defaultdict(list)
        for a, pa, b, pb in t.links.tolist():
            kind = t.kind_names[t.link_kind[a, t.port_index(a, pa)]]
            x, y = int(ids[a]), int(ids[b])
            if (x, pa) > (y, pb):
                x, pa, y, pb = y, pb, x, pa
            out[(x, y)].append((pa, pb, kind))
        return out

    before, after = cables(old, m), cables(new, np.arange(new.n_switches))
    added, removed, replugged, kept = [], [], [], 0
    for pair in sorted(before.keys() | after.keys()):
        olds, news = list(before.get(pair, [])), list(after.get(pair, []))
        for c in list(news):
            if c in olds:
                olds.remove(c)
                news.remove(c)
                kept += 1
        for o, c in zip(olds, news):
            replugged.append([*pair, c[2], [o[0], o[1]], [c[0], c[1]]])
        k = min(len(olds), len(news))
        removed += [[pair[0], o[0], pair[1], o[1], o[2]] for o in olds[k:]]
        added += [[pair[0], c[0], pair[1], c[1], c[2]] for c in news[k:]]
    return {"added": added, "removed": removed, "replugged": replugged, "kept": kept + len(replugged)}


def table_diff(old: TableSet, new: TableSet, relabel: np.ndarray | None = None) -> dict:
    """Entries, VCs and cables that change when ``old`` becomes ``new``, and the order.

    Parameters:
        old, new: verified table sets of one fabric (``new`` grown, transformed or degraded).
        relabel: ``int[N_old]`` new id of every old switch (identity when ids are kept).

    Returns a JSON-ready dict: ``entries`` (``added``, ``changed``, ``removed``,
    ``unchanged``, ``old_destinations_changed`` and ``per_switch`` -- new switch id ->
    table -> counts, only where something changes), ``tables`` (the same totals per table),
    ``vcs`` (``old``, ``new``, ``vc_inc_changed``: (switch, port) pairs of old switches whose
    VC increment differs), ``cables`` (:func:`cable_diff`), ``switches`` (``old``, ``new``,
    ``added``), ``order`` (``consistency`` ``ordered`` or ``two-phase``, ``steps``),
    ``differences`` (:func:`set_differences`: routing, path classes, VC count and scheme,
    parameters, candidate and exit-port tables) and ``same``: true only when nothing at all
    differs — entries, cables, VC increments and ``differences``.

    Complexity: O(N_new^2) per table, O(L log L) for the cables.
    """
    n_old, n_new = old.topo.n_switches, new.topo.n_switches
    m = np.arange(n_old) if relabel is None else np.asarray(relabel, dtype=np.int64)
    fresh = np.ones(n_new, dtype=bool)
    fresh[m] = False
    per: dict = defaultdict(dict)
    totals = {"added": 0, "changed": 0, "removed": 0, "unchanged": 0}
    tables = {}
    for name in sorted(old.tables.keys() | new.tables.keys()):
        t = {"added": 0, "changed": 0, "removed": 0, "unchanged": 0}
        if name not in new.tables or name not in old.tables:
            side = old if name in old.tables else new
            cnt = (side.tables[name] >= 0).sum(axis=1)
            key = "removed" if side is old else "added"
            ids = m if side is old else np.arange(n_new)
            t[key] = int(cnt.sum())
            for u in np.flatnonzero(cnt).tolist():
                per[int(ids[u])][name] = {key: int(cnt[u])}
        else:
            kind = _index(old, name)
            if kind is None or kind != _index(new, name):
                continue  # indexed by neither switches nor groups: nothing to compare by
            a, b = _next_switch(old, name), _next_switch(new, name)
            cols = m if kind == "switch" else np.arange(old.tables[name].shape[1])
            if kind == "group" and (relabel is not None or old.topo.n_groups != new.topo.n_groups):
                continue  # groups renumbered (DSN-F p -> p + 1): the switch tables say it all
            mapped = np.where(a >= 0, m[np.maximum(a, 0)], -1)
            nb = b[np.ix_(m, cols)]
            both = (mapped >= 0) & (nb >= 0)
            changed = (both & (mapped != nb)).sum(axis=1)
            unchanged = (both & (mapped == nb)).sum(axis=1)
            removed = ((mapped >= 0) & (nb < 0)).sum(axis=1)
            added_old = ((mapped < 0) & (nb >= 0)).sum(axis=1)       # at old switches
            fresh_cols = np.ones(b.shape[1], dtype=bool)
            fresh_cols[cols] = False
            added_new_cols = (b[m][:, fresh_cols] >= 0).sum(axis=1)  # new destinations
            added_rows = (b[fresh] >= 0).sum(axis=1)                 # new switches
            t["changed"], t["unchanged"] = int(changed.sum()), int(unchanged.sum())
            t["removed"] = int(removed.sum())
            t["added"] = int(added_old.sum() + added_new_cols.sum() + added_rows.sum())
            for i, u in enumerate(m.tolist()):
                c = {"added": int(added_old[i] + added_new_cols[i]), "changed": int(changed[i]),
                     "removed": int(removed[i])}
                if any(c.values()):
                    per[u][name] = c
            for u, c in zip(np.flatnonzero(fresh).tolist(), added_rows.tolist()):
                per[u][name] = {"added": int(c), "changed": 0, "removed": 0}
        tables[name] = t
        for k in totals:
            totals[k] += t[k]
    cables = cable_diff(old.topo, new.topo, relabel)
    inc_changed = _vc_inc_changed(old, new, m)
    entries = dict(totals, old_destinations_changed=totals["changed"] + totals["removed"],
                   per_switch={str(u): per[u] for u in sorted(per)})
    vcs = {"old": int(old.num_vcs), "new": int(new.num_vcs), "vc_inc_changed": inc_changed}
    differences = set_differences(old, new, relabel)
    changed_cables = any(cables[k] for k in ("added", "removed", "replugged"))
    same = (not differences and not changed_cables and inc_changed == 0 and n_old == n_new
            and totals["added"] + totals["changed"] + totals["removed"] == 0)
    # another routing (classes, their tables) is never "ordered": sources choose paths by it
    rerouted = any(d["what"] in ("routing", "classes", "params") for d in differences)
    return {"from": old.topo.name(), "to": new.topo.name(),
            "routing": [old.routing, new.routing], "entries": entries, "tables": tables,
            "vcs": vcs, "cables": cables,
            "switches": {"old": n_old, "new": n_new, "added": int(fresh.sum())},
            "order": _order(entries, cables, vcs, int(fresh.sum()),
                            relabel is not None or rerouted),
            "differences": differences, "same": same}


def set_differences(old: TableSet, new: TableSet, relabel: np.ndarray | None = None) -> list:
    """What differs between two table sets beside their entries and cables: ``routing``,
    ``classes`` (names, or a class's definition: tables, phases, intermediates, VC base,
    bound), ``num_vcs``, ``vc_scheme``, ``params``, and — ids kept and sizes equal —
    ``alternatives`` (equal-cost ports) and ``exit_port``.  A list of ``{"what", "old",
    "new"}`` (the arrays: ``{"what", "changed"}``, entries that differ), empty when they
    agree.  O(N^2)."""
    from dataclasses import asdict

    out = []

    def differ(what, a, b):
        if a != b:
            out.append({"what": what, "old": a, "new": b})

    differ("routing", old.routing, new.routing)
    differ("classes", [c.name for c in old.classes], [c.name for c in new.classes])
    if [c.name for c in old.classes] == [c.name for c in new.classes]:
        for a, b in zip(old.classes, new.classes):
            differ(f"class {a.name}", asdict(a), asdict(b))
    differ("num_vcs", int(old.num_vcs), int(new.num_vcs))
    differ("vc_scheme", old.vc_scheme, new.vc_scheme)
    differ("params", dict(old.params), dict(new.params))
    if relabel is None and old.topo.n_switches == new.topo.n_switches:
        if old.alternatives.shape == new.alternatives.shape:
            n = int((old.alternatives != new.alternatives).sum())
            if n:
                out.append({"what": "alternatives", "changed": n})
        ea, eb = old.exit_port, new.exit_port
        if (ea is None) != (eb is None):
            differ("exit_port", ea is not None, eb is not None)
        elif ea is not None and ea.shape == eb.shape and (n := int((ea != eb).sum())):
            out.append({"what": "exit_port", "changed": n})
    return out


def _vc_inc_changed(old: TableSet, new: TableSet, m: np.ndarray) -> int:
    """Network ports of old switches whose VC increment differs, compared by the neighbour
    the port leads to (a relabelled port is the same port; parallel cables: the first).
    O(N R^2), vectorised."""
    adj = old.topo.adj
    ok = adj >= 0
    to = np.where(ok, m[np.maximum(adj, 0)], -2)                   # [n_old, R] new ids
    there = new.topo.adj[m]                                         # [n_old, R']
    match = there[:, None, :] == to[:, :, None]                     # [n_old, R, R']
    found = match.any(axis=2) & ok
    j2 = match.argmax(axis=2)
    inc_new = np.take_along_axis(new.vc_inc[m], j2, axis=1)
    return int((found & (inc_new != old.vc_inc)).sum())


def _order(entries: dict, cables: dict, vcs: dict, new_switches: int, relabelled: bool) -> dict:
    ordered = (entries["old_destinations_changed"] == 0 and not cables["removed"]
               and not cables["replugged"] and vcs["vc_inc_changed"] == 0
               and vcs["old"] == vcs["new"] and not relabelled)
    if ordered:
        return {"consistency": "ordered", "steps": [
            {"step": "new destinations at existing switches", "entries": entries["added"]},
            {"step": "programs of the new switches", "switches": new_switches},
            {"step": "cables", "added": len(cables["added"])}]}
    return {"consistency": "two-phase", "steps": [
        {"step": "cables added (ports the old program does not use)",
         "added": len(cables["added"])},
        {"step": "new program beside the old, under the other version tag (every switch)"},
        {"step": "ingress entries flipped to stamp the new version"},
        {"step": "old version drained (in-flight packets delivered)"},
        {"step": "old program removed"},
        {"step": "cables removed or replugged", "removed": len(cables["removed"]),
         "replugged": len(cables["replugged"])}]}
