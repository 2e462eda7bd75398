"""``statectl verify``: check a checkpoint thoroughly and list every problem found.

Unlike opening a checkpoint (which stops at the first inconsistency it must refuse), verify
keeps going and reports each problem with a kind, so scripts can gate on it. Kinds:

* ``metadata``: the metadata file (``_metadata.json``, a Flink snapshot's ``_metadata``) is
  unreadable or invalid (nothing else can be checked);
* ``unsafe-path``: a file path leads out of the checkpoint directory (symlink);
* ``missing-file``, ``size``, ``checksum``: a data file is absent, has another byte size, or
  its SHA-256 differs from the metadata;
* ``unreadable``: a data file is not valid Parquet, or its columns are not the declared ones;
* ``key-group-ranges``: the subtasks' key-group ranges do not cover ``[0, max parallelism)``
  exactly once (Flink's ``computeKeyGroupRangeForOperatorIndex`` ranges are one such cover);
* ``handle-range``: a keyed handle holds key groups outside its subtask's range;
* ``overlap``: a key group of one state is stored by two handles;
* ``offsets``: the rows the metadata gives for a key group are not that key group's rows
  (beyond the file, or the ``key_group`` column disagrees), or an element range is beyond
  its file;
* ``key-placement``: a key is stored in another key group than its Java hash gives
  (reference §1.2: ``murmurHash(key.hashCode()) % maxParallelism``);
* ``duplicate-key``: a (key, namespace) appears twice in one state;
* ``unreadable`` also for a state of a Flink snapshot that cannot be read (a truncated or
  corrupt file); a Flink file that is missing or has another size than ``_metadata`` says is
  ``missing-file`` or ``size``, named by its path in the snapshot directory;
* ``undecodable``: a state (or a subtask's state stream) of a Flink snapshot that statectl
  could not read completely because it has no decoder for its serializers: the bytes are
  intact, but what they hold was not checked. One problem per state, with the entries not
  decoded where the format counts them; a checkpoint is clean only when every state was read
  (:attr:`VerifyReport.not_read`).

Warnings are listed apart and do not make a checkpoint unclean (nor ``verify`` exit with 1):
they say what could not be checked, or what the job did that Flink allows but a rescale may
not keep, not that the checkpoint is damaged. Kinds:

* ``key-hash-unknown``: an operator's keys have no Java ``hashCode`` statectl can compute (a
  POJO's is user code, an enum's ``Object.hashCode`` is identity-based), so whether each key
  is in its key group was not checked (one warning per operator);
* ``broadcast-copies``: the subtasks' copies of a broadcast state differ. Flink keeps one copy
  per subtask and expects them equal (the job's contract, not checked by Flink); on a rescale
  each new subtask restores one of them (``RoundRobinOperatorStateRepartitioner``), so which
  content survives depends on the parallelism. A warning: the snapshot itself is intact.
* ``trailing-bytes``: bytes after the end of a Flink ``_metadata`` (its checkpoint
  properties), which Flink's loader leaves unread;
* ``unchecked``: the coordinator state of a source statectl does not know (its envelope was
  checked, not the enumerator's checkpoint inside).

A Flink checkpoint or savepoint gets the same checks on its decoded state (its files are read
and decoded completely when it is opened; it has no checksums to compare), and every byte of
its ``_metadata`` is parsed as Flink reads it: master states and operator states when opening,
the checkpoint properties and the source coordinators' states here
(:mod:`formats.flink.read.metadata_check`); what Flink would refuse is a ``metadata`` problem
(``unreadable`` for a coordinator's state).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from formats.model.arrow_types import pyrows
from formats.model.checkpoint import Checkpoint
from formats.model.columns import operator_schema
from formats.model.operator_names import OperatorNames
from formats.open import metadata_file_of, open_checkpoint
from formats.ops.diff import canonical
from formats.ops.key_group_runs import keyed_runs
from statecore.checkpoint import KeyedStateHandle, OperatorIdentity, OperatorMetadata
from statecore.errors import (
    CheckpointError,
    CorruptCheckpointError,
    StatectlError,
    UnsafePathError,
    UnsupportedFormatError,
)
from statecore.undecodable import summarize_parts

__all__ = ["PROBLEM_KINDS", "WARNING_KINDS", "Problem", "VerifyReport", "verify_checkpoint"]

PROBLEM_KINDS = ("metadata", "unsafe-path", "missing-file", "size", "checksum", "unreadable",
                 "key-group-ranges", "handle-range", "overlap", "offsets", "key-placement",
                 "duplicate-key", "undecodable")

#: Kinds of warnings (see the module doc): they do not make a checkpoint unclean.
WARNING_KINDS = ("key-hash-unknown", "broadcast-copies", "trailing-bytes", "unchecked")

#: Kinds that concern one stored file (``where`` is its path): what else fails because of it is
#: not reported again.
FILE_KINDS = ("unsafe-path", "missing-file", "size")

#: At most this many problems of one kind are listed (all are counted).
MAX_LISTED = 100


@dataclass(frozen=True)
class Problem:
    """One problem: its kind (see the module doc), where, and what is wrong."""

    kind: str
    where: str
    message: str
    #: the operator it concerns (``None``: the checkpoint as a whole)
    operator: OperatorIdentity | None = None


@dataclass
class NotReadTotals:
    """What verify could not read, in all: states, entries, and other parts.

    ``states``: states not read completely; ``entries``: entries counted but not decoded
    (``None`` when some could not be counted); ``streams``: parts beyond states' (a subtask's
    keyed or operator state stream, a whole key group of a heap stream).
    """

    states: int = 0
    entries: int | None = 0
    streams: int = 0

    def __bool__(self) -> bool:
        return bool(self.states or self.streams)


@dataclass
class VerifyReport:
    """What verify checked and found."""

    location: str
    problems: list[Problem] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    files: int = 0
    bytes: int = 0
    entries: int = 0
    #: the operator being checked: problems added meanwhile concern it
    current: OperatorIdentity | None = None
    #: what could not be checked (see the module doc); they leave the checkpoint clean
    warnings: list[Problem] = field(default_factory=list)
    #: what statectl could not read (each is a problem too, of kind ``undecodable`` or
    #: ``unreadable``)
    not_read: NotReadTotals = field(default_factory=lambda: NotReadTotals())

    @property
    def clean(self) -> bool:
        """No problem found (warnings do not count)."""
        return not self.counts

    def add(self, kind: str, where: str, message: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= MAX_LISTED:
            self.problems.append(Problem(kind, where, message, self.current))

    def warn(self, kind: str, where: str, message: str) -> None:
        """A warning about the current operator, once per kind and place."""
        if not any(w.kind == kind and w.where == where for w in self.warnings):
            self.warnings.append(Problem(kind, where, message, self.current))

    def extend(self, later: VerifyReport) -> None:
        """What ``later`` found, as if it had been found here after what is here already.

        Checks run in another order than their findings are listed (a state's checks meet
        as its runs are read, what could not be decoded is known once all is read) record
        into reports of their own, extended here in the listed order.
        """
        listed = Counter(p.kind for p in self.problems)
        for problem in later.problems:
            if listed[problem.kind] < MAX_LISTED:
                listed[problem.kind] += 1
                self.problems.append(problem)
        self.counts.update(later.counts)
        for w in later.warnings:
            if not any(w.kind == x.kind and w.where == x.where for x in self.warnings):
                self.warnings.append(w)
        self.files += later.files
        self.bytes += later.bytes
        self.entries += later.entries


def verify_checkpoint(location: str, progress: Callable[[int, int], None] | None = None,
                      allow_pickle: bool = False, names: OperatorNames | None = None
                      ) -> VerifyReport:
    """Verify the checkpoint at ``location``; a directory that is no checkpoint raises.

    ``names``: uids for a Flink 1.x snapshot's operators (``open_checkpoint``), as problems
    name them.

    Raises :class:`CheckpointError` only when ``location`` holds no ``_metadata.json`` at all;
    every other problem is reported.
    """
    report = VerifyReport(location)
    try:
        # keyed state is decoded as it is read, run by run (issue 45); --allow-pickle decodes
        # every value at open (formats.engines.Engine.open_checkpoint decides alike)
        checkpoint = open_checkpoint(location, strict=False, allow_pickle=allow_pickle,
                                     partial=True, names=names, decode=allow_pickle)
    except (CorruptCheckpointError, UnsupportedFormatError, UnsafePathError) as exc:
        report.add("metadata", metadata_file_of(location), str(exc))
        return report
    except CheckpointError as exc:
        if "not a checkpoint" in str(exc) or "cannot read" in str(exc):
            raise
        report.add("metadata", metadata_file_of(location), str(exc))
        return report
    files = checkpoint.metadata.files
    bad_files: set[str] = set()
    for kind, where, message in [*checkpoint.open_problems(), *checkpoint.verify_findings()]:
        if kind in WARNING_KINDS:
            report.warn(kind, where, message)
            continue
        report.add(kind, where, message)
        if kind in FILE_KINDS:
            bad_files.add(where)
    found_at_open = set(bad_files)
    owners = {file: op.identity for op in checkpoint.metadata.operators
              for st in op.subtasks
              for file in [*(h.file for h in st.keyed), *(h.file for h in st.operator)]}
    in_files = VerifyReport(location)
    steps = len(files) + len(checkpoint.metadata.operators)
    for done, info in enumerate(files):
        in_files.files += 1
        in_files.bytes += info.size
        in_files.current = owners.get(info.path)  # a file shared by operators: one of them
        _check_file(checkpoint, info.path, in_files, bad_files)
        if progress is not None:
            progress(done + 1, steps)
    in_operators = []
    for done, op in enumerate(checkpoint.metadata.operators):
        of_op = VerifyReport(location, current=op.identity)
        _check_ranges(op, of_op)
        keyed = _check_keyed(checkpoint, op, bad_files)
        of_operator_state = VerifyReport(location, current=op.identity)
        _check_operator_state(checkpoint, op, of_operator_state, bad_files)
        in_operators += [of_op, *keyed, of_operator_state]
        if progress is not None:
            progress(len(files) + done + 1, steps)
    # what could not be decoded is known once every run was read; it is listed first
    _check_undecodable(checkpoint, report, found_at_open)
    for section in (in_files, *in_operators):
        section.current = None
        report.extend(section)
    return report


def _check_undecodable(checkpoint: Checkpoint, report: VerifyReport,
                       bad_files: set[str]) -> None:
    """What could not be read, one problem per state (and per other part), with counts.

    Damage is ``unreadable``; what statectl has no decoder for is ``undecodable`` (the bytes
    are intact, but unchecked). Damage whose reason is a file already reported (missing,
    another size) is not repeated. The totals are in :attr:`VerifyReport.not_read`.
    """
    identities = {op.uid: op.identity for op in checkpoint.metadata.operators}
    totals = report.not_read
    states: set[tuple[str, str]] = set()
    for group in summarize_parts(checkpoint.undecodable_parts()):
        reason = group.reason
        report.current = identities.get(group.operator)
        label = report.current.label if report.current is not None else group.label
        of_state = not (group.state.startswith("(") and group.state.endswith(")"))
        if of_state:
            if (group.operator, group.state) not in states:
                states.add((group.operator, group.state))
                totals.states += 1
        else:
            totals.streams += 1
        if totals.entries is not None:
            totals.entries = None if group.values < 0 else totals.entries + group.values
        if group.damaged and any(reason.startswith((f"{file} ", f"{file}:"))
                                 for file in bad_files):
            continue
        count = ("values" if group.values < 0
                 else f"{group.values:,} value{'s' if group.values != 1 else ''}")
        groups = f" in {group.key_groups} key group{'s' if group.key_groups != 1 else ''}" if (
            group.key_groups) else ""
        subtasks = ", ".join(map(str, group.subtasks))
        where = f"{label}/{group.state}"
        if not of_state:
            what = group.state.strip("()") + (f" of subtask {subtasks}" if subtasks else "")
            report.add("unreadable" if group.damaged else "undecodable", where,
                       f"{what} not read: {reason}")
        elif group.damaged:
            report.add("unreadable", where, f"{count}{groups} could not be read: {reason}")
        else:
            report.add("undecodable", where,
                       f"{count}{groups} not decoded (class {group.class_name}): {reason}")
    report.current = None


def _check_file(checkpoint: Checkpoint, relative: str, report: VerifyReport,
                bad: set[str]) -> None:
    problem = checkpoint.check_file(relative)
    if problem is not None:
        report.add(problem[0], relative, problem[1])
        bad.add(relative)


def _check_ranges(op: OperatorMetadata, report: VerifyReport) -> None:
    ranges = [(st.index, st.key_group_range) for st in op.subtasks
              if st.key_group_range is not None]
    if not ranges:
        if op.key_type is not None:
            report.add("key-group-ranges", f"operator {op.identity.label}",
                       "no subtask has key groups")
        return
    owners = np.zeros(op.max_parallelism, dtype=np.int64)
    for _, kg in ranges:
        owners[kg.start:kg.end + 1] += 1
    gaps = np.flatnonzero(owners == 0)
    doubles = np.flatnonzero(owners > 1)
    if gaps.size:
        report.add("key-group-ranges", f"operator {op.identity.label}",
                   f"{gaps.size} key groups of [0, {op.max_parallelism}) belong to no subtask "
                   f"(first: {int(gaps[0])})")
    if doubles.size:
        report.add("key-group-ranges", f"operator {op.identity.label}",
                   f"{doubles.size} key groups belong to two subtasks (first: "
                   f"{int(doubles[0])})")
    for st in op.subtasks:
        for h in st.keyed:
            own = st.key_group_range
            if own is None or not (own.start <= h.key_group_range.start
                                   and h.key_group_range.end <= own.end):
                report.add("handle-range", f"operator {op.identity.label}, subtask {st.index}",
                           f"handle of {h.state!r} in {h.file} holds key groups "
                           f"{h.key_group_range.start}-{h.key_group_range.end}, outside the "
                           f"subtask's " + ("none" if own is None
                                            else f"{own.start}-{own.end}"))


def _check_keyed(checkpoint: Checkpoint, op: OperatorMetadata, bad: set[str]
                 ) -> list[VerifyReport]:
    """Each keyed state of ``op`` checked, run of key groups by run (one report per state).

    A subtask's states are read side by side, run by run (:func:`keyed_runs`): the states of
    one stream are cut alike, so each run is decoded once, and memory holds a few runs.
    """
    states = [s for s in op.states if s.scope == "keyed"]
    checks = {s.name: _StateCheck(checkpoint, op, s.name) for s in states}
    for st in op.subtasks:
        reads = []
        for h in st.keyed:
            check = checks.get(h.state)
            if check is None or not check.begin(h, bad):
                continue
            reads.append((check, h, keyed_runs(checkpoint, op.uid, h)))
        for place in range(max((len(runs) for _, _, runs in reads), default=0)):
            for check, h, runs in reads:
                if place < len(runs):
                    check.run(h, *runs[place])
        for check, h, _ in reads:
            check.end(h)
    for check in checks.values():
        check.duplicates()
    return [checks[s.name].report for s in states]


class _StateCheck:
    """The checks of one keyed state, its handles read run by run.

    Rows per key group against the metadata (``offsets``), key groups stored twice
    (``overlap``), keys in the key group their hash gives (``key-placement``), and keys stored
    twice (``duplicate-key``) in bounded memory: two rows of one key share the key group its
    hash gives, so a key in its own key group (of one handle alone) has its duplicates in the
    same run; only the other rows' keys (misplaced, in a key group two handles hold, or of
    keys whose hash is unknown) are kept, and the runs of the key groups they belong to are
    read again to compare them.
    """

    def __init__(self, checkpoint: Checkpoint, op: OperatorMetadata, state: str) -> None:
        self.checkpoint, self.op, self.state = checkpoint, op, state
        self.report = VerifyReport(checkpoint.location, current=op.identity)
        self.where = f"operator {op.identity.label}, state {state}"
        self.seen: dict[int, str] = {}
        holders = np.zeros(op.max_parallelism, dtype=np.int64)
        for st in op.subtasks:
            for h in st.keyed:
                if h.state == state:
                    holders[h.key_group_range.start:h.key_group_range.end + 1] += 1
        #: key groups two handles may hold: their rows' duplicates may be in another run
        self.shared = np.flatnonzero(holders > 1)
        self.rows = 0  # rows read so far: where the next run's first row is among all
        self.runs: list[tuple[KeyedStateHandle, Callable[[], pa.Table], range | None, int]] = []
        self.found: dict[str, int] = {}  # a duplicate key (as listed) -> its first row
        self.strays: list[pa.Table] = []
        self.stray_groups: set[int] | None = set()  # None: every key group's
        # of the handle being read: a run could not be read (its entries are not counted),
        # misplaced keys, keys that cannot be hashed, entries
        self.failed, self.misplaced, self.unhashable, self.entries = False, 0, False, 0

    def _where(self, handle: KeyedStateHandle) -> str:
        return f"{self.where}, {handle.file}"

    def begin(self, handle: KeyedStateHandle, bad: set[str]) -> bool:
        """A handle's checks before its rows; whether its rows are read."""
        for r in handle.rows:
            self._overlap(handle, r.key_group)
        self.failed, self.misplaced, self.unhashable, self.entries = False, 0, False, 0
        return handle.file not in bad

    def _overlap(self, handle: KeyedStateHandle, key_group: int) -> None:
        if key_group in self.seen:
            self.report.add("overlap", self._where(handle),
                            f"key group {key_group} is also stored in {self.seen[key_group]}")
        self.seen[key_group] = handle.file

    def run(self, handle: KeyedStateHandle, key_groups: range | None,
            read: Callable[[], pa.Table]) -> None:
        """One run of ``handle``'s key groups (``None``: all of them) checked."""
        if self.failed:
            return
        report, where = self.report, self._where(handle)
        try:
            table = read()
        except CorruptCheckpointError as exc:
            kind = "offsets" if ("key group" in str(exc) or "beyond" in str(exc)) \
                else "unreadable"
            report.add(kind, where, str(exc))
            self.failed = True
            return
        stored = np.asarray(table.column("key_group").to_numpy(), dtype=np.int32)
        if not handle.rows:  # not counted at open: the key groups are known as read
            for key_group in np.unique(stored):
                self._overlap(handle, int(key_group))
        self.entries += table.num_rows
        if key_groups is not None:
            report.bytes += self.checkpoint.keyed_bytes_in(self.op.uid, handle,
                                                           key_groups) or 0
        expected = self._placement(handle, table, stored, key_groups, where)
        keys = _key_columns(table, self.rows)
        self.runs.append((handle, read, key_groups, self.rows))
        self.rows += table.num_rows
        home = self._home(handle, stored, expected)
        self._found(_duplicates(keys.filter(pa.array(home))))
        if not home.all():
            self.strays.append(keys.filter(pa.array(~home)))
            if expected is None or self.stray_groups is None:
                self.stray_groups = None
            else:
                self.stray_groups.update(int(g) for g in np.unique(expected[~home]))

    def _home(self, handle: KeyedStateHandle, stored: np.ndarray,
              expected: np.ndarray | None) -> np.ndarray:
        """Rows whose duplicates can only be in their own run.

        Those in the key group their hash gives, in their handle's range, which no other
        handle holds.
        """
        if expected is None:
            return np.zeros(len(stored), dtype=bool)
        rng = handle.key_group_range
        home: np.ndarray = ((stored == expected) & (stored >= rng.start) & (stored <= rng.end)
                & ~np.isin(stored, self.shared))
        return home

    def _placement(self, handle: KeyedStateHandle, table: pa.Table, stored: np.ndarray,
                   key_groups: range | None, where: str) -> np.ndarray | None:
        """Keys outside their hash's key group listed (five a handle); the hashes' groups."""
        op, report = self.op, self.report
        try:
            expected = self.checkpoint.expected_key_groups(op, handle, table, key_groups)
        except StatectlError as exc:
            if not self.unhashable:
                report.add("key-placement", where, f"keys cannot be hashed: {exc}")
            self.unhashable = True
            return None
        if expected is None:  # a key type whose hashCode statectl does not know
            reason = self.checkpoint.unknown_key_hash(op)
            if reason is not None:
                report.warn("key-hash-unknown", f"operator {op.identity.label}",
                            f"the key group of a {_short(op.key_type)} key is not computable "
                            f"({reason}): key placement was not checked")
            return None
        wrong = np.flatnonzero(stored != expected)
        for i in wrong[:max(0, 5 - self.misplaced)]:
            report.add("key-placement", where,
                       f"key {table.column('key')[int(i)].as_py()!r} is stored in key group "
                       f"{int(stored[i])}; its hash gives {int(expected[i])}")
        self.misplaced += int(wrong.size)
        return expected

    def end(self, handle: KeyedStateHandle) -> None:
        """A handle's checks after its runs."""
        if not self.failed:
            self.report.entries += self.entries
        if self.misplaced > 5:
            self.report.add("key-placement", self._where(handle),
                            f"... and {self.misplaced - 5} more misplaced keys")

    def _found(self, duplicates: list[tuple[int, str]]) -> None:
        for first, text in duplicates:
            self.found[text] = min(first, self.found.get(text, first))

    def duplicates(self) -> None:
        """Keys stored twice, the first five by where their first row is."""
        if self.strays:
            # the rows the strays' keys may repeat: those of the key groups their hashes give
            kept = list(self.strays)
            for handle, read, key_groups, first in self.runs:
                table = read()
                stored = np.asarray(table.column("key_group").to_numpy(), dtype=np.int32)
                try:
                    expected = self.checkpoint.expected_key_groups(self.op, handle, table,
                                                                   key_groups)
                except StatectlError:
                    expected = None
                home = self._home(handle, stored, expected)
                if self.stray_groups is not None:
                    home &= np.isin(stored, sorted(self.stray_groups))
                if home.any():
                    kept.append(_key_columns(table, first).filter(pa.array(home)))
            self._found(_duplicates(pa.concat_tables(kept)))
        listed = sorted(self.found, key=lambda text: self.found[text])
        for text in listed[:5]:
            self.report.add("duplicate-key", self.where, f"{text} appears more than once")


