"""Reading statectl checkpoints: ``_metadata.json`` validated, Parquet data files by row group.

The layout is in :mod:`formats.statectl`. :class:`StatectlCheckpoint` implements the model's
primitives (:class:`formats.model.checkpoint.Checkpoint`) over the Parquet files: a row range is
read from the row groups that hold it, and every file is checked against the size and SHA-256 the
metadata records. A path in the metadata never leads out of the checkpoint directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs

from formats.model.checkpoint import Checkpoint, FileProblem
from formats.statectl.publish import METADATA_FILE
from formats.storage.filesystems import join_location, raise_if_storage_failure
from statecore.checkpoint import CheckpointMetadata, check_relative_path, metadata_from_json
from statecore.errors import (
    CheckpointError,
    CorruptCheckpointError,
    StatectlError,
    StorageError,
    UnsafePathError,
)

if TYPE_CHECKING:  # imported where a data file is read: inspect's summary reads none
    import pyarrow.parquet as pq

__all__ = ["MAX_METADATA_BYTES", "StatectlCheckpoint", "not_a_checkpoint",
           "open_statectl_checkpoint"]

#: ``_metadata.json`` larger than this is refused before parsing (it is untrusted input).
MAX_METADATA_BYTES = 64 << 20
#: Parquet files kept open (with their footers parsed) between reads of one checkpoint.
OPEN_FILES = 8


class StatectlCheckpoint(Checkpoint):
    """A statectl checkpoint: ``_metadata.json`` and Parquet data files on a filesystem.

    ``fs`` and ``root`` locate the directory; data files are read through them, inside
    ``root`` only.
    """

    format_name = "statectl"

    def __init__(self, fs: pafs.FileSystem, root: str, metadata: CheckpointMetadata,
                 location: str | None = None) -> None:
        super().__init__(root if location is None else location, metadata)
        self.fs, self.root = fs, root
        self._files = {f.path: f for f in metadata.files}
        self._opened: dict[str, pq.ParquetFile] = {}  # the last OPEN_FILES files read

    def __getstate__(self) -> dict[str, object]:
        """Pickled (into Spark tasks) without the open files, which are reopened there."""
        return {**self.__dict__, "_opened": {}}

    def path(self, relative: str) -> str:
        """The full path of a data file, checked to stay inside the checkpoint directory."""
        return self._path(relative)

    def check_size(self, relative: str) -> None:
        """Refuse a data file whose size is not the metadata's (reads no data)."""
        try:
            actual = self.fs.get_file_info(self._path(relative))
        except OSError as exc:
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            raise CorruptCheckpointError(f"cannot stat {relative}: {exc}") from exc
        size = self._files[relative].size
        if actual.type != pafs.FileType.File or actual.size != size:
            raise CorruptCheckpointError(
                f"{relative} has {actual.size} bytes, the metadata says {size}")

    def _path(self, relative: str) -> str:
        check_relative_path(relative)
        path = f"{self.root}/{relative}"
        if isinstance(self.fs, pafs.LocalFileSystem):
            real_root = os.path.realpath(self.root)
            if not os.path.realpath(path).startswith(real_root + os.sep):
                raise UnsafePathError(f"{relative!r} leads out of the checkpoint directory")
        return path

    def _parquet(self, relative: str) -> pq.ParquetFile:
        cached = self._opened.get(relative)
        if cached is not None:
            return cached
        parquet = self._open_parquet(relative)
        if len(self._opened) >= OPEN_FILES:
            self._opened.pop(next(iter(self._opened)))
        self._opened[relative] = parquet
        return parquet

    def _open_parquet(self, relative: str) -> pq.ParquetFile:
        info = self._files[relative]
        path = self._path(relative)
        try:
            actual = self.fs.get_file_info(path)
            if actual.type != pafs.FileType.File:
                raise CorruptCheckpointError(f"{relative} is missing")
            if actual.size != info.size:
                raise CorruptCheckpointError(
                    f"{relative} has {actual.size} bytes, the metadata says {info.size}")
            import pyarrow.parquet as pq  # when a data file is read (issue 45: start-up)
            return pq.ParquetFile(self.fs.open_input_file(path))
        except (pa.ArrowException, OSError, ValueError) as exc:  # incl. UnicodeDecodeError
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            raise CorruptCheckpointError(f"{relative} is not a readable Parquet file: {exc}") \
                from exc

    def row_groups(self, relative: str) -> list[tuple[int, int]]:
        """``(rows, compressed bytes)`` of each row group of a data file, from its footer only."""
        parquet = self._parquet(relative)
        try:
            footer = parquet.metadata
            return [(footer.row_group(i).num_rows,
                     sum(footer.row_group(i).column(c).total_compressed_size
                         for c in range(footer.num_columns)))
                    for i in range(footer.num_row_groups)]
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            raise CorruptCheckpointError(f"{relative}: unreadable footer: {exc}") from exc

    def verify_checksum(self, relative: str) -> None:
        """Read a whole file and compare its SHA-256 with the metadata."""
        info = self._files[relative]
        digest = hashlib.sha256()
        path = self._path(relative)
        try:
            actual = self.fs.get_file_info(path)
            if actual.type != pafs.FileType.File or actual.size != info.size:
                raise CorruptCheckpointError(
                    f"{relative} is missing, not a regular file, or not {info.size} bytes")
            with self.fs.open_input_stream(path) as stream:
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
        except OSError as exc:
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            raise CorruptCheckpointError(f"cannot read {relative}: {exc}") from exc
        if "sha256:" + digest.hexdigest() != info.checksum:
            raise CorruptCheckpointError(f"{relative}: checksum mismatch")

    def _reader(self, relative: str, schema: pa.Schema) -> tuple[pq.ParquetFile, list[int]]:
        """The Parquet file of ``relative``, its columns checked, and its row-group starts."""
        parquet = self._parquet(relative)
        try:
            if not parquet.schema_arrow.remove_metadata().equals(schema.remove_metadata()):
                raise CorruptCheckpointError(
                    f"{relative}: columns {parquet.schema_arrow} differ from the declared "
                    f"{schema}")
            sizes = [parquet.metadata.row_group(i).num_rows
                     for i in range(parquet.num_row_groups)]
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            raise CorruptCheckpointError(f"{relative}: {exc}") from exc
        return parquet, [sum(sizes[:i]) for i in range(len(sizes) + 1)]

    def rows_table(self, relative: str, schema: pa.Schema, first: int, count: int,
                   columns: Sequence[str] | None = None) -> pa.Table:
        """Rows ``[first, first + count)`` of a data file as an Arrow table (its row groups only).

        The file's columns must be ``schema``'s; ``columns`` selects some of them.
        """
        parquet, starts = self._reader(relative, schema)
        if first + count > starts[-1]:
            raise CorruptCheckpointError(f"{relative}: rows {first}..{first + count} beyond "
                                         f"its {starts[-1]} rows")
        groups = [i for i in range(len(starts) - 1)
                  if starts[i] < first + count and starts[i + 1] > first]
        names = list(columns) if columns is not None else schema.names
        if not groups or count == 0:
            return schema.empty_table().select(names)
        try:
            table = parquet.read_row_groups(groups, columns=names)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            raise CorruptCheckpointError(f"{relative}: {exc}") from exc
        expected = starts[groups[-1] + 1] - starts[groups[0]]
        if table.num_rows != expected:
            raise CorruptCheckpointError(f"{relative}: row groups hold {table.num_rows} rows, "
                                         f"the footer says {expected}")
        return table.slice(first - starts[groups[0]], count)

    def check_file(self, relative: str) -> FileProblem | None:
        try:
            path = self._path(relative)
            actual = self.fs.get_file_info(path)
        except UnsafePathError as exc:
            return "unsafe-path", str(exc)
        except OSError as exc:
            raise_if_storage_failure(exc, "reading", join_location(self.location, relative))
            return "missing-file", f"cannot stat it: {exc}"
        if actual.type == pafs.FileType.NotFound:
            return "missing-file", "the file is missing"
        size = self._files[relative].size
        if actual.size != size:
            return "size", f"{actual.size} bytes, the metadata says {size}"
        try:
            self.verify_checksum(relative)
        except StorageError:
            raise  # the store failed: not a finding about the checkpoint
        except StatectlError as exc:
            return "checksum", str(exc)
        return None


