"""Table updates between two table sets of a growing fabric (DSN-F expansion).

The tables of the old and the new network are compared by the *next switch* each entry sends
a packet to (port numbers may change under relabelling), after mapping old switch ids to new
ones.  This is the list of changes a controller must apply when the fabric grows: entries
that change, entries for new destinations, and whole tables of new switches.
"""

from __future__ import annotations

import numpy as np

from tablegen.tables import TableSet


def _next_switch(ts: TableSet, name: str) -> np.ndarray:
    t = ts.tables[name]
    rows = np.arange(t.shape[0])[:, None]
    return np.where(t >= 0, ts.topo.adj[rows, np.maximum(t, 0)], -1)


def table_updates(old: TableSet, new: TableSet, relabel: np.ndarray | None = None) -> dict:
    """Entries to change when ``old`` becomes ``new``.

    Parameters:
        old, new: table sets of the same routing on the old and the grown topology.
        relabel: ``int[N_old]`` new id of every old switch (identity when growing in place).

    Returns a dict per table name with ``changed`` (old entries whose next switch changes),
    ``added`` (entries for new destinations at old switches), ``new_switch_entries`` (whole
    tables of new switches), ``switches_touched`` (old switches with any change or addition)
    and ``changed_by_switch`` (old id -> count, only where non-zero).

    Complexity: O(N_new^2) per table.
    """
    n_old, n_new = old.topo.n_switches, new.topo.n_switches
    m = np.arange(n_old) if relabel is None else np.asarray(relabel)
    fresh = np.ones(n_new, dtype=bool)
    fresh[m] = False
    out = {}
    for name in old.tables.keys() & new.tables.keys():
        if old.tables[name].shape[1] != n_old or new.tables[name].shape[1] != n_new:
            continue  # indexed by groups, not switches
        a = _next_switch(old, name)
        b = _next_switch(new, name)[np.ix_(m, m)]
        mapped = np.where(a >= 0, m[np.maximum(a, 0)], -1)
        diff = mapped != b
        per = diff.sum(axis=1)
        added = int(fresh.sum()) * n_old
        out[name] = {
            "changed": int(diff.sum()),
            "added": added,
            "new_switch_entries": int(fresh.sum()) * n_new,
            "switches_touched": int(((per > 0) | fresh.any()).sum()),
            "changed_by_switch": {int(u): int(c) for u, c in enumerate(per) if c},
        }
    return out
