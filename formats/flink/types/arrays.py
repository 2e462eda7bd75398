"""``GenericArraySerializer`` (``T[]`` of a non-primitive component class).

An int32 length, then per element a non-null byte (``1`` present) and the element. The
primitive arrays (``int[]``...) are in :mod:`formats.flink.types.codecs`. Flink 1.20 writes the
same snapshot (``GenericArraySerializerSnapshot``: the component class as its outer snapshot) and
bytes; a legacy snapshot of version 1 (Flink 1.7/1.8: no magic) is read as well.

:func:`flagged_elements` reads that layout for ``SetSerializer`` and Scala's
``TraversableSerializer`` too (their codecs are in :mod:`formats.flink.types.codecs`).
"""

from __future__ import annotations

from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.types.codec import Codec, Reader

__all__ = ["flagged_elements", "generic_array_codec"]


def flagged_elements(read_element: Reader, what: str, present: int,
                     flag: str | None) -> Reader:
    """A reader of an int32 count, then per element a ``boolean`` flag and (if there) it.

    The layout ``GenericArraySerializer`` and Scala's ``TraversableSerializer`` write (flag
    ``true``: the element follows, ``present`` 1) and ``SetSerializer`` (flag ``true``: null,
    ``present`` 0). ``what`` names the element and ``flag`` its flag in errors; a flag byte
    other than 0 or 1 is corrupt, unless ``flag`` is ``None``: then any byte but 0 is ``true``
    (``readBoolean``, as ``GenericArraySerializer`` reads it).
    """
    absent = 1 - present
    count_what = f"{what}s"
    article = "an" if what[0] in "aeiou" else "a"
    truncated = (f"truncated: {article} {what}'s {flag} expected" if flag
                 else f"truncated: {article} {what} expected")

    def read(r: DataReader) -> list[Any]:
        n = r.count(count_what)
        out: list[Any] = []
        data = r.data
        for _ in range(n):
            pos = r.pos
            if pos >= r.end:
                raise r.fail(truncated)
            r.pos = pos + 1
            byte = data[pos]
            if byte == present:
                out.append(read_element(r))
            elif byte == absent:
                out.append(None)
            elif flag is None:
                out.append(read_element(r))
            else:
                raise r.fail(f"{what} {flag} {byte}, expected 0 or 1")
        return out

    return read


def generic_array_codec(component_class: str, element: Codec) -> Codec:
    """``GenericArraySerializer``: an int32 length, per element a non-null byte then it.

    A Java array's ``hashCode`` is its identity: no key hash.
    """
    read = flagged_elements(element.read, "array element", 1, None)
    return Codec(read, f"list<{element.spec}>", -1, f"{component_class}[]")
