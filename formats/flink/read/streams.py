"""Where a Flink snapshot's state streams are, and reading them (whole or a byte range).

A stream handle of ``_metadata`` (:class:`~formats.flink.read.metadata.StreamHandle`) is inline
bytes, a file, a file relative to the snapshot directory, or a segment of a file. Files are
resolved as
Flink does, inside the job's directories only (:meth:`SnapshotStreams.locate`), and read through
``pyarrow.fs``, so the same object works in this process and, pickled, in a Spark task.

Sizes are checked against ``_metadata`` before anything is decoded: a file of another size is
corrupt, whether it is read whole or only in part (a task decoding some key groups of a stream
reads the stream's header and its key groups' bytes only).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow.fs as pafs

from formats.flink.read.metadata import StreamHandle
from formats.storage.filesystems import raise_if_storage_failure
from statecore.errors import CheckpointError, CorruptCheckpointError, UnsafePathError

__all__ = ["JOB_DIRECTORIES", "MAX_STATE_FILE_BYTES", "SnapshotStreams", "read_snapshot_file",
           "shared_files_read_once"]

MAX_STATE_FILE_BYTES = 4 << 30
#: The job directory's folders besides the snapshots (``CheckpointStorageLayout``).
JOB_DIRECTORIES = ("shared", "taskowned")


class _SharedFiles:
    """The job's ``shared/`` files read so far (bytes by path), least recently used first."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self.files: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> bytes | None:
        with self.lock:
            data = self.files.get(key)
            if data is not None:
                self.files.move_to_end(key)
            return data

    def put(self, key: tuple[str, str], data: bytes) -> None:
        with self.lock:
            if len(data) > self.limit or key in self.files:
                return
            self.files[key] = data
            self.size += len(data)
            while self.size > self.limit:
                _, dropped = self.files.popitem(last=False)
                self.size -= len(dropped)


_shared: _SharedFiles | None = None
#: How many bytes of shared files :func:`shared_files_read_once` keeps at most.
SHARED_CACHE_BYTES = 1 << 30


@contextmanager
def shared_files_read_once(limit: int = SHARED_CACHE_BYTES) -> Iterator[None]:
    """While inside, read a file of a job's ``shared/`` directory once for all snapshots.

    For ``statectl history`` over RocksDB incremental checkpoints. Flink never rewrites a
    shared file under the same name (an incremental checkpoint uploads new SST files under new
    names and refers to the old ones), so its bytes are kept by path, up to ``limit`` bytes in
    all (the least recently used are dropped first).
    """
    global _shared
    previous, _shared = _shared, _SharedFiles(limit)
    try:
        yield
    finally:
        _shared = previous


def read_snapshot_file(fs: pafs.FileSystem, root: str, path: str, shown: str,
                       limit: int) -> bytes:
    """A whole file inside the snapshot directory ``root``; a path leaving it is refused."""
    info = _checked_info(fs, root, path, shown, limit)
    try:
        with fs.open_input_stream(path) as stream:  # a file that grew meanwhile: cut
            data = bytes(stream.read(min(info.size if info.size is not None else limit,
                                         limit) + 1))
    except OSError as exc:
        raise_if_storage_failure(exc, "reading", f"{root}/{shown}")
        raise CheckpointError(f"cannot read {shown}: {exc}") from exc
    if len(data) > limit:
        raise CorruptCheckpointError(f"{shown} has more than the {limit} bytes statectl "
                                     f"reads")
    return data


def _checked_info(fs: pafs.FileSystem, root: str, path: str, shown: str,
                  limit: int) -> pafs.FileInfo:
    if isinstance(fs, pafs.LocalFileSystem) and not _inside(root, path):
        raise UnsafePathError(f"{shown} leads out of the checkpoint directory")
    try:
        info = fs.get_file_info(path)
    except OSError as exc:
        raise_if_storage_failure(exc, "reading", f"{root}/{shown}")
        raise CheckpointError(f"cannot read {shown}: {exc}") from exc
    if info.type != pafs.FileType.File:
        raise CorruptCheckpointError(f"{shown} is missing")
    if info.size is not None and info.size > limit:
        raise CorruptCheckpointError(f"{shown} is {info.size} bytes, more than the "
                                     f"{limit} statectl reads")
    return info


def _inside(root: str, path: str) -> bool:
    """Whether local ``path`` resolves inside the directory ``root``.

    A file directly in ``root`` that is no symlink is inside (one ``lstat``); anything else
    is resolved in full and compared with ``root`` resolved.
    """
    if os.path.dirname(path) == root and not os.path.islink(path):
        return True
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


