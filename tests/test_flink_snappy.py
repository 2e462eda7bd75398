"""Compressed Flink keyed state (issue 8, scope 2): Snappy framing, heap and canonical layouts.

No fixture job enabled ``execution.checkpointing.snapshot-compression``, so these tests compress
real uncompressed keyed streams from the fixtures the way Flink does (reference §7: the header
stays plain with its compression flag set; in the heap format each state block of a key group is
its own Snappy framed stream after the plain key-group id, in the canonical format each key
group's pairs are one framed stream), with new key-group offsets, and check that decoding gives
exactly the entries of the uncompressed original. The framed streams are made here with
pyarrow's raw Snappy codec: stream identifier, compressed (0x00) and uncompressed (0x01) chunks
of at most 64 KiB with a CRC field, padding (0xfe) chunks.
"""

from __future__ import annotations

import random
import struct
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.java.input import DataReader
from formats.flink.read.keyed import (
    DecodedKeyed,
    decode_keyed_stream,
    read_keyed_header,
    unframe_snappy,
)
from formats.flink.read.metadata import FlinkKeyedHandle, parse_metadata
from statecore.errors import CorruptCheckpointError, StatectlError
from tests.flink_fixtures import require_fixtures, snapshots

IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
CHUNK = 65536


def frame(data: bytes, rng: random.Random) -> bytes:
    """``data`` as one Snappy framed stream (as xerial's SnappyFramedOutputStream writes it,
    plus the odd padding chunk a reader must skip)."""
    out = [IDENTIFIER]
    for start in range(0, len(data), CHUNK):
        piece = data[start:start + CHUNK]
        if rng.random() < 0.2:
            out.append(b"\xfe" + struct.pack("<I", 3)[:3] + b"pad")
        crc = b"\x00\x00\x00\x00"  # masked CRC32C; Flink reads without verifying it
        if rng.random() < 0.25:
            body = crc + piece
            out.append(b"\x01" + struct.pack("<I", len(body))[:3] + body)
        else:
            body = crc + pa.compress(piece, codec="snappy", asbytes=True)
            out.append(b"\x00" + struct.pack("<I", len(body))[:3] + body)
    return b"".join(out)


def inline_keyed_streams() -> list[tuple[str, FlinkKeyedHandle, int]]:
    """``(name, handle, max parallelism)`` of every inline keyed stream of the fixtures."""
    out = []
    for fixture_set, snap in snapshots():
        metadata = parse_metadata((fixture_set / snap["path"] / "_metadata").read_bytes())
        for op in metadata.operators:
            for subtask in op.subtasks:
                for handle in subtask.managed_keyed:
                    if handle.stream.kind == "inline" and any(handle.offsets):
                        out.append((f"{fixture_set.name}:{snap['path']}:{op.operator_id}:"
                                    f"{subtask.index}", handle, op.max_parallelism))
    return out


STREAMS = inline_keyed_streams()


def group_ends(offsets: tuple[int, ...], size: int) -> list[int]:
    ends, following = [size] * len(offsets), size
    for i in range(len(offsets) - 1, -1, -1):
        ends[i] = following
        if 0 < offsets[i] < following:
            following = offsets[i]
    return ends


def compress_stream(handle: FlinkKeyedHandle, decoded: DecodedKeyed, rng: random.Random
                    ) -> tuple[bytes, FlinkKeyedHandle]:
    """The stream of ``handle`` re-written compressed, and a handle with the new offsets."""
    data = handle.stream.data
    assert data is not None
    header = read_keyed_header(DataReader(data, "test"))
    names = [s.name for s in header.states]
    # the header, with its compression flag (the boolean after the int version) set
    out = bytearray(data[:4] + b"\x01" + data[5:header.size])
    ends = group_ends(handle.offsets, len(data))
    offsets = []
    for i, offset in enumerate(handle.offsets):
        if offset == 0 and handle.kind == "canonical":
            offsets.append(0)
            continue
        key_group = handle.first_key_group + i
        offsets.append(len(out))
        if handle.kind == "canonical":
            out += frame(data[offset:ends[i]], rng)
            continue
        out += data[offset:offset + 4]  # the key-group id stays plain
        pos = offset + 4
        for _ in names:  # one framed stream per state block
            state_id = struct.unpack_from(">h", data, pos)[0]
            size = decoded.state_key_group_bytes[names[state_id]].get(key_group, 6)
            out += frame(data[pos:pos + size], rng)
            pos += size
        assert pos == ends[i]
    return bytes(out), replace(handle, offsets=tuple(offsets),
                               stream=replace(handle.stream, data=bytes(out), size=len(out)))


def test_fixtures_have_inline_heap_and_canonical_streams() -> None:
    require_fixtures()
    assert {h.kind for _, h, _ in STREAMS} == {"heap", "canonical"}


@pytest.mark.parametrize(("name", "handle", "max_parallelism"), STREAMS,
                         ids=[s[0] for s in STREAMS])
def test_compressed_stream_decodes_like_the_original(name: str, handle: FlinkKeyedHandle,
                                                    max_parallelism: int) -> None:
    assert handle.stream.data is not None
    plain_header, plain = decode_keyed_stream(handle.stream.data, handle, name, max_parallelism)
    data, compressed_handle = compress_stream(handle, plain, random.Random(name))
    header, decoded = decode_keyed_stream(data, compressed_handle, name, max_parallelism)
    assert header.compressed and not plain_header.compressed
    assert decoded.entries == plain.entries
    assert decoded.state_key_group_bytes == plain.state_key_group_bytes

    # damage inside a compressed chunk: a clear error, never another exception
    rng = random.Random(len(data))
    for _ in range(40):
        position = rng.randrange(header.size, len(data))
        damaged = bytearray(data)
        damaged[position] ^= 1 << rng.randrange(8)
        try:
            decode_keyed_stream(bytes(damaged), compressed_handle, name, max_parallelism)
        except StatectlError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3 * CHUNK // 2), st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_unframe_inverts_framing(data: bytes, seed: int, streams: int) -> None:
    """Several framed streams back to back (the heap format's blocks) inflate to the data."""
    rng = random.Random(seed)
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(streams - 1))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert unframe_snappy(b"".join(frame(p, rng) for p in pieces), "test") == data


@pytest.mark.parametrize("framed", [
    b"\xff\x06\x00\x00sNaPpX",  # a wrong stream identifier
    b"\xff\x06\x00",  # a truncated chunk header
    IDENTIFIER + b"\x00\x10\x00\x00abcd",  # a chunk longer than the data
    IDENTIFIER + b"\x00\x02\x00\x00ab",  # no room for the CRC
    IDENTIFIER + b"\x05\x04\x00\x00abcd",  # a reserved unskippable chunk type
    IDENTIFIER + b"\x00\x09\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f",  # 4 GiB claimed
    IDENTIFIER + b"\x00\x08\x00\x00\x00\x00\x00\x00\x0a\x00\x61\x62",  # bad Snappy data
])
def test_bad_framing_is_a_clear_error(framed: bytes) -> None:
    with pytest.raises(CorruptCheckpointError):
        unframe_snappy(framed, "test")
