"""Full-scan speed of the pure-Python SST reader on one RocksDB-written table.

Usage: ``.venv/bin/python bench/bench_rocksdb.py [--entries 1000000]``. RocksDB itself
(rocksdict, the ``dev`` extra) writes one SST file of ``--entries`` Flink-like entries (a
key-group byte, a serialized key and namespace; 8..40-byte values) with Snappy and XXH3, as
Flink 2.3 configures it; then the reader is timed (best of 3) on: block decoding alone
(``SstFile.data_blocks``: read, verify, decompress, decode), internal entries
(``SstFile.entries``), and the live view of the single file (``live_items``).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rocksdb_writers import rocksdict_options  # noqa: E402

from formats.flink.read.rocksdb import live_items, open_sst  # noqa: E402


def write_tables(directory: Path, entries: int, files: int = 1) -> list[Path]:
    import rocksdict

    options = rocksdict_options(compression="snappy", checksum="xxh3", format_version=5)
    options.set_write_buffer_size(1 << 30)
    db = rocksdict.Rdict(str(directory), options)
    rng = random.Random(0)
    batch = rocksdict.WriteBatch(raw_mode=True)
    for i in range(entries):
        key = bytes([i % 128]) + b"\x00\x00\x00\x0buser-%08d\x00" % rng.randrange(entries * 4)
        batch.put(key, rng.randbytes(rng.choice((8, 8, 16, 40))))
        if len(batch) >= 100_000:
            db.write(batch)
            batch = rocksdict.WriteBatch(raw_mode=True)
        if (i + 1) % (entries // files) == 0:
            db.write(batch)
            batch = rocksdict.WriteBatch(raw_mode=True)
            db.flush()
    db.write(batch)
    db.flush()
    db.close()
    return sorted(directory.glob("*.sst"))


def best_of(runs: int, work) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Best wall-clock and best CPU seconds (the CPU time is steadier on a shared machine)."""
    wall = cpu = float("inf")
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        work()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = write_tables(Path(tmp) / "db", args.entries)
        data = path.read_bytes()
        several = [(p.name, p.read_bytes()) for p in write_tables(Path(tmp) / "db4",
                                                                  args.entries, files=4)]
    table = open_sst(data, path.name)
    count = sum(len(keys) for keys, _, _ in table.data_blocks())
    print(f"{path.name}: {len(data) / 1e6:.1f} MB, {count} entries, "
          f"{table.properties.num_data_blocks} data blocks, {table.properties.compression_name}, "
          f"{table.footer.checksum_type.name}")

    def decode() -> None:
        for _ in open_sst(data, path.name).data_blocks():
            pass

    def entries() -> None:
        for _ in open_sst(data, path.name).entries():
            pass

    def live() -> None:
        for _ in live_items([open_sst(data, path.name)]):
            pass

    def live_several() -> None:
        for _ in live_items([open_sst(d, name) for name, d in several]):
            pass

    for name, work in (("decode blocks", decode), ("internal entries", entries),
                       ("live view (1 file)", live), ("live view (4 L0 files)", live_several)):
        wall, cpu = best_of(3, work)
        print(f"{name:22s} wall {wall:5.2f} s {count / wall / 1e6:5.2f} M entries/s   "
              f"cpu {cpu:5.2f} s {count / cpu / 1e6:5.2f} M entries/s")


if __name__ == "__main__":
    main()
