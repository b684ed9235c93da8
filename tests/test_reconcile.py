"""fabroute reconcile (tablegen.fabrics.match, tablegen.fabric_cli): a cabled plan mapped back
from the cabling alone, its missing and moved cables named, bad input in one line."""

import json
from collections import Counter

import pytest

from fabroute.cli import main
from tablegen.errors import BadInput
from tablegen.fabrics.cabled import cabled, planned_cables
from tablegen.fabrics.match import match, put_right
from tablegen.topologies.spec import build


def _consistent(res, topo, fabric):
    """Every fitting fabric cable maps onto a planned cable through the switch/port map."""
    plan = set(planned_cables(topo))
    fit = 0
    for (a, pa), (b, pb) in fabric.cables:
        s, t = res.switch[a], res.switch[b]
        ps, pt = res.port[a].get(pa), res.port[b].get(pb)
        if (min((s, ps), (t, pt)) + max((s, ps), (t, pt))) in plan:
            fit += 1
    return fit


GRID = ["slimfly:q=5", "slimfly:q=7", "dsnf:n=32", "dsnf:n=128", "dragonfly:p=2,a=4,h=2"]


@pytest.mark.parametrize("spec", GRID)
def test_an_unperturbed_fabric_matches(spec):
    # the exact search (no cable changed) on every plan kind, ten port/id shuffles each
    topo = build(spec)
    for seed in range(10):
        c = cabled(topo, seed=seed)
        res = match(c.fabric, topo)
        assert res.matches, seed
        assert _consistent(res, topo, c.fabric) == len(c.fabric.cables) == len(topo.links)
        assert sorted(res.switch.values()) == list(range(topo.n_switches))


@pytest.mark.parametrize("seed", range(6))
def test_missing_and_moved_cables_are_named(seed):
    topo = build("slimfly:q=5")
    c = cabled(topo, seed=seed, remove=3, move=2)
    res = match(c.fabric, topo)
    assert (len(res.missing), len(res.moved), len(res.extra)) == (3, 2, 0)
    plan = set(planned_cables(topo))
    present = set()
    for (a, pa), (b, pb) in c.fabric.cables:
        s, ps, t, pt = res.switch[a], res.port[a].get(pa), res.switch[b], res.port[b].get(pb)
        present.add(min((s, ps), (t, pt)) + max((s, ps), (t, pt)))
    for mi in res.missing:
        (a, b), (pa, pb) = mi["between"], mi["ports"]
        s, ps, t, pt = res.switch[a], res.port[a][pa], res.switch[b], res.port[b][pb]
        cable = min((s, ps), (t, pt)) + max((s, ps), (t, pt))
        assert cable in plan and cable not in present
    for mv in res.moved:
        (x, px), (w, pw) = mv["other_end"], mv["plug_into"]
        s, ps, t, pt = res.switch[x], res.port[x][px], res.switch[w], res.port[w][pw]
        assert min((s, ps), (t, pt)) + max((s, ps), (t, pt)) in plan
        assert tuple(mv["unplug"]) != tuple(mv["plug_into"])


def _cable_key(res, a, pa, b, pb):
    """The planned cable a fabric cable is through the map (a port the map leaves out, such
    as the wrong end of a moved cable, as None)."""
    s, ps, t, pt = res.switch[a], res.port[a].get(pa), res.switch[b], res.port[b].get(pb)
    return min((s, ps or 0), (t, pt or 0)) + max((s, ps or 0), (t, pt or 0))


@pytest.mark.parametrize("spec", ["slimfly:q=7", "dsnf:n=128", "dragonfly:p=2,a=4,h=2"])
def test_every_kind_names_exactly_the_changed_cables(spec):
    # 3 removed + 2 moved on each plan kind, four fabrics each: the actions name exactly the
    # cables the truth changed (seed 0 of q = 7 hides two changes behind planned degrees)
    topo = build(spec)
    for seed in range(4):
        c = cabled(topo, seed=seed, remove=3, move=2)
        res = match(c.fabric, topo)
        assert (len(res.missing), len(res.moved), len(res.extra)) == (3, 2, 0), seed
        named, changed = _named_and_changed(res, topo, c.fabric)
        assert len(changed) == 5 and named == changed, seed


def _named_and_changed(res, topo, fabric):
    """The planned cables the actions name (missing ones, and where moved ones belong), and
    the planned cables the fabric does not realise through the map (up to an automorphism
    the map's terms are the truth's, so compare the cable sets the fabric realises)."""
    plan = set(planned_cables(topo))
    present = {_cable_key(res, a, pa, b, pb) for (a, pa), (b, pb) in fabric.cables}
    named = {_cable_key(res, *mi["between"][:1], mi["ports"][0], mi["between"][1],
                        mi["ports"][1]) for mi in res.missing}
    named |= {_cable_key(res, *mv["other_end"], *mv["plug_into"]) for mv in res.moved}
    return named, plan - present


def test_a_dead_end_jumps_back_past_choices_it_does_not_depend_on():
    # the 1K Dragonfly with 5 cables removed and 5 moved, seed 4: routers of a group that
    # differ only in cables to suspects fit in any order among themselves, and plain
    # backtracking in phase 1 retried all those orders (60 s, then "too far"); with
    # conflict-directed backjumping it maps in about 8 s
    topo = build("dragonfly:p=4,a=8,h=4")
    c = cabled(topo, seed=4, remove=5, move=5)
    res = match(c.fabric, topo)
    assert (len(res.missing), len(res.moved), len(res.extra)) == (5, 5, 0)
    named, changed = _named_and_changed(res, topo, c.fabric)
    assert len(changed) == 10 and named == changed


