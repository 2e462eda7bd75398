"""The key column in the type ``--key-type`` gives (``statectl build``).

A build keyed by a type other than its key column's has its keys converted as they are read,
so that every key reaching the job is a value of that type (its key group is the Java hash of
that type) and a key that has none is a bad record, named or left out, never a failure in the
middle of a build:

* ``string``: a CSV key column and a JSON Lines key are read as text to begin with (a CSV
  field as written, ``007`` included; a JSON number's text as written:
  :mod:`formats.inputs.json_text`); a Parquet column of numbers or bools is cast by Arrow (an
  integer's decimal digits, a float's shortest form: ``1.0`` as ``1``; ``true``/``false``).
* ``int8`` .. ``int64``, ``float32``, ``float64``: Arrow's safe cast. Text converts when it is
  a decimal number (``12``, ``-7``, ``012``) of the type's range, an integer type takes a
  float only when it is whole; anything else (``x``, ``1.5`` for an int, ``3000000000`` for an
  int32) is a bad record of reason ``key-type``.

Other key types (``bool``, ``bytes``, composite types) are not converted: each key is checked
by the job, as it comes.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["convert_keys", "key_arrow_type", "unconvertible"]

_TARGETS = {"string": pa.string(), "int8": pa.int8(), "int16": pa.int16(),
            "int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
            "float64": pa.float64()}


def _convertible_from(source: pa.DataType) -> bool:
    return bool(pa.types.is_integer(source) or pa.types.is_floating(source)
                or pa.types.is_string(source) or pa.types.is_large_string(source)
                or pa.types.is_boolean(source) or pa.types.is_null(source))


def key_arrow_type(key_type: str | None, column_type: pa.DataType) -> pa.DataType | None:
    """The Arrow type a key column of ``column_type`` is converted to, or ``None`` (as it is).

    ``None`` also where ``key_type`` is not one of those converted (see the module doc), or
    a bool column for a number type.
    """
    target = _TARGETS.get(key_type or "")
    if target is None or column_type == target or not _convertible_from(column_type):
        return None
    if pa.types.is_boolean(column_type) and target != pa.string():
        return None
    return target


def unconvertible(column: pa.Array, target: pa.DataType) -> list[int]:
    """The indices of the values of ``column`` (nulls aside) that do not convert to ``target``.

    One cast of the whole column; only when it fails, value by value.
    """
    try:
        pc.cast(column, target, safe=True)
        return []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    bad = []
    for index, value in enumerate(column.to_pylist()):
        if value is None:
            continue
        try:
            pc.cast(pa.array([value], column.type), target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            bad.append(index)
    return bad


def convert_keys(table: pa.Table, key: str, target: pa.DataType) -> pa.Table:
    """``table`` with its column ``key`` cast to ``target`` (every value converts)."""
    index = table.schema.get_field_index(key)
    converted = pc.cast(table.column(index), target, safe=True)
    return table.set_column(index, pa.field(key, target), converted)
