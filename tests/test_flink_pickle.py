"""PyFlink's pickled Python state and ``--allow-pickle`` (issue 8, scope 3).

A value PyFlink pickled (``Types.PICKLED_BYTE_ARRAY()``: ``PickledBytesCoderImpl``, a 4-byte
length and ``pickle.dumps(value)``) is bytes unless the user passes ``--allow-pickle``; then
every state part whose values are all pickles shows each unpickled object's ``repr()``, typed
``string``. Nothing is ever unpickled without the flag, and the fixtures' typed PyFlink state
(other coders' bytes) is never mistaken for pickles.

No fixture job pickles its state, so the end-to-end test takes the PyFlink fixture and, as
its keyed streams are decoded, re-encodes each Python ``ValueState``'s integer the way
``PickledBytesCoderImpl`` would have (the Java side only ever sees ``byte[]``).
"""

from __future__ import annotations

import json
import pickle
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import formats.flink.read.pieces as flink_pieces
from cli.values import format_bytes
from formats.flink.read.pickled import pickle_payload, unpickle_keyed, unpickle_operator
from formats.open import open_checkpoint
from statecore.checkpoint import StateMetadata
from statecore.errors import CorruptCheckpointError
from tests.cli_support import run, run_json
from tests.flink_fixtures import expected, fixture_sets, require_fixtures


def pyflink_pickled(value: Any, protocol: int = pickle.DEFAULT_PROTOCOL) -> bytes:
    """What ``PickledBytesCoderImpl`` writes: ``BinaryCoderImpl`` of ``pickle.dumps``."""
    data = pickle.dumps(value, protocol=protocol)
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickles_are_recognised(protocol: int) -> None:
    value = {"a": [1, 2.5, None], "b": ("x", b"y")}
    framed = pyflink_pickled(value, protocol)
    assert pickle_payload(framed) == framed[4:]
    bare = pickle.dumps(value, protocol=protocol)
    assert pickle_payload(bare) == bare


@pytest.mark.parametrize("value", [
    b"", b"\x00\x00\x00\x02r2", b"\x00\x00\x004", b"\x00\x00\x00\x00\x00\x00\x06\xaf",
    b"\x80\x04", b"\x00\x00\x00\x09\x80\x04\x95\x05", "not bytes", None,
    struct.pack(">i", 99) + pickle.dumps(1),  # a wrong length
])
def test_other_bytes_are_not_pickles(value: Any) -> None:
    assert pickle_payload(value) is None


def test_the_pyds_fixtures_coder_bytes_are_never_taken_for_pickles() -> None:
    require_fixtures()
    sets = [s for s in fixture_sets() if expected(s)["job"] == "pyds"]
    assert sets
    for fixture_set in sets:
        for snap in expected(fixture_set)["snapshots"]:
            location = str(fixture_set / snap["path"])
            # --all: both decode every value (a summary alone reads only the headers)
            assert run_json("inspect", location, "--all") == run_json(
                "--allow-pickle", "inspect", location, "--all")


def _keyed(kind: str, value_type: str, user_key_type: str | None = None) -> StateMetadata:
    return StateMetadata("s", "keyed", kind, value_type, user_key_type)


def test_keyed_parts_all_pickled_become_their_repr() -> None:
    rows = [[(0, "k1", None, pyflink_pickled({"n": 1}))], [(5, "k2", None, None)]]
    state = unpickle_keyed(_keyed("value", "bytes"), rows, "op")
    assert state.value_type == "string"
    assert rows == [[(0, "k1", None, "{'n': 1}")], [(5, "k2", None, None)]]

    lists = [[(0, "k", None, [pyflink_pickled(1), pyflink_pickled((2, 3))])]]
    assert unpickle_keyed(_keyed("list", "bytes"), lists, "op").value_type == "string"
    assert lists[0][0][3] == ["1", "(2, 3)"]

    maps = [[(0, "k", None, {pyflink_pickled("u"): pyflink_pickled([1])})]]
    state = unpickle_keyed(_keyed("map", "bytes", "bytes"), maps, "op")
    assert (state.user_key_type, state.value_type) == ("string", "string")
    assert maps[0][0][3] == {"'u'": "[1]"}


def test_a_part_with_any_other_bytes_stays_bytes() -> None:
    rows = [[(0, "k1", None, pyflink_pickled(1)), (0, "k2", None, b"\x00\x00\x00\x07")]]
    before = [list(r) for r in rows]
    state = unpickle_keyed(_keyed("value", "bytes"), rows, "op")
    assert state.value_type == "bytes" and rows == before
    maps = [[(0, "k", None, {b"plain": pyflink_pickled(2)})]]
    state = unpickle_keyed(_keyed("map", "bytes", "bytes"), maps, "op")
    assert (state.user_key_type, state.value_type) == ("bytes", "string")
    assert maps[0][0][3] == {b"plain": "2"}


def test_operator_and_broadcast_parts() -> None:
    elements = [[pyflink_pickled(1)], [pyflink_pickled(2)]]
    state = unpickle_operator(StateMetadata("s", "operator", "split", "bytes"), elements, "op")
    assert state.value_type == "string" and elements == [["1"], ["2"]]
    pairs = [[(pyflink_pickled("r1"), b"\x00\x00\x00\x0c")]]
    state = unpickle_operator(StateMetadata("b", "operator", "broadcast", "bytes", "bytes"),
                              pairs, "op")
    assert (state.user_key_type, state.value_type) == ("string", "bytes")
    assert pairs == [[("'r1'", b"\x00\x00\x00\x0c")]]


