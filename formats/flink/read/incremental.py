"""Flink's RocksDB snapshots: incremental checkpoints and native savepoints, decoded.

An ``IncrementalRemoteKeyedStateHandle``
(:class:`~formats.flink.read.metadata.FlinkIncrementalHandle`) is one RocksDB instance's files plus
the states' meta data. Decoding one:

1. The meta-data stream is a ``KeyedBackendSerializationProxy`` (the same header a full snapshot
   starts with: key serializer, states with their serializer snapshots).
2. Every ``*.sst`` file is opened (:mod:`formats.flink.read.rocksdb`); its properties name its
column
   family, which is the state's name (Flink's ``RocksDBKeyedStateBackend`` creates one column
   family per state; timers live in ``_timer_state/...`` families).
3. Per state, the live view of its column family's tables (newest sequence number wins,
   deletions and range deletions hide older versions, merge operands of list state are joined
   with ``,``) restricted to the handle's key groups: a key outside them (left by a rescaled
   restore before compaction) is ignored, as Flink's restore ignores it.
4. Each live key is ``key-group prefix | key | namespace [| map user key]`` and each value the
   state serializer's bytes -- exactly the pairs of the canonical savepoint format
   (``RocksDBKeySerializationUtils``, ``SerializedCompositeKeyBuilder``), so the canonical
   format's pair decoders (:func:`formats.flink.read.keyed.pair_decoder`) decode them.

Sizes are real: a state's bytes are its column family's SST files, shared among its key groups
in proportion to their keys and values. The MANIFEST, when the handle has one, confirms the live
file set: an SST file the MANIFEST does not list as live, or a live one the handle lacks, is a
corruption error; ``CURRENT`` must name that MANIFEST. Every file of the handle is read, so each
is checked to be present with the size the metadata states.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats.flink.java.input import DataReader
from formats.flink.read.keyed import (
    DecodedKeyed,
    HeaderCache,
    KeyedHeader,
    Losses,
    PairDecoder,
    cached_header,
    described,
    in_state,
    pair_decoder,
    reason_of,
)
from formats.flink.read.metadata import FlinkIncrementalHandle, StreamHandle
from formats.flink.read.speedups import PairRuns, pair_runs
from statecore.errors import CheckpointError, CorruptCheckpointError, UnsupportedFormatError

if TYPE_CHECKING:  # RocksDB's reader is imported where its files are read (issue 45: start-up)
    from formats.flink.read.rocksdb import SstFile

__all__ = ["DecodedIncremental", "RocksDBFile", "decode_incremental", "key_group_prefix",
           "scale_to_disk"]

#: Reads one of a handle's files: ``(stream, RocksDB name) -> (bytes, name for messages)``.
FileReader = Callable[[StreamHandle, str], tuple[bytes, str]]


@dataclass(frozen=True)
class RocksDBFile:
    """One file of a decoded handle: its RocksDB name, where it is stored, its size."""

    local_name: str
    stored: str  # a file name relative to the snapshot, ``shared/<name>``, or ``inline``
    size: int
    column_family: str | None = None  # SST files only


@dataclass
class DecodedIncremental:
    """What :func:`decode_incremental` returns beside the entries: the files it read."""

    files: list[RocksDBFile] = field(default_factory=list)
    #: per state: the bytes of its column family's SST files
    disk_bytes: dict[str, int] = field(default_factory=dict)


def key_group_prefix(key_group: int, max_parallelism: int) -> bytes:
    """The big-endian key-group prefix of a RocksDB key: 1 byte up to max parallelism 128.

    Port of ``CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix`` and
    ``writeKeyGroup``.
    """
    return key_group.to_bytes(1 if max_parallelism <= 128 else 2, "big")


@dataclass
class _Opened:
    """A handle's files read and checked, its SST files opened, by column family."""

    header: KeyedHeader
    families: dict[str, list[SstFile]]
    files: list[RocksDBFile]


class OpenedHandles:
    """The RocksDB handle opened last, kept to decode more pieces of it.

    A handle decoded in pieces (runs of key groups, one after another: ``export``, ``verify``,
    the rewrites) has its files read, checked and parsed once, not once a piece (the big
    RocksDB checkpoint of the benchmarks: 84 pieces of two handles). One handle at a time:
    memory holds its files between pieces, as decoding any piece of it does.
    """

    def __init__(self) -> None:
        self._handle: FlinkIncrementalHandle | None = None
        self._opened: _Opened | None = None

    def get(self, handle: FlinkIncrementalHandle) -> _Opened | None:
        return self._opened if self._handle == handle else None

    def put(self, handle: FlinkIncrementalHandle, opened: _Opened) -> None:
        self._handle, self._opened = handle, opened


