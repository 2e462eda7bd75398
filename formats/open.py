"""Opening a checkpoint of any format: ``open_checkpoint`` detects it from the directory.

statectl's checkpoint is a directory with ``_metadata.json`` (:mod:`formats.statectl.reader`);
a real Flink checkpoint or savepoint is a directory with ``_metadata``
(:mod:`formats.flink.checkpoint`, imported only to open one: a statectl checkpoint is read
without Flink's codec, issue 45). Both come back as the model's
:class:`~formats.model.checkpoint.Checkpoint`, so every operation works on either.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import pyarrow.fs as pafs

from formats.flink import FLINK_METADATA_FILE
from formats.model.checkpoint import Checkpoint
from formats.model.operator_names import OperatorNames
from formats.statectl.claims import CLAIMS_DIR, Claims
from formats.statectl.publish import METADATA_FILE
from formats.statectl.reader import open_statectl_checkpoint
from formats.storage.filesystems import is_storage_failure, resolve_filesystem, storage_errors
from statecore.errors import StatectlError

__all__ = ["METADATA_FILES", "metadata_file_of", "open_checkpoint", "open_in_runs", "pinned",
           "shared_files_read_once"]

#: The metadata file of a complete snapshot, in each format (statectl's, Flink's).
METADATA_FILES = (METADATA_FILE, FLINK_METADATA_FILE)

_IN_STATE_DIRECTORY = re.compile(r"(?:chk|savepoint)-(\d{7,})")


def open_checkpoint(location: str, *, filesystem: pafs.FileSystem | None = None,
                    strict: bool = True, allow_pickle: bool = False,
                    decode: bool = True, partial: bool = False,
                    names: OperatorNames | None = None) -> Checkpoint:
    """Open and validate a checkpoint or savepoint, statectl's or Flink's (detected here).

    ``location`` is the directory, or its metadata file, as a local path or a URI pyarrow
    supports. ``strict=False`` (for ``verify``) opens a Flink snapshot even when some of its
    states cannot be decoded, recording why in its ``open_problems()``. ``allow_pickle=True``
    shows a Flink snapshot's PyFlink-pickled values unpickled (unsafe: it runs code the
    snapshot carries); statectl's own format never holds pickles. ``decode=False`` opens a
    Flink snapshot without decoding its keyed state (for the Spark engine: see
    :func:`formats.flink.checkpoint.open_flink_checkpoint`). ``partial=True`` opens a Flink
    snapshot whose bytes are damaged in places: what could be read, with the damaged parts in
    ``undecodable_parts()`` (without it: a :class:`~statecore.errors.CorruptCheckpointError`
    naming them). Values statectl has no decoder for never stop the opening (they are listed
    there too, as unsupported). ``names``: uids for the operators of a Flink 1.x snapshot,
    which stores none (:mod:`formats.model.operator_names`).
    """
    fs, root = resolve_filesystem(location, filesystem)
    root = root.rstrip("/") or root
    with storage_errors("reading", location):
        return _open(fs, root, location, strict, allow_pickle, decode, partial, names)


#: A Flink snapshot of at most this many runs of keyed state (as stored) is decoded at once
#: by :func:`open_in_runs`.
WHOLE_RUNS = 4


def open_in_runs(location: str, run_bytes: int, *, allow_pickle: bool = False,
                 partial: bool = False, names: OperatorNames | None = None) -> Checkpoint:
    """The checkpoint at ``location``, opened to be rewritten whole in bounded memory.

    A Flink snapshot is counted piece by piece and rewritten run by run of about
    ``run_bytes`` stored bytes (:mod:`formats.flink.streamed`), never held decoded whole;
    with ``allow_pickle``, or values statectl cannot read, it is decoded at open (as
    :func:`open_checkpoint` does). So is a snapshot whose keyed state is at most
    :data:`WHOLE_RUNS` runs as stored: holding it decoded takes no more than a few runs do,
    and reading it once is faster than counting it first. A statectl checkpoint is opened as
    always.
    """
    if allow_pickle:
        return open_checkpoint(location, allow_pickle=True, partial=partial, names=names)
    checkpoint = open_checkpoint(location, partial=partial, decode=False, names=names)
    from formats.flink.checkpoint import FlinkCheckpoint
    if not isinstance(checkpoint, FlinkCheckpoint):
        return checkpoint
    if sum(source.size for source in checkpoint.keyed_sources) <= WHOLE_RUNS * run_bytes:
        return open_checkpoint(location, partial=partial, names=names)
    from formats.flink.streamed import counted_in_runs
    counted = counted_in_runs(checkpoint, run_bytes)
    return counted if counted is not None else open_checkpoint(location, partial=partial,
                                                               names=names)


def _open(fs: pafs.FileSystem, root: str, location: str, strict: bool,
          allow_pickle: bool, decode: bool, partial: bool,
          names: OperatorNames | None = None) -> Checkpoint:
    for name in (METADATA_FILE, FLINK_METADATA_FILE):  # the metadata file itself: its directory
        if root.endswith("/" + name):
            root = root.rsplit("/", 1)[0]
    if _exists(fs, f"{root}/{METADATA_FILE}"):
        return open_statectl_checkpoint(fs, root, location)
    from formats.flink.checkpoint import is_flink_checkpoint, open_flink_checkpoint
    if is_flink_checkpoint(fs, root):
        return open_flink_checkpoint(fs, root, location, strict=strict,
                                     allow_pickle=allow_pickle, decode=decode, partial=partial,
                                     names=names)
    return open_statectl_checkpoint(fs, root, location)


def shared_files_read_once(limit: int | None = None) -> AbstractContextManager[None]:
    """:func:`formats.flink.read.streams.shared_files_read_once` (``limit``: its default).

    Imported when used: reading a statectl checkpoint loads nothing of Flink's reader.
    """
    from formats.flink.read.streams import shared_files_read_once as read_once
    return read_once() if limit is None else read_once(limit)


def metadata_file_of(location: str) -> str:
    """The name of the metadata file of the snapshot at ``location``, as its format calls it.

    ``_metadata`` for Flink's, ``_metadata.json`` for statectl's (also when neither is there).
    """
    try:
        fs, root = resolve_filesystem(location, None)
    except StatectlError:
        return METADATA_FILE
    root = root.rstrip("/") or root
    for name in (METADATA_FILE, FLINK_METADATA_FILE):
        if root.endswith("/" + name):
            return name
    try:
        if not _exists(fs, f"{root}/{METADATA_FILE}") and _exists(
                fs, f"{root}/{FLINK_METADATA_FILE}"):
            return FLINK_METADATA_FILE
    except OSError:
        pass
    return METADATA_FILE


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    try:
        return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)
    except OSError as exc:
        if is_storage_failure(exc):
            raise  # fail at once (said with the location by open_checkpoint), not per probe
        return False


@contextmanager
def pinned(location: str, *, filesystem: pafs.FileSystem | None = None) -> Iterator[None]:
    """Hold the checkpoint at ``location`` against deletion while the block reads it.

    Only a checkpoint of a statectl state directory (``chk-<id>`` or ``savepoint-<id>``
    beside ``_claims/``) can be released by another process; it is pinned
    (:mod:`formats.statectl.claims`): retention, ``snapshot release`` and ``prune`` leave it
    alone meanwhile, and one being released already is refused
    (:class:`~statecore.errors.ConcurrentWriteError`). Anything else is read as it is.
    """
    fs, root = resolve_filesystem(location, filesystem)
    root = root.rstrip("/") or root
    for name in (METADATA_FILE, FLINK_METADATA_FILE):
        if root.endswith("/" + name):
            root = root.rsplit("/", 1)[0]
    parent, _, name = root.rpartition("/")
    match = _IN_STATE_DIRECTORY.fullmatch(name)
    if not match or not parent:
        yield
        return
    with storage_errors("reading", location):
        if fs.get_file_info(f"{parent}/{CLAIMS_DIR}").type != pafs.FileType.Directory:
            match = None  # no process coordinates here (a copy, or a checkpoint on its own)
        else:
            claims = Claims(fs, parent)
            try:
                pin = claims.pin(int(match[1]))
            except PermissionError:  # (on S3: 403)
                match = None  # a state directory this user may only read: read it as it is
    if match is None:
        yield
        return
    try:
        yield
    finally:
        claims.remove(pin)
