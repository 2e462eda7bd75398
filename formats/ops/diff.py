"""``statectl diff``: the logical difference of two checkpoints, whatever their layout.

Compared per operator (by uid), state (by name), key and namespace: what a job restoring
either checkpoint would see, independent of parallelism, max parallelism, key-group placement
and files. Keyed entries compare their values and TTL timestamps. Operator state compares:

* split list state as a multiset of elements (a rescale reorders the list across subtasks);
* union list state as the multiset of its distinct element ranges' elements (every subtask
  restores all of them, so a range referenced by several subtasks counts once);
* broadcast state as one map (the copies merged).

Keyed state is read key group by key group where an operator has one max parallelism and key
type on both sides (every key is then in the same key group on both), a run of key groups of
each side at a time, holding only the differences listed; otherwise each side's state whole
(docs/cli.md, "Memory"). Either way a state's differences are listed in the order of their
keys' ``repr``.

Floats compare NaN equal to NaN (the same stored value). A state whose TTL is unknown (read from
a Flink snapshot, which keeps timestamps but not the TTL) declares the same as one with any TTL.
"""

from __future__ import annotations

import decimal
import heapq
import math
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

from formats.model.arrow_types import from_arrow, pyrows
from formats.model.checkpoint import Checkpoint
from formats.model.columns import operator_schema, split_ttl
from statecore.checkpoint import (
    TTL_UNKNOWN,
    OperatorIdentity,
    OperatorMetadata,
    OperatorStateHandle,
    StateMetadata,
    operator_state_segments,
)
from statecore.errors import StatectlError
from statecore.serializers import VOID_NAMESPACE
from statecore.values import TimeWindow

__all__ = ["DiffReport", "Difference", "canonical", "diff_checkpoints", "plain", "side_errors"]


@dataclass(frozen=True)
class Difference:
    """One difference: ``change`` is added (only in B), removed (only in A) or changed.

    ``scope`` says what differs: an ``operator``, a ``state`` declaration, a keyed ``entry``
    (``key``, ``namespace``), an operator-state ``element`` (``count`` times) or a broadcast
    ``entry`` (``key``). An entry of a state with TTL has its user value in ``left`` /
    ``right`` and its last-access time(s) beside it, as ``inspect`` and ``export`` show them
    (:func:`formats.model.columns.split_ttl`).
    """

    change: str
    scope: str
    operator: OperatorIdentity
    state: str | None = None
    key: Any = None
    namespace: Any = None
    left: Any = None
    right: Any = None
    count: int = 1
    left_ttl_timestamp: Any = None
    right_ttl_timestamp: Any = None


@dataclass
class DiffReport:
    """Differences of A and B: the first ``limit`` listed, all of them counted."""

    left: str
    right: str
    limit: int | None
    differences: list[Difference] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    compared: int = 0
    found: int = 0  # difference records, listed or not

    @property
    def equal(self) -> bool:
        return not self.counts

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, difference: Difference) -> None:
        self.counts[difference.change] += difference.count
        self.found += 1
        if self.limit is None or len(self.differences) < self.limit:
            self.differences.append(difference)

    def add_sorted(self, found: Iterable[tuple[str, Difference]]) -> None:
        """Add differences in the order of their sort keys, as :meth:`add` one by one would.

        All are counted; only the ones the limit leaves room for are held while ``found``
        runs (the smallest keys so far), so memory holds the listed differences, not all.
        """
        def counted() -> Iterator[tuple[str, Difference]]:
            for item in found:
                self.counts[item[1].change] += item[1].count
                self.found += 1
                yield item

        room = None if self.limit is None else max(self.limit - len(self.differences), 0)
        if room is None:
            kept = sorted(counted(), key=itemgetter(0))
        elif room == 0:
            kept = []
            deque(counted(), maxlen=0)
        else:
            kept = heapq.nsmallest(room, counted(), key=itemgetter(0))
        self.differences.extend(difference for _, difference in kept)

    def saved(self) -> tuple[Counter[str], int, int, int]:
        """What :meth:`restore` puts back: the report before a state compared anew."""
        return Counter(self.counts), self.found, self.compared, len(self.differences)

    def restore(self, saved: tuple[Counter[str], int, int, int]) -> None:
        self.counts, self.found, self.compared, listed = saved
        del self.differences[listed:]


