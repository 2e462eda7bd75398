"""Typed serializers: how statectl copies state and hashes keys, per declared type.

A serializer here plays the part of Flink's ``TypeSerializer`` in the heap backend: ``copy``
makes the defensive deep copy that ``CopyOnWriteStateMap.get`` hands out while a snapshot still
needs the old object (reference §5.4), and ``java_hash`` gives the Java ``hashCode`` of a value
of that type (reference §2), which decides key groups. Arrow mappings are added by ``formats``.

Types are named by specs: ``int8 int16 int32 int64 float32 float64 bool char string bytes``,
``list<T>``, ``map<K,V>``, ``tuple<A,B,...>`` (Flink's ``TupleN``), ``void`` (the void
namespace) and ``any`` (an arbitrary Python value, deep-copied; in memory only: checkpoints
need a declared type). Java aliases (``int``, ``long``, ``double``, ``boolean``, ``str``...)
are accepted. There is no pickle serializer here: nothing in statecore deserializes untrusted bytes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from statecore.errors import InvalidArgumentError
from statecore.hashing import (
    INT32_MAX,
    INT32_MIN,
    VOID_NAMESPACE_HASH,
    java_bool_hash,
    java_bytes_hash,
    java_char_hash,
    java_double_hash,
    java_float_hash,
    java_int_hash,
    java_list_hash,
    java_long_hash,
    java_string_hash,
    java_tuple_hash,
)

__all__ = [
    "VOID_NAMESPACE",
    "TypeSerializer",
    "VoidNamespace",
    "infer_java_hash",
    "parse_type",
    "resolve_type",
]

T = TypeVar("T")


class VoidNamespace:
    """Flink's ``VoidNamespace``: the namespace of state that has none. A singleton.

    Its Java ``hashCode`` is 99 (reference §2); its Python hash is the same constant, so the
    void namespace never makes bucket layouts depend on ``PYTHONHASHSEED``.
    """

    _instance: VoidNamespace | None = None

    def __new__(cls) -> VoidNamespace:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "VOID"

    def __hash__(self) -> int:
        return VOID_NAMESPACE_HASH

    # Equality is identity (object's, evaluated in C): there is only one instance.

    def __reduce__(self) -> str:
        return "VOID_NAMESPACE"


#: The one instance of :class:`VoidNamespace`.
VOID_NAMESPACE = VoidNamespace()


class TypeSerializer(Generic[T]):
    """A declared value type: its spec, deep copy and Java hash code.

    ``immutable`` types are never copied (``copy`` returns the same object), exactly as Flink's
    serializers for immutable types do.
    """

    def __init__(
        self,
        spec: str,
        java_hash: Callable[[T], int],
        copy: Callable[[T], T] | None = None,
        check: Callable[[Any], bool] | None = None,
    ) -> None:
        self.spec = spec
        self._java_hash = java_hash
        self._copy = copy
        self._check = check
        self.immutable = copy is None

    def java_hash(self, value: T) -> int:
        """Java ``hashCode`` of ``value`` as this type; a clear error if it is not one."""
        if self._check is not None and not self._check(value):
            raise InvalidArgumentError(f"{value!r} is not a valid {self.spec} value")
        return self._java_hash(value)

    def copy(self, value: T) -> T:
        """A deep copy that shares nothing mutable with ``value`` (identity if immutable)."""
        return value if self._copy is None else self._copy(value)

    def __repr__(self) -> str:
        return f"TypeSerializer({self.spec!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeSerializer) and other.spec == self.spec

    def __hash__(self) -> int:
        return java_string_hash(self.spec)


def _int_check(bits: int) -> Callable[[Any], bool]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def check(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    return check


def _is_float(value: Any) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


def _is_char(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 1 and ord(value) <= 0xFFFF


_SCALARS: dict[str, TypeSerializer[Any]] = {
    "int8": TypeSerializer("int8", java_int_hash, check=_int_check(8)),
    "int16": TypeSerializer("int16", java_int_hash, check=_int_check(16)),
    "int32": TypeSerializer("int32", java_int_hash, check=_int_check(32)),
    "int64": TypeSerializer("int64", java_long_hash, check=_int_check(64)),
    "float32": TypeSerializer("float32", java_float_hash, check=_is_float),
    "float64": TypeSerializer("float64", java_double_hash, check=_is_float),
    "bool": TypeSerializer("bool", java_bool_hash, check=lambda v: isinstance(v, bool)),
    "char": TypeSerializer("char", java_char_hash, check=_is_char),
    "string": TypeSerializer("string", java_string_hash, check=lambda v: isinstance(v, str)),
    "bytes": TypeSerializer(
        "bytes", java_bytes_hash, check=lambda v: isinstance(v, bytes | bytearray)
    ),
    "void": TypeSerializer(
        "void", lambda _v: VOID_NAMESPACE_HASH, check=lambda v: v is VOID_NAMESPACE
    ),
}
_SCALARS["any"] = TypeSerializer("any", lambda v: _infer(v).java_hash(v), copy.deepcopy)

_ALIASES = {
    "byte": "int8", "short": "int16", "int": "int32", "integer": "int32", "long": "int64",
    "float": "float32", "double": "float64", "boolean": "bool", "str": "string",
    "character": "char", "binary": "bytes",
}


def _list_serializer(element: TypeSerializer[Any]) -> TypeSerializer[list[Any]]:
    def copy(value: list[Any]) -> list[Any]:
        if element.immutable:
            return list(value)
        return [element.copy(v) for v in value]

    def java_hash(value: list[Any]) -> int:
        return java_list_hash(None if v is None else element.java_hash(v) for v in value)

    return TypeSerializer(f"list<{element.spec}>", java_hash, copy,
                          check=lambda v: isinstance(v, list))


def _map_serializer(
    key: TypeSerializer[Any], value: TypeSerializer[Any]
) -> TypeSerializer[dict[Any, Any]]:
    def copy(mapping: dict[Any, Any]) -> dict[Any, Any]:
        if value.immutable:
            return dict(mapping)
        return {k: value.copy(v) for k, v in mapping.items()}

    def java_hash(mapping: dict[Any, Any]) -> int:
        # java.util.AbstractMap.hashCode: sum of (hash(k) ^ hash(v)), int32 wrap.
        total = 0
        for k, v in mapping.items():
            kh = 0 if k is None else key.java_hash(k)
            vh = 0 if v is None else value.java_hash(v)
            total = (total + (kh ^ vh)) & 0xFFFFFFFF
        return total - (1 << 32) if total & 0x80000000 else total

    return TypeSerializer(f"map<{key.spec},{value.spec}>", java_hash, copy,
                          check=lambda v: isinstance(v, dict))


def _tuple_serializer(fields: list[TypeSerializer[Any]]) -> TypeSerializer[tuple[Any, ...]]:
    mutable = any(not f.immutable for f in fields)

    def copy(value: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(f.copy(v) for f, v in zip(fields, value, strict=True))

    def java_hash(value: tuple[Any, ...]) -> int:
        return java_tuple_hash(
            None if v is None else f.java_hash(v) for f, v in zip(fields, value, strict=True)
        )

    def check(value: Any) -> bool:
        return isinstance(value, tuple) and len(value) == len(fields)

    spec = "tuple<" + ",".join(f.spec for f in fields) + ">"
    return TypeSerializer(spec, java_hash, copy if mutable else None, check=check)


def _split_arguments(text: str, spec: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth < 0:
                raise InvalidArgumentError(f"unbalanced '>' in type {spec!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    if depth != 0 or any(not p for p in parts):
        raise InvalidArgumentError(f"malformed type {spec!r}")
    return parts


#: Type specs longer or more deeply nested than this are refused (they come from untrusted
#: checkpoint metadata too).
MAX_SPEC_LENGTH = 1000
MAX_SPEC_DEPTH = 16


def parse_type(spec: str) -> TypeSerializer[Any]:
    """The serializer for a type spec such as ``"int64"`` or ``"map<string,list<int32>>"``."""
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"a type spec is a string, got {spec!r}")
    if len(spec) > MAX_SPEC_LENGTH:
        raise InvalidArgumentError(f"type spec longer than {MAX_SPEC_LENGTH} characters")
    depth = 0
    for ch in spec:
        depth += ch == "<"
        if depth > MAX_SPEC_DEPTH:
            raise InvalidArgumentError(f"type spec nested deeper than {MAX_SPEC_DEPTH}")
        depth -= ch == ">"
    text = spec.strip().lower()
    name = _ALIASES.get(text, text)
    if name in _SCALARS:
        return _SCALARS[name]
    if "<" in text and text.endswith(">"):
        head, inner = text.split("<", 1)
        args = [parse_type(a) for a in _split_arguments(inner[:-1], spec)]
        head = head.strip()
        if head == "list" and len(args) == 1:
            return _list_serializer(args[0])
        if head == "map" and len(args) == 2:
            return _map_serializer(args[0], args[1])
        if head == "tuple" and args:
            return _tuple_serializer(args)
    known = ", ".join(sorted(_SCALARS)) + ", list<T>, map<K,V>, tuple<...>"
    raise InvalidArgumentError(f"unknown type {spec!r} (known: {known})")


def _infer(value: Any) -> TypeSerializer[Any]:
    if value is VOID_NAMESPACE:
        return _SCALARS["void"]
    if isinstance(value, bool):
        return _SCALARS["bool"]
    if isinstance(value, int):
        return _SCALARS["int32" if INT32_MIN <= value <= INT32_MAX else "int64"]
    if isinstance(value, float):
        return _SCALARS["float64"]
    if isinstance(value, str):
        return _SCALARS["string"]
    if isinstance(value, bytes | bytearray):
        return _SCALARS["bytes"]
    if isinstance(value, tuple):
        return _tuple_serializer([_infer(v) for v in value])
    raise InvalidArgumentError(
        f"cannot infer a Java type for {type(value).__name__} value {value!r}; declare one"
    )


def resolve_type(
    declared: str | TypeSerializer[Any] | None, sample: Any = None
) -> TypeSerializer[Any]:
    """A serializer from a spec, a serializer, or (``None``) inferred from ``sample``."""
    if isinstance(declared, TypeSerializer):
        return declared
    if isinstance(declared, str):
        return parse_type(declared)
    return _infer(sample)


def infer_java_hash(value: Any) -> int:
    """Java ``hashCode`` of a Python value with its type inferred (see ``resolve_type``)."""
    return _infer(value).java_hash(value)
