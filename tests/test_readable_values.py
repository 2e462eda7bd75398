"""Values read well in text (issue 32): bytes as hex, tuples and rows as arrays, Flink windows as
intervals of ISO times -- at any depth, never a Python repr -- while every JSON document and
export keeps its form (bytes base64, a window ``[start, end]`` in epoch ms)."""

from __future__ import annotations

import base64
import datetime
import json
import pickle
import re
import uuid
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run, run_json
from flink_fixtures import expected, fixture_sets
from flink_restore import FlinkUnavailable
from flink_sql_other_keys import other_keys_sql_set
from hypothesis import given, settings

from cli.browse import detail_text
from cli.values import (
    BYTES_SHOWN,
    format_bytes,
    format_epoch_ms,
    format_value,
    format_window,
    to_json_value,
)
from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.java.input import DataReader
from formats.flink.read.state_meta import StateInfo
from formats.flink.types.codecs import RowWithKind, codec_for
from formats.flink.types.encoders import encoder_for
from formats.flink.types.snapshots import SerializerSnapshot
from formats.model.arrow_types import to_arrow
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.diff import canonical
from formats.ops.export import jsonable
from formats.ops.state_scan import lookup
from statecore.serializers import VOID_NAMESPACE
from statecore.values import Instant, TimeWindow

WINDOWS = "org.apache.flink.streaming.api.windowing.windows."
TIME_WINDOW = SerializerSnapshot(f"{WINDOWS}TimeWindow$Serializer$TimeWindowSerializerSnapshot",
                                 3)
BASE = "org.apache.flink.api.common.typeutils.base."
LONG = SerializerSnapshot(f"{BASE}LongSerializer$LongSerializerSnapshot", 3)
STRING = SerializerSnapshot(f"{BASE}StringSerializer$StringSerializerSnapshot", 3)
VOID = SerializerSnapshot("org.apache.flink.runtime.state.VoidNamespaceSerializer"
                          "$VoidNamespaceSerializerSnapshot", 3)
TUPLE2_LONGS = SerializerSnapshot(
    "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot", 1, (LONG, LONG),
    outer={"version": 1, "tuple_class": "org.apache.flink.api.java.tuple.Tuple2"})


def _timers(namespace: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot",
                              1, (STRING, namespace), outer={"version": 1})


# -- bytes, tuples, rows ------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    (b"\x00", "0x00"),
    (b"", "0x"),
    (bytearray(b"\x0a\x0b"), "0x0a0b"),
    (bytes(range(BYTES_SHOWN)), "0x" + bytes(range(BYTES_SHOWN)).hex()),
    (bytes(1024), "0x" + "00" * BYTES_SHOWN + "…(1,024 bytes)"),
    ((2, 3, 2, 2, b"\x00"), "[2, 3, 2, 2, 0x00]"),  # a Flink SQL accumulator row
    (RowWithKind(["a", b"\xff"], 2), '["a", 0xff]'),
    ([b"\x80\x04"], "[0x8004]"),
    ({"k": (1, b"\x01")}, '{"k": [1, 0x01]}'),
    ({1: 1, 2: 1}, "{1: 1, 2: 1}"),  # a map<int32,...>: its keys are numbers, not strings
    ({b"\x01": [b"\x02"]}, "{0x01: [0x02]}"),
    ((float("nan"), float("inf"), -0.0), "[NaN, Infinity, -0.0]"),
    (None, "null"),
])
def test_bytes_tuples_and_rows_read_as_in_the_rest_of_the_text(value: Any, text: str) -> None:
    assert format_value(value) == text


