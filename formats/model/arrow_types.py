"""Arrow types for statectl's type specs, and value conversion both ways.

==================  ==============================  ======================================
spec                Arrow type                      Python value
==================  ==============================  ======================================
int8 .. int64       int8 .. int64                   int
float32, float64    float32, float64                float
bool                bool                            bool
char, string        string (char: one UTF-16 unit)  str
bytes               binary                          bytes
list<T>             list<T>                         list
map<K,V>            map<K, V>                       dict
tuple<A,B,...>      struct<f0: A, f1: B, ...>       tuple
struct<n:T,...>     struct<n: T, ...>               dict (every field, in order)
enum<A,B,...>       string                          str (one of the constants)
timestamp[u]        timestamp[u, tz=UTC]            :class:`statecore.values.Instant`
date32              date32                          datetime.date
local_time          time64[ns]                      :class:`statecore.values.LocalTime`
local_datetime      timestamp[ns] (no time zone)    :class:`statecore.values.LocalDateTime`
bigint              string (decimal digits)         int
decimal             string (``BigDecimal`` text)    decimal.Decimal
kryo<class>         binary                          bytes (Flink's Kryo bytes)
opaque<class>       binary                          bytes (an undecoded serializer's)
global_window       string (``GlobalWindow``)       str
json                string (the JSON text)          None/bool/int/float/str/list/dict
==================  ==============================  ======================================

Enums are Arrow strings, not dictionaries: Parquet dictionary-encodes a string column on disk
anyway, and a dictionary type is no map key every reader accepts; their constants are in the
type spec. ``bigint`` and ``decimal`` are strings because Java's ``BigInteger`` and
``BigDecimal`` have arbitrary precision and scale, more than any Arrow decimal holds; the text is
exact (``BigDecimal.toString``, which Python's ``Decimal`` reads and writes alike, scale kept).

Python's ``datetime`` stops at microseconds and pyarrow's ``to_pylist`` truncates ``time64[ns]``,
so Arrow data reaches Python through :func:`pylist` / :func:`pydict` / :func:`pyrows`, which
read timestamps and times as their integer counts; :func:`from_arrow` takes those values.

``void`` (the void namespace) has no column; ``any`` (arbitrary Python values) cannot be
stored: a checkpoint needs declared types, and statectl never pickles by default.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import json
import struct
import urllib.parse
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from statecore.errors import InvalidArgumentError, UnsupportedFormatError
from statecore.serializers import TIMESTAMP_UNITS, parse_type
from statecore.values import Instant, LocalDateTime, LocalTime
from statecore.wording import a

__all__ = ["arrow_type", "from_arrow", "is_scalar", "named_as", "pydict", "pylist", "pyrows",
           "spec_arguments", "split_spec", "storage_converter", "storage_type", "to_arrow",
           "tuple_names", "value_from_text", "with_field_names"]

_SCALARS: dict[str, pa.DataType] = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float64": pa.float64(), "bool": pa.bool_(),
    "char": pa.string(), "string": pa.string(), "bytes": pa.binary(),
}
#: the scalars the type table adds, with their Arrow types
_TYPED: dict[str, pa.DataType] = {
    **{f"timestamp[{unit}]": pa.timestamp(unit, tz="UTC") for unit in TIMESTAMP_UNITS},
    "date32": pa.date32(), "local_time": pa.time64("ns"), "local_datetime": pa.timestamp("ns"),
    "bigint": pa.string(), "decimal": pa.string(), "global_window": pa.string(),
    "json": pa.string(),
}


def spec_arguments(text: str) -> list[str]:
    """A spec's arguments (what is between its outer ``<>``), split at its top-level commas."""
    args: list[str] = []
    depth, current = 0, list[str]()
    for ch in text:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            args.append("".join(current))
            current = []
        else:
            current.append(ch)
    args.append("".join(current))
    return args


@functools.lru_cache(maxsize=4096)
def _parts(spec: str) -> tuple[str, tuple[str, ...]]:
    """``(head, arguments)`` of a spec, normalised (aliases resolved, keywords lower-case)."""
    text = parse_type(spec).spec  # validates, normalises aliases
    if "<" not in text:
        return text, ()
    head, inner = text.split("<", 1)
    args = spec_arguments(inner[:-1])
    if head == "tuple" and ":" in args[0].split("<", 1)[0]:  # named fields: their types
        args = [a.partition(":")[2] for a in args]
    return head, tuple(args)


