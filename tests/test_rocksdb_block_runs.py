"""Runs of data blocks decoded at once
(:func:`formats.flink.read.rocksdb.block.decode_data_blocks`).

The fast decoder must give exactly what :func:`~formats.flink.read.rocksdb.block.decode_data_block`
gives block by block, or decline (``None``) and leave the blocks to it. Blocks are encoded here
as ``BlockBuilder`` writes them (``table/block_based/block_builder.cc``: the longest common
prefix of consecutive internal keys, a restart point every ``restart_interval`` entries), from
keys that are prefixes of each other (so that ``shared`` reaches into a trailer), values over
127 bytes (two-byte varints) and ingested files' global sequence numbers. Damaged blocks must be
declined or decoded as the checked decoder decodes them, never accepted otherwise.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdb_fixtures import sst_files, varint

from formats.flink.read.rocksdb import open_sst
from formats.flink.read.rocksdb.block import decode_data_block, decode_data_blocks
from formats.flink.read.rocksdb.sst import SstFile
from statecore.errors import CorruptCheckpointError, StatectlError, UnsupportedFormatError

USER_KEYS = [b"", b"a", b"a\x00", b"a\x01", b"ab", b"abc", b"b", b"b\x01\x00", b"ba", b"c" * 130]


def encode_block(entries: list[tuple[bytes, int, bytes]], restart_interval: int) -> bytes:
    """``BlockBuilder``'s block of ``(user_key, trailer, value)`` in internal-key order."""
    out = bytearray()
    restarts: list[int] = []
    last = b""
    for i, (user_key, trailer, value) in enumerate(entries):
        key = user_key + struct.pack("<Q", trailer)
        shared = 0
        if i % restart_interval:
            while shared < min(len(key), len(last)) and key[shared] == last[shared]:
                shared += 1
        else:
            restarts.append(len(out))
        out += varint(shared) + varint(len(key) - shared) + varint(len(value))
        out += key[shared:] + value
        last = key
    restarts = restarts or [0]
    return bytes(out) + b"".join(struct.pack("<I", r) for r in restarts) + struct.pack(
        "<I", len(restarts))


def checked(blocks: list[bytes], global_seqno: int = 0
            ) -> tuple[tuple[list[bytes], list[int], list[bytes]], list[int]]:
    keys: list[bytes] = []
    trailers: list[int] = []
    values: list[bytes] = []
    starts = []
    for i, block in enumerate(blocks):
        starts.append(len(keys))
        k, t, v = decode_data_block(block, f"b{i}", global_seqno)
        keys += k
        trailers += t
        values += v
    return (keys, trailers, values), starts


