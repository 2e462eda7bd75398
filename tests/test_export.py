"""``formats.ops.export.export_checkpoint``: Parquet, JSON Lines and CSV read back with plain
pyarrow.

The expected content comes from the checkpoint reader, by ``statectl diff``'s rules: keyed
entries from ``Checkpoint.keyed_entries`` (TTL wrappers split with ``split_ttl``), split list
elements as a multiset, union list elements once per distinct range, broadcast state as one map
(operator state through ``Checkpoint.operator_entries``, the restore path). Checked on the
sample checkpoints, on rescaled ones (the same content, whatever the subtasks and key groups),
on hypothesis-generated value states, and for the refusals: an existing ``out``, an unknown
format or state, a failure part way (no staging directory left, the source never modified).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import formats.ops.export as export_module
from formats.model.arrow_types import from_arrow, is_scalar
from formats.model.checkpoint import Checkpoint
from formats.model.columns import split_ttl, ttl_spec, value_spec
from formats.open import open_checkpoint
from formats.ops.export import export_checkpoint
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, StateMetadata, SubtaskSnapshot
from statecore.errors import CheckpointError, InvalidArgumentError, StatectlError
from statecore.key_groups import (
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import list_state, map_state, value_state
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import ManualClock, TtlConfig

SAMPLES = Path(__file__).resolve().parent.parent / "sample_checkpoints" / "v1"
KEYED = SAMPLES / "keyed-all-kinds-p2"
OPERATOR = SAMPLES / "operator-split-union-broadcast-p3"
EMPTY = SAMPLES / "empty"
COLUMNS = ["operator", "state", "subtask", "key_group", "key", "namespace", "value",
           "ttl_timestamp"]
FORMATS = ["parquet", "jsonl", "csv"]


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def _samples_unchanged() -> Iterator[None]:
    before = {root: digest(root) for root in (KEYED, OPERATOR, EMPTY)}
    yield
    assert {root: digest(root) for root in (KEYED, OPERATOR, EMPTY)} == before


# -- a comparison that tells bool from int, int from float, tuple from list ---------------------


def canon(value: Any, *, numbers: bool = False) -> Any:
    """Hashable and type-tagged; NaN equals NaN. ``numbers``: every number as a float (CSV)."""
    if value is None:
        return ("none",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float) and numbers:
        value = float(value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else ("float", struct.pack(">d", value + 0.0))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, tuple):
        return ("tuple", tuple(canon(v, numbers=numbers) for v in value))
    if isinstance(value, list):
        return ("list", tuple(canon(v, numbers=numbers) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((canon(k, numbers=numbers), canon(v, numbers=numbers))
                                  for k, v in value.items()))
    raise AssertionError(f"unexpected value {value!r}")


def render(value: Any) -> Any:
    """A value as the export's text formats hold it (the module doc's rules)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | tuple):  # tuples: arrays (docs/flink-types.md)
        return [render(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: render(v) for k, v in value.items()}
        return [{"key": render(k), "value": render(v)} for k, v in value.items()]
    return value


def mixed_tuples(specs: Iterable[str | None]) -> bool:
    """Whether a spec has a tuple of fields with different JSON kinds (an array of both)."""
    return any(spec is not None and "tuple<" in spec and "string" in spec for spec in specs)


# -- expected content, from the reader ----------------------------------------------------------

#: Per (operator uid, state): Counter of keyed rows (key, namespace, value, ttl) or of list
#: elements, or a broadcast map's (key, value) pairs: plain Python values.
Rows = list[tuple[Any, ...]]


def _ns(namespace: Any) -> Any:
    return None if namespace is VOID_NAMESPACE else namespace


def expected_rows(checkpoint: Checkpoint) -> dict[tuple[str, str], Rows]:
    """(key, namespace, value, ttl_timestamp) per state, as ``diff`` sees the state."""
    out: dict[tuple[str, str], Rows] = {}
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope == "keyed":
                out[op.uid, state.name] = [
                    (key, _ns(ns), *split_ttl(state, stored))
                    for _, key, ns, stored in checkpoint.keyed_entries(op.uid, state.name)]
                continue
            seen: set[tuple[str, int, int]] = set()
            broadcast: dict[Any, Any] = {}
            elements: Rows = []
            for sub in sorted(op.subtasks, key=lambda s: s.index):
                handles = sub.operator
                restored = checkpoint.operator_entries(op.uid, sub.index)
                for handle, entry in zip(handles, restored, strict=True):
                    assert handle.state == entry.name
                    if entry.name != state.name:
                        continue
                    if state.kind == "broadcast":
                        broadcast.update(entry.entries)  # the copies, merged
                        continue
                    segment = (handle.file, handle.first_element, handle.element_count)
                    if state.kind == "union" and segment in seen:
                        continue  # a range several subtasks restore counts once
                    seen.add(segment)
                    elements.extend((None, None, e, None) for e in entry.elements)
            out[op.uid, state.name] = ([(k, None, v, None) for k, v in broadcast.items()]
                                       if state.kind == "broadcast" else elements)
    return out


def state_of(checkpoint: Checkpoint, uid: str, name: str) -> StateMetadata:
    return next(s for s in checkpoint.operator(uid).states if s.name == name)


def specs(checkpoint: Checkpoint, state: StateMetadata, uid: str) -> dict[str, str | None]:
    """Declared type spec of each exported column (``None``: always null)."""
    op = checkpoint.operator(uid)
    keyed = state.scope == "keyed"
    return {"key": op.key_type if keyed else state.user_key_type,
            "namespace": None if state.namespace_type == "void" else state.namespace_type,
            "value": value_spec(state) if keyed else state.value_type,
            "ttl_timestamp": ttl_spec(state) if state.ttl else None}


# -- reading an export back ---------------------------------------------------------------------


def manifest_of(out: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((out / "_export.json").read_text())
    return manifest


def check_manifest(checkpoint: Checkpoint, out: Path, fmt: str,
                   states: set[str] | None = None) -> dict[tuple[str, str], Path]:
    """The manifest lists exactly the files written, one per selected state."""
    manifest = manifest_of(out)
    assert manifest["format"] == fmt
    assert manifest["checkpoint_id"] == checkpoint.metadata.checkpoint_id
    tables = manifest["tables"]
    wanted = [(op.uid, s.name) for op in checkpoint.metadata.operators for s in op.states
              if states is None or s.name in states]
    assert [(t["operator"]["uid"], t["state"]) for t in tables] == wanted
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert on_disk == {t["location"] for t in tables} | {"_export.json"}
    assert len({t["location"] for t in tables}) == len(tables)
    for t in tables:
        state = state_of(checkpoint, t["operator"]["uid"], t["state"])
        assert (t["scope"], t["kind"]) == (state.scope, state.kind)
        assert t["location"].endswith("." + fmt)
    assert not list(out.parent.glob("*.inprogress-*"))
    return {(t["operator"]["uid"], t["state"]): out / t["location"] for t in tables}


def read_back(checkpoint: Checkpoint, out: Path, fmt: str, states: set[str] | None = None
              ) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every exported table read with plain pyarrow, as rows of Python values.

    Parquet values are decoded to statectl's Python values (tuples, dicts); JSON Lines and CSV
    values stay as the text formats hold them (JSON parsed).
    """
    files = check_manifest(checkpoint, out, fmt, states)
    manifest_rows = {(t["operator"]["uid"], t["state"]): t["rows"]
                     for t in manifest_of(out)["tables"]}
    tables = {}
    for (uid, name), path in files.items():
        state = state_of(checkpoint, uid, name)
        column_specs = specs(checkpoint, state, uid)
        if fmt == "parquet":
            table = pq.read_table(path)
            assert table.column_names == COLUMNS
            assert table.schema.field("subtask").type == pa.int32()
            assert table.schema.field("key_group").type == pa.int32()
            for column, spec in column_specs.items():
                if spec is None:
                    assert table.schema.field(column).type == pa.null(), column
            rows = table.to_pylist()
            for row in rows:
                for column, spec in column_specs.items():
                    if spec is not None and row[column] is not None:
                        row[column] = from_arrow(spec)(row[column])
        elif fmt == "jsonl":
            # lines end at "\n" only: str.splitlines would also split at U+0085, U+2028...
            lines = [line for line in path.read_bytes().decode().split("\n") if line]
            rows = [json.loads(line) for line in lines]
            assert all(list(r) == COLUMNS for r in rows)
            if rows and not mixed_tuples(column_specs.values()):
                # plain pyarrow reads it (it refuses a file without rows, and cannot infer a
                # type for an array of a string and a number: a tuple<string,int64>)
                table = pajson.read_json(path)
                assert table.column_names == COLUMNS and table.num_rows == len(rows)
        else:
            text = {c: pa.string() for c, spec in column_specs.items()
                    if spec is not None and (spec in ("string", "char") or not is_scalar(spec)
                                             or spec == "bytes")}
            table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                column_types={"operator": pa.string(), "state": pa.string(), **text}))
            assert table.column_names == COLUMNS
            rows = table.to_pylist()
            for row in rows:
                for column, spec in column_specs.items():
                    if spec is not None and not is_scalar(spec) and row[column] is not None:
                        row[column] = json.loads(row[column])  # nested values: JSON text
        assert len(rows) == manifest_rows[uid, name], (uid, name)
        assert all(r["operator"] == uid and r["state"] == name for r in rows)
        if state.scope == "keyed":
            assert all(r["key_group"] is not None for r in rows)
        else:
            assert all(r["key_group"] is None for r in rows)
        tables[uid, name] = rows
    return tables


def content(rows: list[dict[str, Any]], *, numbers: bool = False) -> Counter[Any]:
    return Counter(canon((r["key"], r["namespace"], r["value"], r["ttl_timestamp"]),
                         numbers=numbers) for r in rows)


def expected_content(rows: Rows, fmt: str) -> Counter[Any]:
    if fmt == "parquet":
        return Counter(canon(r) for r in rows)
    return Counter(canon(tuple(render(v) for v in r), numbers=fmt == "csv") for r in rows)


def check_export(checkpoint: Checkpoint, out: Path, fmt: str,
                 states: set[str] | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The export at ``out`` holds what ``diff`` compares of ``checkpoint``."""
    tables = read_back(checkpoint, out, fmt, states)
    expected = {k: v for k, v in expected_rows(checkpoint).items()
                if states is None or k[1] in states}
    assert set(tables) == set(expected)
    for (uid, name), rows in tables.items():
        assert content(rows, numbers=fmt == "csv") == expected_content(
            expected[uid, name], fmt), (fmt, uid, name)
        if state_of(checkpoint, uid, name).kind == "broadcast":
            assert len({canon(r["key"]) for r in rows}) == len(rows)  # one map
    return tables


# -- samples ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sample", [KEYED, OPERATOR, EMPTY], ids=lambda p: p.name)
def test_samples_export_their_content(tmp_path: Path, sample: Path, fmt: str) -> None:
    checkpoint = open_checkpoint(str(sample))
    result = export_checkpoint(checkpoint, str(tmp_path / "out"), fmt)
    assert result.format == fmt and result.location == str(tmp_path / "out")
    tables = check_export(checkpoint, tmp_path / "out", fmt)
    assert result.rows == sum(len(rows) for rows in tables.values())
    assert [(t.operator.to_json(), t.state, t.rows) for t in result.tables] == [
        (t["operator"], t["state"], t["rows"]) for t in manifest_of(tmp_path / "out")["tables"]]
    if sample == EMPTY:
        assert tables == {} and sorted(p.name for p in (tmp_path / "out").iterdir()) == [
            "_export.json"]
    else:
        assert result.rows > 0


def test_keyed_rows_carry_their_subtask_and_key_group(tmp_path: Path) -> None:
    checkpoint = open_checkpoint(str(KEYED))
    export_checkpoint(checkpoint, str(tmp_path / "out"))
    tables = read_back(checkpoint, tmp_path / "out", "parquet")
    op = checkpoint.operator("purchases")
    for rows in tables.values():
        for row in rows:
            assert row["key_group"] == assign_to_key_group(row["key"], 128, "string")
            owner = op.subtasks[row["subtask"]].key_group_range
            assert owner is not None and row["key_group"] in owner
    # TTL list state: a timestamp per element, in the element's position
    events = tables["purchases", "recent_events"]
    stored = {k: v for _, k, _, v in checkpoint.keyed_entries("purchases", "recent_events")}
    for row in events:
        assert row["value"] == [e.user_value for e in stored[row["key"]]]
        assert row["ttl_timestamp"] == [e.last_access_timestamp for e in stored[row["key"]]]


def test_operator_rows_follow_restore_semantics(tmp_path: Path) -> None:
    checkpoint = open_checkpoint(str(OPERATOR))
    export_checkpoint(checkpoint, str(tmp_path / "out"), "jsonl")
    tables = read_back(checkpoint, tmp_path / "out", "jsonl")
    offsets = tables["events-source", "partition_offsets"]
    restored = [checkpoint.operator_entries("events-source", i) for i in range(3)]
    assert [(r["subtask"], r["value"]) for r in offsets] == [
        (i, [e[0], e[1]]) for i in range(3) for e in restored[i][0].elements]
    assert sorted(r["value"] for r in tables["events-source", "watermarks"]) == sorted(
        e for sub in restored for e in sub[2].elements)
    rules = tables["events-source", "rules"]
    assert {r["subtask"] for r in rules} == {0}  # the first subtask's copy only
    assert {r["key"]: r["value"] for r in rules} == dict(restored[0][1].entries)


# -- rescaled checkpoints ----------------------------------------------------------------------


def logical(tables: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[Any, Counter[Any]]:
    """Exported content without the subtask and key-group columns."""
    return {name: content(rows) for name, rows in tables.items()}


@pytest.mark.parametrize(("sample", "parallelism"), [(KEYED, 3), (KEYED, 1), (OPERATOR, 2),
                                                     (OPERATOR, 5)],
                         ids=["keyed-3", "keyed-1", "operator-2", "operator-5"])
def test_a_rescaled_checkpoint_exports_the_same_content(tmp_path: Path, sample: Path,
                                                        parallelism: int) -> None:
    source = open_checkpoint(str(sample))
    rescale_checkpoint(source, str(tmp_path / "r"), plan_checkpoint(source, parallelism))
    rescaled = open_checkpoint(str(tmp_path / "r"))
    assert {op.parallelism for op in rescaled.metadata.operators} == {parallelism}
    export_checkpoint(source, str(tmp_path / "a"))
    export_checkpoint(rescaled, str(tmp_path / "b"))
    before = check_export(source, tmp_path / "a", "parquet")
    after = check_export(rescaled, tmp_path / "b", "parquet")
    assert logical(after) == logical(before)
    for (uid, _), rows in after.items():
        op = rescaled.operator(uid)
        for row in rows:
            assert 0 <= row["subtask"] < parallelism
            if row["key_group"] is not None:
                kg_range = op.subtasks[row["subtask"]].key_group_range
                assert kg_range is not None and row["key_group"] in kg_range
    if sample == KEYED and parallelism == 3:
        subtasks = {r["subtask"] for r in after["purchases", "total_cents"]}
        assert subtasks == {0, 1, 2}
    for fmt in ("jsonl", "csv"):  # the text formats hold the same content too
        export_checkpoint(rescaled, str(tmp_path / fmt), fmt)
        check_export(rescaled, tmp_path / fmt, fmt)


# -- generated checkpoints -------------------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_FLOATS = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(amounts=st.dictionaries(_TEXT, _FLOATS, max_size=15),
       blobs=st.dictionaries(_INT64, st.binary(max_size=8), max_size=10),
       pairs=st.dictionaries(st.tuples(_TEXT, st.integers(0, 5)),
                             st.tuples(_TEXT, _INT64), max_size=10),
       touched=st.dictionaries(_TEXT, st.tuples(st.integers(0, 10**6), _INT64), max_size=8),
       parallelism=st.integers(1, 3),
       max_parallelism=st.sampled_from([4, 16, 128]))
def test_generated_value_states_round_trip(
        tmp_path_factory: pytest.TempPathFactory, amounts: dict[str, float],
        blobs: dict[int, bytes], pairs: dict[tuple[str, int], tuple[str, int]],
        touched: dict[str, tuple[int, int]], parallelism: int, max_parallelism: int) -> None:
    root = tmp_path_factory.mktemp("generated")
    clock = ManualClock(0)
    string_keyed = [HeapKeyedStateBackend("string", max_parallelism,
                                          compute_key_group_range_for_operator_index(
                                              max_parallelism, parallelism, i), clock=clock)
                    for i in range(parallelism)]
    int_keyed = [HeapKeyedStateBackend("int64", max_parallelism,
                                       compute_key_group_range_for_operator_index(
                                           max_parallelism, parallelism, i))
                 for i in range(parallelism)]

    def put(backends: list[HeapKeyedStateBackend[Any]], key_type: str, key: Any) -> Any:
        backend = backends[assign_key_to_parallel_operator(key, max_parallelism, parallelism,
                                                           key_type)]
        backend.set_current_key(key)
        return backend

    amount = value_state("amount", "float64")
    pair = value_state("pair", "tuple<string,int64>", namespace_type="int64")
    fresh = value_state("fresh", "int64", ttl=TtlConfig(10**15, cleanup_in_background=False))
    blob = value_state("blob", "bytes")
    for backend in string_keyed:  # every subtask declares every state, even without entries
        for descriptor in (amount, pair, fresh):
            backend.get_state(descriptor)
    for backend in int_keyed:
        backend.get_state(blob)
    for key, value in amounts.items():
        put(string_keyed, "string", key).get_state(amount).update(value)
    for (key, window), value in pairs.items():
        state = put(string_keyed, "string", key).get_state(pair)
        state.set_current_namespace(window)
        state.update(value)
    for key, (at, value) in touched.items():
        clock.now = at
        put(string_keyed, "string", key).get_state(fresh).update(value)
    for int_key, value_bytes in blobs.items():
        put(int_keyed, "int64", int_key).get_state(blob).update(value_bytes)
    write_checkpoint(str(root / "chk"), 7, [
        OperatorSnapshot("strings", "strings", parallelism, max_parallelism,
                         [SubtaskSnapshot(i, b.snapshot()) for i, b in enumerate(string_keyed)]),
        OperatorSnapshot("ints", "ints", parallelism, max_parallelism,
                         [SubtaskSnapshot(i, b.snapshot()) for i, b in enumerate(int_keyed)])])
    checkpoint = open_checkpoint(str(root / "chk"))
    written = {("strings", "amount"): [(k, None, v, None) for k, v in amounts.items()],
               ("strings", "pair"): [(k, w, v, None) for (k, w), v in pairs.items()],
               ("strings", "fresh"): [(k, None, v, at) for k, (at, v) in touched.items()],
               ("ints", "blob"): [(k, None, v, None) for k, v in blobs.items()]}
    for fmt in ("parquet", "jsonl"):
        export_checkpoint(checkpoint, str(root / fmt), fmt)
        tables = check_export(checkpoint, root / fmt, fmt)
        # and against what was written through the state API, not only the reader
        assert {name: content(rows) for name, rows in tables.items()} == {
            name: expected_content(rows, fmt) for name, rows in written.items()}


# -- refusals and failures --------------------------------------------------------------------


def nothing_staged(parent: Path) -> None:
    assert not [p for p in parent.iterdir() if ".inprogress-" in p.name]


def test_an_existing_out_is_refused(tmp_path: Path) -> None:
    checkpoint = open_checkpoint(str(KEYED))
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "keep.txt").write_text("mine")
    (tmp_path / "file").write_text("mine too")
    for existing in ("dir", "file"):
        with pytest.raises(StatectlError, match="already exists"):
            export_checkpoint(checkpoint, str(tmp_path / existing), "parquet")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "dir", "dir/keep.txt", "file"]
    assert (tmp_path / "dir" / "keep.txt").read_text() == "mine"
    assert (tmp_path / "file").read_text() == "mine too"


