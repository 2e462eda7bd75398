"""Data bytes of every row of an Arrow array, vectorised: what ``inspect --top`` ranks keys by.

A row's size is the bytes its values take in Arrow's columnar layout, which is also what
statectl's format stores before Parquet's encoding and compression:

* fixed-width values (integers, floats) their width, ``bool`` 1 byte;
* strings and binaries their length in bytes plus a 4-byte offset;
* lists and maps the sum of their elements plus a 4-byte offset; structs (tuples) the sum of
  their fields;
* a null 0 bytes.

It is not Flink's serialized size (Flink writes a string's length as a variable-length int and
its characters as modified UTF-8, for example) but ranks keys the same way and is computed
over whole columns without decoding a row into Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["row_sizes"]

#: Bytes of an offset of a variable-size value (string, binary, list, map).
OFFSET_BYTES = 4


def row_sizes(values: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, Any]:
    """Data bytes of each row of ``values`` (see the module doc), as an int64 array."""
    if isinstance(values, pa.ChunkedArray):
        parts = [row_sizes(chunk) for chunk in values.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    kind = values.type
    valid = (np.ones(len(values), dtype=bool) if values.null_count == 0
             else np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(
            kind) or pa.types.is_large_binary(kind):
        lengths = pc.binary_length(values).fill_null(0)
        sizes = np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64) + OFFSET_BYTES
    elif pa.types.is_boolean(kind):
        sizes = np.ones(len(values), dtype=np.int64)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        # offsets index the (unsliced) child array; cumulative sums give each list's total
        offsets = np.asarray(values.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        child = row_sizes(values.values)
        cumulative = np.concatenate([[0], np.cumsum(child, dtype=np.int64)])
        sizes = cumulative[offsets[1:]] - cumulative[offsets[:-1]] + OFFSET_BYTES
    elif pa.types.is_struct(kind):
        sizes = np.zeros(len(values), dtype=np.int64)
        for field in values.flatten():
            sizes += row_sizes(field)
    elif pa.types.is_null(kind):
        sizes = np.zeros(len(values), dtype=np.int64)
    else:
        sizes = np.full(len(values), kind.bit_width // 8, dtype=np.int64)
    return np.where(valid, sizes, 0)
