"""A value read under one serializer, written under another: what ``statectl migrate`` converts.

Values decoded from a Kryo serializer keep their Java classes (``JavaStr``, ``JavaList``,
``JavaDict``: :mod:`formats.flink.types.kryo.values`), so that Kryo writes them back byte for
byte. A new job may hold the same data under Flink's own serializers (Flink 2.x serializes a
POJO's ``List`` and ``Map`` fields with ``ListSerializer`` and ``MapSerializer``, where 1.x
handed them to Kryo), or under Kryo 5 where Kryo 2 wrote it. :func:`converter` adapts a value
to the target serializer (plain Python values for Flink's serializers, the Java-typed ones for
Kryo, POJOs field by field) and checks the conversion lost nothing: the value is written with
the target's encoder, read back with its codec, and must equal the original
(:func:`same_value`). A value that does not convert raises
:class:`~statecore.errors.InvalidArgumentError` naming where it failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.types.codecs import codec_for
from formats.flink.types.encoders import encoder_for
from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import CheckpointError, InvalidArgumentError
from statecore.ttl import TtlValue

__all__ = ["converter", "plain", "same_value"]

Convert = Callable[[Any], Any]


def plain(value: Any) -> Any:
    """``value`` without its Java typing: what it means, for comparing two readings of it."""
    if isinstance(value, TtlValue):
        return ("ttl", plain(value.user_value), value.last_access_timestamp)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def same_value(a: Any, b: Any) -> bool:
    """Whether two readings of a value mean the same (floats: NaN equals NaN)."""
    a, b = plain(a), plain(b)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def _base(snapshot: SerializerSnapshot) -> str:
    return snapshot.short_name.split("$")[0]


def _adapt(value: Any, snapshot: SerializerSnapshot) -> Any:
    """``value`` in the form the encoder of ``snapshot`` takes (see the module doc)."""
    if value is None:
        return None
    name = _base(snapshot)
    if name == "KryoSerializerSnapshot":
        return value  # Kryo writes the Java-typed values (and plain ones with default classes)
    if isinstance(value, TtlValue) and name.startswith("TtlStateFactory"):
        return TtlValue(_adapt(value.user_value, snapshot.nested[1]),
                        value.last_access_timestamp)
    if name in ("StringSerializer", "StringValueSerializer") and isinstance(value, str):
        return str(value)
    if isinstance(value, dict) and name == "PojoSerializerSnapshot":
        fields = dict(zip(snapshot.outer.get("fields", ()), snapshot.nested, strict=False))
        return {f: _adapt(value.get(f), s) for f, s in fields.items()}
    if isinstance(value, dict) and name == "MapSerializerSnapshot" and len(snapshot.nested) == 2:
        key, item = snapshot.nested
        return {_adapt(k, key): _adapt(v, item) for k, v in value.items()}
    if isinstance(value, list) and name in ("ListSerializerSnapshot",
                                            "GenericArraySerializerSnapshot"):
        return [_adapt(v, snapshot.nested[0]) for v in value] if snapshot.nested else list(value)
    if name == "NullableSerializer" and snapshot.nested:
        return _adapt(value, snapshot.nested[0])
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return value


def converter(snapshot: SerializerSnapshot, what: str) -> Convert:
    """A function taking a value to what the serializer of ``snapshot`` writes, checked.

    Build it under the Kryo of the release written for (``written_by``).
    """
    encoder, codec = encoder_for(snapshot), codec_for(snapshot)
    if encoder is None or codec is None:
        raise InvalidArgumentError(f"{what}: statectl cannot write values of serializer "
                                   f"{snapshot.class_name}")
    read = codec.read

    def convert(value: Any) -> Any:
        adapted = _adapt(value, snapshot)
        out = bytearray()
        try:
            encoder(out, adapted)
            back = read(DataReader(bytes(out), what))
        except (InvalidArgumentError, CheckpointError, TypeError, ValueError, KeyError,
                AttributeError, OverflowError) as exc:
            raise InvalidArgumentError(f"{what}: {_shown(value)} cannot be written as "
                                       f"{snapshot.describe()}: {exc}") from exc
        if not same_value(back, value):
            raise InvalidArgumentError(f"{what}: {_shown(value)} would not survive as "
                                       f"{snapshot.describe()} (it reads back as "
                                       f"{_shown(back)})")
        return adapted

    return convert


def _shown(value: Any) -> str:
    text = repr(plain(value))
    return text if len(text) <= 120 else text[:117] + "..."
