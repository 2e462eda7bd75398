"""Where checkpoints and outputs live: filesystems, durable writes and staging directories.

Every reader and writer goes through ``pyarrow.fs``: :func:`resolve_filesystem` turns a local
path or any URI pyarrow supports into a filesystem and a path. A checkpoint, savepoint, export or
rescaled copy is built in a fresh staging directory beside its final place (:func:`staged`),
which the format's writer then publishes (statectl's: :mod:`formats.statectl.publish`). A crash
leaves either nothing or a complete output, and nothing is ever overwritten.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.fs as pafs

from statecore.errors import CheckpointError

__all__ = ["fsync", "new_token", "remove_staging", "resolve_filesystem", "staged",
           "staging_path"]


def resolve_filesystem(location: str, filesystem: pafs.FileSystem | None = None
               ) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of ``location`` (a local path or a URI), or ``filesystem``'s."""
    if filesystem is not None:
        return filesystem, location
    if "://" in location:
        try:
            fs, path = pafs.FileSystem.from_uri(location)
            return fs, str(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise CheckpointError(f"cannot open {location}: {exc}") from exc
    return pafs.LocalFileSystem(), os.path.abspath(location)


def fsync(fs: pafs.FileSystem, path: str) -> None:
    """Flush a file (or directory) to stable storage when it is on the local disk."""
    if isinstance(fs, pafs.LocalFileSystem):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def staged(fs: pafs.FileSystem, final: str, shown: str, action: str,
           token: str | None = None) -> Iterator[str]:
    """A fresh ``<final>.inprogress-<token>`` directory to build a checkpoint in.

    ``token`` defaults to a random one. Refuses a ``final`` that exists (a checkpoint is never
    overwritten); on any failure the staging directory is removed and an ``OSError`` becomes a
    :class:`CheckpointError`.
    """
    if fs.get_file_info(final).type != pafs.FileType.NotFound:
        raise CheckpointError(f"{shown} already exists; a checkpoint is never overwritten")
    staging = staging_path(final, token or new_token())
    try:
        fs.create_dir(staging, recursive=True)
        yield staging
    except BaseException as exc:
        try:
            fs.delete_dir(staging)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise CheckpointError(f"{action} {shown} failed: {exc}") from exc
        raise


def new_token() -> str:
    """A random name for a staging directory (see :func:`staged`)."""
    return uuid.uuid4().hex[:12]


def staging_path(final: str, token: str) -> str:
    return f"{final}.inprogress-{token}"


def remove_staging(fs: pafs.FileSystem, final: str, token: str) -> None:
    """Remove what a writer that died (it could not clean up) left staged for ``final``."""
    try:
        fs.delete_dir(staging_path(final, token))
    except OSError:  # nothing staged, or already removed
        pass
