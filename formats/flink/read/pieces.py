"""Pieces of a Flink snapshot's keyed state: key-group ranges of its handles, decoded anywhere.

Opening a snapshot decodes every keyed handle in this process
(:func:`formats.flink.checkpoint.open_flink_checkpoint`). For state too big for that, a handle
is cut into *pieces*, each a range of its key groups that one worker (a Spark task) decodes on
its own, with nothing but the piece (picklable) and the snapshot's files:

* a heap or canonical stream (``KeyGroupsStateHandle``, ``KeyGroupsSavepointStateHandle``)
  carries the offset of every key group in ``_metadata``: a piece reads the stream's header
  (key serializer and states' serializer snapshots, ``header_size`` bytes, parsed by whoever
  planned the pieces) and the bytes of its key groups, nothing else;
* a RocksDB incremental handle has no such offsets: a piece reads the handle's files and only
  the data blocks of its key groups (an SST index seek by key-group prefix).

A piece decodes to exactly the entries, sizes and errors that decoding the whole handle gives
for its key groups (the same decoders run over the same bytes), so the pieces of a handle
together are the handle. :func:`count_piece` summarises a decoded piece (rows and bytes per key
group and state, key counts at another max parallelism); :func:`merge_counts` adds up a
handle's pieces, as a snapshot opened with ``decode=False`` and ``counts`` takes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formats.flink.read.incremental import (
    DecodedIncremental,
    OpenedHandles,
    decode_incremental,
    scale_to_disk,
)
from formats.flink.read.keyed import (
    DecodedKeyed,
    HeaderCache,
    KeyedHeader,
    StateInfo,
    cached_header,
    decode_keyed_stream,
    group_ends,
    header_end,
    iter_timers,
)
from formats.flink.read.losses import refuse_losses
from formats.flink.read.metadata import FlinkIncrementalHandle, FlinkKeyedHandle
from formats.flink.read.streams import SnapshotStreams
from formats.flink.read.tables import rehash_rows
from formats.flink.types.flink_version import written_by
from statecore.errors import CorruptCheckpointError

__all__ = ["Entries", "KeyedPiece", "KeyedSource", "StateCounts", "count_piece", "counts_from_json",
           "counts_to_json", "decode_keyed_handle", "decode_piece", "key_group_bytes",
           "merge_counts", "piece_of", "plan_pieces", "read_header", "state_rows"]

#: ``(key_group, key, namespace, value)`` rows of one state, as the model holds them.
Entries = list[tuple[int, Any, Any, Any]]

@dataclass(frozen=True)
class KeyedSource:
    """One keyed handle of a snapshot, as pieces of it are decoded.

    ``operator`` is the operator's position in ``_metadata``, ``subtask`` its subtask and
    ``position`` the handle's among the subtask's managed keyed handles; ``where`` names it in
    messages (as opening the snapshot does); ``header_size`` is the stream's header bytes
    (0 for a RocksDB handle, whose header is its meta-data stream).
    """

    operator: int
    subtask: int
    position: int
    handle: FlinkKeyedHandle | FlinkIncrementalHandle
    max_parallelism: int
    where: str
    header_size: int = 0
    #: the Kryo of the Flink that wrote the snapshot (:mod:`formats.flink.types.flink_version`)
    kryo_major: int = 5

    @property
    def ident(self) -> tuple[int, int, int]:
        return self.operator, self.subtask, self.position

    @property
    def first_key_group(self) -> int:
        return self.handle.first_key_group

    @property
    def last_key_group(self) -> int:
        return self.handle.last_key_group

    @property
    def size(self) -> int:
        """The handle's bytes: its stream's, or its RocksDB files' together."""
        handle = self.handle
        if isinstance(handle, FlinkIncrementalHandle):
            return handle.meta.size + sum(stream.size for _, stream in handle.files)
        return handle.stream.size


@dataclass(frozen=True)
class KeyedPiece:
    """Key groups ``first_key_group..last_key_group`` of ``source``'s handle.

    For a heap or canonical stream, ``start..end`` are the bytes holding them (the header is
    read besides); a piece that is the whole handle reads the stream whole.
    """

    source: KeyedSource
    first_key_group: int
    last_key_group: int
    start: int = 0
    end: int = 0

    @property
    def whole(self) -> bool:
        return (self.first_key_group == self.source.first_key_group
                and self.last_key_group == self.source.last_key_group)

    @property
    def weight(self) -> int:
        """The bytes decoding it reads, roughly (for balancing)."""
        if isinstance(self.source.handle, FlinkIncrementalHandle):
            groups = self.source.last_key_group - self.source.first_key_group + 1
            return self.source.size * (self.last_key_group - self.first_key_group + 1) // groups
        return self.source.size if self.whole else self.end - self.start


