"""Flink's keyed state streams: the heap full-snapshot format and the canonical savepoint format.

- Header (reference §6.1): the key serializer and the states' meta infos,
  :mod:`formats.flink.read.state_meta`; a state's id is its position in the header's list.
- Heap body (§6.2): at each key group's offset ``int key_group``, then for every state
  ``short id`` and its block (``int n`` then ``n`` x (namespace, key, value) for key/value state,
  ``int n`` elements for timers); each state block in its own compression stream when
  compressed.
- Canonical body (§6.3): for each key group with data (offset != 0): a compression stream of
  ``short id``, then ``(byte[] key, byte[] value)`` pairs; a pair whose key's first byte has the
  0x80 bit is followed by ``short`` (a new state id, or 0xFFFF: end of the key group).

Snappy (Flink's ``SnappyStreamCompressionDecorator`` writes the framing format of
``SnappyFramedOutputStream``): chunks are unframed here and each compressed chunk is inflated by
pyarrow's Snappy codec (an existing library; no new dependency). CRCs are not checked: a
corrupt chunk fails to inflate or decodes to inconsistent data, which is reported.

Nothing that cannot be decoded stops a stream (docs/flink-types.md, "Never all-or-nothing"):
what is lost is counted in :class:`~formats.flink.read.losses.Losses`, scoped to a value (canonical)
or to a state's block in a key group (heap, whose next block is found again).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from formats.flink.java.input import DataReader
from formats.flink.read.losses import Losses, described, reason_of, short_names
from formats.flink.read.metadata import FlinkKeyedHandle
from formats.flink.read.pairs import PairDecoder, in_state, pair_decoder, undecodable_error
from formats.flink.read.speedups import SPEEDUPS, Attempts
from formats.flink.read.speedups import plans as speedup_plans
from formats.flink.read.state_meta import (
    HeaderCache,
    KeyedHeader,
    StateInfo,
    cached_header,
    header_end,
    read_keyed_header,
    read_state_info,
)
from formats.flink.types.codecs import STRING_READ as _STRING_READ
from formats.flink.types.codecs import VOID_READ as _VOID_READ
from formats.flink.types.codecs import why_undecodable
from statecore.errors import CheckpointError, CorruptCheckpointError, UnsupportedFormatError
from statecore.serializers import VOID_NAMESPACE

__all__ = ["DecodedKeyed", "HeaderCache", "KeyedHeader", "Losses", "PairDecoder", "StateInfo",
           "cached_header",
           "described", "header_end", "reason_of", "short_names",
           "decode_keyed_stream", "group_ends", "in_state", "pair_decoder", "read_keyed_header",
           "read_state_info", "undecodable_key", "undecodable_state", "unframe_snappy"]

_BLOCK_HEAD = struct.Struct(">hi")  # a heap state block: short state id, int entry count
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
END_OF_KEY_GROUP = -1  # 0xFFFF read as a signed short
FIRST_BIT = 0x80
MAX_CHUNK = 1 << 16  # the framing format's largest uncompressed chunk


@dataclass
class DecodedKeyed:
    """The entries of one keyed handle, per state: ``(key_group, key, namespace, value)``."""

    entries: dict[str, list[tuple[int, Any, Any, Any]]] = field(default_factory=dict)
    #: encoded bytes per state and key group (decompressed bytes when compressed)
    state_key_group_bytes: dict[str, dict[int, int]] = field(default_factory=dict)
    key_group_bytes: dict[int, int] = field(default_factory=dict)
    #: what could not be decoded (:class:`Losses`)
    losses: Losses = field(default_factory=lambda: Losses())


def unframe_snappy(data: bytes, where: str) -> bytes:
    """Inflate Snappy framing-format data (possibly several streams back to back)."""
    out: list[bytes] = []
    pos, end = 0, len(data)
    while pos < end:
        if pos + 4 > end:
            raise CorruptCheckpointError(f"{where}: truncated Snappy chunk header")
        kind = data[pos]
        length = int.from_bytes(data[pos + 1:pos + 4], "little")
        body = data[pos + 4:pos + 4 + length]
        if len(body) != length:
            raise CorruptCheckpointError(f"{where}: truncated Snappy chunk")
        pos += 4 + length
        if kind == 0xFF:
            if body != b"sNaPpY":
                raise CorruptCheckpointError(f"{where}: bad Snappy stream identifier")
        elif kind in (0x00, 0x01):
            if length < 4:
                raise CorruptCheckpointError(f"{where}: Snappy chunk without a checksum")
            payload = body[4:]
            if kind == 0x01:
                out.append(payload)
                continue
            size = _snappy_length(payload, where)
            try:
                out.append(pa.decompress(payload, decompressed_size=size, codec="snappy",
                                         asbytes=True))
            except (pa.ArrowException, ValueError, OSError) as exc:
                raise CorruptCheckpointError(f"{where}: bad Snappy data: {exc}") from exc
        elif 0x02 <= kind <= 0x7F:
            raise CorruptCheckpointError(f"{where}: unknown Snappy chunk type {kind:#x}")
        # 0x80..0xFE: skippable (padding and reserved)
    return b"".join(out)


def _snappy_length(payload: bytes, where: str) -> int:
    result = shift = 0
    for i, b in enumerate(payload[:5]):
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > MAX_CHUNK:
                raise CorruptCheckpointError(f"{where}: Snappy chunk of {result} bytes, more "
                                             f"than the format's {MAX_CHUNK}")
            return result
        shift += 7
        del i
    raise CorruptCheckpointError(f"{where}: bad Snappy length")


def undecodable_key(where: str, header: KeyedHeader) -> Exception:
    """The error for a key serializer statectl cannot decode."""
    return undecodable_error(where, "the key", header.key_snapshot)


def decode_keyed_stream(data: bytes, handle: FlinkKeyedHandle, where: str,
                        max_parallelism: int, headers: HeaderCache | None = None
                        ) -> tuple[KeyedHeader, DecodedKeyed]:
    """Decode every entry of one keyed handle (its stream's bytes are ``data``).

    ``headers``, shared by the streams of one snapshot, saves parsing the same header (every
    subtask of an operator writes the same one) again: a header is reused only for a stream
    that starts with exactly its bytes. Headers are never changed after parsing.

    A key serializer statectl cannot decode leaves every state's entries undecoded: they are
    counted in the losses as far as the format tells (the canonical format's pairs each; the
    heap format's first block of each key group).
    """
    header = cached_header(data, where, headers, header_end(handle, len(data)))
    decoded = DecodedKeyed({s.name: [] for s in header.states},
                           {s.name: {} for s in header.states})
    if handle.kind == "canonical":
        _decode_canonical(data, handle, header, where, max_parallelism, decoded)
    else:
        _decode_heap(data, handle, header, where, decoded)
    return header, decoded


def group_ends(offsets: Sequence[int], size: int) -> list[int]:
    """Where each key group's bytes end: the next larger offset after it, or ``size``.

    Also what :mod:`formats.flink.read.pieces` plans pieces of a stream by.
    """
    ends = [size] * len(offsets)
    following = size
    for i in range(len(offsets) - 1, -1, -1):
        ends[i] = following
        if 0 < offsets[i] < following:
            following = offsets[i]
    return ends


def _decode_heap(data: bytes, handle: FlinkKeyedHandle, header: KeyedHeader, where: str,
                 decoded: DecodedKeyed) -> None:
    """The heap format's key groups (module doc), each read on its own.

    The format delimits neither values nor state blocks: a block statectl cannot read to its
    end (a state without a codec, a value that does not decode) is counted in
    ``decoded.losses`` and the next block is found again (:func:`_resync_block`); a key group
    that cannot be read at all is counted whole, and the next starts at its recorded offset.
    """
    states = header.states
    losses = decoded.losses
    read_key = header.key.read if header.key is not None else _no_key
    offsets = list(handle.offsets)
    ends = group_ends(offsets, len(data))
    whole = DataReader(data, where)
    n_states = len(states)
    # per state id: how its entries are read (decided once, not per block); None: no codec
    plans = [_heap_plan(s, read_key, decoded) if header.key is not None and _heap_readable(s)
             else None for s in states]
    names = [_heap_described(s, header) for s in states]
    state_sizes = [decoded.state_key_group_bytes[s.name] for s in states]
    group_bytes = decoded.key_group_bytes
    size = len(data)
    # a key group without entries: a block header (state id, count 0) per state
    empty_size, empty_blocks = 6 * n_states, struct.Struct(">" + "hi" * n_states)
    state_ids = list(range(n_states))
    empty_pattern = [b"-"]  # the block headers of an empty key group, once seen
    fast = _Fast(header, decoded)
    for i, offset in enumerate(offsets):
        key_group = handle.first_key_group + i
        end = ends[i]
        try:
            if offset < header.size or offset + 4 > size:
                raise CorruptCheckpointError(f"{where}: key group {key_group} starts at byte "
                                             f"{offset}, outside the state data")
            r = whole
            stored = _I32.unpack_from(data, offset)[0]
            r.pos = offset + 4
            if stored != key_group:
                r.pos = offset
                raise r.fail(f"key group {stored} found where the offsets say {key_group}")
            if header.compressed:
                r = DataReader(unframe_snappy(data[r.pos:end], where), f"{where} (key group "
                                                                        f"{key_group})")
            elif end - r.pos == empty_size:  # only the states' block headers: all empty?
                # every key group lists the states in one order: once checked, compare bytes
                headers = data[r.pos:end]
                if headers == empty_pattern[0]:
                    group_bytes[key_group] = end - offset
                    continue
                blocks = empty_blocks.unpack_from(headers)
                if not any(blocks[1::2]) and sorted(blocks[0::2]) == state_ids:
                    empty_pattern[0] = headers
                    group_bytes[key_group] = end - offset
                    continue  # else the block-by-block reading below says what is wrong
            limit = r.end if header.compressed else end
            if not fast.heap(r.data, r.pos, limit, key_group):
                _heap_key_group(r, limit, key_group, states, plans, names, read_key, losses,
                                where, state_sizes)
        except CheckpointError as exc:
            losses.add("(key group)", key_group, -1, "(the whole key group)", "",
                       reason_of(exc, where), True, False)
            continue
        group_bytes[key_group] = end - offset


class _Fast:
    """The compiled decoder of :mod:`formats.flink.read.speedups` on one stream's key groups.

    Each method decodes one key group into the stream's entries and state sizes, as the
    Python readers here would, and returns True; False when it does not take it (not built,
    a state it has no plan for, anything unusual): then nothing was added, and the Python
    readers decode it.
    """

    def __init__(self, header: KeyedHeader, decoded: DecodedKeyed) -> None:
        self.plans = speedup_plans(header)
        self.attempts = Attempts()
        self.outs = [decoded.entries[s.name] for s in header.states]
        self.sizes = [decoded.state_key_group_bytes[s.name] for s in header.states]

    def canonical(self, data: Any, pos: int, limit: int, key_group: int, prefix: int) -> bool:
        if self.plans is None or not self.attempts.worth_it:
            return False
        assert SPEEDUPS is not None
        found: list[list[Any]] = [[] for _ in self.outs]
        runs = SPEEDUPS.canonical_group(data, pos, limit, key_group, prefix, self.plans,
                                        found, VOID_NAMESPACE)
        return self._take(runs, found, key_group)

    def heap(self, data: Any, pos: int, limit: int, key_group: int) -> bool:
        if self.plans is None or not self.attempts.worth_it:
            return False
        assert SPEEDUPS is not None
        found: list[list[Any]] = [[] for _ in self.outs]
        runs = SPEEDUPS.heap_group(data, pos, limit, key_group, self.plans, found,
                                   VOID_NAMESPACE)
        return self._take(runs, found, key_group)

    def _take(self, runs: list[tuple[int, int, int]] | None, found: list[list[Any]],
              key_group: int) -> bool:
        self.attempts.count(runs is not None)
        if runs is None:
            return False
        for out, entries in zip(self.outs, found, strict=True):
            if entries:
                out.extend(entries)
        for state_id, start, end in runs:  # a state's bytes in the key group, as counted here
            sizes = self.sizes[state_id]
            sizes[key_group] = sizes.get(key_group, 0) + end - start
        return True


def undecodable_state(state: StateInfo, header: KeyedHeader) -> str:
    """Why ``state``'s entries cannot be decoded, as its header tells; ``""`` when they can.

    Its keys (the key serializer), its meta info (not read to its end), its namespace, its
    map keys or its values have no decoder. A state whose values alone have none is read but
    for them (a canonical savepoint or RocksDB keeps them as markers; a heap checkpoint counts
    its entries).
    """
    if header.key is None or state.unread or not _heap_readable(state):
        return _heap_described(state, header)[2]
    return ""


def _heap_readable(state: StateInfo) -> bool:
    return state.value is not None and (state.kind == "timers" or state.namespace is not None)


def _no_key(r: DataReader) -> Any:
    raise UnsupportedFormatError(f"{r.where}: no decoder for the key")


def _heap_described(state: StateInfo, header: KeyedHeader) -> tuple[str, str, str]:
    """``(class, serializer, reason)`` of what makes a state's block unreadable without a codec."""
    if header.key is None:
        cls, ser = described(header.key_snapshot)
        return cls, ser, short_names(f"no decoder for its keys: "
                                     f"{why_undecodable(header.key_snapshot)}")
    if state.unread:
        snapshot = state.serializers.get("VALUE_SERIALIZER")
        cls, ser = described(snapshot)
        return cls, ser, short_names(f"its meta info could not be read: {state.unread}")
    if state.kind != "timers" and state.namespace is None and state.value is not None:
        snapshot = state.serializers.get("NAMESPACE_SERIALIZER")
        what = "its namespace"
    else:
        snapshot = state.serializers.get("VALUE_SERIALIZER")
        what = "its values"
    cls, ser = described(snapshot)
    why = why_undecodable(snapshot) if snapshot is not None else "no serializer"
    return cls, ser, short_names(f"no decoder for {what}: {why}")


def _heap_key_group(r: DataReader, limit: int, key_group: int, states: list[StateInfo],
                    plans: list[tuple[int, Reader, Reader | None, list[Any], dict[int, int]]
                                | None],
                    names: list[tuple[str, str, str]], read_key: Reader, losses: Losses,
                    where: str, state_sizes: list[dict[int, int]]) -> None:
    """The state blocks of one key group, from ``r.pos`` to ``limit``.

    A block that could not be read to its end has its bytes counted in ``state_sizes`` (per
    state id): up to the next block found again, else to the key group's end.
    """
    data_k = r.data
    n_states = len(states)
    seen = 0
    pos = r.pos
    lost_damaged: bool | None = None  # set once a block could not be read to its end
    for _ in range(n_states):
        if pos >= limit and lost_damaged is not None:
            break
        block_start = pos
        if pos + 6 > limit:
            raise r.fail("truncated state block header")
        state_id, n = _BLOCK_HEAD.unpack_from(data_k, pos)
        pos += 6
        if not 0 <= state_id < n_states or seen >> state_id & 1:
            raise r.fail(f"state id {state_id} unknown or repeated in key group "
                         f"{key_group}")
        seen |= 1 << state_id
        if not n:
            continue
        if n < 0 or n > limit - pos:
            r.pos = pos
            raise r.fail(f"impossible entry count {n}")
        plan = plans[state_id]
        cls, ser, reason = names[state_id]
        if plan is None:
            losses.add(states[state_id].name, key_group, n, cls, ser, reason, False, False)
            damaged = False
        else:
            kind, read_value, read_ns, out, sizes = plan
            before = len(out)
            r.pos = pos
            try:
                _read_block(kind, n, r, data_k, limit, key_group, read_key, read_value,
                            read_ns, out.append)
                pos = r.pos
                sizes[key_group] = pos - block_start
                continue
            except CheckpointError as exc:
                damaged = not isinstance(exc, UnsupportedFormatError)
                losses.add(states[state_id].name, key_group, n - (len(out) - before), cls, ser,
                           reason_of(exc, where), damaged, False)
        lost_damaged = bool(lost_damaged) or damaged
        found = _resync_block(data_k, pos, limit, key_group, seen, plans, read_key, where)
        # its bytes: up to the next block found, or (none found) the rest of the key group,
        # blocks passed over included (they are counted lost, their bytes unknown)
        lost = state_sizes[state_id]
        lost[key_group] = lost.get(key_group, 0) + (limit if found is None else found) - \
            block_start
        if found is None:
            break
        pos = found
    if lost_damaged is None:
        return
    for state_id in range(n_states):  # blocks passed over while finding the next one
        if not seen >> state_id & 1:
            cls, ser, _reason = names[state_id]
            losses.add(states[state_id].name, key_group, -1, cls, ser,
                       "its block follows one statectl could not read to its end, and was "
                       "not found", lost_damaged, False)


#: Most candidate positions :func:`_resync_block` tries in one key group.
MAX_BLOCK_TRIES = 256


def _resync_block(data: bytes, start: int, limit: int, key_group: int, seen: int,
                  plans: list[tuple[int, Reader, Reader | None, list[Any], dict[int, int]]
                              | None],
                  read_key: Reader, where: str) -> int | None:
    """Where the next state block starts after one that could not be read to its end.

    The heap format writes a block's entry count, not its length. The next block is a state
    id not seen yet in this key group and a count; a candidate position is taken when that
    block decodes completely and is followed by the key group's end or by another such block
    header. ``limit`` when every state was seen (the block was the last); ``None`` when no
    candidate holds (the rest of the key group is counted lost).
    """
    n_states = len(plans)
    unseen = [i for i in range(n_states) if not seen >> i & 1]
    if not unseen:
        return limit
    wanted = {i for i in unseen if plans[i] is not None}
    tries = 0
    scratch: list[Any] = []
    for candidate in range(start, limit - 5):
        state_id, n = _BLOCK_HEAD.unpack_from(data, candidate)
        if state_id not in wanted or n < 0 or n > limit - candidate - 6:
            continue
        tries += 1
        if tries > MAX_BLOCK_TRIES:
            return None
        plan = plans[state_id]
        assert plan is not None
        kind, read_value, read_ns, _out, _sizes = plan
        probe = DataReader(data, where, candidate + 6, limit)
        scratch.clear()
        try:
            _read_block(kind, n, probe, data, limit, key_group, read_key, read_value, read_ns,
                        scratch.append)
        except CheckpointError:
            continue
        after = probe.pos
        if after == limit:
            return candidate
        if after + 6 <= limit:
            next_id, next_n = _BLOCK_HEAD.unpack_from(data, after)
            if next_id in unseen and next_id != state_id and 0 <= next_n <= limit - after - 6:
                return candidate
    return None


def _read_block(plan: int, n: int, r: DataReader, data_k: bytes, limit: int, key_group: int,
                read_key: Reader, read_value: Reader, read_ns: Reader | None,
                append: Callable[[tuple[int, Any, Any, Any]], None]) -> None:
    """The ``n`` entries of one heap state block, by the plan of :func:`_heap_plan`."""
    if plan == 1:
        # the commonest entry: void namespace (one 0 byte), a short ASCII String key
        # (a one-byte length), read inline; anything else: the codecs
        for _ in range(n):
            pos = r.pos
            if pos >= limit or data_k[pos]:
                raise r.fail("bad void namespace byte")
            pos += 1
            after = pos + data_k[pos] if pos < limit else limit + 1
            if pos < after < pos + 0x80 and after <= limit:
                chunk = data_k[pos + 1:after]
                if chunk.isascii():
                    r.pos = after
                    append((key_group, chunk.decode("ascii"), VOID_NAMESPACE,
                            read_value(r)))
                    continue
            r.pos = pos
            key = read_key(r)
            append((key_group, key, VOID_NAMESPACE, read_value(r)))
    elif plan == 2:
        for _ in range(n):
            pos = r.pos
            if pos >= limit or data_k[pos]:
                raise r.fail("bad void namespace byte")
            r.pos = pos + 1
            key = read_key(r)
            append((key_group, key, VOID_NAMESPACE, read_value(r)))
    elif plan == 3:
        assert read_ns is not None
        for _ in range(n):
            namespace = read_ns(r)
            key = read_key(r)
            append((key_group, key, namespace, read_value(r)))
    else:  # timers: (timestamp, key, namespace) each
        for _ in range(n):
            timestamp, key, namespace = read_value(r)
            append((key_group, key, namespace, timestamp))


def _heap_plan(state: StateInfo, read_key: Reader, decoded: DecodedKeyed
               ) -> tuple[int, Reader, Reader | None, list[Any], dict[int, int]]:
    """How :func:`_decode_heap` reads a state's entries, decided once per stream.

    The plan: 0 timers, 1 void namespace and String keys (read inline), 2 void namespace,
    3 any namespace; then the value and namespace readers, and where entries and block
    sizes go.
    """
    assert state.value is not None
    read_ns = None if state.namespace is None else state.namespace.read
    plan = (0 if state.kind == "timers" else 3 if read_ns is not _VOID_READ
            else 1 if read_key is _STRING_READ else 2)
    return (plan, state.value.read, read_ns, decoded.entries[state.name],
            decoded.state_key_group_bytes[state.name])


def _decode_canonical(data: bytes, handle: FlinkKeyedHandle, header: KeyedHeader, where: str,
                      max_parallelism: int, decoded: DecodedKeyed) -> None:
    states = header.states
    prefix = 1 if max_parallelism <= 128 else 2
    n_states = len(states)
    losses = decoded.losses
    pair_decoders = [pair_decoder(s, header.key, where, decoded.entries[s.name], losses,
                                  header.key_snapshot) for s in states]
    key_class, key_serializer = described(header.key_snapshot)
    state_sizes = [decoded.state_key_group_bytes[s.name] for s in states]
    offsets = list(handle.offsets)
    ends = group_ends(offsets, len(data))
    # keys and values are read in place: views over the stream, no copies
    k = DataReader(data, where)
    v = DataReader(data, where)
    whole = DataReader(data, where)
    fast = _Fast(header, decoded)
    for i, offset in enumerate(offsets):
        if offset == 0:
            continue
        key_group = handle.first_key_group + i
        state_id = -1
        try:
            if offset < header.size or offset >= len(data):
                raise CorruptCheckpointError(f"{where}: key group {key_group} starts at byte "
                                             f"{offset}, outside the state data")
            end = ends[i]
            if header.compressed:
                r = DataReader(unframe_snappy(data[offset:end], where), f"{where} (key group "
                                                                         f"{key_group})")
            else:
                r = whole
                r.pos = offset
            buf, limit = r.data, r.end
            pos = r.pos
            if fast.canonical(buf, pos, limit, key_group, prefix):
                decoded.key_group_bytes[key_group] = end - offset
                continue
            if pos + 2 > limit:
                raise r.fail("truncated state id")
            state_id = _I16.unpack_from(buf, pos)[0]
            pos += 2
            k.data = v.data = buf
            while True:  # one run of pairs of one state
                if not 0 <= state_id < n_states:
                    r.pos = pos
                    raise r.fail(f"unknown state id {state_id}")
                decode_pair = pair_decoders[state_id]
                run_start = pos
                more = 0
                try:
                    while not more:
                        if pos + 4 > limit:
                            r.pos = pos
                            raise r.fail("truncated key length")
                        key_length = _I32.unpack_from(buf, pos)[0]
                        key_start = pos + 4
                        value_at = key_start + key_length
                        if key_length < prefix or value_at + 4 > limit:
                            r.pos = pos
                            raise r.fail(f"impossible key length {key_length}")
                        value_length = _I32.unpack_from(buf, value_at)[0]
                        value_start = value_at + 4
                        pos = value_start + value_length
                        if value_length < 0 or pos > limit:
                            r.pos = value_at
                            raise r.fail(f"impossible value length {value_length}")
                        first = buf[key_start]
                        more = first & FIRST_BIT
                        stored = first & 0x7F
                        if prefix == 2:
                            stored = stored << 8 | buf[key_start + 1]
                        if stored != key_group:
                            r.pos = key_start
                            raise r.fail(f"an entry of key group {stored} inside key group "
                                         f"{key_group}")
                        k.pos, k.end = key_start + prefix, value_at
                        v.pos, v.end = value_start, pos
                        try:
                            decode_pair(k, v, key_group)
                        except CheckpointError as exc:  # its key: the pair is left out
                            losses.add(states[state_id].name, key_group, 1, key_class,
                                       key_serializer, "its key: " + reason_of(exc, where),
                                       not isinstance(exc, UnsupportedFormatError), False)
                except CheckpointError as exc:
                    raise in_state(exc, states[state_id]) from exc
                sizes = state_sizes[state_id]
                sizes[key_group] = sizes.get(key_group, 0) + pos - run_start
                if pos + 2 > limit:
                    r.pos = pos
                    raise r.fail("truncated state id")
                next_id = _I16.unpack_from(buf, pos)[0]
                pos += 2
                if next_id == END_OF_KEY_GROUP:
                    break
                state_id = next_id
        except CheckpointError as exc:  # the rest of the key group: the next has its offset
            lost = states[state_id].name if 0 <= state_id < n_states else "(key group)"
            losses.add(lost, key_group, -1, "(the rest of the key group)", "",
                       reason_of(exc, where), True, False)
            continue
        decoded.key_group_bytes[key_group] = end - offset


def iter_timers(entries: list[tuple[int, Any, Any, Any]]
                ) -> list[tuple[int, Any, Any, list[int]]]:
    """Timer entries grouped per (key, namespace): the sorted timestamps."""
    grouped: dict[tuple[int, Any, Any], list[int]] = {}
    get = grouped.get
    for key_group, key, namespace, timestamp in entries:
        group = (key_group, key, namespace)
        stamps = get(group)
        if stamps is None:
            grouped[group] = [timestamp]
        else:
            stamps.append(timestamp)
    return [(kg, key, ns, stamps if len(stamps) == 1 else sorted(stamps))
            for (kg, key, ns), stamps in grouped.items()]


Reader = Callable[[DataReader], Any]