def _open(handle: FlinkIncrementalHandle, read: FileReader, where: str,
          headers: HeaderCache | None, stored: Callable[[StreamHandle, str], str] | None
          ) -> _Opened:
    """Read every file of ``handle`` (each checked), parse its header and open its SSTs."""
    from formats.flink.read.rocksdb import open_sst
    meta, _ = read(handle.meta, "meta data")
    header = cached_header(meta, f"{where}: meta data", headers, len(meta))
    files = [RocksDBFile("(meta data)", stored(handle.meta, "(meta data)")
                         if stored is not None else "(meta data)", len(meta))]
    families: dict[str, list[SstFile]] = {}
    manifests = []
    for local, stream in handle.files:
        shown = stored(stream, local) if stored is not None else local
        if local.endswith(".sst"):
            data, name = read(stream, local)
            table = open_sst(data, f"{where}: {local} ({name})")
            family = table.properties.column_family_name or "default"
            families.setdefault(family, []).append(table)
            files.append(RocksDBFile(local, shown, len(data), family))
        elif local.startswith("MANIFEST-"):
            data, name = read(stream, local)
            manifests.append((local, data, name))
            files.append(RocksDBFile(local, shown, len(data)))
        else:  # CURRENT, OPTIONS-*: read too, so every file is checked (present, its size)
            data, name = read(stream, local)
            if local == "CURRENT":
                _check_current(data, f"{where}: {local} ({name})", handle)
            files.append(RocksDBFile(local, shown, len(data)))
    for local, data, name in manifests:
        _check_manifest(data, f"{where}: {local} ({name})", handle, families)
    return _Opened(header, families, files)


def decode_incremental(handle: FlinkIncrementalHandle, read: FileReader, where: str,
                       max_parallelism: int, headers: HeaderCache | None = None,
                       stored: Callable[[StreamHandle, str], str] | None = None, *,
                       key_groups: tuple[int, int] | None = None, on_disk: bool = True,
                       opened: OpenedHandles | None = None
                       ) -> tuple[KeyedHeader, DecodedKeyed, DecodedIncremental]:
    """Decode every live entry of one incremental handle (see the module doc).

    ``read`` fetches a file's bytes; ``stored`` names where a file is (for plans and verify).
    ``key_groups`` ``(first, last)``: only those key groups of the handle's (a part of the
    handle, as a Spark task decodes it). ``on_disk=False`` leaves each state's bytes per key
    group as its keys' and values' bytes: :func:`scale_to_disk` of the parts' bytes together,
    with ``disk_bytes``, gives what decoding the whole handle does. ``opened``: where the
    handle opened last is kept (its files are read and parsed again only for another handle).
    """
    from formats.flink.read.rocksdb.merge import live_batches
    found = opened.get(handle) if opened is not None else None
    if found is None:
        found = _open(handle, read, where, headers, stored)
        if opened is not None:
            opened.put(handle, found)
    header, families = found.header, found.families
    info = DecodedIncremental(list(found.files))
    decoded = DecodedKeyed({s.name: [] for s in header.states},
                           {s.name: {} for s in header.states})
    prefix = 1 if max_parallelism <= 128 else 2
    first, last = handle.first_key_group, handle.last_key_group
    if key_groups is not None:
        if not first <= key_groups[0] <= key_groups[1] <= last:
            raise CorruptCheckpointError(f"{where}: key groups {key_groups[0]}-{key_groups[1]} "
                                         f"are not in the handle's {first}-{last}")
        first, last = key_groups
    start = key_group_prefix(first, max_parallelism)
    end = (key_group_prefix(last + 1, max_parallelism)
           if last + 1 < (1 << (8 * prefix)) else None)
    for state in header.states:
        tables = families.get(state.name, [])
        if not tables:
            continue
        out = decoded.entries[state.name]
        sizes = decoded.state_key_group_bytes[state.name]
        decode_pair = pair_decoder(state, header.key, f"{where}: state {state.name!r}", out,
                                   decoded.losses, header.key_snapshot)
        lose = _pair_loser(decoded.losses, state.name, header,
                           f"{where}: state {state.name!r}")
        fast = pair_runs(state, header.key, out, prefix)
        # only the handle's key groups: a key outside them is ignored, as Flink's restore does
        batches = live_batches(tables, start,
                               end if end is not None else b"\xff" * (prefix + 1))
        try:
            _decode_batches(batches, prefix, decode_pair, sizes, where, state.name, lose, fast)
        except CheckpointError as exc:
            raise in_state(exc, state) from exc
        info.disk_bytes[state.name] = sum(len(table.data) for table in tables)
        if on_disk:
            scale_to_disk(sizes, info.disk_bytes[state.name])
    for state_sizes in decoded.state_key_group_bytes.values():
        for key_group, size in state_sizes.items():
            decoded.key_group_bytes[key_group] = decoded.key_group_bytes.get(key_group, 0) + size
    return header, decoded, info


def _pair_loser(losses: Losses, state: str, header: KeyedHeader, where: str
                ) -> Callable[[CheckpointError, int], None]:
    """Counts a pair whose key could not be decoded: it is left out.

    (Values that cannot be decoded are kept as markers by the pair decoder itself.)
    """
    key_class, key_serializer = described(header.key_snapshot)

    def lose(exc: CheckpointError, key_group: int) -> None:
        losses.add(state, key_group, 1, key_class, key_serializer,
                   "its key: " + reason_of(exc, where),
                   not isinstance(exc, UnsupportedFormatError), False)
    return lose


