"""The MANIFEST reader beyond what the real files show: fragmented and recyclable log records,
block trailers, atomic groups, column family add/drop, deleted files, unknown tags.

RocksDB writes MANIFEST edits far below 32 KiB and never recycles a MANIFEST, so the log
framing of those cases comes from a test-only writer (``frame_log``, following
``log::Writer::AddRecord`` of ``db/log_writer.cc``), around version edits RocksDB itself wrote
(a real MANIFEST's records) or encoded here per ``VersionEdit::EncodeTo``.
"""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from rocksdb_fixtures import manifest_files, varint

from formats.flink.read.rocksdb.checksums import crc32c_mask
from formats.flink.read.rocksdb.manifest import (
    BLOCK_SIZE,
    decode_version_edit,
    read_log_records,
    read_manifest,
)
from statecore.errors import CorruptCheckpointError, UnsupportedFormatError


def frame_log(records: list[bytes], *, recyclable: bool = False, log_number: int = 5) -> bytes:
    """``log::Writer::AddRecord`` of each record: fragments within 32 KiB blocks."""
    out = bytearray()
    header_size = 11 if recyclable else 7
    for record in records:
        left = record
        first = True
        while True:
            room = BLOCK_SIZE - len(out) % BLOCK_SIZE
            if room < header_size:
                out += bytes(room)  # trailer filler
                continue
            fragment = left[:room - header_size]
            left = left[len(fragment):]
            kind = (1 if not left else 2) if first else (4 if not left else 3)
            kind += 4 if recyclable else 0
            extra = struct.pack("<I", log_number) if recyclable else b""
            crc = crc32c_mask(google_crc32c.value(bytes([kind]) + extra + fragment))
            out += struct.pack("<IHB", crc, len(fragment), kind) + extra + fragment
            first = False
            if not left:
                break
    return bytes(out)


def prefixed(data: bytes) -> bytes:
    return varint(len(data)) + data


def ikey(user_key: bytes, seq: int, kind: int = 1) -> bytes:
    return user_key + struct.pack("<Q", seq << 8 | kind)


def new_file4(level: int, number: int, size: int, smallest: bytes, largest: bytes,
              custom: bytes = b"") -> bytes:
    return (varint(103) + varint(level) + varint(number) + varint(size) + prefixed(smallest)
            + prefixed(largest) + varint(1) + varint(9) + custom + varint(1))


REAL = manifest_files()[0].read_bytes()
REAL_RECORDS = list(read_log_records(REAL, "real"))


def test_fragmented_records_across_blocks_with_trailers():
    filler = varint(8192 + 99) + prefixed(b"z" * 70_000)  # a safely ignorable future tag
    records = [REAL_RECORDS[0] + filler, *REAL_RECORDS[1:], filler * 2]
    log = frame_log(records)
    assert len(log) > 4 * BLOCK_SIZE
    assert list(read_log_records(log, "big")) == records
    replayed = read_manifest(log, "big")
    original = read_manifest(REAL, "real")
    assert {c.name: c.levels() for c in replayed.column_families.values()} == \
        {c.name: c.levels() for c in original.column_families.values()}


def test_recyclable_records_and_the_end_of_a_recycled_log():
    log = frame_log(REAL_RECORDS, recyclable=True, log_number=7)
    assert list(read_log_records(log, "r", 7)) == REAL_RECORDS
    assert list(read_log_records(log, "r")) == REAL_RECORDS
    stale = frame_log(REAL_RECORDS[:1], recyclable=True, log_number=3)
    assert list(read_log_records(log + stale, "r", 7)) == REAL_RECORDS  # old tail: the end


def test_preallocated_zeros_end_a_block():
    log = frame_log(REAL_RECORDS[:1])
    padded = log + bytes(BLOCK_SIZE - len(log)) + frame_log(REAL_RECORDS[1:2])
    assert list(read_log_records(padded, "p")) == REAL_RECORDS[:2]


