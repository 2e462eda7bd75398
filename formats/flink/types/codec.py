"""A :class:`Codec`: how statectl reads the values of one Flink serializer.

Built from a serializer snapshot by :func:`formats.flink.types.codecs.codec_for`; the decoders of
the keyed and operator streams (:mod:`formats.flink.read.keyed`,
:mod:`formats.flink.read.operator`) call its readers once per value, so a codec's readers are plain
closures prepared once per state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from formats.flink.java.input import DataReader

__all__ = ["Codec", "Reader"]

#: Reads one value at a reader's position and advances it.
Reader = Callable[[DataReader], Any]


@dataclass(frozen=True)
class Codec:
    """Reads one value in Flink's layout; ``spec`` is the statectl type it maps to.

    ``read`` reads one value wherever it is (it knows where the value ends). ``read_all``, when
    set, reads a value that fills the rest of a *delimited* reader -- a canonical savepoint's
    or RocksDB's value, an operator state element: a Kryo value is kept as its bytes there,
    where Flink says where it ends; ``read`` may not know that (the heap format).

    ``ttl``: the values are ``TtlValue(value, last access)`` of ``spec`` (Flink's
    ``TtlSerializer``). ``java_hash`` is the ``hashCode()`` Flink's key-group assignment uses
    for a key of this serializer, ``None`` where statectl cannot compute it (a POJO's, an
    enum's, a Kryo object's). ``length`` is Flink's ``TypeSerializer.getLength()`` (-1:
    variable), which decides the canonical key layout.
    """

    read: Reader
    spec: str
    length: int  # Flink's TypeSerializer.getLength(): -1 for variable length
    name: str
    java_hash: Callable[[Any], int] | None = None  # hashCode(), which picks a key's key group
    struct_code: str | None = None  # big-endian struct code of a fixed-size primitive
    read_all: Reader | None = None  # a value that fills the rest of a delimited reader
    ttl: bool = False  # values are TtlValue(value of spec, last access timestamp)

    @property
    def read_delimited(self) -> Reader:
        """The reader for a value that is all that is left of a delimited reader."""
        return self.read_all or self.read
