"""Snapshots found in directories, each a database of ``statectl query`` (issue 44, item 1).

``statectl query DIR… SQL`` takes, besides snapshots, directories that hold them: a Flink job's
checkpoint directory (``chk-*`` and ``shared/``), a folder of savepoints, a statectl state
directory, any mix, local or on object storage (:func:`snapshot_locations` finds them by
listing; :func:`discover` then reads each one's metadata alone, several at once, as a bucket of
hundreds of checkpoints needs). Every complete snapshot becomes a database named by a stable
label: ``chk_<id>`` for a checkpoint, ``savepoint_<id>`` for a savepoint (a second one of the
same id: ``_2``, ...). The newest (highest id, then latest) is the default database,
and the table ``snapshots`` lists them all: ``label``, ``kind``, ``checkpoint_id``, ``created``,
``flink_release``, ``location``, ``bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.fs as pafs

from formats.model.checkpoint import Checkpoint
from formats.open import METADATA_FILES, open_checkpoint
from formats.statectl.claims import CLAIMS_DIR
from formats.statectl.storage import SnapshotInfo
from formats.storage.concurrent import in_order, readers_for
from formats.storage.filesystems import join_location, resolve_filesystem, storage_errors
from statecore.errors import CheckpointError, InvalidArgumentError, StorageError

__all__ = ["Chosen", "Databases", "Found", "chosen", "databases", "discover", "is_snapshot",
           "newest", "snapshot_locations", "snapshots_table"]


#: How deep below a location given snapshots are looked for: a Flink job's ``chk-*`` below its
#: job-ID directory below the folder given, or a folder of state directories or of jobs.
SEARCH_DEPTH = 3


@dataclass(frozen=True)
class Found:
    """A snapshot found, the name of its database, and the snapshot opened."""

    label: str
    info: SnapshotInfo
    checkpoint: Checkpoint = field(compare=False, repr=False)


def is_snapshot(location: str) -> bool:
    """Whether ``location`` is a snapshot itself (its directory, or its metadata file)."""
    fs, root = resolve_filesystem(location, None)
    root = root.rstrip("/") or root
    if root.rsplit("/", 1)[-1] in METADATA_FILES:
        return True
    with storage_errors("reading", location):
        return any(fs.get_file_info(f"{root}/{name}").type.name == "File"
                   for name in METADATA_FILES)


def snapshot_locations(locations: Sequence[str]) -> list[str]:
    """Every complete snapshot at or in ``locations``, found by listing alone (nothing read).

    Per location: itself if it is a snapshot; else every directory below it, down to
    :data:`SEARCH_DEPTH` levels, with a snapshot's metadata file -- a statectl state
    directory's ``chk-*``/``savepoint-*``, a Flink job's ``chk-*`` (also below its job-ID
    directory), savepoints of any names, statectl checkpoints of any names, any mix. A
    ``chk-*`` or ``savepoint-*`` without its metadata is being written, or was abandoned: not
    one, nor looked into. Each once, in the order found (by name per level).
    """
    found: list[str] = []
    for location in locations:
        found += [location] if is_snapshot(location) else _below(location, SEARCH_DEPTH)
    return list(dict.fromkeys(found))


def _below(location: str, levels: int) -> list[str]:
    """The snapshots below directory ``location``, down to ``levels`` levels."""
    fs, root = resolve_filesystem(location, None)
    root = root.rstrip("/") or root
    with storage_errors("listing", location):
        if fs.get_file_info(root).type != pafs.FileType.Directory:
            return []
        children = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(root))
                          if i.type == pafs.FileType.Directory and i.base_name not in _SKIPPED)
    # a bucket of hundreds of checkpoints: their metadata files looked for several at once
    shown = [join_location(location, name) for name in children]
    out: list[str] = []
    for name, child, snapshot in zip(children, shown, in_order(is_snapshot, shown,
                                                                readers_for([fs])),
                                     strict=True):
        if snapshot:
            out.append(child)
        elif levels > 1 and not name.startswith(("chk-", "savepoint-")):
            out += _below(child, levels - 1)
    return out


#: Directories that hold no snapshot: a Flink job's shared and task-owned files, a state
#: directory's claims.
_SKIPPED = ("shared", "taskowned", CLAIMS_DIR)


def _default_opener(location: str) -> Checkpoint:
    return open_checkpoint(location, decode=False, partial=True)


def discover(locations: Sequence[str], opener: Callable[[str], Checkpoint] | None = None
             ) -> list[Found]:
    """Every complete snapshot in ``locations`` (:func:`snapshot_locations`), opened, labelled.

    Each is opened once, by ``opener`` (default: its metadata alone,
    ``open_checkpoint(decode=False, partial=True)``); on object storage up to
    :data:`~formats.storage.concurrent.READERS` at once, so ``opener`` runs on worker threads.
    Its id, kind and time come from that metadata; ordered by id, then time, then location.
    """
    found = snapshot_locations(locations)
    opened = in_order(lambda location: _info(opener or _default_opener, location), found,
                      readers_for(resolve_filesystem(location, None)[0] for location in found))
    out: list[Found] = []
    taken: dict[str, int] = {}
    for info, checkpoint in sorted(filter(None, opened), key=_order):
        base = f"{'chk' if info.kind == 'checkpoint' else 'savepoint'}_{info.checkpoint_id}"
        taken[base] = taken.get(base, 0) + 1
        out.append(Found(base if taken[base] == 1 else f"{base}_{taken[base]}", info,
                         checkpoint))
    return out


def _order(opened: tuple[SnapshotInfo, Checkpoint]) -> tuple[int, int, str]:
    info = opened[0]
    return info.checkpoint_id, info.created_ms, info.location


def _info(opener: Callable[[str], Checkpoint], location: str
          ) -> tuple[SnapshotInfo, Checkpoint] | None:
    """The snapshot at ``location`` opened, and its listing.

    A statectl checkpoint's bytes from its metadata, a Flink snapshot's from its directory's
    listing. ``None`` if it was released since it was listed (its metadata gone).
    """
    try:
        checkpoint = opener(location)
    except StorageError:
        raise
    except CheckpointError:
        if is_snapshot(location):
            raise
        return None
    metadata = checkpoint.metadata
    if checkpoint.format_name == "statectl":
        size = sum(f.size for f in metadata.files)
    else:
        fs, root = resolve_filesystem(location, None)
        root = root.rstrip("/") or root
        if root.rsplit("/", 1)[-1] in METADATA_FILES:  # given as its metadata file
            root = root.rsplit("/", 1)[0]
        with storage_errors("listing", location):
            size = sum(i.size or 0 for i in fs.get_file_info(
                pafs.FileSelector(root, recursive=True)) if i.type == pafs.FileType.File)
    return SnapshotInfo(metadata.checkpoint_id, metadata.kind.value, metadata.created_ms, size,
                        location), checkpoint


def newest(found: Sequence[Found]) -> Found:
    """The default database: the highest id, then the latest."""
    return max(found, key=lambda f: (f.info.checkpoint_id, f.info.created_ms))


@dataclass(frozen=True)
class Chosen:
    """The snapshot chosen in a directory and every one found there.

    ``before``: it is the newest before another (:func:`chosen`'s ``other_than`` is there).
    """

    snapshot: Found
    found: list[Found]
    before: bool


def chosen(location: str, *, other_than: str | None = None) -> Chosen | None:
    """The snapshot a one-snapshot command reads for ``location``, and every one found.

    ``location`` a snapshot: itself (``None``: nothing to choose). A directory holding
    snapshots: the newest found (:func:`discover`, metadata alone). With ``other_than`` (the
    location of a snapshot already chosen, e.g. ``browse --against``): the newest other than
    that one, and older than it where it is among those found (``browse DIR --against DIR``:
    the snapshot before the newest). A directory without such a snapshot: a
    :class:`~statecore.errors.CheckpointError`.
    """
    if is_snapshot(location):
        return None
    require_existing([location])
    found = discover([location])
    where = [_place(f.info.location) for f in found]  # however each was spelled
    browsed = _place(other_than) if other_than is not None else None
    before = where.index(browsed) if browsed in where else len(found)
    candidates = [f for f, at in zip(found[:before], where[:before], strict=True)
                  if at != browsed]
    if not candidates:
        raise CheckpointError(
            f"no complete snapshot in {location}" + (
                f" other than {other_than}" if found else "")
            + " (a snapshot, or a directory holding snapshots: a Flink job's checkpoint "
              "directory, a state directory, savepoints)")
    return Chosen(newest(candidates), found, before < len(found))


def require_existing(locations: Sequence[str]) -> None:
    """Refuse a location that does not exist (rather than finding no snapshot in it)."""
    for location in locations:
        fs, root = resolve_filesystem(location, None)
        with storage_errors("reading", location):
            missing = fs.get_file_info(root).type == pafs.FileType.NotFound
        if missing:
            raise CheckpointError(f"{location} does not exist; give a snapshot or a directory "
                                  "holding snapshots (a Flink job's checkpoint directory, a "
                                  "state directory, savepoints)")


def _place(location: str) -> tuple[str, str]:
    """Where ``location`` is, however it is spelled (relative, ``..``, a trailing ``/``)."""
    fs, root = resolve_filesystem(location, None)
    root = root.rstrip("/") or root
    if root.rsplit("/", 1)[-1] in METADATA_FILES:
        root = root.rsplit("/", 1)[0]
    return fs.type_name, root


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
    state headers only, ``open_checkpoint(decode=False, partial=True)``); it opens the
    snapshots found on worker threads, several at once, each once.
    """
    opening = opener or _default_opener
    named = dict(named or {})
    if len(locations) == 1 and is_snapshot(locations[0]):
        if "snapshot" in named:
            raise InvalidArgumentError("'snapshot' names PATH; give the other one another name")
        snapshots = {"snapshot": opening(locations[0])}
        snapshots.update({n: opening(p) for n, p in named.items()})
        return Databases(snapshots, "snapshot", {})
    require_existing(locations)
    found = discover(locations, opening) if locations else []
    if locations and not found:
        raise CheckpointError(f"no complete snapshot in {', '.join(locations)} (a snapshot, or "
                              "a directory holding snapshots: a Flink job's checkpoint "
                              "directory, a state directory, savepoints)")
    clash = sorted({f.label for f in found} & set(named))
    if clash:
        raise InvalidArgumentError(f"--as {clash[0]}=...: a snapshot found is labelled so; "
                                   "choose another name")
    snapshots = {f.label: f.checkpoint for f in found}
    extra = {"snapshots": snapshots_table(found, {label: c.releases()
                                                 for label, c in snapshots.items()})}
    snapshots.update({n: opening(p) for n, p in named.items()})
    default = newest(found).label if found else next(iter(snapshots))
    return Databases(snapshots, default, extra if found else {})