class SnapshotStreams:
    """Reads the streams of the snapshot in directory ``root`` on ``fs`` (picklable)."""

    def __init__(self, fs: pafs.FileSystem, root: str) -> None:
        self.fs, self.root = fs, root

    def locate(self, stream: StreamHandle) -> str:
        """Where a file handle's bytes are, relative to the snapshot directory.

        Resolved as Flink does, inside the job's directories only: a relative handle as given;
        a file in the job's ``shared/`` or ``taskowned/`` directory (a checkpoint's RocksDB
        files) in the sibling of the snapshot directory, where it is also when the checkpoint
        was moved together with its job directory; any other path by its file name in the
        snapshot directory (Flink 2.x stores file names, and users move snapshots). A path
        that would leave them is refused.
        """
        name = stream.path
        if stream.kind == "relative":
            if name.startswith("/") or ".." in name.split("/") or not name:
                raise UnsafePathError(f"state file {name!r} leads out of the snapshot directory")
            return name
        parts = name.rstrip("/").rsplit("/", 2)
        base = parts[-1]
        if base in ("", ".", ".."):
            raise UnsafePathError(f"state file {name!r} has no usable file name")
        if len(parts) == 3 and parts[1] in JOB_DIRECTORIES:
            return f"../{parts[1]}/{base}"
        return base

    def stored_as(self, stream: StreamHandle) -> str:
        """How a plan names a stream: ``inline`` (in ``_metadata``), else its file."""
        return "inline" if stream.kind in ("inline", "empty") else self.locate(stream)

    def _where(self, relative: str) -> tuple[str, str]:
        """``(directory the file must stay inside, its path)`` of a located file."""
        if relative.startswith("../"):  # the job directory's shared or taskowned files
            job = self.root.rsplit("/", 1)[0] if "/" in self.root else "."
            return job, f"{job}/{relative[3:]}"
        return self.root, f"{self.root}/{relative}"

    def read(self, stream: StreamHandle) -> tuple[bytes, str]:
        """The bytes of a stream handle and a name for messages (see :meth:`locate`)."""
        if stream.kind == "inline":
            assert stream.data is not None
            return stream.data, f"{stream.file_name} (inline)"
        if stream.kind == "empty":
            return b"", "(empty segment)"
        relative = self.locate(stream)
        root, path = self._where(relative)
        cache = _shared if relative.startswith("../shared/") else None
        key = (self.fs.type_name, path)
        data = None if cache is None else cache.get(key)
        if data is None:
            data = read_snapshot_file(self.fs, root, path, relative, MAX_STATE_FILE_BYTES)
            if cache is not None:
                cache.put(key, data)
        if stream.kind == "segment":
            if stream.start + stream.size > len(data):
                raise CorruptCheckpointError(f"{relative}: segment beyond the file's end")
            data = data[stream.start:stream.start + stream.size]
        elif len(data) != stream.size:
            raise CorruptCheckpointError(f"{relative} has {len(data)} bytes, the metadata "
                                         f"says {stream.size}")
        return data, relative

    def name(self, stream: StreamHandle) -> str:
        """The name :meth:`read` gives a stream in messages, without reading it."""
        if stream.kind == "inline":
            return f"{stream.file_name} (inline)"
        if stream.kind == "empty":
            return "(empty segment)"
        return self.locate(stream)

    def check(self, stream: StreamHandle) -> None:
        """Check that a stream's file exists with the size ``_metadata`` says (nothing read)."""
        if stream.kind in ("inline", "empty"):
            return
        relative = self.locate(stream)
        info = _checked_info(self.fs, *self._where(relative), relative, MAX_STATE_FILE_BYTES)
        size = info.size if info.size is not None else 0
        if stream.kind == "segment":
            if stream.start + stream.size > size:
                raise CorruptCheckpointError(f"{relative}: segment beyond the file's end")
        elif size != stream.size:
            raise CorruptCheckpointError(f"{relative} has {size} bytes, the metadata says "
                                         f"{stream.size}")

    def problem(self, stream: StreamHandle) -> tuple[str, str, str] | None:
        """``(kind, file, message)`` of what is wrong with a stream's file, or ``None``.

        Kinds as ``verify`` names them (``unsafe-path``, ``missing-file``, ``size``); nothing
        is read.

        The kinds and messages are statectl's own format's (:mod:`formats.ops.verify`).
        """
        if stream.kind in ("inline", "empty"):
            return None
        try:
            relative = self.locate(stream)
            root, path = self._where(relative)
            if isinstance(self.fs, pafs.LocalFileSystem) and not _inside(root, path):
                return "unsafe-path", relative, "it leads out of the checkpoint directory"
        except UnsafePathError as exc:
            return "unsafe-path", stream.path, str(exc)
        try:
            info = self.fs.get_file_info(path)
        except OSError as exc:
            raise_if_storage_failure(exc, "reading", f"{root}/{relative}")
            return "missing-file", relative, f"cannot stat it: {exc}"
        if info.type != pafs.FileType.File:
            return "missing-file", relative, "the file is missing"
        size = info.size if info.size is not None else 0
        if stream.kind == "segment":
            if stream.start + stream.size > size:
                return ("size", relative, f"{size} bytes, the metadata has a segment to byte "
                                          f"{stream.start + stream.size}")
        elif size != stream.size:
            return "size", relative, f"{size} bytes, the metadata says {stream.size}"
        return None

    def read_range(self, stream: StreamHandle, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of a stream (``0 <= start <= end <= stream.size``)."""
        if not 0 <= start <= end <= stream.size:
            raise CorruptCheckpointError(f"{self.name(stream)}: bytes {start}..{end} outside "
                                         f"its {stream.size} bytes")
        if stream.kind == "inline":
            assert stream.data is not None
            return stream.data[start:end]
        if stream.kind == "empty" or start == end:
            return b""
        self.check(stream)
        relative = self.locate(stream)
        offset = stream.start if stream.kind == "segment" else 0
        try:
            with self.fs.open_input_file(self._where(relative)[1]) as handle:
                data = bytes(handle.read_at(end - start, offset + start))
        except OSError as exc:
            raise_if_storage_failure(exc, "reading", self._where(relative)[1])
            raise CheckpointError(f"cannot read {relative}: {exc}") from exc
        if len(data) != end - start:
            raise CorruptCheckpointError(f"{relative}: {len(data)} bytes at {start}, "
                                         f"{end - start} expected")
        return data
