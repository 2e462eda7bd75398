"""Java ``hashCode`` semantics and Flink's ``MathUtils`` hash functions, in explicit int32 math.

Everything here is deterministic across processes: Python's builtin ``hash()`` is salted per
process (``PYTHONHASHSEED``) and is never used for anything that reaches disk or decides a key
group. Reference: ``shared/reference/flink-internals.md`` §1.1 (``MathUtils``) and §2 (Java
``hashCode`` of key types).
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "VOID_NAMESPACE_HASH",
    "bit_mix",
    "java_big_decimal_hash",
    "java_big_integer_hash",
    "java_bool_hash",
    "java_bytes_hash",
    "java_char_hash",
    "java_double_hash",
    "java_float_hash",
    "java_instant_hash",
    "java_int_hash",
    "java_list_hash",
    "java_local_date_hash",
    "java_local_datetime_hash",
    "java_local_time_hash",
    "java_long_hash",
    "java_string_hash",
    "java_tuple_hash",
    "long_to_int_with_bit_mixing",
    "murmur3_x64_128",
    "murmur_hash",
    "operator_id_of_uid",
    "round_up_to_power_of_two",
    "to_int32",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF

#: ``VoidNamespace.hashCode()`` in Flink (reference §2).
VOID_NAMESPACE_HASH = 99


def to_int32(value: int) -> int:
    """Wrap an arbitrary Python int to Java ``int`` (two's complement, 32 bits)."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _to_int64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value & (1 << 63) else value


def _rotl32(value: int, shift: int) -> int:
    value &= _MASK32
    return ((value << shift) | (value >> (32 - shift))) & _MASK32


def bit_mix(value: int) -> int:
    """Port of ``MathUtils.bitMix``: the Murmur3 32-bit finalizer, returned as a signed int32.

    Also the bucket hash of ``CopyOnWriteStateMap`` (reference §5.2).
    """
    h = value & _MASK32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def murmur_hash(code: int) -> int:
    """Port of ``MathUtils.murmurHash(int)``; the result is in ``[0, 2**31 - 1]``.

    One Murmur3-32 block with seed 0 and length 4, then ``bit_mix``; negative results are
    negated, except ``Integer.MIN_VALUE`` which maps to 0 (reference §1.1).
    """
    h = (code * 0xCC9E2D51) & _MASK32
    h = _rotl32(h, 15)
    h = (h * 0x1B873593) & _MASK32
    h = _rotl32(h, 13)
    h = (h * 5 + 0xE6546B64) & _MASK32
    h ^= 4
    h = bit_mix(h)
    if h >= 0:
        return h
    if h != INT32_MIN:
        return -h
    return 0


def round_up_to_power_of_two(value: int) -> int:
    """Port of ``MathUtils.roundUpToPowerOfTwo`` (0 -> 0, 1 -> 1, 3 -> 4, 125 -> 128)."""
    x = to_int32(value - 1)
    for shift in (1, 2, 4, 8, 16):
        x |= x >> shift  # arithmetic shift, as in Java's `>>`
    return to_int32(x + 1)


def long_to_int_with_bit_mixing(value: int) -> int:
    """Port of ``MathUtils.longToIntWithBitMixing`` (used by ``TimeWindow.hashCode``)."""
    x = value & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    x ^= x >> 31
    return to_int32(x)


def java_int_hash(value: int) -> int:
    """``Integer/Short/Byte.hashCode``: the value itself (callers check the range)."""
    return to_int32(value)


def java_long_hash(value: int) -> int:
    """``Long.hashCode``: ``(int)(v ^ (v >>> 32))``."""
    v = value & _MASK64
    return to_int32(v ^ (v >> 32))


def java_bool_hash(value: bool) -> int:
    """``Boolean.hashCode``: 1231 for true, 1237 for false."""
    return 1231 if value else 1237


def java_double_hash(value: float) -> int:
    """``Double.hashCode``: the ``Long`` rule on ``doubleToLongBits`` (all NaNs canonical)."""
    if math.isnan(value):
        bits = 0x7FF8000000000000
    else:
        (bits,) = struct.unpack(">q", struct.pack(">d", value))
    return java_long_hash(bits)


def java_float_hash(value: float) -> int:
    """``Float.hashCode``: ``floatToIntBits`` (all NaNs canonical ``0x7fc00000``).

    The value is rounded to the nearest float32 first, as storing it in a Java ``float`` would.
    """
    if math.isnan(value):
        return 0x7FC00000
    (bits,) = struct.unpack(">i", struct.pack(">f", value))
    return int(bits)


def java_char_hash(value: str) -> int:
    """``Character.hashCode``: the UTF-16 code unit of a one-unit string."""
    code = ord(value)
    if len(value) != 1 or code > 0xFFFF:
        raise ValueError(f"a Java char is one UTF-16 code unit, got {value!r}")
    return code


def java_string_hash(value: str) -> int:
    """``String.hashCode``: Horner ``h = 31*h + unit`` over UTF-16 code units, int32 wrap.

    A code point above U+FFFF counts as its two surrogate units; a lone surrogate (which a
    Python ``str`` can hold) is its own unit, exactly as in Java.
    """
    h = 0
    for ch in value:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            h = (h * 31 + (0xD800 | (code >> 10))) & _MASK32
            h = (h * 31 + (0xDC00 | (code & 0x3FF))) & _MASK32
        else:
            h = (h * 31 + code) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def java_bytes_hash(value: bytes) -> int:
    """``java.util.Arrays.hashCode(byte[])``: ``h = 31*h + b`` from 1, bytes signed.

    Flink does not accept arrays as keys (their ``hashCode`` is identity); statectl's own
    format uses this content hash for ``bytes`` keys, a deliberate, documented extension.
    """
    h = 1
    for b in value:
        h = (h * 31 + (b - 256 if b > 127 else b)) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def java_tuple_hash(field_hashes: Iterable[int | None]) -> int:
    """Flink ``TupleN.hashCode``: ``h = hash(f0)``, then ``h = 31*h + hash(fi)``; null is 0.

    Reference §2 (``flink-core-api/.../api/java/tuple/Tuple2.java``).
    """
    h = 0
    first = True
    for fh in field_hashes:
        code = 0 if fh is None else fh
        h = code if first else h * 31 + code
        first = False
        h &= _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def java_list_hash(element_hashes: Iterable[int | None]) -> int:
    """``java.util.List.hashCode``: ``h = 31*h + hash(e)`` starting from 1; null is 0."""
    h = 1
    for eh in element_hashes:
        h = (h * 31 + (0 if eh is None else eh)) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


# -- JDK value classes (hashCode as the JDK 17 sources define it) ------------------------------


def java_instant_hash(epoch_second: int, nano: int) -> int:
    """``java.time.Instant.hashCode``: ``((int) (seconds ^ (seconds >>> 32))) + 51 * nanos``."""
    return to_int32(java_long_hash(epoch_second) + 51 * nano)


def java_local_date_hash(year: int, month: int, day: int) -> int:
    """``java.time.LocalDate.hashCode``: ``(y & 0xFFFFF800) ^ ((y << 11) + (m << 6) + d)``."""
    return to_int32((year & 0xFFFFF800) ^ ((year << 11) + (month << 6) + day))


def java_local_time_hash(nano_of_day: int) -> int:
    """``java.time.LocalTime.hashCode``: ``Long.hashCode(toNanoOfDay())``."""
    return java_long_hash(nano_of_day)


def java_local_datetime_hash(year: int, month: int, day: int, nano_of_day: int) -> int:
    """``java.time.LocalDateTime.hashCode``: ``date.hashCode() ^ time.hashCode()``."""
    return to_int32(java_local_date_hash(year, month, day) ^ java_local_time_hash(nano_of_day))


def java_big_integer_hash(value: int) -> int:
    """``java.math.BigInteger.hashCode``.

    ``h = 31*h + mag[i]`` (int32 wrap, each magnitude word unsigned) over the big-endian
    32-bit words of ``|value|`` without leading zero words, times the signum.
    """
    magnitude = abs(value)
    words = []
    while magnitude:
        words.append(magnitude & _MASK32)
        magnitude >>= 32
    h = 0
    for word in reversed(words):
        h = (31 * h + word) & _MASK32
    return to_int32(h * (1 if value > 0 else -1 if value < 0 else 0))


def java_big_decimal_hash(unscaled: int, scale: int) -> int:
    """``java.math.BigDecimal.hashCode``: ``31 * unscaledValue().hashCode() + scale``.

    (Its compact-value branch computes the same number for values that fit a ``long``.)
    """
    return to_int32(31 * java_big_integer_hash(unscaled) + scale)


# -- 128-bit MurmurHash3 (x64 variant): OperatorIDs of uids --------------------------------------

_C1_128 = 0x87C37B91114253D5
_C2_128 = 0x4CF5AD432745937F


def _rotl64(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (64 - shift))) & _MASK64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


