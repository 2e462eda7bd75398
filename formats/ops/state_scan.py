"""The ``inspect`` views that read state: largest entries, TTL-expired share, one key, a sample.

Each reads as little as its question needs: ``lookup`` only the row groups of the key's key
group in the one file of the subtask that owns it; ``sample_entries`` only the first row
groups; ``largest_entries`` and ``expired_shares`` whole keyed files, one handle at a time,
as Arrow columns (sizes and expiry are computed vectorised, never row by row in Python).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from formats.model.arrow_types import from_arrow, pyrows, value_from_text, with_field_names
from formats.model.checkpoint import Checkpoint
from formats.model.columns import (
    keyed_schema,
    operator_schema,
    ttl_spec,
    undecodable_of,
    value_spec,
)
from statecore.checkpoint import (
    OperatorMetadata,
    StateMetadata,
    file_extents,
    operator_state_segments,
    share_of_file,
)
from statecore.errors import InvalidArgumentError
from statecore.serializers import VOID_NAMESPACE
from statecore.values import TimeWindow

__all__ = [
    "Entry",
    "ExpiredShare",
    "KeyLookup",
    "StateEntries",
    "check_states",
    "expired_shares",
    "largest_entries",
    "lookup",
    "sample_entries",
]


@dataclass(frozen=True)
class Entry:
    """One stored entry: keyed (``key_group`` set) or an operator-state element.

    ``namespace`` is ``VOID_NAMESPACE`` for state without one; ``key`` is ``None`` for list
    elements; ``ttl_timestamp`` is the last-access time (ms) of TTL state (a list or dict of
    them for list and map state), else ``None``; ``bytes`` the entry's data bytes
    (:mod:`formats.ops.row_sizes`).
    """

    subtask: int
    key_group: int | None
    key: Any
    namespace: Any
    value: Any
    ttl_timestamp: Any
    bytes: int


@dataclass(frozen=True)
class StateEntries:
    """Entries of one state: the largest, a sample, or those of one key."""

    uid: str
    state: str
    scope: str
    kind: str
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class ExpiredShare:
    """TTL-expired part of one keyed state at ``now`` (Flink's rule ``ts + ttl <= now``).

    ``entries_expired`` counts rows all of whose contents expired (a full-snapshot cleanup
    drops them); ``elements`` are list elements or map entries (a value state: its rows).
    ``bytes`` are the state's bytes on disk; ``bytes_expired`` their share in proportion to
    the expired data bytes.
    """

    uid: str
    state: str
    kind: str
    ttl: int
    entries: int
    entries_expired: int
    elements: int
    elements_expired: int
    bytes: int
    bytes_expired: int

    @property
    def share(self) -> float:
        """Expired share of the bytes (of the entries when there are no bytes)."""
        if self.bytes:
            return self.bytes_expired / self.bytes
        return self.entries_expired / self.entries if self.entries else 0.0


def _selected(op: OperatorMetadata, states: Collection[str] | None, scope: str | None = None
              ) -> list[StateMetadata]:
    return [s for s in op.states if (states is None or s.name in states)
            and (scope is None or s.scope == scope)]


def check_states(checkpoint: Checkpoint, states: Collection[str] | None) -> None:
    """Refuse state names that no operator of the checkpoint has."""
    if states is None:
        return
    known = {s.name for op in checkpoint.metadata.operators for s in op.states}
    missing = sorted(set(states) - known)
    if missing:
        raise InvalidArgumentError(
            f"no state named {', '.join(map(repr, missing))} in this checkpoint (its states: "
            f"{', '.join(sorted(known)) or 'none'})")


def _data_bytes(table: pa.Table) -> np.ndarray[Any, Any]:
    """Data bytes of each row: every column but ``key_group`` (:mod:`formats.ops.row_sizes`)."""
    from formats.ops.row_sizes import row_sizes  # pyarrow.compute: when a view reads values
    sizes = np.zeros(table.num_rows, dtype=np.int64)
    for name in table.column_names:
        if name != "key_group":
            sizes += row_sizes(table.column(name))
    return sizes


def _entries(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata, subtask: int,
             table: pa.Table, sizes: np.ndarray[Any, Any]) -> list[Entry]:
    """Decode the rows of a keyed or operator table of ``state`` into entries."""
    if state.scope == "keyed":
        assert op.key_type is not None
        read_key = from_arrow(op.key_type)
        read_value = from_arrow(value_spec(state))
    else:
        read_key = from_arrow(state.user_key_type) if state.user_key_type else (lambda v: v)
        read_value = from_arrow(state.value_type)
    read_ns = checkpoint.namespace_reader(op, state)
    read_ttl = from_arrow(ttl_spec(state)) if state.ttl else None
    named = with_field_names(value_spec(state)) if op.plan is not None else None
    if named is not None:  # rows the job's plan named (--plan): shown with their names (keys
        plain = read_value  # stay tuples: views hash them)
        read_value = lambda v: named(plain(v))  # noqa: E731
    out = []
    for row, size in zip(pyrows(table), sizes.tolist(), strict=True):
        out.append(Entry(
            subtask, row.get("key_group"), read_key(row.get("key")),
            VOID_NAMESPACE if read_ns is None else read_ns(row["namespace"]),
            undecodable_of(row) or read_value(row["value"]),
            None if read_ttl is None else read_ttl(row["ttl_timestamp"]),
            int(size)))
    return out


def _keyed_handles(op: OperatorMetadata, state: str) -> list[tuple[int, Any]]:
    return [(st.index, h) for st in sorted(op.subtasks, key=lambda s: s.index)
            for h in st.keyed if h.state == state]


def _operator_tables(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
                     limit: int | None = None) -> list[tuple[int, pa.Table]]:
    """``(subtask, rows)`` of an operator state, the first ``limit`` rows.

    Split lists per subtask; union state per distinct range (restored by every subtask,
    stored once); broadcast state from the first subtask's copy (every subtask holds the same).
    """
    out, left = [], limit
    segments = operator_state_segments(op, state.name, distinct=state.kind != "split")
    if state.kind == "broadcast":
        segments = [(subtask, h) for subtask, h in segments if subtask == segments[0][0]]
    for subtask, h in segments:
        count = h.element_count if left is None else min(left, h.element_count)
        out.append((subtask, checkpoint.rows_table(h.file, operator_schema(state),
                                                   h.first_element, count)))
        if left is not None:
            left -= count
            if left <= 0:
                break
    return out


def largest_entries(checkpoint: Checkpoint, n: int, states: Collection[str] | None = None
                    ) -> tuple[StateEntries, ...]:
    """The ``n`` largest entries of every keyed and broadcast state, by data bytes.

    An entry is a key with its namespace (a windowed state has one per window). Ties keep
    storage order. Every keyed file is read once, a handle at a time.
    """
    if n < 1:
        raise InvalidArgumentError(f"--top needs a positive number of entries, got {n}")
    check_states(checkpoint, states)
    out = []
    for op in checkpoint.metadata.operators:
        for state in _selected(op, states):
            if state.scope == "keyed":
                tables = [(subtask, checkpoint.keyed_table(op.uid, h))
                          for subtask, h in _keyed_handles(op, state.name)]
            elif state.kind == "broadcast":
                tables = _operator_tables(checkpoint, op, state)
            else:
                continue  # list elements have no keys
            candidates: list[Entry] = []
            for subtask, table in tables:
                sizes = _data_bytes(table)
                top = np.argsort(-sizes, kind="stable")[:n]
                candidates.extend(_entries(checkpoint, op, state, subtask,
                                           table.take(pa.array(top)), sizes[top]))
            candidates.sort(key=lambda e: -e.bytes)  # stable: storage order among equals
            out.append(StateEntries(op.uid, state.name, state.scope, state.kind,
                                    tuple(candidates[:n])))
    return tuple(out)


def sample_entries(checkpoint: Checkpoint, limit: int, states: Collection[str] | None = None
                   ) -> tuple[StateEntries, ...]:
    """The first ``limit`` entries of every state, in storage order (first row groups only)."""
    if limit < 1:
        raise InvalidArgumentError(f"--limit needs a positive number of entries, got {limit}")
    check_states(checkpoint, states)
    out = []
    for op in checkpoint.metadata.operators:
        for state in _selected(op, states):
            entries: list[Entry] = []
            if state.scope == "keyed":
                assert op.key_type is not None
                schema = keyed_schema(state, op.key_type)
                for subtask, h in _keyed_handles(op, state.name):
                    if len(entries) >= limit or not h.rows:
                        continue
                    first = h.rows[0].first_row
                    count = min(limit - len(entries), sum(r.row_count for r in h.rows))
                    table = checkpoint.rows_table(h.file, schema, first, count)
                    entries.extend(_entries(checkpoint, op, state, subtask, table,
                                            _data_bytes(table)))
            else:
                for subtask, table in _operator_tables(checkpoint, op, state, limit):
                    entries.extend(_entries(checkpoint, op, state, subtask, table,
                                            _data_bytes(table)))
            out.append(StateEntries(op.uid, state.name, state.scope, state.kind,
                                    tuple(entries[:limit])))
    return tuple(out)


@dataclass(frozen=True)
class KeyLookup:
    """Where a key lives and its entries in every selected keyed state.

    ``locations`` has, per operator, the key as parsed, its key group and the subtask owning
    it; a state without the key has no entries.
    """

    key: str
    #: (uid, key, key group, subtask); key group and subtask are ``None`` when the key's hash
    #: cannot be computed (a Flink ``RowData`` key) and no state holds it
    locations: tuple[tuple[str, Any, int | None, int | None], ...]
    states: tuple[StateEntries, ...]


def lookup(checkpoint: Checkpoint, key: str, states: Collection[str] | None = None,
           namespace: str | None = None) -> KeyLookup:
    """The entries of one key (``key`` as typed: parsed as each operator's key type).

    Reads only the rows of the key's key group, in the file of the subtask that owns it
    (reference §1.2: ``murmurHash(key.hashCode()) % maxParallelism``).
    """
    check_states(checkpoint, states)
    locations, found, errors = [], [], []
    for op in checkpoint.metadata.operators:
        keyed = _selected(op, states, "keyed")
        if op.key_type is None or not keyed:
            continue
        try:
            value = value_from_text(key, op.key_type)
        except InvalidArgumentError as exc:
            errors.append(f"operator {op.identity.label!r} has {op.key_type} keys: {exc}")
            continue
        # None: the key's hash is not computable (a Flink RowData key): every group is read
        key_group = checkpoint.key_group_of(op, value)
        op_states: list[StateEntries] = []
        for state in keyed:
            wanted = None if namespace is None or state.namespace_type == "void" else \
                namespace_matcher(namespace, state.namespace_type)
            entries: list[Entry] = []
            for subtask, h in _keyed_handles(op, state.name):
                if key_group is None:  # every key group
                    table = checkpoint.keyed_table(op.uid, h)
                elif key_group in h.key_group_range:  # only its rows (or bytes) are read
                    table = checkpoint.keyed_table_in(op.uid, h, (key_group,))
                else:
                    continue
                entries.extend(e for e in _entries(checkpoint, op, state, subtask, table,
                                                   _data_bytes(table))
                               if e.key == value
                               and (key_group is None or e.key_group == key_group)
                               and (wanted is None or wanted(e.namespace)))
            entries.sort(key=lambda e: _namespace_order(e.namespace))
            op_states.append(StateEntries(op.uid, state.name, state.scope, state.kind,
                                          tuple(entries)))
        if key_group is None:  # where the key was found, if anywhere
            key_group = next((e.key_group for st in op_states for e in st.entries), None)
        owner = None if key_group is None else next(
            st.index for st in op.subtasks if st.key_group_range is not None
            and key_group in st.key_group_range)
        locations.append((op.uid, value, key_group, owner))
        found.extend(op_states)
    if not locations:
        raise InvalidArgumentError("; ".join(errors) if errors else
                                   "no operator has keyed state to look the key up in: --key "
                                   "finds keyed state (run inspect without options to see "
                                   "the states)")
    return KeyLookup(key, tuple(locations), tuple(found))


#: A window as text shows it: ``[start, end)`` (or ``]``), each an ISO time or epoch ms.
_WINDOW = re.compile(r"\[\s*([^,\s]+)\s*,\s*([^,\s\)\]]+)\s*[)\]]")
WINDOW_SPEC = "tuple<int64,int64>"


def namespace_matcher(text: str, spec: str) -> Callable[[Any], bool]:
    """Which namespaces ``--namespace text`` selects, of a state whose namespaces are ``spec``.

    A value as :func:`formats.model.arrow_types.value_from_text` reads it; a window (Flink's
    ``TimeWindow``, ``tuple<int64,int64>``) also as text shows it, ``[2023-11-17T13:00:00Z,
    2023-11-17T14:00:00Z)``, with epoch ms or ISO times, or as its start alone (an ISO time or
    epoch ms: the window that starts then).
    """
    if spec == WINDOW_SPEC:
        window = _WINDOW.fullmatch(text.strip())
        if window is not None:
            bounds = (_epoch_ms(window[1]), _epoch_ms(window[2]))
            if None not in bounds:
                return lambda namespace: tuple(namespace) == bounds
        start = _epoch_ms(text)
        if start is not None:
            return lambda namespace: isinstance(namespace, tuple) and namespace[0] == start
    wanted = value_from_text(text, spec)
    return lambda namespace: bool(namespace == wanted)


def _epoch_ms(text: str) -> int | None:
    """``text`` as epoch ms: a whole number, or an ISO 8601 time (UTC unless it says)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _namespace_order(namespace: Any) -> tuple[int, Any]:
    """Numbers (window starts) and windows in time order, anything else by its text."""
    if isinstance(namespace, int | float) and not isinstance(namespace, bool):
        return 0, namespace
    if isinstance(namespace, TimeWindow):  # windows in time order: (start, end)
        return 1, tuple(namespace)
    return 2, repr(namespace)


def expired_shares(checkpoint: Checkpoint, now: int, states: Collection[str] | None = None
                   ) -> tuple[ExpiredShare, ...]:
    """The TTL-expired share of every keyed state with TTL at ``now`` (epoch ms)."""
    from formats.ops.rescale import drop_expired_rows  # the rewrite's filter (issue 45)
    check_states(checkpoint, states)
    sizes = {f.path: f.size for f in checkpoint.metadata.files}
    extent = file_extents(checkpoint.metadata)
    out = []
    for op in checkpoint.metadata.operators:
        for state in _selected(op, states, "keyed"):
            if state.ttl is None or state.ttl <= 0:  # no TTL, or one the snapshot lacks
                continue
            totals = np.zeros(6, dtype=np.int64)
            for _, h in _keyed_handles(op, state.name):
                table = checkpoint.keyed_table(op.uid, h)
                kept = drop_expired_rows(table, state, now)
                data, kept_data = int(_data_bytes(table).sum()), int(_data_bytes(kept).sum())
                disk = share_of_file(sizes[h.file], table.num_rows, extent.get(h.file, 0))
                totals += [table.num_rows, table.num_rows - kept.num_rows,
                           _elements(table, state), _elements(table, state) - _elements(
                               kept, state), disk, disk * (data - kept_data) // data if data
                           else 0]
            out.append(ExpiredShare(op.uid, state.name, state.kind, state.ttl,
                                    *(int(t) for t in totals)))
    return tuple(out)


def _elements(table: pa.Table, state: StateMetadata) -> int:
    """List elements or map entries of a list or map state's rows (others: the rows)."""
    if state.kind not in ("list", "map"):
        return int(table.num_rows)
    total = 0
    for chunk in table.column("value").chunks:  # list and map arrays both have offsets
        offsets = np.asarray(chunk.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        lengths = np.diff(offsets)
        if chunk.null_count:
            lengths = np.where(np.asarray(chunk.is_valid().to_numpy(zero_copy_only=False)),
                               lengths, 0)
        total += int(lengths.sum())
    return total
