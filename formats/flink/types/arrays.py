"""``GenericArraySerializer`` (``T[]`` of a non-primitive component class).

An int32 length, then per element a non-null byte (``1`` present) and the element. The
primitive arrays (``int[]``...) are in :mod:`formats.flink.types.codecs`.
"""

from __future__ import annotations

from typing import Any

from formats.flink.javaio import DataReader
from formats.flink.types.codec import Codec

__all__ = ["generic_array_codec"]


def generic_array_codec(component_class: str, element: Codec) -> Codec:
    """``GenericArraySerializer``: an int32 length, per element a non-null byte then it.

    A Java array's ``hashCode`` is its identity: no key hash.
    """
    read_element = element.read

    def read(r: DataReader) -> list[Any]:
        n = r.count("array elements")
        out: list[Any] = []
        data = r.data
        for _ in range(n):
            pos = r.pos
            if pos >= r.end:
                raise r.fail("truncated: an array element expected")
            r.pos = pos + 1
            out.append(read_element(r) if data[pos] else None)
        return out

    return Codec(read, f"list<{element.spec}>", -1, f"{component_class}[]")


