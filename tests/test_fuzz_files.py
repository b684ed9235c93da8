"""Fuzzing the readers of files a user hands fabroute (hypothesis): the InfiniBand parsers
(LFTs, SL2VL, path SLs, the ibsim net), a table directory's ``topology.json`` and
``tables.npz``, and the manifest.  Whatever the bytes, the answer is a result or one
:class:`~tablegen.errors.BadInput` line naming the file; never another exception, never a
hang.  Small, bounded examples: the whole file runs in seconds."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabroute.cli import main
from tablegen.errors import BadInput
from tablegen.exports.files import load_table_dir
from tablegen.exports.infiniband.read import parse_lfts, parse_net, parse_path_sl, parse_sl2vl
from tablegen.exports.manifest import load_manifest

FAST = settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", 150)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

# text that looks like the files: their keywords, hex GUIDs, numbers, separators
TOKENS = st.sampled_from(["Unicast lids [0x0-0x10] of switch Lid 1 guid ", "0x02fab00100000003",
                          "0x0001", " ", "\n", ":", "#", "Switch", "Hca", "switchguid=",
                          "caguid=", '"S-1"', "[1]", "[255]", "*", "0", "1", "15", "99",
                          "-1", "0xffffffffffffffffff", "in out", "\t", ",", "é"])
FILE_TEXT = st.one_of(st.text(max_size=400),
                      st.lists(TOKENS, max_size=80).map("".join))


@FAST
@given(FILE_TEXT)
def test_ib_parsers_answer_or_refuse_in_one_line(text):
    for parse in (lambda t: parse_lfts(t.encode().splitlines(), "lfts.dump"),
                  lambda t: parse_sl2vl(t, "sl2vl.dump"),
                  lambda t: parse_path_sl(t, "path-sl.txt"),
                  lambda t: parse_net(t, "fabric.net")):
        try:
            parse(text)
        except BadInput as e:
            assert "\n" not in str(e)


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz") / "t"
    assert main(["tables", "slimfly:q=5", "--routing", "min", "--formats", "json",
                 "--out", str(d)]) == 0
    return d


JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                                 st.floats(allow_nan=True), st.text(max_size=12)),
                       lambda kids: st.one_of(st.lists(kids, max_size=6),
                                              st.dictionaries(st.text(max_size=10), kids,
                                                              max_size=6)),
                       max_leaves=30)


@FAST
@given(st.one_of(JSONISH.map(lambda v: (None, json.dumps(v))),
                 st.binary(max_size=300).map(lambda b: (None, b.decode("latin-1"))),
                 st.tuples(st.sampled_from(["switches", "links", "link_kinds", "params",
                                            "kind", "label_names"]), JSONISH)))
def test_a_table_directory_with_any_topology_json_is_read_or_refused(table_dir, tmp_path,
                                                                     edit):
    """The whole file replaced by any text, or one field of the real document by any value."""
    d = tmp_path / "d"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(table_dir, d)
    key, value = edit
    if key is None:
        (d / "topology.json").write_text(value)
    else:
        doc = json.loads((d / "topology.json").read_text())
        doc[key] = value
        (d / "topology.json").write_text(json.dumps(doc))
    try:
        load_table_dir(d)
    except BadInput as e:
        assert "\n" not in str(e) and "topology.json" in str(e)


@FAST
@given(st.binary(max_size=2000), st.integers(0, 1 << 16))
def test_any_tables_npz_is_read_or_refused(table_dir, tmp_path, junk, at):
    d = tmp_path / "d"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(table_dir, d)
    npz = d / "tables.npz"
    raw = npz.read_bytes()
    at %= len(raw)
    npz.write_bytes(raw[:at] + junk + raw[at + len(junk):])    # overwrite a stretch
    try:
        load_table_dir(d)
    except BadInput as e:
        assert "\n" not in str(e) and "tables.npz" in str(e)


@FAST
@given(JSONISH)
def test_any_manifest_is_read_or_refused(tmp_path, doc):
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    try:
        load_manifest(tmp_path)
    except BadInput as e:
        assert "\n" not in str(e) and "manifest.json" in str(e)


@FAST
@given(st.lists(st.binary(max_size=3000).map(lambda b: b.replace(b"\n", b"")), max_size=40),
       st.booleans(), st.integers(1, 5000))
def test_read_lines_splits_across_chunks_like_split(tmp_path, lines, final_lf, chunk):
    """Lines that cross the reader's chunk boundaries (the chunk shrunk to ``chunk`` bytes)
    come out whole, each once, in order."""
    from tablegen.exports import inputs

    data = b"\n".join(lines) + (b"\n" if final_lf and lines else b"")
    f = tmp_path / "lines"
    f.write_bytes(data)
    old, inputs.CHUNK = inputs.CHUNK, chunk
    try:
        got = list(inputs.read_lines(f, len(data)))
    finally:
        inputs.CHUNK = old
    want = data.split(b"\n")
    if want[-1] == b"":
        want.pop()
    assert got == want
