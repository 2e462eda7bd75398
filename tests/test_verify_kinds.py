"""statectl verify: a clean checkpoint verifies clean; each corruption kind is caught by name."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from formats.open import open_checkpoint
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.verify import PROBLEM_KINDS, verify_checkpoint
from statecore.errors import CheckpointError
from statecore.key_groups import assign_to_key_group

SAMPLES = Path(__file__).resolve().parent.parent / "sample_checkpoints" / "v1"
KEYED = SAMPLES / "keyed-all-kinds-p2"


def _copy(tmp_path: Path, sample: Path = KEYED) -> Path:
    target = tmp_path / sample.name
    shutil.copytree(sample, target)
    return target


def _edit_metadata(root: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = root / "_metadata.json"
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))


def _fix_file_info(root: Path, relative: str) -> None:
    data = (root / relative).read_bytes()

    def edit(document: dict[str, Any]) -> None:
        for info in document["files"]:
            if info["path"] == relative:
                info["size"] = len(data)
                info["checksum"] = "sha256:" + hashlib.sha256(data).hexdigest()
    _edit_metadata(root, edit)


def _first_keyed_file(root: Path, min_rows_in_a_group: int = 1) -> tuple[str, list[Any]]:
    """A value-state file (string keys) and its handle's rows with a key group of enough rows."""
    document = json.loads((root / "_metadata.json").read_text())
    op = document["operators"][0]
    kinds = {s["name"]: s for s in op["states"]}
    for st in op["subtasks"]:
        for h in st["keyed"]:
            state = kinds[h["state"]]
            if state["kind"] == "value" and state["namespace_type"] == "void" and any(
                    r[2] >= min_rows_in_a_group for r in h["rows"]):
                return h["file"], h["rows"]
    raise AssertionError("no suitable keyed file in the sample")


def _rewrite(root: Path, relative: str, change: Callable[[dict[str, list[Any]]], None]) -> None:
    path = root / relative
    table = pq.read_table(path)
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    change(columns)
    pq.write_table(pa.table(columns, schema=table.schema), path)
    _fix_file_info(root, relative)


def _kinds(root: Path) -> set[str]:
    report = verify_checkpoint(str(root))
    assert report.clean == (not report.counts)
    assert set(report.counts) <= set(PROBLEM_KINDS)
    return set(report.counts)


@pytest.mark.parametrize("sample", sorted(p for p in SAMPLES.iterdir() if p.is_dir()),
                         ids=lambda p: p.name)
def test_samples_and_their_rescales_verify_clean(sample: Path, tmp_path: Path) -> None:
    report = verify_checkpoint(str(sample))
    assert report.clean, report.problems
    assert report.files == len(json.loads((sample / "_metadata.json").read_text())["files"])
    source = open_checkpoint(str(sample))
    for p in (1, 3):
        if p > min(op.max_parallelism for op in source.metadata.operators):
            continue
        out = tmp_path / f"p{p}"
        rescale_checkpoint(source, str(out), plan_checkpoint(source, p))
        assert verify_checkpoint(str(out)).clean


