"""Reading a keyed handle in runs of key groups, so that memory holds a run, not a snapshot.

Every command that reads all of a snapshot's keyed state (``export``, ``verify``) reads each
keyed handle through :func:`keyed_runs`: runs of whole key groups of about :data:`CHUNK_ROWS`
rows (where the rows per key group are known) or :data:`CHUNK_BYTES` stored bytes (a Flink
snapshot opened without decoding: its streams' key-group offsets), never the snapshot whole
(issue 45). A run's rows are those of its key groups alone, in key-group order.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pyarrow as pa

from formats.model.checkpoint import Checkpoint
from statecore.checkpoint import KeyedStateHandle

__all__ = ["CHUNK_BYTES", "CHUNK_ROWS", "key_group_chunks", "keyed_runs"]

#: A keyed state is read in runs of key groups of about this many rows (where the rows per key
#: group are known) or stored bytes (a Flink snapshot opened without decoding: its streams'
#: key-group offsets), never whole: memory holds a run, not the snapshot (issue 45).
CHUNK_ROWS = 200_000
CHUNK_BYTES = 1 << 20


def key_group_chunks(checkpoint: Checkpoint, uid: str, handle: KeyedStateHandle
                     ) -> list[range] | None:
    """Runs of ``handle``'s key groups to read one at a time; ``None``: read it whole.

    Every state of a handle's subtask is cut alike (the same stream's offsets), so reading
    each state's run in turn decodes the run once (:mod:`formats.flink.read.snapshot_model`
    keeps the last pieces decoded).
    """
    rng = handle.key_group_range
    if handle.rows:
        weights, limit = [(r.key_group, r.row_count) for r in handle.rows], CHUNK_ROWS
    else:
        estimates = checkpoint.key_group_estimates(uid, handle)
        if estimates is None:
            return None
        weights, limit = estimates, CHUNK_BYTES
    if sum(w for _, w in weights) <= limit:
        return None
    chunks, first, held = [], rng.start, 0
    for group, weight in sorted(weights):
        if held and held + weight > limit and group > first:
            chunks.append(range(first, group))
            first, held = group, 0
        held += weight
    chunks.append(range(first, rng.end + 1))
    return chunks


#: One read of a handle: the run of key groups it holds (``None``: all the handle's, read as
#: stored) and the function that reads its rows as an Arrow table in the model's columns.
KeyedRun = tuple[range | None, Callable[[], pa.Table]]


def keyed_runs(checkpoint: Checkpoint, uid: str, handle: KeyedStateHandle) -> list[KeyedRun]:
    """The reads of ``handle``'s rows, one run of key groups each (:func:`key_group_chunks`).

    A handle of a snapshot opened without decoding that fits in one run is read as one run of
    all its key groups too: decoded as a piece, it is not kept once read (the snapshot keeps
    only its last few pieces), where reading it whole would keep it decoded.
    """
    chunks = key_group_chunks(checkpoint, uid, handle)
    if chunks is None and checkpoint.key_group_estimates(uid, handle) is not None:
        rng = handle.key_group_range
        chunks = [range(rng.start, rng.end + 1)]
    if chunks is None:
        return [(None, partial(checkpoint.keyed_table, uid, handle))]
    return [(chunk, partial(checkpoint.keyed_table_in, uid, handle, chunk))
            for chunk in chunks]
