"""The MANIFEST of a RocksDB database: its log records, version edits and the live files.

Port of ``log::Reader`` (``db/log_reader.cc``, ``db/log_format.h``), ``VersionEdit::DecodeFrom``
(``db/version_edit.cc``, ``db/wal_edit.cc``) and the replay of ``VersionEditHandler``
(``db/version_edit_handler.cc``) reduced to the file set.

**Log format.** The file is a sequence of 32 KiB blocks; a block's last < 7 bytes are zero
filler. A physical record is ``crc: uint32LE`` (masked CRC-32C of the type byte, the log number
if any, and the payload), ``length: uint16LE``, ``type: uint8``, then for the recyclable types
(5..8) a ``log_number: uint32LE``, then ``length`` payload bytes, never crossing a block. Types
1/5 ``FULL``, 2/6 ``FIRST``, 3/7 ``MIDDLE``, 4/8 ``LAST`` assemble a logical record; a
recyclable record of another log number ends the log (a recycled file's old tail); type 0 with
length 0 is preallocated space (the rest of the block is skipped). Unlike RocksDB's crash
recovery, a record cut off by the end of the file is corruption: a checkpoint's MANIFEST is a
complete copy.

**Version edits.** Each logical record is a ``VersionEdit``: ``varint32`` tags, each followed by
its field: 1 comparator (length-prefixed), 2 log number, 3 next file number, 4 last sequence,
9 previous log number, 10 min log number to keep (varint64s), 5 compact cursor (level, internal
key), 6 deleted file (level ``varint32``, number ``varint64``), 7/100/102/103 new file (level,
number, [path id,] size, smallest and largest internal keys length-prefixed, [smallest and
largest seqno]; ``kNewFile4`` then custom fields ``varint32 tag`` + length-prefixed value until
tag 1, an unknown tag with bit 6 set being unsupported), 200 column family id, 201 column family
add (name), 202 column family drop, 203 max column family, 300 atomic group (remaining
entries); tags with bit 13 set (``kTagSafeIgnoreMask``) are length-prefixed and skipped unless
known (DB id, WAL additions and deletions, ...). Blob files (BlobDB) are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import google_crc32c

from formats.flink.read.rocksdb.checksums import crc32c_unmask
from formats.flink.read.rocksdb.coding import (
    U32,
    Buffer,
    corrupt,
    get_length_prefixed,
    get_varint32,
    get_varint64,
)
from statecore.errors import UnsupportedFormatError

__all__ = [
    "ColumnFamily",
    "FileMetadata",
    "Manifest",
    "VersionEdit",
    "decode_version_edit",
    "read_log_records",
    "read_manifest",
]

BLOCK_SIZE = 32768
HEADER_SIZE = 7
RECYCLABLE_HEADER_SIZE = 11
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_RECYCLABLE_OFFSET = 4  # types 5..8 are 1..4 of a recycled log
_SET_COMPRESSION = 9
_UDT_SIZE, _RECYCLABLE_UDT_SIZE = 10, 11
_SAFE_IGNORE_RECORD_MASK = 1 << 7

_TAG_SAFE_IGNORE_MASK = 1 << 13
_DB_ID = _TAG_SAFE_IGNORE_MASK + 1
_BLOB_TAGS = {400, 401, _TAG_SAFE_IGNORE_MASK + 2, _TAG_SAFE_IGNORE_MASK + 3}
_WAL_ADDITION = _TAG_SAFE_IGNORE_MASK + 4
_WAL_DELETION = _TAG_SAFE_IGNORE_MASK + 5
_CUSTOM_TAG_NON_SAFE_IGNORE_MASK = 1 << 6
_PATH_ID_TAG = _CUSTOM_TAG_NON_SAFE_IGNORE_MASK + 1


def read_log_records(data: Buffer, name: str, log_number: int | None = None) -> Iterator[bytes]:
    """The logical records of a RocksDB log file (``log::Reader::ReadRecord``), in order.

    ``log_number`` is the file's number (``MANIFEST-000005`` -> 5), needed only to tell old
    recycled records; ``None`` takes the first recyclable record's.
    """
    size = len(data)
    pos = 0
    fragments: list[bytes] | None = None
    while pos < size:
        left_in_block = BLOCK_SIZE - pos % BLOCK_SIZE
        if left_in_block < HEADER_SIZE:
            pos += left_in_block  # block trailer filler
            continue
        if size - pos < HEADER_SIZE:
            raise corrupt(name, f"log record header at byte {pos} cut off by the end of the file")
        length = data[pos + 4] | data[pos + 5] << 8
        record_type = data[pos + 6]
        header = HEADER_SIZE
        recyclable = _RECYCLABLE_OFFSET < record_type <= _LAST + _RECYCLABLE_OFFSET or \
            record_type == _RECYCLABLE_UDT_SIZE
        if recyclable:
            header = RECYCLABLE_HEADER_SIZE
        if record_type == 0 and length == 0:
            pos += left_in_block  # preallocated, never written
            continue
        end = pos + header + length
        if header + length > left_in_block or end > size:
            raise corrupt(name, f"log record at byte {pos} of {length} bytes runs past its block "
                                f"or the file")
        expected = crc32c_unmask(U32.unpack_from(data, pos)[0])
        if google_crc32c.value(bytes(data[pos + 6:end])) != expected:
            raise corrupt(name, f"log record at byte {pos}: checksum mismatch")
        payload = bytes(data[pos + header:end])
        if recyclable:
            number = U32.unpack_from(data, pos + 7)[0]
            if log_number is None:
                log_number = number
            elif number != log_number & 0xFFFFFFFF:
                break  # a record of the file's previous life: the end of this log
        pos = end
        kind = record_type - _RECYCLABLE_OFFSET if recyclable and record_type <= 8 else record_type
        if kind == _FULL:
            if fragments is not None:
                raise corrupt(name, f"log record at byte {pos}: full record inside a fragmented "
                                    "one")
            yield payload
        elif kind == _FIRST:
            if fragments is not None:
                raise corrupt(name, f"log record at byte {pos}: first fragment inside another")
            fragments = [payload]
        elif kind == _MIDDLE or kind == _LAST:
            if fragments is None:
                raise corrupt(name, f"log record at byte {pos}: fragment without a first one")
            fragments.append(payload)
            if kind == _LAST:
                yield b"".join(fragments)
                fragments = None
        elif kind == _SET_COMPRESSION:
            raise UnsupportedFormatError(f"{name}: compressed log records are not supported")
        elif kind in (_UDT_SIZE, _RECYCLABLE_UDT_SIZE) or kind & _SAFE_IGNORE_RECORD_MASK:
            continue  # metadata records of WALs
        else:
            raise corrupt(name, f"log record at byte {pos}: unknown record type {record_type}")
    if fragments is not None:
        raise corrupt(name, "the log ends inside a fragmented record")


@dataclass(frozen=True, slots=True)
class FileMetadata:
    """A table file as a version edit adds it (``FileMetaData``).

    ``smallest`` / ``largest`` are internal keys (user key + 8-byte trailer); ``extra`` holds the
    ``kNewFile4`` custom fields by tag (raw bytes), e.g. 13 epoch number, 7 file checksum.
    """

    number: int
    level: int
    file_size: int
    smallest: bytes
    largest: bytes
    smallest_seqno: int
    largest_seqno: int
    path_id: int = 0
    extra: tuple[tuple[int, bytes], ...] = ()

    @property
    def file_name(self) -> str:
        """``MakeTableFileName``: the number, zero-padded to 6 digits, and ``.sst``."""
        return f"{self.number:06d}.sst"

    @property
    def smallest_user_key(self) -> bytes:
        return self.smallest[:-8]

    @property
    def largest_user_key(self) -> bytes:
        return self.largest[:-8]


@dataclass
class VersionEdit:
    """One decoded ``VersionEdit``; ``None`` for fields it does not set."""

    comparator: str | None = None
    db_id: str | None = None
    log_number: int | None = None
    prev_log_number: int | None = None
    next_file_number: int | None = None
    last_sequence: int | None = None
    min_log_number_to_keep: int | None = None
    max_column_family: int | None = None
    column_family: int = 0
    column_family_add: str | None = None
    column_family_drop: bool = False
    remaining_in_atomic_group: int | None = None
    new_files: list[FileMetadata] = field(default_factory=list)
    deleted_files: list[tuple[int, int]] = field(default_factory=list)


def decode_version_edit(record: bytes, name: str) -> VersionEdit:
    """``VersionEdit::DecodeFrom`` of one logical log record."""
    edit = VersionEdit()
    pos, limit = 0, len(record)
    while pos < limit:
        tag, pos = get_varint32(record, pos, limit, name)
        if tag == 1:
            raw, pos = get_length_prefixed(record, pos, limit, name)
            edit.comparator = raw.decode("utf-8", "replace")
        elif tag == _DB_ID:
            raw, pos = get_length_prefixed(record, pos, limit, name)
            edit.db_id = raw.decode("utf-8", "replace")
        elif tag in (2, 3, 4, 9, 10):
            value, pos = get_varint64(record, pos, limit, name)
            attribute = {2: "log_number", 3: "next_file_number", 4: "last_sequence",
                         9: "prev_log_number", 10: "min_log_number_to_keep"}[tag]
            setattr(edit, attribute, value)
        elif tag == 5:  # compact cursor
            _, pos = get_varint32(record, pos, limit, name)
            _, pos = get_length_prefixed(record, pos, limit, name)
        elif tag == 6:
            level, pos = get_varint32(record, pos, limit, name)
            number, pos = get_varint64(record, pos, limit, name)
            edit.deleted_files.append((level, number))
        elif tag in (7, 100, 102, 103):
            new_file, pos = _decode_new_file(tag, record, pos, limit, name)
            edit.new_files.append(new_file)
        elif tag == 200:
            edit.column_family, pos = get_varint32(record, pos, limit, name)
        elif tag == 201:
            raw, pos = get_length_prefixed(record, pos, limit, name)
            edit.column_family_add = raw.decode("utf-8", "replace")
        elif tag == 202:
            edit.column_family_drop = True
        elif tag == 203:
            edit.max_column_family, pos = get_varint32(record, pos, limit, name)
        elif tag == 300:
            edit.remaining_in_atomic_group, pos = get_varint32(record, pos, limit, name)
        elif tag in _BLOB_TAGS:
            raise UnsupportedFormatError(f"{name}: the MANIFEST records blob files (BlobDB), "
                                         f"which are not supported")
        elif tag == _WAL_ADDITION:
            _, pos = get_varint64(record, pos, limit, name)
            while True:
                wal_tag, pos = get_varint32(record, pos, limit, name)
                if wal_tag == 1:
                    break
                if wal_tag != 2:
                    raise corrupt(name, f"WalAddition: unknown tag {wal_tag}")
                _, pos = get_varint64(record, pos, limit, name)
        elif tag == _WAL_DELETION:
            _, pos = get_varint64(record, pos, limit, name)
        elif tag & _TAG_SAFE_IGNORE_MASK:
            _, pos = get_length_prefixed(record, pos, limit, name)
        else:
            raise corrupt(name, f"version edit: unknown tag {tag}")
    return edit


def _decode_new_file(tag: int, record: bytes, pos: int, limit: int,
                     name: str) -> tuple[FileMetadata, int]:
    level, pos = get_varint32(record, pos, limit, name)
    number, pos = get_varint64(record, pos, limit, name)
    path_id = 0
    if tag == 102:
        path_id, pos = get_varint32(record, pos, limit, name)
    file_size, pos = get_varint64(record, pos, limit, name)
    smallest, pos = get_length_prefixed(record, pos, limit, name)
    largest, pos = get_length_prefixed(record, pos, limit, name)
    if len(smallest) < 8 or len(largest) < 8:
        raise corrupt(name, f"new file {number}: bound shorter than an internal key")
    smallest_seqno, largest_seqno = 0, (1 << 56) - 1
    if tag != 7:
        smallest_seqno, pos = get_varint64(record, pos, limit, name)
        largest_seqno, pos = get_varint64(record, pos, limit, name)
    extra: list[tuple[int, bytes]] = []
    if tag == 103:
        while True:
            custom, pos = get_varint32(record, pos, limit, name)
            if custom == 1:
                break
            value, pos = get_length_prefixed(record, pos, limit, name)
            if custom == _PATH_ID_TAG:
                if len(value) != 1 or value[0] > 3:
                    raise corrupt(name, f"new file {number}: bad path id")
                path_id = value[0]
            elif custom & _CUSTOM_TAG_NON_SAFE_IGNORE_MASK:
                raise UnsupportedFormatError(f"{name}: new file {number} has custom field "
                                             f"{custom}, which must be understood")
            else:
                extra.append((custom, value))
    return FileMetadata(number, level, file_size, smallest, largest, smallest_seqno,
                        largest_seqno, path_id, tuple(extra)), pos


@dataclass
class ColumnFamily:
    """A live column family: its id, name, comparator and live files by level."""

    id: int
    name: str
    comparator: str | None = None
    files: dict[int, dict[int, FileMetadata]] = field(default_factory=dict)

    def levels(self) -> dict[int, list[FileMetadata]]:
        """Live files per level (levels in order, files by smallest key then number)."""
        return {level: sorted(files.values(), key=lambda f: (f.smallest, f.number))
                for level, files in sorted(self.files.items()) if files}

    def live_files(self) -> list[FileMetadata]:
        return [f for files in self.levels().values() for f in files]


@dataclass
class Manifest:
    """The state a MANIFEST replays to: live column families (by id) and the last counters.

    The counters are the last values the edits record; RocksDB's recovered ``VersionSet``
    reserves one more file number (``next_file_number + 1``, what ``ldb manifest_dump`` prints).
    """

    column_families: dict[int, ColumnFamily]
    last_sequence: int | None = None
    next_file_number: int | None = None
    log_number: int | None = None
    db_id: str | None = None
    edits: int = 0

    def column_family(self, name: str) -> ColumnFamily:
        for family in self.column_families.values():
            if family.name == name:
                return family
        raise KeyError(name)


def read_manifest(data: Buffer, name: str, log_number: int | None = None) -> Manifest:
    """Replay every version edit of a MANIFEST into the live files per column family and level.

    Edits of an atomic group apply together once the group is complete (an incomplete group at
    the end is dropped, as RocksDB does). A file added twice, a deletion of a file that is not
    live, or an edit of an unknown column family raises
    :class:`~statecore.errors.CorruptCheckpointError`.
    """
    manifest = Manifest({0: ColumnFamily(0, "default")})
    group: list[VersionEdit] = []
    for record in read_log_records(data, name, log_number):
        edit = decode_version_edit(record, name)
        manifest.edits += 1
        if edit.remaining_in_atomic_group is not None:
            group.append(edit)
            if edit.remaining_in_atomic_group == 0:
                for grouped in group:
                    _apply(manifest, grouped, name)
                group = []
            continue
        if group:
            raise corrupt(name, "an atomic group is interrupted by an edit outside it")
        _apply(manifest, edit, name)
    return manifest


def _apply(manifest: Manifest, edit: VersionEdit, name: str) -> None:
    families = manifest.column_families
    if edit.log_number is not None:
        manifest.log_number = edit.log_number
    if edit.next_file_number is not None:
        manifest.next_file_number = edit.next_file_number
    if edit.last_sequence is not None:
        manifest.last_sequence = edit.last_sequence
    if edit.db_id is not None:
        manifest.db_id = edit.db_id
    cf = edit.column_family
    if edit.column_family_add is not None:
        if cf in families:
            raise corrupt(name, f"column family {cf} added twice")
        families[cf] = ColumnFamily(cf, edit.column_family_add)
    family = families.get(cf)
    if family is None:
        raise corrupt(name, f"version edit of unknown column family {cf}")
    if edit.column_family_drop:
        del families[cf]
        return
    if edit.comparator is not None:
        family.comparator = edit.comparator
    for level, number in edit.deleted_files:
        if number not in family.files.get(level, {}):
            raise corrupt(name, f"file {number} deleted from level {level} of column family "
                                f"{family.name!r} where it is not live")
        del family.files[level][number]
    for new_file in edit.new_files:
        if any(new_file.number in files for files in family.files.values()):
            raise corrupt(name, f"file {new_file.number} added twice to column family "
                                f"{family.name!r}")
        family.files.setdefault(new_file.level, {})[new_file.number] = new_file
