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
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence

from formats.flink.rocksdb.coding import corrupt
from formats.flink.rocksdb.dbformat import ValueType
from formats.flink.rocksdb.sst import RangeTombstone, SstFile
from statecore.errors import InvalidArgumentError, UnsupportedFormatError

__all__ = ["TombstoneMap", "live_items", "live_range"]

#: Merge operators whose operands are joined with a delimiter, as Flink's list state uses them.
STRING_APPEND_OPERATORS = frozenset({"StringAppendTESTOperator", "StringAppendOperator"})

_MERGE = int(ValueType.MERGE)
_VALUE = int(ValueType.VALUE)


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


def _stream(table: SstFile, start: bytes | None,
            end: bytes | None) -> Iterator[tuple[bytes, int, bytes]]:
    """``(user_key, -trailer, value)`` of a table: tuples in live-view order (newest first)."""
    for keys, trailers, values in table.data_blocks(start, end):
        yield from zip(keys, [-t for t in trailers], values, strict=True)


def _live(tables: Sequence[SstFile], start: bytes | None, end: bytes | None,
          delimiter: bytes) -> Iterator[tuple[bytes, bytes]]:
    merges_allowed = _check_tables(tables)
    tombstones = TombstoneMap(t for table in tables for t in table.range_tombstones())
    covering = tombstones.covering if tombstones else None
    streams = [_stream(table, start, end) for table in tables]
    merged: Iterable[tuple[bytes, int, bytes]]
    if len(streams) == 1:
        merged = streams[0]
    else:
        merged = heapq.merge(*streams)
    names = ", ".join(t.name for t in tables)

    current: bytes | None = None
    done = True  # the current key's newest visible version has been resolved
    operands: list[bytes] = []
    floor = 0  # versions with a sequence below this are range-deleted
    for key, neg_trailer, value in merged:
        if key != current:
            if operands:
                operands.reverse()
                yield current, delimiter.join(operands)  # type: ignore[misc]
                operands = []
            if current is not None and key < current:
                raise corrupt(names, "entries out of key order")
            current = key
            if start is not None and key < start or end is not None and key >= end:
                done = True
                if end is not None and key >= end:
                    return
                continue
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
                if operands:
                    operands.append(value)
                    operands.reverse()
                    yield key, delimiter.join(operands)
                    operands = []
                else:
                    yield key, value
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
            yield key, delimiter.join(operands)
            operands = []
    if operands:
        operands.reverse()
        yield current, delimiter.join(operands)  # type: ignore[misc]
