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
        checkpoint = open_checkpoint(location, strict=False, allow_pickle=allow_pickle,
                                     partial=True, names=names)
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
    _check_undecodable(checkpoint, report, bad_files)
    owners = {file: op.identity for op in checkpoint.metadata.operators
              for st in op.subtasks
              for file in [*(h.file for h in st.keyed), *(h.file for h in st.operator)]}
    for done, info in enumerate(files):
        report.files += 1
        report.bytes += info.size
        report.current = owners.get(info.path)  # a file shared by operators: one of them
        _check_file(checkpoint, info.path, report, bad_files)
        if progress is not None:
            progress(done + 1, len(files) + len(checkpoint.metadata.operators))
    for done, op in enumerate(checkpoint.metadata.operators):
        report.current = op.identity
        _check_ranges(op, report)
        _check_keyed(checkpoint, op, report, bad_files)
        _check_operator_state(checkpoint, op, report, bad_files)
        if progress is not None:
            progress(len(files) + done + 1, len(files) + len(checkpoint.metadata.operators))
    report.current = None
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


def _check_keyed(checkpoint: Checkpoint, op: OperatorMetadata, report: VerifyReport,
                 bad: set[str]) -> None:
    for state in (s for s in op.states if s.scope == "keyed"):
        seen: dict[int, str] = {}
        keys: list[pa.Table] = []
        for st in op.subtasks:
            for h in (h for h in st.keyed if h.state == state.name):
                where = f"operator {op.identity.label}, state {state.name}, {h.file}"
                for r in h.rows:
                    if r.key_group in seen:
                        report.add("overlap", where,
                                   f"key group {r.key_group} is also stored in {seen[r.key_group]}")
                    seen[r.key_group] = h.file
                if h.file in bad:
                    continue
                try:
                    table = checkpoint.keyed_table(op.uid, h)
                except CorruptCheckpointError as exc:
                    kind = "offsets" if ("key group" in str(exc) or "beyond" in str(exc)) \
                        else "unreadable"
                    report.add(kind, where, str(exc))
                    continue
                report.entries += table.num_rows
                _check_placement(checkpoint, op, h, table, where, report)
                columns = ["key"] + (["namespace"] if "namespace" in table.column_names else [])
                keys.append(table.select(columns))
        _check_duplicates(keys, f"operator {op.identity.label}, state {state.name}", report)


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


def _check_duplicates(tables: list[pa.Table], where: str, report: VerifyReport) -> None:
    if not tables:
        return
    try:
        table = pa.concat_tables(tables)
        counted = table.group_by(table.column_names).aggregate([([], "count_all")])
    except (pa.ArrowException, ValueError):  # key types Arrow cannot group: compare in Python
        rows: list[Any] = []
        for t in tables:
            rows.extend(zip(*(t.column(n).to_pylist() for n in t.column_names), strict=True))
        dupes = [k for k, n in Counter(map(repr, rows)).items() if n > 1]
        for k in dupes[:5]:
            report.add("duplicate-key", where, f"{k} appears more than once")
        return
    dupes = counted.filter(pc.greater(counted.column("count_all"), 1))
    for row in dupes.slice(0, 5).to_pylist():
        row.pop("count_all")
        report.add("duplicate-key", where, f"{row} appears more than once")


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

