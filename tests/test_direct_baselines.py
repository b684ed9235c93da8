"""The direct baselines of the Slim Fly paper: flattened butterfly and hypercube
(tablegen.topologies.hamming) and Jellyfish (tablegen.topologies.jellyfish): construction
invariants, SPEC round trips, bad input, MIN tables proven with hop-indexed VCs."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from fabroute.cli import main
from tablegen.errors import TopologyError
from tablegen.routing.build import build_tables
from tablegen.topologies.hamming import build_fbfly, build_hypercube
from tablegen.topologies.jellyfish import build_jellyfish
from tablegen.topologies.spec import build
from tablegen.topology import UNREACHABLE, distance_matrix
from tablegen.verify import verify

from refusal import refusal


@pytest.mark.parametrize("k,n", [(2, 2), (4, 2), (4, 3), (3, 4)])
def test_fbfly_counts_radix_diameter_and_graph(k, n):
    t = build_fbfly(k, n)
    assert t.n_switches == k ** (n - 1) and t.n_hosts == k ** n      # concentration k
    assert t.radix == (n - 1) * (k - 1) and np.all(t.degree == t.radix)
    assert t.radix + int(t.hosts[0]) == n * (k - 1) + 1              # the paper's k'
    assert int(distance_matrix(t).max()) == n - 1
    # the Hamming graph: the Cartesian product of n-1 complete graphs K_k, ids as documented
    ref = nx.complete_graph(k)
    for _ in range(n - 2):
        ref = nx.cartesian_product(ref, nx.complete_graph(k))
    assert nx.is_isomorphic(t.to_networkx(), ref)
    for s, j in itertools.product(range(t.n_switches), range(t.radix)):
        dim, slot = divmod(j, k - 1)
        x = t.labels[s, dim]
        y = slot + (slot >= x)                                        # the other values in order
        assert t.adj[s, j] == s + (y - x) * k ** dim


@pytest.mark.parametrize("d", [1, 3, 6])
def test_hypercube_ports_flip_bits(d):
    t = build_hypercube(d)
    ids = np.arange(2 ** d)
    assert t.n_switches == 2 ** d and t.n_hosts == 2 ** d and t.radix == d
    for i in range(d):
        assert np.array_equal(t.adj[:, i], ids ^ (1 << i))
    assert int(distance_matrix(t).max()) == d
    assert nx.is_isomorphic(t.to_networkx(), nx.hypercube_graph(d))


@pytest.mark.parametrize("n,k,seed", [(10, 3, 1), (30, 5, 2), (64, 6, 3), (101, 4, 9),
                                      (12, 11, 1)])
def test_jellyfish_regular_simple_connected_deterministic(n, k, seed):
    t = build_jellyfish(n, k, seed)
    assert t.n_switches == n and t.radix == k and np.all(t.degree == k)
    assert not t._has_parallel() and not np.any(t.adj == np.arange(n)[:, None])
    assert int(distance_matrix(t).max()) < UNREACHABLE                 # connected
    again = build_jellyfish(n, k, seed)
    assert np.array_equal(again.adj, t.adj)
    # network ports list the neighbours in increasing id
    assert np.all(np.diff(t.adj, axis=1) > 0)


def test_jellyfish_seeds_differ_and_complete_graph_is_unique():
    a, b = build_jellyfish(40, 5, 1), build_jellyfish(40, 5, 2)
    assert a.edge_set() != b.edge_set()
    full = build_jellyfish(12, 11, 5)
    assert len(full.edge_set()) == 12 * 11 // 2


@pytest.mark.parametrize("spec,name", [
    ("fbfly:k=4,n=3", "fbfly:k=4,n=3"), ("fbfly:k=4,n=3,hosts=2", "fbfly:k=4,n=3,hosts=2"),
    ("fbfly:k=4,n=3,hosts=4", "fbfly:k=4,n=3"), ("hypercube:d=5", "hypercube:d=5"),
    ("hypercube:d=5,hosts=3", "hypercube:d=5,hosts=3"),
    ("jellyfish:n=30,k=5", "jellyfish:n=30,k=5,seed=1"),
    ("jellyfish:n=30,k=4,seed=7,hosts=2", "jellyfish:n=30,k=4,seed=7,hosts=2"),
    ("hypercube:d=4,fail=0-1", "hypercube:d=4,fail=0-1"),
])
def test_spec_round_trip(spec, name):
    t = build(spec)
    assert t.name() == name
    again = build(t.name())
    assert np.array_equal(again.adj, t.adj) and np.array_equal(again.hosts, t.hosts)


@pytest.mark.parametrize("spec,words", [
    ("fbfly:k=4", ["missing n"]),
    ("fbfly:k=1,n=3", ["k=1", ">= 2"]),
    ("fbfly:k=4,n=1", ["n=1", ">= 2"]),
    ("fbfly:k=2,n=20", ["16,385 switches", "k^(n-1) <= 16,384"]),
    ("fbfly:k=34,n=3", ["66 network ports", "(n-1)(k-1) <= 64"]),
    ("hypercube:d=0", ["d=0", ">= 1"]),
    ("hypercube:d=15", ["d=15", "2^d <= 16,384"]),
    ("hypercube:d=14,hosts=9", ["hosts=9", "hosts <= 8"]),
    ("jellyfish:n=5,k=3", ["n*k = 15", "even"]),
    ("jellyfish:n=10,k=10", ["k=10", "[3, 9]"]),
    ("jellyfish:n=10,k=2", ["k=2", "[3, 9]"]),
    ("jellyfish:n=20000,k=4", ["n=20000", "16,384"]),
    ("jellyfish:n=10,k=3,seed=-1", ["seed=-1"]),
    ("jellyfish:n=10,k=4,x=2", ["unknown key x"]),
    ("fattree:k=5", ["k=5", "even"]),
    ("fattree:k=2", ["k=2", "[4, 64]"]),
    ("fattree:k=66", ["k=66", "[4, 64]"]),
    ("fattree:k=4,hosts=3", ["hosts=3", "[1, 2]"]),
    ("fattree:k=4,hosts=0", ["hosts=0", "[1, 2]"]),
    ("fattree:hosts=2", ["missing k"]),
])
def test_bad_input_is_one_line_exit_2(spec, words, capsys):
    with pytest.raises(TopologyError):
        build(spec)
    msg = refusal(["topology", spec], capsys)
    assert all(w in msg for w in words), msg


@pytest.mark.parametrize("spec,vcs", [("fbfly:k=4,n=3", 2), ("hypercube:d=5", 5),
                                      ("jellyfish:n=40,k=6", None)])
def test_min_tables_proven_with_hop_vcs(spec, vcs):
    t = build(spec)
    ts = build_tables(t, "min")
    diam = int(distance_matrix(t).max())
    assert ts.vc_scheme == "hop" and ts.num_vcs == diam == (vcs or diam)
    rep = verify(ts)
    assert rep.ok and rep.classes["min"]["max_hops"] == diam, rep.errors


def test_topology_and_draw_cli(tmp_path, capsys):
    for spec in ("fattree:k=4", "fbfly:k=3,n=3", "hypercube:d=4", "jellyfish:n=16,k=3"):
        assert main(["topology", spec]) == 0
        out = tmp_path / (spec.split(":")[0] + ".svg")
        assert main(["draw", spec, "--out", str(out)]) == 0
        assert out.stat().st_size > 500
    text = capsys.readouterr().out
    assert "fattree:k=4: 20 switches, 16 hosts" in text and "hypercube:d=4: 16 switches" in text