def _decode_batches(batches: Iterable[tuple[list[bytes], list[bytes]]], prefix: int,
                    decode_pair: PairDecoder, sizes: dict[int, int], where: str,
                    state_name: str, lose: Callable[[CheckpointError, int], None],
                    fast: PairRuns | None = None) -> None:
    """Decode a state's live pairs, batch by batch; sum their bytes per key group in ``sizes``.

    Keys are sorted, so a batch's keys of one key group are adjacent: the key group is found
    per run (bisecting the batch at the next key group's prefix), not per key. A run is
    decoded by ``fast`` (:func:`formats.flink.read.speedups.pair_runs`) where it takes it.
    """
    k = DataReader(b"", where)
    v = DataReader(b"", where)
    for keys, values in batches:
        if prefix > 1 and min(map(len, keys)) < prefix:
            # (with a 1-byte prefix every key in the range is at least as long as its start)
            n = min(map(len, keys))
            raise CorruptCheckpointError(f"{where}: state {state_name!r}: a key of {n} bytes "
                                         f"has no key-group prefix")
        first = keys[0][0] if prefix == 1 else keys[0][0] << 8 | keys[0][1]
        last = keys[-1][0] if prefix == 1 else keys[-1][0] << 8 | keys[-1][1]
        at = 0
        for key_group in range(first, last + 1):
            # the keys of this key group: those below the next key group's prefix
            upto = (len(keys) if key_group == last
                    else bisect_left(keys, (key_group + 1).to_bytes(prefix, "big"), at))
            if upto == at:
                continue
            run_keys, run_values = ((keys, values) if at == 0 and upto == len(keys)
                                    else (keys[at:upto], values[at:upto]))
            at = upto
            size = fast(run_keys, run_values, key_group) if fast is not None else None
            if size is not None:
                sizes[key_group] = sizes.get(key_group, 0) + size
                continue
            for key, value in zip(run_keys, run_values, strict=True):
                k.data = key
                k.pos = prefix
                k.end = len(key)
                v.data = value
                v.pos = 0
                v.end = len(value)
                try:
                    decode_pair(k, v, key_group)
                except CheckpointError as exc:
                    lose(exc, key_group)
            sizes[key_group] = (sizes.get(key_group, 0) + sum(map(len, run_keys))
                                + sum(map(len, run_values)))


def scale_to_disk(sizes: dict[int, int], disk: int) -> None:
    """Scale a state's bytes per key group (its keys and values) to its SST files' size.

    A state's real size is its column family's files; their compression and block overhead
    are shared among its key groups in proportion to their data.
    """
    logical = sum(sizes.values())
    if not logical:
        return
    groups = sorted(sizes)
    shares = [sizes[g] * disk // logical for g in groups]
    shares[-1] += disk - sum(shares)  # the rounding rest: the totals stay exact
    for g, share in zip(groups, shares, strict=True):
        sizes[g] = share


def _check_current(data: bytes, where: str, handle: FlinkIncrementalHandle) -> None:
    """``CURRENT`` names the handle's MANIFEST (one line, ``MANIFEST-<number>``)."""
    named = data.decode("ascii", "replace").strip()
    manifests = {local for local, _ in handle.files if local.startswith("MANIFEST-")}
    if manifests and named not in manifests:
        raise CorruptCheckpointError(f"{where}: names {named[:40]!r}, the handle's MANIFEST is "
                                     f"{', '.join(sorted(manifests))}")


#: Live SST files of MANIFESTs read (by their bytes): a handle read in pieces (runs of key
#: groups) has its MANIFEST checked once, not once a piece (84 pieces of the big RocksDB
#: checkpoint: 1.5 s). Bounded; a MANIFEST that does not parse is never kept.
_LIVE_FILES: dict[bytes, frozenset[str]] = {}
_LIVE_FILES_HELD = 16


def _live_files(data: bytes, where: str) -> frozenset[str]:
    live = _LIVE_FILES.get(data)
    if live is None:
        from formats.flink.read.rocksdb.manifest import read_manifest
        manifest = read_manifest(data, where)
        live = frozenset(f.file_name for cf in manifest.column_families.values()
                         for f in cf.live_files())
        if len(_LIVE_FILES) >= _LIVE_FILES_HELD:
            _LIVE_FILES.clear()
        _LIVE_FILES[data] = live
    return live


def _check_manifest(data: bytes, where: str, handle: FlinkIncrementalHandle,
                    families: dict[str, list[SstFile]]) -> None:
    """The MANIFEST's live SST files are exactly the handle's (by file number)."""
    live = _live_files(data, where)
    held = {local for local, _ in handle.files if local.endswith(".sst")}
    if live != held:
        missing, extra = sorted(live - held), sorted(held - live)
        raise CorruptCheckpointError(
            f"{where}: the MANIFEST's live files differ from the handle's: "
            + "; ".join(filter(None, [f"missing {', '.join(missing[:5])}" if missing else "",
                                      f"not live {', '.join(extra[:5])}" if extra else ""])))