def test_broken_logs_are_corrupt():
    log = frame_log(REAL_RECORDS)
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch"):
        list(read_log_records(log[:10] + bytes([log[10] ^ 1]) + log[11:], "m"))
    with pytest.raises(CorruptCheckpointError, match="runs past"):
        list(read_log_records(log[:-1], "m"))
    big = frame_log([b"x" * 40_000])
    with pytest.raises(CorruptCheckpointError, match="fragment"):
        list(read_log_records(big[BLOCK_SIZE:], "m"))  # a LAST without its FIRST
    with pytest.raises(CorruptCheckpointError, match="ends inside"):
        list(read_log_records(big[:BLOCK_SIZE], "m"))


def test_edits_replay_into_live_files_per_column_family_and_level():
    edits = [
        varint(1) + prefixed(b"leveldb.BytewiseComparator") + varint(2) + varint(4)
        + varint(3) + varint(10) + varint(4) + varint(0),
        varint(200) + varint(1) + varint(201) + prefixed(b"list-state"),
        new_file4(0, 7, 1000, ikey(b"a", 5), ikey(b"m", 9)) + varint(4) + varint(9),
        varint(200) + varint(1) + new_file4(0, 8, 2000, ikey(b"b", 1), ikey(b"c", 2)),
            # an atomic group: file 7 compacted into 9 (level 6), then 8 moved to level 1
        varint(300) + varint(1) + varint(6) + varint(0) + varint(7)
        + new_file4(6, 9, 1500, ikey(b"a", 0), ikey(b"m", 0)),
        varint(300) + varint(0) + varint(200) + varint(1) + varint(6) + varint(0) + varint(8)
        + new_file4(1, 8, 2000, ikey(b"b", 1), ikey(b"c", 2)),
        varint(200) + varint(2) + varint(201) + prefixed(b"dropped"),
        varint(200) + varint(2) + varint(202),
        varint(8192 + 50) + prefixed(b"future and ignorable"),
    ]
    manifest = read_manifest(frame_log(edits), "MANIFEST-000004")
    assert sorted(c.name for c in manifest.column_families.values()) == ["default", "list-state"]
    default = manifest.column_family("default")
    assert default.comparator == "leveldb.BytewiseComparator"
    assert {level: [f.file_name for f in files] for level, files in default.levels().items()} \
        == {6: ["000009.sst"]}
    assert [(f.level, f.number) for f in manifest.column_family("list-state").live_files()] \
        == [(1, 8)]
    assert manifest.last_sequence == 9 and manifest.next_file_number == 10
    incomplete = frame_log(edits[:5])  # the group never completes: dropped, as RocksDB does
    assert read_manifest(incomplete, "m").column_family("default").levels() == \
        {0: read_manifest(frame_log(edits[:3]), "m").column_family("default").live_files()}


@pytest.mark.parametrize(("edit", "error", "message"), [
    (varint(6) + varint(0) + varint(99), CorruptCheckpointError, "not live"),
    (varint(200) + varint(5) + varint(2) + varint(1), CorruptCheckpointError, "unknown column"),
    (varint(77), CorruptCheckpointError, "unknown tag 77"),
    (varint(400) + varint(1), UnsupportedFormatError, "blob files"),
    (new_file4(0, 7, 1, ikey(b"a", 1), ikey(b"b", 1), custom=varint(64 + 9) + prefixed(b"x")),
     UnsupportedFormatError, "must be understood"),
    (varint(2) + b"\xff" * 11, CorruptCheckpointError, "varint64"),
    (varint(1) + varint(100) + b"short", CorruptCheckpointError, "runs past"),
])
def test_bad_edits(edit, error, message):
    with pytest.raises(error, match=message):
        read_manifest(frame_log([edit]), "MANIFEST-bad")


def test_new_file_custom_fields_are_kept():
    edit = decode_version_edit(new_file4(1, 12, 3, ikey(b"a", 1), ikey(b"b", 2),
                                         custom=varint(13) + prefixed(varint(42))), "m")
    (meta,) = edit.new_files
    assert (meta.level, meta.number, meta.file_size, meta.smallest_seqno) == (1, 12, 3, 1)
    assert meta.smallest_user_key == b"a" and meta.largest_user_key == b"b"
    assert dict(meta.extra) == {13: varint(42)}
