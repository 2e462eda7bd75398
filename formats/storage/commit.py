"""The commit protocol: how a checkpoint, savepoint or export becomes complete, on any store.

An output is a directory, complete exactly when its **commit file** exists: ``_metadata.json``
(a statectl checkpoint), ``_metadata`` (a Flink savepoint), ``_manifest.json`` (an export).
The commit file is written last, after every data file is durably stored, as one atomic
operation; readers treat a directory without it as absent. Existing outputs are never
overwritten. :func:`staged` and :func:`commit` implement it in two ways, chosen by the
filesystem (:func:`formats.storage.filesystems.renames_atomically`):

**rename** (the local disk, HDFS): the output is built in a fresh sibling
``<final>.inprogress-<token>`` holding an ``_inprogress`` marker (its :class:`Owner`); data
files are fsynced; the commit file is written under a temporary name, fsynced and renamed;
the marker is removed; the directory is renamed to ``final`` (which fails if ``final`` was
published meanwhile) and the parent fsynced. A crash leaves only the sibling.

**in place** (object stores, which rename nothing atomically and have no directories): the
writer claims ``final`` by creating ``<final>/_inprogress`` create-only
(:func:`formats.storage.conditional.create_only`; a second writer of the same output gets a
:class:`~statecore.errors.ConcurrentWriteError`), writes the data files under ``final``, then
the commit file with one request (an object appears whole or not at all), then deletes the
marker. A crash leaves ``final`` without a commit file, its marker saying who wrote it.

On failure the writer removes what it wrote -- except, in place, once the commit file's
request was sent: it may have succeeded (a timeout says nothing), so the directory is left for
``statectl snapshot prune`` to judge (:func:`read_marker`, :func:`formats.statectl.claims`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow.fs as pafs

from formats.storage.conditional import create_only
from formats.storage.filesystems import (
    explain,
    fsync,
    redact,
    renames_atomically,
    storage_errors,
)
from formats.storage.owners import Owner, holding, this_process
from statecore.errors import CheckpointError, ConcurrentWriteError, StatectlError, StorageError

__all__ = ["MARKER", "StagedDirectory", "commit", "new_token", "read_marker", "remove_staging",
           "staged", "staging_path"]

#: The marker of an output being written: its owner, as JSON (see :mod:`formats.storage.owners`).
MARKER = "_inprogress"


class StagedDirectory(str):
    """The directory an output is written into (a ``str``), and how it will be committed."""

    final: str
    in_place: bool
    owner: Owner
    commit_started: bool

    def __new__(cls, path: str, final: str, in_place: bool, owner: Owner) -> StagedDirectory:
        staged_dir = super().__new__(cls, path)
        staged_dir.final, staged_dir.in_place, staged_dir.owner = final, in_place, owner
        staged_dir.commit_started = False
        return staged_dir

    def __reduce__(self) -> Any:  # a plain path once pickled (into Spark tasks)
        return (str, (str(self),))


def new_token() -> str:
    """A random name for a staging directory (see :func:`staged`)."""
    return uuid.uuid4().hex[:12]


def staging_path(final: str, token: str) -> str:
    return f"{final}.inprogress-{token}"


@contextmanager
def staged(fs: pafs.FileSystem, final: str, shown: str, action: str,
           token: str | None = None) -> Iterator[StagedDirectory]:
    """The directory to build the output ``final`` in (see the module doc).

    ``token`` (default: random) names the writer. Refuses a ``final`` that exists; on any
    failure removes what was written (see the module doc for the exception) and turns an
    ``OSError`` into a :class:`~statecore.errors.StorageError`.
    """
    where = redact(shown)
    with storage_errors(action, shown):
        if fs.get_file_info(final).type != pafs.FileType.NotFound and (
                renames_atomically(fs) or _holds_files(fs, final)):
            writer = read_marker(fs, final)
            if writer is not None and writer.alive():
                raise ConcurrentWriteError(_taken(fs, final, where))
            raise CheckpointError(f"{where} already exists; a checkpoint is never overwritten")
    owner = this_process(token)
    with holding(owner):  # its marker is live while this runs
        yield from _staged(fs, final, shown, action, where, owner)


def _staged(fs: pafs.FileSystem, final: str, shown: str, action: str, where: str,
            owner: Owner) -> Iterator[StagedDirectory]:
    in_place = not renames_atomically(fs)
    staging = StagedDirectory(final if in_place else staging_path(final, owner.token), final,
                              in_place, owner)
    with storage_errors(action, shown):
        if in_place:
            if not create_only(fs, f"{final}/{MARKER}", owner.to_bytes()):
                raise ConcurrentWriteError(_taken(fs, final, where))
            if _published(fs, final):  # published by a writer that finished meanwhile
                _remove_marker(fs, final)
                raise CheckpointError(f"{where} already exists; a checkpoint is never "
                                      "overwritten")
        else:
            fs.create_dir(staging, recursive=True)
            with fs.open_output_stream(f"{staging}/{MARKER}") as out:
                out.write(owner.to_bytes())
    try:
        yield staging
    except BaseException as exc:
        if not (staging.in_place and staging.commit_started):
            try:
                fs.delete_dir(staging)
            except OSError:
                pass  # unreachable store: `snapshot prune` removes it later
        if isinstance(exc, OSError) and not isinstance(exc, StatectlError):
            raise StorageError(f"{action} {where} failed: {explain(exc)}") from exc
        raise


def _taken(fs: pafs.FileSystem, final: str, where: str) -> str:
    owner = read_marker(fs, final)
    by = f" ({owner.describe()})" if owner is not None else ""
    return f"{where} is being written by another process{by}; choose another output"


def _published(fs: pafs.FileSystem, final: str) -> bool:
    """Whether ``final`` holds any file but its marker (a commit file, an output's files)."""
    return _holds_files(fs, final, but=MARKER)


def _holds_files(fs: pafs.FileSystem, path: str, but: str | None = None) -> bool:
    """Whether there is a file under ``path`` (other than ``path/but``).

    A file that exists is no directory to write into. An object store may list a directory
    whose objects were all deleted (SeaweedFS keeps the entry): holding no file, it is free.
    """
    if fs.get_file_info(path).type == pafs.FileType.File:
        return True
    for recursive in (False, True):
        found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True,
                                                   recursive=recursive))
        if any(info.type == pafs.FileType.File and info.path != f"{path}/{but}"
               for info in found):
            return True
        if not any(info.type == pafs.FileType.Directory for info in found):
            return False
    return False