@st.composite
def block_runs(draw: st.DrawFn) -> tuple[list[bytes], list[tuple[bytes, int, bytes]], bool]:
    """Encoded blocks, their entries, and whether every entry is one the fast path takes."""
    user_keys = sorted(set(draw(st.lists(st.sampled_from(USER_KEYS), max_size=len(USER_KEYS)))))
    big_values = draw(st.booleans())
    versions = draw(st.integers(1, 3))
    entries = []
    for key in user_keys:
        for seq in sorted(draw(st.lists(st.sampled_from([0, 1, 5, 2**40, 2**56 - 1]),
                                        min_size=1, max_size=versions, unique=True)),
                          reverse=True):
            kind = draw(st.sampled_from([0, 1, 1, 2, 7]))
            size = draw(st.integers(0, 200 if big_values else 20))
            entries.append((key, seq << 8 | kind, bytes([len(entries) % 251]) * size))
    interval = draw(st.integers(1, 17))
    cuts = sorted(set(draw(st.lists(st.integers(0, len(entries)), max_size=4))))
    bounds = [0, *cuts, len(entries)]
    parts = [entries[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    blocks = [encode_block(part, interval) for part in parts]
    simple = True
    for part in parts:
        previous = None
        for i, (key, trailer, value) in enumerate(part):
            ikey = key + struct.pack("<Q", trailer)
            shared = 0
            if i % interval and previous is not None:
                while (shared < min(len(ikey), len(previous))
                       and ikey[shared] == previous[shared]):
                    shared += 1
            if (len(ikey) - shared >= 128 or len(value) >= 128 or shared >= 128
                    or shared > len(previous or b"") - 8 + 8 * (previous is None)
                    or len(ikey) - shared < 8):
                simple = False
            previous = ikey
    return blocks, entries, simple


@settings(max_examples=400, deadline=None)
@given(block_runs(), st.sampled_from([0, 0, 7, 2**56 - 1]))
def test_a_run_decodes_as_its_blocks_do(run, global_seqno):
    blocks, entries, simple = run
    expected, starts = checked(blocks, global_seqno)
    if global_seqno == 0:  # the encoder's own entries come back
        assert list(zip(*expected, strict=True)) == entries
    got = decode_data_blocks(blocks, [f"b{i}" for i in range(len(blocks))], global_seqno)
    if simple:
        assert got is not None  # the fast path does take what it is for
    if got is not None:
        (keys, trailers, values), got_starts, types = got
        assert (keys, trailers, values) == expected
        assert got_starts == starts
        assert types == frozenset(t & 0xFF for t in expected[1])


@settings(max_examples=600, deadline=None)
@given(block_runs(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                              min_size=1, max_size=4))
def test_a_damaged_run_is_declined_or_decoded_as_the_checked_decoder_does(run, flips):
    blocks, _, _ = run
    damaged = [bytearray(b) for b in blocks]
    for at, byte in flips:
        block = damaged[at % len(damaged)]
        if block:
            block[at % len(block)] = byte
    blocks = [bytes(b) for b in damaged]
    wheres = [f"b{i}" for i in range(len(blocks))]
    try:
        got = decode_data_blocks(blocks, wheres)
    except (CorruptCheckpointError, UnsupportedFormatError):
        # only a block's layout is checked before the entries: the checked decoder agrees
        with pytest.raises(StatectlError):
            checked(blocks)
        return
    if got is not None:
        # accepted: then the checked decoder accepts it too, with the same entries
        assert got[:2] == checked(blocks)


def test_hand_made_blocks_the_fast_path_declines():
    def block(entries: bytes) -> bytes:
        return entries + struct.pack("<II", 0, 1)

    def ikey(user_key: bytes, seq: int = 1) -> bytes:
        return user_key + struct.pack("<Q", seq << 8 | 1)

    first = bytes([0, 9, 1]) + ikey(b"a") + b"v"
    assert decode_data_blocks([block(first)], ["b"]) == (([b"a"], [257], [b"v"]), [0],
                                                         frozenset({1}))
    declined = [
        bytes([0, 9, 1]) + ikey(b"a") + b"v" + bytes([5, 4, 0]) + b"\x00\x00\x00\x00",  # shares
        # into the previous trailer: valid, for the checked decoder alone
        bytes([0, 9, 200, 1]) + ikey(b"a") + b"v" * 200,  # a two-byte varint
        bytes([1, 9, 1]) + ikey(b"a") + b"v",  # a block's first entry sharing a byte
        bytes([0, 3, 0]) + b"abc",  # a key shorter than its trailer
        bytes([0, 9, 5]) + ikey(b"a") + b"v",  # a value past the entries' end
    ]
    for entries in declined:
        assert decode_data_blocks([block(first), block(entries)], ["b", "c"]) is None
    assert checked([block(declined[0])])[0] == ([b"a", b"a"], [257, 257], [b"v", b""])
    with pytest.raises(CorruptCheckpointError, match="shares 1 bytes"):
        decode_data_block(block(declined[2]), "b")


def _blocks_one_by_one(table: SstFile) -> tuple[list[bytes], list[int], list[bytes]]:
    keys: list[bytes] = []
    trailers: list[int] = []
    values: list[bytes] = []
    for _, handle in table.index_entries():
        k, t, v = decode_data_block(table.read_block(handle, "data"), "x", table.global_seqno)
        keys += k
        trailers += t
        values += v
    return keys, trailers, values


@pytest.mark.parametrize("path", sst_files()[:12], ids=lambda p: p.name)
def test_real_tables_read_a_run_at_a_time_as_block_by_block(path):
    table = open_sst(path.read_bytes(), path.name)
    keys: list[bytes] = []
    trailers: list[int] = []
    values: list[bytes] = []
    for (k, t, v), types, order in table.typed_data_blocks():
        assert types == frozenset(x & 0xFF for x in t)
        # the order of a run's keys, where the reader says it: that of the keys
        pairs = list(zip(k, k[1:], strict=False))
        assert order in (None, 2 if all(a < b for a, b in pairs) else
                         1 if all(a <= b for a, b in pairs) else 0)
        keys += k
        trailers += t
        values += v
    assert (keys, trailers, values) == _blocks_one_by_one(table)
