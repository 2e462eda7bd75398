"""What ``statectl inspect`` reports about a checkpoint, computed from its metadata only.

Entries and bytes per operator, state and subtask come from ``_metadata.json`` (row counts per
key group, element ranges, file sizes): no data file is opened. A handle's bytes are the size of the
file it references.
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.checkpoint_v1 import Checkpoint
from statecore.checkpoint import OperatorMetadata

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


def _operator(op: OperatorMetadata, sizes: dict[str, int]) -> OperatorSummary:
    entries: dict[str, int] = {s.name: 0 for s in op.states}
    size: dict[str, int] = {s.name: 0 for s in op.states}
    subtasks = []
    for subtask in op.subtasks:
        sub_entries = sub_bytes = 0
        for handle in subtask.keyed:
            rows = sum(r.row_count for r in handle.rows)
            entries[handle.state] += rows
            size[handle.state] += sizes[handle.file]
            sub_entries += rows
            sub_bytes += sizes[handle.file]
        for op_handle in subtask.operator:
            entries[op_handle.state] += op_handle.element_count
            size[op_handle.state] += sizes[op_handle.file]
            sub_entries += op_handle.element_count
            sub_bytes += sizes[op_handle.file]
        kg = subtask.key_group_range
        subtasks.append(SubtaskSummary(subtask.index, None if kg is None else (kg.start, kg.end),
                                       sub_entries, sub_bytes))
    return OperatorSummary(
        op.uid, op.name, op.parallelism, op.max_parallelism, op.key_type,
        tuple(StateSummary(s.name, s.scope, s.kind, entries[s.name], size[s.name])
              for s in op.states),
        tuple(sorted(subtasks, key=lambda s: s.index)))


def summarize(checkpoint: Checkpoint, location: str) -> CheckpointSummary:
    """The summary of an opened statectl checkpoint."""
    metadata = checkpoint.metadata
    sizes = {f.path: f.size for f in metadata.files}
    return CheckpointSummary(
        "statectl", location, metadata.checkpoint_id, metadata.kind.value, metadata.created_ms,
        tuple(_operator(op, sizes) for op in metadata.operators))