def test_unknown_format_and_state_are_refused(tmp_path: Path) -> None:
    checkpoint = open_checkpoint(str(KEYED))
    with pytest.raises(InvalidArgumentError, match="xml"):
        export_checkpoint(checkpoint, str(tmp_path / "out"), "xml")
    with pytest.raises(InvalidArgumentError) as error:
        export_checkpoint(checkpoint, str(tmp_path / "out"), "csv",
                          states=["last_amount", "no_such"])
    assert "no_such" in str(error.value)
    assert all(s.name in str(error.value) for s in checkpoint.operator("purchases").states)
    with pytest.raises(InvalidArgumentError):  # an operator state's name, in another checkpoint
        export_checkpoint(checkpoint, str(tmp_path / "out"), states=["rules"])
    assert list(tmp_path.iterdir()) == []


def _failing_after(calls: int, error: BaseException) -> Callable[..., Any]:
    original = export_module.flat_table
    count = 0

    def flat(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        if count > calls:
            raise error
        return original(*args, **kwargs)
    return flat


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("calls", [0, 5])
def test_a_failing_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               fmt: str, calls: int) -> None:
    checkpoint = open_checkpoint(str(KEYED))
    monkeypatch.setattr(export_module, "flat_table", _failing_after(calls, OSError("disk full")))
    with pytest.raises(CheckpointError, match="disk full"):
        export_checkpoint(checkpoint, str(tmp_path / "out"), fmt)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_parquet_writer_or_progress_leaves_nothing_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = open_checkpoint(str(OPERATOR))

    def stop(done: int, total: int) -> None:
        if done == 4:
            raise KeyboardInterrupt  # not even an Exception: the staging still goes
    with pytest.raises(KeyboardInterrupt):
        export_checkpoint(checkpoint, str(tmp_path / "a"), "csv", progress=stop)
    written = 0
    original = pq.ParquetWriter.write_table

    def write_table(self: pq.ParquetWriter, *args: Any, **kwargs: Any) -> None:
        nonlocal written
        written += 1
        if written == 3:
            raise OSError("no space left on device")
        original(self, *args, **kwargs)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    with pytest.raises(StatectlError, match="no space left"):
        export_checkpoint(checkpoint, str(tmp_path / "b"), "parquet")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    export_checkpoint(checkpoint, str(tmp_path / "b"), "parquet")  # the name is free again
    check_export(checkpoint, tmp_path / "b", "parquet")
    nothing_staged(tmp_path)


