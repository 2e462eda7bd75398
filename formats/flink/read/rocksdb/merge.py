"""The live view of one column family over many SST files: what a RocksDB read would return.

Port of the semantics of RocksDB's read path for the latest snapshot (``DBIter`` over a
``MergingIterator``, ``db/db_iter.cc``; range tombstones as ``RangeDelAggregator``,
``db/range_del_aggregator.cc``; merge resolution as ``MergeHelper::TimedFullMerge``) with the
merge operator Flink configures, ``StringAppendTESTOperator`` (``utilities/merge_operators/
string_append/stringappend2.cc``), delimiter ``,``.

For each user key, in bytewise order, its versions across all files are taken newest first
(highest ``(sequence << 8) | type``):

* a version whose sequence number is below that of a range tombstone ``[start, end)`` covering
  the key is deleted, and so is every older one;
* ``kTypeValue`` ends the search: the value, or, below merge operands, the value, the delimiter
  and the operands oldest first (``base,op1,op2``);
* ``kTypeDeletion`` / ``kTypeSingleDeletion`` (or a covering range tombstone) ends it: no entry,
  or, below merge operands, the operands alone joined by the delimiter;
* ``kTypeMerge`` adds an operand; operands with nothing below them are joined alone.

Input order is checked: a file whose entries go backwards raises
:class:`~statecore.errors.CorruptCheckpointError` naming it. Merge operands of a table written
with another merge operator raise :class:`~statecore.errors.UnsupportedFormatError`.

The view is computed a chunk at a time (:func:`live_batches`): each table is decoded a run of blocks
ahead (:class:`_Cursor`; ``sst.RUN_BYTES``), and the entries of every table below the smallest last
key decoded by a table not yet finished form the next chunk -- every version of a key is in the same
chunk, and memory is bounded by a run of blocks per table. A chunk whose entries are values and
merge operands, one per key and table, with no range tombstone in the tables, is resolved in bulk:
one table's entries as they are (an operand with nothing below it is the value); several tables'
(their sequence numbers in disjoint ranges, so a newer table's version of a key is the newer one)
through a dict filled oldest table first, an operand appended to what is below it (or, when every
newer key has a version in the oldest table, that table's values updated in place, each newer key
found by binary search). Any other chunk goes through the general, per-entry resolution above.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice, repeat
from operator import eq, le, lt

from formats.flink.read.compiled import SPEEDUPS
from formats.flink.read.rocksdb.coding import corrupt
from formats.flink.read.rocksdb.dbformat import ValueType
from formats.flink.read.rocksdb.sst import RangeTombstone, SstFile
from statecore.errors import InvalidArgumentError, UnsupportedFormatError

__all__ = ["TombstoneMap", "live_batches", "live_items", "live_range"]

#: Merge operators whose operands are joined with a delimiter, as Flink's list state uses them.
STRING_APPEND_OPERATORS = frozenset({"StringAppendTESTOperator", "StringAppendOperator"})

_MERGE = int(ValueType.MERGE)
_VALUE = int(ValueType.VALUE)
_PLAIN_TYPES = frozenset({_VALUE, _MERGE})

#: What a run of a chunk holds (:data:`Run`): anything (the general resolution), only values,
#: values and merge operands; the last two one entry per key.
GENERAL, VALUES, OPERANDS = 0, 1, 2

#: Entries of each table decoded ahead of the merge (a run of blocks at least): the chunk
#: size's scale.
AHEAD = 1024


class TombstoneMap:
    """Range tombstones fragmented into disjoint intervals with the highest covering sequence.

    Port of ``FragmentedRangeTombstoneList`` (``db/range_del_aggregator.cc``) reduced to what the
    latest snapshot needs: :meth:`covering` is the highest sequence number of a tombstone whose
    ``[start, end)`` holds the key (0 when none), in O(log n).
    """

    __slots__ = ("_bounds", "_seqs")

    def __init__(self, tombstones: Iterable[RangeTombstone]) -> None:
        live = sorted((t for t in tombstones if t.start < t.end), key=lambda t: t.start)
        bounds = sorted({t.start for t in live} | {t.end for t in live})
        seqs = [0] * len(bounds)
        # Sweep the boundaries keeping the active tombstones in a max-heap of (-seq, end);
        # ended ones are dropped lazily. O(n log n) for n tombstones.
        active: list[tuple[int, bytes]] = []
        i = 0
        for index, bound in enumerate(bounds):
            while i < len(live) and live[i].start <= bound:
                heapq.heappush(active, (-live[i].sequence, live[i].end))
                i += 1
            while active and active[0][1] <= bound:
                heapq.heappop(active)
            seqs[index] = -active[0][0] if active else 0
        self._bounds = bounds
        self._seqs = seqs

    def __bool__(self) -> bool:
        return bool(self._bounds)

    def covering(self, key: bytes) -> int:
        index = bisect_right(self._bounds, key) - 1
        return self._seqs[index] if index >= 0 else 0


def live_items(tables: Sequence[SstFile], *,
               delimiter: bytes = b",") -> Iterator[tuple[bytes, bytes]]:
    """Every live ``(user_key, value)`` of the column family stored in ``tables``, sorted.

    ``tables`` are all the SST files of one column family, in any order. Merge operands are
    joined with ``delimiter`` (``StringAppendTESTOperator``).
    """
    return _live(tables, None, None, delimiter)


def live_range(tables: Sequence[SstFile], start: bytes, end: bytes, *,
               delimiter: bytes = b",") -> Iterator[tuple[bytes, bytes]]:
    """The live ``(user_key, value)`` with ``start <= user_key < end``, sorted.

    Reads only the data blocks of each table that can hold such keys (index seek).
    """
    return _live(tables, start, end, delimiter)


def _check_tables(tables: Sequence[SstFile]) -> bool:
    """Whether merge operands may be resolved; refuse tables of different column families."""
    families = {(t.properties.column_family_id, t.properties.column_family_name) for t in tables}
    if len(families) > 1:
        raise InvalidArgumentError(f"tables of several column families given to one live view: "
                                   f"{sorted(families, key=repr)}")
    return all(t.properties.merge_operator_name in STRING_APPEND_OPERATORS for t in tables)


def live_batches(tables: Sequence[SstFile], start: bytes | None = None,
                 end: bytes | None = None, *, delimiter: bytes = b",",
                 ahead: int = AHEAD) -> Iterator[tuple[list[bytes], list[bytes]]]:
    """The live view of :func:`live_range` (:func:`live_items` when unbounded) in batches.

    Each batch is ``(user keys, values)``, two lists of the same length, none empty; keys
    increase across batches. A consumer of millions of entries iterates each batch in a tight
    loop instead of resuming a generator per entry. ``ahead`` (``>= 1``): entries of each table
    decoded before a chunk is cut (tests make chunks small with it).
    """
    merges_allowed = _check_tables(tables)
    tombstones = TombstoneMap(t for table in tables for t in table.range_tombstones())
    covering = tombstones.covering if tombstones else None
    names = ", ".join(t.name for t in tables)
    cursors = [_Cursor(table, start, end) for table in tables]
    for runs in _chunks(cursors, max(1, ahead)):
        keys, values = (_resolve_bulk(runs, merges_allowed, delimiter) if covering is None
                        else None) or _resolve(runs, covering, merges_allowed, names, delimiter)
        if keys:
            yield keys, values


def _live(tables: Sequence[SstFile], start: bytes | None, end: bytes | None,
          delimiter: bytes) -> Iterator[tuple[bytes, bytes]]:
    for keys, values in live_batches(tables, start, end, delimiter=delimiter):
        yield from zip(keys, values, strict=True)


#: The entries of one table in one chunk: user keys, packed trailers, values, and what they
#: hold (``GENERAL``, ``VALUES``, ``OPERANDS``).
Run = tuple[list[bytes], list[int], list[bytes], int]


class _Cursor:
    """The entries of one table not merged yet: whole decoded blocks, cut to ``[start, end)``.

    User keys are checked to never decrease. Buffered entries ``[dirty_lo, dirty_hi)`` may be
    other than values and merge operands or share their key with a neighbour; entries
    ``[merges_lo, merges_hi)`` may be merge operands; all others are values, one per key.
    """

    __slots__ = ("_blocks", "name", "start", "end", "keys", "trailers", "values", "done",
                 "dirty_lo", "dirty_hi", "merges_lo", "merges_hi")

    def __init__(self, table: SstFile, start: bytes | None, end: bytes | None) -> None:
        self._blocks = table.typed_data_blocks(start, end)
        self.name, self.start, self.end = table.name, start, end
        self.keys: list[bytes] = []
        self.trailers: list[int] = []
        self.values: list[bytes] = []
        self.done = False  # no block left in the range: ``keys`` are the table's last
        self.dirty_lo = self.dirty_hi = 0
        self.merges_lo = self.merges_hi = 0

    def fill(self, wanted: int) -> None:
        """Decode blocks until ``wanted`` entries are buffered or the table's range ends."""
        while not self.done and len(self.keys) < wanted:
            item = next(self._blocks, None)
            if item is None:
                self.done = True
                return
            (keys, trailers, values), types, *known = item
            if not keys:
                continue
            strict = known[0] if known and known[0] is not None else _key_order(keys)
            if strict < 1:
                raise corrupt(self.name, "entries out of key order")
            strict = strict == 2
            lo, hi = 0, len(keys)
            if self.start is not None and keys[0] < self.start:
                lo = bisect_left(keys, self.start)
            if self.end is not None and keys[-1] >= self.end:
                hi = bisect_left(keys, self.end)
                self.done = True
                self._blocks.close()
            if lo or hi < len(keys):
                keys, trailers, values = keys[lo:hi], trailers[lo:hi], values[lo:hi]
                if not keys:
                    continue
            at = len(self.keys)
            joins = at and self.keys[-1] == keys[0]  # a key's versions over two blocks
            if not strict or joins or not types <= _PLAIN_TYPES:
                if self.dirty_hi == 0:
                    self.dirty_lo = at - 1 if joins else at
                self.dirty_hi = at + len(keys)
            elif _MERGE in types:
                if self.merges_hi == 0:
                    self.merges_lo = at
                self.merges_hi = at + len(keys)
            if at:
                self.keys += keys
                self.trailers += trailers
                self.values += values
            else:  # the decoded lists are the cursor's own: no copy
                self.keys, self.trailers, self.values = keys, trailers, values

    def take(self, cut: int) -> Run:
        """Remove and return the first ``cut`` buffered entries (``0 < cut``)."""
        kind = (GENERAL if self.dirty_hi and self.dirty_lo < cut
                else OPERANDS if self.merges_hi and self.merges_lo < cut else VALUES)
        keys, trailers, values = self.keys, self.trailers, self.values
        if cut == len(keys):
            self.keys, self.trailers, self.values = [], [], []
        else:  # one copy of the taken entries; the rest move down in place
            keys, trailers, values = keys[:cut], trailers[:cut], values[:cut]
            del self.keys[:cut], self.trailers[:cut], self.values[:cut]
        if self.dirty_hi:
            self.dirty_lo = max(0, self.dirty_lo - cut)
            self.dirty_hi = max(0, self.dirty_hi - cut)
        if self.merges_hi:
            self.merges_lo = max(0, self.merges_lo - cut)
            self.merges_hi = max(0, self.merges_hi - cut)
        return keys, trailers, values, kind


