"""Snapshots found in directories, each a database of ``statectl query`` (issue 44, item 1).

``statectl query DIR… SQL`` takes, besides snapshots, directories that hold them: a Flink job's
checkpoint directory (``chk-*`` and ``shared/``), a folder of savepoints, a statectl state
directory, any mix, local or on object storage (:func:`formats.ops.snapshot_list.list_snapshots`
finds them, reading each one's metadata alone). Every complete snapshot becomes a database named
by a stable label: ``chk_<id>`` for a checkpoint, ``savepoint_<id>`` for a savepoint (a second
one of the same id: ``_2``, ...). The newest (highest id, then latest) is the default database,
and the table ``snapshots`` lists them all: ``label``, ``kind``, ``checkpoint_id``, ``created``,
``flink_release``, ``location``, ``bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.fs as pafs

from formats.model.checkpoint import Checkpoint
from formats.open import METADATA_FILES, open_checkpoint
from formats.ops.snapshot_list import list_snapshots
from formats.statectl.storage import SnapshotInfo
from formats.storage.filesystems import join_location, resolve_filesystem, storage_errors
from statecore.errors import CheckpointError, InvalidArgumentError

__all__ = ["Databases", "Found", "databases", "discover", "is_snapshot", "newest",
           "snapshots_table"]


@dataclass(frozen=True)
class Found:
    """A snapshot found, and the name of its database."""

    label: str
    info: SnapshotInfo


def is_snapshot(location: str) -> bool:
    """Whether ``location`` is a snapshot itself (its directory, or its metadata file)."""
    fs, root = resolve_filesystem(location, None)
    root = root.rstrip("/") or root
    if root.rsplit("/", 1)[-1] in METADATA_FILES:
        return True
    with storage_errors("reading", location):
        return any(fs.get_file_info(f"{root}/{name}").type.name == "File"
                   for name in METADATA_FILES)


def discover(locations: Sequence[str]) -> list[Found]:
    """Every complete snapshot in ``locations`` (directories holding snapshots), labelled.

    What ``snapshot list`` lists of each; where that is nothing, the snapshots among the
    location's own subdirectories (a folder of statectl checkpoints of any names).
    """
    infos = []
    for location in locations:
        listed = [info for info in list_snapshots([location]) if info.complete]
        infos += listed or _children(location)
    out: list[Found] = []
    taken: dict[str, int] = {}
    for info in sorted(infos, key=lambda i: (i.checkpoint_id, i.created_ms, i.location)):
        base = f"{'chk' if info.kind == 'checkpoint' else 'savepoint'}_{info.checkpoint_id}"
        taken[base] = taken.get(base, 0) + 1
        out.append(Found(base if taken[base] == 1 else f"{base}_{taken[base]}", info))
    return out


def _children(location: str) -> list[SnapshotInfo]:
    """The snapshots that are ``location``'s own subdirectories, from their metadata."""
    fs, root = resolve_filesystem(location, None)
    with storage_errors("listing", location):
        if fs.get_file_info(root).type != pafs.FileType.Directory:
            return []
        children = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(root))
                          if i.type == pafs.FileType.Directory)
    out = []
    for name in children:
        child = join_location(location, name)
        if not is_snapshot(child):
            continue
        metadata = open_checkpoint(child, decode=False, partial=True).metadata
        size = sum(i.size or 0 for i in fs.get_file_info(
            pafs.FileSelector(f"{root.rstrip('/')}/{name}", recursive=True))
            if i.type == pafs.FileType.File)
        out.append(SnapshotInfo(metadata.checkpoint_id, metadata.kind.value,
                                metadata.created_ms, size, child))
    return out


def newest(found: Sequence[Found]) -> Found:
    """The default database: the highest id, then the latest."""
    return max(found, key=lambda f: (f.info.checkpoint_id, f.info.created_ms))


def snapshots_table(found: Sequence[Found], releases: Mapping[str, str | None]) -> pa.Table:
    """The ``snapshots`` table: one row per snapshot found (``releases`` by label)."""
    return pa.Table.from_pylist([{
        "label": f.label, "kind": f.info.kind, "checkpoint_id": f.info.checkpoint_id,
        "created": datetime.fromtimestamp(f.info.created_ms / 1000, tz=UTC),
        "flink_release": releases.get(f.label), "location": f.info.location,
        "bytes": f.info.bytes} for f in found], schema=pa.schema([
            ("label", pa.string()), ("kind", pa.string()), ("checkpoint_id", pa.int64()),
            ("created", pa.timestamp("ms", tz="UTC")), ("flink_release", pa.string()),
            ("location", pa.string()), ("bytes", pa.int64())]))


@dataclass(frozen=True)
class Databases:
    """What a query runs over: the snapshots by database name, the default, extra tables."""

    snapshots: dict[str, Checkpoint]
    default: str
    extra: dict[str, pa.Table]


def databases(locations: Sequence[str], named: Mapping[str, str] | None = None, *,
              opener: Callable[[str], Checkpoint] | None = None) -> Databases:
    """The databases of ``statectl query LOCATION… --as NAME=PATH``.

    One snapshot given is the database ``snapshot`` (as ever); directories holding snapshots,
    or several locations, are discovered (:func:`discover`): each snapshot found a database
    named by its label, the newest the default, and the ``snapshots`` table. ``named``
    snapshots keep their names. ``opener`` opens one location (default: its metadata and
    state headers only, ``open_checkpoint(decode=False, partial=True)``).
    """
    def default_opener(location: str) -> Checkpoint:
        return open_checkpoint(location, decode=False, partial=True)

    opening = opener or default_opener
    named = dict(named or {})
    if len(locations) == 1 and is_snapshot(locations[0]):
        if "snapshot" in named:
            raise InvalidArgumentError("'snapshot' names PATH; give the other one another name")
        snapshots = {"snapshot": opening(locations[0])}
        snapshots.update({n: opening(p) for n, p in named.items()})
        return Databases(snapshots, "snapshot", {})
    found = discover(locations) if locations else []
    if locations and not found:
        raise CheckpointError(f"no complete snapshot in {', '.join(locations)} (a snapshot, or "
                              "a directory holding snapshots: a Flink job's checkpoint "
                              "directory, a state directory, savepoints)")
    clash = sorted({f.label for f in found} & set(named))
    if clash:
        raise InvalidArgumentError(f"--as {clash[0]}=...: a snapshot found is labelled so; "
                                   "choose another name")
    snapshots = {f.label: opening(f.info.location) for f in found}
    extra = {"snapshots": snapshots_table(found, {label: c.releases()
                                                 for label, c in snapshots.items()})}
    snapshots.update({n: opening(p) for n, p in named.items()})
    default = newest(found).label if found else next(iter(snapshots))
    return Databases(snapshots, default, extra if found else {})
