"""Differential tests against RocksDB's own tools (Debian's ``rocksdb-tools``, RocksDB 7.8).

``sst_dump --command=scan --output_hex`` lists every point entry of a table as RocksDB reads it;
``ldb manifest_dump`` lists the live files of every column family as RocksDB replays the
MANIFEST. Both must agree exactly with the pure-Python reader on every real fixture file.
Needs ``apt-get install -y rocksdb-tools`` (the test fails saying so when it is missing).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from rocksdb_fixtures import manifest_files, relative_id, sst_files

from formats.flink.read.rocksdb import open_sst
from formats.flink.read.rocksdb.manifest import read_manifest

SSTS = sst_files()
MANIFESTS = manifest_files()
_ENTRY = re.compile(r"^'([0-9A-F]*)' seq:(\d+), type:(\d+) => ([0-9A-F]*)$")
_FAMILY = re.compile(r'^-+ Column family "(.*)"  \(ID (\d+)\) -+$')
_FILE = re.compile(r"^ (\d+):(\d+)\[(\d+) \.\. (\d+)\]")
_LEVEL = re.compile(r"^--- level (\d+) ---")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"RocksDB's {name} is missing: apt-get install -y rocksdb-tools")
    return path


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, timeout=60, check=True)
    return done.stdout.decode("latin-1")


@pytest.mark.parametrize("path", SSTS, ids=[relative_id(p) for p in SSTS])
def test_entries_equal_sst_dump(path, tmp_path):
    # sst_dump only takes files named *.sst
    copy = tmp_path / "000001.sst"
    copy.symlink_to(path)
    output = _run(_tool("sst_dump"), f"--file={copy}", "--command=scan", "--output_hex")
    theirs = [m.groups() for line in output.splitlines() if (m := _ENTRY.match(line))]
    table = open_sst(path.read_bytes(), relative_id(path))
    ours = [(key.hex().upper(), str(seq), str(kind), value.hex().upper())
            for key, seq, kind, value in table.entries()]
    assert ours == theirs


@pytest.mark.parametrize("path", MANIFESTS, ids=[relative_id(p) for p in MANIFESTS])
def test_live_files_equal_ldb_manifest_dump(path):
    output = _run(_tool("ldb"), "manifest_dump", f"--path={path}")
    theirs: set[tuple[str, int, int, int, int, int, int]] = set()
    families: dict[int, str] = {}
    family = (-1, "")
    level = -1
    for line in output.splitlines():
        if m := _FAMILY.match(line):
            family = (int(m[2]), m[1])
            families[family[0]] = family[1]
        elif m := _LEVEL.match(line):
            level = int(m[1])
        elif m := _FILE.match(line):
            number, size, smallest, largest = (int(g) for g in m.groups())
            theirs.add((family[1], family[0], level, number, size, smallest, largest))
    manifest = read_manifest(path.read_bytes(), relative_id(path))
    assert {cf.id: cf.name for cf in manifest.column_families.values()} == families
    ours = {(cf.name, cf.id, f.level, f.number, f.file_size, f.smallest_seqno, f.largest_seqno)
            for cf in manifest.column_families.values() for f in cf.live_files()}
    assert ours == theirs
    match = re.search(r"next_file_number (\d+) last_sequence (\d+)", output)
    assert match is not None
    # ldb prints the recovered VersionSet, which reserves one more file number
    # (VersionEditHandler: next_file_number_ = GetNextFile() + 1); the edit records one less.
    assert manifest.next_file_number is not None
    assert (manifest.next_file_number + 1, manifest.last_sequence) == (int(match[1]),
                                                                       int(match[2]))


def test_tools_agree_on_a_merge_heavy_database(tmp_path: Path):
    """Merges, single deletions, deletions, partitioned index, two levels (Debian's writer)."""
    from test_rocksdb_merge import flink_like_batches, write_batches

    batches = flink_like_batches(rounds=3)
    batches.append([("single_delete", b"\x00\x01/key-0001")])
    write_batches(tmp_path / "db", batches, compact_after=1, index="two_level", block_size=256)
    for sst in sorted((tmp_path / "db").glob("*.sst")):
        output = _run(_tool("sst_dump"), f"--file={sst}", "--command=scan", "--output_hex")
        theirs = [m.groups() for line in output.splitlines() if (m := _ENTRY.match(line))]
        ours = [(k.hex().upper(), str(s), str(t), v.hex().upper())
                for k, s, t, v in open_sst(sst.read_bytes(), sst.name).entries()]
        assert ours == theirs and ours
