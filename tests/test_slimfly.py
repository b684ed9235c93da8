import itertools

import networkx as nx
import numpy as np
import pytest

from tablegen.errors import TopologyError
from tablegen.topologies.gf import GF, PINNED_POLYNOMIALS, first_primitive_polynomial, prime_power
from tablegen.topologies.slimfly import PAPER_XI, build_slimfly, delta_of, generator_sets
from tablegen.topology import distance_matrix

from conftest import slimfly

ADMISSIBLE = [3, 4, 5, 7, 8, 9, 11, 13, 16, 17, 19, 23, 25, 27]


@pytest.mark.parametrize("q", sorted(PINNED_POLYNOMIALS))
def test_pinned_polynomials_are_the_documented_search_result(q):
    p, k = prime_power(q)
    assert PINNED_POLYNOMIALS[q] == first_primitive_polynomial(p, k)
    # x (encoded as p) generates the multiplicative group
    assert GF(q).order(p) == q - 1


@pytest.mark.parametrize("q", [4, 8, 9, 16, 25, 27])
def test_gf_is_a_field(q):
    F = GF(q)
    e = range(q)
    for a, b, c in itertools.product(e, repeat=3):
        assert F.mul[F.mul[a, b], c] == F.mul[a, F.mul[b, c]]
        assert F.mul[a, F.add[b, c]] == F.add[F.mul[a, b], F.mul[a, c]]
    for a in range(1, q):
        assert (F.mul[a] == 1).sum() == 1  # exactly one inverse
        assert F.add[a, F.neg[a]] == 0


def test_gf_rejects_non_prime_powers():
    for q in (6, 10, 12, 15):
        with pytest.raises(TopologyError, match=f"q={q} is not a prime power"):
            GF(q)


def test_q5_is_hoffman_singleton(sf5):
    assert nx.is_isomorphic(sf5.to_networkx(), nx.hoffman_singleton_graph())


@pytest.mark.parametrize("q", ADMISSIBLE)
def test_every_admissible_q_is_kprime_regular_with_diameter_2(q):
    t = slimfly(q)
    kp = (3 * q - delta_of(q)) // 2
    assert t.n_switches == 2 * q * q
    assert (t.degree == kp).all()
    assert int(distance_matrix(t).max()) == 2
    assert t.params["p"] == -(-kp // 2)


def test_generator_sets_are_symmetric_and_sized():
    for q in ADMISSIBLE:
        F = GF(q)
        for xi in F.primitive_elements():
            X, Xp = generator_sets(F, xi)
            assert len(X) == len(Xp) == (q - delta_of(q)) // 2
            assert {int(F.neg[x]) for x in X} == set(X)
            assert {int(F.neg[x]) for x in Xp} == set(Xp)


@pytest.mark.parametrize("q,kp,p,n_s,k,n", [(13, 19, 10, 338, 29, 3380),
                                            (19, 29, 15, 722, 44, 10830)])
def test_yebenes_table_II(q, kp, p, n_s, k, n):
    t = slimfly(q)
    assert (t.n_switches, int(t.degree.max()), t.params["p"], t.n_hosts) == (n_s, kp, p, n)
    assert t.params["xi"] == PAPER_XI[q]
    assert t.radix + int(t.hosts[0]) == k


@pytest.mark.parametrize("q,A,B", [(7, 4, 3), (11, 1, 10), (13, 2, 11), (17, 3, 14), (19, 6, 13)])
def test_algorithm2_adversarial_flows_are_two_hops(q, A, B):
    t = slimfly(q)
    dist = distance_matrix(t)
    q2 = q * q
    src = np.arange(2 * q2)
    dst = np.where(src < q2, (src + A) % q2 + q2, (src + B) % q2)
    assert (dist[src, dst] == 2).all()
    # the transposed numbering s*q^2 + y*q + x would give one-hop flows: the id layout matters
    lab = t.labels
    assert (src == lab[:, 0] * q2 + lab[:, 1] * q + lab[:, 2]).all()


def test_xi_changes_the_graph_for_delta_minus_one():
    # q = 11: primitive elements {2, 6} and {7, 8} give non-isomorphic graphs (invariant: the
    # histogram of common-neighbour counts over switch pairs).
    def hist(t):
        a = np.zeros((t.n_switches,) * 2, dtype=np.int64)
        for u, _, v, _ in t.links:
            a[u, v] = a[v, u] = 1
        c = a @ a
        return np.bincount(c[np.triu_indices(t.n_switches, 1)])

    assert not np.array_equal(hist(build_slimfly(11, xi=2)), hist(build_slimfly(11, xi=7)))
    assert np.array_equal(hist(build_slimfly(11, xi=2)), hist(build_slimfly(11, xi=6)))


def test_bad_parameters_name_the_value():
    with pytest.raises(TopologyError, match="q=6 is not admissible"):
        build_slimfly(6)
    with pytest.raises(TopologyError, match="xi=4 is not a primitive element of GF\\(5\\)"):
        build_slimfly(5, xi=4)
    with pytest.raises(TopologyError, match="q=15 is not a prime power"):
        build_slimfly(15)


def test_port_order_intra_then_cross(sf5):
    t = sf5
    q = 5
    for s in range(t.n_switches):
        nb = t.adj[s]
        kinds = [t.kind_names[k] for k in t.link_kind[s]]
        assert kinds == ["intra"] * 2 + ["cross"] * q
        assert list(nb[:2]) == sorted(nb[:2]) and list(nb[2:]) == sorted(nb[2:])
    # host ports 1..p first, then network ports
    assert t.port_number(0, 0) == t.params["p"] + 1
