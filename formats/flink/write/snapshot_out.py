"""Writing Flink serializer snapshots and state meta infos, as Flink 2.3 writes them.

For a savepoint statectl builds from its own types (a bootstrap), every state needs the
serializer snapshots of the Flink serializers its values take: :func:`serializer_for_spec` maps
a statectl type spec onto Flink's built-in serializers and writes their snapshots
(``TypeSerializerSnapshotSerializationUtil``: proxy version 2, class name, version, body);
:func:`state_meta_info` writes a ``StateMetaInfoSnapshot`` (reference §6.1). A savepoint
rewritten from a Flink snapshot carries the snapshots over as read instead.

=============  ====================================================================
statectl       Flink serializer (snapshot version 3; composite outer version)
=============  ====================================================================
int64 .. int8  ``LongSerializer``, ``IntSerializer``, ``ShortSerializer``, ``ByteSerializer``
float64/32     ``DoubleSerializer``, ``FloatSerializer``
bool, char     ``BooleanSerializer``, ``CharSerializer``
string         ``StringSerializer``
bytes          ``BytePrimitiveArraySerializer``
list<T>        ``ListSerializer`` (outer version 1)
map<K,V>       ``MapSerializer`` (outer version 1)
tuple<A,...>   ``TupleSerializer`` of ``TupleN`` (outer version 2: the tuple class), 1..25 fields
TTL            ``TtlStateFactory$TtlSerializer`` [Long, value] (outer version 2)
void           ``VoidNamespaceSerializer``
=============  ====================================================================

``any`` and the other specs have no Flink serializer statectl can name: refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.flink.java.input import DataReader
from formats.flink.java.output import DataWriter, utf_bytes
from formats.flink.types.snapshots import SerializerSnapshot, read_versioned_snapshot
from formats.model.arrow_types import split_spec
from statecore.errors import UnsupportedFormatError
from statecore.hashing import java_string_hash

__all__ = ["FlinkSerializer", "composite", "java_hashmap_order", "serializer_for_spec",
           "state_meta_info", "ttl_serializer", "versioned_snapshot"]

SNAPSHOT_VERSION = 3  # TypeSerializerSnapshot versions Flink 2.3 writes (every built-in)
PROXY_VERSION = 2
COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
_BASE = "org.apache.flink.api.common.typeutils.base."
_SIMPLE = {
    "int64": "LongSerializer", "int32": "IntSerializer", "int16": "ShortSerializer",
    "int8": "ByteSerializer", "float64": "DoubleSerializer", "float32": "FloatSerializer",
    "bool": "BooleanSerializer", "char": "CharSerializer", "string": "StringSerializer",
}
BYTES_SNAPSHOT = (_BASE + "array.BytePrimitiveArraySerializer$"
                  "BytePrimitiveArraySerializerSnapshot")
VOID_SNAPSHOT = ("org.apache.flink.runtime.state.VoidNamespaceSerializer$"
                 "VoidNamespaceSerializerSnapshot")
LIST_SNAPSHOT = _BASE + "ListSerializerSnapshot"
MAP_SNAPSHOT = _BASE + "MapSerializerSnapshot"
TUPLE_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"
TTL_SNAPSHOT = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
MAX_TUPLE = 25  # Flink's Tuple0 .. Tuple25


@dataclass(frozen=True)
class FlinkSerializer:
    """A Flink serializer as a savepoint names it: its versioned snapshot's bytes, parsed."""

    raw: bytes  # class name, version and body (``writeVersionedSnapshot``)
    snapshot: SerializerSnapshot

    @property
    def with_proxy(self) -> bytes:
        """As a state's header stores it: the proxy version, then the versioned snapshot."""
        return PROXY_VERSION.to_bytes(4, "big") + self.raw


def versioned_snapshot(class_name: str, body: bytes = b"") -> FlinkSerializer:
    """A snapshot of ``class_name`` (version 3) with ``body``, and its parse."""
    raw = utf_bytes(class_name) + SNAPSHOT_VERSION.to_bytes(4, "big") + body
    return FlinkSerializer(raw, read_versioned_snapshot(DataReader(raw, class_name)))


