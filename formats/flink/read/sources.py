"""What a Flink job's sources have read: their reader splits and enumerator state, decoded.

A source operator (``SourceOperator``) keeps two kinds of state:

- **reader state**, the operator list state ``SourceReaderState`` (``SPLIT_DISTRIBUTE``): one
  ``byte[]`` element per split a reader holds, each written by
  ``SimpleVersionedSerialization.writeVersionAndSerialize`` (``SimpleVersionedListState``): int32
  serializer version, int32 length, the split serializer's bytes;
- **enumerator state**, the operator's coordinator state in ``_metadata``
  (``SourceCoordinator.writeCheckpointBytes``): int32 coordinator serde version (1), int32
  enumerator serializer version, int32 length, the enumerator checkpoint serializer's bytes.

Neither names its serializer, so decoders recognise their format by its bytes, strictly (every
byte accounted for). Decoded: the **FileSource** (``flink-connector-files``), checked against
the fixtures' enumerator state:

- ``FileSourceSplitSerializer`` version 1: ``writeUTF`` split id, the path (``Path``'s legacy
  layout: a non-null flag, then scheme, user info and host as nullable strings, an int32 port,
  path, query and fragment as nullable strings; a nullable string is a boolean then
  ``StringValue`` text), int64 offset, int64 length, int64 file modification time, int64 file
  size, int32 count of host names (``writeUTF`` each), a boolean, and when true the checkpointed
  reader position: int64 offset and int64 records to skip after it (``CheckpointedPosition``);
- ``PendingSplitsCheckpointSerializer`` version 1, **little-endian**: magic ``0xDEADBEEF``, the
  split serializer's version, the number of pending splits and of processed paths, then each
  split (int32 length, bytes) and each path (int32 length, UTF-8).

Other connectors (Kafka's ``KafkaPartitionSplitSerializer`` and ``KafkaSourceEnumStateSerializer``
are public too) fit :class:`SourceSplit` -- a split names what it reads, where it starts and how
far it got -- but no fixture holds their state, so statectl does not claim them: their state is
reported as not decoded, with its size.

Apart from decoding, :func:`check_coordinator_state` checks a coordinator state as a restore
reads it (``SourceCoordinator.deserializeCheckpoint``: a serde version above 1 refused, with
version 1 nothing after the enumerator checkpoint; FileSource's enumerator checkpoint as
``PendingSplitsCheckpointSerializer`` reads it, a path as ``Path(String)`` takes it), for
``verify``. Deliberately: a coordinator whose state is not a source coordinator's is reported
as damaged (statectl cannot tell the two apart; jobs rarely have other coordinators).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from formats.flink.java.input import DataReader
from formats.model.sources import SourceProgress, SourceSplit
from statecore.errors import StatectlError

__all__ = ["CONNECTORS", "READER_STATE", "CoordinatorCheck", "check_coordinator_state",
           "decode_enumerator", "decode_reader_split", "path_problem", "source_progress"]

#: The operator list state of a ``SourceOperator`` (``SourceOperator.SPLITS_STATE_DESC``).
READER_STATE = "SourceReaderState"
#: ``SourceCoordinatorSerdeUtils.CURRENT_VERSION`` of the coordinator state statectl reads.
COORDINATOR_SERDE_VERSION = 1
FILE_SPLIT_VERSION = 1
PENDING_SPLITS_VERSION = 1
PENDING_SPLITS_MAGIC = 0xDEADBEEF
#: Most splits and paths one enumerator state or reader may list (more is refused).
MAX_ENTRIES = 1 << 20
_LE = struct.Struct("<IiII")  # magic, split serializer version, #splits, #paths
_LE_INT = struct.Struct("<i")


# -- FileSource ------------------------------------------------------------------------------


def _nullable_string(r: DataReader) -> str | None:
    """``StringUtils.readNullableString``: a boolean, then ``StringValue`` text when true."""
    return r.string_value() if r.boolean() else None


def _path(r: DataReader) -> str:
    """``Path``'s legacy layout, as the URI text ``Path.toString`` gives for it."""
    if not r.boolean():
        raise r.fail("a null path")
    scheme = _nullable_string(r)
    user_info = _nullable_string(r)
    host = _nullable_string(r)
    port = r.i32()
    path = _nullable_string(r) or ""
    query = _nullable_string(r)
    fragment = _nullable_string(r)
    text = f"{scheme}:" if scheme is not None else ""
    if host is not None:
        text += "//" + (f"{user_info}@" if user_info is not None else "") + host + (
            f":{port}" if port != -1 else "")
    text += path
    if query is not None:
        text += f"?{query}"
    if fragment is not None:
        text += f"#{fragment}"
    return text


def _file_split(data: bytes, version: int, where: str) -> SourceSplit | None:
    """A ``FileSourceSplit`` (see the module doc), or ``None`` if ``data`` is not one."""
    if version != FILE_SPLIT_VERSION:
        return None
    r = DataReader(data, where)
    try:
        split_id = r.utf()
        path = _path(r)
        offset, length, modified, size = r.i64(), r.i64(), r.i64(), r.i64()
        hosts = tuple(r.utf() for _ in range(r.count("host names", 2)))
        position = (r.i64(), r.i64()) if r.boolean() else None
    except StatectlError:
        return None
    if not r.at_end() or offset < 0 or length < 0:
        return None
    return SourceSplit(split_id, path, offset, length,
                       None if position is None else position[0],
                       None if position is None else position[1],
                       {"modification_time": modified, "file_size": size, "hosts": list(hosts)})


