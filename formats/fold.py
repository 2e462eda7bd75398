"""Folding runs of input records per key for ``statectl build`` (a ``statecore.job.RecordFolder``).

A build whose aggregations are all foldable (``count``; ``sum``/``min``/``max`` of an integer
column; no TTL: :attr:`statecore.aggregations.Aggregation.foldable`) need not call its function
once per record: :class:`AggregationFolder` takes a run of records straight from the input's
Arrow table, groups it by key with Arrow (``Table.group_by``: count, sum, min, max in C++), and
hands the job one folded value per distinct key, with the key groups computed for the whole
column at once (:func:`formats.key_hash.key_groups`). The state is the one-by-one state (the
job cuts runs at checkpoint trigger points; see :mod:`statecore.aggregations` for why the
reductions agree). A run is not folded, and the job processes it one by one, whenever that could
differ:

* a null key (one by one raises at that record);
* key types whose Python equality is not Java's (floats: ``0.0 == -0.0``, ``nan != nan``), or a
  ``--key-type`` other than the column's own (its checks run per record);
* a key group that cannot be computed (an error one by one raises at its record);
* a sum that could overflow Arrow's int64 accumulator (``max |value| * values >= 2**63``);
  statecore's sums are Python ints.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from formats.inputs import FileSource
from formats.key_hash import key_groups
from statecore.aggregations import Aggregation
from statecore.errors import StatectlError
from statecore.job import FoldedRecords

__all__ = ["AggregationFolder", "foldable"]

#: Key column types whose Python equality is Java's ``equals`` (folding groups by value).
_FOLDABLE_KEYS = frozenset({"int8", "int16", "int32", "int64", "string", "bytes"})
_INT64_LIMIT = 1 << 63
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
        # what Arrow computes per group, and the output column of each aggregation
        self._sum_columns = sorted({a.column for a in aggregations
                                    if a.op == "sum" and a.column is not None})
        specs: dict[str, tuple[Any, ...]] = {}  # output column -> Arrow's aggregation
        self._outputs: list[str] = []
        for a in self.aggregations:
            spec: tuple[Any, ...]
            if a.op == "count":
                output, spec = "count_all", ([], "count_all")
            else:
                assert a.column is not None
                output, spec = f"{a.column}_{a.op}", (a.column, a.op)
            specs[output] = spec  # each computation once
            self._outputs.append(output)
        self._specs = list(specs.values())

    def fold(self, split: str, position: int, count: int) -> FoldedRecords | None:
        table = self.source.checked_table(split, position)
        run = table.slice(position, count)
        end = position + run.num_rows
        if run.num_rows == 0:
            return FoldedRecords(end, (), (), ())
        keys = run.column(self.key)
        if keys.null_count or not self._sums_fit(run):
            return None
        grouped = run.group_by(self.key, use_threads=False).aggregate(self._specs)
        distinct = grouped.column(self.key).combine_chunks()
        try:
            groups = key_groups(distinct, self.key_type, self.max_parallelism)
        except (StatectlError, ValueError, OverflowError):
            return None
        # Arrow's allocator keeps what the grouping used (about 2x the run's keys) unless
        # told: the state about to grow from this run would otherwise come on top of it
        pa.default_memory_pool().release_unused()
        return FoldedRecords(end, _in_chunks(distinct), _in_chunks(groups),
                             self._folded_values(grouped))

    def _folded_values(self, grouped: pa.Table) -> Iterator[tuple[Any, ...]]:
        """Each distinct key's folded value, turned into Python objects a chunk at a time."""
        columns = [grouped.column(name) for name in self._outputs]
        for start in range(0, grouped.num_rows, _CHUNK):
            yield from zip(*(c.slice(start, _CHUNK).to_pylist() for c in columns),
                           strict=True)

    def _sums_fit(self, run: pa.Table) -> bool:
        """Whether every per-key sum of the run fits Arrow's int64 accumulator."""
        for name in self._sum_columns:
            column = run.column(name)
            extremes = pc.min_max(column).as_py()
            if extremes["min"] is None:
                continue
            largest = max(abs(extremes["min"]), abs(extremes["max"]))
            if largest * (len(column) - column.null_count) >= _INT64_LIMIT:
                return False
        return True
