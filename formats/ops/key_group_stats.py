"""Entries and bytes per key group of a checkpoint, from its metadata and Parquet footers only.

What ``statectl inspect --key-groups`` draws. Entries per key group are exact: they are the
row counts ``_metadata.json`` keeps for every key group. Bytes come from the footers of the
keyed files: each row group's compressed column chunks, shared among the key groups whose rows
it holds in proportion to their rows (exact when a key group has its row groups to itself, as
after a max-parallelism change; an estimate within one row group otherwise). No data page is
read, so the cost is the metadata plus one footer per keyed file, whatever the state's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from formats.model.checkpoint import Checkpoint
from statecore.checkpoint import KeyGroupRows, OperatorIdentity, OperatorMetadata

__all__ = ["KeyGroupHistogram", "KeyGroupStat", "SubtaskShare", "footer_row_groups",
           "key_group_histograms", "keyed_files"]


@dataclass(frozen=True)
class KeyGroupStat:
    """One key group: the subtask that owns it, its keyed entries and bytes (all states)."""

    key_group: int
    subtask: int
    entries: int
    bytes: int


@dataclass(frozen=True)
class SubtaskShare:
    """One subtask's key groups and its share of the operator's keyed entries and bytes."""

    index: int
    key_group_range: tuple[int, int]
    entries: int
    bytes: int
    share: float  # of bytes (of entries when the operator has no bytes)


@dataclass(frozen=True)
class KeyGroupHistogram:
    """Every key group of one operator, ``[0, max_parallelism)``, with summary statistics.

    ``skew`` is the largest key group over the mean (1.0 when even; 0.0 with no state), of
    bytes, as are ``min``, ``mean`` and ``max``; ``*_entries`` are the same of entries.
    """

    uid: str
    name: str
    max_parallelism: int
    key_groups: tuple[KeyGroupStat, ...]
    subtasks: tuple[SubtaskShare, ...]
    #: the operator as output names it (docs/json.md)
    identity: OperatorIdentity

    def _stats(self, values: Sequence[int]) -> tuple[int, float, int, float]:
        if not values:
            return 0, 0.0, 0, 0.0
        mean = sum(values) / len(values)
        return min(values), mean, max(values), (max(values) / mean if mean else 0.0)

    @property
    def bytes_stats(self) -> tuple[int, float, int, float]:
        """``(min, mean, max, skew)`` of bytes per key group."""
        return self._stats([k.bytes for k in self.key_groups])

    @property
    def entries_stats(self) -> tuple[int, float, int, float]:
        """``(min, mean, max, skew)`` of entries per key group."""
        return self._stats([k.entries for k in self.key_groups])


def _apportion(groups: list[tuple[int, int, int]], rows: KeyGroupRows) -> int:
    """Bytes of a key group's ``rows``: its share of every row group ``(start, rows, bytes)``."""
    total = 0
    first, end = rows.first_row, rows.first_row + rows.row_count
    for lo, count, size in groups:
        overlap = min(end, lo + count) - max(first, lo)
        if overlap > 0:
            total += size * overlap // count
    return total


def _row_groups(checkpoint: Checkpoint, relative: str) -> list[tuple[int, int, int]]:
    """``(first row, rows, bytes)`` of each non-empty row group of a file."""
    out, row = [], 0
    for count, size in checkpoint.row_groups(relative):
        if count:
            out.append((row, count, size))
        row += count
    return out


def keyed_files(checkpoint: Checkpoint) -> list[str]:
    """The data files keyed handles reference (whose footers a histogram reads)."""
    return sorted({h.file for op in checkpoint.metadata.operators for st in op.subtasks
                   for h in st.keyed})


def footer_row_groups(checkpoint: Checkpoint, files: Sequence[str]
                      ) -> dict[str, list[tuple[int, int, int]]]:
    """``(first row, rows, bytes)`` of the row groups of each of ``files`` (footers only)."""
    return {f: _row_groups(checkpoint, f) for f in files}


def _histogram(checkpoint: Checkpoint, op: OperatorMetadata,
               footers: dict[str, list[tuple[int, int, int]]]) -> KeyGroupHistogram:
    entries = [0] * op.max_parallelism
    size = [0] * op.max_parallelism
    owner = [0] * op.max_parallelism
    for st in op.subtasks:
        if st.key_group_range is not None:
            for kg in range(st.key_group_range.start, st.key_group_range.end + 1):
                owner[kg] = st.index
        for handle in st.keyed:
            for rows in handle.rows:
                entries[rows.key_group] += rows.row_count
                size[rows.key_group] += _apportion(footers[handle.file], rows)
    stats = tuple(KeyGroupStat(kg, owner[kg], entries[kg], size[kg])
                  for kg in range(op.max_parallelism))
    total_bytes, total_entries = sum(size), sum(entries)
    shares = []
    for st in sorted(op.subtasks, key=lambda s: s.index):
        if st.key_group_range is None:
            continue
        kgs = range(st.key_group_range.start, st.key_group_range.end + 1)
        sub_bytes, sub_entries = sum(size[k] for k in kgs), sum(entries[k] for k in kgs)
        share = (sub_bytes / total_bytes if total_bytes
                 else sub_entries / total_entries if total_entries else 0.0)
        shares.append(SubtaskShare(st.index, (kgs.start, kgs.stop - 1), sub_entries, sub_bytes,
                                   share))
    return KeyGroupHistogram(op.uid, op.name, op.max_parallelism, stats, tuple(shares),
                             op.identity)


def key_group_histograms(checkpoint: Checkpoint,
                         footers: dict[str, list[tuple[int, int, int]]] | None = None
                         ) -> tuple[KeyGroupHistogram, ...]:
    """The histogram of every operator with keyed state (see the module doc).

    ``footers`` (:func:`footer_row_groups` of :func:`keyed_files`) may be read elsewhere, e.g.
    by Spark tasks; by default they are read here.
    """
    if footers is None:
        footers = footer_row_groups(checkpoint, keyed_files(checkpoint))
    return tuple(_histogram(checkpoint, op, footers) for op in checkpoint.metadata.operators
                 if op.key_type is not None)