def murmur3_x64_128(data: bytes, seed: int = 0) -> bytes:
    """MurmurHash3 ``x64_128`` of ``data``: 16 bytes, ``h1`` then ``h2``, each little-endian.

    Port of Austin Appleby's ``MurmurHash3_x64_128`` as Guava's ``Hashing.murmur3_128(seed)``
    returns it (``HashCode.asBytes()``), which is what Flink hashes uids with.
    """
    h1 = h2 = seed & _MASK32
    length = len(data)
    full = length - length % 16
    for i in range(0, full, 16):
        k1 = int.from_bytes(data[i:i + 8], "little")
        k2 = int.from_bytes(data[i + 8:i + 16], "little")
        k1 = (_rotl64((k1 * _C1_128) & _MASK64, 31) * _C2_128) & _MASK64
        h1 = ((_rotl64(h1 ^ k1, 27) + h2) * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl64((k2 * _C2_128) & _MASK64, 33) * _C1_128) & _MASK64
        h2 = ((_rotl64(h2 ^ k2, 31) + h1) * 5 + 0x38495AB5) & _MASK64
    tail = data[full:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl64((k2 * _C2_128) & _MASK64, 33) * _C1_128) & _MASK64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl64((k1 * _C1_128) & _MASK64, 31) * _C2_128) & _MASK64
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1, h2 = _fmix64(h1), _fmix64(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


@functools.lru_cache(maxsize=4096)  # asked per operator of every snapshot a command opens
def operator_id_of_uid(uid: str) -> str:
    """The OperatorID Flink gives an operator with this uid, as 32 lowercase hex digits.

    Flink's ``StreamGraphHasherV2.generateUserSpecifiedHash``: ``Hashing.murmur3_128(0)`` over
    the uid's UTF-8 bytes; the 16 hash bytes are the ID's bytes in order (``AbstractID``).
    """
    return murmur3_x64_128(uid.encode("utf-8")).hex()
