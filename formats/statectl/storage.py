"""Checkpoint storage on a directory: ``<root>/chk-<id>`` and ``<root>/savepoint-<id>``.

Implements :class:`statecore.job.CheckpointStorage`: checkpoints are written asynchronously
(:mod:`formats.statectl.async_writer`), listed (a directory counts only once its
``_metadata.json`` exists: in-progress writes are invisible), discarded by retention, opened
for restore.
Savepoints are only ever removed by :meth:`DirectoryCheckpointStorage.release`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs

from formats.filesystems import resolve_filesystem
from formats.statectl.async_writer import PendingCheckpoint, write_checkpoint_async
from formats.statectl.publish import METADATA_FILE
from formats.statectl.reader import StatectlCheckpoint, open_statectl_checkpoint
from formats.statectl.writer import copy_checkpoint
from statecore.checkpoint import CheckpointKind, OperatorSnapshot
from statecore.errors import CheckpointError
from statecore.job import CompletedCheckpoint

__all__ = ["DirectoryCheckpointStorage", "SnapshotInfo"]


@dataclass(frozen=True)
class SnapshotInfo:
    """A completed checkpoint or savepoint as ``statectl snapshot list`` shows it."""

    checkpoint_id: int
    kind: str
    created_ms: int
    bytes: int
    location: str


_NAME = re.compile(r"(chk|savepoint)-(\d{7,})")
_PREFIX = {CheckpointKind.CHECKPOINT: "chk", CheckpointKind.SAVEPOINT: "savepoint"}


class DirectoryCheckpointStorage:
    """Checkpoints and savepoints of one job under ``root`` (a local path or a URI)."""

    def __init__(self, root: str, filesystem: pafs.FileSystem | None = None) -> None:
        self.fs, self.root = resolve_filesystem(root, filesystem)
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

    def open(self, checkpoint_id: int) -> StatectlCheckpoint:
        """Open a completed checkpoint or savepoint of this directory."""
        location = self._find(checkpoint_id).location
        return open_statectl_checkpoint(self.fs, location, location)

    def discard(self, checkpoint_id: int) -> None:
        """Retention: remove a checkpoint (never a savepoint)."""
        checkpoint = self._find(checkpoint_id)
        if checkpoint.kind is CheckpointKind.SAVEPOINT:
            raise CheckpointError(f"{checkpoint.location} is a savepoint: release it by hand")
        self._delete(checkpoint)

    def release(self, checkpoint_id: int, force: bool = False) -> CompletedCheckpoint:
        """Remove a checkpoint or savepoint on request; its metadata goes first.

        Refuses the latest completed checkpoint unless ``force``: a resume needs its files.
        (Savepoints made by :meth:`take_savepoint` hard-link their files, so releasing one never
        takes data from the other.)
        """
        target = self._find(checkpoint_id)
        checkpoints = [c for c in self.completed() if c.kind is CheckpointKind.CHECKPOINT]
        if not force and checkpoints and checkpoints[-1].checkpoint_id == checkpoint_id:
            raise CheckpointError(
                f"checkpoint {checkpoint_id} is the latest: a resume would need it "
                "(release it with force, or take a newer checkpoint first)")
        self._delete(target)
        return target

    def prune(self, keep: int) -> list[int]:
        """Retention by hand: release all but the ``keep`` newest checkpoints (not savepoints)."""
        if keep < 1:
            raise CheckpointError("keep at least one checkpoint")
        checkpoints = [c for c in self.completed() if c.kind is CheckpointKind.CHECKPOINT]
        released = [c.checkpoint_id for c in checkpoints[:-keep]]
        for checkpoint_id in released:
            self._delete(self._find(checkpoint_id))
        return released

    def take_savepoint(self, from_checkpoint: int | None = None) -> SnapshotInfo:
        """A savepoint with the state of a completed checkpoint (default: the latest).

        Its files are hard links to the checkpoint's (copies where links are impossible), so
        it costs no rewrite, and retention never removes it.
        """
        completed = self.completed()
        if not completed:
            raise CheckpointError(f"no completed checkpoint in {self.root} to take a savepoint of")
        source = completed[-1] if from_checkpoint is None else self._find(from_checkpoint)
        new_id = completed[-1].checkpoint_id + 1
        location = self.location(new_id, CheckpointKind.SAVEPOINT)
        copy_checkpoint(self.open(source.checkpoint_id), location, new_id,
                        CheckpointKind.SAVEPOINT)
        return self.describe(new_id)

    def describe(self, checkpoint_id: int | None = None) -> SnapshotInfo:
        """One completed checkpoint's id, kind, time, size and location."""
        checkpoint = self._find(checkpoint_id) if checkpoint_id is not None else \
            self.completed()[-1]
        metadata = self.open(checkpoint.checkpoint_id).metadata
        return SnapshotInfo(checkpoint.checkpoint_id, checkpoint.kind.value,
                            metadata.created_ms, sum(f.size for f in metadata.files),
                            checkpoint.location)

    def list(self) -> list[SnapshotInfo]:
        """Every completed checkpoint and savepoint, by id."""
        return [self.describe(c.checkpoint_id) for c in self.completed()]

    def _delete(self, checkpoint: CompletedCheckpoint) -> None:
        try:
            # without its metadata a half-deleted directory no longer looks complete
            self.fs.delete_file(f"{checkpoint.location}/{METADATA_FILE}")
            self.fs.delete_dir(checkpoint.location)
        except OSError as exc:
            raise CheckpointError(f"cannot remove {checkpoint.location}: {exc}") from exc
