"""Folding runs of input records per key for ``statectl build`` (a ``statecore.job.RecordFolder``).

A build whose aggregations are all foldable (``count``; ``sum``/``min``/``max`` of an integer
column; no TTL: :attr:`statecore.aggregations.Aggregation.foldable`) need not call its function
once per record: :class:`AggregationFolder` takes a run of records straight from the input's
Arrow batches, groups it by key (Arrow's ``dictionary_encode``: the distinct keys in order of
first appearance and each record's index into them), reduces each group with NumPy (count,
sum, min, max; not ``Table.group_by``, whose Acero imports pandas: 35 MB for a build), and
hands the job one folded value per distinct key, with the key groups computed for the whole
column at once (:func:`formats.model.key_hash.key_groups`). The state is the one-by-one state (the
job cuts runs at checkpoint trigger points; see :mod:`statecore.aggregations` for why the
reductions agree). A run is not folded, and the job processes it one by one, whenever that could
differ:

* a null key (one by one raises at that record);
* key types whose Python equality is not Java's (floats: ``0.0 == -0.0``, ``nan != nan``), or a
  ``--key-type`` other than the column's own (its checks run per record);
* a key group that cannot be computed (an error one by one raises at its record).

Integer sums wrap around as Java's do (:mod:`formats.ops.build`): a run's sums are int64 NumPy
sums, which wrap at 64 bits, cast to the column's type (which wraps an int8..int32 sum at its
width), and the state adds them with its type's wrapping sum, so a folded sum is the
one-by-one sum for every integer type (both are the true sum modulo ``2**bits``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from formats.inputs import MEMORY_POOL, FileSource
from formats.model.key_hash import key_groups, numpy_integers, numpy_validity
from statecore.aggregations import Aggregation
from statecore.errors import StatectlError
from statecore.job import FoldedRecords, SkippedRecord

__all__ = ["MIN_RUN_RECORDS", "AggregationFolder", "foldable"]

#: Key column types whose Python equality is Java's ``equals`` (folding groups by value).
_FOLDABLE_KEYS = frozenset({"int8", "int16", "int32", "int64", "string", "bytes"})
#: The shortest run folded at once (see :meth:`AggregationFolder.fold`).
MIN_RUN_RECORDS = 1 << 16
#: Distinct keys of a folded run turned into Python objects at a time.
_CHUNK = 1 << 16


def _in_chunks(values: pa.ChunkedArray | pa.Array | np.ndarray[Any, Any]) -> Iterator[Any]:
    """``values`` as Python objects, converted a chunk at a time.

    A folded run may hold millions of distinct keys: converting them all at once would hold
    every temporary list (and the interpreter's memory for them) on top of the state.
    """
    for start in range(0, len(values), _CHUNK):
        part = values[start:start + _CHUNK]
        yield from (part.tolist() if isinstance(part, np.ndarray) else part.to_pylist())


def foldable(aggregations: Sequence[Aggregation], key_column_type: str, key_type: str) -> bool:
    """Whether a build with these aggregations and key can fold runs of records per key."""
    return (bool(aggregations) and all(a.foldable for a in aggregations)
            and key_type == key_column_type and key_type in _FOLDABLE_KEYS)


class AggregationFolder:
    """Runs of ``source``'s records folded per ``key`` for ``aggregations`` (all foldable).

    ``key_type`` and ``max_parallelism`` are the job's: they decide the key groups handed over.
    The folded value of a key is a tuple with one entry per aggregation, what
    ``AggregatingFunction.process_folded`` applies.
    """

    def __init__(self, source: FileSource, key: str, key_type: str, max_parallelism: int,
                 aggregations: Sequence[Aggregation]) -> None:
        if not foldable(aggregations, source.column_types[key], key_type):
            raise ValueError("these aggregations or this key cannot be folded")
        self.source, self.key, self.key_type = source, key, key_type
        self.max_parallelism = max_parallelism
        self.aggregations = list(aggregations)
        self.run_records = MIN_RUN_RECORDS  # the next run's length (adapts; see fold)
        # each reduction once: (op, column) per aggregation, in order
        self._reductions = [("count", None) if a.op == "count" else (a.op, a.column)
                            for a in self.aggregations]

    def fold(self, split: str, position: int, count: int) -> FoldedRecords | None:
        """Up to ``count`` records from ``position``, folded; fewer when runs are short.

        A run is :attr:`run_records` long (at most ``count``). Folding pays where keys repeat,
        while a run's memory (its batches, its distinct keys) grows with its length: a run
        whose distinct keys are at most a quarter of its records doubles the next one; one
        where they are more than half halves it, down to :data:`MIN_RUN_RECORDS`.
        """
        wanted = min(count, self.run_records)
        run, end, bad = self.source.run(split, position, wanted)
        # bad records (--on-bad-record skip) are not in the run: the job counts them
        skipped = tuple(SkippedRecord(record.reason) for record in bad)
        if run.num_rows == 0:
            return FoldedRecords(end, (), (), (), skipped)
        keys = run.column(self.key)
        if keys.null_count:
            return None
        # the distinct keys in order of first appearance (as one by one meets them), and each
        # record's index into them
        encoded = pc.dictionary_encode(keys.combine_chunks(MEMORY_POOL),
                                       memory_pool=MEMORY_POOL)
        distinct = encoded.dictionary
        try:
            groups = key_groups(distinct, self.key_type, self.max_parallelism, MEMORY_POOL)
        except (StatectlError, ValueError, OverflowError):
            return None
        if end - position == wanted:
            if 4 * len(distinct) <= wanted:
                self.run_records *= 2
            elif 2 * len(distinct) > wanted:
                self.run_records = max(MIN_RUN_RECORDS, self.run_records // 2)
        index = numpy_integers(encoded.indices)
        reduced = {spec: _reduce(spec, run, index, len(distinct))
                   for spec in dict.fromkeys(self._reductions)}
        columns = [reduced[spec] for spec in self._reductions]
        # the input stream's read buffers come from Arrow's default pool (mimalloc), which
        # keeps what is freed unless told: 10-30 MB over a build (MEMORY_POOL is the rest)
        pa.default_memory_pool().release_unused()
        return FoldedRecords(end, _in_chunks(distinct), _in_chunks(groups),
                             _folded_values(columns, len(distinct)), skipped)


#: One reduction per distinct key, and which keys had a non-null value (``None``: all).
Reduced = tuple["np.ndarray[Any, Any]", "np.ndarray[Any, Any] | None"]


def _reduce(spec: tuple[str, str | None], run: pa.Table, index: np.ndarray[Any, Any],
            groups: int) -> Reduced:
    """One reduction per distinct key: its values, and which keys had a non-null value.

    ``index[i]`` is record ``i``'s distinct key. ``count`` counts records; ``sum``, ``min``
    and ``max`` reduce an integer column's non-null values (the mask is ``None`` when every
    key had one; a key without one folds to ``None``). Sums wrap at their type's width (module
    doc).
    """
    op, name = spec
    if name is None:
        return np.bincount(index, minlength=groups), None
    column = run.column(name).combine_chunks(MEMORY_POOL)
    present = None
    if column.null_count:
        index = index[numpy_validity(column)]
        present = np.bincount(index, minlength=groups) > 0
        column = pc.drop_null(column, memory_pool=MEMORY_POOL)
    native = numpy_integers(column)
    values = native.astype(np.int64, copy=False)
    if op == "sum":
        out = np.zeros(groups, np.int64)
        np.add.at(out, index, values)
        # an int8..int32 sum wraps at its type's width (the cast truncates, as Java's does)
        out = out.astype(native.dtype).astype(np.int64)
    elif op == "min":
        out = np.full(groups, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(out, index, values)
    else:
        out = np.full(groups, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(out, index, values)
    return out, present


def _folded_values(columns: Sequence[Reduced], groups: int) -> Iterator[tuple[Any, ...]]:
    """Each distinct key's folded value, turned into Python objects a chunk at a time."""
    for start in range(0, groups, _CHUNK):
        lists = []
        for values, present in columns:
            part = values[start:start + _CHUNK].tolist()
            if present is not None:
                for i in np.flatnonzero(~present[start:start + _CHUNK]).tolist():
                    part[i] = None
            lists.append(part)
        yield from zip(*lists, strict=True)