def diff_checkpoints(a: Checkpoint, b: Checkpoint, *, left: str = "A", right: str = "B",
                     limit: int | None = None) -> DiffReport:
    """Compare two opened checkpoints logically (see the module doc)."""
    report = DiffReport(left, right, limit)
    ops_a = {op.identity.id: op for op in a.metadata.operators}
    ops_b = {op.identity.id: op for op in b.metadata.operators}
    for op_id in sorted(ops_a.keys() | ops_b.keys(), key=lambda i: _order(ops_a, ops_b, i)):
        if op_id not in ops_b:
            report.add(Difference("removed", "operator", ops_a[op_id].identity,
                                  left=ops_a[op_id].name))
        elif op_id not in ops_a:
            report.add(Difference("added", "operator", ops_b[op_id].identity,
                                  right=ops_b[op_id].name))
        else:
            _diff_operator(a, ops_a[op_id], b, ops_b[op_id], report)
    return report


def _order(ops_a: dict[str, OperatorMetadata], ops_b: dict[str, OperatorMetadata],
           op_id: str) -> tuple[str, str]:
    """Operators in the order of their uids (as labelled), then ids."""
    op = ops_a.get(op_id) or ops_b[op_id]
    return op.uid, op_id


def _identity(op_a: OperatorMetadata, op_b: OperatorMetadata) -> OperatorIdentity:
    """An operator of both (one OperatorID): A's uid and name, or B's where A stored none."""
    a, b = op_a.identity, op_b.identity
    return OperatorIdentity(a.id, a.uid if a.uid is not None else b.uid,
                            a.name if a.name is not None else b.name,
                            a.uid_from if a.uid is not None else b.uid_from)


def _declaration(state: StateMetadata) -> dict[str, Any]:
    return {"kind": state.kind, "value_type": state.value_type,
            "user_key_type": state.user_key_type, "namespace_type": state.namespace_type,
            "ttl": state.ttl}


def _same_declaration(a: StateMetadata, b: StateMetadata) -> bool:
    """Equal declarations, where a TTL of :data:`TTL_UNKNOWN` matches any TTL.

    A Flink snapshot stores each TTL value's last access but not the TTL (it is in the job's
    ``StateTtlConfig``), so a state read from one has TTL unknown; it matches a statectl state
    with a TTL, e.g. the savepoint ``convert`` wrote from a build with ``--ttl``. TTL against no
    TTL still differs, and the values' timestamps are compared as they are.
    """
    left, right = _declaration(a), _declaration(b)
    if TTL_UNKNOWN in (a.ttl, b.ttl) and a.ttl is not None and b.ttl is not None:
        left["ttl"] = right["ttl"]
    return left == right


def _diff_operator(a: Checkpoint, op_a: OperatorMetadata, b: Checkpoint, op_b: OperatorMetadata,
                   report: DiffReport) -> None:
    states_a = {s.name: s for s in op_a.states}
    states_b = {s.name: s for s in op_b.states}
    uid = _identity(op_a, op_b)
    if op_a.key_type != op_b.key_type:
        report.add(Difference("changed", "operator", uid, left={"key_type": op_a.key_type},
                              right={"key_type": op_b.key_type}))
    for name in sorted(states_a.keys() | states_b.keys()):
        sa, sb = states_a.get(name), states_b.get(name)
        if sb is None:
            assert sa is not None
            report.add(Difference("removed", "state", uid, name, left=_declaration(sa)))
        elif sa is None:
            report.add(Difference("added", "state", uid, name, right=_declaration(sb)))
        elif not _same_declaration(sa, sb):
            report.add(Difference("changed", "state", uid, name, left=_declaration(sa),
                                  right=_declaration(sb)))
        # a state on one side only: its contents are all added or removed
        left_scope, right_scope = _shape(sa), _shape(sb)
        shape = left_scope or right_scope
        if left_scope and right_scope and left_scope != right_scope:
            continue  # keyed vs operator (or list vs map): the declaration change says it
        sides = (side_errors("first", report.left), side_errors("second", report.right))
        if shape == "keyed":
            _diff_keyed_state(a, op_a, b, op_b, name, (sa, sb), uid, report)
        elif shape == "broadcast":
            with sides[0]:
                map_a = _broadcast(a, op_a, sa) if sa else {}
            with sides[1]:
                map_b = _broadcast(b, op_b, sb) if sb else {}
            report.add_sorted(_keyed_differences([(map_a, map_b)], uid, name, report,
                                                 (None, None)))
        else:
            with sides[0]:
                elements_a = _elements(a, op_a, sa) if sa else Counter()
            with sides[1]:
                elements_b = _elements(b, op_b, sb) if sb else Counter()
            _diff_elements(elements_a, elements_b, uid, name, report)