@functools.lru_cache(maxsize=4096)
def tuple_names(spec: str) -> tuple[str, ...]:
    """The Arrow field names of a ``tuple<...>`` spec.

    Its own names (``tuple<auction:int64>``, ``%XX`` decoded), else ``f0, f1, ...``.
    """
    text = parse_type(spec).spec
    head, args = _parts(spec)
    if ":" not in text.split(",", 1)[0].split("<", 2)[1]:
        return tuple(f"f{i}" for i in range(len(args)))
    depth, names, start = 0, [], True
    current: list[str] = []
    for ch in text[len(head) + 1:-1]:
        if start and ch == ":" and depth == 0:
            names.append(urllib.parse.unquote("".join(current)))
            start = False
            continue
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            start, current = True, []
            continue
        if start:
            current.append(ch)
    return tuple(names)


def _fields(args: tuple[str, ...]) -> list[tuple[str, str]]:
    """A struct's ``(name, spec)`` per field."""
    return [(name, spec) for name, _, spec in (a.partition(":") for a in args)]


def is_scalar(spec: str) -> bool:
    """Whether values of ``spec`` go to ``pa.array`` as they are (no conversion needed)."""
    return _parts(spec)[0] in _SCALARS


@functools.lru_cache(maxsize=4096)
def arrow_type(spec: str) -> pa.DataType:
    """The Arrow type that stores values of ``spec``; refuses ``any`` and ``void``."""
    head, args = _parts(spec)
    if head in _SCALARS:
        return _SCALARS[head]
    if head in _TYPED:
        return _TYPED[head]
    if head == "list":
        return pa.list_(arrow_type(args[0]))
    if head == "map":
        return pa.map_(arrow_type(args[0]), arrow_type(args[1]))
    if head == "tuple":
        return pa.struct(list(zip(tuple_names(spec), (arrow_type(a) for a in args),
                                  strict=True)))
    if head == "struct":
        return pa.struct([(name, arrow_type(field)) for name, field in _fields(args)])
    if head == "enum":
        return pa.string()
    if head in ("kryo", "opaque"):
        return pa.binary()
    raise UnsupportedFormatError(
        f"values of type {spec!r} cannot be stored in a checkpoint: declare a concrete type "
        "(int64, string, list<...>, ...)")


@functools.lru_cache(maxsize=1024)
def storage_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every timestamp and time read as its integer count (int64).

    What :func:`pylist` casts to before ``to_pylist``: exact for nanoseconds, no pandas.
    """
    if pa.types.is_timestamp(data_type) or pa.types.is_time(data_type):
        return pa.int64()
    if pa.types.is_struct(data_type):
        return pa.struct([data_type.field(i).with_type(storage_type(data_type.field(i).type))
                          for i in range(data_type.num_fields)])
    if pa.types.is_map(data_type):
        return pa.map_(storage_type(data_type.key_type), storage_type(data_type.item_type))
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        value = data_type.value_field
        inner = value.with_type(storage_type(value.type))
        return pa.list_(inner) if pa.types.is_list(data_type) else pa.large_list(inner)
    return data_type


def _storage_schema(schema: pa.Schema) -> pa.Schema | None:
    """``schema`` with :func:`storage_type` columns, or ``None`` when nothing changes."""
    fields = [f.with_type(storage_type(f.type)) for f in schema]
    if all(f.type == g.type for f, g in zip(fields, schema, strict=True)):
        return None
    return pa.schema(fields, metadata=schema.metadata)


def _readable(table: pa.Table) -> pa.Table:
    target = _storage_schema(table.schema)
    return table if target is None else table.cast(target)


def pylist(values: pa.Array | pa.ChunkedArray) -> list[Any]:
    """An Arrow column as Python values :func:`from_arrow` takes (temporal types as ints)."""
    target = storage_type(values.type)
    if target != values.type:
        values = values.cast(target)
    result: list[Any] = values.to_pylist()
    return result


def pydict(table: pa.Table) -> dict[str, list[Any]]:
    """``table.to_pydict()`` with temporal columns as ints (see :func:`pylist`)."""
    result: dict[str, list[Any]] = _readable(table).to_pydict()
    return result


def pyrows(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist()`` with temporal columns as ints (see :func:`pylist`)."""
    result: list[dict[str, Any]] = _readable(table).to_pylist()
    return result


# -- Python values -> what pa.array takes ------------------------------------------------------


def _typed(value: Any, kind: type, spec: str) -> Any:
    if not isinstance(value, kind) or (kind is tuple and not isinstance(value, tuple)):
        raise InvalidArgumentError(f"{value!r} is not a valid {spec} value")
    return value