def not_a_checkpoint(fs: pafs.FileSystem, root: str, location: str) -> str:
    """Why ``location`` is not a checkpoint, and what to give instead."""
    kind = fs.get_file_info(root).type
    if kind == pafs.FileType.NotFound:
        return (f"{location} is not a checkpoint: it does not exist; give a checkpoint or "
                f"savepoint directory (one with {METADATA_FILE})")
    if kind != pafs.FileType.Directory:
        return (f"{location} is not a checkpoint: it is a file; give the directory that "
                f"holds {METADATA_FILE}")
    inside = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(root))
                    if i.type == pafs.FileType.Directory
                    and i.base_name.startswith(("chk-", "savepoint-")))
    if inside:
        shown = ", ".join(inside[-3:])
        return (f"{location} is not a checkpoint but a state directory: give one of its "
                f"checkpoints ({shown}; `statectl snapshot list {location}` lists them)")
    return (f"{location} is not a checkpoint: it has no {METADATA_FILE} (an incomplete "
            f"checkpoint has none)")


def open_statectl_checkpoint(fs: pafs.FileSystem, root: str, location: str
                             ) -> StatectlCheckpoint:
    """Open and validate the statectl checkpoint in directory ``root`` (``location``: as given).

    Its ``_metadata.json`` must be a regular file inside ``root`` of at most
    ``MAX_METADATA_BYTES``; every field is validated (:func:`metadata_from_json`).
    """
    path = f"{root}/{METADATA_FILE}"
    if isinstance(fs, pafs.LocalFileSystem) and os.path.islink(path) and not os.path.realpath(
            path).startswith(os.path.realpath(root) + os.sep):
        raise UnsafePathError(f"{METADATA_FILE} leads out of the checkpoint directory")
    try:
        info = fs.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise CheckpointError(not_a_checkpoint(fs, root, location))
        if info.size is not None and info.size > MAX_METADATA_BYTES:
            raise CorruptCheckpointError(f"{METADATA_FILE} is {info.size} bytes, more than "
                                         f"the {MAX_METADATA_BYTES} a checkpoint may have")
        with fs.open_input_stream(path) as stream:
            raw = stream.read(MAX_METADATA_BYTES + 1)
    except OSError as exc:
        raise_if_storage_failure(exc, "reading", location)
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        shown = join_location(location, METADATA_FILE) if not location.rstrip("/").endswith(
            METADATA_FILE) else location
        if isinstance(exc, json.JSONDecodeError) and _ends_early(exc):
            raise CorruptCheckpointError(f"{shown} is truncated: its JSON ends after "
                                         f"{len(raw)} bytes, before the document does") from exc
        raise CorruptCheckpointError(f"{shown} is not valid JSON: {exc}") from exc
    return StatectlCheckpoint(fs, root, metadata_from_json(document), location)


def _ends_early(exc: json.JSONDecodeError) -> bool:
    """Whether the JSON text ends before its document does (a truncated file)."""
    text = exc.doc.rstrip()
    return exc.pos >= len(text) or exc.msg.startswith("Unterminated string")
