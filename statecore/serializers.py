"""Typed serializers: how statectl copies state and hashes keys, per declared type.

A serializer here plays the part of Flink's ``TypeSerializer`` in the heap backend: ``copy``
makes the defensive deep copy that ``CopyOnWriteStateMap.get`` hands out while a snapshot still
needs the old object (reference §5.4), and ``java_hash`` gives the Java ``hashCode`` of a value
of that type (reference §2), which decides key groups. Arrow mappings are added by ``formats``.

Types are named by specs (the Python value of each in brackets):

- scalars ``int8 int16 int32 int64`` [int], ``float32 float64`` [float], ``bool``, ``char``
  and ``string`` [str], ``bytes``;
- ``list<T>`` [list], ``map<K,V>`` [dict], ``tuple<A,B,...>`` [tuple: Flink's ``TupleN``
  and ``Row``, fields ``f0..fN``]; ``tuple<name:A,...>`` names its fields (a SQL row named by
  the job's plan; ``%XX`` in a name stands for a byte of its UTF-8), still a tuple;
- ``struct<name:T,...>`` [dict of the fields, in order]: a POJO, fields named;
- ``enum<A,B,...>`` [str, one of the constants]: a Java enum, constants in ordinal order;
- ``timestamp[ms]``, ``timestamp[us]``, ``timestamp[ns]`` [:class:`~statecore.values.Instant`]:
  an instant (UTC) at that precision; ``date32`` [:class:`datetime.date`]: a date;
  ``local_time`` [:class:`~statecore.values.LocalTime`] and ``local_datetime``
  [:class:`~statecore.values.LocalDateTime`]: zone-less, nanosecond precision;
- ``bigint`` [int, unbounded] and ``decimal`` [:class:`decimal.Decimal`, any precision, its
  scale kept]: ``java.math.BigInteger`` and ``BigDecimal``;
- ``kryo<class name>`` [bytes]: a value Flink serialized with Kryo, as Flink's bytes, with the
  class the serializer snapshot registered; never decoded further; ``opaque<class name>``
  [bytes]: the bytes of a value whose Flink serializer (its snapshot class named) statectl
  does not decode;
- ``json`` [``None``, bool, int, float, str, lists and dicts with string keys of them]: a value
  whose shape is known only when it is read (a Kryo collection, map, enum, ``ZonedDateTime``,
  a declared ``Object``...); no Java hash (its class, not statectl, decides it);
- ``global_window`` [the string ``"GlobalWindow"``]: the namespace of ``GlobalWindows``;
- ``void`` (the void namespace) and ``any`` (an arbitrary Python value, deep-copied; in memory
  only: checkpoints need a declared type).

Java aliases (``int``, ``long``, ``double``, ``boolean``, ``str``, ``instant``, ``date``...)
are accepted. Keywords are case-insensitive; field names, enum constants and class names keep
their case. Java ``hashCode`` follows the JDK for the JDK types (a ``timestamp`` hashes as a
``java.time.Instant``, ``date32`` as a ``LocalDate``). A POJO's ``hashCode`` is user code, an
enum's is ``Object.hashCode`` (identity) and a Kryo object's its class's: those types have no
hash statectl can compute (:attr:`TypeSerializer.hashable` is false, ``java_hash`` raises
:class:`~statecore.errors.UnknownKeyHashError`), so their values cannot be placed in key groups.
There is no pickle serializer here: nothing in statecore deserializes untrusted bytes.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import functools
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from statecore.errors import InvalidArgumentError, UnknownKeyHashError
from statecore.hashing import (
    INT32_MAX,
    INT32_MIN,
    VOID_NAMESPACE_HASH,
    java_big_decimal_hash,
    java_big_integer_hash,
    java_bool_hash,
    java_bytes_hash,
    java_char_hash,
    java_double_hash,
    java_float_hash,
    java_instant_hash,
    java_int_hash,
    java_list_hash,
    java_local_date_hash,
    java_local_datetime_hash,
    java_local_time_hash,
    java_long_hash,
    java_string_hash,
    java_tuple_hash,
)
from statecore.values import Instant, LocalDateTime, LocalTime, civil_from_days

__all__ = [
    "GLOBAL_WINDOW",
    "MAX_SPEC_DEPTH",
    "MAX_SPEC_LENGTH",
    "TIMESTAMP_UNITS",
    "VOID_NAMESPACE",
    "TypeSerializer",
    "decimal_parts",
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
    serializers for immutable types do. ``java_hash`` is ``None`` for a type whose Java
    ``hashCode`` statectl cannot compute (``unhashable`` says why): such a type is not
    :attr:`hashable`, and :meth:`java_hash` raises :class:`UnknownKeyHashError`.
    """

    def __init__(
        self,
        spec: str,
        java_hash: Callable[[T], int] | None,
        copy: Callable[[T], T] | None = None,
        check: Callable[[Any], bool] | None = None,
        unhashable: str = "",
    ) -> None:
        self.spec = spec
        self._java_hash = java_hash
        self._copy = copy
        self._check = check
        self.immutable = copy is None
        self.unhashable = unhashable

    @property
    def hashable(self) -> bool:
        """Whether statectl can compute the Java ``hashCode`` of this type's values."""
        return self._java_hash is not None

    def check(self, value: Any) -> None:
        """A clear :class:`InvalidArgumentError` if ``value`` is not a value of this type."""
        if self._check is not None and not self._check(value):
            raise InvalidArgumentError(f"{value!r} is not a valid {self.spec} value")

    def java_hash(self, value: T) -> int:
        """Java ``hashCode`` of ``value`` as this type; a clear error if it is not one."""
        self.check(value)
        if self._java_hash is None:
            raise UnknownKeyHashError(
                f"the Java hashCode of a {_short(self.spec)} value is not computable: "
                f"{self.unhashable or 'it is not defined by the type'}")
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