def test_the_source_checkpoint_is_not_modified(tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 8, clock=clock)
    ttl = TtlConfig(10**12, cleanup_in_background=False)
    for i in range(20):
        clock.now = 5_000 + i
        backend.set_current_key(f"k{i}")
        backend.get_state(list_state("l", "int64")).add_all(list(range(i)) or [0])
        backend.get_state(map_state("m", "string", "bytes")).put("x", bytes([i]))
        timed = backend.get_state(map_state("tm", "int32", "string", ttl=ttl))
        timed.put(i, "a")
        clock.now += 1_000
        timed.put(-i - 1, "b")
    operator = OperatorStateBackend()
    operator.get_list_state(OperatorListStateDescriptor("offsets", "int64")).add_all([1, 2])
    operator.get_broadcast_state(BroadcastStateDescriptor("rules", "int32", "string")).put(
        1, "one")
    write_checkpoint(str(tmp_path / "chk"), 1, [OperatorSnapshot(
        "op", "op", 1, 8, [SubtaskSnapshot(0, backend.snapshot(), operator.snapshot())])])
    before = digest(tmp_path / "chk")
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "chk").rglob("*")}
    checkpoint = open_checkpoint(str(tmp_path / "chk"))
    for fmt in FORMATS:
        export_checkpoint(checkpoint, str(tmp_path / fmt), fmt)
        check_export(checkpoint, tmp_path / fmt, fmt)
    assert digest(tmp_path / "chk") == before
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "chk").rglob("*")} == mtimes
    # maps with non-string keys: a list of {key, value} objects in JSON Lines
    rules = [json.loads(line) for line in (tmp_path / "jsonl" / "op" / "rules.jsonl")
             .read_text().split("\n") if line]
    assert [(r["key"], r["value"]) for r in rules] == [(1, "one")]
    maps = [json.loads(line) for line in (tmp_path / "jsonl" / "op" / "m.jsonl")
            .read_text().split("\n") if line]
    assert sorted(m["value"]["x"] for m in maps) == sorted(
        base64.b64encode(bytes([i])).decode() for i in range(20))
    # TTL map state: the timestamps as a map parallel to the values (int keys: pairs)
    timed_rows = [json.loads(line) for line in (tmp_path / "jsonl" / "op" / "tm.jsonl")
                  .read_text().split("\n") if line]
    assert sorted((r["key"], sorted(map(json.dumps, r["ttl_timestamp"]))) for r in timed_rows) == [
        (f"k{i}", sorted(json.dumps(p) for p in ({"key": i, "value": 5_000 + i},
                                                 {"key": -i - 1, "value": 6_000 + i})))
        for i in sorted(range(20), key=lambda i: f"k{i}")]


