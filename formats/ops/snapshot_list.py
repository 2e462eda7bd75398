"""What ``statectl snapshot list`` lists: the snapshots of a state directory, or of a Flink job.

A statectl state directory (``chk-<id>/`` and ``savepoint-<id>/``, what ``build`` writes) lists
its complete checkpoints and savepoints
(:meth:`formats.statectl.storage.DirectoryCheckpointStorage.list`). A Flink job's checkpoint
directory (the folder holding ``chk-N/`` and ``shared/``, or the job folder above it, one more
level for a folder of jobs), a folder of Flink savepoints, or a Flink snapshot itself lists
every ``chk-N`` and savepoint found, each with its id, kind and time from its ``_metadata``
(read alone, :func:`formats.open.open_checkpoint` without decoding) and the bytes of its own
directory's files; a ``chk-N`` without ``_metadata`` (being written, or abandoned: Flink did
not complete it) is listed as incomplete, its id from its name and its time the directory's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pyarrow.fs as pafs

from formats.open import METADATA_FILES, open_checkpoint
from formats.statectl.claims import CLAIMS_DIR
from formats.statectl.publish import METADATA_FILE
from formats.statectl.storage import DirectoryCheckpointStorage, SnapshotInfo
from formats.storage.concurrent import in_order, readers_for
from formats.storage.filesystems import join_location, resolve_filesystem, storage_errors

__all__ = ["list_snapshots"]

#: A Flink snapshot's metadata file (statectl's is :data:`METADATA_FILE`).
FLINK_METADATA_FILE = next(name for name in METADATA_FILES if name != METADATA_FILE)
#: How deep below a directory given Flink snapshots are looked for (<dir>/<job id>/chk-N, and
#: one more level for a folder of jobs).
SEARCH_DEPTH = 3
#: Directories of a Flink job's checkpoint directory that hold no snapshot.
_NOT_SNAPSHOTS = ("shared", "taskowned")


def list_snapshots(locations: Sequence[str]) -> list[SnapshotInfo]:
    """The snapshots at ``locations``, by id (then location), each listed once.

    A location without a Flink snapshot is read as a statectl state directory (an empty one
    lists nothing). On object storage the Flink snapshots' metadata is read
    :data:`~formats.storage.concurrent.READERS` at a time.
    """
    found: dict[str, SnapshotInfo] = {}
    for location in locations:
        places = _flink_places(location)
        listed = (in_order(_listed, places, readers_for(p.fs for p in places)) if places
                  else DirectoryCheckpointStorage(location, create=False).list())
        for info in listed:
            found.setdefault(info.location, info)
    return sorted(found.values(), key=lambda s: (s.checkpoint_id, s.location))


class _Place(NamedTuple):
    """A Flink snapshot's directory found by listing (``info``: a ``chk-N`` without metadata)."""

    fs: pafs.FileSystem
    path: str
    shown: str
    complete: bool
    info: pafs.FileInfo | None = None


def _listed(place: _Place) -> SnapshotInfo:
    """The snapshot's listing (its metadata read, if complete)."""
    with storage_errors("listing", place.shown):
        if place.complete:
            return _snapshot(place.fs, place.path, place.shown)
        assert place.info is not None
        return _incomplete(place.fs, place.info, place.shown)


def _flink_places(location: str) -> list[_Place]:
    """The Flink snapshots at or below ``location`` (empty when it holds none), by listing."""
    fs, root = resolve_filesystem(location, None)
    root = root.rstrip("/") or root
    if root.endswith("/" + FLINK_METADATA_FILE):
        root, location = root.rsplit("/", 1)[0], location.rsplit("/", 1)[0]
    with storage_errors("listing", location):
        if _is_file(fs, f"{root}/{FLINK_METADATA_FILE}"):
            return [_Place(fs, root, location, True)]
        if _is_file(fs, f"{root}/{METADATA_FILE}") or fs.get_file_info(
                root).type != pafs.FileType.Directory or fs.get_file_info(
                f"{root}/{CLAIMS_DIR}").type == pafs.FileType.Directory:
            return []  # statectl's: a checkpoint, or a state directory (with its claims)
        out: list[_Place] = []
        level = [(location, root)]
        for _ in range(SEARCH_DEPTH):
            deeper = []
            for shown, path in level:
                for child in sorted((i for i in fs.get_file_info(pafs.FileSelector(path))
                                     if i.type == pafs.FileType.Directory),
                                    key=lambda i: i.base_name):
                    name, child_shown = child.base_name, join_location(shown, child.base_name)
                    if _is_file(fs, f"{child.path}/{METADATA_FILE}"):
                        continue  # a statectl checkpoint: its state directory lists it
                    if _is_file(fs, f"{child.path}/{FLINK_METADATA_FILE}"):
                        out.append(_Place(fs, child.path, child_shown, True))
                    elif _chk_id(name) is not None:
                        out.append(_Place(fs, child.path, child_shown, False, child))
                    elif name not in _NOT_SNAPSHOTS and not name.startswith("savepoint-"):
                        deeper.append((child_shown, child.path))
            level = deeper
    return out


def _snapshot(fs: pafs.FileSystem, root: str, location: str) -> SnapshotInfo:
    """A complete Flink snapshot: id, kind and time from its ``_metadata``."""
    metadata = open_checkpoint(location, decode=False, partial=True).metadata
    return SnapshotInfo(metadata.checkpoint_id, metadata.kind.value, metadata.created_ms,
                        _bytes(fs, root), location)


def _incomplete(fs: pafs.FileSystem, info: pafs.FileInfo, location: str) -> SnapshotInfo:
    """A ``chk-N`` without ``_metadata``: Flink did not complete it."""
    checkpoint_id = _chk_id(info.base_name)
    assert checkpoint_id is not None
    return SnapshotInfo(checkpoint_id, "checkpoint", (info.mtime_ns or 0) // 1_000_000,
                        _bytes(fs, info.path), location, complete=False)


def _chk_id(name: str) -> int | None:
    number = name.removeprefix("chk-")
    return int(number) if number != name and number.isdigit() else None


def _is_file(fs: pafs.FileSystem, path: str) -> bool:
    return bool(fs.get_file_info(path).type == pafs.FileType.File)


def _bytes(fs: pafs.FileSystem, root: str) -> int:
    """The bytes of the files in a snapshot's directory (not the job's ``shared/`` ones)."""
    return sum(i.size or 0 for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
               if i.type == pafs.FileType.File)
