"""A readable binary stream that hands on another's bytes whole lines at a time, filtered.

The base of the input filters that rewrite or leave out lines before pyarrow reads a file
(:class:`formats.inputs.json_text.NumbersAsText`, :class:`formats.inputs.bad_records.LinesLeftOut`):
it reads the wrapped stream a chunk at a time, keeps a line cut by a chunk's end for the next
chunk, and gives each run of complete lines (the last one without its newline at the end of
the stream) to :meth:`WholeLines.take`, which appends what is to be read to ``self._out``.
"""

from __future__ import annotations

from typing import BinaryIO

__all__ = ["WholeLines"]

_CHUNK = 1 << 20


class WholeLines:
    """A file-like binary reader of ``stream``'s lines as :meth:`take` passes them on.

    Closing it closes ``stream``.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._pending = b""
        self._out = bytearray()
        self._eof = False

    @property
    def closed(self) -> bool:
        return bool(self._stream.closed)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, size: int = -1) -> bytes:
        while not self._eof and (size < 0 or len(self._out) < size):
            self._fill()
        if size < 0 or size > len(self._out):
            size = len(self._out)
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    def _fill(self) -> None:
        chunk = self._stream.read(_CHUNK)
        data = self._pending + chunk
        if chunk:
            cut = data.rfind(b"\n") + 1
            complete, self._pending = data[:cut], data[cut:]
        else:
            complete, self._pending, self._eof = data, b"", True
        if complete:
            self.take(complete)

    def take(self, complete: bytes) -> None:
        """Append to ``self._out`` what is read of ``complete``.

        ``complete``: whole lines, each with its newline but the stream's last one.
        """
        self._out += complete

    def close(self) -> None:
        self._stream.close()