def test_one_quoting_rule_quotes_strings_only_at_any_depth() -> None:
    when = Instant.of_epoch_milli(1_700_000_000_000)
    assert format_value({"ts": when, "day": datetime.date(2023, 11, 15), "id": uuid.UUID(int=1),
                         "status": "ACTIVE"}) == (
        '{"ts": 2023-11-14T22:13:20Z, "day": 2023-11-15, '
        '"id": 00000000-0000-0000-0000-000000000001, "status": "ACTIVE"}')
    assert format_value(when) == "2023-11-14T22:13:20Z"
    assert format_value("0x00") == '"0x00"'  # a string that would read as bytes is quoted
    assert format_value("0xcafe") == '"0xcafe"'
    assert format_value("0xygen") == "0xygen"
    assert format_value(VOID_NAMESPACE) == "VOID"


def test_a_block_lays_values_out_as_json_does_with_the_same_leaves() -> None:
    plain = {"a": [1, "x", {"b": None}], "c": [], "d": {}}
    assert format_value(plain, indent=2) == json.dumps(plain, indent=2)
    assert format_value({"a": (1, b"\x00")}, indent=2) == '{\n  "a": [\n    1,\n    0x00\n  ]\n}'
    assert format_value("two words", indent=2) == '"two words"'


_LEAVES = (st.binary(max_size=40) | st.integers() | st.booleans() | st.none()
           | st.text(alphabet="acd xyzé東-_0123456789", max_size=8)  # no "b"
           | st.builds(TimeWindow, st.integers(-(1 << 45), 1 << 45),
                       st.integers(-(1 << 45), 1 << 45)))


def _values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(leaves, lambda inner: (
        st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
        | st.lists(inner, max_size=3).map(lambda v: RowWithKind(v, 2))
        | st.dictionaries(st.text(alphabet="kq", max_size=3) | st.integers(), inner,
                          max_size=3)), max_leaves=12)


def _bytes_in(value: Any) -> list[bytes]:
    if isinstance(value, bytes):
        return [value]
    if isinstance(value, list | tuple):
        return [b for v in value for b in _bytes_in(v)]
    if isinstance(value, dict):
        return [b for v in value.values() for b in _bytes_in(v)]
    return []


@settings(max_examples=300, deadline=None)
@given(_values(_LEAVES))
def test_text_never_shows_a_python_repr_of_bytes_or_tuples(value: Any) -> None:
    for text in (format_value(value), format_value(value, indent=2)):
        assert "b'" not in text and 'b"' not in text and "\\x" not in text, text
        assert "TimeWindow(" not in text and "RowWithKind(" not in text, text
        assert "(" not in text.replace("…(", "").replace(" bytes)", ""), text  # no tuple repr
        for data in _bytes_in(value):
            assert format_bytes(data) in text
    assert "\n" not in format_value(value)


def _plain(value: Any) -> Any:
    """``value`` with every window a plain tuple: what the decoders gave before windows."""
    if isinstance(value, TimeWindow):
        return tuple(value)
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value) if type(value) in (list, tuple) else \
            RowWithKind([_plain(v) for v in value], 2)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@settings(max_examples=200, deadline=None)
@given(_values(_LEAVES))
def test_json_forms_are_those_of_plain_tuples_and_bytes_stay_base64(value: Any) -> None:
    assert to_json_value(value) == to_json_value(_plain(value))
    assert jsonable(value) == jsonable(_plain(value))
    assert canonical(value) == canonical(_plain(value))
    for data in _bytes_in(value):
        assert data == b"" or base64.b64encode(data).decode() in json.dumps(to_json_value(value))


# -- windows ------------------------------------------------------------------------------------


def test_a_window_reads_as_a_half_open_interval_of_iso_times() -> None:
    window = TimeWindow(1_767_225_600_000, 1_767_225_660_000)
    assert format_value(window) == "[2026-01-01T00:00:00Z, 2026-01-01T00:01:00Z)"
    assert format_value([window]) == "[[2026-01-01T00:00:00Z, 2026-01-01T00:01:00Z)]"
    assert format_window(TimeWindow(-1, 250)) == (
        "[1969-12-31T23:59:59.999Z, 1970-01-01T00:00:00.250Z)")
    assert format_window(TimeWindow(-(1 << 63), (1 << 63) - 1)) == (
        f"[{-(1 << 63)} ms, {(1 << 63) - 1} ms)")  # beyond year 9999: the numbers
    assert format_epoch_ms(1_700_006_399_999) == "2023-11-14T23:59:59.999Z"  # exact, no float


