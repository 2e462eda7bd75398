"""Pieces of a checkpoint read on every core: forked workers, results in order, bounded.

Decoding a Flink snapshot is pure Python: one process uses one core. ``export`` reads a
snapshot in *units* (a run of key groups of one subtask, every state of its operator: one
piece decoded once) that do not depend on each other; :func:`read_units` reads them in forked
worker processes, each of which inherits the opened checkpoint (nothing is pickled but the
results, Arrow tables), and yields their results in the units' order, at most
:data:`AHEAD` per worker in flight, so memory holds a few units, never the snapshot.

What a worker could not decode comes back with its unit and is added to the checkpoint
(:meth:`formats.model.checkpoint.Checkpoint.add_undecodable`), as if read here. Workers fork
only from a local snapshot (an object store's client does not survive a fork) and only where
the work is worth a process start (:func:`worker_count`); else the units are read here, in
order, the same way.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import pyarrow as pa

from formats.model.checkpoint import Checkpoint
from statecore.undecodable import UndecodablePart

__all__ = ["AHEAD", "MIN_UNITS", "Unit", "read_units", "worker_count"]

#: A unit: the reads of one piece's states, ``(tag, read)`` each; its result: ``(tag, table)``
#: each, in the same order.
Unit = Sequence[tuple[Any, Callable[[], pa.Table]]]

#: Units in flight per worker.
AHEAD = 2
#: Below this many units the work is read in this process (a worker costs a fork and a pipe).
MIN_UNITS = 4

#: The units of the read in progress: set before the workers fork, read by them.
_UNITS: Sequence[Unit] = ()
_CHECKPOINT: Checkpoint | None = None


def worker_count(checkpoint: Checkpoint, units: int, requested: int | None = None) -> int:
    """How many worker processes read ``units`` units of ``checkpoint`` (0: this process).

    ``requested`` (``None``: ``$STATECTL_WORKERS``, else the cores this process may use);
    none for a snapshot on object storage, or for fewer than :data:`MIN_UNITS` units.
    """
    if requested is None:
        given = os.environ.get("STATECTL_WORKERS")
        try:
            requested = int(given) if given else len(os.sched_getaffinity(0))
        except (ValueError, AttributeError):
            requested = os.cpu_count() or 1
    remote = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", checkpoint.location)
    if requested <= 1 or units < MIN_UNITS or (remote and remote.group() != "file://"):
        return 0
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return min(requested, units)


def _ignore_interrupts() -> None:
    """In a worker: Ctrl-C is the parent's to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read(index: int) -> tuple[list[tuple[Any, pa.Table]], list[UndecodablePart]]:
    """In a worker: unit ``index`` read, and what could not be decoded reading it."""
    assert _CHECKPOINT is not None
    before = len(_CHECKPOINT.undecodable_parts())
    tables = [(tag, read()) for tag, read in _UNITS[index]]
    return tables, _CHECKPOINT.undecodable_parts()[before:]


def read_units(checkpoint: Checkpoint | None, units: Sequence[Unit], workers: int
               ) -> Generator[list[tuple[Any, pa.Table]], None, None]:
    """Each unit's ``(tag, table)`` list, in the units' order, read by ``workers`` processes.

    ``workers`` 0 (or no ``checkpoint``): read here. An error a worker meets is raised here,
    when its unit's turn comes; the workers are stopped when the iteration ends, however it
    ends (``close()``).
    """
    if workers <= 0 or checkpoint is None:
        for unit in units:
            yield [(tag, read()) for tag, read in unit]
        return
    global _UNITS, _CHECKPOINT
    _UNITS, _CHECKPOINT = units, checkpoint
    pending: deque[Future[tuple[list[tuple[Any, pa.Table]], list[UndecodablePart]]]] = deque()
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_ignore_interrupts)
    try:
        following = iter(range(len(units)))
        for index in following:
            pending.append(pool.submit(_read, index))
            if len(pending) >= workers * AHEAD:
                break
        while pending:
            tables, lost = pending.popleft().result()
            nxt = next(following, None)
            if nxt is not None:
                pending.append(pool.submit(_read, nxt))
            checkpoint.add_undecodable(lost)
            yield tables
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        _UNITS, _CHECKPOINT = (), None
