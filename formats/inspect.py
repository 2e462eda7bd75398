"""What ``statectl inspect`` reports about a checkpoint, computed from its metadata only.

Entries and bytes per operator, state and subtask come from ``_metadata.json`` (row counts per
key group, element ranges, file sizes): no data file is opened. A handle's bytes are its file's
bytes apportioned by rows (a rescaled checkpoint's handles share files; see
:func:`statecore.checkpoint.share_of_file`).
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.checkpoint_v1 import Checkpoint
from statecore.checkpoint import OperatorMetadata, file_extents, share_of_file

__all__ = ["CheckpointSummary", "OperatorSummary", "StateSummary", "SubtaskSummary",
           "summarize"]


@dataclass(frozen=True)
class StateSummary:
    """One state: entries (keyed: rows; operator: elements) and bytes of its files."""

    name: str
    scope: str
    kind: str
    entries: int
    bytes: int


@dataclass(frozen=True)
class SubtaskSummary:
    """One subtask: its key-group range (``None`` without keyed state), entries, bytes."""

    index: int
    key_group_range: tuple[int, int] | None
    entries: int
    bytes: int


@dataclass(frozen=True)
class OperatorSummary:
    """One operator with its states and subtasks."""

    uid: str
    name: str
    parallelism: int
    max_parallelism: int
    key_type: str | None
    states: tuple[StateSummary, ...]
    subtasks: tuple[SubtaskSummary, ...]


@dataclass(frozen=True)
class CheckpointSummary:
    """The ``inspect`` view: checkpoint identity and per-operator summaries."""

    format: str
    location: str
    checkpoint_id: int
    kind: str
    created_ms: int
    operators: tuple[OperatorSummary, ...]


def _operator(op: OperatorMetadata, sizes: dict[str, int], extent: dict[str, int]
              ) -> OperatorSummary:
    entries: dict[str, int] = {s.name: 0 for s in op.states}
    size: dict[str, int] = {s.name: 0 for s in op.states}
    subtasks = []
    for subtask in op.subtasks:
        sub_entries = sub_bytes = 0
        for handle in subtask.keyed:
            rows = sum(r.row_count for r in handle.rows)
            part = _bytes(sizes, extent, handle.file, rows)
            entries[handle.state] += rows
            size[handle.state] += part
            sub_entries += rows
            sub_bytes += part
        for op_handle in subtask.operator:
            part = _bytes(sizes, extent, op_handle.file, op_handle.element_count)
            entries[op_handle.state] += op_handle.element_count
            size[op_handle.state] += part
            sub_entries += op_handle.element_count
            sub_bytes += part
        kg = subtask.key_group_range
        subtasks.append(SubtaskSummary(subtask.index, None if kg is None else (kg.start, kg.end),
                                       sub_entries, sub_bytes))
    return OperatorSummary(
        op.uid, op.name, op.parallelism, op.max_parallelism, op.key_type,
        tuple(StateSummary(s.name, s.scope, s.kind, entries[s.name], size[s.name])
              for s in op.states),
        tuple(sorted(subtasks, key=lambda s: s.index)))


def _bytes(sizes: dict[str, int], extent: dict[str, int], file: str, rows: int) -> int:
    """A handle's bytes: the whole file when it has no rows to share (an empty file)."""
    whole = extent.get(file, 0)
    return sizes[file] if whole == 0 else share_of_file(sizes[file], rows, whole)


def summarize(checkpoint: Checkpoint, location: str) -> CheckpointSummary:
    """The summary of an opened statectl checkpoint."""
    metadata = checkpoint.metadata
    sizes = {f.path: f.size for f in metadata.files}
    return CheckpointSummary(
        "statectl", location, metadata.checkpoint_id, metadata.kind.value, metadata.created_ms,
        tuple(_operator(op, sizes, file_extents(metadata)) for op in metadata.operators))