def test_a_window_is_the_tuple_everywhere_the_writers_and_hashing_see_one() -> None:
    window = TimeWindow(0, 3_600_000)
    assert window == (0, 3_600_000) and hash(window) == hash((0, 3_600_000))
    assert window.max_timestamp == 3_599_999
    start, end = window
    assert (start, end) == (window.start, window.end)
    assert sorted([TimeWindow(5, 6), (1, 2), TimeWindow(3, 4)]) == [(1, 2), (3, 4), (5, 6)]
    restored = pickle.loads(pickle.dumps(window))
    assert restored == window and type(restored) is TimeWindow
    by_window: dict[tuple[int, int], int] = {window: 1}
    assert by_window[(0, 3_600_000)] == 1
    assert to_arrow("tuple<int64,int64>")(window) == {"f0": 0, "f1": 3_600_000}
    assert jsonable(window) == [0, 3_600_000] and to_json_value(window) == [0, 3_600_000]
    assert canonical(window) == canonical((0, 3_600_000))
    codec = codec_for(TIME_WINDOW)
    assert codec is not None and codec.spec == "tuple<int64,int64>"
    encode = encoder_for(TIME_WINDOW)
    assert encode is not None
    out, plain = bytearray(), bytearray()
    encode(out, window)
    encode(plain, (0, 3_600_000))
    assert out == plain
    decoded = codec.read(DataReader(bytes(out), "t"))
    assert decoded == window and type(decoded) is TimeWindow


@pytest.mark.parametrize(("serializers", "kind", "window"), [
    ({"NAMESPACE_SERIALIZER": TIME_WINDOW}, "aggregating", True),
    ({"NAMESPACE_SERIALIZER": TUPLE2_LONGS}, "value", False),  # tuple<int64,int64> too
    ({"NAMESPACE_SERIALIZER": VOID}, "value", False),
    ({}, "value", False),
    ({"VALUE_SERIALIZER": _timers(TIME_WINDOW)}, "timers", True),
    ({"VALUE_SERIALIZER": _timers(VOID)}, "timers", False),
])
def test_only_a_time_window_serializer_makes_windows(serializers: dict[str, SerializerSnapshot],
                                                     kind: str, window: bool) -> None:
    info = StateInfo("s", "KEY_VALUE", {}, serializers, kind=kind)
    assert info.time_window_namespace is window


def _types_snapshots() -> list[tuple[Path, str]]:
    """Every types fixture snapshot whose job has windows, with a key of the window state."""
    found = [(s / snap["path"], expected(s)["operators"]["window-agg"]["keyed_states"][
        "window-contents"]["entries"][1][0])
             for s in fixture_sets("types") if "window-agg" in expected(s)["operators"]
             for snap in expected(s)["snapshots"]]
    if not found:
        pytest.fail("no types fixture with a window operator (set STATECTL_FLINK_TYPES_FIXTURES)")
    return found


def _snapshot_id(root: Path) -> str:
    fixture_set = next(p for p in root.parents if (p / "expected.json").is_file())
    return "/".join(root.relative_to(fixture_set).parts[:3]).join((f"{fixture_set.name}:", ""))


def _windows_of(root: Path, key: str) -> list[list[int]]:
    fixture_set = next(p for p in root.parents if (p / "expected.json").is_file())
    return sorted(ns for k, ns, _v in expected(fixture_set)["operators"]["window-agg"][
        "keyed_states"]["window-contents"]["entries"] if k == key)


@pytest.mark.parametrize(("root", "key"), _types_snapshots(),
                         ids=lambda v: _snapshot_id(v) if isinstance(v, Path) else v)
