"""The Python values statectl makes of Kryo's objects: JSON types that remember the Java class.

:class:`JavaStr`, :class:`JavaInt`, :class:`JavaFloat`, :class:`JavaList` and :class:`JavaDict`
are subclasses of the JSON types that remember the Java class of the object Kryo wrote
(``Kryo.writeClassAndObject``) and the fields of its serializer, so that
:func:`~formats.flink.types.kryo.kryo_encoder` writes a decoded value back byte for byte (the
package doc says which value each class becomes).
"""

from __future__ import annotations

from typing import Any

# ------------------------------------------------------------------------------- Python values


class JavaStr(str):
    """A JSON string that was a Java object of ``java_class`` (``parts``: its fields).

    ``nested``: the objects of its object fields (Kryo 2's FieldSerializer), kept for their
    identity (Kryo writes a second use of one object as a reference).
    """

    java_class: str
    parts: tuple[Any, ...]
    nested: tuple[Any, ...] = ()


class JavaInt(int):
    """A JSON number that was a ``Long``, ``Short``, ``Byte`` or ``BigInteger``."""

    java_class: str


class JavaFloat(float):
    """A JSON number that was a ``Float``."""

    java_class: str


class JavaList(list[Any]):
    """A JSON list that was a Java collection, array, or map (then of key/value dicts)."""

    java_class: str
    element_class: str  # an array's component class, an EnumSet's enum class


class JavaDict(dict[str, Any]):
    """A JSON object that was a Java map with string keys."""

    java_class: str


def jstr(text: str, java_class: str, parts: tuple[Any, ...] = ()) -> JavaStr:
    v = JavaStr(text)
    v.java_class = java_class
    v.parts = parts
    return v


def jint(value: int, java_class: str) -> JavaInt:
    v = JavaInt(value)
    v.java_class = java_class
    return v
