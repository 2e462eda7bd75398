"""Opening a checkpoint of any format: ``open_checkpoint`` detects it from the directory.

statectl's checkpoint is a directory with ``_metadata.json`` (:mod:`formats.statectl.reader`);
a real Flink checkpoint or savepoint is a directory with ``_metadata``
(:mod:`formats.flink.checkpoint`). Both come back as the model's
:class:`~formats.model.Checkpoint`, so every operation works on either.
"""

from __future__ import annotations

import pyarrow.fs as pafs

from formats.filesystems import resolve_filesystem
from formats.flink.checkpoint import FLINK_METADATA_FILE, is_flink_checkpoint, open_flink_checkpoint
from formats.model import Checkpoint
from formats.statectl.publish import METADATA_FILE
from formats.statectl.reader import open_statectl_checkpoint

__all__ = ["open_checkpoint"]


def open_checkpoint(location: str, *, filesystem: pafs.FileSystem | None = None,
                    strict: bool = True, allow_pickle: bool = False,
                    decode: bool = True) -> Checkpoint:
    """Open and validate a checkpoint or savepoint, statectl's or Flink's (detected here).

    ``location`` is the directory, or its metadata file, as a local path or a URI pyarrow
    supports. ``strict=False`` (for ``verify``) opens a Flink snapshot even when some of its
    states cannot be decoded, recording why in its ``open_problems()``. ``allow_pickle=True``
    shows a Flink snapshot's PyFlink-pickled values unpickled (unsafe: it runs code the
    snapshot carries); statectl's own format never holds pickles. ``decode=False`` opens a
    Flink snapshot without decoding its keyed state (for the Spark engine: see
    :func:`formats.flink.checkpoint.open_flink_checkpoint`).
    """
    fs, root = resolve_filesystem(location, filesystem)
    root = root.rstrip("/") or root
    for name in (METADATA_FILE, FLINK_METADATA_FILE):  # the metadata file itself: its directory
        if root.endswith("/" + name):
            root = root.rsplit("/", 1)[0]
    if not _exists(fs, f"{root}/{METADATA_FILE}") and is_flink_checkpoint(fs, root):
        return open_flink_checkpoint(fs, root, location, strict=strict,
                                     allow_pickle=allow_pickle, decode=decode)
    return open_statectl_checkpoint(fs, root, location)


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    try:
        return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)
    except OSError:
        return False