def test_window_namespaces_read_as_iso_times_in_text_and_epoch_millis_in_json(
        root: Path, key: str) -> None:
    windows = _windows_of(root, key)
    code, out, err = run("inspect", str(root), "--key", key)
    assert code == 0, err
    for start, end in windows:
        shown = format_window(TimeWindow(start, end))
        assert f"  window-contents @ {shown}: " in out, out
        assert f"  _timer_state/event_window-timers @ {shown}: " in out, out
    assert not re.search(r"@ \[\d{13}", out), out  # no raw epoch milliseconds
    document = run_json("inspect", str(root), "--key", key)
    by_state = {s["state"]: s["entries"] for s in document["lookup"]["states"]}
    assert sorted(e["namespace"] for e in by_state["window-contents"]) == windows
    found = lookup(open_checkpoint(str(root)), key, ["window-contents"]).states[0].entries
    assert found and all(type(e.namespace) is TimeWindow for e in found)
    code, out, err = run("inspect", str(root), "--top", "2", "--state", "window-contents")
    assert code == 0, err
    top = run_json("inspect", str(root), "--top", "2", "--state", "window-contents")
    for entry in top["top"][0]["entries"]:
        start, end = entry["namespace"]  # JSON: [start, end] in epoch ms, as before
        assert f"[{format_epoch_ms(start)}," in out and f"{format_epoch_ms(end)})" in out, out


def _plain_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode window namespaces as before ``TimeWindow``: plain ``(start, end)`` tuples."""
    import formats.flink.types.codecs as codecs

    real = codecs._BASIC["TimeWindow"]
    monkeypatch.setitem(codecs._BASIC, "TimeWindow", type(real)(
        lambda r: (r.i64(), r.i64()), real.spec, real.length, real.name))
    monkeypatch.setattr(FlinkCheckpoint, "namespace_reader", Checkpoint.namespace_reader)


def _documents(root: Path, key: str, out: Path) -> dict[str, Any]:
    fixture_set = next(p for p in root.parents if (p / "expected.json").is_file())
    every = [str(fixture_set / s["path"]) for s in expected(fixture_set)["snapshots"]]
    docs = {
        "key": run_json("inspect", str(root), "--key", key),
        "top": run_json("inspect", str(root), "--top", "3"),
        "entries": run_json("inspect", str(root), "--entries", "--limit", "5"),
        "history": run_json("history", *every, "--key", key),
        "diff": run_json("diff", every[0], every[-1], code=run("diff", every[0], every[-1])[0]),
    }
    for fmt in ("jsonl", "parquet"):
        run_json("export", str(root), "--out", str(out / fmt), "--format", fmt)
    for path in (out / "parquet").rglob("*.parquet"):  # windows: start, end (issue 41) ...
        table = pq.read_table(path)
        namespace = table.schema.field("namespace")
        if namespace.metadata and b"statectl.window" in namespace.metadata:
            assert [f.name for f in namespace.type] == ["start", "end"]
            plain = pa.struct([("f0", pa.int64()), ("f1", pa.int64())])  # ... else as tuples
            column = pa.chunked_array([pa.StructArray.from_arrays(
                [chunk.field(0), chunk.field(1)], fields=list(plain))
                for chunk in table.column("namespace").chunks], plain)
            pq.write_table(table.set_column(table.schema.get_field_index("namespace"),
                                            pa.field("namespace", plain, metadata={
                                                b"statectl.type": b"tuple<int64,int64>"}),
                                            column), path)
    for path in sorted((out / "jsonl").rglob("*.jsonl")):
        docs[f"jsonl {path.relative_to(out)}"] = path.read_text()
    for path in sorted((out / "parquet").rglob("*.parquet")):
        table = pq.read_table(path)
        docs[f"parquet {path.relative_to(out)}"] = (str(table.schema), table.to_pylist())
    return docs


def test_json_documents_and_exports_are_those_of_plain_tuples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, key = next((r, k) for r, k in _types_snapshots() if "canonical" in str(r))
    found = lookup(open_checkpoint(str(root)), key, ["window-contents"]).states[0].entries
    assert found and all(type(e.namespace) is TimeWindow for e in found)
    typed = _documents(root, key, tmp_path / "typed")
    assert any("window-agg" in name for name in typed)
    _plain_windows(monkeypatch)
    found = lookup(open_checkpoint(str(root)), key, ["window-contents"]).states[0].entries
    assert found and all(type(e.namespace) is tuple for e in found)  # the patch holds
    assert typed == _documents(root, key, tmp_path / "plain")


# -- bytes in a real snapshot -------------------------------------------------------------------


def _sql_key(fixture: dict[str, Any]) -> str:
    """A key of the string-keyed aggregate that holds an accumulator, as --key takes it:
    the first of ``accState``'s entries in expected.json (another set has other keys)."""
    state = fixture["operators"]["sql-aggregates"]["string_key"]["keyed_states"]["accState"]
    return json.dumps(state["entries_contain_ints"][0][0])