def _file_enumerator(data: bytes, version: int, where: str
                     ) -> tuple[list[SourceSplit], list[str]] | None:
    """A ``PendingSplitsCheckpoint``: pending splits and processed paths, or ``None``."""
    if version != PENDING_SPLITS_VERSION or len(data) < _LE.size:
        return None
    magic, split_version, n_splits, n_paths = _LE.unpack_from(data)
    if magic != PENDING_SPLITS_MAGIC:
        return None
    if n_splits > MAX_ENTRIES or n_paths > MAX_ENTRIES:
        return None
    chunks, pos = _length_prefixed(data, n_splits + n_paths)
    if isinstance(chunks, str) or pos != len(data):
        return None
    splits = [_file_split(chunk, split_version, where) for chunk in chunks[:n_splits]]
    if any(s is None for s in splits):
        return None
    try:
        paths = [chunk.decode("utf-8") for chunk in chunks[n_splits:]]
    except UnicodeDecodeError:
        return None
    return [s for s in splits if s is not None], paths


def _length_prefixed(data: bytes, count: int) -> tuple[list[bytes] | str, int]:
    """``count`` chunks after ``PendingSplitsCheckpoint``'s header, and where they end.

    Each is a little-endian int32 length and its bytes; instead of the chunks, why they do not
    fit.
    """
    pos = _LE.size
    chunks: list[bytes] = []
    for index in range(count):
        if pos + 4 > len(data):
            return f"cut before entry {index} of {count}", pos
        size = _LE_INT.unpack_from(data, pos)[0]
        if size < 0 or pos + 4 + size > len(data):
            return f"entry {index} of {size} bytes, {len(data) - pos - 4} left", pos
        chunks.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return chunks, pos


#: Connector formats statectl decodes: (name, split decoder, enumerator decoder).
SplitDecoder = Callable[[bytes, int, str], SourceSplit | None]
EnumeratorDecoder = Callable[[bytes, int, str], tuple[list[SourceSplit], list[str]] | None]
CONNECTORS: tuple[tuple[str, SplitDecoder, EnumeratorDecoder], ...] = (
    ("file", _file_split, _file_enumerator),
)


def decode_reader_split(element: bytes, where: str) -> tuple[str, SourceSplit] | None:
    """One ``SourceReaderState`` element: ``(connector, split)``, or ``None`` if unknown."""
    if len(element) < 8:
        return None
    version, size = struct.unpack_from(">ii", element)
    if size != len(element) - 8:
        return None
    for name, split, _ in CONNECTORS:
        decoded = split(element[8:], version, where)
        if decoded is not None:
            return name, decoded
    return None


def decode_enumerator(state: bytes, where: str
                      ) -> tuple[str, list[SourceSplit], list[str]] | None:
    """A source coordinator's state: ``(connector, pending splits, processed paths)``.

    ``None`` when its framing or its enumerator's format is not one statectl knows.
    """
    if len(state) < 12:
        return None
    serde, version, size = struct.unpack_from(">iii", state)
    if serde != COORDINATOR_SERDE_VERSION or size != len(state) - 12:
        return None
    for name, _, enumerator in CONNECTORS:
        decoded = enumerator(state[12:], version, where)
        if decoded is not None:
            return name, decoded[0], decoded[1]
    return None


def source_progress(uid: str, coordinator_state: bytes | None,
                    reader_elements: Sequence[tuple[int, Sequence[bytes]]], where: str
                    ) -> SourceProgress:
    """Decode one source operator's enumerator and reader state (see the module doc).

    ``reader_elements`` has per subtask the elements of its ``SourceReaderState``. Nothing is
    raised for state statectl does not recognise: ``notes`` say what it is.
    """
    connectors: set[str] = set()
    notes: list[str] = []
    pending: list[SourceSplit] = []
    processed: list[str] = []
    if coordinator_state is not None:
        decoded = decode_enumerator(coordinator_state, where)
        if decoded is None:
            notes.append(f"enumerator state of {len(coordinator_state):,} bytes in a format "
                         f"statectl does not decode")
        else:
            connectors.add(decoded[0])
            pending, processed = decoded[1], decoded[2]
    readers = []
    for subtask, elements in reader_elements:
        splits = []
        unknown = 0
        for element in elements:
            found = decode_reader_split(bytes(element), f"{where}, subtask {subtask}")
            if found is None:
                unknown += 1
                continue
            connectors.add(found[0])
            splits.append(found[1])
        if unknown:
            notes.append(f"subtask {subtask}: {unknown} reader split{'s' if unknown > 1 else ''}"
                         f" in a format statectl does not decode")
        readers.append((subtask, tuple(splits)))
    connector = next(iter(connectors)) if len(connectors) == 1 else None
    if len(connectors) > 1:
        notes.append(f"state of several connectors: {', '.join(sorted(connectors))}")
    return SourceProgress(uid, connector, tuple(readers), tuple(pending), tuple(processed),
                          tuple(notes))


