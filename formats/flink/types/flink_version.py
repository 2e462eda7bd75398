"""Which Flink wrote the snapshot being read: what some serializers' bytes depend on.

A serializer snapshot does not always say which Flink wrote it. ``KryoSerializerSnapshot`` is
byte for byte the same in Flink 1.20 and 2.3, yet Flink 1.x serializes generic types with Kryo
2.24 and Flink 2.x with Kryo 5, whose layouts differ (:mod:`formats.flink.types.kryo`). The
``_metadata`` version tells them apart (reference §8): Flink 1.x writes version 4 (and older
versions 3), Flink 2.0 version 5, 2.1 and later version 6.

Reading a snapshot sets :data:`KRYO_MAJOR` for the codecs built meanwhile (:func:`written_by`),
so the code between ``_metadata`` and the codecs -- headers, state meta infos, nested
serializer snapshots -- need not carry it; a codec keeps the Kryo it was built for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["KRYO_MAJOR", "kryo_major_of", "written_by"]

#: The Kryo major version of the snapshot being read (5 unless said otherwise).
KRYO_MAJOR: ContextVar[int] = ContextVar("statectl_kryo_major", default=5)


def kryo_major_of(metadata_version: int) -> int:
    """The Kryo of the Flink that writes ``_metadata`` version ``metadata_version``."""
    return 2 if metadata_version <= 4 else 5


@contextmanager
def written_by(kryo_major: int) -> Iterator[None]:
    """Codecs and encoders built in this block read and write ``kryo_major``'s bytes."""
    token = KRYO_MAJOR.set(kryo_major)
    try:
        yield
    finally:
        KRYO_MAJOR.reset(token)
