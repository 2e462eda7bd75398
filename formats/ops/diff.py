"""``statectl diff``: the logical difference of two checkpoints, whatever their layout.

Compared per operator (by uid), state (by name), key and namespace: what a job restoring
either checkpoint would see, independent of parallelism, max parallelism, key-group placement
and files. Keyed entries compare their values and TTL timestamps. Operator state compares:

* split list state as a multiset of elements (a rescale reorders the list across subtasks);
* union list state as the multiset of its distinct element ranges' elements (every subtask
  restores all of them, so a range referenced by several subtasks counts once);
* broadcast state as one map (the copies merged).

Floats compare NaN equal to NaN (the same stored value). A state whose TTL is unknown (read from
a Flink snapshot, which keeps timestamps but not the TTL) declares the same as one with any TTL.
"""

from __future__ import annotations

import decimal
import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
            with sides[0]:
                keyed_a = dict(_keyed(a, op_a.uid, name)) if sa else {}
            with sides[1]:
                keyed_b = dict(_keyed(b, op_b.uid, name)) if sb else {}
            _diff_keyed(keyed_a, keyed_b, uid, name, report, (sa, sb))
        elif shape == "broadcast":
            with sides[0]:
                map_a = _broadcast(a, op_a, sa) if sa else {}
            with sides[1]:
                map_b = _broadcast(b, op_b, sb) if sb else {}
            _diff_keyed(map_a, map_b, uid, name, report)
        else:
            with sides[0]:
                elements_a = _elements(a, op_a, sa) if sa else Counter()
            with sides[1]:
                elements_b = _elements(b, op_b, sb) if sb else Counter()
            _diff_elements(elements_a, elements_b, uid, name, report)


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


def _diff_keyed(left: dict[Any, Any], right: dict[Any, Any], uid: OperatorIdentity,
                state: str, report: DiffReport,
                declared: tuple[StateMetadata | None, StateMetadata | None] = (None, None)
                ) -> None:
    report.compared += len(left.keys() | right.keys())
    for composite in sorted(left.keys() | right.keys(), key=repr):
        la, rb = left.get(composite), right.get(composite)
        if rb is None:
            assert la is not None
            key, ns, stored = la
            value, ttl = _split(declared[0], stored)
            report.add(Difference("removed", "entry", uid, state, key, _ns(ns), left=value,
                                  left_ttl_timestamp=ttl))
        elif la is None:
            key, ns, stored = rb
            value, ttl = _split(declared[1], stored)
            report.add(Difference("added", "entry", uid, state, key, _ns(ns), right=value,
                                  right_ttl_timestamp=ttl))
        elif canonical(la[2]) != canonical(rb[2]):
            (lv, lt), (rv, rt) = _split(declared[0], la[2]), _split(declared[1], rb[2])
            report.add(Difference("changed", "entry", uid, state, la[0], _ns(la[1]),
                                  left=lv, right=rv, left_ttl_timestamp=lt,
                                  right_ttl_timestamp=rt))


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