def _chunks(cursors: list[_Cursor], ahead: int) -> Iterator[list[Run]]:
    """The runs of each chunk of the merged tables, in key order (see the module doc)."""
    while True:
        for cursor in cursors:
            if not cursor.done and len(cursor.keys) < ahead:
                cursor.fill(ahead)
        bounds = [c.keys[-1] for c in cursors if not c.done]
        if not bounds:  # every table's last entries are buffered
            runs = [c.take(len(c.keys)) for c in cursors if c.keys]
            if runs:
                yield runs
            return
        bound = min(bounds)
        cuts = [bisect_left(c.keys, bound) for c in cursors]
        if not any(cuts):  # only versions of ``bound`` buffered: read on past them
            for cursor in cursors:
                if not cursor.done and cursor.keys[-1] == bound:
                    cursor.fill(len(cursor.keys) + 1)
            continue
        yield [c.take(cut) for c, cut in zip(cursors, cuts, strict=True) if cut]


def _resolve_bulk(runs: list[Run], merges_allowed: bool,
                  delimiter: bytes) -> tuple[list[bytes], list[bytes]] | None:
    """Resolve a chunk of values and merge operands in bulk; ``None`` for any other chunk.

    Only values and operands, one per key and table, and no range tombstone in the tables.
    """
    kinds = {run[3] for run in runs}
    if GENERAL in kinds or OPERANDS in kinds and not merges_allowed:
        return None
    if len(runs) == 1:  # one version per key: a value, or an operand with nothing below it
        return runs[0][0], runs[0][2]
    # oldest table first; the tables' sequence ranges must not overlap, so that a later table's
    # version of a key is always the newer one
    ranged = sorted(((*_span(run[1]), run) for run in runs), key=_first)
    for (_, newest, _), (oldest, _, _) in zip(ranged, ranged[1:], strict=False):
        if newest >= oldest:
            return None
    in_place = _onto_oldest([run for _, _, run in ranged], delimiter)
    if in_place is not None:
        return in_place
    live: dict[bytes, bytes] = {}
    for _, _, (keys, trailers, values, kind) in ranged:
        if kind == VALUES:
            live.update(zip(keys, values, strict=True))
            continue
        below = live.get
        for key, trailer, value in zip(keys, trailers, values, strict=True):
            if trailer & 0xFF == _MERGE:
                base = below(key)
                if base is not None:  # what the older tables resolve to, then this operand
                    value = base + delimiter + value
            live[key] = value
    oldest_keys = ranged[0][2][0]
    # the dict keeps the oldest table's keys first, in order: when no newer table added a key,
    # they are the chunk's keys
    keys = oldest_keys if len(live) == len(oldest_keys) else sorted(live)
    return keys, list(map(live.__getitem__, keys))