def test_a_pickle_that_does_not_unpickle_is_a_clear_error() -> None:
    broken = b"\x80\x04\x95\xff\xff."  # PROTO 4, FRAME of a length the data lacks, STOP
    assert pickle_payload(broken) is not None
    with pytest.raises(CorruptCheckpointError, match="does not unpickle"):
        unpickle_keyed(_keyed("value", "bytes"), [[(0, "k", None, broken)]], "op")


# -- end to end, through the CLI ---------------------------------------------------------------


@pytest.fixture
def pickled_pyds(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The PyFlink fixture's first checkpoint (not a rescaled one), its Python ``ValueState``
    integers pickled."""
    fixture_set = _pyds_set()
    snap = min((s for s in expected(fixture_set)["snapshots"]
                if s["kind"] == "checkpoint" and "rescaled_from" not in s),
               key=lambda s: s["parallelism"])
    real = flink_pieces.decode_keyed_stream

    def decode(*args: Any, **kwargs: Any) -> Any:
        header, decoded = real(*args, **kwargs)
        for name, rows in decoded.entries.items():
            if name in ("python-state-count", "python-state-sum"):  # [int32 / int64 bytes]
                rows[:] = [(kg, key, ns, [pyflink_pickled(int.from_bytes(v[0], "big"))])
                           for kg, key, ns, v in rows]
        return header, decoded

    monkeypatch.setattr(flink_pieces, "decode_keyed_stream", decode)
    yield str(fixture_set / snap["path"])


def _pyds_set() -> Path:
    found = [s for s in require_fixtures() if expected(s)["job"] == "pyds"]
    if not found:
        pytest.fail("no PyFlink DataStream (pyds) fixture set among the Flink fixtures")
    return found[0]


def _model(fixture_set: Path) -> dict[str, tuple[int, int]]:
    """``key -> (count, sum)`` of the pickled states, from ``expected.json`` alone.

    The keys are ``expected.json``'s; their counts and sums follow from its ``input`` (the
    fixture README's model: key ``PREFIX + j`` holds values ``STRIDE*j + 1 .. STRIDE*j +
    count(j)``, ``count(j) = j + 1``, or ``j % COUNT_MOD + 1`` when ``COUNT_MOD > 0``).
    """
    document = expected(fixture_set)
    given = document["input"]
    keys = document["operators"]["str-keyed"]["keyed_states"]["python-state-count"]["keys"]
    out = {}
    for (key,) in keys:
        j = int(key[len(given["key_prefix"]):])
        n = j + 1 if not given["count_mod"] else j % given["count_mod"] + 1
        out[key] = (n, sum(given["value_stride"] * j + i for i in range(1, n + 1)))
    return out


def test_pickled_state_is_bytes_without_the_flag_and_never_unpickled(
        pickled_pyds: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("unpickled without --allow-pickle")

    monkeypatch.setattr(pickle, "loads", refuse)
    checkpoint = open_checkpoint(pickled_pyds)
    op = checkpoint.operator("str-keyed")
    assert next(s for s in op.states if s.name == "python-state-count").value_type == "bytes"
    by_key = {k: v for _kg, k, _ns, v in checkpoint.keyed_entries("str-keyed",
                                                                   "python-state-count")}
    assert by_key and all(pickle_payload(v[0]) for v in by_key.values())
    key = next(iter(_model(_pyds_set())))
    code, out, err = run("inspect", pickled_pyds, "--key", json.dumps([key]))
    assert code == 0, err
    # the pickled bytes as bytes (hex, issue 32: never a Python repr), not unpickled
    assert f"python-state-count: [{format_bytes(by_key[(key,)][0])}]" in out
    assert "b'" not in out and "\\x" not in out


def test_allow_pickle_shows_the_values_in_every_view(pickled_pyds: str, tmp_path: Path) -> None:
    checkpoint = open_checkpoint(pickled_pyds, allow_pickle=True)
    op = checkpoint.operator("str-keyed")
    assert next(s for s in op.states if s.name == "python-state-count").value_type == "string"
    counts = {key: v for _kg, key, _ns, v in checkpoint.keyed_entries("str-keyed",
                                                                       "python-state-count")}
    model = _model(_pyds_set())
    assert counts == {(key,): [str(n)] for key, (n, _) in model.items()}

    key, (n, _) = sorted(model.items())[len(model) // 2]
    lookup = run_json("--allow-pickle", "inspect", pickled_pyds, "--key", json.dumps([key]))
    by_state = {s["state"]: s["entries"] for s in lookup["lookup"]["states"]}
    assert [e["value"] for e in by_state["python-state-count"]] == [[str(n)]]

    out = tmp_path / "out"
    run_json("--allow-pickle", "export", pickled_pyds, "--out", str(out))
    table = pq.read_table(out / "long-keyed" / "python-state-sum.parquet")
    assert str(table.schema.field("value").type) == "list<element: string>"
    sums = {row["key"]["f0"]: row["value"][0] for row in table.to_pylist()}
    prefix = len(expected(_pyds_set())["input"]["key_prefix"])
    assert sums == {int(key[prefix:]): str(total) for key, (_, total) in model.items()}
    assert run_json("--allow-pickle", "verify", pickled_pyds)["clean"] is True
    assert json.dumps(lookup)  # one JSON document
