"""The chunked live view (:func:`formats.flink.read.rocksdb.merge.live_batches`) against a plain
model.

Synthetic tables stand in for SST files (what the merge reads of one: its decoded data blocks,
range tombstones and properties): random versions of keys that are prefixes of each other,
merge operands, deletions, range tombstones, sequence ranges per table that overlap or not,
blocks of any size (a key's versions straddling blocks) and chunks of any size. The bulk
resolutions and the general one must give the model's answer, and out-of-order input must raise
:class:`~statecore.errors.CorruptCheckpointError`. Real RocksDB files are in
``test_rocksdb_merge.py`` and ``test_rocksdb_sst.py``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.read.rocksdb import merge
from formats.flink.read.rocksdb.dbformat import ValueType
from formats.flink.read.rocksdb.merge import live_batches, live_items, live_range
from formats.flink.read.rocksdb.properties import TableProperties
from formats.flink.read.rocksdb.sst import RangeTombstone
from statecore.errors import CorruptCheckpointError, UnsupportedFormatError

KEYS = [b"", b"a", b"a\x00", b"ab", b"abc", b"b", b"b\xff", b"ba", b"c", b"cc", b"d"]
VALUE, MERGE, DELETE, SINGLE = (int(ValueType.VALUE), int(ValueType.MERGE),
                                int(ValueType.DELETION), int(ValueType.SINGLE_DELETION))


class FakeTable:
    """What the live view reads of an SST file: data blocks in order, tombstones, properties."""

    def __init__(self, name: str, entries: list[tuple[bytes, int, bytes]], cuts: list[int],
                 tombstones: list[RangeTombstone]) -> None:
        self.name = name
        entries = sorted(entries, key=lambda e: (e[0], -e[1]))  # internal-key order
        bounds = [0, *sorted({c % (len(entries) + 1) for c in cuts}), len(entries)]
        self.blocks = [entries[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        self.tombstones = tombstones
        self.properties = TableProperties(column_family_id=1, column_family_name="s",
                                          merge_operator_name="StringAppendTESTOperator")

    def typed_data_blocks(self, start: bytes | None = None, end: bytes | None = None
                          ) -> Iterator[tuple[tuple[list[bytes], list[int], list[bytes]],
                                              frozenset[int]]]:
        for block in self.blocks:
            trailers = [t for _, t, _ in block]
            yield ([k for k, _, _ in block], trailers, [v for _, _, v in block]), frozenset(
                t & 0xFF for t in trailers)

    def __repr__(self) -> str:
        return f"FakeTable({self.name!r}, {self.blocks!r}, {self.tombstones!r})"

    def range_tombstones(self) -> list[RangeTombstone]:
        return list(self.tombstones)


def model(tables: list[FakeTable], start: bytes | None, end: bytes | None
          ) -> list[tuple[bytes, bytes]]:
    """RocksDB's latest view, version by version, newest first (StringAppendTESTOperator)."""
    versions: dict[bytes, list[tuple[int, bytes]]] = {}
    for table in tables:
        for block in table.blocks:
            for key, trailer, value in block:
                versions.setdefault(key, []).append((trailer, value))
    tombstones = [t for table in tables for t in table.tombstones]
    out = []
    for key in sorted(versions):
        if start is not None and key < start or end is not None and key >= end:
            continue
        floor = max((t.sequence for t in tombstones if t.start <= key < t.end), default=0)
        operands: list[bytes] = []
        result = None
        for trailer, value in sorted(versions[key], reverse=True):
            kind = trailer & 0xFF
            if trailer >> 8 < floor or kind in (DELETE, SINGLE):
                break
            if kind == VALUE:
                operands.append(value)
                break
            operands.append(value)
        if operands:
            result = b",".join(reversed(operands))
        if result is not None:
            out.append((key, result))
    return out


@st.composite
def databases(draw: st.DrawFn) -> list[FakeTable]:
    n_tables = draw(st.integers(1, 4))
    # values, or values and merge operands: the bulk paths, when also one per key and table
    kinds_st = draw(st.sampled_from([st.just(VALUE), st.sampled_from([VALUE, MERGE]),
                                     st.sampled_from([VALUE, VALUE, MERGE, MERGE, DELETE,
                                                      SINGLE])]))
    unique = draw(st.booleans())
    layered = draw(st.booleans())  # each table's sequences above the previous one's
    plain = unique and draw(st.booleans())  # no range tombstone either
    sequences = list(range(1, 400))
    random.Random(draw(st.integers(0, 2**16))).shuffle(sequences)
    tables = []
    for t in range(n_tables):
        keys = draw(st.lists(st.sampled_from(KEYS), max_size=25))
        if unique:
            keys = sorted(set(keys))
        elif keys:  # several versions of a few keys
            keys += draw(st.lists(st.sampled_from(keys[:2]), max_size=6))
        kinds = [draw(kinds_st) for _ in keys]
        if layered:
            seqs = [100 * t + 1 + i for i in range(len(keys))]
            if t == 0 and unique and draw(st.booleans()):
                seqs = [0] * len(keys)  # a bottommost file's zeroed sequence numbers
        else:
            seqs = [sequences.pop() for _ in keys]
        entries = [(key, seq << 8 | kind, b"%d.%d" % (t, i))
                   for i, (key, seq, kind) in enumerate(zip(keys, seqs, kinds, strict=True))]
        tombstones = []
        if not plain and draw(st.booleans()):
            lo, hi = sorted(draw(st.lists(st.sampled_from(KEYS), min_size=2, max_size=2)))
            tombstones.append(RangeTombstone(lo, hi, draw(st.integers(0, 450))))
        cuts = draw(st.lists(st.integers(0, 30), max_size=6))
        tables.append(FakeTable(f"t{t}", entries, cuts, tombstones))
    return tables


