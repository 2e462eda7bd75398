"""What the inspect views read, counted through ``formats.storage.io_stats.CountingHandler``.

The acceptance of ``inspect --key``: only the needed key group is read (one file of the
owning subtask per state, and of it only the footer and that key group's row groups); the
summary reads ``_metadata.json`` alone; ``--key-groups`` only the footers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from formats.open import open_checkpoint
from formats.ops.inspect import inspect_checkpoint
from formats.statectl.writer import write_checkpoint
from formats.storage.io_stats import CountingHandler
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import list_state, value_state

MAX_P, P = 32, 2
VALUE = 2048  # bytes per value: data pages dominate, footers are small


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    location = str(tmp_path_factory.mktemp("io") / "chk")
    ranges = [compute_key_group_range_for_operator_index(MAX_P, P, i) for i in range(P)]
    backends = [HeapKeyedStateBackend("string", max_parallelism=MAX_P, key_group_range=r)
                for r in ranges]
    for i in range(2000):
        key = f"key-{i}"
        group = assign_to_key_group(key, MAX_P, "string")
        backend = next(b for b, r in zip(backends, ranges, strict=True) if group in r)
        backend.set_current_key(key)
        backend.get_value_state(value_state("blob", "bytes")).update(os.urandom(VALUE))
        backend.get_list_state(list_state("seen", "int64")).add(i)
    write_checkpoint(location, 1, [OperatorSnapshot(
        "op", "op", P, MAX_P, [SubtaskSnapshot(i, keyed=b.snapshot())
                               for i, b in enumerate(backends)])])
    return location


def counted(location: str, **views: object) -> tuple[dict[str, int], object]:
    handler = CountingHandler()
    checkpoint = open_checkpoint(location, filesystem=pafs.PyFileSystem(handler))
    report = inspect_checkpoint(checkpoint, location, **views)  # type: ignore[arg-type]
    return {os.path.relpath(p, location): n for p, n in handler.counts.items()}, report


def sizes(location: str) -> dict[str, int]:
    return {str(p.relative_to(location)): p.stat().st_size
            for p in Path(location).rglob("*") if p.is_file()}


def test_the_summary_reads_only_the_metadata(checkpoint_dir: str) -> None:
    read, _ = counted(checkpoint_dir)
    assert list(read) == ["_metadata.json"]
    assert read["_metadata.json"] == sizes(checkpoint_dir)["_metadata.json"]


def test_key_groups_read_only_metadata_and_footers(checkpoint_dir: str) -> None:
    read, _ = counted(checkpoint_dir, key_groups=True)
    files = sizes(checkpoint_dir)
    data = sum(n for f, n in files.items() if f.endswith(".parquet"))
    assert set(read) == set(files)  # every keyed file's footer, nothing else
    assert sum(n for f, n in read.items() if f.endswith(".parquet")) < data / 8
    for f, n in read.items():
        if f.endswith(".parquet"):
            footer = pq.ParquetFile(Path(checkpoint_dir) / f).metadata.serialized_size
            assert n <= max(footer + 8, 64 * 1024) + 8, f  # the tail pyarrow reads at most


@pytest.mark.parametrize("index", [0, 7, 1500])
def test_key_reads_only_its_key_group(checkpoint_dir: str, index: int) -> None:
    key = f"key-{index}"
    group = assign_to_key_group(key, MAX_P, "string")
    owner = 0 if group < MAX_P // P else 1
    read, report = counted(checkpoint_dir, key=key)
    lookup = report.lookup  # type: ignore[attr-defined]
    assert lookup.locations == (("op", key, group, owner),)
    found = {s.state: s.entries for s in lookup.states}
    assert len(found["blob"]) == 1 and len(found["blob"][0].value) == VALUE
    assert [e.value for e in found["seen"]] == [[index]]
    data_files = sorted(f for f in read if f.endswith(".parquet"))
    assert all(f.endswith(f"/{owner}.parquet") for f in data_files)  # the owner's files only
    assert len(data_files) == 2  # one per state
    checkpoint = open_checkpoint(checkpoint_dir)
    (op,) = checkpoint.metadata.operators
    for f in data_files:
        handle = next(h for st in op.subtasks for h in st.keyed if h.file == f)
        rows = next(r for r in handle.rows if r.key_group == group)
        parquet = pq.ParquetFile(Path(checkpoint_dir) / f)
        # the bytes of the row groups holding this key group's rows, plus the footer
        start, own = 0, 0
        for i in range(parquet.num_row_groups):
            meta = parquet.metadata.row_group(i)
            end = rows.first_row + rows.row_count
            if start < end and rows.first_row < start + meta.num_rows:
                own += sum(meta.column(c).total_compressed_size
                           for c in range(meta.num_columns))
            start += meta.num_rows
        limit = own + max(parquet.metadata.serialized_size + 8, 64 * 1024) + 8
        assert read[f] <= limit, (f, read[f], limit, sizes(checkpoint_dir)[f])
        if f.endswith(".parquet") and "/0/" in f:  # the blob state: 2 KiB values
            assert read[f] < sizes(checkpoint_dir)[f] / 8  # 1 of 16 key groups, roughly


# -- a Flink snapshot's summary: _metadata and the keyed streams' headers only ------------------


def _flink_snapshots() -> list[tuple[str, Path]]:
    from flink_fixtures import expected, fixture_sets
    out = []
    for root in ("heap", "rocksdb", "types"):
        for fixture_set in fixture_sets(root):
            for snap in expected(fixture_set)["snapshots"]:
                out.append((f"{fixture_set.name}:{snap['path']}", fixture_set / snap["path"]))
    return out


FLINK_SNAPSHOTS = _flink_snapshots()


@pytest.mark.parametrize(("name", "snapshot"), FLINK_SNAPSHOTS,
                         ids=[s[0] for s in FLINK_SNAPSHOTS])
def test_a_flink_summary_reads_metadata_and_keyed_headers_only(name: str,
                                                              snapshot: Path) -> None:
    """``inspect`` without views opens ``_metadata`` and reads of each keyed state stream in
    a file exactly its header (up to the first key group's offset); no SST file is read."""
    from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata
    from formats.ops.inspect import summarize

    assert FLINK_SNAPSHOTS, "no Flink fixtures found (../shared)"
    handler = CountingHandler()
    location = str(snapshot)
    checkpoint = open_checkpoint(location, filesystem=pafs.PyFileSystem(handler), decode=False)
    summary = summarize(checkpoint, location)
    read = {os.path.relpath(p, location): n for p, n in handler.counts.items()}
    metadata = (snapshot / "_metadata").read_bytes()
    assert read.pop("_metadata") == len(metadata)
    flink = parse_metadata(metadata, "_metadata")
    headers: dict[str, int] = {}  # a keyed stream's file -> its header's bytes
    for op in flink.operators:
        for st in op.subtasks:
            for handle in st.managed_keyed:
                if isinstance(handle, FlinkIncrementalHandle):
                    if handle.meta.kind not in ("inline", "empty"):  # its header: read whole
                        headers[os.path.basename(handle.meta.path)] = handle.meta.size
                    for _, stream in handle.files:  # SST files, MANIFEST, ...: never read
                        if stream.kind not in ("inline", "empty"):
                            assert os.path.basename(stream.path) not in {
                                os.path.basename(p) for p in read}
                    continue
                if handle.stream.kind not in ("inline", "empty"):
                    starts = [o for o in handle.offsets if o > 0]
                    headers[os.path.basename(handle.stream.path)] = min(
                        starts, default=handle.stream.size)
            for op_handle in st.managed_operator:  # operator state: small, decoded whole
                if op_handle.stream.kind not in ("inline", "empty"):
                    headers.setdefault(os.path.basename(op_handle.stream.path),
                                       op_handle.stream.size)
    for path, n in read.items():
        name = os.path.basename(path)
        assert name in headers, f"{path} was read ({n} bytes): no header of a keyed stream"
        assert n == headers[name], (path, n, headers[name])
    keyed = [s for op in summary.operators for s in op.states if s.scope == "keyed"]
    assert keyed and all(s.entries is None for s in keyed)  # not counted: not decoded
    assert all(st.bytes > 0 for op in summary.operators if op.key_type
               for st in op.subtasks if st.key_group_range is not None)