def _onto_oldest(runs: list[Run], delimiter: bytes) -> tuple[list[bytes], list[bytes]] | None:
    """Resolve runs whose newer keys all have a version in the oldest run; else ``None``.

    The runs are oldest first (as :func:`_resolve_bulk` orders them); the result is the oldest
    run's keys and its values, updated in place. The common chunk of a state whose keys were
    written before: a large older table and small newer ones; the older table's entries cost
    nothing, each newer entry a binary search.
    """
    base_keys, _, values, _ = runs[0]
    if SPEEDUPS is not None:
        taken = SPEEDUPS.onto_oldest(base_keys, values, runs[1:], _MERGE, delimiter, VALUES)
        if taken is not None:
            return (base_keys, values) if taken else None
    n = len(base_keys)
    found: list[list[int]] = []
    for keys, _, _, _ in runs[1:]:
        at = list(map(bisect_left, repeat(base_keys, len(keys)), keys))
        if at[-1] >= n or not all(map(eq, map(base_keys.__getitem__, at), keys)):
            return None
        found.append(at)
    for (_, trailers, new_values, kind), at in zip(runs[1:], found, strict=True):
        if kind == VALUES:
            for i, value in zip(at, new_values, strict=True):
                values[i] = value
            continue
        for i, trailer, value in zip(at, trailers, new_values, strict=True):
            values[i] = values[i] + delimiter + value if trailer & 0xFF == _MERGE else value
    return base_keys, values


