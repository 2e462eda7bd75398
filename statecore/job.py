"""A local job: one keyed operator over a replayable source, with checkpoints and restore.

The shape of a Flink job reduced to what statectl needs to build state (seed 004): a source of
splits read at recorded positions; an operator with parallelism ``p`` and max parallelism
``M`` whose subtask ``i`` owns key-group range ``i`` (reference §1.2) with one keyed and one
operator backend; records routed to the subtask of their key group; a user function that
registers state and processes records. A checkpoint coordinator triggers a checkpoint every
``checkpoint_every`` records (or on demand): the synchronous half takes every backend's
snapshot and the source positions (kept in operator list state, Flink's
``CheckpointedFunction`` pattern), the storage writes it asynchronously while processing goes
on, and it counts as complete only once its metadata is durable. The last ``keep`` completed
checkpoints are retained; savepoints are taken by hand and never released automatically.

Exactly once: records are processed in an order that depends only on the source positions
(splits in order, each from its position), so a job restored from any completed checkpoint
and run to the end reaches the same state as one that never stopped. Storage is injected
(:class:`CheckpointStorage`); ``formats`` implements it on files.

Bad records (optional): a source may yield a :class:`SkippedRecord` in place of a record it
leaves out (``statectl build --on-bad-record skip``). The job moves the split's position past it
without processing it and counts it per reason with the split's position (operator list state
``skipped-records``, written once a subtask has skipped a record), so a job restored from a
checkpoint neither counts a skipped record again nor loses the count. Skipped records never
count towards ``checkpoint_every`` or ``limit``.

Folding (optional): a :class:`RecordFolder` hands the job runs of records already folded per key
(e.g. ``count`` and ``sum`` of each key's records in the run), and the function applies one
folded value per key (:class:`FoldingFunction`) instead of one call per record. The folder
promises that this reaches exactly the state that processing the records one by one reaches;
it returns ``None`` for a run it cannot fold exactly, and the job processes those records one
by one. Runs never straddle a checkpoint trigger point (every ``checkpoint_every`` records) or
the ``limit`` of :meth:`LocalJob.run`, so checkpoints hold the same state and source positions
with or without folding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from statecore.checkpoint import CheckpointKind, OperatorSnapshot, SubtaskSnapshot
from statecore.errors import CheckpointError, InvalidArgumentError
from statecore.key_groups import (
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from statecore.keyed_backend import HeapKeyedStateBackend, MapKind
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
    OperatorStateSnapshotEntry,
)
from statecore.serializers import TypeSerializer, resolve_type
from statecore.ttl import Clock, system_clock

__all__ = [
    "CONFIGURATION_STATE",
    "SKIPPED_RECORDS_STATE",
    "SOURCE_POSITIONS_STATE",
    "CheckpointStorage",
    "CompletedCheckpoint",
    "FoldedRecords",
    "FoldingFunction",
    "JobResult",
    "LocalJob",
    "PendingWrite",
    "ProcessFunction",
    "RecordFolder",
    "open_subtask",
    "subtask_snapshot",
    "RestoredCheckpoint",
    "RuntimeContext",
    "SkippedRecord",
    "Source",
]

#: The operator list state that holds ``(split, position)`` of the splits a subtask reads.
SOURCE_POSITIONS_STATE = "source-positions"
#: The broadcast state that holds the job's configuration (the same on every subtask).
CONFIGURATION_STATE = "job-configuration"
_CONFIGURATION = BroadcastStateDescriptor(CONFIGURATION_STATE, "string", "string")
_POSITIONS = OperatorListStateDescriptor(SOURCE_POSITIONS_STATE, "tuple<string,int64>")
#: The operator list state that holds ``(split, reason, count)``: the records of each split the
#: source left out before its position (:class:`SkippedRecord`), by reason.
SKIPPED_RECORDS_STATE = "skipped-records"
_SKIPPED = OperatorListStateDescriptor(SKIPPED_RECORDS_STATE, "tuple<string,string,int64>")
#: Keys whose key group a job remembers (the cache is emptied when full).
_KEY_GROUP_CACHE = 1 << 16


@dataclass(frozen=True)
class SkippedRecord:
    """What a source yields in place of a record it leaves out (a bad input record).

    ``reason``: why, in a word (``"invalid-utf8"``...); the job counts skipped records per
    reason and split, with the split's position (see the module doc).
    """

    reason: str


class Source(Protocol):
    """A replayable source: named splits, each read from a position (Flink's source splits)."""

    def splits(self) -> Sequence[str]: ...

    def read(self, split: str, position: int) -> Iterator[tuple[int, Any]]:
        """``(position after the record, record)`` from ``position`` to the split's end.

        The record is a :class:`SkippedRecord` where the source leaves one out.
        """
        ...


@dataclass
class RuntimeContext:
    """What a function sees: its subtask and its backends (the current key is set for it)."""

    subtask_index: int
    parallelism: int
    keyed: HeapKeyedStateBackend[Any]
    operator: OperatorStateBackend


class ProcessFunction(Protocol):
    """User logic: register state in ``open``, update it in ``process`` (one key at a time)."""

    def open(self, context: RuntimeContext) -> None: ...

    def process(self, record: Any, context: RuntimeContext) -> None: ...


class FoldingFunction(ProcessFunction, Protocol):
    """A process function that also applies records folded per key (:class:`RecordFolder`).

    ``process_folded(folded, context)`` must leave the current key's state exactly as calling
    ``process`` with each of the folded records, in their order, would have.
    """

    def process_folded(self, folded: Any, context: RuntimeContext) -> None: ...


@dataclass(frozen=True)
class FoldedRecords:
    """Records ``[start, end)`` of one split folded per key (what a :class:`RecordFolder` returns).

    ``keys`` are the distinct keys of those records, each once; ``key_groups[i]`` is
    ``assign_to_key_group(keys[i], max_parallelism, key serializer)`` of the job, and
    ``folded[i]`` is what the function's ``process_folded`` applies for ``keys[i]``. ``end`` is
    the position after the last record folded (``end == start``: the split has no more records).
    The three are iterated once, together (a folder may produce them a chunk at a time).
    ``skipped``: the records of ``[start, end)`` the source left out (not folded), in order;
    ``end - start - len(skipped)`` records were folded.
    """

    end: int
    keys: Iterable[Any]
    key_groups: Iterable[int]
    folded: Iterable[Any]
    skipped: Sequence[SkippedRecord] = ()


class RecordFolder(Protocol):
    """Folds runs of a source's records per key, where that gives exactly the same state."""

    def fold(self, split: str, position: int, count: int) -> FoldedRecords | None:
        """Records ``position .. position + count - 1`` of ``split`` (fewer at its end), folded.

        ``None`` when these records cannot be folded exactly (a null key, a value whose folding
        could differ from one-by-one processing, an error one-by-one processing would raise at
        a given record): the job then processes them one by one.
        """
        ...


class PendingWrite(Protocol):
    """A checkpoint being written (``formats.statectl.async_writer.PendingCheckpoint``)."""

    checkpoint_id: int

    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> Any: ...

    def cancel(self) -> None: ...

    def kill(self) -> None:
        """Stop the write at once (Ctrl-C): what it wrote is incomplete and removed."""


@dataclass(frozen=True)
class CompletedCheckpoint:
    """A checkpoint or savepoint whose metadata is durably written."""

    checkpoint_id: int
    kind: CheckpointKind
    location: str


class RestoredCheckpoint(Protocol):
    """Read access to one completed checkpoint, as a restore needs it."""

    def restore_keyed(self, uid: str, backend: HeapKeyedStateBackend[Any]) -> int: ...

    def operator_entries(self, uid: str, subtask_index: int) -> list[OperatorStateSnapshotEntry]:
        ...


class CheckpointStorage(Protocol):
    """Where checkpoints go: ids claimed, written asynchronously, listed, discarded, read.

    ``claim(n)`` reserves ``n`` or the next id after it that no other writer of the storage
    has taken, and returns it: ids are never issued twice. ``discard`` may keep a checkpoint
    that is being read (the next retention takes it). ``reading(n)`` holds checkpoint ``n``
    for the block: nothing deletes it meanwhile.
    """

    def claim(self, checkpoint_id: int) -> int: ...

    def begin(self, checkpoint_id: int, kind: CheckpointKind,
              operators: Sequence[OperatorSnapshot]) -> PendingWrite: ...

    def completed(self) -> list[CompletedCheckpoint]: ...

    def discard(self, checkpoint_id: int) -> None: ...

    def reading(self, checkpoint_id: int) -> AbstractContextManager[RestoredCheckpoint]: ...


@dataclass
class JobResult:
    """Records processed by a run, checkpoints completed, and failed ones with the reason.

    ``skipped``: records the source left out during the run (:class:`SkippedRecord`).
    """

    records: int
    completed: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    skipped: int = 0


@dataclass
class _Subtask:
    context: RuntimeContext
    function: ProcessFunction
    positions: dict[str, int]
    #: split -> reason -> records left out before its position (restored ones included)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)


def open_subtask(index: int, parallelism: int, max_parallelism: int,
                 key_serializer: TypeSerializer[Any], function: ProcessFunction,
                 configuration: dict[str, str], *,
                 entries: Sequence[OperatorStateSnapshotEntry] = (), restored: bool = False,
                 map_kind: MapKind = "copy_on_write", clock: Clock = system_clock
                 ) -> RuntimeContext:
    """Subtask ``index`` of a job as :class:`LocalJob` sets it up, with ``function`` opened.

    Its keyed backend owns Flink's key-group range ``index``; its operator backend holds
    ``entries`` (a restore) and the job's ``configuration`` in broadcast state (a restored one
    must be the same). Engines that run subtasks elsewhere (Spark) build them with this, so
    their state is the local job's.
    """
    key_groups = compute_key_group_range_for_operator_index(max_parallelism, parallelism,
                                                            index)
    keyed: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
        key_serializer, max_parallelism, key_groups, map_kind=map_kind, clock=clock)
    operator = OperatorStateBackend(list(entries))
    context = RuntimeContext(index, parallelism, keyed, operator)
    config = operator.get_broadcast_state(_CONFIGURATION)
    if restored and dict(config.items()) != configuration:
        raise CheckpointError(
            f"the checkpoint was taken with configuration {dict(config.items())}, this job "
            f"has {configuration}: resume with the same settings")
    config.clear()
    config.put_all(configuration)
    function.open(context)  # registers the keyed states a restore fills
    operator.get_list_state(_POSITIONS)
    return context


