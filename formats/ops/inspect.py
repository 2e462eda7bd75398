"""What ``statectl inspect`` reports about a checkpoint: a summary and the views asked for.

The summary (entries and bytes per operator, state and subtask) comes from ``_metadata.json``
alone (row counts per key group, element ranges, file sizes): no data file is opened. A
handle's bytes are its file's bytes apportioned by rows (a rescaled checkpoint's handles share
files; see :func:`statecore.checkpoint.share_of_file`). The views read what they need: the
key-group histogram the Parquet footers (:mod:`formats.ops.key_group_stats`), the others state
(:mod:`formats.ops.state_scan`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from formats.model.checkpoint import Checkpoint
from formats.model.sources import SourceProgress
from formats.ops.key_group_stats import KeyGroupHistogram, key_group_histograms
from formats.ops.state_scan import (
    ExpiredShare,
    KeyLookup,
    StateEntries,
    check_states,
    expired_shares,
    largest_entries,
    lookup,
    sample_entries,
)
from formats.ops.ttl_given import unknown_ttls
from statecore.checkpoint import (
    OperatorIdentity,
    OperatorMetadata,
    file_extents,
    share_of_file,
)
from statecore.undecodable import UndecodablePart

__all__ = ["CheckpointSummary", "InspectReport", "NotRead", "OperatorSummary", "StateSummary",
           "SubtaskSummary", "inspect_checkpoint", "summarize"]


@dataclass(frozen=True)
class NotRead:
    """What statectl could not read of a state, or of an operator's state streams.

    ``entries``: how many entries (of the state's ``entries``) were not decoded, ``None``
    where some could not be counted (the format does not tell, or nothing was decoded);
    ``damaged``: the bytes are damaged (else statectl has no decoder for them). ``what``:
    for an operator's, what was not read (``keyed state of subtask 1``).
    """

    reason: str
    entries: int | None
    damaged: bool = False
    what: str = ""


@dataclass(frozen=True)
class StateSummary:
    """One state: entries (keyed: rows; operator: elements) and bytes of its files.

    ``None`` where the summary did not count them: a Flink snapshot's keyed state, when only
    ``_metadata`` and the streams' headers were read (:func:`summarize`). ``entries`` counts
    the entries statectl could not decode too, where the format gives their number (a heap
    checkpoint's state blocks do); ``not_read`` says what of the state was not read, and
    why (``None``: all of it was).
    """

    name: str
    scope: str
    kind: str
    entries: int | None
    bytes: int | None
    not_read: NotRead | None = None


@dataclass(frozen=True)
class SubtaskSummary:
    """One subtask: its key-group range (``None`` without keyed state), entries, bytes.

    ``entries`` is ``None`` where keyed state was not counted; ``bytes`` are then its keyed
    streams' (as stored) and its operator state's.
    """

    index: int
    key_group_range: tuple[int, int] | None
    entries: int | None
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
    #: the operator as output names it (docs/json.md)
    identity: OperatorIdentity
    #: what of its state streams statectl could not read beyond its states' (a subtask's
    #: keyed state stream, a heap key group): never an operator "without state"
    not_read: tuple[NotRead, ...] = ()
    #: the node of the SQL job's plan it comes from and the tables it feeds (``--plan``)
    plan: str | None = None


@dataclass(frozen=True)
class CheckpointSummary:
    """The ``inspect`` view: checkpoint identity and per-operator summaries."""

    format: str
    location: str
    checkpoint_id: int
    kind: str
    created_ms: int
    operators: tuple[OperatorSummary, ...]
    #: what the sources have read (a Flink snapshot's; ``None`` for a statectl checkpoint)
    sources: tuple[SourceProgress, ...] | None = None


def _operator(op: OperatorMetadata, sizes: dict[str, int], extent: dict[str, int],
              streams: dict[tuple[str, int], int] | None = None,
              stored: dict[tuple[str, int], int] | None = None) -> OperatorSummary:
    """An operator's summary; ``streams``: keyed state not counted, its streams' bytes.

    ``stored``: a subtask's keyed bytes as stored where they are not its states' sum (a Flink
    snapshot's streams): a subtask's ``bytes`` are then those, counted or not, so the
    summary and ``--all`` give a subtask the same bytes (its states' are their data's share).
    """
    if streams is not None:
        return _uncounted(op, sizes, extent, streams)
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
        if stored is not None and subtask.keyed:
            sub_bytes += stored.get((op.uid, subtask.index), 0) - sum(
                _bytes(sizes, extent, h.file, sum(r.row_count for r in h.rows))
                for h in subtask.keyed)
        kg = subtask.key_group_range
        subtasks.append(SubtaskSummary(subtask.index, None if kg is None else (kg.start, kg.end),
                                       sub_entries, sub_bytes))
    return OperatorSummary(
        op.uid, op.name, op.parallelism, op.max_parallelism, op.key_type,
        tuple(StateSummary(s.name, s.scope, s.kind, entries[s.name], size[s.name])
              for s in op.states),
        tuple(sorted(subtasks, key=lambda s: s.index)), op.identity, plan=op.plan)


def _uncounted(op: OperatorMetadata, sizes: dict[str, int], extent: dict[str, int],
               streams: dict[tuple[str, int], int]) -> OperatorSummary:
    """:func:`_operator` where keyed state was not decoded: no entries, the streams' bytes."""
    entries: dict[str, int | None] = {s.name: None if s.scope == "keyed" else 0
                                      for s in op.states}
    size: dict[str, int | None] = dict(entries)
    subtasks = []
    for subtask in op.subtasks:
        sub_bytes = streams.get((op.uid, subtask.index), 0)
        for op_handle in subtask.operator:
            part = _bytes(sizes, extent, op_handle.file, op_handle.element_count)
            entries[op_handle.state] = (entries[op_handle.state] or 0) + op_handle.element_count
            size[op_handle.state] = (size[op_handle.state] or 0) + part
            sub_bytes += part
        kg = subtask.key_group_range
        subtasks.append(SubtaskSummary(subtask.index, None if kg is None else (kg.start, kg.end),
                                       None if subtask.keyed or kg is not None else 0,
                                       sub_bytes))
    return OperatorSummary(
        op.uid, op.name, op.parallelism, op.max_parallelism, op.key_type,
        tuple(StateSummary(s.name, s.scope, s.kind, entries[s.name], size[s.name])
              for s in op.states),
        tuple(sorted(subtasks, key=lambda s: s.index)), op.identity, plan=op.plan)


def _bytes(sizes: dict[str, int], extent: dict[str, int], file: str, rows: int) -> int:
    """A handle's bytes: the whole file when it has no rows to share (an empty file)."""
    whole = extent.get(file, 0)
    return sizes[file] if whole == 0 else share_of_file(sizes[file], rows, whole)


def summarize(checkpoint: Checkpoint, location: str) -> CheckpointSummary:
    """The summary of an opened checkpoint (a Flink snapshot's with its sources' progress).

    A Flink snapshot opened without decoding its keyed state (``inspect`` without views reads
    only ``_metadata`` and the keyed streams' headers) has no entry counts for keyed state:
    they are ``None``, and a subtask's bytes are its keyed streams' as stored. What statectl
    could not read is in each state's and operator's ``not_read`` (:func:`_not_read`), and
    entries counted but not decoded are in the counts.
    """
    metadata = checkpoint.metadata
    sizes = {f.path: f.size for f in metadata.files}
    streams = checkpoint.uncounted_keyed_bytes()
    parts = checkpoint.undecodable_parts()
    unread = checkpoint.unread_states()
    return CheckpointSummary(
        checkpoint.format_name, location, metadata.checkpoint_id, metadata.kind.value,
        metadata.created_ms,
        tuple(_not_read(_operator(op, sizes, file_extents(metadata), streams,
                                  None if streams is not None
                                  else checkpoint.keyed_stream_bytes()),
                        [p for p in parts if p.operator == op.uid], unread, streams is None)
              for op in metadata.operators),
        None if checkpoint.format_name == "statectl" else checkpoint.sources())


def _not_read(op: OperatorSummary, parts: list[UndecodablePart],
              unread: dict[tuple[str, str], str], counted: bool) -> OperatorSummary:
    """``op`` with what of it statectl could not read (``parts``: the operator's).

    A state's entries left out of its rows (a heap block that could not be decoded: its count
    is known) are added to its entries and its subtasks'. Without ``counted`` (nothing
    decoded) a state's ``not_read`` is what its declaration tells (``unread``).
    """
    names = {s.name for s in op.states}
    by_state: dict[str, list[UndecodablePart]] = {}
    others: list[UndecodablePart] = []
    for part in parts:
        if part.of_state and part.state in names:
            by_state.setdefault(part.state, []).append(part)
        else:
            others.append(part)
    states = []
    for state in op.states:
        found = by_state.get(state.name, [])
        if found:
            first = next((p for p in found if p.damaged), found[0])
            not_decoded = None if any(p.values < 0 for p in found) else sum(
                p.values for p in found)
            left_out = sum(p.values for p in found if not p.kept and p.values > 0)
            entries = None if state.entries is None else state.entries + left_out
            if not_decoded is not None and entries is not None:
                not_decoded = min(not_decoded, entries)  # a map's values: several an entry
            state = replace(state, entries=entries, not_read=NotRead(
                first.reason, not_decoded, any(p.damaged for p in found)))
        elif not counted and (op.uid, state.name) in unread:
            state = replace(state, not_read=NotRead(unread[(op.uid, state.name)], None))
        states.append(state)
    subtasks = []
    for st in op.subtasks:
        left_out = sum(p.values for found in by_state.values() for p in found if not p.kept
                       and p.values > 0 and p.subtask == st.index)
        subtasks.append(st if st.entries is None or not left_out
                        else replace(st, entries=st.entries + left_out))
    operator_parts: dict[tuple[str, str], list[UndecodablePart]] = {}
    for part in others:
        operator_parts.setdefault((part.state, part.reason), []).append(part)
    not_read = []
    for (what, reason), group in operator_parts.items():
        subtask_list = sorted({p.subtask for p in group if p.subtask >= 0})
        where = (f" of subtask{'s' if len(subtask_list) > 1 else ''} "
                 f"{', '.join(map(str, subtask_list))}" if subtask_list else "")
        not_read.append(NotRead(reason, None, any(p.damaged for p in group),
                                f"{what.strip('()')}{where}"))
    return replace(op, states=tuple(states), subtasks=tuple(subtasks),
                   not_read=tuple(not_read))


@dataclass(frozen=True)
class InspectReport:
    """The summary and each view asked for (``None``: not asked for)."""

    summary: CheckpointSummary
    key_groups: tuple[KeyGroupHistogram, ...] | None = None
    measure: str = "bytes"  # what the key-group chart draws: bytes or entries
    top: tuple[StateEntries, ...] | None = None
    now: int | None = None
    expired: tuple[ExpiredShare, ...] | None = None
    lookup: KeyLookup | None = None
    entries: tuple[StateEntries, ...] | None = None
    #: show every operator, state and subtask (``--all``), not a summary that fits a screen
    everything: bool = False
    #: with ``now``: the states with TTL values whose TTL is neither stored (a Flink snapshot
    #: has none) nor given, ``(uid, state, kind)``: their expired share is not computed
    ttl_unknown: tuple[tuple[str, str, str], ...] = ()

    def operator(self, uid: str) -> OperatorIdentity:
        """The identity of the operator with this (model) uid, for the views' rows."""
        for op in self.summary.operators:
            if op.uid == uid:
                return op.identity
        raise KeyError(uid)

    @property
    def views(self) -> bool:
        """Whether any view beyond the summary was asked for."""
        return any(v is not None for v in (self.key_groups, self.top, self.expired,
                                            self.lookup, self.entries))


def inspect_checkpoint(checkpoint: Checkpoint, location: str, *, key_groups: bool = False,
                       measure: str = "bytes", top: int | None = None, now: int | None = None,
                       states: Collection[str] | None = None, key: str | None = None,
                       namespace: str | None = None, limit: int | None = None,
                       footers: dict[str, list[tuple[int, int, int]]] | None = None,
                       everything: bool = False) -> InspectReport:
    """The summary of ``checkpoint`` and the views asked for.

    ``key_groups``: the histogram (metadata and footers only); ``top``: the largest entries
    per state; ``now`` (epoch ms): the TTL-expired share (of the states whose TTL is known:
    stored, or given, :mod:`formats.ops.ttl_given`; the others are listed); ``key`` (and
    ``namespace``): that key's entries, reading only its key group; ``limit``: a sample of
    that many entries per state. ``states`` restricts the views that read state to those
    states. ``footers``: the keyed files' row groups when read elsewhere (by Spark tasks).
    ``everything``: the summary lists every operator, state and subtask.
    """
    check_states(checkpoint, states)
    ttl_unknown = () if now is None else tuple(
        (op.uid, s.name, s.kind) for op, s in unknown_ttls(checkpoint)
        if states is None or s.name in states)
    return InspectReport(
        summarize(checkpoint, location),
        key_group_histograms(checkpoint, footers) if key_groups else None, measure,
        None if top is None else largest_entries(checkpoint, top, states),
        now, None if now is None else expired_shares(checkpoint, now, states),
        None if key is None else lookup(checkpoint, key, states, namespace),
        None if limit is None else sample_entries(checkpoint, limit, states), everything,
        ttl_unknown)
