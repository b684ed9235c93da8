"""The compiled walk of deterministic classes (MIN, DSN-F) against a plain walk of every
pair, and its errors on broken tables."""

import numpy as np
import pytest

from tablegen.routing import walk as _walk
from tablegen.routing.build import build_tables
from tablegen.topologies.spec import build
from tablegen.verify import verify


def plain_walk(ts, c):
    """Every (s, d) path hop by hop, as the tables say (no sharing between paths)."""
    topo = ts.topo
    n, r = topo.adj.shape
    V = ts.num_vcs
    t1 = ts.tables[c.table1]
    t0 = ts.tables[c.table0] if c.table0 is not None else None
    deps, seen, hist = set(), set(), {}
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            u, ph, vc, inch, hops = s, 0 if t0 is not None else 1, c.vc_base, None, 0
            while u != d:
                j = int((t0 if ph == 0 else t1)[u, d])
                if ph == 0 and c.exit == "port" and ts.exit_port[u, j]:
                    ph = 1
                if inch is not None:
                    deps.add((inch, j * V + vc))
                seen.add(vc)
                inch = (u * r + j) * V + vc
                vc = min(vc + int(ts.vc_inc[u, j]), V - 1)
                u = int(topo.adj[u, j])
                hops += 1
            hist[hops] = hist.get(hops, 0) + 1
    return deps, seen, hist


@pytest.mark.parametrize("spec,routing", [("slimfly:q=5", "min"), ("dsnf:n=32", "dsnf"),
                                          ("dsnf:n=48", "min"), ("torus:x=5,y=4", "min"),
                                          ("dragonfly:p=2,a=4,h=2", "min")])
def test_shared_walks_mark_what_every_path_marks(spec, routing):
    ts = build_tables(build(spec), routing)
    c = ts.classes[0]
    n, r = ts.topo.adj.shape
    V = ts.num_vcs
    deps = np.zeros((n * r * V, r * V), dtype=bool)
    vc_seen = np.zeros(V, dtype=bool)
    hist, err = _walk.run(ts, c, deps, vc_seen)
    want_deps, want_seen, want_hist = plain_walk(ts, c)
    assert err is None
    assert hist == want_hist
    assert set(zip(*map(list, np.nonzero(deps)))) == want_deps
    assert set(np.flatnonzero(vc_seen).tolist()) == want_seen


def test_a_loop_and_a_dead_entry_are_reported():
    topo = build("slimfly:q=5")
    ts = build_tables(topo, "min")
    t = ts.tables["min"]
    d = 7
    u = next(u for u in range(topo.n_switches) if u != d and topo.adj[u, t[u, d]] != d)
    v = int(topo.adj[u, t[u, d]])
    back = int(np.flatnonzero(topo.adj[v] == u)[0])
    t[v, d] = back                                 # u -> v -> u -> ...
    rep = verify(ts)
    assert not rep.ok and any("longer than" in e and f"toward {d}" in e for e in rep.errors)
    t[v, d] = -1
    rep = verify(ts)
    assert not rep.ok
    assert f"class min: no table entry at switch {v} for destination {d}" in rep.errors
