"""Arrow types for statectl's type specs, and value conversion both ways.

=================  ==============================  ======================================
spec               Arrow type                      Python value
=================  ==============================  ======================================
int8 .. int64      int8 .. int64                   int
float32, float64   float32, float64                float
bool               bool                            bool
char, string       string (char: one UTF-16 unit)  str
bytes              binary                          bytes
list<T>            list<T>                         list
map<K,V>           map<K, V>                       dict
tuple<A,B,...>     struct<f0: A, f1: B, ...>       tuple
=================  ==============================  ======================================

``void`` (the void namespace) has no column; ``any`` (arbitrary Python values) cannot be
stored: a checkpoint needs declared types, and statectl never pickles by default.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from statecore.errors import InvalidArgumentError, UnsupportedFormatError
from statecore.serializers import TypeSerializer, parse_type

__all__ = ["arrow_type", "from_arrow", "is_scalar", "split_spec", "to_arrow", "value_from_text"]

_SCALARS: dict[str, pa.DataType] = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float64": pa.float64(), "bool": pa.bool_(),
    "char": pa.string(), "string": pa.string(), "bytes": pa.binary(),
}


def _parts(spec: str) -> tuple[str, list[str]]:
    serializer = parse_type(spec)  # validates, normalises aliases
    text = serializer.spec
    if "<" not in text:
        return text, []
    head, inner = text.split("<", 1)
    args, depth, current = [], 0, ""
    for ch in inner[:-1]:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            args.append(current)
            current = ""
        else:
            current += ch
    args.append(current)
    return head, args


def is_scalar(spec: str) -> bool:
    """Whether values of ``spec`` go to ``pa.array`` as they are (no conversion needed)."""
    return _parts(spec)[0] in _SCALARS


def arrow_type(spec: str) -> pa.DataType:
    """The Arrow type that stores values of ``spec``; refuses ``any`` and ``void``."""
    head, args = _parts(spec)
    if head in _SCALARS:
        return _SCALARS[head]
    if head == "list":
        return pa.list_(arrow_type(args[0]))
    if head == "map":
        return pa.map_(arrow_type(args[0]), arrow_type(args[1]))
    if head == "tuple":
        return pa.struct([(f"f{i}", arrow_type(a)) for i, a in enumerate(args)])
    raise UnsupportedFormatError(
        f"values of type {spec!r} cannot be stored in a checkpoint: declare a concrete type "
        "(int64, string, list<...>, ...)")


def to_arrow(spec: str) -> Callable[[Any], Any]:
    """A function turning a Python value of ``spec`` into what ``pa.array`` accepts."""
    head, args = _parts(spec)
    serializer: TypeSerializer[Any] = parse_type(spec)
    if head in _SCALARS:
        def scalar(value: Any) -> Any:
            serializer.java_hash(value)  # the type check, a clear error if wrong
            return value
        return scalar
    if head == "list":
        element = to_arrow(args[0])
        return lambda value: None if value is None else [element(v) for v in _typed(
            value, list, spec)]
    if head == "map":
        key, item = to_arrow(args[0]), to_arrow(args[1])
        return lambda value: None if value is None else [
            (key(k), item(v)) for k, v in _typed(value, dict, spec).items()]
    if head == "tuple":
        fields = [to_arrow(a) for a in args]
        return lambda value: None if value is None else {
            f"f{i}": f(v) for i, (f, v) in enumerate(zip(fields, _typed(value, tuple, spec),
                                                         strict=True))}
    arrow_type(spec)  # raises for any / void
    raise AssertionError(spec)


def from_arrow(spec: str) -> Callable[[Any], Any]:
    """The inverse of :func:`to_arrow`, applied to ``to_pylist()`` values."""
    head, args = _parts(spec)
    if head in _SCALARS:
        return lambda value: value
    if head == "list":
        element = from_arrow(args[0])
        return lambda value: None if value is None else [element(v) for v in value]
    if head == "map":
        key, item = from_arrow(args[0]), from_arrow(args[1])
        return lambda value: None if value is None else {key(k): item(v) for k, v in value}
    if head == "tuple":
        fields = [from_arrow(a) for a in args]
        return lambda value: None if value is None else tuple(
            f(value[f"f{i}"]) for i, f in enumerate(fields))
    arrow_type(spec)
    raise AssertionError(spec)


def _typed(value: Any, kind: type, spec: str) -> Any:
    if not isinstance(value, kind) or (kind is tuple and not isinstance(value, tuple)):
        raise InvalidArgumentError(f"{value!r} is not a valid {spec} value")
    return value


def value_from_text(text: str, spec: str) -> Any:
    """A value of type ``spec`` typed on a command line (``inspect --key``, ``--namespace``).

    Strings and chars as they are; integers and floats in decimal; bools ``true``/``false``;
    bytes in hex; lists, maps and tuples as JSON (a tuple as an array). A clear
    :class:`InvalidArgumentError` when ``text`` is not such a value.
    """
    head, args = _parts(spec)
    try:
        if head in ("string", "char"):
            value: Any = text
        elif head.startswith("int"):
            value = int(text)
        elif head.startswith("float"):
            value = float(text) if head == "float64" else _float32(float(text))
        elif head == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError("not true or false")
            value = text.lower() == "true"
        elif head == "bytes":
            value = bytes.fromhex(text.removeprefix("0x"))
        else:
            value = _from_json(json.loads(text), spec)
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidArgumentError(f"{text!r} is not a {spec} value: {exc}") from exc
    try:
        parse_type(spec).java_hash(value)  # the type check (ranges, one-unit chars...)
    except (OverflowError, struct.error) as exc:
        raise InvalidArgumentError(f"{text!r} is not a {spec} value: {exc}") from exc
    return value


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as a float32 column stores it."""
    try:
        rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except (OverflowError, struct.error) as exc:
        raise ValueError(f"{value} is out of the float32 range") from exc
    return rounded


def _from_json(value: Any, spec: str) -> Any:
    head, args = _parts(spec)
    if head == "list" and isinstance(value, list):
        return [_from_json(v, args[0]) for v in value]
    if head == "tuple" and isinstance(value, list) and len(value) == len(args):
        return tuple(_from_json(v, a) for v, a in zip(value, args, strict=True))
    if head == "map" and isinstance(value, dict):
        return {value_from_text(k, args[0]): _from_json(v, args[1]) for k, v in value.items()}
    if head == "bytes" and isinstance(value, str):
        return bytes.fromhex(value)
    if head == "float32" and isinstance(value, int | float) and not isinstance(value, bool):
        return _float32(float(value))
    if head in _SCALARS and not isinstance(value, list | dict):
        return value
    raise ValueError(f"JSON {json.dumps(value)} does not fit {spec}")


def split_spec(spec: str) -> tuple[str, list[str]]:
    """A type spec's head and arguments (a scalar has none).

    ``map<string,list<int64>>`` -> ``("map", ["string", "list<int64>"])``. The spec is
    validated, and aliases normalised.
    """
    return _parts(spec)
