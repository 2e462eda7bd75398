"""Flink SQL's ``LogicalType``s as serializer snapshots store them: parsed into :class:`SqlType`.

``RowDataSerializerSnapshot``, ``ArrayDataSerializerSnapshot`` and ``MapDataSerializerSnapshot``
(``flink-table-runtime``) write their field, element, key and value types with Java
serialization (``InstantiationUtil.serializeObject`` of ``org.apache.flink.table.types.logical``
objects); :mod:`formats.flink.java.serialization` parses them into plain objects, and
:func:`sql_type` makes an :class:`SqlType` of one: its ``LogicalTypeRoot``, nullability, precision
and scale,
and its children (an ``ArrayType``'s element, a ``MapType``'s key and value, a ``RowType``'s or
``StructuredType``'s fields; a ``DistinctType`` is its source type). What statectl reads of a
value of each root is :mod:`formats.flink.types.binary_data`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats.flink.java.serialization import JavaEnum, JavaObject
from statecore.errors import UnsupportedFormatError

__all__ = ["MAX_TYPE_DEPTH", "SqlType", "java_list", "sql_type"]

#: Deepest nesting of ``LogicalType``s statectl follows (an untrusted snapshot).
MAX_TYPE_DEPTH = 32
#: Most elements of a Java list statectl takes from a snapshot (a row's fields).
MAX_LIST = 4096


@dataclass(frozen=True)
class SqlType:
    """One ``LogicalType``: root (``LogicalTypeRoot`` constant), nullable, its parameters."""

    root: str
    nullable: bool = True
    precision: int = 0
    scale: int = 0
    children: tuple[SqlType, ...] = ()
    names: tuple[str, ...] = ()  # a ROW's or STRUCTURED_TYPE's field names

    def describe(self) -> str:
        """Flink's SQL name of the type, roughly, without spaces (``ROW<INTEGER,VARCHAR>``)."""
        if self.root == "DECIMAL":
            return f"DECIMAL({self.precision};{self.scale})"
        if self.root.startswith("TIMESTAMP"):
            return f"{self.root}({self.precision})"
        if self.children:
            return f"{self.root}<{','.join(c.describe() for c in self.children)}>"
        return self.root


def java_list(value: Any) -> list[Any]:
    """The elements of a Java-serialized ``List`` (an ``ArrayList``, possibly wrapped).

    ``Collections.unmodifiableList`` keeps the list in field ``list`` (or ``c``);
    ``ArrayList.writeObject`` writes its elements after a block of its capacity, and
    ``List.of``'s serial proxy ``java.util.CollSer`` after a block of their count.
    """
    for _ in range(4):  # unwrap Collections$Unmodifiable*/Synchronized* wrappers
        if isinstance(value, JavaObject) and not value.class_name.endswith("ArrayList"):
            inner = value.fields.get("list", value.fields.get("c"))
            if inner is None:
                break
            value = inner
    if isinstance(value, list):  # an array
        return value
    if isinstance(value, JavaObject) and value.class_name == "java.util.CollSer":
        # List.of(...): ImmutableCollections' serial proxy, the elements after their count
        elements = [a for a in value.annotations if not isinstance(a, bytes | bytearray)]
        if len(elements) > MAX_LIST:
            raise UnsupportedFormatError(f"a Java list of {len(elements)} elements")
        return elements
    if isinstance(value, JavaObject) and value.class_name.startswith("java.util.Collections$Empty"):
        return []
    if not isinstance(value, JavaObject) or "size" not in value.fields:
        raise UnsupportedFormatError(f"a LogicalType holds a Java list statectl cannot read "
                                     f"({getattr(value, 'class_name', type(value).__name__)})")
    elements = [a for a in value.annotations if not isinstance(a, bytes | bytearray)]
    if len(elements) != value.fields["size"] or len(elements) > MAX_LIST:
        raise UnsupportedFormatError(f"a Java list of {value.fields['size']} elements holds "
                                     f"{len(elements)}")
    return elements


def _int(obj: JavaObject, field: str, low: int, high: int) -> int:
    value = obj.fields.get(field)
    if not isinstance(value, int) or not low <= value <= high:
        raise UnsupportedFormatError(f"{obj.class_name}.{field} is {value!r} (expected "
                                     f"{low}..{high})")
    return value


def sql_type(logical: Any, depth: int = 0) -> SqlType:
    """The :class:`SqlType` of a parsed ``LogicalType`` (or a ``DataType``: its logical type).

    Raises :class:`UnsupportedFormatError` for an object that is not a ``LogicalType``
    statectl can read.
    """
    if depth > MAX_TYPE_DEPTH:
        raise UnsupportedFormatError("LogicalTypes nested too deeply")
    if isinstance(logical, JavaObject) and "logicalType" in logical.fields:
        logical = logical.fields["logicalType"]
    if not isinstance(logical, JavaObject):
        raise UnsupportedFormatError(f"not a LogicalType: {type(logical).__name__}")
    root_enum = logical.fields.get("typeRoot")
    if not isinstance(root_enum, JavaEnum):
        raise UnsupportedFormatError(f"{logical.class_name} has no LogicalTypeRoot")
    root = root_enum.constant
    nullable = bool(logical.fields.get("isNullable", True))
    children: tuple[SqlType, ...] = ()
    names: tuple[str, ...] = ()
    precision = scale = 0
    if root == "DECIMAL":
        precision = _int(logical, "precision", 1, 38)
        scale = _int(logical, "scale", 0, precision)
    elif root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE",
                  "TIMESTAMP_WITH_TIME_ZONE", "TIME_WITHOUT_TIME_ZONE"):
        precision = _int(logical, "precision", 0, 9)
    elif root == "ARRAY" or root == "MULTISET":
        children = (sql_type(logical.fields.get("elementType"), depth + 1),)
    elif root == "MAP":
        children = (sql_type(logical.fields.get("keyType"), depth + 1),
                    sql_type(logical.fields.get("valueType"), depth + 1))
    elif root in ("ROW", "STRUCTURED_TYPE"):
        fields = java_list(logical.fields.get("fields" if root == "ROW" else "attributes"))
        parts = []
        for f in fields:
            if not isinstance(f, JavaObject):
                raise UnsupportedFormatError(f"a {root} field is {type(f).__name__}")
            parts.append((str(f.fields.get("name")), sql_type(f.fields.get("type"), depth + 1)))
        names = tuple(n for n, _ in parts)
        children = tuple(t for _, t in parts)
    elif root == "DISTINCT_TYPE":
        source = sql_type(logical.fields.get("sourceType"), depth + 1)
        return SqlType(source.root, nullable, source.precision, source.scale, source.children,
                       source.names)
    return SqlType(root, nullable, precision, scale, children, names)
