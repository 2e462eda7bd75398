"""Executing rescale plans on statectl checkpoints (local engine).

Three ways, chosen by :func:`rescale_checkpoint` (DESIGN "Rescale"):

* **metadata**: same max parallelism, no ``compact``: the plan's handles reference the old
  files' key-group rows and element ranges; the data files are hard-linked into the output
  (copied where links are impossible) and only ``_metadata.json`` is new. No record is read or
  rewritten, so the cost does not grow with the state's size. File sizes are checked; contents
  are not re-hashed (``statectl verify`` does that).
* **compact**: the same assignment, rewritten into one file per new subtask and state. Union
  state is written once per state and referenced whole by every subtask (an element range: no
  blow-up on disk).
* **rehash**: a max-parallelism change. Every key's new key group is computed (vectorised
  Java hashing, :mod:`formats.model.key_hash`), rows are sorted by it and the keyed files rewritten;
  TTL timestamps are kept. Operator state is unaffected by key groups and is linked as planned
  (or rewritten with ``compact``).

``drop_expired`` removes TTL-expired entries (list and map elements one by one, Flink's rule
``ts + ttl <= now``, reference §9.2) and implies a rewrite. The source is never modified; the
output is published atomically like any checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from formats.model.checkpoint import Checkpoint, rehash_refused
from formats.model.columns import keyed_schema, operator_schema
from formats.model.key_hash import key_groups
from formats.ops.ttl_given import state_label, unknown_ttls
from formats.statectl.publish import publish
from formats.statectl.reader import StatectlCheckpoint
from formats.statectl.writer import ParquetFileWriter, link_file, link_files
from formats.storage.commit import staged
from formats.storage.filesystems import resolve_filesystem, storage_errors
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorMetadata,
    OperatorStateHandle,
    StateMetadata,
    SubtaskMetadata,
)
from statecore.errors import (
    CheckpointError,
    CorruptCheckpointError,
    InvalidArgumentError,
    ParallelismError,
    UnsupportedFormatError,
)
from statecore.key_groups import UPPER_BOUND_MAX_PARALLELISM
from statecore.operator_backend import OperatorStateMode
from statecore.rescale_plan import OperatorPlan, RescalePlan, plan_rescale, rescale_targets
from statecore.ttl import LONG_MAX
from statecore.wording import counted

__all__ = ["KeyedJob", "KeyedOutput", "KeyedWriter", "RehashCounter", "RehashTask",
           "RescaleResult", "check_source", "check_target", "count_new_key_groups",
           "plan_checkpoint", "prepare_rows", "refuse_lost_values", "rescale_checkpoint",
           "write_keyed_locally", "write_sorted"]


Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RescaleResult:
    """What a rescale wrote."""

    location: str
    mode: str  # metadata | compact | rehash
    metadata: CheckpointMetadata
    files_linked: int  # hard links (the local disk)
    files_written: int
    entries_written: int
    entries_dropped: int
    seconds: float
    files_copied: int = 0  # copies: by the server within an object store, else streamed
    #: a Flink savepoint's target release (``WrittenSnapshot.release``), ``None`` for ours
    release: dict[str, Any] | None = None
    release_text: str = ""


def check_source(checkpoint: Checkpoint) -> StatectlCheckpoint:
    """Refuse to rewrite a snapshot statectl can read but not write (a Flink one: plans only)."""
    if not isinstance(checkpoint, StatectlCheckpoint):
        raise UnsupportedFormatError(
            f"statectl reads {checkpoint.format_name.capitalize()} snapshots but does not "
            f"write them: use --plan to see what Flink does when it restores this one at the new "
            f"parallelism, or `statectl export` for its contents")
    return checkpoint


def check_target(location: str) -> None:
    """Refuse an output location that exists (checked again when the output is published)."""
    fs, path = resolve_filesystem(location, None)
    with storage_errors("writing", location):
        exists = fs.get_file_info(path).type != pafs.FileType.NotFound
    if exists:
        raise CheckpointError(f"{location} already exists; a checkpoint is never overwritten")


#: One handle whose keys a max-parallelism change re-hashes: (operator, subtask, handle).
RehashTask = tuple[OperatorMetadata, int, KeyedStateHandle]
#: Counts the new key groups of each task's keys: one ``bincount`` (length M) per task.
RehashCounter = Callable[[Checkpoint, Sequence[RehashTask], int], list[np.ndarray[Any, Any]]]


def count_new_key_groups(checkpoint: Checkpoint, tasks: Sequence[RehashTask],
                         max_parallelism: int) -> list[np.ndarray[Any, Any]]:
    """The local engine's :data:`RehashCounter`: each handle's keys read and hashed here."""
    out = []
    for op, _, handle in tasks:
        assert op.key_type is not None
        groups = checkpoint.new_key_groups(op, handle, max_parallelism)
        out.append(np.bincount(groups, minlength=max_parallelism))
    return out


def plan_checkpoint(checkpoint: Checkpoint, parallelism: int,
                    max_parallelism: int | None = None,
                    counter: RehashCounter | None = None,
                    operator_parallelism: Mapping[str, int] | None = None) -> RescalePlan:
    """The plan for ``checkpoint``; a max-parallelism change reads the keys to count entries.

    ``counter`` hashes the keys (default :func:`count_new_key_groups`; Spark's runs in tasks).
    ``operator_parallelism``: a parallelism of its own per operator (by model uid); which
    operators keep theirs: :func:`statecore.rescale_plan.rescale_targets`. Within one max
    parallelism a Flink snapshot's plan is what Flink does on restore; Flink refuses to
    restore keyed state at another max parallelism (reference §3), so a plan that changes it
    is statectl's rewrite, which writes a savepoint Flink restores.
    """
    if max_parallelism is not None and not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ParallelismError(  # before reading any key
            f"--max-parallelism {max_parallelism}: Flink's max parallelism is between 1 and "
            f"{UPPER_BOUND_MAX_PARALLELISM} (KeyGroupRangeAssignment)")

    def rehashable(op: OperatorMetadata) -> bool:
        return op.key_type is None or not checkpoint.unknown_key_hash(op)

    operators = checkpoint.metadata.operators
    targets = rescale_targets(checkpoint.metadata, parallelism, max_parallelism,
                              operator_parallelism, rehashable=rehashable)
    # the operators whose keys move to new key groups (a kept operator keeps its own)
    moving = [op for op in operators if op.key_type is not None
              and targets[op.uid].max_parallelism != op.max_parallelism]
    for op in moving:
        reason = checkpoint.unknown_key_hash(op)
        if reason:
            raise rehash_refused(op, targets[op.uid].max_parallelism, reason)
    rehashed: dict[tuple[str, str], dict[tuple[int, int], int]] = {}
    if max_parallelism is not None:
        tasks: list[tuple[str, RehashTask]] = [
            (state.name, (op, st.index, handle))
            for op in moving
            for state in op.states if state.scope == "keyed"
            for st in op.subtasks for handle in st.keyed if handle.state == state.name]
        for op in moving:
            for state in (s for s in op.states if s.scope == "keyed"):
                rehashed[(op.uid, state.name)] = {}
        found = (counter or count_new_key_groups)(checkpoint, [t for _, t in tasks],
                                                  max_parallelism)
        for (state_name, (op, subtask, _)), counts in zip(tasks, found, strict=True):
            target = rehashed[(op.uid, state_name)]
            for group in np.flatnonzero(counts):
                key = (subtask, int(group))
                target[key] = target.get(key, 0) + int(counts[group])
    plan = plan_rescale(checkpoint.metadata, parallelism, max_parallelism, rehashed=rehashed,
                        operator_parallelism=operator_parallelism, rehashable=rehashable)
    stored = {f.path: checkpoint.stored_names(f.path) for f in checkpoint.metadata.files}
    return replace(plan, stored_names={k: v for k, v in stored.items() if v != (k,)},
                   downloads=_downloads(checkpoint, plan))


def _downloads(checkpoint: Checkpoint, plan: RescalePlan
               ) -> dict[tuple[str, int], tuple[tuple[str, int], ...]]:
    """Flink's rule for incremental handles on restore (``RocksDBIncrementalRestoreOperation``).

    A new subtask downloads every handle whose key-group range intersects its own.
    """
    out: dict[tuple[str, int], tuple[tuple[str, int], ...]] = {}
    for op in plan.operators:
        units = checkpoint.download_units(op.uid)
        if not units:
            continue
        for sub in op.subtasks:
            kg = sub.key_group_range
            if kg is None:
                continue
            files = [f for unit in units if len(unit.key_group_range.intersection(kg))
                     for f in unit.files]
            out[(op.uid, sub.index)] = tuple(files)
    return out


def _new_key_groups(table: pa.Table, key_type: str, max_parallelism: int) -> np.ndarray[Any, Any]:
    try:
        return key_groups(table.column("key"), key_type, max_parallelism)
    except InvalidArgumentError as exc:
        raise CorruptCheckpointError(f"a stored key cannot be hashed: {exc}") from exc


def rescale_checkpoint(
    checkpoint: Checkpoint, location: str, plan: RescalePlan, *, compact: bool = False,
    drop_expired: bool = False, now: int | None = None, checkpoint_id: int | None = None,
    kind: CheckpointKind | None = None, progress: Progress | None = None,
    keyed_writer: KeyedWriter | None = None, flink_version: str | None = None,
) -> RescaleResult:
    """Write ``checkpoint`` rescaled as ``plan`` says to a new checkpoint at ``location``.

    ``plan`` must come from :func:`plan_checkpoint` on the same checkpoint. ``location`` must
    not exist. ``now`` (epoch ms, default: the current time) decides expiry for
    ``drop_expired``. ``progress(done, total)`` is called per file or state written.
    ``keyed_writer`` rewrites one keyed state (default :func:`write_keyed_locally`; the Spark
    engine passes its own): metadata, operator state and publishing stay here.
    ``flink_version``: the Flink release a Flink snapshot's savepoint is written for ("1.20";
    default: the source's, :mod:`formats.flink.write.versions`); statectl's own output has none.
    """
    started = time.perf_counter()
    if not isinstance(checkpoint, StatectlCheckpoint):
        return _rewrite_in_own_format(checkpoint, location, plan, started, drop_expired,
                                      checkpoint_id, flink_version, now)
    if flink_version is not None:
        raise InvalidArgumentError(
            "--flink-version: rescaling a statectl checkpoint writes statectl's format; "
            "`statectl convert --to flink --flink-version X.Y` writes a Flink savepoint")
    source = checkpoint.metadata
    if len(plan.operators) != len(source.operators) or any(
            p.uid != op.uid for p, op in zip(plan.operators, source.operators, strict=True)):
        raise InvalidArgumentError("the plan was made for another checkpoint")
    rewrite = compact or drop_expired or plan.rehash
    mode = "rehash" if plan.rehash else "compact" if rewrite else "metadata"
    now_ms = int(time.time() * 1000) if now is None else now
    fs, final = resolve_filesystem(location, None)
    stats = _Stats()
    report = progress or (lambda done, total: None)
    with staged(fs, final, location, "writing rescaled checkpoint") as staging:
        created = int(time.time() * 1000)
        new_id = source.checkpoint_id if checkpoint_id is None else checkpoint_id
        new_kind = source.kind if kind is None else kind
        if not rewrite:
            metadata = plan.metadata(source, new_id, new_kind, created)
            linked = link_files(checkpoint, [info.path for info in metadata.files], fs,
                                staging, report, check_size=True)
            stats.linked += linked
            stats.copied += len(metadata.files) - linked
        else:
            operators = []
            files: list[FileInfo] = []
            steps = sum(len(op.states) for op in source.operators) or 1
            for index, (op_plan, op) in enumerate(zip(plan.operators, source.operators,
                                                      strict=True)):
                writer = _OperatorRewriter(checkpoint, fs, staging, index, op, op_plan, files,
                                           stats, compact, drop_expired, now_ms,
                                           keyed_writer or write_keyed_locally)
                operators.append(writer.run(lambda: report(stats.steps, steps)))
            metadata = CheckpointMetadata(new_id, new_kind, created, tuple(operators),
                                          tuple(files))
        publish(fs, staging, final, metadata)
    return RescaleResult(location, mode, metadata, stats.linked,
                         stats.written, stats.entries, stats.dropped,
                         time.perf_counter() - started, stats.copied)


def _rewrite_in_own_format(checkpoint: Checkpoint, location: str, plan: RescalePlan,
                           started: float, drop_expired: bool,
                           checkpoint_id: int | None,
                           flink_version: str | None = None,
                           now: int | None = None) -> RescaleResult:
    """A source of another format writes its own kind of output.

    A Flink snapshot writes a canonical savepoint (:meth:`formats.model.checkpoint.Checkpoint.
    write_rescaled`).
    """
    unknown = [state_label(op, s) for op, s in unknown_ttls(checkpoint)]
    if drop_expired and unknown:
        raise UnsupportedFormatError(
            f"--drop-expired: a {checkpoint.format_name.capitalize()} snapshot does not record "
            f"its states' TTL ({', '.join(unknown)}), so statectl cannot tell what expired; "
            f"give each with --ttl {unknown[0]}=DURATION")
    refuse_lost_values(checkpoint, restores_itself=not plan.rehash and flink_version is None
                       and not drop_expired)
    written = checkpoint.write_rescaled(
        plan, location, checkpoint_id=checkpoint_id, flink_version=flink_version,
        drop_expired_at=(int(time.time() * 1000) if now is None else now) if drop_expired
        else None)
    source = checkpoint.metadata
    operators = tuple(replace(op, parallelism=p.new_parallelism,
                              max_parallelism=p.new_max_parallelism, subtasks=())
                      for op, p in zip(source.operators, plan.operators, strict=True))
    metadata = CheckpointMetadata(source.checkpoint_id if checkpoint_id is None
                                  else checkpoint_id, CheckpointKind.SAVEPOINT,
                                  int(time.time() * 1000), operators, ())
    return RescaleResult(location, "rehash" if plan.rehash else "compact", metadata, 0,
                         written.files, written.entries, written.dropped,
                         time.perf_counter() - started,
                         release=written.release, release_text=written.release_text)


def refuse_lost_values(checkpoint: Checkpoint, *, restores_itself: bool = False) -> None:
    """Refuse to write a savepoint that would lose values statectl could not read.

    Values kept as undecodable markers (a format that delimits them: a canonical savepoint,
    RocksDB) are written back as their bytes; values a reader had to leave out (a heap
    snapshot's block past an undecodable value, pairs whose key could not be read, a keyed
    stream that could not be read at all) would be lost. The message says what the user can
    do, and only what applies:

    * ``restores_itself`` (a rescale that keeps every max parallelism, for the source's Flink
      release): Flink rescales the snapshot itself when a job starts from it;
    * a Flink checkpoint (never in the canonical format) whose lost values are in key groups
      of a heap stream (an operator without RocksDB files), not lost for their keys: a
      canonical savepoint of the job delimits every value and can be rewritten.
    """
    lost = [p for p in checkpoint.undecodable_parts() if not p.kept]
    if not lost:
        return
    first = lost[0]
    advice = []
    if restores_itself:
        advice.append("Flink rescales this snapshot itself when a job starts from it (its max "
                      "parallelism stays)")
    rocksdb = {op.uid for op in checkpoint.metadata.operators
               if checkpoint.download_units(op.uid)}
    if checkpoint.metadata.kind is CheckpointKind.CHECKPOINT and any(
            p.key_group is not None and not p.reason.startswith(_KEYS_LOST)
            and p.operator not in rocksdb for p in lost):
        advice.append("a canonical savepoint of the job (flink savepoint --type canonical) "
                      "delimits every value, so statectl can rewrite it")
    raise UnsupportedFormatError(
        f"cannot write a savepoint of this snapshot: state {first.state!r} of operator "
        f"{first.operator} has values statectl could not read ({first.reason}), which the "
        f"savepoint would lose ({counted(len(lost), 'such part')})"
        + "".join(f"; {a}" for a in advice))


#: How a heap stream's losses begin when its keys, not its values, could not be read
#: (:mod:`formats.flink.read.keyed`): a canonical savepoint holds the same keys.
_KEYS_LOST = ("no decoder for its keys", "its key")


@dataclass
class _Stats:
    linked: int = 0
    copied: int = 0
    written: int = 0
    entries: int = 0
    dropped: int = 0
    steps: int = 0


@dataclass(frozen=True)
class KeyedJob:
    """One keyed state of one operator to rewrite into ``staging`` (on ``fs``) as ``plan`` says."""

    checkpoint: Checkpoint
    fs: pafs.FileSystem
    staging: str
    op_index: int
    op: OperatorMetadata
    state_index: int
    state: StateMetadata
    plan: OperatorPlan
    drop_expired: bool
    now: int

    def file(self, subtask: int, part: str = "") -> str:
        """The relative path of a new file of this state for ``subtask``."""
        return f"op-{self.op_index}/keyed/{self.state_index}/{subtask}{part}.parquet"


@dataclass(frozen=True)
class KeyedOutput:
    """What a keyed rewrite wrote: handles per new subtask (in index order) and files."""

    handles: tuple[tuple[KeyedStateHandle, ...], ...]
    files: tuple[FileInfo, ...]
    entries: int
    dropped: int


KeyedWriter = Callable[[KeyedJob], KeyedOutput]


def prepare_rows(table: pa.Table, job: KeyedJob) -> tuple[pa.Table, np.ndarray[Any, Any], int]:
    """A handle's rows as the new checkpoint stores them, their key groups, entries dropped.

    Expired entries are dropped (with ``drop_expired``) and key groups recomputed (a
    max-parallelism change); rows are not reordered.
    """
    state, dropped = job.state, 0
    if job.drop_expired and state.ttl is not None and state.ttl > 0:
        before = table.num_rows
        table = drop_expired_rows(table, state, job.now)
        dropped = before - table.num_rows
    if job.plan.rehash:
        assert job.op.key_type is not None
        groups = _new_key_groups(table, job.op.key_type, job.plan.new_max_parallelism)
        table = table.set_column(0, table.schema.field("key_group"),
                                 pa.array(groups, pa.int32()))
    else:
        groups = np.asarray(table.column("key_group").to_numpy(), dtype=np.int32)
    return table, groups, dropped


def write_sorted(job: KeyedJob, fs: pafs.FileSystem, relative: str, table: pa.Table,
                 groups: np.ndarray[Any, Any]) -> tuple[FileInfo, tuple[KeyGroupRows, ...]]:
    """Write rows sorted by key group as one data file; its info and per-key-group rows."""
    assert job.op.key_type is not None
    writer = ParquetFileWriter(fs, job.staging, relative, keyed_schema(job.state, job.op.key_type))
    try:
        rows = _write_by_key_group(writer, table, groups)
    except BaseException:
        writer.abandon()
        raise
    return writer.close(), rows


def write_keyed_locally(job: KeyedJob) -> KeyedOutput:
    """The local engine: every handle read, sorted by key group, one file per new subtask."""
    assert job.op.key_type is not None
    schema = keyed_schema(job.state, job.op.key_type)
    pieces = [prepare_rows(job.checkpoint.keyed_table(job.op.uid, h), job)
              for st in sorted(job.op.subtasks, key=lambda s: s.index)
              for h in st.keyed if h.state == job.state.name]
    table = pa.concat_tables([t for t, _, _ in pieces]) if pieces else schema.empty_table()
    groups = (np.concatenate([g for _, g, _ in pieces]) if pieces
              else np.zeros(0, dtype=np.int32))
    order = np.argsort(groups, kind="stable")
    table, groups = table.take(pa.array(order)), groups[order]
    handles, files = [], []
    for sub in job.plan.subtasks:
        kg = sub.key_group_range
        assert kg is not None
        lo, hi = np.searchsorted(groups, [kg.start, kg.end + 1])
        relative = job.file(sub.index)
        info, rows = write_sorted(job, job.fs, relative, table.slice(lo, hi - lo),
                                  groups[lo:hi])
        files.append(info)
        handles.append((KeyedStateHandle(job.state.name, relative, kg, rows),))
    return KeyedOutput(tuple(handles), tuple(files), int(table.num_rows),
                       sum(d for _, _, d in pieces))


class _OperatorRewriter:
    """Rewrites one operator's files for a compact, rehash or drop-expired rescale."""

    def __init__(self, checkpoint: StatectlCheckpoint, fs: pafs.FileSystem, staging: str,
                 index: int, op: OperatorMetadata, plan: OperatorPlan, files: list[FileInfo],
                 stats: _Stats, compact: bool, drop_expired: bool, now: int,
                 keyed_writer: KeyedWriter) -> None:
        self.checkpoint, self.fs, self.staging = checkpoint, fs, staging
        self.index, self.op = index, op
        self.plan, self.files, self.stats = plan, files, stats
        self.compact, self.drop_expired, self.now = compact, drop_expired, now
        self.keyed_writer = keyed_writer
        self.linked: set[str] = set()

    def run(self, step: Callable[[], None]) -> OperatorMetadata:
        p = self.plan.new_parallelism
        keyed: list[list[KeyedStateHandle]] = [[] for _ in range(p)]
        operator: list[list[OperatorStateHandle]] = [[] for _ in range(p)]
        for state_index, state in enumerate(self.op.states):
            if state.scope == "keyed":
                for i, new in enumerate(self._keyed(state_index, state)):
                    keyed[i].extend(new)
            elif self.compact:
                for i, handles in enumerate(self._operator(state_index, state)):
                    operator[i].extend(handles)
            self.stats.steps += 1
            step()
        if not self.compact:  # operator state: the planned ranges of the linked old files
            for i, sub in enumerate(self.plan.subtasks):
                for op_handle in sub.operator:
                    self._link(op_handle.file)
                    operator[i].append(op_handle)
        subtasks = tuple(SubtaskMetadata(s.index, s.key_group_range, tuple(keyed[s.index]),
                                         tuple(operator[s.index])) for s in self.plan.subtasks)
        return OperatorMetadata(self.op.uid, self.op.name, p, self.plan.new_max_parallelism,
                                self.op.key_type, self.op.states, subtasks)

    def _link(self, relative: str) -> None:
        if relative not in self.linked:
            self.linked.add(relative)
            info = next(f for f in self.checkpoint.metadata.files if f.path == relative)
            self.checkpoint.check_size(relative)
            if link_file(self.checkpoint, relative, self.fs, self.staging):
                self.stats.linked += 1
            else:
                self.stats.copied += 1
            self.files.append(info)

    def _keyed(self, state_index: int, state: StateMetadata) -> list[list[KeyedStateHandle]]:
        out = self.keyed_writer(KeyedJob(self.checkpoint, self.fs, self.staging, self.index,
                                         self.op, state_index, state, self.plan,
                                         self.drop_expired, self.now))
        self.files.extend(out.files)
        self.stats.written += len(out.files)
        self.stats.entries += out.entries
        self.stats.dropped += out.dropped
        return [list(h) for h in out.handles]

    def _operator(self, state_index: int, state: StateMetadata) -> list[list[OperatorStateHandle]]:
        schema = operator_schema(state)
        mode = _MODES[state.kind]
        out: list[list[OperatorStateHandle]] = [[] for _ in self.plan.subtasks]
        if mode is OperatorStateMode.UNION:  # every subtask gets all of it: write it once
            first = self.plan.subtasks[0]
            relative = f"op-{self.index}/operator/{state_index}/union.parquet"
            count = sum(self._write_elements(
                relative, schema, [h for h in first.operator if h.state == state.name]))
            for i in range(len(out)):
                out[i].append(OperatorStateHandle(state.name, mode, relative, 0, count))
            return out
        for sub in self.plan.subtasks:
            relative = f"op-{self.index}/operator/{state_index}/{sub.index}.parquet"
            sources = [h for h in sub.operator if h.state == state.name]
            counts = self._write_elements(relative, schema, sources)
            if mode is OperatorStateMode.BROADCAST:
                # each copy stays a copy of its own (a range of the new file), as planned
                offset = 0
                for count in counts:
                    out[sub.index].append(OperatorStateHandle(state.name, mode, relative,
                                                              offset, count))
                    offset += count
            else:  # split list: the subtask's chunks are one list
                out[sub.index].append(OperatorStateHandle(state.name, mode, relative, 0,
                                                          sum(counts)))
        return out

    def _write_elements(self, relative: str, schema: pa.Schema,
                        handles: Sequence[OperatorStateHandle]) -> list[int]:
        """Write the handles' elements one after another into one file; their counts."""
        writer = ParquetFileWriter(self.fs, self.staging, relative, schema)
        counts = []
        try:
            for h in handles:
                table = self.checkpoint.rows_table(h.file, schema, h.first_element,
                                                   h.element_count)
                writer.write_table(table)
                counts.append(table.num_rows)
        except BaseException:
            writer.abandon()
            raise
        self.files.append(writer.close())
        self.stats.written += 1
        return counts


_MODES = {"split": OperatorStateMode.SPLIT_DISTRIBUTE, "union": OperatorStateMode.UNION,
          "broadcast": OperatorStateMode.BROADCAST}


def _write_by_key_group(writer: ParquetFileWriter, table: pa.Table,
                        groups: np.ndarray[Any, Any]) -> tuple[KeyGroupRows, ...]:
    """Write rows sorted by key group, key group by key group (row groups: see write_table)."""
    if table.num_rows == 0:
        return ()
    values, starts, counts = np.unique(groups, return_index=True, return_counts=True)
    rows = tuple(KeyGroupRows(int(g), int(s), int(c))
                 for g, s, c in zip(values, starts, counts, strict=True))
    for r in rows:
        writer.write_table(table.slice(r.first_row, r.row_count))
    return rows


def _alive(timestamps: np.ndarray[Any, Any], ttl: int, now: int) -> np.ndarray[Any, Any]:
    """Not ``TtlUtils.expired`` (reference §9.2), vectorised without overflowing a long."""
    ts = timestamps.astype(np.int64)
    with np.errstate(over="ignore"):
        headroom = np.where(ts > 0, np.minimum(ttl, LONG_MAX - np.maximum(ts, 0)), ttl)
        return ~((ts + headroom) <= now)


def drop_expired_rows(table: pa.Table, state: StateMetadata, now: int) -> pa.Table:
    """``table`` (a keyed state's rows) without its TTL-expired entries.

    Value-like states lose expired rows; list and map states lose expired elements and then
    the rows left empty, as Flink's full-snapshot cleanup does (reference §9.5).
    """
    assert state.ttl is not None and state.ttl > 0, "expiry needs the TTL"
    ttl_column = table.column("ttl_timestamp").combine_chunks()
    value_column = table.column("value").combine_chunks()
    if state.kind not in ("list", "map"):
        if ttl_column.null_count:
            raise CorruptCheckpointError(f"state {state.name!r}: a ttl timestamp is missing")
        keep = _alive(ttl_column.to_numpy(zero_copy_only=False), state.ttl, now)
        return table.filter(pa.array(keep))
    if ttl_column.null_count != value_column.null_count:
        raise CorruptCheckpointError(f"state {state.name!r}: values and ttl timestamps differ")
    value_column = value_column.fill_null([]) if state.kind == "list" else value_column
    lengths = _lengths(value_column)
    if not np.array_equal(lengths, _lengths(ttl_column)):
        raise CorruptCheckpointError(
            f"state {state.name!r}: values and ttl timestamps do not match")
    if state.kind == "list":
        stamps = ttl_column.flatten()
        elements = value_column.flatten()
    else:
        if not _flat(ttl_column, "keys").equals(_flat(value_column, "keys")):
            raise CorruptCheckpointError(
                f"state {state.name!r}: map keys of values and ttl timestamps differ")
        stamps = _flat(ttl_column, "items")
        elements = None
    keep = _alive(stamps.to_numpy(zero_copy_only=False), state.ttl, now)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    kept_per_row = np.bincount(owner[keep], minlength=len(lengths))
    offsets = pa.array(np.concatenate([[0], np.cumsum(kept_per_row)]).astype(np.int32))
    mask = pa.array(keep)
    if state.kind == "list":
        assert elements is not None
        values = pa.ListArray.from_arrays(offsets, elements.filter(mask),
                                          type=value_column.type)
        stamps_out = pa.ListArray.from_arrays(offsets, stamps.filter(mask), type=ttl_column.type)
    else:
        keys = _flat(value_column, "keys").filter(mask)
        values = pa.MapArray.from_arrays(offsets, keys, _flat(value_column, "items").filter(mask),
                                         type=value_column.type)
        stamps_out = pa.MapArray.from_arrays(offsets, keys, stamps.filter(mask),
                                             type=ttl_column.type)
    names = table.column_names
    table = table.set_column(names.index("value"), table.schema.field("value"), values)
    table = table.set_column(names.index("ttl_timestamp"), table.schema.field("ttl_timestamp"),
                             stamps_out)
    return table.filter(pa.array(kept_per_row > 0))


def _lengths(column: pa.Array) -> np.ndarray[Any, Any]:
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return np.diff(offsets)


def _flat(column: pa.Array, part: str) -> pa.Array:
    """A map column's ``keys`` or ``items`` for its rows only (those ignore slicing)."""
    offsets = column.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return getattr(column, part).slice(start, end - start)