# -- what a restore refuses -------------------------------------------------------------------


@dataclass(frozen=True)
class CoordinatorCheck:
    """What the check found.

    ``problem``: what the restore would refuse, else ``None``; ``unchecked``: the enumerator
    checkpoint is of a source statectl does not know (its envelope was checked).
    """

    problem: str | None
    unchecked: bool = False


def check_coordinator_state(data: bytes) -> CoordinatorCheck:
    """Check a source coordinator's state bytes as Flink's restore reads them."""
    if len(data) < 12:
        return CoordinatorCheck(f"{len(data)} bytes, cut before the source coordinator's "
                                f"12-byte header")
    serde, enum_version, size = struct.unpack_from(">iii", data)
    if serde > COORDINATOR_SERDE_VERSION:
        return CoordinatorCheck(f"source coordinator serde version {serde} (Flink reads up "
                                f"to {COORDINATOR_SERDE_VERSION})")
    if size < 0 or 12 + size > len(data):
        return CoordinatorCheck(f"an enumerator checkpoint of {size} bytes, {len(data) - 12} "
                                f"follow")
    if serde != 0 and 12 + size != len(data):
        return CoordinatorCheck(f"{len(data) - 12 - size} bytes after the enumerator "
                                f"checkpoint (Flink: unexpected trailing bytes)")
    enumerator = data[12:12 + size]
    if len(enumerator) < 4:
        return CoordinatorCheck(None, unchecked=True)
    magic = struct.unpack_from("<I", enumerator)[0]
    if magic != PENDING_SPLITS_MAGIC:
        if _fits_file_source(enumerator):
            # every count and length of FileSource's layout holds to the last byte: its
            # checkpoint with a damaged magic number (Flink: "Invalid magic number")
            return CoordinatorCheck(f"file source enumerator checkpoint: magic number "
                                    f"{magic:08X}, FileSource's is {PENDING_SPLITS_MAGIC:08X}")
        return CoordinatorCheck(None, unchecked=True)
    problem = _check_file_enumerator(enum_version, enumerator)
    return CoordinatorCheck(None if problem is None else f"file source enumerator "
                                                         f"checkpoint: {problem}")


def _fits_file_source(data: bytes) -> bool:
    """Whether ``data`` has FileSource's layout to its last byte, the magic number aside.

    With at least one split or path.
    """
    if len(data) < _LE.size:
        return False
    _magic, _version, splits, paths = _LE.unpack_from(data)
    if not 0 < splits + paths <= len(data) // 4:
        return False
    chunks, pos = _length_prefixed(data, splits + paths)
    return not isinstance(chunks, str) and pos == len(data)


def _check_file_enumerator(version: int, data: bytes) -> str | None:
    """``PendingSplitsCheckpointSerializer.deserializeV1``'s checks.

    Bytes after the last path are left unread, as there; a split's own bytes are not parsed.
    """
    if version != PENDING_SPLITS_VERSION:
        return f"serializer version {version} (Flink's: Unknown version)"
    if len(data) < _LE.size:
        return f"cut within its {_LE.size}-byte header"
    _magic, _split_version, splits, paths = struct.unpack_from("<Iiii", data)
    if splits < 0 or paths < 0:
        return f"{splits} splits and {paths} paths"
    chunks, _pos = _length_prefixed(data, splits + paths)
    if isinstance(chunks, str):
        return chunks
    for index, chunk in enumerate(chunks[splits:]):
        problem = path_problem(chunk.decode("utf-8", "replace"))
        if problem is not None:
            return f"path {index}: {problem}"
    return None


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")


def path_problem(text: str) -> str | None:
    """What Flink's ``Path(String)`` refuses in ``text``, else ``None``.

    As there: empty is refused; a scheme is what precedes the first ``:`` when no ``/`` comes
    before it, and must be a URI scheme (``java.net.URI``: a letter, then letters, digits,
    ``+``, ``-``, ``.``); with a scheme, the path after an optional ``//authority`` must be
    empty or absolute ("Relative path in absolute URI"), and not all empty ("Expected
    scheme-specific part"). The authority's own syntax is not checked here.
    """
    if not text:
        return "empty (Flink: cannot create a Path from an empty string)"
    colon, slash = text.find(":"), text.find("/")
    if colon == -1 or (slash != -1 and slash < colon):
        return None
    scheme, rest = text[:colon], text[colon + 1:]
    if not _SCHEME.fullmatch(scheme):
        return f"{text!r}: scheme {scheme!r} is no URI scheme (Flink: URISyntaxException)"
    path = rest
    if rest.startswith("//"):
        end = rest.find("/", 2)
        path = "" if end == -1 else rest[end:]
    elif not rest:
        return f"{text!r}: nothing after the scheme (Flink: URISyntaxException)"
    if path and not path.startswith("/"):
        return f"{text!r}: a relative path after a scheme (Flink: URISyntaxException)"
    return None
