"""The compiled RocksDB read path reads exactly what the Python one reads.

``cdecoder`` reads a run of data blocks at once (``data_run``: bounds, checksum, Snappy or no
compression, simple entries), lists an index block's entries (``index_run``) and merges runs of
several tables (``onto_oldest``, ``key_order``, ``trailer_span``) only where it gives what the
Python readers give; anything else it gives back (``None``) and they read it, raising what a
damaged table deserves. Checked here with the compiled decoder and without it (``SPEEDUPS``
switched off in the RocksDB modules, as ``STATECTL_PURE_PYTHON=1`` does), on tables RocksDB
itself wrote:

* every compression, checksum type, format version 2-6 and index type (rocksdict's RocksDB 9),
  data blocks with a hash index, keys and values over 127 bytes (two-byte varints), deletions
  and range deletions; merge operands over several tables (Debian's RocksDB 7.8, as Flink's list
  state): every entry of every table, the live view, ranges of it;
* such tables with one byte changed (hypothesis): the same entries, or the same error;
* the Flink fixtures' RocksDB snapshots: the compiled path takes their runs (so it is the one
  the other tests check against RocksDB's own view).

``make test-pure`` runs every other RocksDB test without the compiled decoder too.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flink_fixtures import expected, fixture_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdb_writers import DebianRocksDB, rocksdict_options

import formats.flink.read.rocksdb.block as block_module
import formats.flink.read.rocksdb.merge as merge_module
import formats.flink.read.rocksdb.sst as sst_module
from formats.flink.read.compiled import SPEEDUPS
from formats.flink.read.rocksdb import live_items, live_range, open_sst
from formats.open import open_checkpoint
from statecore.errors import StatectlError

COMPILED = ("data_run", "index_run", "onto_oldest", "key_order", "trailer_span")


@contextmanager
def pure(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The RocksDB readers without the compiled decoder, as ``STATECTL_PURE_PYTHON=1``."""
    with monkeypatch.context() as patch:
        for module in (block_module, merge_module, sst_module):
            patch.setattr(module, "SPEEDUPS", None)
        yield


def read_all(files: list[tuple[str, bytes]]) -> Any:
    """Everything read of a database's SST files: entries, live view, ranges; or the error."""
    try:
        tables = [open_sst(data, name) for name, data in files]
        entries = [list(t.entries()) for t in tables]
        live = list(live_items(tables))
        keys = [k for k, _ in live] or [b""]
        ranges = [list(live_range(tables, keys[i * len(keys) // 5], keys[j * len(keys) // 5 - 1]))
                  for i, j in ((0, 1), (1, 3), (2, 5))]
        return entries, live, ranges
    except StatectlError as exc:
        return type(exc).__name__, str(exc)


def both_ways(files: list[tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch) -> Any:
    compiled = read_all(files)
    with pure(monkeypatch):
        python = read_all(files)
    assert compiled == python
    return compiled


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each compiled function took its input and gave it back."""
    counts: Counter[str] = Counter()
    if SPEEDUPS is None:
        return counts
    for name in COMPILED:
        original = getattr(SPEEDUPS, name)

        def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
            found = _original(*args)
            counts[_name + (" taken" if found is not None and found is not False
                            else " given back")] += 1
            return found
        monkeypatch.setattr(SPEEDUPS, name, counted)
    return counts


def rocksdict_files(path: Path, seed: int, big: bool, **options: Any) -> list[tuple[str, bytes]]:
    """Three flushes of puts, deletions and a range deletion, by rocksdict's RocksDB."""
    import rocksdict

    rng = random.Random(seed)
    db = rocksdict.Rdict(str(path), rocksdict_options(**options))
    for _ in range(3):
        for _ in range(300):
            key = b"key/%05d/" % rng.randrange(600) + b"x" * rng.randrange(140 if big else 4)
            db[key] = b"v%d," % rng.randrange(10**6) * rng.choice((1, 3, 60 if big else 5))
        for _ in range(15):
            db.delete(b"key/%05d/" % rng.randrange(600))
        low = rng.randrange(600)
        db.delete_range(b"key/%05d/" % low, b"key/%05d/" % (low + rng.randrange(1, 30)))
        db.flush()
    db.close()
    return [(p.name, p.read_bytes()) for p in sorted(path.glob("*.sst"))]


CONFIGS = [
    *({"compression": c, "checksum": k} for c in ("none", "snappy", "lz4", "zstd")
      for k in ("crc32c", "xxhash", "xxhash64", "xxh3")),
    *({"format_version": v, "index": i} for v in (2, 3, 4, 5, 6)
      for i in ("binary", "two_level")),
    {"index": "hash"},
    {"data_block_hash": True, "compression": "none"},
    {"block_size": 256}, {"block_size": 65536},
]


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in
                                                                      c.items()))
def test_tables_rocksdb_wrote_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         taken: Counter[str], config: dict[str, Any],
                                         big: bool) -> None:
    files = rocksdict_files(tmp_path, len(taken) + 7, big, **config)
    entries, live, _ = both_ways(files, monkeypatch)
    assert len(files) >= 2 and live and all(entries)
    if SPEEDUPS is None:
        return
    # what the compiled decoder must take: Snappy or plain blocks without a hash index
    takes = (config.get("compression", "snappy") in ("snappy", "none")
             and not config.get("data_block_hash"))
    assert (taken["data_run taken"] > 0) == takes, taken
    assert (taken["data_run given back"] > 0) == (not takes), taken
    if config.get("index", "binary") in ("binary", "hash"):
        assert taken["index_run taken"] > 0, taken
    # a run it reads comes with its keys' order; the others' order is checked apart
    assert (taken["key_order taken"] > 0) == (not takes), taken


@pytest.mark.parametrize("compression", ["snappy", "none", "lz4"])
def test_merge_operands_over_several_tables_read_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: Counter[str],
        compression: str) -> None:
    """List-state traffic (appends as merge operands over older values) in four tables."""
    rng = random.Random(5)
    with DebianRocksDB(tmp_path, compression=compression, block_size=1024) as db:
        keys = [b"\x00%c/key-%04d" % (i % 7, i) for i in range(400)]
        db.write([("put", k, b"base-%d" % i) for i, k in enumerate(keys)])
        db.flush()
        for r in range(3):
            ops: list[tuple[Any, ...]] = [("merge", k, b"op-%d" % r) for k in keys
                                          if rng.random() < 0.5]
            ops += [("put", k, b"new-%d" % r) for k in keys if rng.random() < 0.1]
            db.write(ops)
            db.flush()
    files = [(p.name, p.read_bytes()) for p in sorted(tmp_path.glob("*.sst"))]
    assert len(files) == 4
    _, live, _ = both_ways(files, monkeypatch)
    assert any(b"," in value for _, value in live)
    if SPEEDUPS is not None:
        assert taken["onto_oldest taken"] > 0 and taken["trailer_span taken"] > 0, taken


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[list[tuple[str, bytes]]]:
    """Small databases to damage: Snappy, no compression, format version 6 (context
    checksums), each of a few blocks."""
    out = []
    for i, options in enumerate(({"compression": "snappy", "block_size": 512},
                                 {"compression": "none", "checksum": "crc32c", "block_size": 512},
                                 {"format_version": 6, "block_size": 512})):
        import rocksdict

        path = tmp_path_factory.mktemp(f"damaged-{i}")
        db = rocksdict.Rdict(str(path), rocksdict_options(**options))
        for flush in range(2):
            for k in range(120):
                db[b"k%04d" % (k * 2 + flush)] = b"value-%d" % k * (1 + k % 3)
            db.flush()
        db.close()
        out.append([(p.name, p.read_bytes()) for p in sorted(path.glob("*.sst"))])
    return out


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2), st.integers(0, 1), st.floats(0.0, 0.999), st.integers(0, 255),
       st.booleans())
