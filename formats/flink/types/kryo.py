"""Values Flink hands to Kryo (``KryoSerializer``, every generic type).

Kryo writes no length. Where Flink delimits a value (a canonical savepoint's or RocksDB's value,
an operator state element) its bytes are kept whole (:attr:`Codec.read_all`). Elsewhere (the
heap format) the value's end is known only from the Kryo serializer's own layout.
"""

from __future__ import annotations

from formats.flink.javaio import DataReader
from formats.flink.types.codec import Codec
from statecore.errors import UnsupportedFormatError

__all__ = ["KRYO_PAYLOAD", "kryo_codec"]


#: Classes whose Kryo bytes statectl can delimit: payload bytes of Kryo 5's default serializer
#: after the class id and reference marker (``DefaultSerializers.UUIDSerializer``: two longs).
KRYO_PAYLOAD: dict[str, int] = {"java.util.UUID": 16}


def kryo_codec(class_name: str) -> Codec:
    """``KryoSerializer`` of ``class_name`` (the snapshot's type class): Kryo's bytes, whole.

    Never decoded further: the class ids in them depend on the job's Kryo registrations.
    """
    payload = KRYO_PAYLOAD.get(class_name)

    def read_all(r: DataReader) -> bytes:
        return r.raw(r.remaining)

    def read(r: DataReader) -> bytes:
        if payload is None:
            raise UnsupportedFormatError(
                f"{r.where}: a Kryo-serialized {class_name}: Kryo writes no length and statectl "
                f"does not know the layout of Kryo's serializer for {class_name}, so it cannot "
                f"find the value's end here (canonical savepoints and RocksDB delimit it: its "
                f"bytes are kept there)")
        start = r.pos
        tag = r.varint()  # Kryo class id + 2; 0 is null, 1 a class written by its name
        if tag == 0:
            return r.data[start:r.pos]
        if tag == 1:
            raise UnsupportedFormatError(f"{r.where}: a Kryo value of a class written by name "
                                         f"where a {class_name} is declared")
        marker = r.varint()
        if marker != 1:
            raise r.fail(f"Kryo reference marker {marker} where a new {class_name} (1) "
                         f"is expected")
        r.need(payload)
        return r.data[start:r.pos]

    return Codec(read, f"kryo<{class_name}>", -1, f"Kryo {class_name}", read_all=read_all)