def plan_pieces(sources: Iterable[KeyedSource], piece_bytes: int) -> list[KeyedPiece]:
    """Cut every handle into pieces of about ``piece_bytes`` bytes, in the sources' order.

    A stream is cut between key groups where its offsets increase (Flink writes key groups in
    order; a stream whose offsets do not is one piece); a RocksDB handle into equal ranges of
    key groups (``piece_bytes`` of its files each). A piece holds at least one key group.
    """
    out: list[KeyedPiece] = []
    for source in sources:
        handle = source.handle
        if isinstance(handle, FlinkIncrementalHandle):
            groups = handle.last_key_group - handle.first_key_group + 1
            n = max(1, min(groups, math.ceil(source.size / max(1, piece_bytes))))
            bounds = [handle.first_key_group + groups * i // n for i in range(n + 1)]
            out.extend(KeyedPiece(source, bounds[i], bounds[i + 1] - 1) for i in range(n)
                       if bounds[i] < bounds[i + 1])
            continue
        out.extend(_stream_pieces(source, handle, piece_bytes))
    return out


def _as_flink_writes(source: KeyedSource, handle: FlinkKeyedHandle) -> bool:
    """Whether a stream's key-group offsets are laid out as Flink writes them.

    Increasing after the header and within the stream (a canonical savepoint's empty key
    groups have offset 0): only then can its key groups be read apart.
    """
    offsets, size = handle.offsets, handle.stream.size
    positive = [o for o in offsets if o > 0]
    return not (any(b <= a for a, b in zip(positive, positive[1:], strict=False))
                or (positive and (positive[0] < source.header_size or positive[-1] >= size))
                or (handle.kind != "canonical" and len(positive) != len(offsets)))


def _stream_pieces(source: KeyedSource, handle: FlinkKeyedHandle, piece_bytes: int
                   ) -> list[KeyedPiece]:
    offsets, size = handle.offsets, handle.stream.size
    whole = [KeyedPiece(source, handle.first_key_group, handle.last_key_group, 0, size)]
    if size <= piece_bytes or not _as_flink_writes(source, handle):
        return whole  # small, or laid out otherwise than Flink writes: decoded whole
    ends = group_ends(offsets, size)
    pieces: list[KeyedPiece] = []
    first = 0  # index of the piece's first key group
    start = end = 0
    for i, offset in enumerate(offsets):
        if offset > 0:
            if not start:
                start = offset
            end = ends[i]
        last = i == len(offsets) - 1
        if last or (start and end - start >= piece_bytes):
            pieces.append(KeyedPiece(source, handle.first_key_group + first,
                                     handle.first_key_group + i, start, end))
            first, start, end = i + 1, 0, 0
    return pieces if len(pieces) > 1 else whole


def piece_of(source: KeyedSource, first: int, last: int) -> KeyedPiece:
    """The piece of ``source`` holding key groups ``first..last`` (clipped to its range).

    A stream laid out otherwise than Flink writes it is one piece, the whole handle.
    """
    handle = source.handle
    first, last = max(first, handle.first_key_group), min(last, handle.last_key_group)
    if first > last:
        raise ValueError(f"key groups {first}..{last} are outside {source.where}")
    if isinstance(handle, FlinkIncrementalHandle):
        return KeyedPiece(source, first, last)
    size = handle.stream.size
    if not _as_flink_writes(source, handle):
        return KeyedPiece(source, handle.first_key_group, handle.last_key_group, 0, size)
    ends = group_ends(handle.offsets, size)
    chosen = range(first - handle.first_key_group, last - handle.first_key_group + 1)
    used = [i for i in chosen if handle.offsets[i] > 0]
    if not used:  # only empty key groups (a canonical savepoint's offset 0): no bytes
        return KeyedPiece(source, first, last, 0, 0)
    return KeyedPiece(source, first, last, handle.offsets[used[0]], ends[used[-1]])


def key_group_bytes(source: KeyedSource) -> list[tuple[int, int]]:
    """``(key group, bytes)`` of a handle, all its states together, without decoding it.

    A stream's offsets give each key group's bytes (a canonical savepoint's empty key groups
    are left out); a RocksDB handle's files are spread evenly over its key groups, as
    :func:`plan_pieces` spreads them.
    """
    handle = source.handle
    groups = range(handle.first_key_group, handle.last_key_group + 1)
    if isinstance(handle, FlinkIncrementalHandle) or not _as_flink_writes(source, handle):
        each = max(1, source.size // len(groups))
        return [(group, each) for group in groups]
    ends = group_ends(handle.offsets, handle.stream.size)
    return [(group, ends[i] - offset) for i, (group, offset) in
            enumerate(zip(groups, handle.offsets, strict=True)) if offset > 0]


# -- decoding -----------------------------------------------------------------------------------


def read_header(streams: SnapshotStreams, handle: FlinkKeyedHandle | FlinkIncrementalHandle,
                where: str, headers: HeaderCache | None = None) -> KeyedHeader:
    """A keyed handle's header alone (key serializer, states): its stream's first bytes.

    A RocksDB handle's header is its meta-data stream, read whole. A key serializer statectl
    cannot decode leaves ``header.key`` ``None``: decoding the handle then counts every entry
    as not decoded (:func:`formats.flink.read.keyed.decode_keyed_stream`).
    """
    if isinstance(handle, FlinkIncrementalHandle):
        meta, _ = streams.read(handle.meta)
        header = cached_header(meta, f"{where}: meta data", headers, len(meta))
    else:
        stream = handle.stream
        shown = f"{where}: {streams.name(stream)}"
        if stream.kind in ("inline", "empty"):
            data = streams.read(stream)[0]
            header = cached_header(data, shown, headers, header_end(handle, len(data)))
        else:
            streams.check(stream)
            # the header ends where the first key group starts: exactly its bytes are read
            end = min(header_end(handle, stream.size), stream.size)
            header = cached_header(streams.read_range(stream, 0, end), shown, headers, end)
    return header


def decode_keyed_handle(streams: SnapshotStreams,
                        handle: FlinkKeyedHandle | FlinkIncrementalHandle, where: str,
                        max_parallelism: int, headers: HeaderCache | None = None
                        ) -> tuple[KeyedHeader, DecodedKeyed, DecodedIncremental | None]:
    """Decode every entry of one keyed handle (what opening a snapshot does)."""
    if isinstance(handle, FlinkIncrementalHandle):
        return decode_incremental(handle, lambda stream, local: streams.read(stream), where,
                                  max_parallelism, headers,
                                  lambda stream, local: streams.stored_as(stream))
    data, name = streams.read(handle.stream)
    header, decoded = decode_keyed_stream(data, handle, f"{where}: {name}", max_parallelism,
                                          headers)
    return header, decoded, None


def decode_piece(streams: SnapshotStreams, piece: KeyedPiece, headers: HeaderCache | None = None,
                 refuse: bool = True, opened: OpenedHandles | None = None
                 ) -> tuple[KeyedHeader, DecodedKeyed, DecodedIncremental | None]:
    """Decode one piece (:func:`_decode_piece`) as the Flink that wrote the snapshot wrote it.

    The codecs built for it read that Flink's Kryo (:mod:`formats.flink.types.flink_version`).
    ``refuse``: what could not be decoded raises (a Spark task cannot report a partial
    result); else it is in ``decoded.losses``, as when the whole handle is decoded.
    ``opened``: the RocksDB handle opened last is kept there, for the next piece of it.
    """
    with written_by(piece.source.kryo_major):
        header, decoded, info = _decode_piece(streams, piece, headers, opened)
    if refuse:
        refuse_losses(decoded.losses, piece.source.where)
    return header, decoded, info


def _decode_piece(streams: SnapshotStreams, piece: KeyedPiece, headers: HeaderCache | None,
                  opened: OpenedHandles | None = None
                  ) -> tuple[KeyedHeader, DecodedKeyed, DecodedIncremental | None]:
    """Decode the entries of one piece's key groups (see the module doc).

    A RocksDB state's bytes per key group are its keys' and values': :func:`merge_counts`
    scales a handle's to its files (``disk_bytes``) as decoding it whole does.
    """
    source = piece.source
    handle, where, max_parallelism = source.handle, source.where, source.max_parallelism
    if isinstance(handle, FlinkIncrementalHandle):
        return decode_incremental(handle, lambda stream, local: streams.read(stream), where,
                                  max_parallelism, headers,
                                  lambda stream, local: streams.stored_as(stream),
                                  key_groups=(piece.first_key_group, piece.last_key_group),
                                  on_disk=False, opened=opened)
    if piece.whole:
        return decode_keyed_handle(streams, handle, where, max_parallelism, headers)
    stream = handle.stream
    shown = f"{where}: {streams.name(stream)}"
    head = streams.read_range(stream, 0, source.header_size)
    at = piece.first_key_group - handle.first_key_group
    chosen = handle.offsets[at:at + piece.last_key_group - piece.first_key_group + 1]
    for i, offset in enumerate(chosen):
        bad = (offset < source.header_size or offset >= stream.size if handle.kind == "canonical"
               else offset < source.header_size or offset + 4 > stream.size)
        if (offset or handle.kind != "canonical") and bad:
            raise CorruptCheckpointError(f"{shown}: key group {piece.first_key_group + i} "
                                         f"starts at byte {offset}, outside the state data")
    body = streams.read_range(stream, piece.start, piece.end)
    # the key groups' offsets moved to follow the header directly
    shift = source.header_size - piece.start
    offsets = tuple(o + shift if o or handle.kind != "canonical" else 0 for o in chosen)
    part = FlinkKeyedHandle(handle.kind, piece.first_key_group, offsets, stream,
                            handle.handle_id)
    return (*decode_keyed_stream(head + body, part, shown, max_parallelism, headers), None)


def state_rows(info: StateInfo, decoded: DecodedKeyed) -> Entries:
    """One state's rows as the model holds them (timers: one row per key and namespace).

    A state written as another (``migrate``) is found under its name in the source
    (:attr:`StateInfo.source_name`).
    """
    entries = decoded.entries[info.source_name or info.name]
    return iter_timers(entries) if info.kind == "timers" else entries


# -- counts -------------------------------------------------------------------------------------


@dataclass
class StateCounts:
    """What a state of a handle (or a piece) holds per key group, from decoding it.

    ``rows`` and ``bytes`` per key group; a RocksDB state also its column family's bytes on
    disk (``disk``) and SST files (``stored``, as a plan names them). ``rehashed``: entries per
    key group at another max parallelism (the keys' Java hashes), by that max parallelism.
    """

    rows: dict[int, int] = field(default_factory=dict)
    bytes: dict[int, int] = field(default_factory=dict)
    disk: int | None = None
    stored: tuple[str, ...] | None = None
    rehashed: dict[int, dict[int, int]] = field(default_factory=dict)


def count_piece(header: KeyedHeader, decoded: DecodedKeyed, info: DecodedIncremental | None,
                rehash_to: Sequence[int] = (), where: str = "") -> dict[str, StateCounts]:
    """The counts of every state of a decoded piece.

    ``rehash_to``: max parallelisms to count the keys' new key groups at (none when the key
    serializer's hash is unknown: a rescale refuses those keys before anything is counted).
    """
    key = header.key
    out: dict[str, StateCounts] = {}
    for state in header.states:
        rows = state_rows(state, decoded)
        counts = StateCounts()
        for key_group, n in zip(*np.unique(np.fromiter((r[0] for r in rows), np.int64,
                                                       len(rows)), return_counts=True),
                                strict=True):
            counts.rows[int(key_group)] = int(n)
        counts.bytes = dict(decoded.state_key_group_bytes[state.name])
        if info is not None:
            counts.disk = info.disk_bytes.get(state.name, 0)
            counts.stored = tuple(f.stored for f in info.files if f.column_family == state.name)
        if key is not None and key.java_hash is not None:
            for m in rehash_to:
                try:
                    new = rehash_rows(key.java_hash, rows, m)
                except (TypeError, ValueError) as exc:
                    raise CorruptCheckpointError(f"{where}: a key cannot be hashed: {exc}"
                                                 ) from exc
                groups, n = np.unique(new, return_counts=True)
                counts.rehashed[m] = {int(g): int(c) for g, c in zip(groups, n, strict=True)}
        out[state.name] = counts
    return out


def merge_counts(parts: Iterable[dict[str, StateCounts]]) -> dict[str, StateCounts]:
    """A handle's counts from its pieces' (RocksDB bytes scaled to the files, as when whole)."""
    out: dict[str, StateCounts] = {}
    for part in parts:
        for name, counts in part.items():
            total = out.setdefault(name, StateCounts())
            total.rows.update(counts.rows)  # a key group is in one piece
            total.bytes.update(counts.bytes)
            if counts.disk is not None:
                total.disk, total.stored = counts.disk, counts.stored
            for m, groups in counts.rehashed.items():
                into = total.rehashed.setdefault(m, {})
                for g, n in groups.items():
                    into[g] = into.get(g, 0) + n
    for total in out.values():
        if total.disk is not None:
            scale_to_disk(total.bytes, total.disk)
    return out


def counts_to_json(counts: dict[str, StateCounts]) -> list[Any]:
    """``counts`` as JSON-able lists (what a task sends back)."""
    return [[name, sorted(c.rows.items()), sorted(c.bytes.items()), c.disk,
             None if c.stored is None else list(c.stored),
             [[m, sorted(groups.items())] for m, groups in sorted(c.rehashed.items())]]
            for name, c in counts.items()]


def counts_from_json(document: list[Any]) -> dict[str, StateCounts]:
    """The counts :func:`counts_to_json` wrote."""
    out = {}
    for name, rows, sizes, disk, stored, rehashed in document:
        out[name] = StateCounts({int(g): int(n) for g, n in rows},
                                {int(g): int(n) for g, n in sizes}, disk,
                                None if stored is None else tuple(stored),
                                {int(m): {int(g): int(n) for g, n in groups}
                                 for m, groups in rehashed})
    return out