def test_a_damaged_table_reads_alike(monkeypatch: pytest.MonkeyPatch,
                                     written: list[list[tuple[str, bytes]]], db: int,
                                     table: int, where: float, byte: int,
                                     unverified: bool) -> None:
    """One byte changed anywhere in a table (its data blocks most often); with checksums not
    verified too, so that damaged blocks reach the decoders: the same entries or error."""
    files = list(written[db])
    name, data = files[table]
    changed = bytearray(data)
    # the data blocks are the first ~85% of a table: most changes land in them
    changed[int(where * len(changed) * 0.85)] = byte
    files[table] = (name, bytes(changed))
    with monkeypatch.context() as patch:
        if unverified:
            patch.setattr(sst_module.SstFile, "__init__", _unverified(sst_module.SstFile.__init__))
        both_ways(files, patch)


def _unverified(init: Any) -> Any:
    def opened(self: Any, data: Any, name: str, *, verify_checksums: bool = True,
               largest_seqno: int | None = None) -> None:
        init(self, data, name, verify_checksums=False, largest_seqno=largest_seqno)
    return opened


ROCKSDB_SNAPSHOTS = [(s, snap) for s in fixture_sets("rocksdb")
                     for snap in expected(s)["snapshots"]]


def test_the_fixtures_rocksdb_runs_are_taken(taken: Counter[str]) -> None:
    """The compiled path reads the data blocks and indexes of Flink's RocksDB snapshots.
    Switched off (``make test-pure``), it is never imported."""
    assert ROCKSDB_SNAPSHOTS, "no RocksDB fixture snapshots"
    for root, snap in ROCKSDB_SNAPSHOTS:
        checkpoint = open_checkpoint(str(root / snap["path"]), partial=True)
        for op in checkpoint.metadata.operators:
            for subtask in op.subtasks:
                for handle in subtask.keyed:
                    checkpoint.decoded_rows(handle.file)
    if SPEEDUPS is None:  # switched off or not built: nothing compiled is even imported
        assert "formats.flink.read.cdecoder" not in sys.modules
        return
    assert taken["data_run taken"] > 0 and taken["index_run taken"] > 0, taken
    assert taken["data_run given back"] == 0, taken
