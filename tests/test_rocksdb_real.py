"""Real Flink 2.3 RocksDB files (``../shared/flink-fixtures-rocksdb``) through the reader.

Every SST file found opens with every block checksum verified, names its column family, holds
as many entries as its properties say, in internal-key order, and answers seeks exactly as a full
scan filtered. Every MANIFEST replays; for each incremental handle of real files, the MANIFEST's
live files are exactly the handle's SST files (by local name, size and column family), and the
live view of each column family resolves.
"""

from __future__ import annotations

import pytest
from rocksdb_fixtures import incremental_handles, manifest_files, relative_id, sst_files

from formats.flink.read.rocksdb import live_items, live_range, open_sst
from formats.flink.read.rocksdb.manifest import read_manifest

SSTS = sst_files()
MANIFESTS = manifest_files()


@pytest.mark.parametrize("path", SSTS, ids=[relative_id(p) for p in SSTS])
def test_real_sst_opens_verifies_and_scans(path):
    table = open_sst(path.read_bytes(), relative_id(path))
    props = table.properties
    assert props.column_family_name
    assert props.comparator_name == "leveldb.BytewiseComparator"
    entries = list(table.entries())
    tombstones = table.range_tombstones()
    assert len(entries) + len(tombstones) == props.num_entries
    assert len(tombstones) == (props.num_range_deletions or 0)
    assert all(t.start < t.end for t in tombstones)
    order = [(key, -((seq << 8) | kind)) for key, seq, kind, _ in entries]
    assert order == sorted(order) and len(set(order)) == len(order)
    # Seeks read only the blocks needed and agree with the full scan.
    keys = sorted({e[0] for e in entries})
    for key in keys[:: max(1, len(keys) // 5)] + keys[-1:]:
        assert list(table.entries(key, key + b"\x00")) == [e for e in entries if e[0] == key]
    if keys:
        lo, hi = keys[len(keys) // 3], keys[2 * len(keys) // 3]
        assert list(table.entries(lo, hi)) == [e for e in entries if lo <= e[0] < hi]
    # The live view of one file: its newest visible version per key.
    live = list(live_items([table]))
    assert [k for k, _ in live] == sorted({k for k, _ in live})


@pytest.mark.parametrize("path", MANIFESTS, ids=[relative_id(p) for p in MANIFESTS])
def test_real_manifest_replays(path):
    manifest = read_manifest(path.read_bytes(), relative_id(path))
    assert manifest.last_sequence is not None and manifest.next_file_number is not None
    assert "default" in {cf.name for cf in manifest.column_families.values()}
    for family in manifest.column_families.values():
        assert family.comparator in (None, "leveldb.BytewiseComparator")
        for meta in family.live_files():
            assert meta.smallest_seqno <= meta.largest_seqno
            assert meta.smallest_user_key <= meta.largest_user_key


HANDLES = incremental_handles()


def test_fixtures_have_incremental_handles_of_real_files():
    assert HANDLES, "no IncrementalRemoteKeyedStateHandle with real files in any metadata-dump"


@pytest.mark.parametrize("handle", HANDLES, ids=[h.where for h in HANDLES])
def test_manifest_lists_exactly_the_handles_sst_files(handle):
    (manifest_name,) = [n for n in handle.private if n.startswith("MANIFEST-")]
    log_number = int(manifest_name.removeprefix("MANIFEST-"))
    manifest = read_manifest(handle.private[manifest_name].read_bytes(), manifest_name,
                             log_number)
    ssts = {name: path for name, path in handle.shared.items() if name.endswith(".sst")}
    live = {meta.file_name: (family, meta) for family in manifest.column_families.values()
            for meta in family.live_files()}
    assert set(live) == set(ssts)
    tables_by_family: dict[str, list] = {}
    for name, (family, meta) in live.items():
        data = ssts[name].read_bytes()
        assert len(data) == meta.file_size
        table = open_sst(data, name, largest_seqno=meta.largest_seqno)
        assert table.properties.column_family_name == family.name
        assert table.properties.column_family_id == family.id
        seqs = [seq for _, seq, _, _ in table.entries()]
        seqs += [t.sequence for t in table.range_tombstones()]
        assert all(meta.smallest_seqno <= s <= meta.largest_seqno for s in seqs)
        tables_by_family.setdefault(family.name, []).append(table)
    for tables in tables_by_family.values():
        everything = list(live_items(tables))
        keys = [k for k, _ in everything]
        assert keys == sorted(set(keys))
        if keys:
            lo, hi = keys[len(keys) // 4], keys[-1]
            assert list(live_range(tables, lo, hi)) == [kv for kv in everything
                                                        if lo <= kv[0] < hi]