def test_not_a_checkpoint_raises(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        verify_checkpoint(str(tmp_path))


def test_metadata(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "_metadata.json").write_text("{")
    assert _kinds(root) == {"metadata"}


def test_unsafe_path(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    relative, _ = _first_keyed_file(root)
    outside = tmp_path / "outside.parquet"
    shutil.copy(root / relative, outside)
    os.remove(root / relative)
    os.symlink(outside, root / relative)
    assert "unsafe-path" in _kinds(root)


def test_missing_file(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    relative, _ = _first_keyed_file(root)
    os.remove(root / relative)
    assert "missing-file" in _kinds(root)


def test_size(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    relative, _ = _first_keyed_file(root)
    with open(root / relative, "ab") as handle:
        handle.write(b"extra")
    assert "size" in _kinds(root)


def test_checksum(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    relative, _ = _first_keyed_file(root)
    data = bytearray((root / relative).read_bytes())
    data[len(data) // 2] ^= 0x01
    (root / relative).write_bytes(bytes(data))
    assert "checksum" in _kinds(root)


def test_unreadable(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    relative, _ = _first_keyed_file(root)
    (root / relative).write_bytes(b"not parquet at all")
    _fix_file_info(root, relative)
    assert _kinds(root) == {"unreadable"}


def test_key_group_ranges(tmp_path: Path) -> None:
    root = _copy(tmp_path)

    def gap(document: dict[str, Any]) -> None:
        subtask = document["operators"][0]["subtasks"][1]
        subtask["key_group_range"][0] += 1  # key group 64 belongs to no subtask
        for h in subtask["keyed"]:
            h["key_groups"][0] = subtask["key_group_range"][0]
            h["rows"] = [r for r in h["rows"] if r[0] >= h["key_groups"][0]]
            if h["rows"]:
                first = h["rows"][0][1]
                h["rows"] = [[g, row - first, n] for g, row, n in h["rows"]]
    _edit_metadata(root, gap)
    assert "key-group-ranges" in _kinds(root)


def test_handle_range(tmp_path: Path) -> None:
    root = _copy(tmp_path)

    def widen(document: dict[str, Any]) -> None:
        handle = document["operators"][0]["subtasks"][0]["keyed"][0]
        handle["key_groups"][1] += 1  # beyond subtask 0's range, rows unchanged
    _edit_metadata(root, widen)
    assert _kinds(root) == {"handle-range"}


def stored_twice(root: Path) -> None:
    """The same key groups stored by a second handle (``overlap``)."""
    def twice(document: dict[str, Any]) -> None:
        keyed = document["operators"][0]["subtasks"][0]["keyed"]
        keyed.append(dict(keyed[0]))
    _edit_metadata(root, twice)


def offsets_swapped(root: Path) -> None:
    """Two key groups' row counts swapped in the metadata (``offsets``)."""
    relative, rows = _first_keyed_file(root)
    first, second = next((a, b) for a, b in zip(rows, rows[1:], strict=False) if a[2] != b[2])

    def swap(document: dict[str, Any]) -> None:
        for st in document["operators"][0]["subtasks"]:
            for h in st["keyed"]:
                if h["file"] == relative:
                    i = h["rows"].index(first)
                    h["rows"][i] = [first[0], first[1], second[2]]
                    h["rows"][i + 1] = [second[0], first[1] + second[2], first[2]]
    _edit_metadata(root, swap)


def key_misplaced(root: Path) -> None:
    """The first row's key replaced by one of another key group (``key-placement``)."""
    relative, _ = _first_keyed_file(root)
    max_parallelism = json.loads((root / "_metadata.json").read_text())[
        "operators"][0]["max_parallelism"]

    def misplace(columns: dict[str, list[Any]]) -> None:
        group = columns["key_group"][0]
        columns["key"][0] = next(k for k in (f"stranger-{i}" for i in range(1000))
                                 if assign_to_key_group(k, max_parallelism, "string") != group)
    _rewrite(root, relative, misplace)


def key_duplicated(root: Path) -> None:
    """A key group's second key made its first's (``duplicate-key``)."""
    relative, rows = _first_keyed_file(root, min_rows_in_a_group=2)
    group = next(r for r in rows if r[2] >= 2)

    def duplicate(columns: dict[str, list[Any]]) -> None:
        columns["key"][group[1] + 1] = columns["key"][group[1]]
    _rewrite(root, relative, duplicate)


def test_overlap(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    stored_twice(root)
    assert "overlap" in _kinds(root)


def test_offsets(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    offsets_swapped(root)
    assert _kinds(root) == {"offsets"}


def test_key_placement(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    key_misplaced(root)
    assert _kinds(root) == {"key-placement"}


def test_duplicate_key(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    key_duplicated(root)
    assert _kinds(root) == {"duplicate-key"}


def test_broadcast_copies(tmp_path: Path) -> None:
    root = _copy(tmp_path, SAMPLES / "operator-split-union-broadcast-p3")
    assert _kinds(root) == set()
    relative = "op-0/operator/1/1.parquet"  # subtask 1's copy of the broadcast state "rules"

    def change(columns: dict[str, list[Any]]) -> None:
        columns["value"][0] = columns["value"][0] + "-changed"
    _rewrite(root, relative, change)
    report = verify_checkpoint(str(root))
    # a warning: the job broke Flink's contract, the checkpoint itself is intact
    assert report.clean and not report.problems
    assert [w.kind for w in report.warnings] == ["broadcast-copies"]
    assert "subtask 1's copy differs from subtask 0's (2 entries differ)" in (
        report.warnings[0].message)


def test_verify_never_modifies_its_input(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    relative, _ = _first_keyed_file(root)
    os.remove(root / relative)

    def digest() -> dict[str, str]:
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file()}
    before = digest()
    assert not verify_checkpoint(str(root)).clean
    assert digest() == before