def test_wrong_roots_and_symmetric_options_do_not_eat_the_budget():
    # the 1K Dragonfly with 5 + 5 changes, seed 8: the right image of the first switch was
    # 49th of 60 orbits by hop profile (every router has the same one) and each wrong one
    # retried every arrangement of a group's routers, > 90 s; with the root's 3-walk
    # histogram and options that an automorphism fixing the images so far swaps tried once,
    # it maps in a few seconds
    topo = build("dragonfly:p=4,a=8,h=4")
    c = cabled(topo, seed=8, remove=5, move=5)
    res = match(c.fabric, topo)
    assert (len(res.missing), len(res.moved), len(res.extra)) == (5, 5, 0)
    named, changed = _named_and_changed(res, topo, c.fabric)
    assert len(changed) == 10 and named == changed


@pytest.mark.parametrize("seed", [1, 2, 8])
def test_the_root_is_tried_first_on_its_true_orbit(seed):
    # the root is the clean switch with the fewest suspects within two hops, and its images
    # are ordered by 3-walk histogram: on the 1K Dragonfly, whose routers share every hop
    # profile, the true image's orbit is among the (at most 4 of 60) closest (hop profiles
    # from switch 0 put it 31st, 42nd, 49th)
    import numpy as np
    import pynauty

    from tablegen.fabrics.match import _Graphs
    from tablegen.fabrics.search import Search

    topo = build("dragonfly:p=4,a=8,h=4")
    c = cabled(topo, seed=seed, remove=5, move=5)
    g = _Graphs(c.fabric, topo)
    s = Search(g.fnbr, g.pnbr, g.fhosts, g.phosts)
    assert s.clean[s.root]
    image = c.switch[g.ids[s.root]]
    orbits = np.asarray(pynauty.autgrp(pynauty.Graph(
        s.n, adjacency_dict=s.padict, vertex_coloring=[set(range(s.n))]))[3])
    reps = np.flatnonzero(s.rep)
    best = reps[s.walk_off[reps] == s.walk_off[reps].min()]
    assert len(best) <= 4 and orbits[image] in orbits[best].tolist()


def test_cli_exit_codes(tmp_path, capsys):
    topo = build("slimfly:q=5")
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    cabled(topo, seed=3).fabric.save(good)
    cabled(topo, seed=3, remove=1, move=1).fabric.save(bad)
    assert main(["reconcile", str(good), "slimfly:q=5"]) == 0
    assert "matches" in capsys.readouterr().out
    assert main(["reconcile", str(bad), "slimfly:q=5", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {"matches", "switches", "missing", "moved", "extra", "ports", "hosts"} <= set(doc)
    assert doc["matches"] is False and len(doc["missing"]) == 1 and len(doc["moved"]) == 1


def test_another_size_or_kind_is_one_line(tmp_path, capsys):
    other = tmp_path / "other.json"
    cabled(build("dsnf:n=32"), seed=1).fabric.save(other)
    assert main(["reconcile", str(other), "slimfly:q=5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "32 switches" in err
    with pytest.raises(BadInput, match="cables"):
        match(cabled(build("dsnf:n=50"), seed=1).fabric, build("slimfly:q=5"))


def test_a_fabric_too_far_from_the_plan_says_how_far(tmp_path, capsys):
    # 4 removed + 6 moved: 16 mismatches at best, past the bound of 10 for 175 cables
    far = tmp_path / "far.json"
    cabled(build("slimfly:q=5"), seed=2, remove=4, move=6).fabric.save(far)
    assert main(["reconcile", str(far), "slimfly:q=5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than 10 of 175 planned cables" in err



@pytest.mark.parametrize("spec,swap,seeds", [
    ("slimfly:q=5", 1, range(4)), ("slimfly:q=5", 2, (1, 2)), ("slimfly:q=7", 1, range(3)),
    ("slimfly:q=7", 2, (0,)), ("dsnf:n=128", 1, range(3)),
    ("dragonfly:p=2,a=4,h=2", 1, (0, 2, 4))])
def test_swapped_cables_read_as_two_moves_each(spec, swap, seeds):
    # two cables with their far ends exchanged keep every degree as planned, so the
    # degrees name no suspect and phase 1's exact search finds nothing: its retries (hops
    # only to order, common neighbours allowed to slip) must still find the map, each swap
    # reads as two moved cables (4 mismatches), and carrying the actions out gives the plan
    topo = build(spec)
    for seed in seeds:
        c = cabled(topo, seed=seed, swap=swap)
        degree = Counter(x for cable in c.fabric.cables for x, _ in cable)
        assert all(degree[s] == sum(1 for t in topo.adj[p] if t >= 0)
                   for s, p in c.switch.items()), seed
        res = match(c.fabric, topo)
        assert (len(res.missing), len(res.moved), len(res.extra)) == (0, 2 * swap, 0), seed
        named, changed = _named_and_changed(res, topo, c.fabric)
        assert len(changed) == 2 * swap and named == changed, seed
        assert match(put_right(c.fabric, res), topo).matches, seed


def test_a_swap_at_scale_is_found_fast():
    # Slim Fly q = 19 with one pair of cables swapped (every degree as planned): the exact
    # pass fails, and the retries used to search 32 maps of the clean switches at every
    # mismatch budget from 0 (50 s); they now start at 4 (the exact pass looked for 0, 2 is
    # impossible) and leave at most the four ends of a swap to phase 2 first (about 1 s)
    topo = build("slimfly:q=19")
    c = cabled(topo, seed=0, swap=1)
    res = match(c.fabric, topo)
    assert (len(res.missing), len(res.moved), len(res.extra)) == (0, 2, 0)
    named, changed = _named_and_changed(res, topo, c.fabric)
    assert len(changed) == 2 and named == changed
