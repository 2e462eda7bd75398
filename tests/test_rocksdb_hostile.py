"""Hostile RocksDB files: truncations and bit flips of the real SST and MANIFEST files, and
hand-made malformed blocks, footers and payloads.

Each case must end in a :class:`~statecore.errors.StatectlError` (or read fine), never a raw
exception, within a bounded time. Cases are seed-deterministic. Bit flips are read twice: with
checksum verification (the flip is nearly always caught there) and without it, so that every
decoder behind the checksums sees the damaged bytes too.
"""

from __future__ import annotations

import random
import struct
import time

import pytest
from rocksdb_fixtures import manifest_files, relative_id, sst_files

from formats.flink.read.rocksdb import live_items, open_sst
from formats.flink.read.rocksdb.block import IndexBlock, block_layout, decode_data_block
from formats.flink.read.rocksdb.checksums import ChecksumType, compute_builtin_checksum
from formats.flink.read.rocksdb.coding import get_varint32, get_varint64
from formats.flink.read.rocksdb.compression import MAX_BLOCK_SIZE, decompress_block
from formats.flink.read.rocksdb.footer import decode_footer
from formats.flink.read.rocksdb.manifest import read_manifest
from statecore.errors import CorruptCheckpointError, StatectlError, UnsupportedFormatError

SECONDS_PER_CASE = 2.0
SSTS = sst_files()
MANIFESTS = manifest_files()


