"""The live view over SST files written by Debian's RocksDB 7.8 (C API through ctypes).

Merge operands (``StringAppendTESTOperator``, delimiter ``,``, as Flink's list state), single
deletions, deletions and range deletions spread over several L0 files and the bottom level, with
every compression and checksum type and partitioned indexes, against a dict model; and a
hypothesis property test of random operations in random flush batches. Needs
``apt-get install -y librocksdb-dev`` (the test fails saying so when it is missing).
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdb_writers import CHECKSUMS, COMPRESSIONS, DebianRocksDB

from formats.flink.read.rocksdb import ValueType, live_items, live_range, open_sst
from formats.flink.read.rocksdb.manifest import read_manifest
from formats.flink.read.rocksdb.merge import TombstoneMap
from formats.flink.read.rocksdb.sst import RangeTombstone


def apply_to_model(model: dict[bytes, bytes], operation: tuple[Any, ...]) -> None:
    """What RocksDB's operations mean for the latest state (merge: StringAppendTESTOperator)."""
    op, *args = operation
    if op == "put":
        model[args[0]] = args[1]
    elif op == "merge":
        key, operand = args
        model[key] = model[key] + b"," + operand if key in model else operand
    elif op in ("delete", "single_delete"):
        model.pop(args[0], None)
    else:
        for key in [k for k in model if args[0] <= k < args[1]]:
            del model[key]


def read_db(path: Path) -> tuple[list, list]:
    """The live view of every SST file of ``path`` and the MANIFEST's file list check."""
    (manifest,) = path.glob("MANIFEST-*")
    state = read_manifest(manifest.read_bytes(), manifest.name)
    family = state.column_family("default")
    live = family.live_files()
    assert {m.file_name for m in live} == {p.name for p in path.glob("*.sst")}
    tables = [open_sst((path / m.file_name).read_bytes(), m.file_name,
                       largest_seqno=m.largest_seqno) for m in live]
    return tables, sorted(family.levels())


def write_batches(path: Path, batches: list[list[tuple[Any, ...]]], *, compact_after: int = -1,
                  **options: Any) -> dict[bytes, bytes]:
    model: dict[bytes, bytes] = {}
    with DebianRocksDB(path, **options) as db:
        for number, batch in enumerate(batches):
            db.write(batch)
            for operation in batch:
                apply_to_model(model, operation)
            db.flush()
            if number == compact_after:
                db.compact()
    return model


def flink_like_batches(rounds: int = 4, keys: int = 300) -> list[list[tuple[Any, ...]]]:
    """List-state-like traffic: appends (merges), overwrites, clears, range deletes."""
    batches = []
    for r in range(rounds):
        batch: list[tuple[Any, ...]] = []
        for i in range(keys):
            key = b"\x00%c/key-%04d" % (i % 7, i)
            if (i + r) % 5 == 0:
                batch.append(("put", key, b"base-%d-%d" % (r, i)))
            elif (i + r) % 5 == 1:
                batch.append(("merge", key, b"op-%d-%d" % (r, i) * (1 + i % 70)))
            elif (i + r) % 11 == 2:
                batch.append(("delete", key))
            else:
                batch.append(("merge", key, b"m%d" % r))
        batch.append(("delete_range", b"\x00\x03/key-01", b"\x00\x03/key-02"))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("checksum", list(CHECKSUMS))
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_merges_and_deletes_every_compression_and_checksum(tmp_path, compression, checksum):
    model = write_batches(tmp_path, flink_like_batches(), compression=compression,
                          checksum=checksum, block_size=512)
    tables, _ = read_db(tmp_path)
    assert len(tables) == 4
    kinds = {kind for table in tables for _, _, kind, _ in table.entries()}
    assert {ValueType.MERGE, ValueType.VALUE, ValueType.DELETION} <= kinds
    assert any(table.range_tombstones() for table in tables)
    assert list(live_items(tables)) == sorted(model.items())