def commit(fs: pafs.FileSystem, staging: str, final: str, name: str, data: bytes) -> None:
    """Write the commit file ``name`` (``data``) last, and publish ``staging`` at ``final``."""
    if isinstance(staging, StagedDirectory) and staging.in_place:
        staging.commit_started = True
        with fs.open_output_stream(f"{staging}/{name}") as out:  # one PUT: whole or absent
            out.write(data)
        _remove_marker(fs, staging)
        return
    temporary = f"{staging}/{name}.tmp"
    with fs.open_output_stream(temporary) as out:
        out.write(data)
    fsync(fs, temporary)
    fs.move(temporary, f"{staging}/{name}")
    _remove_marker(fs, staging)
    fs.move(staging, final)
    fsync(fs, final.rsplit("/", 1)[0] if "/" in final else ".")


def _remove_marker(fs: pafs.FileSystem, directory: str) -> None:
    try:
        fs.delete_file(f"{directory}/{MARKER}")
    except OSError:
        pass  # a stray marker in a complete output: `snapshot prune` removes it


def read_marker(fs: pafs.FileSystem, directory: str) -> Owner | None:
    """The owner recorded in ``directory``'s marker, or None (no marker, or unreadable)."""
    try:
        with fs.open_input_stream(f"{directory}/{MARKER}") as stream:
            return Owner.from_bytes(bytes(stream.read(1 << 16)))
    except OSError:
        return None


def remove_staging(fs: pafs.FileSystem, final: str, token: str, commit_file: str) -> None:
    """Remove what a writer that died (it could not clean up) left for ``final``.

    ``token`` is the writer's. In place, ``final`` is removed only while it is still that
    writer's and has no commit file.
    """
    try:
        if renames_atomically(fs):
            fs.delete_dir(staging_path(final, token))
            return
        owner = read_marker(fs, final)
        if owner is not None and owner.token == token and \
                fs.get_file_info(f"{final}/{commit_file}").type == pafs.FileType.NotFound:
            fs.delete_dir(final)
    except OSError:  # nothing staged, already removed, or unreachable
        pass
