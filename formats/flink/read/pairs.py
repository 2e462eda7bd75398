"""The canonical format's key/value pairs, decoded: a canonical savepoint's and RocksDB's.

A pair's key is ``key-group prefix | key | namespace [| map user key]``, its value the state
serializer's bytes (reference §6.3; ``RocksDBKeySerializationUtils``,
``SerializedCompositeKeyBuilder``): :func:`pair_decoder` builds, once per state and stream, the
function that decodes one pair into ``(key_group, key, namespace, value)``. A pair delimits its
value, so a value statectl cannot decode is kept as an
:class:`~statecore.undecodable.Undecodable` marker with its bytes; a pair whose key,
namespace or map key cannot be decoded is counted (:class:`~formats.flink.read.losses.Losses`)
and left out.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.read.losses import Losses, described, reason_of, short_names
from formats.flink.read.state_meta import StateInfo
from formats.flink.types.codecs import STRING_READ as _STRING_READ
from formats.flink.types.codecs import VOID_READ as _VOID_READ
from formats.flink.types.codecs import Codec, why_undecodable
from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import CheckpointError, UnsupportedFormatError
from statecore.serializers import VOID_NAMESPACE
from statecore.undecodable import Undecodable

__all__ = ["PairDecoder", "in_state", "pair_decoder", "undecodable_error"]


def undecodable_error(where: str, what: str, snapshot: SerializerSnapshot | None) -> Exception:
    """The error for ``what`` whose serializer ``snapshot`` statectl cannot decode."""
    shown = "no serializer" if snapshot is None else (
        why_undecodable(snapshot) or f"serializer {snapshot.class_name}")
    return UnsupportedFormatError(
        f"{where}: {what} uses {shown}, which statectl cannot decode")


def in_state(exc: CheckpointError, state: StateInfo) -> CheckpointError:
    """``exc`` (raised reading one of ``state``'s values) naming the state and its serializers.

    The same exception class, its message completed.
    """
    described = ", ".join(f"{k.lower().removesuffix('_serializer')} {v}"
                          for k, v in state.serializer_names.items())
    return type(exc)(f"{exc} (state {state.name!r}: {described})")


def _skip_length(r: DataReader, length: int) -> None:
    """Skip the little-endian base-256 length Flink appends to an ambiguous composite key."""
    n = 1
    while length >> (8 * n):
        n += 1
    r.raw(n)


PairDecoder = Callable[[DataReader, DataReader, int], None]


def pair_decoder(state: StateInfo, key_codec: Codec | None, where: str,
                 out: list[tuple[int, Any, Any, Any]], losses: Losses | None = None,
                 key_snapshot: SerializerSnapshot | None = None) -> PairDecoder:
    """The decoder of one state's canonical pairs, specialised once per stream.

    It is called with ``k`` holding the key after its key-group prefix and ``v`` the value,
    and appends ``(key_group, key, namespace, value)`` to ``out``. A value that cannot be
    decoded -- no codec, or its bytes do not parse -- is appended as an
    :class:`~statecore.undecodable.Undecodable` with its bytes (a pair delimits its value) and
    counted in ``losses``; a pair whose key, namespace or map key cannot be decoded is counted
    there and left out (the decoder raises only without ``losses``). Without ``key_codec``
    (the key serializer ``key_snapshot`` is one statectl cannot decode) every pair is so; so is
    every pair of a state whose meta info could not be read (:attr:`StateInfo.unread`).
    """
    append = out.append
    value_snapshot = state.serializers.get("VALUE_SERIALIZER")
    if state.kind == "list" and value_snapshot is not None and value_snapshot.nested:
        value_snapshot = value_snapshot.nested[0]
    elif state.kind == "map" and value_snapshot is not None and len(value_snapshot.nested) == 2:
        value_snapshot = value_snapshot.nested[1]
    value_class, value_serializer = described(value_snapshot)
    name = state.name

    def lost(what: str, snapshot: SerializerSnapshot | None, why: str = "") -> PairDecoder:
        """Every pair is left out: ``what`` has no codec (``why``: the reason, if not that)."""
        if losses is None:
            return _undecodable_pair(where, what, snapshot)
        cls, ser = described(snapshot)
        reason = short_names(why or f"no decoder for {what}: "
                             f"{why_undecodable(snapshot) if snapshot else 'no serializer'}")

        def skip(k: DataReader, v: DataReader, key_group: int) -> None:
            losses.add(name, key_group, 1, cls, ser, reason, False, False)
        return skip

    def marker(exc: CheckpointError, raw: bytes, key_group: int) -> Undecodable:
        if losses is None:
            raise in_state(exc, state) from exc
        damaged = not isinstance(exc, UnsupportedFormatError)
        reason = reason_of(exc, where)
        losses.add(name, key_group, 1, value_class, value_serializer, reason, damaged, True)
        return Undecodable(value_class, value_serializer, reason, raw, damaged)

    if key_codec is None:
        return lost("its keys", key_snapshot)
    if state.unread:
        return lost("its values", value_snapshot,
                    f"its meta info could not be read: {state.unread}")
    if state.kind == "timers":
        if state.value is None:
            return lost(f"timers {state.name!r}", state.serializers.get("VALUE_SERIALIZER"))
        read_timer = state.value.read

        def timer(k: DataReader, v: DataReader, key_group: int) -> None:
            timestamp, key, namespace = read_timer(k)
            _at_end(k, "timer")
            append((key_group, key, namespace, timestamp))
        return timer
    if state.namespace is None:
        return lost(f"the namespace of state {state.name!r}",
                    state.serializers.get("NAMESPACE_SERIALIZER"))
    read_key, read_ns = key_codec.read, state.namespace.read
    void = read_ns is _VOID_READ
    ambiguous = key_codec.length < 0 and state.namespace.length < 0

    def generic_key_and_namespace(k: DataReader) -> tuple[Any, Any]:
        start = k.pos
        key = read_key(k)
        if void:  # the common case: one 0 byte, read inline (never ambiguous: length 0)
            pos = k.pos
            if pos >= k.end or k.data[pos]:
                raise k.fail("bad void namespace byte")
            k.pos = pos + 1
            return key, VOID_NAMESPACE
        if ambiguous:
            _skip_length(k, k.pos - start)
        start = k.pos
        namespace = read_ns(k)
        if ambiguous:
            _skip_length(k, k.pos - start)
        return key, namespace

    key_and_namespace = generic_key_and_namespace
    if void and read_key is _STRING_READ:
        def key_and_namespace(k: DataReader) -> tuple[Any, Any]:
            # the commonest key: a short ASCII String (one length byte) and the void namespace
            data, pos = k.data, k.pos
            if pos < k.end:
                n = data[pos] - 1
                after = pos + 1 + n
                if 0 <= n < 127 and after < k.end and not data[after]:
                    chunk = data[pos + 1:after]
                    if chunk.isascii():
                        k.pos = after + 1
                        return chunk.decode("ascii"), VOID_NAMESPACE
            return generic_key_and_namespace(k)

    if state.kind == "map" and state.user_key is None:
        return _map_keys_lost(state, key_and_namespace, losses, lost)
    element = state.element
    why = why_undecodable(value_snapshot) if value_snapshot else "no serializer"
    unsupported = UnsupportedFormatError(short_names(f"no decoder for {why}"))

    def no_codec(r: DataReader) -> Any:
        raise unsupported

    read_element = element.read if element is not None else no_codec
    # a value state's value and a map value fill the rest of a pair's value: delimited
    read_whole = element.read_delimited if element is not None else no_codec
    if state.kind == "map":
        assert state.user_key is not None
        read_user_key = state.user_key.read

        # the key and namespace of the previous pair: their bytes, then them decoded
        previous: list[Any] = [b"", None, None]

        def map_pair(k: DataReader, v: DataReader, key_group: int) -> None:
            # a key's user keys come one pair each, adjacent: when this pair starts with the
            # previous key's bytes it has that key (Flink's key and namespace encodings are
            # self-delimiting), so it is not decoded again
            start, seen = k.pos, previous[0]
            n = len(seen)
            if n and start + n <= k.end and k.data[start:start + n] == seen:
                k.pos = start + n
                key, namespace = previous[1], previous[2]
            else:
                key, namespace = key_and_namespace(k)
                previous[:] = k.data[start:k.pos], key, namespace
            user_key = read_user_key(k)
            if k.pos < k.end:
                _at_end(k, "map key")
            at = v.pos  # a null flag, then the value unless null
            if at >= v.end:
                raise v.fail("truncated: 1 more bytes expected, 0 left")
            v.pos = at + 1
            if v.data[at]:
                value = None
            else:
                try:
                    value = read_whole(v)
                except CheckpointError as exc:
                    value = marker(exc, bytes(v.data[at + 1:v.end]), key_group)
            if out:  # a key's user keys come one pair each, adjacent: extend its map
                last = out[-1]
                if last[0] == key_group and last[1] == key and last[2] == namespace:
                    last[3][user_key] = value
                    return
            append((key_group, key, namespace, {user_key: value}))
        return map_pair
    if state.kind == "list":
        def list_pair(k: DataReader, v: DataReader, key_group: int) -> None:
            key, namespace = key_and_namespace(k)
            _at_end(k, "key")
            start = v.pos
            try:
                fast = _fixed_list(element, v)
                if fast is not None:
                    append((key_group, key, namespace, fast))
                    return
                if read_element is DataReader.sized_bytes:
                    append((key_group, key, namespace, v.byte_arrays(separator=0x2C)))
                    return
                elements = []
                while v.pos < v.end:
                    elements.append(read_element(v))
                    if v.pos < v.end and v.u8() != 0x2C:
                        raise v.fail("list elements not separated by ','")
            except CheckpointError as exc:  # the list whole: its elements have no lengths
                append((key_group, key, namespace,
                        marker(exc, bytes(v.data[start:v.end]), key_group)))
                return
            append((key_group, key, namespace, elements))
        return list_pair

    def value_pair(k: DataReader, v: DataReader, key_group: int) -> None:
        key, namespace = key_and_namespace(k)
        if k.pos < k.end:
            _at_end(k, "key")
        start = v.pos
        try:
            value = read_whole(v)
            if v.pos < v.end:
                _at_end(v, "value")
        except CheckpointError as exc:
            value = marker(exc, bytes(v.data[start:v.end]), key_group)
        append((key_group, key, namespace, value))
    return value_pair


def _map_keys_lost(state: StateInfo, key_and_namespace: Callable[[DataReader], tuple[Any, Any]],
                   losses: Losses | None,
                   lost: Callable[[str, SerializerSnapshot | None], PairDecoder]) -> PairDecoder:
    """A map state whose map keys have no decoder: each key's map is counted, and left out.

    A map's entries are one pair each, adjacent: a map is counted where the key and namespace
    (decoded) differ from the previous pair's.
    """
    snapshot = state.serializers.get("VALUE_SERIALIZER")
    what, missing = (("its map keys", snapshot.nested[0])
                     if snapshot is not None and len(snapshot.nested) == 2
                     else ("its values", snapshot))
    count = lost(what, missing)
    if losses is None:
        return count
    previous: list[Any] = [None]

    def map_lost(k: DataReader, v: DataReader, key_group: int) -> None:
        current = (key_group, *key_and_namespace(k))
        if current != previous[0]:
            previous[0] = current
            count(k, v, key_group)
    return map_lost


def _undecodable_pair(where: str, what: str, snapshot: SerializerSnapshot | None
                      ) -> PairDecoder:
    def fail(k: DataReader, v: DataReader, key_group: int) -> None:
        raise undecodable_error(where, what, snapshot)
    return fail


_SEPARATED: dict[tuple[str, int], Any] = {}


def _fixed_list(codec: Codec | None, v: DataReader) -> list[Any] | None:
    """A canonical list of fixed-size primitives (``e,e,e``) in one ``struct`` call."""
    if codec is None or codec.struct_code is None:
        return None
    size = codec.length
    total = v.end - v.pos
    n, rest = divmod(total + 1, size + 1)
    if rest or n == 0:
        return None  # not that shape: the element-by-element reader says what is wrong
    data, pos = v.data, v.pos
    if n > 1 and data[pos + size:v.end:size + 1] != b"," * (n - 1):
        return None
    parser = _SEPARATED.get((codec.struct_code, n))
    if parser is None:
        parser = struct.Struct(">" + (codec.struct_code + "x") * (n - 1) + codec.struct_code)
        if len(_SEPARATED) < 4096:
            _SEPARATED[(codec.struct_code, n)] = parser
    v.pos = v.end
    return list(parser.unpack_from(data, pos))


def _at_end(r: DataReader, what: str) -> None:
    if not r.at_end():
        raise r.fail(f"{r.remaining} bytes left after the {what}")