bounds_st = st.one_of(st.none(), st.sampled_from(KEYS))


@settings(max_examples=400, deadline=None)
@given(tables=databases(), ahead=st.integers(1, 9), start=bounds_st, end=bounds_st)
def test_chunked_live_view_equals_the_model(tables, ahead, start, end):
    batches = list(live_batches(tables, start, end, ahead=ahead))
    assert all(keys and len(keys) == len(values) for keys, values in batches)
    got = [pair for keys, values in batches for pair in zip(keys, values, strict=True)]
    assert got == model(tables, start, end)
    assert list(live_range(tables, start if start is not None else b"",
                           end if end is not None else b"\xff\xff")) == got


@settings(max_examples=200, deadline=None)
@given(tables=databases(), ahead=st.integers(1, 9))
def test_values_and_operands_of_layered_tables_never_take_the_general_path(tables, ahead,
                                                                         monkeypatch_general):
    plain = all(t & 0xFF in (VALUE, MERGE) for table in tables for b in table.blocks
                for _, t, _ in b)
    ranges = sorted((min(seqs), max(seqs)) for seqs in (
        [t for block in table.blocks for _, t, _ in block] for table in tables) if seqs)
    layered = all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    unique = all(len({k for blk in table.blocks for k, _, _ in blk})
                 == sum(len(blk) for blk in table.blocks) for table in tables)
    if not (plain and layered and unique and not any(t.tombstones for t in tables)):
        return
    monkeypatch_general.calls = 0
    assert [p for keys, values in live_batches(tables, ahead=ahead)
            for p in zip(keys, values, strict=True)] == model(tables, None, None)
    assert monkeypatch_general.calls == 0


class _Counter:
    calls = 0


@pytest.fixture(scope="module")
def monkeypatch_general() -> Iterator[_Counter]:
    counter = _Counter()
    general = merge._resolve

    def counted(*args, **kwargs):
        counter.calls += 1
        return general(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(merge, "_resolve", counted)
        yield counter


def test_a_key_with_more_versions_than_a_chunk():
    versions = [(b"k", (100 - i) << 8 | MERGE, b"%d" % i) for i in range(50)]
    table = FakeTable("t", [*versions, (b"a", 1 << 8 | VALUE, b"x"), (b"z", 1 << 8 | VALUE,
                                                                        b"y")],
                      list(range(0, 60, 3)), [])
    other = FakeTable("u", [(b"k", 200 << 8 | MERGE, b"new"), (b"m", 2 << 8 | VALUE, b"m")],
                      [1], [])
    for ahead in (1, 2, 5, 1024):
        assert list(live_items([table, other])) == model([table, other], None, None)
        got = [p for k, v in live_batches([table, other], ahead=ahead)
               for p in zip(k, v, strict=True)]
        assert got == model([table, other], None, None)
    assert dict(live_items([table, other]))[b"k"] == b",".join(
        [b"%d" % i for i in reversed(range(50))] + [b"new"])


def test_versions_of_a_key_over_two_blocks():
    """Two values of one key, one each side of a block boundary: not one value per key."""
    table = FakeTable("t", [(b"a", 5 << 8 | VALUE, b"new"), (b"a", 3 << 8 | VALUE, b"old"),
                            (b"b", 1 << 8 | VALUE, b"b")], [1], [])
    assert [len(block) for block in table.blocks] == [1, 2]
    for ahead in (1, 2, 5):
        assert [p for k, v in live_batches([table], ahead=ahead)
                for p in zip(k, v, strict=True)] == [
            (b"a", b"new"), (b"b", b"b")]


@pytest.mark.parametrize("ahead", [1, 3, 1024])
def test_keys_going_backwards_are_corrupt(ahead):
    table = FakeTable("bad.sst", [(b"a", 1 << 8 | VALUE, b"1"), (b"c", 2 << 8 | VALUE, b"2")],
                      [], [])
    table.blocks = [[(b"a", 257, b"1"), (b"c", 513, b"2"), (b"b", 769, b"3")]]
    other = FakeTable("ok.sst", [(b"b", 5 << 8 | VALUE, b"x")], [], [])
    for tables in ([table], [table, other]):
        with pytest.raises(CorruptCheckpointError, match="bad.sst.*out of key order"):
            list(live_batches(tables, ahead=ahead))


def test_range_of_a_chunked_view():
    entries = [(b"%03d" % i, 1 << 8 | VALUE, b"v%d" % i) for i in range(300)]
    newer = [(b"%03d" % i, 2 << 8 | VALUE, b"w%d" % i) for i in range(0, 300, 7)]
    tables = [FakeTable("a", entries, list(range(0, 300, 16)), []),
              FakeTable("b", newer, [5, 9], [])]
    expected = model(tables, b"050", b"250")
    assert list(live_range(tables, b"050", b"250")) == expected
    assert [p for k, v in live_batches(tables, b"050", b"250", ahead=10)
            for p in zip(k, v, strict=True)] == expected


@pytest.mark.parametrize("n_tables", [1, 2])
def test_operands_of_another_merge_operator_are_refused(n_tables):
    tables = [FakeTable("old", [(b"a", 0 << 8 | VALUE, b"base")], [], []),
              FakeTable("new", [(b"a", 5 << 8 | MERGE, b"op")], [], [])][-n_tables:]
    for table in tables:
        table.properties.merge_operator_name = "UInt64AddOperator"
    with pytest.raises(UnsupportedFormatError, match="merge operator"):
        list(live_batches(tables))