# -- state subsets and progress ---------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_state_subset_exports_only_those_states(tmp_path: Path, fmt: str) -> None:
    checkpoint = open_checkpoint(str(KEYED))
    wanted = {"last_amount", "recent_events"}
    calls: list[tuple[int, int]] = []
    result = export_checkpoint(checkpoint, str(tmp_path / "out"), fmt, states=sorted(wanted),
                               progress=lambda done, total: calls.append((done, total)))
    assert {t.state for t in result.tables} == wanted
    tables = check_export(checkpoint, tmp_path / "out", fmt, wanted)
    assert {name for _, name in tables} == wanted
    assert calls == [(i, 4) for i in range(1, 5)]  # 2 states x 2 subtasks

    operator = open_checkpoint(str(OPERATOR))
    calls.clear()
    export_checkpoint(operator, str(tmp_path / "rules"), fmt, states=["rules"],
                      progress=lambda done, total: calls.append((done, total)))
    check_export(operator, tmp_path / "rules", fmt, {"rules"})
    assert calls == [(1, 1)]  # one copy of the broadcast state


@pytest.mark.parametrize(("sample", "total"), [(KEYED, 12), (OPERATOR, 7)],
                         ids=["keyed", "operator"])
def test_progress_counts_every_piece_up_to_the_total(tmp_path: Path, sample: Path,
                                                     total: int) -> None:
    """Keyed: 6 states x 2 subtasks. Operator: 3 split lists, 3 union ranges, 1 broadcast."""
    calls: list[tuple[int, int]] = []
    export_checkpoint(open_checkpoint(str(sample)), str(tmp_path / "out"), "jsonl",
                      progress=lambda done, all_: calls.append((done, all_)))
    assert calls == [(i, total) for i in range(1, total + 1)]


def test_progress_after_a_rescale_counts_union_ranges_once(tmp_path: Path) -> None:
    source = open_checkpoint(str(OPERATOR))
    rescale_checkpoint(source, str(tmp_path / "r"), plan_checkpoint(source, 5))
    rescaled = open_checkpoint(str(tmp_path / "r"))
    calls: list[tuple[int, int]] = []
    export_checkpoint(rescaled, str(tmp_path / "out"),
                      progress=lambda done, total: calls.append((done, total)))
    (op,) = rescaled.metadata.operators
    handles = [(sub.index, h) for sub in op.subtasks for h in sub.operator]
    split = [h for _, h in handles if h.state == "partition_offsets"]
    union = {(h.file, h.first_element, h.element_count) for _, h in handles
             if h.state == "watermarks"}
    assert len(union) == 3 and sum(1 for _, h in handles if h.state == "watermarks") == 15
    broadcast = [h for i, h in handles if h.state == "rules" and i == 0]
    total = len(split) + len(union) + len(broadcast)  # every split piece, each range once
    assert calls == [(i, total) for i in range(1, total + 1)]
