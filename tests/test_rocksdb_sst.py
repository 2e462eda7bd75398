"""SST files written by RocksDB itself (rocksdict's bundled RocksDB 9.8) read back in pure Python.

Every block compression x every checksum type, format versions 2..6, binary / hash / two-level
(partitioned) indexes, small blocks (many blocks, restart intervals, prefix compression, values
over 127 bytes for multi-byte varints), deletions and range deletions over several files: the
live view equals what RocksDB itself iterates, a range read equals its range, and the MANIFEST
lists exactly the SST files left in the directory. A hypothesis test checks format_version 6
files of random operations against a dict model.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdb_writers import rocksdict_options

from formats.flink.read.rocksdb import live_items, live_range, open_sst
from formats.flink.read.rocksdb.compression import COMPRESSION_NAMES
from formats.flink.read.rocksdb.manifest import read_manifest
from statecore.errors import CorruptCheckpointError

COMPRESSION_CODES = {"none": 0, "snappy": 1, "zlib": 2, "bz2": 3, "lz4": 4, "lz4hc": 5, "zstd": 7}


def _write_db(path: Path, options, seed: int, files: int = 3, keys: int = 600):
    """Write ``files`` flushes of puts, deletes and range deletions; RocksDB's own view back."""
    import rocksdict

    rng = random.Random(seed)
    db = rocksdict.Rdict(str(path), options)
    for _ in range(files):
        for _ in range(keys):
            key = b"key/%05d/" % rng.randrange(keys * 2) + b"x" * rng.randrange(4)
            value = (b"value-%d," % rng.randrange(10**6)) * rng.choice((1, 3, 40))
            db[key] = value
        for _ in range(keys // 20):
            db.delete(b"key/%05d/" % rng.randrange(keys * 2))
        low = rng.randrange(keys * 2)
        db.delete_range(b"key/%05d/" % low, b"key/%05d/" % (low + rng.randrange(1, 30)))
        db.flush()
    expected = list(db.items())
    db.close()
    return expected


def _tables(path: Path):
    return [open_sst(p.read_bytes(), p.name) for p in sorted(path.glob("*.sst"))]


def _check_db(path: Path, expected, compression: str | None = None) -> None:
    tables = _tables(path)
    assert len(tables) >= 2
    assert list(live_items(tables)) == expected
    keys = [k for k, _ in expected]
    lo, hi = keys[len(keys) // 3], keys[len(keys) // 2]
    assert list(live_range(tables, lo, hi)) == [kv for kv in expected if lo <= kv[0] < hi]
    assert list(live_range(tables, keys[-1] + b"\x00", b"\xff")) == []
    manifest = next(path.glob("MANIFEST-*"))
    state = read_manifest(manifest.read_bytes(), manifest.name)
    live = {m.file_name for m in state.column_family("default").live_files()}
    assert live == {p.name for p in path.glob("*.sst")}
    for table in tables:
        assert len(list(table.entries())) + len(table.range_tombstones()) == \
            table.properties.num_entries
        if compression is not None:
            used = {table.data[h.offset + h.size] for _, h in table.index_entries()}
            assert COMPRESSION_CODES[compression] in used, (compression, used)
            assert table.properties.compression_name == COMPRESSION_NAMES[
                COMPRESSION_CODES[compression]]


# rocksdict 0.3's RocksDB reports Zlib support but stores its blocks uncompressed: Zlib blocks
# come from Debian's RocksDB in test_rocksdb_merge.py.
@pytest.mark.parametrize("checksum", ["crc32c", "xxhash", "xxhash64", "xxh3"])
@pytest.mark.parametrize("compression", [c for c in COMPRESSION_CODES if c != "zlib"])
def test_every_compression_and_checksum(tmp_path, compression, checksum):
    options = rocksdict_options(compression=compression, checksum=checksum, format_version=5,
                                block_size=1024)
    expected = _write_db(tmp_path / "db", options, seed=hash((compression, checksum)) & 0xFFFF)
    _check_db(tmp_path / "db", expected, compression)


@pytest.mark.parametrize("index", ["binary", "hash", "two_level"])
@pytest.mark.parametrize("format_version", [2, 3, 4, 5, 6])
def test_format_versions_and_index_types(tmp_path, format_version, index):
    options = rocksdict_options(compression="lz4", checksum="xxh3", format_version=format_version,
                                index=index, block_size=512, metadata_block_size=256)
    expected = _write_db(tmp_path / "db", options, seed=format_version * 10 + len(index))
    _check_db(tmp_path / "db", expected)
    if index == "two_level":
        assert all(t.properties.index_partitions and t.properties.index_partitions > 1
                   for t in _tables(tmp_path / "db"))
    if format_version == 6:
        assert all(t.footer.base_context_checksum for t in _tables(tmp_path / "db"))


def test_data_blocks_with_a_hash_index(tmp_path):
    options = rocksdict_options(compression="none", data_block_hash=True, block_size=2048)
    expected = _write_db(tmp_path / "db", options, seed=11)
    _check_db(tmp_path / "db", expected)
    table = _tables(tmp_path / "db")[0]
    _, handle = next(table.index_entries())
    block = table.read_block(handle, "data")
    assert int.from_bytes(block[-4:], "little") >> 31 == 1  # the hash index bit


def test_sst_file_writer_external_file(tmp_path):
    """``SstFileWriter`` output (an external file, version 2, sequence numbers 0)."""
    import rocksdict

    writer = rocksdict.SstFileWriter(rocksdict_options(compression="zstd", checksum="crc32c"))
    writer.open(str(tmp_path / "ext.sst"))
    items = [(b"k%04d" % i, b"v%d" % i) for i in range(500)]
    for key, value in items:
        writer[key] = value
    writer.finish()
    table = open_sst((tmp_path / "ext.sst").read_bytes(), "ext.sst")
    assert table.properties.external_sst_file_version == 2
    assert [(k, s, t, v) for k, s, t, v in table.entries()] == [(k, 0, 1, v) for k, v in items]
    ingested = open_sst((tmp_path / "ext.sst").read_bytes(), "ext.sst", largest_seqno=77)
    assert {s for _, s, _, _ in ingested.entries()} == {77}
    assert list(live_items([table])) == items
    # Ingestion with write_global_seqno rewrites the field in place, leaving the properties
    # block's checksum as written (taken with the field at 0): still a valid file.
    at = table.properties.global_seqno_offset
    assert at is not None
    data = (tmp_path / "ext.sst").read_bytes()
    rewritten = open_sst(data[:at] + (77).to_bytes(8, "little") + data[at + 8:], "ext.sst")
    assert {s for _, s, _, _ in rewritten.entries()} == {77}
    broken = bytearray(data)
    broken[at - 3] ^= 1  # elsewhere in the properties block: a real mismatch
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch"):
        open_sst(bytes(broken), "ext.sst")


@pytest.mark.parametrize("index", ["binary", "two_level"])
def test_a_lookup_reads_only_the_blocks_it_needs(tmp_path, index, monkeypatch):
    options = rocksdict_options(compression="snappy", checksum="xxh3", index=index,
                                block_size=256, metadata_block_size=128)
    expected = _write_db(tmp_path / "db", options, seed=5, files=1, keys=3000)
    (table,) = _tables(tmp_path / "db")
    assert table.properties.num_data_blocks > 100
    reads: list[str] = []
    original = type(table).read_block

    def counting(self, handle, kind, **kwargs):
        reads.append(kind)
        return original(self, handle, kind, **kwargs)

    monkeypatch.setattr(type(table), "read_block", counting)
    for key, value in expected[:: len(expected) // 7]:
        reads.clear()
        assert list(live_range([table], key, key + b"\x00")) == [(key, value)]
        assert reads.count("data") <= 2, reads
        assert reads.count("index partition") <= (2 if index == "two_level" else 0), reads
        assert len(reads) <= 5, reads


def test_package_api_is_pinned():
    import formats.flink.read.rocksdb as rocksdb

    assert set(rocksdb.__all__) == {
        "RangeTombstone", "SstFile", "TableProperties", "ValueType", "has_block_based_magic",
        "live_items", "live_range", "open_sst"}
    for name in rocksdb.__all__:
        assert getattr(rocksdb, name) is not None


# -- hypothesis: RocksDB 9.8 (format_version 6) against a dict model ---------------------------

MODEL_KEYS = [b"k%02d" % i for i in range(10)]
_key = st.sampled_from(MODEL_KEYS)
_operation = st.one_of(
    st.tuples(st.just("put"), _key, st.binary(max_size=300)),
    st.tuples(st.just("delete"), _key),
    st.tuples(_key, _key).map(lambda ks: ("delete_range", min(ks), max(ks))),
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(_operation, min_size=1, max_size=12), min_size=1, max_size=5),
       compression=st.sampled_from(["none", "snappy", "lz4", "zstd"]),
       checksum=st.sampled_from(["crc32c", "xxhash", "xxhash64", "xxh3"]))
def test_format_version_6_live_view_equals_the_model(tmp_path_factory, batches, compression,
                                                      checksum):
    import rocksdict

    path = tmp_path_factory.mktemp("db")
    db = rocksdict.Rdict(str(path), rocksdict_options(
        compression=compression, checksum=checksum, format_version=6, block_size=64))
    model: dict[bytes, bytes] = {}
    for batch in batches:
        for op, *args in batch:
            if op == "put":
                db[args[0]] = args[1]
                model[args[0]] = args[1]
            elif op == "delete":
                db.delete(args[0])
                model.pop(args[0], None)
            else:
                db.delete_range(args[0], args[1])
                for key in [k for k in model if args[0] <= k < args[1]]:
                    del model[key]
        db.flush()
    db.close()
    tables = _tables(path)
    assert list(live_items(tables)) == sorted(model.items())
