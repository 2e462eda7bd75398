"""The ``inspect`` views at library level: key-group histograms and the state-reading views.

``formats.ops.key_group_stats.key_group_histograms`` is checked against the checkpoint metadata
(entries per key group), the Parquet footers (bytes per key group) and through a counting
filesystem (it reads metadata and footers only). ``formats.ops.state_scan``'s ``largest_entries``,
``sample_entries``, ``expired_shares`` and ``lookup`` are checked against brute force over
``Checkpoint.keyed_entries`` and against sizes known from the data written, ``lookup`` also
through the counting filesystem (one file of the owning subtask per state, only the key
group's row groups). ``formats.ops.row_sizes.row_sizes`` and
``formats.model.arrow_types.value_from_text`` are checked on hand-made inputs and, for lists of
strings, as a hypothesis property.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings

import formats.statectl.writer as statectl_writer
from formats.model.arrow_types import arrow_type, to_arrow, value_from_text
from formats.model.checkpoint import Checkpoint
from formats.model.columns import split_ttl, ttl_spec, value_spec
from formats.open import open_checkpoint
from formats.ops.key_group_stats import KeyGroupHistogram, key_group_histograms
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.row_sizes import row_sizes
from formats.ops.state_scan import (
    StateEntries,
    expired_shares,
    largest_entries,
    lookup,
    sample_entries,
)
from formats.statectl.writer import write_checkpoint
from formats.storage.io_stats import CountingHandler
from statecore.checkpoint import OperatorSnapshot, StateMetadata, SubtaskSnapshot
from statecore.errors import InvalidArgumentError, StatectlError
from statecore.key_groups import (
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import StateDescriptor, list_state, map_state, value_state
from statecore.operator_backend import OperatorStateBackend
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import ManualClock, TtlConfig, TtlValue

SAMPLES = Path(__file__).resolve().parent.parent / "sample_checkpoints" / "v1"
KEYED = SAMPLES / "keyed-all-kinds-p2"
OPERATOR = SAMPLES / "operator-split-union-broadcast-p3"
EMPTY = SAMPLES / "empty"
FOOTER_TAIL = 64 * 1024  # what pyarrow reads from a file's end to find its footer


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def _samples_unchanged() -> Iterator[None]:
    before = {root: _digest(root) for root in (KEYED, OPERATOR, EMPTY)}
    yield
    assert {root: _digest(root) for root in (KEYED, OPERATOR, EMPTY)} == before


# -- building checkpoints ---------------------------------------------------------------------


class Builder:
    """Subtask backends of one keyed operator, written with ``write_checkpoint``."""

    def __init__(self, key_type: str = "string", max_parallelism: int = 128,
                 parallelism: int = 2, clock: ManualClock | None = None) -> None:
        self.key_type, self.max_parallelism, self.parallelism = (
            key_type, max_parallelism, parallelism)
        self.clock = clock or ManualClock(1_000)
        self.backends: list[HeapKeyedStateBackend[Any]] = [
            HeapKeyedStateBackend(key_type, max_parallelism,
                                  compute_key_group_range_for_operator_index(
                                      max_parallelism, parallelism, i), clock=self.clock)
            for i in range(parallelism)]
        self.operator: list[OperatorStateBackend | None] = [None] * parallelism

    def state(self, descriptor: StateDescriptor, key: Any, namespace: Any = VOID_NAMESPACE
              ) -> Any:
        backend = self.backends[assign_key_to_parallel_operator(
            key, self.max_parallelism, self.parallelism, self.key_type)]
        backend.set_current_key(key)
        state = backend.get_state(descriptor)
        state.set_current_namespace(namespace)
        return state

    def write(self, path: Path, uid: str = "op") -> Checkpoint:
        write_checkpoint(str(path), 1, [OperatorSnapshot(uid, uid, self.parallelism,
                                                         self.max_parallelism, [
            SubtaskSnapshot(i, b.snapshot(), None if o is None else o.snapshot())
            for i, (b, o) in enumerate(zip(self.backends, self.operator, strict=True))])])
        return open_checkpoint(str(path))


def counting(location: Path) -> tuple[CountingHandler, Checkpoint]:
    handler = CountingHandler()
    return handler, open_checkpoint(str(location), filesystem=pafs.PyFileSystem(handler))


def read_bytes(handler: CountingHandler, root: Path) -> dict[str, int]:
    """Bytes read per file (relative to ``root``), for every file opened."""
    return {os.path.relpath(p, root): n for p, n in handler.counts.items()}


def file_sizes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def hex_text(rng: random.Random, chars: int) -> str:
    """Incompressible-ish text (Parquet's snappy barely shrinks random hex)."""
    return rng.randbytes(chars // 2).hex()


def keyed_states(checkpoint: Checkpoint) -> Iterator[tuple[str, StateMetadata]]:
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope == "keyed":
                yield op.uid, state


# -- key_group_histograms -----------------------------------------------------------------------


def check_histogram(checkpoint: Checkpoint, histogram: KeyGroupHistogram) -> None:
    """Everything that follows from the metadata alone, and the summary statistics."""
    op = checkpoint.operator(histogram.uid)
    assert histogram.max_parallelism == op.max_parallelism
    assert [k.key_group for k in histogram.key_groups] == list(range(op.max_parallelism))
    expected_entries = Counter[int]()
    for st_meta in op.subtasks:
        for handle in st_meta.keyed:
            for rows in handle.rows:
                expected_entries[rows.key_group] += rows.row_count
    for stat in histogram.key_groups:
        assert stat.entries == expected_entries[stat.key_group], stat
        owners = [s.index for s in op.subtasks
                  if s.key_group_range is not None and stat.key_group in s.key_group_range]
        assert owners == [stat.subtask], stat
        assert stat.bytes >= 0
        if stat.entries == 0:
            assert stat.bytes == 0, stat
    # subtask shares: ranges of the metadata, sums over their key groups, shares summing to 1
    ranged = sorted((s for s in op.subtasks if s.key_group_range is not None),
                    key=lambda s: s.index)
    assert [s.index for s in histogram.subtasks] == [s.index for s in ranged]
    for share, meta in zip(histogram.subtasks, ranged, strict=True):
        assert meta.key_group_range is not None
        assert share.key_group_range == (meta.key_group_range.start, meta.key_group_range.end)
        mine = [k for k in histogram.key_groups if k.subtask == share.index]
        assert share.entries == sum(k.entries for k in mine)
        assert share.bytes == sum(k.bytes for k in mine)
    total_bytes = sum(k.bytes for k in histogram.key_groups)
    total_entries = sum(k.entries for k in histogram.key_groups)
    if total_bytes or total_entries:
        assert math.isclose(sum(s.share for s in histogram.subtasks), 1.0)
        for share in histogram.subtasks:
            expected = (share.bytes / total_bytes if total_bytes
                        else share.entries / total_entries)
            assert math.isclose(share.share, expected)
    for values, stats in (([k.bytes for k in histogram.key_groups], histogram.bytes_stats),
                          ([k.entries for k in histogram.key_groups], histogram.entries_stats)):
        mean = sum(values) / len(values)
        assert stats[0] == min(values) and stats[2] == max(values)
        assert math.isclose(stats[1], mean)
        assert math.isclose(stats[3], max(values) / mean if mean else 0.0)


def footer_bytes(checkpoint: Checkpoint, uid: str) -> tuple[int, int]:
    """(compressed bytes of every row group of the operator's keyed files, overlap count).

    The overlap count is the number of (row group, key group) pairs: apportioning a shared
    row group by rows loses at most one byte per pair to integer division.
    """
    op = checkpoint.operator(uid)
    total = pairs = 0
    files = sorted({h.file for s in op.subtasks for h in s.keyed})
    for f in files:
        path = Path(checkpoint.root) / f
        parquet = pq.ParquetFile(path)
        for i in range(parquet.num_row_groups):
            meta = parquet.metadata.row_group(i)
            total += sum(meta.column(c).total_compressed_size for c in range(meta.num_columns))
            if meta.num_rows:
                groups = parquet.read_row_group(i, columns=["key_group"]).column(0)
                pairs += len(set(groups.to_pylist()))
        assert checkpoint.row_groups(f) == [
            (parquet.metadata.row_group(i).num_rows,
             sum(parquet.metadata.row_group(i).column(c).total_compressed_size
                 for c in range(parquet.metadata.num_columns)))
            for i in range(parquet.num_row_groups)]
    return total, pairs


def test_histogram_of_the_keyed_sample() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    (histogram,) = key_group_histograms(checkpoint)
    assert (histogram.uid, histogram.name) == ("purchases", checkpoint.operator(
        "purchases").name)
    check_histogram(checkpoint, histogram)
    entries = sum(1 for uid, s in keyed_states(checkpoint)
                  for _ in checkpoint.keyed_entries(uid, s.name))
    assert sum(k.entries for k in histogram.key_groups) == entries > 0
    total = sum(k.bytes for k in histogram.key_groups)
    assert total <= sum(f.size for f in checkpoint.metadata.files)
    compressed, pairs = footer_bytes(checkpoint, "purchases")
    # key groups share the sample's row groups: shares are floored, losing < 1 byte per pair
    assert compressed - pairs < total <= compressed
    assert histogram.bytes_stats[3] > 1  # some key groups are empty: skew above 1


def test_histogram_bytes_are_exact_when_key_groups_have_their_own_row_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(statectl_writer, "ROW_GROUP_ROWS", 1)  # every row its own row group
    builder = Builder(max_parallelism=16, parallelism=3)
    rng = random.Random(3)
    names = value_state("name", "string")
    seen = list_state("seen", "int64", namespace_type="int64")
    for i in range(60):
        key = f"user-{i}"
        builder.state(names, key).update(hex_text(rng, 2 * rng.randint(1, 40)))
        for window in range(i % 3):
            builder.state(seen, key, window).add_all(list(range(i % 5 + 1)))
    checkpoint = builder.write(tmp_path / "chk")
    (histogram,) = key_group_histograms(checkpoint)
    check_histogram(checkpoint, histogram)
    # brute force: every row group's compressed bytes to the key group of its one row
    expected = Counter[int]()
    for info in checkpoint.metadata.files:
        parquet = pq.ParquetFile(tmp_path / "chk" / info.path)
        for i in range(parquet.num_row_groups):
            meta = parquet.metadata.row_group(i)
            (group,) = set(parquet.read_row_group(i, columns=["key_group"]).column(0)
                           .to_pylist())
            expected[group] += sum(meta.column(c).total_compressed_size
                                   for c in range(meta.num_columns))
    assert {k.key_group: k.bytes for k in histogram.key_groups if k.bytes} == dict(expected)
    compressed, _ = footer_bytes(checkpoint, "op")
    assert sum(k.bytes for k in histogram.key_groups) == compressed
    assert sum(k.entries for k in histogram.key_groups) == 60 + sum(i % 3 for i in range(60))
    _, mean, largest, skew = histogram.bytes_stats
    assert math.isclose(skew, largest / mean)


def test_a_metadata_rescale_keeps_every_key_group_and_moves_its_owner(tmp_path: Path) -> None:
    source = open_checkpoint(str(KEYED))
    rescale_checkpoint(source, str(tmp_path / "r"), plan_checkpoint(source, 3))
    rescaled = open_checkpoint(str(tmp_path / "r"))
    (before,) = key_group_histograms(source)
    (after,) = key_group_histograms(rescaled)
    check_histogram(rescaled, after)
    assert len(after.subtasks) == 3
    # the same files, rows and row groups: entries and bytes per key group do not change
    assert [(k.entries, k.bytes) for k in after.key_groups] == [
        (k.entries, k.bytes) for k in before.key_groups]
    ranges = [compute_key_group_range_for_operator_index(128, 3, i) for i in range(3)]
    assert [k.subtask for k in after.key_groups] == [
        next(i for i, r in enumerate(ranges) if k.key_group in r) for k in after.key_groups]


def test_histograms_of_empty_and_operator_only_checkpoints() -> None:
    (empty,) = key_group_histograms(open_checkpoint(str(EMPTY)))
    assert len(empty.key_groups) == 128
    assert all(k.entries == 0 and k.bytes == 0 and k.subtask == 0 for k in empty.key_groups)
    assert empty.bytes_stats == (0, 0.0, 0, 0.0) == empty.entries_stats
    assert [(s.index, s.share) for s in empty.subtasks] == [(0, 0.0)]
    assert key_group_histograms(open_checkpoint(str(OPERATOR))) == ()


def test_histograms_read_only_metadata_and_footers(tmp_path: Path) -> None:
    builder = Builder(max_parallelism=32, parallelism=2)
    rng = random.Random(7)
    blob = value_state("blob", "string")
    for i in range(300):
        builder.state(blob, f"key-{i}").update(hex_text(rng, 2000))  # ~600 kB of values
    builder.write(tmp_path / "chk")
    root = tmp_path / "chk"
    handler, checkpoint = counting(root)
    (histogram,) = key_group_histograms(checkpoint)
    assert sum(k.entries for k in histogram.key_groups) == 300
    read = read_bytes(handler, root)
    sizes = file_sizes(root)
    data_files = {f for f in sizes if f.endswith(".parquet")}
    data = sum(sizes[f] for f in data_files)
    assert data > 500_000
    assert set(read) == data_files | {"_metadata.json"}
    assert read["_metadata.json"] == sizes["_metadata.json"]
    assert sum(read[f] for f in data_files) < data / 4
    for f in data_files:
        footer = pq.ParquetFile(root / f).metadata.serialized_size
        assert read[f] <= max(footer + 8, FOOTER_TAIL) + 8, (f, read[f], sizes[f])


# -- largest_entries ------------------------------------------------------------------------


def entry_bytes(checkpoint: Checkpoint, uid: str, state: StateMetadata, key: Any,
                namespace: Any, stored: Any) -> int:
    """Data bytes of one keyed entry, each column sized on its own one-row array."""
    op = checkpoint.operator(uid)
    assert op.key_type is not None
    value, ttl = split_ttl(state, stored)
    columns = [(op.key_type, key), (value_spec(state), value)]
    if state.namespace_type != "void":
        columns.append((state.namespace_type, namespace))
    if state.ttl:
        columns.append((ttl_spec(state), ttl))
    return sum(int(row_sizes(pa.array([to_arrow(spec)(v)], arrow_type(spec)))[0])
               for spec, v in columns)


def brute_force_sizes(checkpoint: Checkpoint, uid: str, state: StateMetadata
                      ) -> list[tuple[Any, Any, int]]:
    return [(key, ns, entry_bytes(checkpoint, uid, state, key, ns, stored))
            for _, key, ns, stored in checkpoint.keyed_entries(uid, state.name)]


def test_largest_entries_of_strings_of_distinct_lengths(tmp_path: Path) -> None:
    builder = Builder(max_parallelism=16, parallelism=2)
    text = value_state("text", "string")
    lengths = list(range(1, 120, 3))
    rng = random.Random(5)
    rng.shuffle(lengths)
    for i, length in enumerate(lengths):
        builder.state(text, f"k{i:03d}").update("é" * (length // 2) + "x" * (length % 2))
    checkpoint = builder.write(tmp_path / "chk")
    (result,) = largest_entries(checkpoint, 5)
    assert (result.uid, result.state, result.scope, result.kind) == ("op", "text", "keyed",
                                                                     "value")
    assert len(result.entries) == 5

    def size(value: str) -> int:
        return (4 + 4) + (len(value.encode()) + 4)  # key "kNNN", value UTF-8, offsets

    written = {f"k{i:03d}": "é" * (n // 2) + "x" * (n % 2) for i, n in enumerate(lengths)}
    top = sorted(written.items(), key=lambda kv: -size(kv[1]))[:5]
    assert [(e.key, e.value, e.bytes) for e in result.entries] == [
        (k, v, size(v)) for k, v in top]
    for e in result.entries:
        assert e.key_group == assign_to_key_group(e.key, 16, "string")
        assert e.subtask == assign_key_to_parallel_operator(e.key, 16, 2, "string")
        assert e.namespace is VOID_NAMESPACE and e.ttl_timestamp is None
    everything = largest_entries(checkpoint, 1000)[0].entries
    assert len(everything) == len(lengths)
    assert [e.bytes for e in everything] == sorted((size(v) for v in written.values()),
                                                   reverse=True)


def test_largest_entries_of_the_samples_match_brute_force() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    for n in (1, 4, 50):
        results = {r.state: r for r in largest_entries(checkpoint, n)}
        assert set(results) == {s.name for _, s in keyed_states(checkpoint)}
        for uid, state in keyed_states(checkpoint):
            sizes = brute_force_sizes(checkpoint, uid, state)
            entries = results[state.name].entries
            assert [e.bytes for e in entries] == sorted((b for *_, b in sizes),
                                                        reverse=True)[:n], state.name
            by_entry = {(k, ns): b for k, ns, b in sizes}
            for e in entries:
                assert by_entry[(e.key, e.namespace)] == e.bytes, (state.name, e)
            if len(entries) == n and entries:
                threshold = entries[-1].bytes
                must = {(k, ns) for k, ns, b in sizes if b > threshold}
                assert must <= {(e.key, e.namespace) for e in entries}
    # list states' TTL timestamps count: 8 bytes per element plus the list's offset
    (events,) = largest_entries(checkpoint, 1, ["recent_events"])
    (top,) = events.entries
    assert isinstance(top.ttl_timestamp, list) and len(top.ttl_timestamp) == len(top.value)
    assert top.bytes == (len(top.key) + 4) + sum(len(v) + 4 for v in top.value) + 4 + (
        8 * len(top.value) + 4)


def test_largest_entries_of_broadcast_state_and_ties_in_storage_order(tmp_path: Path) -> None:
    operator = open_checkpoint(str(OPERATOR))
    results = largest_entries(operator, 2)
    assert [(r.state, r.kind) for r in results] == [("rules", "broadcast")]  # lists: no keys
    rows = dict(operator.operator_entries("events-source", 0)[1].entries)
    expected = sorted(((k, v, len(k) + 4 + len(v) + 4) for k, v in rows.items()),
                      key=lambda t: -t[2])[:2]
    assert [(e.key, e.value, e.bytes) for e in results[0].entries] == expected
    assert all(e.key_group is None and e.subtask == 0 for e in results[0].entries)

    builder = Builder("int64", max_parallelism=16, parallelism=2)
    windowed = value_state("per_window", "int64", namespace_type="int64")
    for i in range(20):
        builder.state(windowed, i * 7, i % 4).update(i)
    checkpoint = builder.write(tmp_path / "ties")
    (tied,) = largest_entries(checkpoint, 3)
    first = [(k, ns) for _, k, ns, _ in checkpoint.keyed_entries("op", "per_window")][:3]
    assert [(e.key, e.namespace) for e in tied.entries] == first  # storage order among equals
    assert {e.bytes for e in tied.entries} == {24}  # key, namespace, value: 8 bytes each


def test_largest_entries_refuses_bad_arguments() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    with pytest.raises(InvalidArgumentError):
        largest_entries(checkpoint, 0)
    with pytest.raises(InvalidArgumentError, match="no_such_state"):
        largest_entries(checkpoint, 3, ["no_such_state"])


# -- sample_entries ---------------------------------------------------------------------------


def _keyed_rows(checkpoint: Checkpoint, uid: str, state: StateMetadata) -> list[Any]:
    return [(g, k, ns, *split_ttl(state, s))
            for g, k, ns, s in checkpoint.keyed_entries(uid, state.name)]


def _entry_rows(result: StateEntries) -> list[Any]:
    return [(e.key_group, e.key, e.namespace, e.value, e.ttl_timestamp) for e in result.entries]


@pytest.mark.parametrize("limit", [1, 3, 25, 10_000])
def test_sample_entries_are_the_first_entries_in_storage_order(limit: int) -> None:
    checkpoint = open_checkpoint(str(KEYED))
    results = sample_entries(checkpoint, limit)
    assert [r.state for r in results] == [s.name for _, s in keyed_states(checkpoint)]
    for result, (uid, state) in zip(results, keyed_states(checkpoint), strict=True):
        # subtask 0 holds key groups 0-63, subtask 1 the rest: storage order is key-group order
        assert _entry_rows(result) == _keyed_rows(checkpoint, uid, state)[:limit], state.name
        assert all(e.bytes == entry_bytes(checkpoint, uid, state, e.key, e.namespace,
                                          _stored(state, e.value, e.ttl_timestamp))
                   for e in result.entries)


def _stored(state: StateMetadata, value: Any, ttl: Any) -> Any:
    if not state.ttl:
        return value
    if state.kind == "list":
        return [TtlValue(v, t) for v, t in zip(value, ttl, strict=True)]
    return TtlValue(value, ttl)


@pytest.mark.parametrize("limit", [1, 2, 4, 100])
def test_sample_entries_of_operator_state(limit: int) -> None:
    checkpoint = open_checkpoint(str(OPERATOR))
    results = {r.state: r for r in sample_entries(checkpoint, limit)}
    restored = [checkpoint.operator_entries("events-source", i) for i in range(3)]
    split = [e for sub in restored for e in sub[0].elements]  # subtask order, list order
    union = [e for sub in restored for e in sub[2].elements]  # one range per subtask here
    rules = list(restored[0][1].entries)  # the first subtask's copy
    assert [e.value for e in results["partition_offsets"].entries] == split[:limit]
    assert [e.value for e in results["watermarks"].entries] == union[:limit]
    assert [(e.key, e.value) for e in results["rules"].entries] == rules[:limit]
    for name, result in results.items():
        assert all(e.key_group is None for e in result.entries), name
    assert [e.subtask for e in results["partition_offsets"].entries] == [
        0, 0, 1, 1, 2][:limit]


def test_sample_entries_reads_only_the_first_row_groups(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(statectl_writer, "ROW_GROUP_ROWS", 4)
    builder = Builder(max_parallelism=64, parallelism=2)
    rng = random.Random(11)
    blob = value_state("blob", "string")
    for i in range(400):
        builder.state(blob, f"key-{i}").update(hex_text(rng, 1000))
    builder.write(tmp_path / "chk")
    handler, checkpoint = counting(tmp_path / "chk")
    (result,) = sample_entries(checkpoint, 2)
    assert len(result.entries) == 2
    plain = open_checkpoint(str(tmp_path / "chk"))
    assert [(e.key, e.value) for e in result.entries] == [
        (k, v) for _, k, _, v in plain.keyed_entries("op", "blob")][:2]
    read, sizes = read_bytes(handler, tmp_path / "chk"), file_sizes(tmp_path / "chk")
    data = [f for f in read if f.endswith(".parquet")]
    assert data == ["op-0/keyed/0/0.parquet"]  # the second subtask's file is not needed
    assert read[data[0]] < sizes[data[0]] / 2


def test_sample_entries_refuses_bad_arguments() -> None:
    checkpoint = open_checkpoint(str(OPERATOR))
    with pytest.raises(InvalidArgumentError):
        sample_entries(checkpoint, 0)
    with pytest.raises(InvalidArgumentError, match="partition_offsets, rules, watermarks"):
        sample_entries(checkpoint, 1, ["partition_offset"])
    assert [r.state for r in sample_entries(checkpoint, 1, ["rules"])] == ["rules"]


# -- expired_shares -------------------------------------------------------------------------


TTL = 1_000


def _expired(ts: int, ttl: int, now: int) -> bool:
    return ts + ttl <= now  # Flink's rule (no timestamps near Long.MAX here)


def brute_force_expiry(checkpoint: Checkpoint, uid: str, state: StateMetadata, now: int
                       ) -> tuple[int, int, int, int]:
    """(entries, entries expired, elements, elements expired) from ``keyed_entries``."""
    assert state.ttl is not None
    entries = entries_expired = elements = elements_expired = 0
    for _, _, _, stored in checkpoint.keyed_entries(uid, state.name):
        if state.kind == "list":
            flags = [_expired(e.last_access_timestamp, state.ttl, now) for e in stored]
        elif state.kind == "map":
            flags = [_expired(e.last_access_timestamp, state.ttl, now) for e in stored.values()]
        else:
            flags = [_expired(stored.last_access_timestamp, state.ttl, now)]
        entries += 1
        entries_expired += all(flags)
        elements += len(flags)
        elements_expired += sum(flags)
    return entries, entries_expired, elements, elements_expired


def _row_data_bytes(key: str, state: StateMetadata, stored: Any, now: int) -> tuple[int, int]:
    """(data bytes, data bytes left after dropping expired elements) of one row.

    By the sizes of the data written: string keys and values, int64 values and timestamps.
    """
    assert state.ttl is not None
    key_bytes = len(key.encode()) + 4
    if state.kind == "list":
        def size(elements: list[TtlValue[str]]) -> int:
            return key_bytes + sum(len(e.user_value.encode()) + 4 for e in elements) + 4 + (
                8 * len(elements) + 4)
        kept = [e for e in stored if not _expired(e.last_access_timestamp, state.ttl, now)]
        return size(stored), size(kept) if kept else 0

    if state.kind == "map":
        def size_map(items: dict[str, TtlValue[int]]) -> int:
            per_column = sum(len(k.encode()) + 4 + 8 for k in items) + 4
            return key_bytes + 2 * per_column  # value map and ttl map: same keys, int64 items
        kept_map = {k: v for k, v in stored.items()
                    if not _expired(v.last_access_timestamp, state.ttl, now)}
        return size_map(stored), size_map(kept_map) if kept_map else 0
    whole = key_bytes + len(stored.user_value.encode()) + 4 + 8
    return whole, 0 if _expired(stored.last_access_timestamp, state.ttl, now) else whole


def expected_bytes(checkpoint: Checkpoint, uid: str, state: StateMetadata, now: int
                   ) -> tuple[int, int]:
    """(bytes on disk, expired share of them) per file, as the rows' data bytes apportion."""
    op = checkpoint.operator(uid)
    sizes = {f.path: f.size for f in checkpoint.metadata.files}
    total = expired = 0
    for sub in op.subtasks:
        for handle in sub.keyed:
            if handle.state != state.name or not handle.rows:
                continue
            data = kept = 0
            for _, key, _, stored in checkpoint.keyed_entries(uid, state.name,
                                                              handle.key_group_range):
                whole, left = _row_data_bytes(key, state, stored, now)
                data, kept = data + whole, kept + left
            total += sizes[handle.file]
            expired += sizes[handle.file] * (data - kept) // data
    return total, expired


@pytest.fixture(scope="module")
def ttl_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    """Value, list and map state with TTL, written at clock times 10_000 .. ~10_900."""
    clock = ManualClock(10_000)
    builder = Builder(max_parallelism=32, parallelism=3, clock=clock)
    config = TtlConfig(TTL, cleanup_in_background=False)
    value = value_state("session", "string", ttl=config)
    events = list_state("events", "string", ttl=config)
    counts = map_state("counts", "string", "int64", ttl=config)
    plain = value_state("plain", "int64")
    rng = random.Random(13)
    for i in range(90):
        key = f"u{i}"
        clock.now = 10_000 + rng.randrange(900)
        builder.state(value, key).update("v" * rng.randint(0, 30))
        builder.state(plain, key).update(i)
        for _ in range(i % 4):
            clock.now = 10_000 + rng.randrange(900)
            builder.state(events, key).add("e" * rng.randint(1, 20))
        for j in range(i % 3):
            clock.now = 10_000 + rng.randrange(900)
            builder.state(counts, key).put(f"c{j}", j)
    return builder.write(tmp_path_factory.mktemp("ttl") / "chk")


def check_expired_shares(checkpoint: Checkpoint, now: int, states: list[str]) -> None:
    results = {r.state: r for r in expired_shares(checkpoint, now, states)}
    assert set(results) == set(states) - {"plain"}  # "plain" has no TTL
    for uid, state in keyed_states(checkpoint):
        if state.name not in results:
            continue
        share = results[state.name]
        assert (share.uid, share.kind, share.ttl) == (uid, state.kind, TTL)
        assert (share.entries, share.entries_expired, share.elements,
                share.elements_expired) == brute_force_expiry(checkpoint, uid, state, now)
        assert (share.bytes, share.bytes_expired) == expected_bytes(checkpoint, uid, state,
                                                                    now), state.name
        assert math.isclose(share.share, share.bytes_expired / share.bytes)
        if now < 10_000 + TTL:
            assert share.elements_expired == share.entries_expired == share.bytes_expired == 0
        if now >= 11_000 + TTL:
            assert share.entries_expired == share.entries and share.share == 1.0


def timestamps(checkpoint: Checkpoint, state: str) -> list[int]:
    """Every TTL timestamp of a state, sorted."""
    out = []
    for _, _, _, stored in checkpoint.keyed_entries("op", state):
        items = stored if isinstance(stored, list) else (
            stored.values() if isinstance(stored, dict) else [stored])
        out.extend(e.last_access_timestamp for e in items)
    return sorted(out)


def moments(checkpoint: Checkpoint, state: str) -> list[int]:
    """Before anything expires, exactly at and just before some elements' expiry, after all."""
    stamps = timestamps(checkpoint, state)
    picked = [stamps[0], stamps[len(stamps) // 3], stamps[len(stamps) // 2], stamps[-1]]
    return [stamps[0] + TTL - 1, *(t + TTL + d for t in picked for d in (-1, 0)), 10**12]


@pytest.mark.parametrize("state", ["session", "events"])
def test_expired_shares_of_value_and_list_state(ttl_checkpoint: Checkpoint, state: str
                                                ) -> None:
    for now in moments(ttl_checkpoint, state):
        check_expired_shares(ttl_checkpoint, now, [state, "plain"])


def test_expired_shares_of_map_state(ttl_checkpoint: Checkpoint) -> None:
    for now in moments(ttl_checkpoint, "counts"):
        check_expired_shares(ttl_checkpoint, now, ["counts"])


def test_expired_shares_partial_expiry_is_exercised(ttl_checkpoint: Checkpoint) -> None:
    now = 10_000 + TTL + 450
    events = next(r for r in expired_shares(ttl_checkpoint, now, ["events"]))
    # some lists lost some elements but not all: more elements than rows expired
    assert 0 < events.entries_expired < events.entries
    assert events.elements_expired > events.entries_expired
    assert 0 < events.bytes_expired < events.bytes


def test_expired_shares_of_the_sample() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    state = next(s for _, s in keyed_states(checkpoint) if s.name == "recent_events")
    for now in (0, 1_699_999_480_000 + 3_600_000, 1_699_999_530_000 + 3_600_000, 2**62):
        (share,) = expired_shares(checkpoint, now)
        assert share.state == "recent_events"
        assert (share.entries, share.entries_expired, share.elements,
                share.elements_expired) == brute_force_expiry(checkpoint, "purchases", state,
                                                              now)
        files = {h.file for s in checkpoint.operator("purchases").subtasks for h in s.keyed
                 if h.state == "recent_events"}
        assert share.bytes == sum(f.size for f in checkpoint.metadata.files if f.path in files)
    assert expired_shares(checkpoint, 0, ["last_amount"]) == ()  # no TTL: nothing to report
    with pytest.raises(InvalidArgumentError):
        expired_shares(checkpoint, 0, ["recent"])


# -- lookup ---------------------------------------------------------------------------------


def _found(result: StateEntries) -> list[Any]:
    return [(e.key_group, e.key, e.namespace, e.value, e.ttl_timestamp) for e in result.entries]


def test_lookup_finds_exactly_the_keys_entries() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    op = checkpoint.operator("purchases")
    keys = sorted({k for _, s in keyed_states(checkpoint)
                   for _, k, _, _ in checkpoint.keyed_entries("purchases", s.name)})
    assert len(keys) > 10
    for key in [*keys[:: max(1, len(keys) // 8)], "nobody"]:
        found = lookup(checkpoint, key)
        group = assign_to_key_group(key, 128, "string")
        owner = next(s.index for s in op.subtasks
                     if s.key_group_range is not None and group in s.key_group_range)
        assert found.key == key and found.locations == (("purchases", key, group, owner),)
        assert [r.state for r in found.states] == [s.name for s in op.states]
        for result in found.states:
            state = next(s for s in op.states if s.name == result.state)
            expected = [row for row in _keyed_rows(checkpoint, "purchases", state)
                        if row[1] == key]
            assert Counter(map(repr, _found(result))) == Counter(map(repr, expected)), key
            assert all(e.subtask == owner for e in result.entries)
            namespaces = [e.namespace for e in result.entries]
            if state.namespace_type != "void":
                assert namespaces == sorted(namespaces)  # windows in order
    assert not any(r.entries for r in lookup(checkpoint, "nobody").states)


def test_lookup_by_namespace_and_state_subset() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    rows = [(k, ns, v) for _, k, ns, v in checkpoint.keyed_entries("purchases",
                                                                   "clicks_per_minute")]
    key, namespace, value = rows[0]
    found = lookup(checkpoint, key, ["clicks_per_minute", "last_amount"], str(namespace))
    by_state = {r.state: r for r in found.states}
    assert set(by_state) == {"clicks_per_minute", "last_amount"}
    assert [(e.key, e.namespace, e.value) for e in by_state["clicks_per_minute"].entries] == [
        (key, namespace, value)]
    # a state without a namespace ignores the namespace given
    amounts = [v for _, k, _, v in checkpoint.keyed_entries("purchases", "last_amount")
               if k == key]
    assert [e.value for e in by_state["last_amount"].entries] == amounts
    none = lookup(checkpoint, key, ["clicks_per_minute"], "12345")
    assert none.states[0].entries == ()


def test_lookup_errors() -> None:
    checkpoint = open_checkpoint(str(KEYED))
    with pytest.raises(InvalidArgumentError) as error:
        lookup(checkpoint, "user-00", ["totl_cents"])
    message = str(error.value)
    assert "totl_cents" in message
    assert all(s.name in message for _, s in keyed_states(checkpoint))
    with pytest.raises(StatectlError):
        lookup(checkpoint, "user-00", ["clicks_per_minute"], "not-a-number")
    with pytest.raises(StatectlError):  # operator state only: nothing keyed to look in
        lookup(open_checkpoint(str(OPERATOR)), "x")
    with pytest.raises(StatectlError):
        lookup(checkpoint, "user-00", ["rules"])


def test_lookup_parses_the_key_as_the_key_type(tmp_path: Path) -> None:
    builder = Builder("int64", max_parallelism=16, parallelism=2)
    amount = value_state("amount", "int64")
    for i in range(-20, 20):
        builder.state(amount, i * 1_000_003).update(i)
    checkpoint = builder.write(tmp_path / "chk")
    found = lookup(checkpoint, str(-7 * 1_000_003))
    (entry,) = found.states[0].entries
    assert entry.key == -7 * 1_000_003 and entry.value == -7
    assert found.locations[0][2] == assign_to_key_group(-7 * 1_000_003, 16, "int64")
    for text in ("abc", "1.5", "", str(2**63)):
        with pytest.raises(StatectlError):
            lookup(checkpoint, text)


def test_lookup_of_a_float32_key_as_typed(tmp_path: Path) -> None:
    """A float32 key typed as ``0.1`` is stored as float32(0.1): lookup must find it."""
    builder = Builder("float32", max_parallelism=16, parallelism=1)
    state = value_state("v", "string")
    builder.state(state, 0.1).update("found")
    builder.state(state, 2.5).update("exact")
    checkpoint = builder.write(tmp_path / "chk")
    assert [e.value for e in lookup(checkpoint, "2.5").states[0].entries] == ["exact"]
    assert [e.value for e in lookup(checkpoint, "0.1").states[0].entries] == ["found"]


@pytest.fixture(scope="module")
def many_row_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two keyed states over 128 key groups, 4 rows per row group, 0.5-1.5 MB per file."""
    location = tmp_path_factory.mktemp("lookup") / "chk"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(statectl_writer, "ROW_GROUP_ROWS", 4)
        builder = Builder(max_parallelism=128, parallelism=2)
        rng = random.Random(17)
        blob = value_state("blob", "string")
        events = list_state("events", "string", namespace_type="int64")
        for i in range(1500):
            key = f"key-{i}"
            builder.state(blob, key).update(hex_text(rng, 600))
            for window in range(i % 3):
                builder.state(events, key, window).add_all([hex_text(rng, 800)] * 2)
        builder.write(location)
    return location


@pytest.mark.parametrize("index", [0, 7, 1234, 99_999])
def test_lookup_reads_only_the_key_group_of_the_owner(many_row_groups: Path,
                                                      index: int) -> None:
    key = f"key-{index}"
    group = assign_to_key_group(key, 128, "string")
    owner = 0 if group < 64 else 1
    handler, checkpoint = counting(many_row_groups)
    found = lookup(checkpoint, key)
    assert found.locations == (("op", key, group, owner),)
    plain = open_checkpoint(str(many_row_groups))
    for result in found.states:
        expected = [(k, ns, v) for _, k, ns, v in plain.keyed_entries("op", result.state)
                    if k == key]
        assert [(e.key, e.namespace, e.value) for e in result.entries] == sorted(
            expected, key=lambda r: r[1])
    if index < 1500:
        assert len(found.states[0].entries) == 1
    read, sizes = read_bytes(handler, many_row_groups), file_sizes(many_row_groups)
    data = sorted(f for f in read if f.endswith(".parquet"))
    assert set(read) == {"_metadata.json", *data}
    op = plain.operator("op")
    owners_files = sorted(h.file for h in op.subtasks[owner].keyed
                          if any(r.key_group == group for r in h.rows))
    assert data == owners_files  # one file per state holding the key group, the owner's
    assert all(f.endswith(f"/{owner}.parquet") for f in data)
    for f in data:
        parquet = pq.ParquetFile(many_row_groups / f)
        assert parquet.num_row_groups > 100
        handle = next(h for h in op.subtasks[owner].keyed if h.file == f)
        (rows,) = [r for r in handle.rows if r.key_group == group]
        own, start = 0, 0
        for i in range(parquet.num_row_groups):
            meta = parquet.metadata.row_group(i)
            if start < rows.first_row + rows.row_count and rows.first_row < start + meta.num_rows:
                own += sum(meta.column(c).total_compressed_size
                           for c in range(meta.num_columns))
            start += meta.num_rows
        footer = parquet.metadata.serialized_size
        # the footer (a 64 KiB tail, then the whole footer when larger) and the key group's
        # row groups, nothing else
        assert read[f] <= own + footer + FOOTER_TAIL + 16, (f, read[f], own, footer)
        assert read[f] < sizes[f] / 3, (f, read[f], sizes[f])


# -- row_sizes --------------------------------------------------------------------------------


def sizes_of(values: pa.Array | pa.ChunkedArray) -> list[int]:
    result = row_sizes(values)
    assert isinstance(result, np.ndarray) and result.dtype == np.int64
    return [int(x) for x in result]


@pytest.mark.parametrize(("array", "expected"), [
    (pa.array(["a", "bcd", None, "", "é"]), [5, 7, 0, 4, 6]),
    (pa.array([b"", b"xyz", None], pa.binary()), [4, 7, 0]),
    (pa.array(["ab", None], pa.large_string()), [6, 0]),
    (pa.array([b"abc"], pa.large_binary()), [7]),
    (pa.array([1, None, 3], pa.int8()), [1, 0, 1]),
    (pa.array([1], pa.int16()), [2]),
    (pa.array([1, None], pa.int32()), [4, 0]),
    (pa.array([1], pa.int64()), [8]),
    (pa.array([1.5], pa.float32()), [4]),
    (pa.array([float("nan"), None], pa.float64()), [8, 0]),
    (pa.array([True, False, None]), [1, 1, 0]),
    (pa.nulls(3), [0, 0, 0]),
    (pa.array([[1, 2], [], None, [3]], pa.list_(pa.int64())), [20, 4, 0, 12]),
    (pa.array([["a", None], ["bc"]], pa.list_(pa.string())), [9, 10]),
    (pa.array([[1]], pa.large_list(pa.int32())), [8]),
    (pa.array([[["a"], []], None], pa.list_(pa.list_(pa.string()))), [4 + (4 + 5) + 4, 0]),
    (pa.array([[("a", 1), ("bc", None)], [], None], pa.map_(pa.string(), pa.int64())),
     [(5 + 8) + (6 + 0) + 4, 4, 0]),
    (pa.array([{"f0": 1, "f1": "ab"}, None, {"f0": None, "f1": "xyz"}],
              pa.struct([("f0", pa.int64()), ("f1", pa.string())])), [14, 0, 7]),
    (pa.array([{"f0": [1, 2], "f1": {"f0": True, "f1": b"x"}}],
              pa.struct([("f0", pa.list_(pa.int16())),
                         ("f1", pa.struct([("f0", pa.bool_()), ("f1", pa.binary())]))])),
     [(4 + 2 + 2) + (1 + 5)]),
    (pa.array([], pa.string()), []),
])
def test_row_sizes_of_hand_made_arrays(array: pa.Array, expected: list[int]) -> None:
    assert sizes_of(array) == expected


@pytest.mark.parametrize("array", [
    pa.array(["a", "bb", None, "dddd", "", "ffffff"]),
    pa.array([[1, 2], [], None, [3], [4, 5, 6], [7]], pa.list_(pa.int64())),
    pa.array([["x", "yy"], None, [], ["zzz"], ["a"], ["b", "c"]], pa.list_(pa.string())),
    pa.array([[("a", 1)], [("bb", 2), ("c", 3)], None, [], [("dddd", 4)], [("e", None)]],
             pa.map_(pa.string(), pa.int64())),
    pa.array([{"f0": 1, "f1": "a"}, None, {"f0": 2, "f1": "bbb"}, {"f0": None, "f1": None},
              {"f0": 3, "f1": ""}, {"f0": 4, "f1": "cc"}],
             pa.struct([("f0", pa.int32()), ("f1", pa.string())])),
    pa.array([[[1], [2, 3]], [], [[4]], None, [[5, 6, 7]], [[]]], pa.list_(pa.list_(pa.int8()))),
])
def test_row_sizes_of_slices_and_chunks(array: pa.Array) -> None:
    whole = sizes_of(array)
    assert len(whole) == len(array)
    for start in range(len(array)):
        for length in range(len(array) - start + 1):
            assert sizes_of(array.slice(start, length)) == whole[start:start + length], (
                start, length)
    chunked = pa.chunked_array([array.slice(0, 2), array.slice(2, 0), array.slice(2)])
    assert sizes_of(chunked) == whole
    assert sizes_of(pa.chunked_array([], array.type)) == []
    # a slice of a slice: offsets into a child that was itself sliced
    assert sizes_of(array.slice(1).slice(1, 3)) == whole[2:5]


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.lists(st.text(max_size=6), max_size=5)),
                     max_size=12),
       data=st.data())
def test_row_sizes_of_lists_of_strings(rows: list[list[str] | None], data: st.DataObject
                                       ) -> None:
    array = pa.array(rows, pa.list_(pa.string()))
    expected = [0 if row is None else sum(len(s.encode()) + 4 for s in row) + 4
                for row in rows]
    assert sizes_of(array) == expected
    start = data.draw(st.integers(0, len(rows)))
    length = data.draw(st.integers(0, len(rows) - start))
    assert sizes_of(array.slice(start, length)) == expected[start:start + length]


# -- value_from_text ------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "spec", "expected"), [
    ("-128", "int8", -128), ("127", "int8", 127), ("-32768", "int16", -32768),
    ("2147483647", "int32", 2**31 - 1), ("-9223372036854775808", "int64", -(2**63)),
    (" 42 ", "int64", 42),
    ("1.5", "float32", 1.5), ("-2.25", "float64", -2.25), ("1e300", "float64", 1e300),
    ("inf", "float64", math.inf),
    ("true", "bool", True), ("False", "bool", False), ("TRUE", "bool", True),
    ("x", "char", "x"), ("é", "char", "é"),
    ("hello world", "string", "hello world"), ("", "string", ""), ("[1]", "string", "[1]"),
    ("00ff10", "bytes", b"\x00\xff\x10"), ("0xABCD", "bytes", b"\xab\xcd"), ("", "bytes", b""),
    ("[1, 2, 3]", "list<int64>", [1, 2, 3]), ("[]", "list<string>", []),
    ('["a", "b"]', "list<string>", ["a", "b"]), ('["00ff"]', "list<bytes>", [b"\x00\xff"]),
    ("[[1], [2, 3]]", "list<list<int32>>", [[1], [2, 3]]),
    ("[true, false]", "list<bool>", [True, False]),
    ('[1, "a"]', "tuple<int64,string>", (1, "a")),
    ('["u", 5]', "tuple<string,int64>", ("u", 5)),
    ('[[1, 2], "x"]', "tuple<list<int32>,string>", ([1, 2], "x")),
    ('{"a": 1, "b": 2}', "map<string,int64>", {"a": 1, "b": 2}),
    ('{"7": "x"}', "map<int64,string>", {7: "x"}),
    ('{"k": [1.5]}', "map<string,list<float64>>", {"k": [1.5]}),
    ("{}", "map<string,int64>", {}),
])
def test_value_from_text(text: str, spec: str, expected: Any) -> None:
    value = value_from_text(text, spec)
    assert value == expected
    assert type(value) is type(expected)
    if isinstance(value, list | tuple):
        assert [type(v) for v in value] == [type(v) for v in expected]


def test_value_from_text_nan() -> None:
    assert math.isnan(value_from_text("nan", "float64"))


@pytest.mark.parametrize(("text", "spec"), [
    ("128", "int8"), ("-129", "int8"), ("40000", "int16"), ("2147483648", "int32"),
    (str(2**63), "int64"), ("1.5", "int64"), ("abc", "int32"), ("", "int64"),
    ("one", "float64"), ("yes", "bool"), ("1", "bool"), ("", "char"), ("ab", "char"),
    ("\U0001f600", "char"), ("zz", "bytes"), ("abc", "bytes"),
    ("not json", "list<int64>"), ('["1"]', "list<int64>"), ("[1.5]", "list<int64>"),
    ("[true]", "list<int64>"), ("[1]", "list<string>"), ('{"a": 1}', "list<int64>"),
    ("[300]", "list<int8>"), ("[1]", "tuple<int64,string>"),
    ('{"f0": 1, "f1": "a"}', "tuple<int64,string>"), ('[1, "a", 2]', "tuple<int64,string>"),
    ('{"x": 1}', "map<int64,int64>"), ('[["a", 1]]', "map<string,int64>"),
    ('{"a": "b"}', "map<string,int64>"), ("1", "no_such_type"), ("x", "any"),
])
def test_value_from_text_refuses(text: str, spec: str) -> None:
    with pytest.raises(InvalidArgumentError):
        value_from_text(text, spec)


@pytest.mark.parametrize("text", ["1e40", "-1e39", "[1e40]"])
def test_value_from_text_refuses_a_float32_out_of_range(text: str) -> None:
    """Documented: "a clear InvalidArgumentError when text is not such a value"."""
    with pytest.raises(InvalidArgumentError):
        value_from_text(text, "list<float32>" if text.startswith("[") else "float32")