#: The column of a key table (:func:`_key_columns`) with each row's place among the state's.
_ROW = "__row"


def _key_columns(table: pa.Table, first: int) -> pa.Table:
    """``table``'s key and namespace, and each row's place (from ``first``) among the state's."""
    columns = ["key"] + (["namespace"] if "namespace" in table.column_names else [])
    keys = table.select(columns)
    return keys.append_column(_ROW, pa.array(np.arange(first, first + keys.num_rows)))


def _duplicates(keys: pa.Table) -> list[tuple[int, str]]:
    """``(first row, the key as listed)`` of each (key, namespace) that ``keys`` repeats."""
    if keys.num_rows < 2:
        return []
    columns = [n for n in keys.column_names if n != _ROW]
    try:
        counted = keys.group_by(columns).aggregate([([], "count_all"), (_ROW, "min")])
    except (pa.ArrowException, ValueError):  # key types Arrow cannot group: compare in Python
        firsts: dict[str, int] = {}
        counts: Counter[str] = Counter()
        rows = zip(*(keys.column(n).to_pylist() for n in columns), strict=True)
        for row, place in zip(rows, keys.column(_ROW).to_pylist(), strict=True):
            text = repr(row)
            counts[text] += 1
            firsts.setdefault(text, place)
        return [(firsts[text], text) for text, n in counts.items() if n > 1]
    dupes = counted.filter(pc.greater(counted.column("count_all"), 1))
    return [(row[f"{_ROW}_min"], str({n: row[n] for n in columns}))
            for row in dupes.to_pylist()]


