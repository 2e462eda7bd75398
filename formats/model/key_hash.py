"""Key groups of whole Arrow columns at once: Flink's key-group assignment, vectorised.

The same functions as :mod:`statecore.hashing` and :mod:`statecore.key_groups` (reference
§1.1, §1.2, §2), computed with numpy over an Arrow array instead of one Python call per key:
``murmurHash(key.hashCode()) % maxParallelism``. ``String.hashCode`` is vectorised for strings
whose UTF-8 bytes are their UTF-16 code units (ASCII: the common case); other strings, and key
types without a vectorised hash (tuples, bytes), fall back to the per-key Python function for
those keys only. Tested against ``oracle/key_groups*.json`` and against the Python functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statecore.errors import InvalidArgumentError, UnknownKeyHashError
from statecore.key_groups import compute_key_group_for_key_hash
from statecore.serializers import parse_type

__all__ = ["java_hash_codes", "key_groups", "murmur_hashes", "numpy_integers", "numpy_validity"]

_U32 = np.uint32
_INTEGERS = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32,
             pa.int64(): np.int64, pa.uint8(): np.uint8, pa.uint16(): np.uint16,
             pa.uint32(): np.uint32, pa.uint64(): np.uint64}


def numpy_integers(array: pa.Array) -> np.ndarray[Any, Any]:
    """An integer array without nulls as a NumPy view of its data buffer (no copy).

    Not ``Array.to_numpy``: pyarrow imports pandas for it when pandas is installed, 35 MB of
    resident memory for a build that never needs it.
    """
    if array.null_count:
        raise ValueError("an array with nulls has no plain NumPy view")
    dtype = np.dtype(_INTEGERS[array.type])
    buffer = array.buffers()[1]
    if buffer is None or not len(array):
        return np.zeros(0, dtype)
    return np.frombuffer(buffer, dtype=dtype, count=len(array),
                         offset=array.offset * dtype.itemsize)


def numpy_validity(array: pa.Array) -> np.ndarray[Any, Any]:
    """Which values of ``array`` are not null, as NumPy bools (see :func:`numpy_integers`)."""
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.ones(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[array.offset:array.offset + len(array)].astype(bool)


def _rotl(h: np.ndarray[Any, Any], shift: int) -> np.ndarray[Any, Any]:
    rotated: np.ndarray[Any, Any] = (h << _U32(shift)) | (h >> _U32(32 - shift))
    return rotated


def _bit_mix(h: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    h = h ^ (h >> _U32(16))
    h = h * _U32(0x85EBCA6B)
    h = h ^ (h >> _U32(13))
    h = h * _U32(0xC2B2AE35)
    mixed: np.ndarray[Any, Any] = h ^ (h >> _U32(16))
    return mixed


def murmur_hashes(codes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``MathUtils.murmurHash`` of int32 hash codes, as int64 values in ``[0, 2**31 - 1]``."""
    with np.errstate(over="ignore"):
        h = codes.astype(np.int64).astype(_U32)  # two's complement bits
        h = h * _U32(0xCC9E2D51)
        h = _rotl(h, 15)
        h = h * _U32(0x1B873593)
        h = _rotl(h, 13)
        h = h * _U32(5) + _U32(0xE6546B64)
        h = h ^ _U32(4)
        h = _bit_mix(h)
    signed = h.view(np.int32).astype(np.int64)
    # negative: negated, except Integer.MIN_VALUE which maps to 0
    return np.where(signed >= 0, signed, np.where(signed == -(1 << 31), 0, -signed))


#: Bytes of strings hashed at once: the temporaries (8 bytes per byte) stay in a core's cache,
#: so two tasks hashing side by side do not wait on memory (3x faster than one pass).
_STRING_CHUNK = 1 << 18


