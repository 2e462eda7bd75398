"""Checkpoint storage on a directory: ``<root>/chk-<id>`` and ``<root>/savepoint-<id>``.

Implements :class:`statecore.job.CheckpointStorage`: checkpoints are written asynchronously
(:mod:`formats.async_checkpoint`), listed (a directory counts only once its ``_metadata.json``
exists: in-progress writes are invisible), discarded by retention, opened for restore.
Savepoints are only ever removed by :meth:`DirectoryCheckpointStorage.release`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow.fs as pafs

from formats.async_checkpoint import PendingCheckpoint, write_checkpoint_async
from formats.checkpoint_v1 import METADATA_FILE, Checkpoint, _filesystem, open_checkpoint
from statecore.checkpoint import CheckpointKind, OperatorSnapshot
from statecore.errors import CheckpointError
from statecore.job import CompletedCheckpoint

__all__ = ["DirectoryCheckpointStorage"]

_NAME = re.compile(r"(chk|savepoint)-(\d{7,})")
_PREFIX = {CheckpointKind.CHECKPOINT: "chk", CheckpointKind.SAVEPOINT: "savepoint"}


class DirectoryCheckpointStorage:
    """Checkpoints and savepoints of one job under ``root`` (a local path or a URI)."""

    def __init__(self, root: str, filesystem: pafs.FileSystem | None = None) -> None:
        self.fs, self.root = _filesystem(root, filesystem)
        self.fs.create_dir(self.root, recursive=True)

    def location(self, checkpoint_id: int, kind: CheckpointKind) -> str:
        return f"{self.root}/{_PREFIX[kind]}-{checkpoint_id:07d}"

    def begin(self, checkpoint_id: int, kind: CheckpointKind,
              operators: Sequence[OperatorSnapshot]) -> PendingCheckpoint:
        return write_checkpoint_async(self.location(checkpoint_id, kind), checkpoint_id,
                                      operators, kind=kind, filesystem=self.fs)

    def completed(self) -> list[CompletedCheckpoint]:
        """Complete checkpoints and savepoints, by id (a directory without metadata is not)."""
        found = []
        for info in self.fs.get_file_info(pafs.FileSelector(self.root)):
            match = _NAME.fullmatch(info.base_name)
            if info.type != pafs.FileType.Directory or not match:
                continue
            if self.fs.get_file_info(f"{info.path}/{METADATA_FILE}").type != pafs.FileType.File:
                continue
            kind = CheckpointKind.CHECKPOINT if match[1] == "chk" else CheckpointKind.SAVEPOINT
            found.append(CompletedCheckpoint(int(match[2]), kind, info.path))
        return sorted(found, key=lambda c: c.checkpoint_id)

    def _find(self, checkpoint_id: int) -> CompletedCheckpoint:
        for checkpoint in self.completed():
            if checkpoint.checkpoint_id == checkpoint_id:
                return checkpoint
        raise CheckpointError(f"no completed checkpoint {checkpoint_id} in {self.root}")

    def open(self, checkpoint_id: int) -> Checkpoint:
        return open_checkpoint(self._find(checkpoint_id).location, filesystem=self.fs)

    def discard(self, checkpoint_id: int) -> None:
        """Retention: remove a checkpoint (never a savepoint)."""
        checkpoint = self._find(checkpoint_id)
        if checkpoint.kind is CheckpointKind.SAVEPOINT:
            raise CheckpointError(f"{checkpoint.location} is a savepoint: release it by hand")
        self._delete(checkpoint)

    def release(self, checkpoint_id: int) -> None:
        """Remove a checkpoint or savepoint on request; its metadata goes first."""
        self._delete(self._find(checkpoint_id))

    def _delete(self, checkpoint: CompletedCheckpoint) -> None:
        try:
            # without its metadata a half-deleted directory no longer looks complete
            self.fs.delete_file(f"{checkpoint.location}/{METADATA_FILE}")
            self.fs.delete_dir(checkpoint.location)
        except OSError as exc:
            raise CheckpointError(f"cannot remove {checkpoint.location}: {exc}") from exc
