"""The asynchronous half of a checkpoint: write on a worker thread while processing goes on.

The synchronous half is the backends' ``snapshot()`` (O(buckets / 1024) per map, seeds 000 and
004); :func:`write_checkpoint_async` hands those snapshots to a thread of its own, which writes
key group by key group and releases each group's map snapshots as soon as it is written
(``formats.checkpoint_v1``). Several checkpoints may be in flight at once, each on its own
thread. On failure or :meth:`PendingCheckpoint.cancel`, every snapshot is released and the
partial directory removed: nothing that looks like a checkpoint is left.

The worker shares the GIL with the processing thread: while it gathers a row group's values
and converts them with ``pa.array`` (up to 8192 rows at a time) it holds the GIL, so processing
slows down for the checkpoint's duration; Parquet encoding, hashing and fsync release it. The
benchmarks (``make bench``, section "checkpoint") measure both effects.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

import pyarrow.fs as pafs

from formats.checkpoint_v1 import OperatorSnapshot, write_checkpoint
from statecore.checkpoint import CheckpointKind, CheckpointMetadata

__all__ = ["PendingCheckpoint", "write_checkpoint_async"]


class PendingCheckpoint:
    """A checkpoint being written on a worker thread.

    ``result()`` waits for the metadata (it is complete only then: its ``_metadata.json`` is
    durably written) or raises what the write raised; ``cancel()`` asks the writer to stop at
    the next key group, after which ``result()`` raises
    :class:`~statecore.errors.CheckpointCancelledError`.
    """

    def __init__(self, checkpoint_id: int, location: str) -> None:
        self.checkpoint_id = checkpoint_id
        self.location = location
        self._cancel = threading.Event()
        self._future: Future[CheckpointMetadata] = Future()
        self._thread: threading.Thread | None = None

    def _start(self, operators: Sequence[OperatorSnapshot], kind: CheckpointKind,
               created_ms: int | None, filesystem: pafs.FileSystem | None) -> None:
        def run() -> None:
            self._future.set_running_or_notify_cancel()
            try:
                metadata = write_checkpoint(
                    self.location, self.checkpoint_id, operators, kind=kind,
                    created_ms=created_ms, filesystem=filesystem, cancelled=self._cancel.is_set)
            except BaseException as exc:  # handed to whoever waits on result()
                self._future.set_exception(exc)
            else:
                self._future.set_result(metadata)

        self._thread = threading.Thread(
            target=run, name=f"statectl-checkpoint-{self.checkpoint_id}", daemon=True)
        self._thread.start()

    def result(self, timeout: float | None = None) -> CheckpointMetadata:
        return self._future.result(timeout)

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> None:
        """Ask the writer to stop; it cleans up and its result becomes a cancellation."""
        self._cancel.set()

    def __repr__(self) -> str:
        state = "done" if self.done() else "in flight"
        return f"PendingCheckpoint({self.checkpoint_id}, {self.location!r}, {state})"


def write_checkpoint_async(
    location: str,
    checkpoint_id: int,
    operators: Sequence[OperatorSnapshot],
    *,
    kind: CheckpointKind = CheckpointKind.CHECKPOINT,
    created_ms: int | None = None,
    filesystem: pafs.FileSystem | None = None,
) -> PendingCheckpoint:
    """Start writing ``operators``' snapshots as a checkpoint and return at once."""
    pending = PendingCheckpoint(checkpoint_id, location)
    pending._start(operators, kind, created_ms, filesystem)
    return pending
