"""Real RocksDB writing the synthetic SST files of the tests (never a writer of our own).

Two independent RocksDB builds, so that the reader is checked against RocksDB itself:

* ``rocksdict`` (PyPI, the ``dev`` extra) bundles RocksDB 9.8: every compression, checksum type,
  ``format_version`` 2..6 and index type, puts, deletes and range deletions. It has no merge.
* Debian's ``librocksdb`` (RocksDB 7.8, ``apt-get install -y librocksdb-dev``) through its C API
  with ctypes: merges (with a string-append merge operator named ``StringAppendTESTOperator``,
  as Flink's), single deletions, puts, deletes and range deletions; ``format_version`` 2..5.

A missing library fails the test with what to install; nothing is skipped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
from pathlib import Path
from typing import Any

import pytest

APT_HINT = "apt-get install -y librocksdb-dev  (Debian's RocksDB C library, used through ctypes)"

COMPRESSIONS = {"none": 0, "snappy": 1, "zlib": 2, "bzip2": 3, "lz4": 4, "lz4hc": 5, "zstd": 7}
CHECKSUMS = {"crc32c": 1, "xxhash": 2, "xxhash64": 3, "xxh3": 4}
#: ``BlockBasedTableOptions::IndexType``; 3 is kBinarySearchWithFirstKey.
INDEX_TYPES = {"binary": 0, "hash": 1, "two_level": 2, "first_key": 3}


def rocksdict_options(*, compression: str = "snappy", checksum: str = "xxh3",
                      format_version: int = 5, index: str = "binary", block_size: int = 4096,
                      metadata_block_size: int = 4096, data_block_hash: bool = False) -> Any:
    """rocksdict ``Options`` (raw bytes mode, no auto compaction) for one table configuration."""
    try:
        import rocksdict as rd
    except ImportError:  # pragma: no cover - the dev extra installs it
        pytest.fail("rocksdict is not installed: pip install -e '.[dev]'")
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_disable_auto_compactions(True)
    table = rd.BlockBasedOptions()
    table.set_checksum_type(getattr(rd.ChecksumType, checksum)())
    table.set_format_version(format_version)
    table.set_index_type({"binary": rd.BlockBasedIndexType.binary_search,
                          "hash": rd.BlockBasedIndexType.hash_search,
                          "two_level": rd.BlockBasedIndexType.two_level_index_search}[index]())
    table.set_block_size(block_size)
    table.set_metadata_block_size(metadata_block_size)
    if data_block_hash:  # kDataBlockBinaryAndHash: a hash map after each data block's restarts
        table.set_data_block_index_type(rd.DataBlockIndexType.binary_and_hash())
        table.set_data_block_hash_ratio(0.75)
    opts.set_block_based_table_factory(table)
    if index == "hash":  # the hash index needs a prefix extractor (it adds prefix meta blocks)
        opts.set_prefix_extractor(rd.SliceTransform.create_fixed_prefix(6))
    opts.set_compression_type(getattr(rd.DBCompressionType, compression)())
    return opts


def _load_librocksdb() -> ctypes.CDLL:
    found = ctypes.util.find_library("rocksdb")
    candidates = ([found] if found else []) + sorted(glob.glob("/usr/lib/*/librocksdb.so*"))
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    pytest.fail(f"Debian's RocksDB C library is missing: {APT_HINT}")


_FULL_MERGE = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
    ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_int, ctypes.POINTER(ctypes.c_ubyte), ctypes.POINTER(ctypes.c_size_t))
_PARTIAL_MERGE = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.c_int,
    ctypes.POINTER(ctypes.c_ubyte), ctypes.POINTER(ctypes.c_size_t))
_DELETE_VALUE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_NAME = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_OPERATOR_NAME = ctypes.create_string_buffer(b"StringAppendTESTOperator")


def _malloc_copy(data: bytes) -> int:
    address = _libc.malloc(max(1, len(data)))
    ctypes.memmove(address, data, len(data))
    return int(address)


@_FULL_MERGE
def _full_merge(_state, _key, _key_len, existing, existing_len, operands, operand_lens,  # type: ignore[no-untyped-def]
                count, success, new_len):
    """``StringAppendTESTOperator::FullMergeV2``: base (if any) and operands joined by ','."""
    parts = [] if not existing else [ctypes.string_at(existing, existing_len)]
    parts += [ctypes.string_at(operands[i], operand_lens[i]) for i in range(count)]
    merged = b",".join(parts)
    success[0] = 1
    new_len[0] = len(merged)
    return _malloc_copy(merged)


@_PARTIAL_MERGE
def _partial_merge(_state, _key, _key_len, _operands, _operand_lens, _count, success,  # type: ignore[no-untyped-def]
                   new_len):
    """No partial merge: flushes keep every operand as a merge record of its own."""
    success[0] = 0
    new_len[0] = 0
    return None


@_DELETE_VALUE
def _delete_value(_state, value, _length):  # type: ignore[no-untyped-def]
    _libc.free(value)


@_DESTRUCTOR
def _destructor(_state):  # type: ignore[no-untyped-def]
    return None


@_NAME
def _name(_state):  # type: ignore[no-untyped-def]
    return ctypes.addressof(_OPERATOR_NAME)


class DebianRocksDB:
    """A RocksDB database written through Debian's ``librocksdb`` C API (RocksDB 7.8).

    Auto compactions are off: every :meth:`flush` writes one L0 file; :meth:`compact` compacts
    everything to the bottom level.
    """

    def __init__(self, path: Path, *, compression: str = "snappy", checksum: str = "xxh3",
                 format_version: int = 5, index: str = "binary", block_size: int = 4096) -> None:
        lib = self.lib = _load_librocksdb()
        for name in ("rocksdb_options_create", "rocksdb_block_based_options_create",
                     "rocksdb_writeoptions_create", "rocksdb_flushoptions_create",
                     "rocksdb_mergeoperator_create", "rocksdb_open", "rocksdb_writebatch_create"):
            getattr(lib, name).restype = ctypes.c_void_p
        lib.rocksdb_mergeoperator_create.argtypes = [
            ctypes.c_void_p, _DESTRUCTOR, _FULL_MERGE, _PARTIAL_MERGE, _DELETE_VALUE, _NAME]
        options = lib.rocksdb_options_create()
        lib.rocksdb_options_set_create_if_missing(ctypes.c_void_p(options), ctypes.c_ubyte(1))
        lib.rocksdb_options_set_disable_auto_compactions(ctypes.c_void_p(options), ctypes.c_int(1))
        lib.rocksdb_options_set_compression(ctypes.c_void_p(options),
                                            ctypes.c_int(COMPRESSIONS[compression]))
        self._operator = lib.rocksdb_mergeoperator_create(None, _destructor, _full_merge,
                                                          _partial_merge, _delete_value, _name)
        lib.rocksdb_options_set_merge_operator(ctypes.c_void_p(options),
                                               ctypes.c_void_p(self._operator))
        table = lib.rocksdb_block_based_options_create()
        lib.rocksdb_block_based_options_set_checksum(ctypes.c_void_p(table),
                                                     ctypes.c_char(CHECKSUMS[checksum]))
        lib.rocksdb_block_based_options_set_format_version(ctypes.c_void_p(table),
                                                           ctypes.c_int(format_version))
        lib.rocksdb_block_based_options_set_index_type(ctypes.c_void_p(table),
                                                       ctypes.c_int(INDEX_TYPES[index]))
        lib.rocksdb_block_based_options_set_block_size(ctypes.c_void_p(table),
                                                       ctypes.c_size_t(block_size))
        lib.rocksdb_options_set_block_based_table_factory(ctypes.c_void_p(options),
                                                          ctypes.c_void_p(table))
        error = ctypes.c_char_p()
        self.db = lib.rocksdb_open(ctypes.c_void_p(options), str(path).encode(),
                                   ctypes.byref(error))
        self._check(error)
        self.write_options = lib.rocksdb_writeoptions_create()
        self.path = path

    def _check(self, error: ctypes.c_char_p) -> None:
        if error.value:
            raise RuntimeError(f"librocksdb: {error.value.decode()}")

    def write(self, operations: list[tuple[Any, ...]]) -> None:
        """Apply ``("put", k, v)``, ``("merge", k, v)``, ``("delete", k)``,
        ``("single_delete", k)``, ``("delete_range", start, end)`` atomically, in order."""
        lib = self.lib
        batch = ctypes.c_void_p(lib.rocksdb_writebatch_create())
        for op, *args in operations:
            if op in ("put", "merge"):
                key, value = args
                getattr(lib, f"rocksdb_writebatch_{op}")(batch, key, ctypes.c_size_t(len(key)),
                                                          value, ctypes.c_size_t(len(value)))
            elif op in ("delete", "single_delete"):
                (key,) = args
                name = "rocksdb_writebatch_delete" if op == "delete" else \
                    "rocksdb_writebatch_singledelete"
                getattr(lib, name)(batch, key, ctypes.c_size_t(len(key)))
            else:
                start, end = args
                lib.rocksdb_writebatch_delete_range(batch, start, ctypes.c_size_t(len(start)),
                                                    end, ctypes.c_size_t(len(end)))
        error = ctypes.c_char_p()
        lib.rocksdb_write(ctypes.c_void_p(self.db), ctypes.c_void_p(self.write_options), batch,
                          ctypes.byref(error))
        lib.rocksdb_writebatch_destroy(batch)
        self._check(error)

    def flush(self) -> None:
        error = ctypes.c_char_p()
        options = self.lib.rocksdb_flushoptions_create()
        self.lib.rocksdb_flush(ctypes.c_void_p(self.db), ctypes.c_void_p(options),
                               ctypes.byref(error))
        self._check(error)

    def compact(self) -> None:
        self.lib.rocksdb_compact_range(ctypes.c_void_p(self.db), None, ctypes.c_size_t(0), None,
                                       ctypes.c_size_t(0))

    def close(self) -> None:
        self.lib.rocksdb_close(ctypes.c_void_p(self.db))

    def __enter__(self) -> DebianRocksDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