def _diff_keyed_state(a: Checkpoint, op_a: OperatorMetadata, b: Checkpoint,
                      op_b: OperatorMetadata, name: str,
                      declared: tuple[StateMetadata | None, StateMetadata | None],
                      uid: OperatorIdentity, report: DiffReport) -> None:
    """One keyed state's entries compared, key group by key group where the sides allow.

    Two sides of one max parallelism and key type have each key in the same key group: the
    sides are read together a run of key groups at a time, memory holding a run of each and
    the differences listed (issue 45). Otherwise (or where a side's key groups do not ascend)
    each side is read whole into one map.
    """
    sa, sb = declared
    if (op_a.max_parallelism, op_a.key_type) == (op_b.max_parallelism, op_b.key_type):
        before = report.saved()
        walk = _keyed_walk(
            _key_groups(a, op_a.uid, name if sa else None, side_errors("first", report.left)),
            _key_groups(b, op_b.uid, name if sb else None, side_errors("second", report.right)))
        try:
            report.add_sorted(_keyed_differences(walk, uid, name, report, declared))
            return
        except _NotAscending:
            report.restore(before)
    with side_errors("first", report.left):
        keyed_a = dict(_keyed(a, op_a.uid, name)) if sa else {}
    with side_errors("second", report.right):
        keyed_b = dict(_keyed(b, op_b.uid, name)) if sb else {}
    report.add_sorted(_keyed_differences([(keyed_a, keyed_b)], uid, name, report, declared))


@contextmanager
def side_errors(which: str, location: str) -> Iterator[None]:
    """Errors reading one side of a diff, said with the side: ``the first snapshot (PATH): ...``.

    The error keeps its class (a damaged file stays a
    :class:`~statecore.errors.CorruptCheckpointError`).
    """
    prefix = f"the {which} snapshot ({location})"
    try:
        yield
    except StatectlError as exc:
        if str(exc).startswith(prefix):
            raise
        raise type(exc)(f"{prefix}: {exc}") from exc


def _shape(state: StateMetadata | None) -> str | None:
    """How a state's contents compare: keyed entries, a broadcast map, or list elements."""
    if state is None:
        return None
    if state.scope == "keyed":
        return "keyed"
    return "broadcast" if state.kind == "broadcast" else "elements"


