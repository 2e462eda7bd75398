"""Format v1: write a checkpoint of keyed and operator state, read it back, restore it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from formats.open import open_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import FORMAT_VERSION, OperatorSnapshot, SubtaskSnapshot
from statecore.errors import CheckpointError, KeyGroupError, UnsupportedFormatError
from statecore.key_groups import compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import (
    StateDescriptor,
    aggregating_state,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
)
from statecore.ttl import ManualClock, TtlConfig


class Average:
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc: tuple[int, int]) -> float:
        return acc[0] / acc[1]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


def descriptors() -> list[StateDescriptor]:
    return [
        value_state("v", "int64"),
        list_state("l", "string", ttl=TtlConfig(100)),
        map_state("m", "string", "float64", namespace_type="tuple<int64,int64>"),
        reducing_state("r", lambda a, b: a + b, "int64"),
        aggregating_state("a", Average(), "tuple<int64,int64>"),
        map_state("mt", "int32", "list<bytes>", ttl=TtlConfig(50)),
    ]


def backend(index: int, clock: ManualClock) -> HeapKeyedStateBackend[str]:
    b: HeapKeyedStateBackend[str] = HeapKeyedStateBackend(
        "string", 128, compute_key_group_range_for_operator_index(128, 2, index), clock=clock)
    for d in descriptors():
        b.get_state(d)
    return b


def fill(b: HeapKeyedStateBackend[str]) -> None:
    v, lst, m, r, a, mt = (b.get_state(d) for d in descriptors())
    for k in range(300):
        try:
            b.set_current_key(f"k{k}")
        except KeyGroupError:  # a key of the other subtask
            continue
        v.update(k)  # type: ignore[attr-defined]
        lst.add(f"k{k}")  # type: ignore[attr-defined]
        lst.add("x")  # type: ignore[attr-defined]
        m.set_current_namespace((k, k + 10))
        m.put("p", k / 2)  # type: ignore[attr-defined]
        r.add(k)  # type: ignore[attr-defined]
        a.add(k)  # type: ignore[attr-defined]
        mt.put(k % 7, [bytes([k % 256])])  # type: ignore[attr-defined]


def contents(b: HeapKeyedStateBackend[str]) -> dict[str, dict[Any, Any]]:
    return {d.name: {(e.key, e.namespace): e.state for e in b.table(d.name)}
            for d in descriptors()}


def write_sample(path: Path) -> tuple[list[HeapKeyedStateBackend[str]], ManualClock]:
    clock = ManualClock(1000)
    backends, subtasks = [], []
    for i in range(2):
        b = backend(i, clock)
        fill(b)
        ops = OperatorStateBackend()
        ops.get_list_state(OperatorListStateDescriptor("offsets", "int64")).add_all([i, i + 10])
        ops.get_union_list_state(OperatorListStateDescriptor("watermarks", "int64")).add(i)
        ops.get_broadcast_state(BroadcastStateDescriptor("cfg", "string", "string")).put(
            "mode", f"m{i}")
        subtasks.append(SubtaskSnapshot(i, b.snapshot(), ops.snapshot()))
        backends.append(b)
    write_checkpoint(str(path), 7, [OperatorSnapshot("op/1 ü", "My Op", 2, 128, subtasks)])
    return backends, clock


def test_round_trip_restores_every_state_kind(tmp_path: Path) -> None:
    backends, clock = write_sample(tmp_path / "chk-7")
    checkpoint = open_checkpoint(str(tmp_path / "chk-7"))
    assert checkpoint.metadata.checkpoint_id == 7
    assert checkpoint.metadata.format_version == FORMAT_VERSION
    for i, original in enumerate(backends):
        restored = backend(i, clock)
        assert checkpoint.restore_keyed("op/1 ü", restored) > 0
        assert contents(restored) == contents(original)
        ops = checkpoint.restore_operator("op/1 ü", i).snapshot()
        assert ops.get("offsets") is not None and ops.get("offsets").elements == (i, i + 10)
        assert ops.get("cfg").entries == (("mode", f"m{i}"),)
    for info in checkpoint.metadata.files:
        checkpoint.verify_checksum(info.path)


def test_files_are_plain_typed_parquet(tmp_path: Path) -> None:
    write_sample(tmp_path / "chk")
    checkpoint = open_checkpoint(str(tmp_path / "chk"))
    op = checkpoint.metadata.operators[0]
    keyed = {h.state: h.file for h in op.subtasks[0].keyed}
    table = pq.read_table(tmp_path / "chk" / keyed["l"])
    assert table.schema.field("value").type.equals(pa.list_(pa.string()))
    assert table.schema.field("ttl_timestamp").type.equals(pa.list_(pa.int64()))
    assert table.schema.metadata[b"statectl.state"] == b"l"
    groups = table.column("key_group").to_pylist()
    assert groups == sorted(groups)
    folder = (tmp_path / "chk" / keyed["v"]).parent
    rows_in_metadata = sum(r.row_count for st in op.subtasks for h in st.keyed
                           if h.state == "v" for r in h.rows)
    dataset = ds.dataset(str(folder), format="parquet").to_table()
    assert dataset.num_rows == rows_in_metadata > 0
    assert dataset.schema.field("value").type.equals(pa.int64())


def test_existing_location_is_never_overwritten(tmp_path: Path) -> None:
    write_sample(tmp_path / "chk")
    before = (tmp_path / "chk" / "_metadata.json").read_bytes()
    with pytest.raises(CheckpointError, match="already exists"):
        write_sample(tmp_path / "chk")
    assert (tmp_path / "chk" / "_metadata.json").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["chk"]  # no leftover staging directory


def test_unknown_format_version_is_refused(tmp_path: Path) -> None:
    write_sample(tmp_path / "chk")
    meta = tmp_path / "chk" / "_metadata.json"
    document = json.loads(meta.read_text())
    document["format_version"] = 2
    meta.write_text(json.dumps(document))
    with pytest.raises(UnsupportedFormatError, match="version 2"):
        open_checkpoint(str(tmp_path / "chk"))


def test_any_typed_state_cannot_be_checkpointed(tmp_path: Path) -> None:
    b: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    state = b.get_value_state(value_state("anything"))
    b.set_current_key("a")
    state.update(object())
    with pytest.raises(UnsupportedFormatError, match="declare a concrete type"):
        write_checkpoint(str(tmp_path / "chk"), 1, [OperatorSnapshot(
            "u", "n", 1, 128, [SubtaskSnapshot(0, b.snapshot())])])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("value_type", "value"), [
    ("int64", "text"), ("int32", 2**40), ("int64", 1.5), ("string", 7), ("bool", "yes"),
    ("list<int64>", 5), ("float64", object()),
])
def test_a_value_of_another_type_is_a_clear_error(tmp_path: Path, value_type: str,
                                                  value: object) -> None:
    b: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    state = b.get_state(value_state("v", value_type))
    b.set_current_key("a")
    b.table("v").map_for_key_group(b.current_key_group).put("a", state.current_namespace, value)
    with pytest.raises(CheckpointError):
        write_checkpoint(str(tmp_path / "chk"), 1, [OperatorSnapshot(
            "u", "n", 1, 128, [SubtaskSnapshot(0, b.snapshot())])])
    assert not any(tmp_path.iterdir())