def _key_order(keys: list[bytes]) -> int:
    """2: ``keys`` increase strictly, 1: they never decrease, 0: they decrease somewhere."""
    if SPEEDUPS is not None:
        order = SPEEDUPS.key_order(keys)
        if order is not None:
            return int(order)
    if all(map(lt, keys, islice(keys, 1, None))):
        return 2
    return 1 if all(map(le, keys, islice(keys, 1, None))) else 0


def _span(trailers: list[int]) -> tuple[int, int]:
    """The lowest and highest of a run's trailers."""
    if SPEEDUPS is not None:
        span = SPEEDUPS.trailer_span(trailers)
        if span is not None:
            return span  # type: ignore[no-any-return]
    return min(trailers), max(trailers)


def _first(item: tuple[int, int, Run]) -> int:
    return item[0]


def _resolve(runs: list[Run], covering: Callable[[bytes], int] | None, merges_allowed: bool,
             names: str, delimiter: bytes) -> tuple[list[bytes], list[bytes]]:
    """The general resolution of one chunk, version by version (the rules of the module doc)."""
    streams = [zip(keys, [-t for t in trailers], values, strict=True)
               for keys, trailers, values, _ in runs]
    merged: Iterable[tuple[bytes, int, bytes]]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams)
    out_keys: list[bytes] = []
    out_values: list[bytes] = []
    add_key, add_value = out_keys.append, out_values.append
    current: bytes | None = None
    done = True  # the current key's newest visible version has been resolved
    operands: list[bytes] = []
    floor = 0  # versions with a sequence below this are range-deleted
    for key, neg_trailer, value in merged:
        if key != current:
            if operands:
                operands.reverse()
                add_key(current)  # type: ignore[arg-type]
                add_value(delimiter.join(operands))
                operands = []
            current = key
            done = False
            if covering is not None:
                floor = covering(key)
        elif done:
            continue
        trailer = -neg_trailer
        if trailer >> 8 < floor:
            done = True
        else:
            value_type = trailer & 0xFF
            if value_type == _VALUE:
                done = True
                add_key(key)
                if operands:
                    operands.append(value)
                    operands.reverse()
                    add_value(delimiter.join(operands))
                    operands = []
                else:
                    add_value(value)
                continue
            if value_type == _MERGE:
                if not merges_allowed:
                    raise UnsupportedFormatError(
                        f"{names}: merge operands of a merge operator other than "
                        f"{sorted(STRING_APPEND_OPERATORS)} cannot be resolved")
                operands.append(value)
                continue
            done = True  # a deletion or single deletion
        if operands:
            operands.reverse()
            add_key(key)
            add_value(delimiter.join(operands))
            operands = []
    if operands:
        operands.reverse()
        add_key(current)  # type: ignore[arg-type]
        add_value(delimiter.join(operands))
    return out_keys, out_values
