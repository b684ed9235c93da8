"""The streaming PathRecord read-back of ``ib apply`` / ``ib compare``
(:mod:`emulation.ibsim.readback`): the triples as arrays, ``path-sl.txt`` evaluated for arrays
of triples, the reader's answers parsed block by block, the reader process's failures — and
on a REAL ibsim fabric with REAL OpenSM 3.3.23 every PathRecord read (``--max-paths 0``),
with a negative control whose loaded path-sl.txt differs from the files in many triples."""

import io
import json
import random
import sys

import numpy as np
import pytest

from emulation.ibsim import apply as ib_apply
from emulation.ibsim.readback import (NO_SL, Answers, PathSlTable, _parse_answers,
                                      path_queries, run_reader)
from fabroute.cli import main
from tablegen.errors import RunFailed
from tablegen.exports.infiniband.read import load_ib_files, parse_path_sl

from conftest import ib_processes


@pytest.fixture(scope="module")
def df_val2(tmp_path_factory):
    """Dragonfly p=h=2, a=4 (36 switches, 72 HCAs), Valiant at LMC 2: several SLs, 72 x (71 x 4
    + 36) = 23 040 triples."""
    out = tmp_path_factory.mktemp("dfval2") / "ib"
    assert main(["ib", "export", "dragonfly:p=2,a=4,h=2", "--routing", "val", "--lmc", "2",
                 "--out", str(out)]) == 0
    return out