def _sql_snapshots() -> list[Path]:
    found = [s / snap["path"] for s in fixture_sets() if expected(s)["job"] == "sql"
             for snap in expected(s)["snapshots"] if snap["format"] == "canonical"]
    if not found:
        pytest.fail("no Flink SQL fixture (set STATECTL_FLINK_FIXTURES)")
    return found


def _set_of(root: Path) -> dict[str, Any]:
    """The expected.json of the fixture set holding snapshot ``root``."""
    return next(expected(s) for s in fixture_sets() if s in root.parents)


@pytest.mark.parametrize("root", _sql_snapshots(), ids=_snapshot_id)
def test_sql_accumulators_with_bytes_read_as_arrays_with_hex(root: Path) -> None:
    _check_sql_accumulators(root, _set_of(root))


def test_sql_accumulators_with_bytes_on_a_set_with_other_keys() -> None:
    """The same on the SQL fixture job's snapshot of other keys ("user-0", ...) and max
    parallelism (:mod:`flink_sql_other_keys`, read by Flink's own classes): the test holds to
    what the set's expected.json says (it read key "k1" before, which only the public set has)."""
    try:
        found = other_keys_sql_set()
    except FlinkUnavailable as missing:
        pytest.fail(str(missing))
    fixture = expected(found)
    assert fixture["input"]["key_prefix"] != "k"  # the point: no key of the public set
    for snapshot in fixture["snapshots"]:
        _check_sql_accumulators(found / snapshot["path"], fixture)


def _check_sql_accumulators(root: Path, fixture: dict[str, Any]) -> None:
    key = _sql_key(fixture)
    document = run_json("inspect", str(root), "--key", key)
    states = {s["state"]: s["entries"] for s in document["lookup"]["states"]}
    (acc,) = states["accState"]
    *numbers, flag = acc["value"]  # JSON as before: an array, the bytes base64
    raw = base64.b64decode(flag)
    code, out, err = run("inspect", str(root), "--key", key)
    assert code == 0, err
    assert f"  accState: [{', '.join(map(str, numbers))}, {format_bytes(raw)}]" in out, out
    code, out, err = run("inspect", str(root), "--top", "3")
    assert code == 0, err
    assert "b'" not in out and "\\x" not in out and f", {format_bytes(raw)}]" in out, out


def test_the_browse_detail_shows_bytes_and_windows_as_text_does() -> None:
    row = {"key": "k1", "namespace": TimeWindow(0, 60_000), "value": (2, b"\x00"),
           "key_group": 19, "subtask": 0}
    text = detail_text(row)
    assert "namespace  [1970-01-01T00:00:00Z, 1970-01-01T00:01:00Z)" in text
    assert "value      [\n             2,\n             0x00\n           ]" in text
    assert "b'" not in text and "AA==" not in text