def canonical(value: Any) -> Any:
    """A hashable form of a stored value in which equal stored values are equal."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else value
    if isinstance(value, list | tuple):
        # a TimeWindow is the tuple (start, end) it was read as elsewhere (statectl's format)
        kind = "tuple" if isinstance(value, TimeWindow) else type(value).__name__
        return (kind, tuple(canonical(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((canonical(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, decimal.Decimal):  # BigDecimal: 1.50 is not 1.5 (their scales differ)
        return ("decimal", value.as_tuple())
    return value


def _keyed(checkpoint: Checkpoint, uid: str, state: str) -> Iterator[tuple[Any, Any]]:
    for _, key, namespace, stored in checkpoint.keyed_entries(uid, state):
        yield (canonical(key), canonical(namespace)), (key, namespace, stored)


Entries = dict[Any, tuple[Any, Any, Any]]


def _key_groups(checkpoint: Checkpoint, uid: str, state: str | None,
                errors: AbstractContextManager[None]) -> Iterator[tuple[int, Entries]]:
    """One side's entries of ``state`` key group by key group (none without the state).

    ``keyed_entries`` reads them a run of key groups at a time; a key group's entries are
    together there, in ascending key-group order (the model's contract). Errors reading them
    are said with the side (:func:`side_errors`).
    """
    if state is None:
        return
    with errors:
        for group, rows in groupby(checkpoint.keyed_entries(uid, state), key=itemgetter(0)):
            yield group, {(canonical(key), canonical(ns)): (key, ns, stored)
                          for _, key, ns, stored in rows}


def _keyed_walk(left: Iterator[tuple[int, Entries]], right: Iterator[tuple[int, Entries]]
                ) -> Iterator[tuple[Entries, Entries]]:
    """Both sides' entries of each key group, in ascending key-group order.

    Only for two sides of one max parallelism and key type, where a key is in the same key
    group on both. A side whose key groups do not ascend (a snapshot that stores one key
    group in two places) is compared whole: its entries merged as :func:`_keyed` does.
    """
    empty: Entries = {}
    a, b = next(left, None), next(right, None)
    seen = -1
    while a is not None or b is not None:
        group = min(side[0] for side in (a, b) if side is not None)
        if group <= seen:
            raise _NotAscending
        seen = group
        la = a[1] if a is not None and a[0] == group else empty
        rb = b[1] if b is not None and b[0] == group else empty
        yield la, rb
        if la is not empty:
            a = next(left, None)
        if rb is not empty:
            b = next(right, None)


class _NotAscending(Exception):
    """A side's key groups came out of order: the state is compared whole."""


def _keyed_differences(walk: Iterable[tuple[Entries, Entries]], uid: OperatorIdentity,
                       state: str, report: DiffReport,
                       declared: tuple[StateMetadata | None, StateMetadata | None]
                       ) -> Iterator[tuple[str, Difference]]:
    """The differences of each pair of entries ``walk`` gives, each with its sort key.

    The sort key is the ``repr`` of the canonical key and namespace: the report lists a
    state's differences in that order however they were read.
    """
    for left, right in walk:
        report.compared += len(left.keys() | right.keys())
        for composite in left.keys() ^ right.keys() | {
                c for c in left.keys() & right.keys()
                if canonical(left[c][2]) != canonical(right[c][2])}:
            yield repr(composite), _entry_difference(left.get(composite), right.get(composite),
                                                     uid, state, declared)


def _entry_difference(la: tuple[Any, Any, Any] | None, rb: tuple[Any, Any, Any] | None,
                      uid: OperatorIdentity, state: str,
                      declared: tuple[StateMetadata | None, StateMetadata | None]
                      ) -> Difference:
    if rb is None:
        assert la is not None
        key, ns, stored = la
        value, ttl = _split(declared[0], stored)
        return Difference("removed", "entry", uid, state, key, _ns(ns), left=value,
                          left_ttl_timestamp=ttl)
    if la is None:
        key, ns, stored = rb
        value, ttl = _split(declared[1], stored)
        return Difference("added", "entry", uid, state, key, _ns(ns), right=value,
                          right_ttl_timestamp=ttl)
    (lv, lt), (rv, rt) = _split(declared[0], la[2]), _split(declared[1], rb[2])
    return Difference("changed", "entry", uid, state, la[0], _ns(la[1]), left=lv, right=rv,
                      left_ttl_timestamp=lt, right_ttl_timestamp=rt)


def _split(state: StateMetadata | None, stored: Any) -> tuple[Any, Any]:
    """A stored value as ``(user value, ttl timestamps)``; an undecodable one as it is."""
    if state is None:
        return stored, None
    try:
        return split_ttl(state, stored)
    except (AttributeError, TypeError):  # not the TTL shape (an undecodable value): as stored
        return stored, None


def _ns(namespace: Any) -> Any:
    return None if namespace is VOID_NAMESPACE else namespace


def _read(checkpoint: Checkpoint, state: StateMetadata, handle: OperatorStateHandle
          ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pyrows(checkpoint.rows_table(
        handle.file, operator_schema(state), handle.first_element,
        handle.element_count))
    return rows


def _elements(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata
              ) -> Counter[Any]:
    read = from_arrow(state.value_type)
    out: Counter[Any] = Counter()
    for _, handle in operator_state_segments(op, state.name, distinct=state.kind == "union"):
        out.update(canonical(read(row["value"])) for row in _read(checkpoint, state, handle))
    return out


def _broadcast(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata
               ) -> dict[Any, Any]:
    assert state.user_key_type is not None
    read_key, read_value = from_arrow(state.user_key_type), from_arrow(state.value_type)
    out: dict[Any, Any] = {}
    for _, handle in operator_state_segments(op, state.name, distinct=True):
        for row in _read(checkpoint, state, handle):
            key = read_key(row["key"])
            out[canonical(key)] = (key, VOID_NAMESPACE, read_value(row["value"]))
    return out


def _diff_elements(left: Counter[Any], right: Counter[Any], uid: OperatorIdentity,
                   state: str, report: DiffReport) -> None:
    report.compared += sum((left | right).values())
    for element, n in sorted((left - right).items(), key=repr):
        report.add(Difference("removed", "element", uid, state, left=plain(element), count=n))
    for element, n in sorted((right - left).items(), key=repr):
        report.add(Difference("added", "element", uid, state, right=plain(element), count=n))


def plain(value: Any) -> Any:
    """Undo :func:`canonical` for display."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("list", "tuple"):
        items = [plain(v) for v in value[1]]
        return items if value[0] == "list" else tuple(items)
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "dict":
        return {plain(k): plain(v) for k, v in value[1]}
    if value == ("nan",):
        return float("nan")
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "decimal":
        return decimal.Decimal(value[1])
    return value
