"""Checkpoint storage on a directory: ``<root>/chk-<id>`` and ``<root>/savepoint-<id>``.

Implements :class:`statecore.job.CheckpointStorage`: checkpoints are written asynchronously
(:mod:`formats.statectl.async_writer`), listed (a directory counts only once its
``_metadata.json`` exists: in-progress writes are invisible), discarded by retention, opened
for restore. Savepoints are only ever removed by :meth:`DirectoryCheckpointStorage.release`.

The root is a local path or a URI (``s3://...``); the commit protocol is
:mod:`formats.storage.commit`'s. Several processes may use one directory
(:mod:`formats.statectl.claims`): every checkpoint id is claimed before it is written (never
issued twice), one build at a time holds the writer lease, and a checkpoint being read (a
resume, a savepoint's copy) is never deleted. What a crashed writer leaves (an incomplete
directory, a stale pin) is listed by :meth:`DirectoryCheckpointStorage.leftovers` and removed by
:meth:`DirectoryCheckpointStorage.prune`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow.fs as pafs

from formats.statectl.async_writer import PendingCheckpoint, write_checkpoint_async
from formats.statectl.claims import CLAIMS_DIR, Claims, Lease
from formats.statectl.publish import METADATA_FILE
from formats.statectl.reader import StatectlCheckpoint, open_statectl_checkpoint
from formats.statectl.writer import copy_checkpoint
from formats.storage.commit import MARKER, read_marker
from formats.storage.filesystems import (
    join_location,
    redact,
    renames_atomically,
    resolve_filesystem,
    storage_errors,
)
from formats.storage.owners import Owner
from statecore.checkpoint import CheckpointKind, OperatorSnapshot
from statecore.errors import CheckpointError, ConcurrentWriteError, StorageError
from statecore.job import CompletedCheckpoint

__all__ = ["DirectoryCheckpointStorage", "Leftover", "PruneResult", "SnapshotInfo"]


@dataclass(frozen=True)
class SnapshotInfo:
    """A checkpoint or savepoint as ``statectl snapshot list`` shows it.

    ``complete``: whether its metadata was written (a state directory lists complete ones
    only; a Flink job's ``chk-N`` without ``_metadata`` is listed, not complete).
    """

    checkpoint_id: int
    kind: str
    created_ms: int
    bytes: int
    location: str
    complete: bool = True


@dataclass(frozen=True)
class Leftover:
    """Something a writer or reader left in a state directory (see ``snapshot prune``).

    ``what``: ``incomplete`` (a checkpoint directory without ``_metadata.json``: a write that
    did not finish, or a delete that did not), ``marker`` (a complete checkpoint's stray
    ``_inprogress``), ``claim`` (a pin or release intent of a process that is gone).
    ``alive``: whether its owner may still run (then prune leaves it).
    """

    location: str
    what: str
    owner: Owner | None
    alive: bool
    path: str  # on the storage's filesystem


@dataclass(frozen=True)
class PruneResult:
    """What ``snapshot prune`` did: checkpoints released, kept (being read), leftovers removed."""

    released: tuple[int, ...]
    kept: tuple[int, ...]
    removed: tuple[Leftover, ...]


T = TypeVar("T")
_NAME = re.compile(r"(chk|savepoint)-(\d{7,})")
_STAGING = re.compile(r"(chk|savepoint)-(\d{7,})\.inprogress-(\w+)")
_PREFIX = {CheckpointKind.CHECKPOINT: "chk", CheckpointKind.SAVEPOINT: "savepoint"}


def _name(checkpoint_id: int, kind: CheckpointKind) -> str:
    return f"{_PREFIX[kind]}-{checkpoint_id:07d}"


class DirectoryCheckpointStorage:
    """Checkpoints and savepoints of one job under ``root`` (a local path or a URI).

    ``create``: make the directory if missing (writers); readers (``create=False``) refuse a
    directory that does not exist.
    """

    def __init__(self, root: str, filesystem: pafs.FileSystem | None = None, *,
                 create: bool = True, huge_pages: bool = True) -> None:
        #: the process writer collapses the heap into huge pages after each child (a shorter
        #: next fork, :mod:`formats.statectl.huge_pages`); a batch job that does not care
        #: about the stall of its next checkpoint turns it off
        self.huge_pages = huge_pages
        self.fs, self.root = resolve_filesystem(root, filesystem)
        #: locations shown and returned: the URI as given, or the local path made absolute
        self.base = root if "://" in root and filesystem is None else self.root
        self.shown = redact(self.base)
        with storage_errors("opening the state directory", root):
            if create:
                self.fs.create_dir(self.root, recursive=True)
            elif self.fs.get_file_info(self.root).type != pafs.FileType.Directory:
                raise CheckpointError(f"{self.shown} is not a state directory: it does not "
                                      "exist")
        self.claims = Claims(self.fs, self.root)
        self._lease: Lease | None = None
        self._taken: set[int] | None = None

    def location(self, checkpoint_id: int, kind: CheckpointKind) -> str:
        """Where a checkpoint is, as a user gives it (a path, or a URI with its options)."""
        return join_location(self.base, _name(checkpoint_id, kind))

    def _path(self, checkpoint_id: int, kind: CheckpointKind) -> str:
        """A checkpoint's path on :attr:`fs`."""
        return f"{self.root}/{_name(checkpoint_id, kind)}"

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[Lease]:
        """Hold the writer lease for the block (one build per state directory)."""
        with storage_errors("locking the state directory", self.shown):
            lease = self.claims.acquire_writer()
        self._lease = lease
        try:
            yield lease
        finally:
            self._lease = None
            lease.release()

    def claim(self, checkpoint_id: int) -> int:
        """Claim ``checkpoint_id``, or the next id nobody claimed, for a new checkpoint."""
        if self._lease is not None:
            self._lease.check()
        with storage_errors("claiming a checkpoint id in", self.shown):
            if self._taken is None:  # directories from before claims: looked at once
                self._taken = {int(m[2]) for m in map(_NAME.match, self._names()) if m}
            return self.claims.claim_id(checkpoint_id, self._taken)

    def begin(self, checkpoint_id: int, kind: CheckpointKind,
              operators: Sequence[OperatorSnapshot]) -> PendingCheckpoint:
        return write_checkpoint_async(self._path(checkpoint_id, kind), checkpoint_id,
                                      operators, kind=kind, filesystem=self.fs,
                                      huge_pages=self.huge_pages)

    # -- reading -------------------------------------------------------------------------------

    def _names(self) -> list[str]:
        return [info.base_name for info in self.fs.get_file_info(pafs.FileSelector(self.root))
                if info.type == pafs.FileType.Directory]

    def completed(self) -> list[CompletedCheckpoint]:
        """Complete checkpoints and savepoints, by id (a directory without metadata is not)."""
        with storage_errors("listing", self.shown):
            matches = [m for m in map(_NAME.fullmatch, self._names()) if m]
            complete = self._map(lambda m: self.fs.get_file_info(
                f"{self.root}/{m[0]}/{METADATA_FILE}").type == pafs.FileType.File, matches)
        found = []
        for match, is_complete in zip(matches, complete, strict=True):
            if is_complete:
                kind = (CheckpointKind.CHECKPOINT if match[1] == "chk"
                        else CheckpointKind.SAVEPOINT)
                found.append(CompletedCheckpoint(int(match[2]), kind,
                                                 self.location(int(match[2]), kind)))
        return sorted(found, key=lambda c: c.checkpoint_id)

    def _map(self, function: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """``function`` over ``items``; on an object store several requests at once."""
        if renames_atomically(self.fs) or len(items) < 2:
            return [function(item) for item in items]
        with ThreadPoolExecutor(min(8, len(items))) as pool:
            return list(pool.map(function, items))

    def _find(self, checkpoint_id: int) -> CompletedCheckpoint:
        for checkpoint in self.completed():
            if checkpoint.checkpoint_id == checkpoint_id:
                return checkpoint
        raise CheckpointError(f"no completed checkpoint {checkpoint_id} in {self.shown}")

    def open(self, checkpoint_id: int) -> StatectlCheckpoint:
        """Open a completed checkpoint or savepoint of this directory (not pinned)."""
        checkpoint = self._find(checkpoint_id)
        with storage_errors("reading", checkpoint.location):
            return open_statectl_checkpoint(
                self.fs, self._path(checkpoint_id, checkpoint.kind), checkpoint.location)

    @contextmanager
    def reading(self, checkpoint_id: int) -> Iterator[StatectlCheckpoint]:
        """A completed checkpoint, pinned for the block: retention and release leave it."""
        with storage_errors("pinning a checkpoint in", self.shown):
            pin = self.claims.pin(checkpoint_id)
        try:
            yield self.open(checkpoint_id)
        finally:
            self.claims.remove(pin)

    # -- deleting ------------------------------------------------------------------------------

    def discard(self, checkpoint_id: int) -> None:
        """Retention: remove a checkpoint (never a savepoint).

        One that is gone already (released by another process) is fine; one being read is
        kept for now (the next retention takes it).
        """
        kind = CheckpointKind.CHECKPOINT
        with storage_errors("listing", self.shown):
            path = self._path(checkpoint_id, kind)
            if self.fs.get_file_info(f"{path}/{METADATA_FILE}").type != pafs.FileType.File:
                if self.fs.get_file_info(f"{self._path(checkpoint_id, CheckpointKind.SAVEPOINT)}"
                                         f"/{METADATA_FILE}").type == pafs.FileType.File:
                    raise CheckpointError(f"checkpoint {checkpoint_id} is a savepoint: release "
                                          "it by hand")
                return
        checkpoint = CompletedCheckpoint(checkpoint_id, kind, self.location(checkpoint_id, kind))
        try:
            self._delete(checkpoint)
        except ConcurrentWriteError:
            pass

    def release(self, checkpoint_id: int, force: bool = False) -> CompletedCheckpoint:
        """Remove a checkpoint or savepoint on request; its metadata goes first.

        Refuses the latest completed checkpoint unless ``force``: a resume needs its files;
        and one that another process reads (:class:`ConcurrentWriteError`). (Savepoints made
        by :meth:`take_savepoint` hard-link or copy their files, so releasing one never takes
        data from the other.)
        """
        target = self._find(checkpoint_id)
        checkpoints = [c for c in self.completed() if c.kind is CheckpointKind.CHECKPOINT]
        if not force and checkpoints and checkpoints[-1].checkpoint_id == checkpoint_id:
            raise CheckpointError(
                f"checkpoint {checkpoint_id} is the latest: a resume would need it "
                "(release it with --force, or take a newer checkpoint first)")
        self._delete(target)
        return target

    def prune(self, keep: int) -> PruneResult:
        """Release all but the ``keep`` newest checkpoints (not savepoints); remove leftovers.

        A checkpoint being read is kept (``kept``); leftovers whose owner may still run stay.
        """
        if keep < 1:
            raise CheckpointError("keep at least one checkpoint")
        checkpoints = [c for c in self.completed() if c.kind is CheckpointKind.CHECKPOINT]
        released, kept = [], []
        for checkpoint in checkpoints[:-keep]:
            try:
                self._delete(checkpoint)
            except ConcurrentWriteError:
                kept.append(checkpoint.checkpoint_id)
            else:
                released.append(checkpoint.checkpoint_id)
        removed = []
        for leftover in self.leftovers():
            if not leftover.alive:
                self._remove(leftover)
                removed.append(leftover)
        return PruneResult(tuple(released), tuple(kept), tuple(removed))

    def _delete(self, checkpoint: CompletedCheckpoint) -> None:
        path = self._path(checkpoint.checkpoint_id, checkpoint.kind)
        with storage_errors("releasing", checkpoint.location):
            with self.claims.releasing(checkpoint.checkpoint_id):
                try:
                    # without its metadata a half-deleted directory no longer looks complete
                    self.fs.delete_file(f"{path}/{METADATA_FILE}")
                    self.fs.delete_dir(path)
                except FileNotFoundError:
                    pass  # released meanwhile by another process
            self.claims.drop_id(checkpoint.checkpoint_id)

    # -- leftovers -----------------------------------------------------------------------------

    def leftovers(self) -> list[Leftover]:
        """What crashed writers and readers left here, each with whether its owner may run."""
        found = []
        now = int(time.time() * 1000)
        with storage_errors("listing", self.shown):
            infos = {info.base_name: info for info in
                     self.fs.get_file_info(pafs.FileSelector(self.root))
                     if info.type == pafs.FileType.Directory}
            for name, info in sorted(infos.items()):
                path = f"{self.root}/{name}"
                location = join_location(self.base, name)
                if _STAGING.fullmatch(name):
                    owner = read_marker(self.fs, path)
                    young = info.mtime_ns is not None and \
                        now - info.mtime_ns // 1_000_000 < 60_000
                    alive = self.claims.alive(owner) if owner is not None else young
                    found.append(Leftover(location, "incomplete", owner, alive, path))
                elif _NAME.fullmatch(name) and not renames_atomically(self.fs):
                    complete = self.fs.get_file_info(f"{path}/{METADATA_FILE}").type == \
                        pafs.FileType.File
                    owner = read_marker(self.fs, path)
                    alive = owner is not None and self.claims.alive(owner)
                    if not complete and (owner is not None or not self._empty(path)):
                        found.append(Leftover(location, "incomplete", owner, alive, path))
                    elif owner is not None:
                        found.append(Leftover(join_location(location, MARKER), "marker", owner,
                                              alive, f"{path}/{MARKER}"))
            for name in self.claims.stale():
                found.append(Leftover(join_location(self.base, f"{CLAIMS_DIR}/{name}"), "claim",
                                      None, False, self.claims.path(name)))
        return found

    def _empty(self, path: str) -> bool:
        """Whether ``path`` holds no file.

        A store may list directories emptied by deletes (SeaweedFS's filer keeps them): they
        are no objects, and nothing to remove.
        """
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=True)
        infos = self.fs.get_file_info(selector)
        return not any(info.type == pafs.FileType.File for info in infos)

    def _remove(self, leftover: Leftover) -> None:
        with storage_errors("removing", leftover.location):
            try:
                if leftover.what == "incomplete":
                    self.fs.delete_dir(leftover.path)
                else:
                    self.fs.delete_file(leftover.path)
            except FileNotFoundError:
                pass

    # -- savepoints and listing ----------------------------------------------------------------

    def take_savepoint(self, from_checkpoint: int | None = None) -> SnapshotInfo:
        """A savepoint with the state of a completed checkpoint (default: the latest).

        Its id is claimed (the next after every id issued); its files are hard links to the
        checkpoint's on the local disk, server-side copies on an object store, so it costs no
        rewrite, and retention never removes it. The source is pinned while it is copied.
        """
        completed = self.completed()
        if not completed:
            raise CheckpointError(f"no completed checkpoint in {self.shown} to take a "
                                  "savepoint of")
        source = completed[-1] if from_checkpoint is None else self._find(from_checkpoint)
        new_id = self.claim(completed[-1].checkpoint_id + 1)
        location = self._path(new_id, CheckpointKind.SAVEPOINT)
        with self.reading(source.checkpoint_id) as checkpoint:
            copy_checkpoint(checkpoint, location, new_id, CheckpointKind.SAVEPOINT,
                            shown=self.location(new_id, CheckpointKind.SAVEPOINT))
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
        """Every completed checkpoint and savepoint, by id (one released meanwhile: left out)."""
        def one(checkpoint: CompletedCheckpoint) -> SnapshotInfo | None:
            path = self._path(checkpoint.checkpoint_id, checkpoint.kind)
            try:
                with storage_errors("reading", checkpoint.location):
                    metadata = open_statectl_checkpoint(self.fs, path,
                                                        checkpoint.location).metadata
            except StorageError:
                raise
            except CheckpointError:
                if self.fs.get_file_info(f"{path}/{METADATA_FILE}").type == pafs.FileType.File:
                    raise
                return None  # released meanwhile
            return SnapshotInfo(checkpoint.checkpoint_id, checkpoint.kind.value,
                                metadata.created_ms, sum(f.size for f in metadata.files),
                                checkpoint.location)

        return [info for info in self._map(one, self.completed()) if info is not None]