@pytest.mark.parametrize("format_version", [2, 3, 4, 5])
def test_levels_partitioned_index_and_single_deletes(tmp_path, format_version):
    batches = flink_like_batches(rounds=5)
    # Single deletions of keys written once (what SingleDelete is for), in a later file.
    batches.insert(2, [("put", b"single-%03d" % i, b"once") for i in range(50)])
    batches.append([("single_delete", b"single-%03d" % i) for i in range(0, 50, 3)])
    model = write_batches(tmp_path, batches, compact_after=2, format_version=format_version,
                          index="two_level", block_size=256, compression="snappy")
    tables, levels = read_db(tmp_path)
    assert len(levels) == 2 and levels[0] == 0  # L0 files above the bottom level
    assert any(t.properties.index_partitions for t in tables)
    kinds = {kind for table in tables for _, _, kind, _ in table.entries()}
    assert ValueType.SINGLE_DELETION in kinds and ValueType.MERGE in kinds
    assert list(live_items(tables)) == sorted(model.items())
    keys = sorted(model)
    for lo, hi in [(keys[10], keys[40]), (b"", keys[5]), (keys[-3], b"\xff"), (b"s", b"t")]:
        assert list(live_range(tables, lo, hi)) == [(k, model[k]) for k in keys if lo <= k < hi]


@pytest.mark.parametrize("format_version", [3, 5])
def test_index_with_first_keys(tmp_path, format_version):
    """``kBinarySearchWithFirstKey``: each index value carries its block's first key."""
    model = write_batches(tmp_path, flink_like_batches(rounds=3), index="first_key",
                          format_version=format_version, block_size=200)
    tables, _ = read_db(tmp_path)
    assert {t.properties.index_type for t in tables} == {3}
    assert list(live_items(tables)) == sorted(model.items())
    keys = sorted(model)
    assert list(live_range(tables, keys[7], keys[9])) == [(k, model[k]) for k in keys[7:9]]


def test_merge_operand_order_and_delete_below_merges(tmp_path):
    batches = [
        [("put", b"a", b"base"), ("put", b"b", b"base"), ("put", b"c", b"base")],
        [("merge", b"a", b"1"), ("delete", b"b"), ("merge", b"c", b"1"), ("merge", b"d", b"1")],
        [("merge", b"a", b"2"), ("merge", b"b", b"2"), ("delete_range", b"c", b"d")],
        [("merge", b"a", b"3"), ("merge", b"b", b"3"), ("merge", b"c", b"3")],
    ]
    write_batches(tmp_path, batches)
    tables, _ = read_db(tmp_path)
    assert list(live_items(tables)) == [
        (b"a", b"base,1,2,3"), (b"b", b"2,3"), (b"c", b"3"), (b"d", b"1")]


def test_tombstone_map_takes_the_highest_covering_sequence():
    tombstones = TombstoneMap([RangeTombstone(b"a", b"m", 5), RangeTombstone(b"f", b"z", 9),
                               RangeTombstone(b"c", b"d", 20), RangeTombstone(b"q", b"q", 99)])
    expected = {b"": 0, b"a": 5, b"c": 20, b"cz": 20, b"d": 5, b"f": 9, b"m": 9, b"q": 9,
                b"y": 9, b"z": 0}
    assert {key: tombstones.covering(key) for key in expected} == expected


# -- hypothesis: random operations in random flush batches against the model -----------------

KEYS = [b"k%02d" % i for i in range(12)]
key_st = st.sampled_from(KEYS)
operation_st = st.one_of(
    st.tuples(st.just("put"), key_st, st.binary(max_size=20)),
    st.tuples(st.just("merge"), key_st, st.binary(max_size=20)),
    st.tuples(st.just("delete"), key_st),
    st.tuples(key_st, key_st).map(lambda ks: ("delete_range", min(ks), max(ks))),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches=st.lists(st.lists(operation_st, min_size=1, max_size=15), min_size=1, max_size=6),
       compact_after=st.integers(-1, 5))
def test_live_view_equals_the_model(batches, compact_after):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "db"
        model = write_batches(path, batches, compact_after=compact_after, block_size=128)
        if not list(path.glob("*.sst")):
            assert model == {}
            return
        tables, _ = read_db(path)
        assert list(live_items(tables)) == sorted(model.items())
        for lo, hi in itertools.combinations([KEYS[2], KEYS[5], KEYS[9]], 2):
            assert list(live_range(tables, lo, hi)) == sorted(
                (k, v) for k, v in model.items() if lo <= k < hi)