def _short(spec: str, limit: int = 80) -> str:
    return spec if len(spec) <= limit else spec[:limit - 1] + "…"


def _int_check(bits: int) -> Callable[[Any], bool]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def check(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    return check


def _is_float(value: Any) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


def _is_char(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 1 and ord(value) <= 0xFFFF


#: Nanoseconds per unit of the ``timestamp[...]`` precisions.
TIMESTAMP_UNITS = {"ms": 1_000_000, "us": 1_000, "ns": 1}

#: The value of the ``global_window`` namespace (Flink's ``GlobalWindow.get()``).
GLOBAL_WINDOW = "GlobalWindow"


def _timestamp(unit: str) -> TypeSerializer[Instant]:
    factor = TIMESTAMP_UNITS[unit]

    def check(value: Any) -> bool:
        return isinstance(value, Instant) and value.epoch_nanos % factor == 0

    return TypeSerializer(f"timestamp[{unit}]",
                          lambda v: java_instant_hash(v.epoch_second, v.nano), check=check)


def _is_date(value: Any) -> bool:
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


def _date_hash(value: datetime.date) -> int:
    return java_local_date_hash(value.year, value.month, value.day)


def _local_datetime_hash(value: LocalDateTime) -> int:
    return java_local_datetime_hash(*civil_from_days(value.days), value.nano_of_day)


def decimal_parts(value: decimal.Decimal) -> tuple[int, int]:
    """``(unscaled value, scale)`` of a finite decimal, as ``BigDecimal`` holds it."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidArgumentError(f"{value} is not a finite decimal")
    unscaled = int("".join(map(str, digits)) or "0")
    return (-unscaled if sign else unscaled), -exponent


#: Most decimal digits of a ``bigint`` or ``decimal`` value (a 1024-byte ``BigInteger``'s);
#: their text stays under Python's 4300-digit limit of int/str conversion.
MAX_DIGITS = 2500


def _is_decimal(value: Any) -> bool:
    return (isinstance(value, decimal.Decimal) and value.is_finite()
            and len(value.as_tuple().digits) <= MAX_DIGITS)


def _is_bigint(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and value.bit_length() <= MAX_DIGITS * 3)  # 3 bits per digit at least


#: Deepest nesting of a ``json`` value statectl checks (a deeper one is refused).
MAX_JSON_DEPTH = 128


def _is_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON-compatible: str-keyed dicts, lists, str, numbers, bool, None."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if depth >= MAX_JSON_DEPTH:
        return False
    if isinstance(value, list):
        return all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


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
    **{f"timestamp[{unit}]": _timestamp(unit) for unit in TIMESTAMP_UNITS},
    "date32": TypeSerializer("date32", _date_hash, check=_is_date),
    "local_time": TypeSerializer("local_time", lambda v: java_local_time_hash(v.nano_of_day),
                                 check=lambda v: isinstance(v, LocalTime)),
    "local_datetime": TypeSerializer("local_datetime", _local_datetime_hash,
                                     check=lambda v: isinstance(v, LocalDateTime)),
    "bigint": TypeSerializer("bigint", java_big_integer_hash, check=_is_bigint),
    "decimal": TypeSerializer("decimal", lambda v: java_big_decimal_hash(*decimal_parts(v)),
                              check=_is_decimal),
    # GlobalWindow.hashCode() is 0 (reference §2)
    "global_window": TypeSerializer("global_window", lambda _v: 0,
                                    check=lambda v: v == GLOBAL_WINDOW),
}
_SCALARS["json"] = TypeSerializer(
    "json", None, copy.deepcopy, check=_is_json,
    unhashable="a json value's Java class decides its hashCode, which statectl does not know")
_SCALARS["any"] = TypeSerializer("any", lambda v: _infer(v).java_hash(v), copy.deepcopy)

_ALIASES = {
    "byte": "int8", "short": "int16", "int": "int32", "integer": "int32", "long": "int64",
    "float": "float32", "double": "float64", "boolean": "bool", "str": "string",
    "character": "char", "binary": "bytes", "instant": "timestamp[ns]", "date": "date32",
    "localdate": "date32", "localtime": "local_time", "localdatetime": "local_datetime",
    "biginteger": "bigint", "bigdecimal": "decimal",
}


def _list_serializer(element: TypeSerializer[Any]) -> TypeSerializer[list[Any]]:
    def copy(value: list[Any]) -> list[Any]:
        if element.immutable:
            return list(value)
        return [element.copy(v) for v in value]

    def java_hash(value: list[Any]) -> int:
        return java_list_hash(None if v is None else element.java_hash(v) for v in value)

    return TypeSerializer(f"list<{element.spec}>", java_hash if element.hashable else None,
                          copy, check=lambda v: isinstance(v, list),
                          unhashable=element.unhashable)


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

    hashable = key.hashable and value.hashable
    return TypeSerializer(f"map<{key.spec},{value.spec}>", java_hash if hashable else None,
                          copy, check=lambda v: isinstance(v, dict),
                          unhashable=key.unhashable or value.unhashable)


def _tuple_serializer(fields: list[TypeSerializer[Any]], names: list[str] | None = None
                      ) -> TypeSerializer[tuple[Any, ...]]:
    mutable = any(not f.immutable for f in fields)

    def copy(value: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(f.copy(v) for f, v in zip(fields, value, strict=True))

    def java_hash(value: tuple[Any, ...]) -> int:
        return java_tuple_hash(
            None if v is None else f.java_hash(v) for f, v in zip(fields, value, strict=True)
        )

    def check(value: Any) -> bool:
        return isinstance(value, tuple) and len(value) == len(fields)

    spec = "tuple<" + ",".join(f.spec if names is None else f"{n}:{f.spec}"
                               for n, f in zip(names or fields, fields, strict=True)) + ">"
    hashable = all(f.hashable for f in fields)
    return TypeSerializer(spec, java_hash if hashable else None, copy if mutable else None,
                          check=check,
                          unhashable=next((f.unhashable for f in fields if not f.hashable), ""))


def _struct_serializer(fields: list[tuple[str, TypeSerializer[Any]]]
                       ) -> TypeSerializer[dict[str, Any]]:
    """A POJO: a dict of its fields (every field present, ``None`` for null)."""
    names = frozenset(name for name, _ in fields)
    if len(names) != len(fields):
        raise InvalidArgumentError("a struct's field names must be distinct")

    def copy(value: dict[str, Any]) -> dict[str, Any]:
        return {name: None if value[name] is None else f.copy(value[name]) for name, f in fields}

    def check(value: Any) -> bool:
        return isinstance(value, dict) and value.keys() == names

    spec = "struct<" + ",".join(f"{name}:{f.spec}" for name, f in fields) + ">"
    return TypeSerializer(spec, None, copy, check=check,
                          unhashable="a POJO's hashCode is user code")


def _enum_serializer(constants: list[str]) -> TypeSerializer[str]:
    if len(set(constants)) != len(constants):
        raise InvalidArgumentError("an enum's constants must be distinct")
    known = frozenset(constants)
    return TypeSerializer("enum<" + ",".join(constants) + ">", None,
                          check=lambda v: isinstance(v, str) and v in known,
                          unhashable="an enum's hashCode is Object.hashCode, which differs "
                                     "from one JVM to the next")


def _kryo_serializer(class_name: str) -> TypeSerializer[bytes]:
    return TypeSerializer(f"kryo<{class_name}>", None,
                          check=lambda v: isinstance(v, bytes | bytearray),
                          unhashable=f"statectl does not decode Kryo's {class_name} objects")


def _opaque_serializer(class_name: str) -> TypeSerializer[bytes]:
    return TypeSerializer(f"opaque<{class_name}>", None,
                          check=lambda v: isinstance(v, bytes | bytearray),
                          unhashable=f"statectl does not decode {class_name}'s values")


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
                raise InvalidArgumentError(f"unbalanced '>' in type {_short(spec)!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    if depth != 0 or any(not p for p in parts):
        raise InvalidArgumentError(f"malformed type {_short(spec)!r}")
    return parts


#: Type specs longer or more deeply nested than this are refused (they come from untrusted
#: checkpoint metadata too). A POJO's spec names every field, so the length allows large ones.
MAX_SPEC_LENGTH = 1 << 16
MAX_SPEC_DEPTH = 32
#: A name in a spec (struct field, enum constant, class name): no space, no ``<>,:``.
_NAME = re.compile(r"[^\s<>,:]+")


def _name(text: str, what: str, spec: str) -> str:
    if not _NAME.fullmatch(text):
        raise InvalidArgumentError(f"{text!r} is not a {what} in type {_short(spec)!r}")
    return text


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
    return _parse(spec)


@functools.lru_cache(maxsize=4096)
def _parse(spec: str) -> TypeSerializer[Any]:
    """:func:`parse_type` after its bounds checks; parsed once per distinct spec."""
    text = spec.strip()
    lowered = text.lower()
    name = _ALIASES.get(lowered, lowered)
    if name in _SCALARS:
        return _SCALARS[name]
    if "<" in text and text.endswith(">"):
        head, inner = text.split("<", 1)
        head = head.strip().lower()
        args = _split_arguments(inner[:-1], spec)
        if head == "list" and len(args) == 1:
            return _list_serializer(_parse(args[0]))
        if head == "map" and len(args) == 2:
            return _map_serializer(_parse(args[0]), _parse(args[1]))
        if head == "tuple" and args:
            named = [":" in a.split("<", 1)[0] for a in args]
            if any(named) and not all(named):
                raise InvalidArgumentError(f"a tuple's fields are all named or none in "
                                           f"{_short(spec)!r}")
            if not any(named):
                return _tuple_serializer([_parse(a) for a in args])
            parts = [a.partition(":") for a in args]
            return _tuple_serializer([_parse(t) for _, _, t in parts],
                                     [_name(n.strip(), "field name", spec) for n, _, _ in parts])
        if head == "struct" and args:
            fields = []
            for arg in args:
                field, colon, field_type = arg.partition(":")
                if not colon:
                    raise InvalidArgumentError(f"struct field {arg!r} has no type (name:type) "
                                               f"in {_short(spec)!r}")
                fields.append((_name(field.strip(), "field name", spec), _parse(field_type)))
            return _struct_serializer(fields)
        if head == "enum" and args:
            return _enum_serializer([_name(a, "enum constant", spec) for a in args])
        if head == "kryo" and len(args) == 1:
            return _kryo_serializer(_name(args[0], "class name", spec))
        if head == "opaque" and len(args) == 1:
            return _opaque_serializer(_name(args[0], "class name", spec))
    known = (", ".join(sorted(_SCALARS)) + ", list<T>, map<K,V>, tuple<...>, "
             "struct<name:T,...>, enum<A,...>, kryo<class>, opaque<class>")
    raise InvalidArgumentError(f"unknown type {_short(spec)!r} (known: {known})")


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
    if isinstance(value, Instant):
        return _SCALARS["timestamp[ns]"]
    if _is_date(value):
        return _SCALARS["date32"]
    if isinstance(value, decimal.Decimal):
        return _SCALARS["decimal"]
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
