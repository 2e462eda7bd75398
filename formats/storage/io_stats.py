"""Counting what a read costs: a ``pyarrow.fs`` filesystem that counts the bytes read.

``CountingHandler`` wraps a filesystem (the local one unless given another, e.g. an
``S3FileSystem``) in a ``pyarrow.fs.PyFileSystem`` handler and records, per path opened for
input, the bytes actually read through it. The benchmarks use it
to show that ``inspect`` reads only metadata and footers; the tests, that ``inspect --key``
reads only the row groups of the key's key group. Open a checkpoint through it with
``open_checkpoint(path, filesystem=pyarrow.fs.PyFileSystem(handler))``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["CountingHandler", "CountingReader"]


class CountingReader:
    """A read-only file over a pyarrow file that counts the bytes read through it."""

    def __init__(self, inner: Any, counts: dict[str, int], path: str) -> None:
        self._inner, self._counts, self._path = inner, counts, path
        counts.setdefault(path, 0)

    def read(self, nbytes: int | None = -1) -> bytes:
        data: bytes = (self._inner.read() if nbytes is None or nbytes < 0
                       else self._inner.read(nbytes))
        self._counts[self._path] += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._inner.seek(offset, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return bool(self._inner.seekable())

    def writable(self) -> bool:
        return False


class CountingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """A filesystem (local by default), counting the bytes read from every file opened for input.

    Over S3 the bytes read through the handler are the object bytes fetched (a pyarrow S3
    file reads by ranged GETs of the bytes asked for; ``tests/test_s3_server.py`` checks the
    count against the server's own).
    """

    def __init__(self, fs: Any = None) -> None:
        self.fs = pafs.LocalFileSystem() if fs is None else fs
        self.counts: dict[str, int] = {}

    def __eq__(self, other: object) -> bool:
        return other is self

    def __ne__(self, other: object) -> bool:
        return other is not self

    def __hash__(self) -> int:
        return id(self)

    def get_type_name(self) -> str:
        return f"counting+{self.fs.type_name}"

    def normalize_path(self, path: str) -> str:
        return str(self.fs.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> list[Any]:
        return list(self.fs.get_file_info(paths))

    def get_file_info_selector(self, selector: Any) -> list[Any]:
        return list(self.fs.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("refusing to delete the root directory's contents")

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return pa.PythonFile(CountingReader(self.fs.open_input_stream(path), self.counts, path),
                             mode="r")

    def open_input_file(self, path: str) -> Any:
        return pa.PythonFile(CountingReader(self.fs.open_input_file(path), self.counts, path),
                             mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self.fs.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self.fs.open_append_stream(path, metadata=metadata)
