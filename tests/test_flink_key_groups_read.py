"""Key groups of a Flink snapshot read alone: ``Checkpoint.keyed_table_in`` without decoding.

A Flink snapshot opened with ``decode=False`` decodes only the key groups asked for (the
pieces of :mod:`formats.flink.read.pieces`): the rows equal those of the snapshot decoded whole, on
every fixture of every kind and release, and only those key groups' bytes are read.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest
from flink_fixtures import release_fixtures, snapshots

from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.export import jsonable
from formats.storage.io_stats import CountingHandler


def _locations() -> list[str]:
    found = [str(s / snap["path"]) for s, snap in snapshots("heap", "rocksdb", "types")]
    for release in release_fixtures():
        found += sorted(str(p.parent) for p in release.rglob("_metadata"))
    return found


def _rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps({k: jsonable(v, strict=False) for k, v in row.items()},
                             sort_keys=True) for row in table.to_pylist())


def _only(table: pa.Table, groups: set[int]) -> pa.Table:
    column = table.column("key_group")
    return table.filter(pc.is_in(column, pa.array(sorted(groups), column.type)))


def _handles(checkpoint: Checkpoint) -> list[tuple[str, Any]]:
    return [(op.uid, handle) for op in checkpoint.metadata.operators for st in op.subtasks
            for handle in st.keyed]


@pytest.mark.parametrize("location", _locations(), ids=lambda p: "/".join(p.split("/")[-5:]))
def test_key_groups_read_alone_equal_the_snapshot_decoded_whole(location: str) -> None:
    rng = random.Random(location)
    lazy = open_checkpoint(location, decode=False, partial=True)
    whole = open_checkpoint(location, partial=True)
    handles = _handles(whole)
    assert handles and len(handles) == len(_handles(lazy))
    rows = 0
    for (uid, handle), (lazy_uid, lazy_handle) in zip(handles, _handles(lazy), strict=True):
        assert (uid, handle.state) == (lazy_uid, lazy_handle.state)
        span = range(handle.key_group_range.start, handle.key_group_range.end + 1)
        estimates = lazy.key_group_estimates(uid, lazy_handle)
        assert estimates is not None and {g for g, _ in estimates} <= set(span)
        assert whole.key_group_estimates(uid, handle) is None  # decoded: rows known
        choices = [{span[0]}, {span[-1]}, set(span), set(span[:3]),  # runs, the whole range
                   set(rng.sample(span, min(len(span), 9)))]  # scattered
        for groups in choices:
            got = lazy.keyed_table_in(uid, lazy_handle, groups)
            assert set(got.column("key_group").to_pylist()) <= groups
            assert _rows(got) == _rows(_only(whole.keyed_table(uid, handle), groups)), (
                handle.state, sorted(groups)[:5])
            rows += got.num_rows
    assert rows


def test_a_key_group_reads_its_bytes_and_the_header_only() -> None:
    """Every handle in a file of its own (heap checkpoints, canonical savepoints): reading
    one key group reads the stream's header and that key group's bytes, nothing else."""
    measured = 0
    # canonical savepoints of any backend; the heap fixtures' checkpoints (heap backend)
    streams = [(f, snap) for f, snap in snapshots("heap", "rocksdb", "types")
               if snap["format"] == "canonical"]
    streams += [(f, snap) for f, snap in snapshots("heap") if snap["kind"] == "checkpoint"]
    for fixture, snap in streams:
        location = str(fixture / snap["path"])
        handler = CountingHandler()
        lazy = open_checkpoint(location, decode=False, partial=True,
                               filesystem=pafs.PyFileSystem(handler))
        for uid, handle in _handles(lazy):
            estimates = dict(lazy.key_group_estimates(uid, handle) or {})
            if len(estimates) < 2:
                continue
            group = max(estimates, key=estimates.__getitem__)
            before = dict(handler.counts)
            table = lazy.keyed_table_in(uid, handle, {group})
            assert set(table.column("key_group").to_pylist()) <= {group}
            read = {path: n - before.get(path, 0) for path, n in handler.counts.items()
                    if n - before.get(path, 0)}
            if not read:
                continue  # read already: an inline stream (in _metadata), or decoded
            (stream, n), = read.items()
            header = handler.counts[stream] - n  # what opening read of it: the header
            assert estimates[group] <= n <= header + estimates[group], (stream, n, header)
            assert n < Path(stream).stat().st_size, (stream, n)
            measured += 1
    assert measured, "no fixture has a keyed stream in a file of its own"


@pytest.mark.parametrize("location", _locations()[:6], ids=lambda p: "/".join(p.split("/")[-5:]))
def test_key_groups_outside_a_handle_are_no_rows(location: str) -> None:
    """Key groups another subtask owns, asked of a handle: no rows, and no error (a key filter
    over keys of several subtasks asked every handle for all of its key groups)."""
    checkpoint = open_checkpoint(location, decode=False)
    asked = 0
    for op in checkpoint.metadata.operators:
        if len(op.subtasks) < 2:
            continue
        for subtask in op.subtasks:
            others = {kg for other in op.subtasks if other is not subtask
                      and other.key_group_range is not None for kg in other.key_group_range}
            for handle in subtask.keyed:
                assert checkpoint.keyed_table_in(op.uid, handle, others).num_rows == 0
                asked += 1
    assert asked, "no keyed handle in a snapshot of two subtasks or more"