def composite(class_name: str, outer_version: int, outer: bytes,
               nested: list[FlinkSerializer]) -> FlinkSerializer:
    """``CompositeTypeSerializerSnapshot``: magic, outer version and snapshot, nested ones.

    The nested snapshots as ``NestedSerializersSnapshotDelegate`` writes them: magic, version 1,
    count, each versioned snapshot.
    """
    w = DataWriter()
    w.i32(COMPOSITE_MAGIC)
    w.i32(outer_version)
    w.raw(outer)
    w.i32(NESTED_MAGIC)
    w.i32(1)
    w.i32(len(nested))
    for n in nested:
        w.raw(n.raw)
    return versioned_snapshot(class_name, w.getvalue())


def serializer_for_spec(spec: str, what: str) -> FlinkSerializer:
    """The Flink serializer values of ``spec`` take (see the module table).

    ``what`` names the state in the refusal of a spec without one.
    """
    head, args = split_spec(spec)
    if head in _SIMPLE:
        name = _SIMPLE[head]
        return versioned_snapshot(f"{_BASE}{name}${name}Snapshot")
    if head == "bytes":
        return versioned_snapshot(BYTES_SNAPSHOT)
    if head == "void":
        return versioned_snapshot(VOID_SNAPSHOT)
    if head == "list":
        return composite(LIST_SNAPSHOT, 1, b"", [serializer_for_spec(args[0], what)])
    if head == "map":
        return composite(MAP_SNAPSHOT, 1, b"", [serializer_for_spec(a, what) for a in args])
    if head == "tuple" and 1 <= len(args) <= MAX_TUPLE:
        tuple_class = utf_bytes(f"org.apache.flink.api.java.tuple.Tuple{len(args)}")
        return composite(TUPLE_SNAPSHOT, 2, tuple_class,
                          [serializer_for_spec(a, what) for a in args])
    raise UnsupportedFormatError(
        f"{what}: values of type {spec!r} have no Flink serializer statectl can write (it "
        f"writes Long, Integer, Short, Byte, Double, Float, Boolean, Character, String, "
        f"byte[], List, Map and Tuple1..Tuple25 of them)")


def ttl_serializer(value: FlinkSerializer) -> FlinkSerializer:
    """Flink's TTL wrapper of a value serializer: ``TtlSerializer`` [Long timestamp, value]."""
    return composite(TTL_SNAPSHOT, 2, b"", [serializer_for_spec("int64", ""), value])


def java_hashmap_order(keys: list[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` holding ``keys`` (inserted in that order).

    Buckets in index order, ``(h ^ h >>> 16) & (capacity - 1)`` of ``String.hashCode``, at the
    default capacity 16 (up to 12 keys); within a bucket, insertion order.
    """
    if len(keys) > 12:
        raise ValueError("more keys than a default HashMap holds without resizing")

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15
    return sorted(keys, key=bucket)


def state_meta_info(name: str, backend_type: int, options: dict[str, str],
                    serializers: dict[str, FlinkSerializer]) -> bytes:
    """A ``StateMetaInfoSnapshot`` as ``StateMetaInfoSnapshotReadersWriters`` writes it.

    Name, backend type ordinal (0 KEY_VALUE, 1 OPERATOR, 2 BROADCAST, 3 PRIORITY_QUEUE),
    options and serializer snapshots, each map in Java ``HashMap`` order.
    """
    w = DataWriter()
    w.utf(name)
    w.i32(backend_type)
    w.i32(len(options))
    for key in java_hashmap_order(list(options)):
        w.utf(key)
        w.utf(options[key])
    w.i32(len(serializers))
    for key in java_hashmap_order(list(serializers)):
        w.utf(key)
        w.raw(serializers[key].with_proxy)
    return w.getvalue()