def _checked(spec: str, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert`` after the spec's type check; ``None`` stays ``None`` (a null)."""
    check = parse_type(spec).check

    def typed(value: Any) -> Any:
        if value is None:
            return None
        check(value)
        return convert(value)

    return typed


def _timestamp_to(unit: str) -> Callable[[Any], Any]:
    factor = TIMESTAMP_UNITS[unit]
    return lambda value: value.epoch_nanos // factor


_TO_TYPED: dict[str, Callable[[Any], Any]] = {
    **{f"timestamp[{unit}]": _timestamp_to(unit) for unit in TIMESTAMP_UNITS},
    "date32": lambda value: value,
    "local_time": lambda value: value.nano_of_day,
    "local_datetime": lambda value: value.epoch_nanos,
    "bigint": str,
    "decimal": str,
    "global_window": lambda value: value,
    "json": lambda value: json.dumps(value, ensure_ascii=False),
}


@functools.lru_cache(maxsize=4096)
def to_arrow(spec: str) -> Callable[[Any], Any]:
    """A function turning a Python value of ``spec`` into what ``pa.array`` accepts.

    Elements of lists and maps and fields of structs and tuples may be ``None`` (nulls).
    """
    head, args = _parts(spec)
    if head in _SCALARS:
        serializer = parse_type(spec)

        def scalar(value: Any) -> Any:
            serializer.java_hash(value)  # the type check, a clear error if wrong
            return value
        return scalar
    if head in _TYPED:
        return _checked(spec, _TO_TYPED[head])
    if head in ("enum", "kryo", "opaque"):
        return _checked(spec, lambda value: value)
    if head == "list":
        element = _nullable(to_arrow(args[0]))
        return lambda value: None if value is None else [element(v) for v in _typed(
            value, list, spec)]
    if head == "map":
        key, item = to_arrow(args[0]), _nullable(to_arrow(args[1]))
        return lambda value: None if value is None else [
            (key(k), item(v)) for k, v in _typed(value, dict, spec).items()]
    if head == "tuple":
        fields = [_nullable(to_arrow(a)) for a in args]
        names = tuple_names(spec)
        return lambda value: None if value is None else {
            n: f(v) for n, f, v in zip(names, fields, _typed(value, tuple, spec), strict=True)}
    if head == "struct":
        named = [(name, _nullable(to_arrow(field))) for name, field in _fields(args)]
        check = parse_type(spec).check

        def record(value: Any) -> Any:
            if value is None:
                return None
            check(value)
            return {name: f(value[name]) for name, f in named}
        return record
    arrow_type(spec)  # raises for any / void
    raise AssertionError(spec)


@functools.lru_cache(maxsize=4096)
def storage_converter(spec: str) -> Callable[[Any], Any] | None:
    """What makes a *valid* value of ``spec`` one ``pa.array`` takes, without type checks.

    ``None`` when the value is taken as it is (numbers, strings, bytes, enums, dates, lists
    and structs of them). For values a decoder made, which have their types already; others
    go through :func:`to_arrow`, which checks.
    """
    head, args = _parts(spec)
    if head in _SCALARS or head in ("enum", "kryo", "opaque", "date32", "global_window"):
        return None
    if head in _TYPED:
        return _nullable(_TO_TYPED[head])
    if head == "list":
        element = storage_converter(args[0])
        if element is None:
            return None
        inner = _nullable(element)
        return lambda value: None if value is None else [inner(v) for v in value]
    if head == "map":
        key, item = storage_converter(args[0]), storage_converter(args[1])
        key_of = key or (lambda k: k)
        item_of = _nullable(item) if item is not None else (lambda v: v)
        return lambda value: None if value is None else [
            (key_of(k), item_of(v)) for k, v in value.items()]
    if head == "tuple":
        fields = [_nullable(storage_converter(a) or (lambda v: v)) for a in args]
        names = tuple_names(spec)
        return lambda value: None if value is None else {
            n: f(v) for n, f, v in zip(names, fields, value, strict=True)}
    if head == "struct":
        converted = [(name, _nullable(c)) for name, field in _fields(args)
                     if (c := storage_converter(field)) is not None]
        if not converted:
            return None

        def record(value: Any) -> Any:
            if value is None:
                return None
            out = dict(value)
            for name, convert in converted:
                out[name] = convert(out[name])
            return out
        return record
    arrow_type(spec)
    raise AssertionError(spec)


def _nullable(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


# -- what pylist gives -> Python values --------------------------------------------------------


def _timestamp_from(unit: str) -> Callable[[Any], Any]:
    factor = TIMESTAMP_UNITS[unit]
    return lambda value: Instant(value * factor)


def _decimal(text: str) -> decimal.Decimal:
    try:
        value = decimal.Decimal(text)
    except decimal.InvalidOperation as exc:
        raise InvalidArgumentError(f"{text!r} is not a decimal") from exc
    if not value.is_finite():
        raise InvalidArgumentError(f"{text!r} is not a finite decimal")
    return value


def _bigint(text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"{text[:40]!r} is not an integer") from exc


_FROM_TYPED: dict[str, Callable[[Any], Any]] = {
    **{f"timestamp[{unit}]": _timestamp_from(unit) for unit in TIMESTAMP_UNITS},
    "date32": lambda value: value,
    "local_time": LocalTime,
    "local_datetime": LocalDateTime,
    "bigint": _bigint,
    "decimal": _decimal,
    "global_window": lambda value: value,
    "json": lambda text: _json_text(text),
}


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"{text[:40]!r} is not JSON text") from exc


@functools.lru_cache(maxsize=4096)
def from_arrow(spec: str) -> Callable[[Any], Any]:
    """The inverse of :func:`to_arrow`, applied to the values :func:`pylist` gives."""
    head, args = _parts(spec)
    if head in _SCALARS or head in ("enum", "kryo", "opaque"):
        return lambda value: value
    if head in _TYPED:
        return _nullable(_FROM_TYPED[head])
    if head == "list":
        element = from_arrow(args[0])
        return lambda value: None if value is None else [element(v) for v in value]
    if head == "map":
        key, item = from_arrow(args[0]), from_arrow(args[1])
        return lambda value: None if value is None else {key(k): item(v) for k, v in value}
    if head == "tuple":
        fields = [from_arrow(a) for a in args]
        names = tuple_names(spec)
        return lambda value: None if value is None else tuple(
            f(value[n]) for n, f in zip(names, fields, strict=True))
    if head == "struct":
        named = [(name, from_arrow(field)) for name, field in _fields(args)]
        return lambda value: None if value is None else {
            name: f(value[name]) for name, f in named}
    arrow_type(spec)
    raise AssertionError(spec)


# -- command-line text -> Python values --------------------------------------------------------


def value_from_text(text: str, spec: str) -> Any:
    """A value of type ``spec`` typed on a command line (``inspect --key``, ``--namespace``).

    Strings and chars as they are; integers and floats in decimal; bools ``true``/``false``;
    bytes (and Kryo bytes) in hex; an enum constant by its name; a timestamp as ISO-8601
    (``2023-11-14T22:13:20Z``) or epoch milliseconds; a date ``YYYY-MM-DD``; a local time
    ``HH:MM[:SS[.f]]``; a local date-time ``YYYY-MM-DDTHH:MM[:SS[.f]]``; big integers and
    decimals as their digits; lists, maps, tuples and structs as JSON (a tuple as an array, a
    struct as an object of its fields, nested values in their JSON forms). A tuple of one
    field -- the key of a Flink SQL operator grouped by one column, a one-column row -- is also
    its field alone (``k7`` for ``["k7"]``). A clear :class:`InvalidArgumentError` when ``text``
    is not such a value.
    """
    head, args = _parts(spec)
    if head == "tuple" and len(args) == 1 and not text.lstrip().startswith("["):
        one = (value_from_text(text, args[0]),)
        parse_type(spec).check(one)
        return one
    try:
        if head in ("string", "char", "enum", "global_window"):
            value: Any = text
        elif head.startswith("int"):
            value = int(text)
        elif head.startswith("float"):
            value = float(text) if head == "float64" else _float32(float(text))
        elif head == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError("not true or false")
            value = text.lower() == "true"
        elif head in ("bytes", "kryo", "opaque"):
            value = bytes.fromhex(text.removeprefix("0x"))
        elif head in _TYPED:
            value = _typed_from_text(text.strip(), head)
        else:
            value = _from_json(json.loads(text), spec)
    except (ValueError, TypeError, RecursionError, ArithmeticError) as exc:
        raise InvalidArgumentError(f"{text!r} is not {a(spec)} value: {exc}") from exc
    try:
        parse_type(spec).check(value)  # the type check (ranges, one-unit chars...)
        if parse_type(spec).hashable:
            parse_type(spec).java_hash(value)
    except (OverflowError, struct.error) as exc:
        raise InvalidArgumentError(f"{text!r} is not {a(spec)} value: {exc}") from exc
    return value


def _typed_from_text(text: str, head: str) -> Any:
    if head.startswith("timestamp["):
        factor = TIMESTAMP_UNITS[head[len("timestamp["):-1]]
        if text.lstrip("-").isdigit():
            return Instant.of_epoch_milli(int(text))
        instant = Instant.parse(text)
        return Instant(instant.epoch_nanos - instant.epoch_nanos % factor)
    if head == "date32":
        return datetime.date.fromisoformat(text)
    if head == "local_time":
        return LocalTime.parse(text)
    if head == "local_datetime":
        return LocalDateTime.parse(text)
    if head == "bigint":
        return int(text)
    if head == "decimal":
        return _decimal(text)
    if head == "json":
        return json.loads(text)
    return text


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as a float32 column stores it."""
    try:
        rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except (OverflowError, struct.error) as exc:
        raise ValueError(f"{value} is out of the float32 range") from exc
    return rounded


def _from_json(value: Any, spec: str) -> Any:
    head, args = _parts(spec)
    if head == "json":
        return value
    if head == "list" and isinstance(value, list):
        return [_from_json(v, args[0]) for v in value]
    if head == "tuple" and isinstance(value, list) and len(value) == len(args):
        return tuple(_from_json(v, a) for v, a in zip(value, args, strict=True))
    if head == "struct" and isinstance(value, dict):
        fields = _fields(args)
        if value.keys() != {name for name, _ in fields}:
            raise ValueError(f"JSON {json.dumps(value)[:80]} does not have the fields of "
                             f"{spec}")
        return {name: None if value[name] is None else _from_json(value[name], field)
                for name, field in fields}
    if head == "map" and isinstance(value, dict):
        return {value_from_text(k, args[0]): _from_json(v, args[1]) for k, v in value.items()}
    if head in ("bytes", "kryo", "opaque") and isinstance(value, str):
        return bytes.fromhex(value)
    if head == "float32" and isinstance(value, int | float) and not isinstance(value, bool):
        return _float32(float(value))
    if head.startswith("timestamp[") and isinstance(value, int) and not isinstance(value, bool):
        return Instant.of_epoch_milli(value)  # the JSON form: epoch milliseconds
    if head in _TYPED and isinstance(value, str):
        return _typed_from_text(value, head)
    if (head in _SCALARS or head in ("enum", "bigint")) and not isinstance(value, list | dict):
        return value
    raise ValueError(f"JSON {json.dumps(value)[:80]} does not fit {spec}")


def split_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """A type spec's head and arguments (a scalar has none).

    ``map<string,list<int64>>`` -> ``("map", ("string", "list<int64>"))``. The spec is
    validated, and aliases normalised.
    """
    return _parts(spec)


def with_field_names(spec: str) -> Callable[[Any], Any] | None:
    """What shows a value of ``spec`` with the names of its named tuples.

    Each such tuple becomes a dict of its fields (``{"auction": 1026}`` for
    ``tuple<auction:int64>``), at any depth but a map's keys (which stay tuples); ``None`` when
    ``spec`` names nothing.
    """
    if ":" not in spec or "tuple<" not in spec:
        return None
    head, args = _parts(spec)
    if head == "tuple":
        names = tuple_names(spec)
        inner = [with_field_names(a) or (lambda v: v) for a in args]
        if names[0] == "f0" and not any(with_field_names(a) for a in args):
            return None
        if names[0] == "f0":
            return lambda value: None if value is None else tuple(
                f(v) for f, v in zip(inner, value, strict=True))
        return lambda value: None if value is None else {
            n: f(v) for n, f, v in zip(names, inner, value, strict=True)}
    if head == "list":
        element = with_field_names(args[0])
        if element is None:
            return None
        return lambda value: None if value is None else [element(v) for v in value]
    if head == "map":
        item = with_field_names(args[1])
        if item is None:
            return None
        return lambda value: None if value is None else {k: item(v) for k, v in value.items()}
    return None



def named_as(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the struct field names of ``schema`` (a row a plan named).

    Each column whose type differs from ``schema``'s field of that name only in struct field
    names is viewed, zero-copy, as that field's type; other columns stay as they are.
    """
    columns, fields, changed = [], [], False
    for field, column in zip(table.schema, table.columns, strict=True):
        index = schema.get_field_index(field.name)
        target = schema.field(index).type if index >= 0 else column.type
        if target != column.type:
            try:
                column = pa.chunked_array([c.view(target) for c in column.chunks], target)
                field, changed = field.with_type(target), True
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
                pass
        columns.append(column)
        fields.append(field)
    if not changed:
        return table
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))