def _string_hashes(array: pa.Array, pool: pa.MemoryPool | None) -> np.ndarray[Any, Any]:
    """``String.hashCode`` of ASCII strings: ``sum(c[i] * 31**(n-1-i))`` mod 2**32."""
    array = array.cast(pa.large_string(), memory_pool=pool)
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64, count=n + 1,
                            offset=array.offset * 8)
    data_buffer = array.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    if data_buffer is None or end == start:
        return np.zeros(n, dtype=np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8, count=end - start, offset=start)
    offsets = offsets - start
    lengths = np.diff(offsets)
    longest = int(lengths.max())
    # powers[k] = 31 ** k, wrapping at 2**32: a byte's weight, k = bytes after it in its string
    powers = np.ones(longest, dtype=_U32)
    sums = np.zeros(n, dtype=_U32)
    with np.errstate(over="ignore"):
        if longest > 1:
            powers[1:] = np.cumprod(np.full(longest - 1, 31, dtype=_U32), dtype=_U32)
        i = 0
        while i < n:  # strings i..j-1: about _STRING_CHUNK bytes, at least one string
            j = int(np.searchsorted(offsets, offsets[i] + _STRING_CHUNK, side="right")) - 1
            j = min(max(j, i + 1), n)
            lo, hi = int(offsets[i]), int(offsets[j])
            if hi > lo:
                ends = np.repeat(offsets[i + 1:j + 1] - lo, lengths[i:j])
                terms = data[lo:hi].astype(_U32) * powers[ends - 1 - np.arange(hi - lo)]
                nonempty = np.flatnonzero(lengths[i:j])
                sums[i + nonempty] = np.add.reduceat(terms, offsets[i:j][nonempty] - lo,
                                                     dtype=_U32)
            i = j
    return sums.view(np.int32).astype(np.int64)


def java_hash_codes(array: pa.Array, key_type: str,
                    pool: pa.MemoryPool | None = None) -> np.ndarray[Any, Any]:
    """Java ``hashCode`` of every value of ``array`` as ``key_type`` (int64 holding int32).

    ``pool``: where Arrow allocates (its default pool when None).
    """
    if array.null_count:
        raise InvalidArgumentError("keys cannot be null")
    serializer = parse_type(key_type)
    if not serializer.hashable:  # a POJO's, an enum's: refused with the reason
        raise UnknownKeyHashError(f"keys of type {serializer.spec} have no key group statectl "
                                  f"can compute: {serializer.unhashable}")
    spec = serializer.spec
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks(pool)
    if spec in ("int8", "int16", "int32"):
        return numpy_integers(array).astype(np.int64)
    if spec == "int64":
        v = numpy_integers(array).astype(np.int64, copy=False).view(np.uint64)
        return (v ^ (v >> np.uint64(32))).astype(np.uint32).view(np.int32).astype(np.int64)
    if spec == "bool":
        return np.where(np.asarray(array.to_numpy(zero_copy_only=False)), 1231, 1237)
    if spec == "string":
        ascii_only = pc.string_is_ascii(array, memory_pool=pool)
        codes = _string_hashes(array, pool)
        if not pc.all(ascii_only).as_py():
            serializer = parse_type(spec)
            others = np.flatnonzero(~np.asarray(ascii_only.to_numpy(zero_copy_only=False)))
            for i in others:
                codes[i] = serializer.java_hash(array[int(i)].as_py())
        return codes
    serializer = parse_type(spec)
    return np.fromiter((serializer.java_hash(v) for v in _python_keys(array, spec)),
                       dtype=np.int64, count=len(array))


def _python_keys(array: pa.Array, spec: str) -> list[Any]:
    from formats.model.arrow_types import from_arrow, pylist

    read = from_arrow(spec)
    return [read(v) for v in pylist(array)]


def key_groups(array: pa.Array, key_type: str, max_parallelism: int,
               pool: pa.MemoryPool | None = None) -> np.ndarray[Any, Any]:
    """``assignToKeyGroup`` of every key: ``murmurHash(hashCode) % maxParallelism`` (int32)."""
    compute_key_group_for_key_hash(0, max_parallelism)  # Flink's bounds check and message
    codes = java_hash_codes(array, key_type, pool)
    return (murmur_hashes(codes) % max_parallelism).astype(np.int32)