def _reference_pairs(ts, max_paths):
    """The sampling rule, one triple at a time (the list ``path_pairs`` built before)."""
    n_h, n_s, n_off = len(ts.guids["hosts"]), len(ts.guids["switches"]), 1 << ts.lmc
    per_src = (n_h - 1) * n_off + n_s
    k = max(1, -(-n_h * per_src // max_paths)) if max_paths else 1
    out = []
    for i in range(n_h):
        for j in range(i % k, per_src, k):
            if j < (n_h - 1) * n_off:
                d, off = divmod(j, n_off)
                out.append((i, d + (d >= i), off))
            else:
                out.append((i, n_h + j - (n_h - 1) * n_off, 0))
    return out, n_h * per_src, k


def _guids(ts):
    return ([int(h["port_guid"], 16) for h in ts.guids["hosts"]]
            + [int(s["guid"], 16) for s in ts.guids["switches"]])


def _expected(rules, guids, pairs):
    """Each triple's SL by the first-match rules, one call per triple (no rule: 0)."""
    return [rules.sl(guids[i], guids[j], off) or 0 for i, j, off in pairs]


# -- no processes ------------------------------------------------------------------------------
@pytest.mark.parametrize("lmc", [0, 1, 2])
@pytest.mark.parametrize("max_paths", [0, 1, 999, 3_000, 10**9])
def test_path_pairs_are_arrays_of_the_same_triples(df_val2, lmc, max_paths):
    ts = load_ib_files(df_val2)
    ts.lmc = lmc                               # the arithmetic only
    pairs, total, k = ib_apply.path_pairs(ts, max_paths)
    want, want_total, want_k = _reference_pairs(ts, max_paths)
    assert (total, k) == (want_total, want_k) and pairs.dtype == ib_apply.PAIR_DTYPE
    assert np.stack([pairs["src"], pairs["dst"], pairs["off"]], 1).tolist() \
        == [list(t) for t in want]


def test_path_sl_table_is_the_first_matching_rule(df_val2):
    """Random rules of every wildcard class (a switch as source, offsets given or '*',
    repeated keys) in random order: the vectorised lookup gives, for every triple, the SL
    and the no-rule flag of the rule-by-rule evaluation."""
    ts = load_ib_files(df_val2)
    guids = _guids(ts)
    rng = random.Random(7)
    hosts = guids[:len(ts.guids["hosts"])]
    hexes = [f"0x{g:016x}" for g in guids]
    dsts = hexes[1:]                 # the first HCA as destination: at offset 0 no rule
    lines = [f"* * {rng.choice('123')} {rng.randrange(16)}" for _ in range(5)]
    lines += [f"* {rng.choice(dsts)} {rng.choice('*0123')} {rng.randrange(16)}"
              for _ in range(60)]
    lines += [f"{rng.choice(hexes)} * {rng.choice('*123')} {rng.randrange(16)}"
              for _ in range(60)]
    lines += [f"{rng.choice(hexes[:len(hosts)] + hexes)} {rng.choice(dsts)} "
              f"{rng.choice('*0123')} {rng.randrange(16)}" for _ in range(3_000)]
    rng.shuffle(lines)
    ts.path_sl = parse_path_sl("\n".join(lines), "random rules")
    pairs, total, _ = ib_apply.path_pairs(ts, 0)
    sl, ruled = PathSlTable(ts).sls(pairs["src"], pairs["dst"], pairs["off"])
    want = [ts.path_sl.sl(guids[i], guids[j], int(o)) for i, j, o in pairs.tolist()]
    assert len(pairs) == total
    assert ruled.tolist() == [w is not None for w in want]
    assert sl.tolist() == [w or 0 for w in want]
    assert 0 < ruled.sum() < total              # both cases occur


def test_path_sl_table_falls_to_the_sl_matrix_where_no_rule_matches(df_val2):
    """Rules first, then the SL matrix: random groups (some ports in none), rows for some
    source groups only (short ones among them): the vectorised lookup agrees with the
    rule-by-rule one on every triple, and all three outcomes occur (a rule, the matrix,
    neither)."""
    ts = load_ib_files(df_val2)
    guids = _guids(ts)
    rng = random.Random(11)
    hexes = [f"0x{g:016x}" for g in guids]
    lines = [f"{rng.choice(hexes)} {rng.choice(hexes)} * {rng.randrange(16)}"
             for _ in range(400)]
    lines += [f"group {h} {rng.randrange(6)}" for h in hexes if rng.random() < 0.9]
    lines += [f"row {g} " + "".join(rng.choice("0123456789abcdefABCDEF")
                                    for _ in range(rng.choice([3, 6, 6])))
              for g in rng.sample(range(6), 5)]
    rng.shuffle(lines)
    ts.path_sl = parse_path_sl("\n".join(lines), "rules and a matrix")
    pairs, total, _ = ib_apply.path_pairs(ts, 0)
    sl, ruled = PathSlTable(ts).sls(pairs["src"], pairs["dst"], pairs["off"])
    want = [ts.path_sl.sl(guids[i], guids[j], int(o)) for i, j, o in pairs.tolist()]
    assert ruled.tolist() == [w is not None for w in want]
    assert sl.tolist() == [w or 0 for w in want]
    rules = parse_path_sl("\n".join(ln for ln in lines if ln[0] in "0*"), "the rules alone")
    by_rule = [rules.sl(guids[i], guids[j], int(o)) is not None for i, j, o in pairs.tolist()]
    assert 0 < sum(by_rule) < ruled.sum() < total       # a rule, the matrix, neither


def test_answers_are_parsed_block_by_block():
    """300 000 PathRecord answers (several read blocks, a line cut at each block's end) after
    the LFT / SL2VL lines; failed queries become NO_SL, their first reasons kept; a last line
    without its newline still counts."""
    rng = np.random.default_rng(3)
    n = 300_000
    sls = rng.integers(0, 16, n)
    fail = set(rng.choice(n, 40, replace=False).tolist())
    lines = ["ok 1 2 3", "err timeout"] + [
        f"err reason{i}" if i in fail else f"ok {s} {i % 49_000 + 1}" for i, s in enumerate(sls)]
    ans = Answers([], np.full(n, NO_SL, dtype=np.int8))
    got = _parse_answers(io.BufferedReader(io.BytesIO("\n".join(lines).encode())), ans, 2, 10)
    assert got == n + 2 and ans.lines == ["ok 1 2 3", "err timeout"]
    want = np.where(np.isin(np.arange(n), list(fail)), NO_SL, sls)
    assert np.array_equal(ans.path_sls, want) and ans.path_errors == 40
    assert ans.reasons == {i: f"reason{i}" for i in sorted(fail)[:10]}


def test_queries_are_slid_dlid_lines(df_val2):
    ts = load_ib_files(df_val2)
    pairs, _, _ = ib_apply.path_pairs(ts, 0)
    text = b"".join(path_queries(ts, pairs)).decode()
    hosts, switches = ts.guids["hosts"], ts.guids["switches"]
    lid = [h["lid"] for h in hosts] + [s["lid"] for s in switches]
    assert [l.split() for l in text.splitlines()] == \
        [["P", str(lid[i]), str(lid[j] + o)] for i, j, o in pairs.tolist()]


def test_reader_failure_reports_status_answer_count_and_stderr(tmp_path):
    cmd = [sys.executable, "-c", "import sys; sys.stdin.read(); print('ok 3 7'); "
           "print('out of memory', file=sys.stderr); sys.exit(2)"]
    chunks = iter([b"L 0 0\n", b"P 1 2\nP 1 3\n"])
    with pytest.raises(RunFailed, match=r"exited with status 2 after 1 of 3 answers") as e:
        run_reader(cmd, tmp_path, {}, chunks, 1, 2, 60, {"x": 1})
    assert e.value.report["log_tail"] == ["out of memory"] and e.value.report["x"] == 1


def test_reader_killed_at_the_time_limit(tmp_path):
    cmd = [sys.executable, "-c", "import sys, time; sys.stdin.read(); time.sleep(60)"]
    with pytest.raises(RunFailed, match="did not finish in time"):
        run_reader(cmd, tmp_path, {}, iter([b"P 1 2\n"] * 1000), 0, 1000, 1.0, {})


# -- real OpenSM on ibsim -----------------------------------------------------------------------
@pytest.mark.ib
@pytest.mark.usefixtures("ib_tools")
def test_every_path_record_is_read_and_matches(df_val2, capsys):
    """``ib apply DIR --max-paths 0``: one PathRecord per (source HCA, destination, offset)
    triple, every one read (no error) and equal to the files; several SLs in use."""
    assert main(["ib", "apply", str(df_val2), "--max-paths", "0", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    p = rep["path_sl"]
    assert p["pairs_total"] == p["entries"] == rep["readback"]["path_records"] == 72 * (
        71 * 4 + 36)
    assert not p["sampled"] and p["sample"] == "all" and p["no_rule"] == 0
    assert p["mismatches"] == p["read_errors"] == 0 and p["first_mismatches"] == []
    assert sum(p["sls_read"].values()) == p["pairs_total"] and len(p["sls_read"]) > 1
    assert rep["ok"] and rep["readback"]["processes"] == 1
    assert ib_processes() == []


@pytest.mark.ib
@pytest.mark.usefixtures("ib_tools")
def test_negative_control_every_changed_triple_is_found(df_val2, tmp_path):
    """OpenSM gets a path-sl.txt with rules put first that change the SL of many triples (a
    destination HCA, a switch, a source HCA on one offset); compared with the files, exactly
    the triples whose first-matching rule now gives another SL mismatch — counted here rule
    by rule, triple by triple — and the first ten are listed in read order."""
    ts = load_ib_files(df_val2)
    hosts, switches = ts.guids["hosts"], ts.guids["switches"]
    text = (df_val2 / "path-sl.txt").read_text()
    extra = (f"* {hosts[5]['port_guid']} * 6\n* {switches[2]['guid']} * 5\n"
             f"{hosts[9]['port_guid']} * 1 7\n")
    (tmp_path / "path-sl.txt").write_text(extra + text)
    loaded = parse_path_sl(extra + text, "tampered")
    pairs, total, _ = ib_apply.path_pairs(ts, 0)
    triples = pairs.tolist()
    guids = _guids(ts)
    exp = _expected(ts.path_sl, guids, triples)
    act = _expected(loaded, guids, triples)
    differ = [t for t in range(total) if exp[t] != act[t]]
    assert len(differ) > 100

    rep = ib_apply.apply(df_val2, load_path_sl=tmp_path / "path-sl.txt", max_paths=0)
    p = rep["path_sl"]
    assert p["entries"] == total and p["read_errors"] == 0 and not rep["ok"]
    assert p["mismatches"] == len(differ) == rep["mismatches"]
    listed = [(m["src_name"], m["dst_name"], m["offset"], m["expected"], m["actual"])
              for m in p["first_mismatches"]]
    names = [h["name"] for h in hosts] + [s["name"] for s in switches]
    assert listed == [(names[triples[t][0]], names[triples[t][1]], triples[t][2], exp[t],
                       act[t]) for t in differ[:10]]
    assert ib_processes() == []


def test_failed_queries_are_asked_again_alone(df_val2, tmp_path):
    """A reader run that loses answers (``err timeout``, as on a loaded machine): only those
    queries go to the next run, and their answers take the lost ones' places."""
    tools = tmp_path / "tools"
    tools.mkdir()
    reader = tools / "fabroute_ibread"
    # answers every query; the first run loses every 7th (and logs how many it was asked)
    reader.write_text(f"#!{sys.executable}\n" + '''import pathlib, sys
log = pathlib.Path("runs.txt")
runs = log.read_text().split() if log.exists() else []
lines = sys.stdin.read().splitlines()
log.write_text(" ".join(runs + [str(len(lines))]))
for k, q in enumerate(lines):
    w = q.split()
    if not runs and k % 7 == 3:
        print("err timeout")
    elif w[0] == "P":
        print("ok", int(w[2]) % 5, w[2])
    else:
        print("ok", " ".join(["1"] * (64 if w[0] == "L" else 16)))
''')
    reader.chmod(0o755)
    ts = load_ib_files(df_val2)
    pairs, _, _ = ib_apply.path_pairs(ts, 0)
    report = {}
    ans, lft_keys, sl_keys = ib_apply.read_back(tools, tmp_path, {}, ts, pairs, 60, report)
    runs = [int(x) for x in (tmp_path / "runs.txt").read_text().split()]
    n_lines = len(lft_keys) + sum(1 for k in sl_keys if k[3] is not None)
    first = n_lines + len(pairs)
    assert runs == [first, len(range(3, first, 7))]
    assert report["readback"]["asked_again"] == runs[1]
    assert ans.path_errors == 0 and not any(a.startswith("err") for a in ans.lines)
    lids = b"".join(path_queries(ts, pairs)).decode().split()[2::3]
    assert ans.path_sls.tolist() == [int(d) % 5 for d in lids]