def subtask_snapshot(context: RuntimeContext, positions: dict[str, int],
                     skipped: dict[str, dict[str, int]] | None = None) -> SubtaskSnapshot:
    """The synchronous half of a subtask's checkpoint, source ``positions`` stored first.

    ``skipped`` (split -> reason -> count): the records the source left out before those
    positions, stored beside them once there is one (or once a restore brought the state).
    """
    context.operator.get_list_state(_POSITIONS).update(sorted(positions.items()))
    counts = sorted((split, reason, count) for split, reasons in (skipped or {}).items()
                    for reason, count in reasons.items() if count)
    if counts or SKIPPED_RECORDS_STATE in context.operator.registered_state_names:
        context.operator.get_list_state(_SKIPPED).update(counts)
    return SubtaskSnapshot(context.subtask_index, context.keyed.snapshot(),
                           context.operator.snapshot())


class LocalJob:
    """One keyed operator with ``parallelism`` subtasks fed by ``source`` (see the module doc).

    ``key_selector`` extracts a record's key, of Java type ``key_type``; ``max_parallelism``
    defaults to Flink's rule. ``restore_from`` is ``None`` (a fresh start), ``"latest"`` or a
    checkpoint id; restoring needs the same parallelism and max parallelism (rescaling is a
    separate, offline step). Split ``j`` is read by subtask ``j % parallelism``.
    ``configuration`` (strings) is kept in broadcast state; a restore with a different one is
    refused, so a resumed job cannot silently apply other logic to the restored state.
    ``folder`` (with functions that are :class:`FoldingFunction`) folds runs of up to
    ``fold_records`` records per key (see the module doc); without it every record is
    processed on its own.
    """

    def __init__(
        self,
        *,
        uid: str,
        name: str,
        source: Source,
        key_selector: Callable[[Any], Any],
        key_type: str | TypeSerializer[Any],
        function_factory: Callable[[], ProcessFunction],
        storage: CheckpointStorage,
        parallelism: int = 1,
        max_parallelism: int | None = None,
        checkpoint_every: int | None = None,
        keep: int = 3,
        restore_from: int | str | None = None,
        map_kind: MapKind = "copy_on_write",
        clock: Clock = system_clock,
        configuration: dict[str, str] | None = None,
        folder: RecordFolder | None = None,
        fold_records: int = 1 << 22,
    ) -> None:
        self.max_parallelism = (compute_default_max_parallelism(parallelism)
                                if max_parallelism is None else max_parallelism)
        compute_key_group_range_for_operator_index(self.max_parallelism, parallelism, 0)
        if checkpoint_every is not None and checkpoint_every < 1:
            raise InvalidArgumentError("checkpoint_every must be at least 1")
        if keep < 1:
            raise InvalidArgumentError("keep must be at least 1 completed checkpoint")
        if fold_records < 1:
            raise InvalidArgumentError("fold_records must be at least 1")
        self.uid, self.name, self.parallelism = uid, name, parallelism
        self.source, self.storage = source, storage
        self.key_selector = key_selector
        self.key_serializer = resolve_type(key_type)
        self.checkpoint_every, self.keep = checkpoint_every, keep
        self.configuration = dict(configuration or {})
        self.folder, self.fold_records = folder, fold_records
        self._pending: list[PendingWrite] = []
        self._result = JobResult(0)
        self._processed = 0  # records of the current run()
        self._read = 0  # records the current run() read: processed ones and skipped ones
        # subtask index of every key group; key groups of recent keys (str/int: equal keys
        # have equal Java hashes), bounded
        self._operator_index = [
            compute_operator_index_for_key_group(self.max_parallelism, parallelism, kg)
            for kg in range(self.max_parallelism)]
        self._key_groups: dict[Any, int] = {}
        restored = self._checkpoint_to_restore(restore_from)
        self.restored_from = restored.checkpoint_id if restored else None
        self._next_id = 1 + max((c.checkpoint_id for c in storage.completed()), default=0)
        if restored is None:
            self._subtasks = [self._make_subtask(i, function_factory, map_kind, clock, None)
                              for i in range(parallelism)]
        else:
            with storage.reading(restored.checkpoint_id) as reader:
                self._subtasks = [self._make_subtask(i, function_factory, map_kind, clock,
                                                     reader) for i in range(parallelism)]

    # -- set-up and restore ---------------------------------------------------------------------

    def _checkpoint_to_restore(self, restore_from: int | str | None) -> CompletedCheckpoint | None:
        if restore_from is None:
            return None
        completed = self.storage.completed()
        if restore_from == "latest":
            if not completed:
                raise CheckpointError("there is no completed checkpoint to resume from")
            return max(completed, key=lambda c: c.checkpoint_id)
        for checkpoint in completed:
            if checkpoint.checkpoint_id == restore_from:
                return checkpoint
        raise CheckpointError(f"checkpoint {restore_from} is not a completed checkpoint "
                              f"(completed: {[c.checkpoint_id for c in completed]})")

    def _make_subtask(self, index: int, function_factory: Callable[[], ProcessFunction],
                      map_kind: MapKind, clock: Clock,
                      reader: RestoredCheckpoint | None) -> _Subtask:
        entries = reader.operator_entries(self.uid, index) if reader else []
        function = function_factory()
        context = open_subtask(index, self.parallelism, self.max_parallelism,
                               self.key_serializer, function, self.configuration,
                               entries=entries, restored=reader is not None,
                               map_kind=map_kind, clock=clock)
        if reader is not None:
            reader.restore_keyed(self.uid, context.keyed)
        positions = {split: 0 for j, split in enumerate(self.source.splits())
                     if j % self.parallelism == index}
        for split, position in context.operator.get_list_state(_POSITIONS).get():
            if split not in positions:
                raise CheckpointError(
                    f"the checkpoint has a position for input {split!r}, which this run does "
                    "not read (or not in the same order): resume with the inputs the "
                    "checkpoint was built from, in the same order, plus any new ones after them")
            positions[split] = position
        skipped: dict[str, dict[str, int]] = {}
        if SKIPPED_RECORDS_STATE in context.operator.registered_state_names:  # restored
            for split, reason, count in context.operator.get_list_state(_SKIPPED).get():
                if split not in positions:
                    raise CheckpointError(
                        f"the checkpoint counts records skipped in input {split!r}, which "
                        "this run does not read: resume with the inputs the checkpoint was "
                        "built from")
                skipped.setdefault(split, {})[reason] = count
        return _Subtask(context, function, positions, skipped)

    # -- processing -----------------------------------------------------------------------------

    @property
    def records_already_read(self) -> int:
        """Records before the current positions (what a restored job does not read again).

        Skipped records included (positions count every record of a split).
        """
        return sum(sum(s.positions.values()) for s in self._subtasks)

    @property
    def positions(self) -> dict[str, int]:
        """Every split's current position, in the order the job reads the splits."""
        return {split: position for s in self._subtasks
                for split, position in s.positions.items()}

    @property
    def skipped(self) -> dict[str, int]:
        """Records the source left out before the current positions, per reason (sorted).

        What the next checkpoint records: a restored job's counts include the ones its
        checkpoint brought.
        """
        totals: dict[str, int] = {}
        for s in self._subtasks:
            for reasons in s.skipped.values():
                for reason, count in reasons.items():
                    totals[reason] = totals.get(reason, 0) + count
        return dict(sorted(totals.items()))

    def run(self, limit: int | None = None,
            on_record: Callable[[int], None] | None = None) -> JobResult:
        """Process records (at most ``limit``) and wait for checkpoints still in flight.

        ``on_record(n)`` is called after the n-th record this run read (skipped records
        included), or once after the last record of a folded run of records (progress
        reporting). If processing fails (a checkpoint cannot even be started: its storage is
        gone), the checkpoints in flight are cancelled and waited for before the error
        propagates, so no writer of this job outlives it.
        """
        try:
            return self._run(limit, on_record)
        except KeyboardInterrupt:  # the user is waiting: stop the writers at once
            self.abort_pending(kill=True)
            raise
        except BaseException:
            self.abort_pending()
            raise

    def abort_pending(self, kill: bool = False) -> None:
        """Cancel the checkpoints in flight and wait until their writers have stopped.

        ``kill``: stop them at once (a writer process is killed) instead of letting each
        clean up at its next step; what a killed writer staged is removed all the same.
        """
        for pending in self._pending:
            if kill:
                pending.kill()
            else:
                pending.cancel()
        for pending in self._pending:
            try:
                pending.result()
            except Exception:  # noqa: BLE001 - cancelled or failed: nothing to keep
                pass
        self._pending = []

    def _run(self, limit: int | None,
             on_record: Callable[[int], None] | None) -> JobResult:
        self._processed = self._read = 0
        for owner in self._subtasks:
            for split in list(owner.positions):
                if self.folder is None:
                    stopped = self._run_records(owner, split, limit, on_record)
                else:
                    stopped = self._run_folded(owner, split, limit, on_record)
                if stopped:
                    self._wait_for_pending()
                    return self._result
        self._wait_for_pending()
        return self._result

    def _run_records(self, owner: _Subtask, split: str, limit: int | None,
                     on_record: Callable[[int], None] | None) -> bool:
        """Records of ``split`` one by one, until its end (False) or ``limit`` (True)."""
        for position, record in self.source.read(split, owner.positions[split]):
            if limit is not None and self._processed >= limit:
                return True
            if type(record) is SkippedRecord:
                owner.positions[split] = position  # with its count: one checkpoint has both
                self._count_skipped(owner, split, (record,))
                if on_record is not None:
                    on_record(self._read)
                continue
            self._process(record)
            owner.positions[split] = position
            self._processed += 1
            self._read += 1
            self._result.records += 1
            if on_record is not None:
                on_record(self._read)
            if self.checkpoint_every and self._processed % self.checkpoint_every == 0:
                self.trigger_checkpoint()
            if self._pending:
                self._collect_completed()
        return False

    def _run_folded(self, owner: _Subtask, split: str, limit: int | None,
                    on_record: Callable[[int], None] | None) -> bool:
        """Records of ``split`` in folded runs, until its end (False) or ``limit`` (True).

        A run ends at the next checkpoint trigger point and at ``limit``, so checkpoints are
        taken after the same records as one by one; a run the folder cannot fold is processed
        one by one.
        """
        assert self.folder is not None
        while True:
            count = self.fold_records
            if limit is not None:
                if self._processed >= limit:
                    return True
                count = min(count, limit - self._processed)
            if self.checkpoint_every:
                count = min(count, self.checkpoint_every
                            - self._processed % self.checkpoint_every)
            position = owner.positions[split]
            folded = self.folder.fold(split, position, count)
            if folded is None:
                if not self._run_records(owner, split, self._processed + count, on_record):
                    return False  # the split ended
                continue
            if folded.end == position:
                return False
            self._apply_folded(folded)
            owner.positions[split] = folded.end
            records = folded.end - position - len(folded.skipped)
            self._count_skipped(owner, split, folded.skipped)
            self._processed += records
            self._read += records
            self._result.records += records
            if on_record is not None:
                on_record(self._read)
            if (records and self.checkpoint_every
                    and self._processed % self.checkpoint_every == 0):
                self.trigger_checkpoint()
            if self._pending:
                self._collect_completed()

    def _count_skipped(self, owner: _Subtask, split: str,
                       skipped: Sequence[SkippedRecord]) -> None:
        if not skipped:
            return
        counts = owner.skipped.setdefault(split, {})
        for record in skipped:
            counts[record.reason] = counts.get(record.reason, 0) + 1
        self._read += len(skipped)
        self._result.skipped += len(skipped)

    def _apply_folded(self, folded: FoldedRecords) -> None:
        subtasks, operator_index = self._subtasks, self._operator_index
        for key, key_group, value in zip(folded.keys, folded.key_groups, folded.folded,
                                         strict=True):
            subtask = subtasks[operator_index[key_group]]
            subtask.context.keyed.set_current_key(key, key_group)
            subtask.function.process_folded(value, subtask.context)  # type: ignore[attr-defined]

    def _process(self, record: Any) -> None:
        key = self.key_selector(record)
        key_group = self._key_groups.get(key) if type(key) in (str, int) else None
        if key_group is None:
            key_group = assign_to_key_group(key, self.max_parallelism, self.key_serializer)
            if type(key) in (str, int):
                if len(self._key_groups) >= _KEY_GROUP_CACHE:
                    self._key_groups.clear()
                self._key_groups[key] = key_group
        subtask = self._subtasks[self._operator_index[key_group]]
        subtask.context.keyed.set_current_key(key, key_group)
        subtask.function.process(record, subtask.context)

    @property
    def subtasks(self) -> list[RuntimeContext]:
        return [s.context for s in self._subtasks]

    # -- checkpoints ----------------------------------------------------------------------------

    def trigger_checkpoint(self, kind: CheckpointKind = CheckpointKind.CHECKPOINT) -> PendingWrite:
        """The synchronous half now; the storage writes the rest while processing goes on."""
        checkpoint_id = self.storage.claim(self._next_id)
        self._next_id = checkpoint_id + 1
        snapshots = [subtask_snapshot(s.context, s.positions, s.skipped)
                     for s in self._subtasks]
        pending = self.storage.begin(checkpoint_id, kind, [OperatorSnapshot(
            self.uid, self.name, self.parallelism, self.max_parallelism, snapshots)])
        self._pending.append(pending)
        return pending

    def complete_checkpoint(self, kind: CheckpointKind = CheckpointKind.CHECKPOINT) -> int:
        """Take a checkpoint (or savepoint) and wait until it is complete; returns its id."""
        try:
            pending = self.trigger_checkpoint(kind)
            self._wait_for_pending()
        except BaseException:
            self.abort_pending()
            raise
        if pending.checkpoint_id in self._result.failed:
            raise CheckpointError(f"{kind.value} {pending.checkpoint_id} failed: "
                                  f"{self._result.failed[pending.checkpoint_id]}")
        return pending.checkpoint_id

    def savepoint(self) -> int:
        """Take a savepoint (never released automatically) and wait until it is complete."""
        return self.complete_checkpoint(CheckpointKind.SAVEPOINT)

    def _collect_completed(self, wait: bool = False) -> None:
        still = []
        for pending in self._pending:
            if not (wait or pending.done()):
                still.append(pending)
                continue
            try:
                pending.result()
            except Exception as exc:  # a failed checkpoint does not stop the job
                self._result.failed[pending.checkpoint_id] = str(exc)
            else:
                self._result.completed.append(pending.checkpoint_id)
        changed = len(still) != len(self._pending)
        self._pending = still
        if changed:
            self._apply_retention()

    def _wait_for_pending(self) -> None:
        self._collect_completed(wait=True)

    def _apply_retention(self) -> None:
        checkpoints = sorted(c.checkpoint_id for c in self.storage.completed()
                             if c.kind is CheckpointKind.CHECKPOINT)
        for checkpoint_id in checkpoints[:-self.keep]:
            self.storage.discard(checkpoint_id)