def _check_placement(checkpoint: Checkpoint, op: OperatorMetadata, handle: KeyedStateHandle,
                     table: pa.Table, where: str, report: VerifyReport) -> None:
    try:
        expected = checkpoint.expected_key_groups(op, handle, table)
    except StatectlError as exc:
        report.add("key-placement", where, f"keys cannot be hashed: {exc}")
        return
    if expected is None:  # a key type whose hashCode statectl does not know
        reason = checkpoint.unknown_key_hash(op)
        if reason is not None:
            report.warn("key-hash-unknown", f"operator {op.identity.label}",
                        f"the key group of a {_short(op.key_type)} key is not computable "
                        f"({reason}): key placement was not checked")
        return
    stored = np.asarray(table.column("key_group").to_numpy(), dtype=np.int32)
    wrong = np.flatnonzero(stored != expected)
    for i in wrong[:5]:
        report.add("key-placement", where,
                   f"key {table.column('key')[int(i)].as_py()!r} is stored in key group "
                   f"{int(stored[i])}; its hash gives {int(expected[i])}")
    if wrong.size > 5:
        report.add("key-placement", where, f"... and {wrong.size - 5} more misplaced keys")


def _short(spec: str | None, limit: int = 60) -> str:
    text = spec or ""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _check_operator_state(checkpoint: Checkpoint, op: OperatorMetadata, report: VerifyReport,
                          bad: set[str]) -> None:
    states = {s.name: s for s in op.states}
    copies: dict[str, list[tuple[int, dict[Any, Any]]]] = {}
    for st in op.subtasks:
        for h in st.operator:
            if h.file in bad:
                continue
            where = f"operator {op.identity.label}, subtask {st.index}, state {h.state}"
            try:
                table = checkpoint.rows_table(h.file, operator_schema(states[h.state]),
                                              h.first_element, h.element_count)
            except CorruptCheckpointError as exc:
                report.add("offsets" if "beyond" in str(exc) else "unreadable", where, str(exc))
                continue
            if states[h.state].kind == "broadcast":
                copies.setdefault(h.state, []).append((st.index, _broadcast_copy(table)))
    for name, held in copies.items():
        first_index, first = held[0]
        for index, copy in held[1:]:
            if copy != first:
                differing = len(set(copy.items()) ^ set(first.items()))
                report.warn("broadcast-copies", f"operator {op.identity.label}, state {name}",
                           f"subtask {index}'s copy differs from subtask {first_index}'s "
                           f"({differing} entries differ): every subtask holds the same "
                           f"broadcast state, and a rescale gives new subtasks one of the copies")
                break


def _broadcast_copy(table: pa.Table) -> dict[Any, Any]:
    """A broadcast state's copy as comparable ``{key: value}`` (NaN equal to NaN)."""
    return {canonical(row["key"]): canonical(row["value"]) for row in pyrows(table)}