def _read_sst(data: bytes, verify: bool) -> None:
    table = open_sst(data, "fuzzed.sst", verify_checksums=verify)
    for _ in table.entries():
        pass
    table.range_tombstones()
    for _ in live_items([table]):
        pass
    keys = [k for k, _, _, _ in table.entries()]
    if keys:
        list(table.entries(keys[len(keys) // 2], keys[-1]))


def _read_manifest(data: bytes, verify: bool) -> None:
    read_manifest(data, "MANIFEST-fuzzed")


def _mutations(data: bytes, seed: int, flips: int, cuts: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(cuts):
        cut = rng.randrange(len(data))
        cases.append((f"truncated to {cut}", data[:cut]))
    tail = max(0, len(data) - 128)  # footers and the last (meta) blocks deserve more flips
    for i in range(flips):
        position = rng.randrange(tail if i % 2 and tail else 0, len(data))
        flipped = bytearray(data)
        flipped[position] ^= 1 << rng.randrange(8)
        cases.append((f"bit flip at {position}", bytes(flipped)))
    return cases


def _check_cases(reader, data: bytes, seed: int, flips: int, cuts: int, label: str) -> int:
    count = 0
    for verify in (True, False):
        for what, mutated in _mutations(data, seed, flips, cuts):
            started = time.perf_counter()
            try:
                reader(mutated, verify)
            except StatectlError:
                pass
            except Exception as exc:  # pragma: no cover - the failure this test exists for
                pytest.fail(f"{label}, {what}, verify={verify}: raw {type(exc).__name__}: {exc}")
            elapsed = time.perf_counter() - started
            assert elapsed < SECONDS_PER_CASE, f"{label}, {what}: {elapsed:.1f}s"
            count += 1
    return count


def test_fuzzed_real_sst_files_fail_cleanly():
    total = 0
    for number, path in enumerate(SSTS):
        total += _check_cases(_read_sst, path.read_bytes(), seed=number, flips=24, cuts=8,
                              label=relative_id(path))
    assert total >= 1000 or total == 64 * len(SSTS)


def test_fuzzed_real_manifests_fail_cleanly():
    total = 0
    for number, path in enumerate(MANIFESTS):
        total += _check_cases(_read_manifest, path.read_bytes(), seed=1000 + number, flips=30,
                              cuts=10, label=relative_id(path))
    assert total == 80 * len(MANIFESTS)


def test_every_truncation_of_one_sst_fails_cleanly():
    data = min((p.read_bytes() for p in SSTS), key=len)
    for cut in range(len(data)):
        with pytest.raises(StatectlError):
            _read_sst(data[:cut], True)


# -- hand-made hostile inputs --------------------------------------------------------------


def _with_footer_field(data: bytes, offset_from_end: int, value: bytes) -> bytes:
    at = len(data) - offset_from_end
    return data[:at] + value + data[at + len(value):]


def test_footer_magic_and_versions_are_refused_clearly():
    data = SSTS[0].read_bytes()
    legacy = _with_footer_field(data, 8, struct.pack("<Q", 0xDB4775248B80FB57))
    with pytest.raises(UnsupportedFormatError, match="legacy"):
        decode_footer(legacy, "old.sst")
    plain = _with_footer_field(data, 8, struct.pack("<Q", 0x8242229663BF9564))
    with pytest.raises(UnsupportedFormatError, match="plain table"):
        decode_footer(plain, "plain.sst")
    with pytest.raises(CorruptCheckpointError, match="x.sst: not an SST file"):
        decode_footer(_with_footer_field(data, 8, b"\x00" * 8), "x.sst")
    for version in (0, 1, 7, 2**31):
        bumped = _with_footer_field(data, 12, struct.pack("<I", version))
        with pytest.raises(UnsupportedFormatError, match=f"format_version {version} "):
            decode_footer(bumped, "v.sst")
    unknown_checksum = data[:-53] + b"\x09" + data[-52:]
    with pytest.raises(UnsupportedFormatError, match="checksum type 9"):
        decode_footer(unknown_checksum, "c.sst")
    with pytest.raises(CorruptCheckpointError, match="too short"):
        decode_footer(data[-20:], "short.sst")


def test_varints_are_bounded():
    with pytest.raises(CorruptCheckpointError, match="longer than 5 bytes"):
        get_varint32(b"\xff" * 9 + b"\x01", 0, 10, "f")
    with pytest.raises(CorruptCheckpointError, match="over 32 bits"):
        get_varint32(b"\xff\xff\xff\xff\x7f", 0, 5, "f")
    with pytest.raises(CorruptCheckpointError, match="longer than 10 bytes"):
        get_varint64(b"\xff" * 20, 0, 20, "f")
    with pytest.raises(CorruptCheckpointError, match="truncated"):
        get_varint64(b"\xff\xff", 0, 2, "f")
    assert get_varint64(b"\xff" * 9 + b"\x01", 0, 10, "f") == (2**64 - 1, 10)


def _block(entries: bytes, restarts: list[int], packed: int | None = None) -> bytes:
    trailer = b"".join(struct.pack("<I", r) for r in restarts)
    return entries + trailer + struct.pack("<I", len(restarts) if packed is None else packed)


def _ikey(user_key: bytes, seq: int = 1, kind: int = 1) -> bytes:
    return user_key + struct.pack("<Q", seq << 8 | kind)


def test_malformed_data_blocks():
    good = bytes([0, 9, 1]) + _ikey(b"a") + b"v"
    assert decode_data_block(_block(good, [0]), "b") == ([b"a"], [257], [b"v"])
    with pytest.raises(CorruptCheckpointError, match="shares 50 bytes"):
        decode_data_block(_block(good + bytes([50, 5, 0]) + b"xxxxx", [0]), "b")
    with pytest.raises(CorruptCheckpointError, match="runs past"):
        decode_data_block(_block(bytes([0, 9, 100]) + _ikey(b"a") + b"v", [0]), "b")
    with pytest.raises(CorruptCheckpointError, match="shorter than 8"):
        decode_data_block(_block(bytes([0, 3, 0]) + b"abc", [0]), "b")
    with pytest.raises(CorruptCheckpointError, match="restart points do not fit"):
        block_layout(_block(good, [0], packed=1000), "b")
    with pytest.raises(CorruptCheckpointError, match="reserved bit"):
        block_layout(_block(good, [0], packed=1 | 1 << 30), "b")
    with pytest.raises(UnsupportedFormatError, match="separate sections"):
        block_layout(_block(good, [0], packed=1 | 1 << 28), "b")
    with pytest.raises(CorruptCheckpointError, match="too small"):
        block_layout(b"\x00\x00", "b")
    with pytest.raises(CorruptCheckpointError, match="varint32"):
        decode_data_block(_block(bytes([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), [0]), "b")


def _index(*entries: tuple[bytes, int, int], restarts: list[int] | None = None) -> bytes:
    body = b""
    offsets = []
    for key, offset, size in entries:
        offsets.append(len(body))
        value = bytes([offset]) + bytes([size])
        body += bytes([0, len(key), len(value)]) + key + value
    return _block(body, offsets if restarts is None else restarts)


def test_malformed_index_blocks():
    def index(block: bytes) -> IndexBlock:
        return IndexBlock(block, "i", value_delta_encoded=False, key_includes_seq=False,
                          have_first_key=False)

    ok = index(_index((b"b", 0, 10), (b"d", 15, 10), (b"f", 30, 10)))
    assert [k for k, _ in ok] == [b"b", b"d", b"f"]
    assert [k for k, _ in ok.seek(b"c")] == [b"d", b"f"]
    assert [k for k, _ in ok.seek(b"g")] == []
    with pytest.raises(CorruptCheckpointError, match="out of order"):
        list(index(_index((b"d", 0, 10), (b"b", 15, 10))))
    with pytest.raises(CorruptCheckpointError, match="out of order"):
        list(index(_index((b"b", 15, 10), (b"d", 15, 10))))
    with pytest.raises(CorruptCheckpointError, match="restart point"):
        list(index(_index((b"b", 0, 10), restarts=[500])).seek(b"a"))


def test_decompression_bombs_and_bad_payloads():
    huge = MAX_BLOCK_SIZE + 1
    varint = bytearray()
    value = huge
    while value >= 128:
        varint.append(value & 0x7F | 0x80)
        value >>= 7
    varint.append(value)
    for kind in (0x01, 0x02, 0x03, 0x04, 0x05, 0x07):
        with pytest.raises(CorruptCheckpointError, match="over the limit"):
            decompress_block(kind, bytes(varint) + b"\x00" * 10, "bomb.sst", 0)
    import zlib

    deflate = zlib.compressobj(wbits=-14)
    payload = deflate.compress(b"abc" * 100) + deflate.flush()
    assert decompress_block(0x02, bytes([0xAC, 0x02]) + payload, "z.sst", 0) == b"abc" * 100
    with pytest.raises(CorruptCheckpointError, match="declared 299 bytes"):
        decompress_block(0x02, bytes([0xAB, 0x02]) + payload, "z.sst", 0)
    for kind in (0x01, 0x02, 0x03, 0x04, 0x07):
        with pytest.raises(CorruptCheckpointError, match="z.sst"):
            decompress_block(kind, b"\x20" + b"\xff" * 40, "z.sst", 0)
    for kind, name in ((0x06, "Xpress"), (0x80, "type 0x80"), (0x42, "type 0x42")):
        with pytest.raises(UnsupportedFormatError, match=name):
            decompress_block(kind, b"\x00", "z.sst", 0)


def test_lz4_payload_shorter_than_declared_is_corrupt():
    import pyarrow as pa

    raw = pa.compress(b"hello world " * 20, codec="lz4_raw", asbytes=True)
    assert decompress_block(0x04, bytes([240, 1]) + raw, "l.sst", 0) == b"hello world " * 20
    with pytest.raises(CorruptCheckpointError, match="shorter than its declared"):
        decompress_block(0x04, bytes([241, 1]) + raw, "l.sst", 0)


def test_known_checksum_vectors():
    # CRC-32C("123456789") = 0xe3069283 (RFC 3720), masked as crc32c::Mask does.
    crc = 0xE3069283
    assert compute_builtin_checksum(ChecksumType.CRC32C, b"123456789") == \
        ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    assert compute_builtin_checksum(ChecksumType.XXHASH, b"") == 0x02CC5D05  # XXH32("", 0)
    assert compute_builtin_checksum(ChecksumType.XXH3, b"") == 0
    assert compute_builtin_checksum(ChecksumType.NO_CHECKSUM, b"abc") == 0


def test_errors_name_the_file():
    data = bytearray(SSTS[0].read_bytes())
    data[len(data) // 3] ^= 0xFF
    with pytest.raises(CorruptCheckpointError, match="^the-file-name"):
        table = open_sst(bytes(data), "the-file-name")
        list(table.entries())


def test_fuzzed_uncompressed_partitioned_table_fails_cleanly(tmp_path):
    """Flips in plain (uncompressed) blocks reach the block, index and range-deletion decoders
    directly: a table by Debian's RocksDB with a partitioned index, merges and tombstones."""
    from rocksdb_writers import DebianRocksDB

    with DebianRocksDB(tmp_path / "db", compression="none", index="two_level",
                       block_size=128) as db:
        db.write([("put", b"key-%03d" % i, b"v" * (i % 150)) for i in range(200)]
                 + [("merge", b"key-%03d" % i, b"m") for i in range(0, 200, 7)]
                 + [("delete_range", b"key-050", b"key-060"), ("delete", b"key-100")])
        db.flush()
    (path,) = (tmp_path / "db").glob("*.sst")
    data = path.read_bytes()
    table = open_sst(data, path.name)
    assert table.properties.index_partitions and table.range_tombstones()
    count = _check_cases(_read_sst, data, seed=7, flips=1500, cuts=100, label=path.name)
    assert count == 3200


def test_fuzzed_format_version_6_table_fails_cleanly(tmp_path):
    """Format version 6 (footer checksum, context checksums, index in the metaindex), written by
    RocksDB 9.8 uncompressed with a partitioned index and a range deletion."""
    import rocksdict
    from rocksdb_writers import rocksdict_options

    db = rocksdict.Rdict(str(tmp_path / "db"), rocksdict_options(
        compression="none", format_version=6, index="two_level", block_size=128,
        metadata_block_size=128))
    for i in range(150):
        db[b"key-%03d" % i] = b"v" * (i % 140)
    db.delete_range(b"key-010", b"key-020")
    db.flush()
    db.close()
    (path,) = (tmp_path / "db").glob("*.sst")
    data = path.read_bytes()
    table = open_sst(data, path.name)
    assert table.footer.format_version == 6 and table.properties.index_partitions
    count = _check_cases(_read_sst, data, seed=6, flips=1000, cuts=100, label=path.name)
    assert count == 2200
