"""``statectl export`` of big Flink snapshots: entries/s on both cores, memory flat in the size.

One benchmark, ``export`` (``bench/run.py --only export``; part of ``make bench``). Every figure
is a fresh ``statectl --quiet export SNAPSHOT --out DIR`` process (start-up included), timed
wall-clock, best of :data:`REPS` runs, the snapshots alternated so ratios compare runs under
the same conditions:

* the big snapshots of :mod:`flink_big` (real Flink 2.3: 1M keys, about 6M entries; a heap
  checkpoint, a canonical savepoint, a RocksDB incremental checkpoint of the same state),
  exported by the local engine with its default workers (every core: ``$STATECTL_WORKERS``
  unset), with one process (``STATECTL_WORKERS=1``) and with one process without the compiled
  decoder (``STATECTL_PURE_PYTHON=1``): which means gave what (info rows). Entries are the
  rows exported (one per key, namespace and state; one per operator-state element), the
  model's entries as ``bench_flink`` counts them. Bars: heap and canonical >= 1M entries/s;
  RocksDB >= 0.8 of canonical; the canonical savepoint's export <= 0.5x Flink's own restore
  of it (the JVM anchor of :mod:`flink_big`);
* RocksDB's own ``ldb scan`` of the RocksDB checkpoint's column families (:mod:`ldb_scan`,
  native, one process) against statectl's one-process export of it (time; info, no bar);
* peak RSS (``VmHWM``, read by the exporting process itself at exit, one process:
  ``STATECTL_WORKERS=1``) of exporting canonical savepoints written by statectl of
  :data:`BASE_KEYS` and 4x as many keys (a value and a list state each): the bar, 4x the size
  at most 1.2x the memory.

``--quick``: the fixtures' small snapshots once each (no bar applies).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_state_maps import Bar, Config, Row, Section, progress
from ldb_scan import ldb_available, ldb_scan

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
REPS = 2
TARGET = 1_000_000
ROCKSDB_BAR = 0.8
BASE_KEYS = 250_000
NAMES = {"heap-checkpoint": "heap checkpoint", "canonical-savepoint": "canonical savepoint",
         "rocksdb-incremental-checkpoint": "RocksDB incremental checkpoint"}

#: Runs ``statectl ARGS`` in this process, then prints its peak RSS (bytes) as the last line.
CHILD = """
import sys
sys.argv = ["statectl", *sys.argv[1:]]
import cli.main
code = 0
try:
    cli.main.main()
except SystemExit as exit:
    code = exit.code or 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(int(line.split()[1]) * 1024)
sys.exit(code)
"""


def export_once(location: str, workers: int | None, pure: bool = False
                ) -> tuple[float, int, int]:
    """One export in a fresh process: ``(seconds, rows, peak RSS of the exporting process)``.

    ``pure``: without the compiled decoder (``STATECTL_PURE_PYTHON=1``).
    """
    env = dict(os.environ)
    env.pop("STATECTL_WORKERS", None)
    env.pop("STATECTL_PURE_PYTHON", None)
    if workers is not None:
        env["STATECTL_WORKERS"] = str(workers)
    if pure:
        env["STATECTL_PURE_PYTHON"] = "1"
    with tempfile.TemporaryDirectory(prefix="statectl-bench-export-") as tmp:
        out = Path(tmp) / "out"
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, "--quiet", "export", location,
                               "--out", str(out)], cwd=REPO, env=env, capture_output=True,
                              text=True, check=False)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"export of {location} failed: {done.stderr[-2000:]}")
        manifest = json.loads((out / "_export.json").read_text())
        rows = sum(t["rows"] for t in manifest["tables"])
    return seconds, rows, int(done.stdout.strip().splitlines()[-1])


def best(location: str, workers: int | None, pure: bool = False) -> tuple[float, int, int]:
    runs = [export_once(location, workers, pure) for _ in range(REPS)]
    return min(r[0] for r in runs), runs[0][1], max(r[2] for r in runs)


def sized_savepoints() -> tuple[Path, Path]:
    """Canonical savepoints of BASE_KEYS and 4 x BASE_KEYS keys, written once and cached."""
    digest = hashlib.sha256((inspect.getsource(write_savepoint) + str(BASE_KEYS)).encode()
                            ).hexdigest()
    base = Path(os.environ.get("STATECTL_BENCH_CACHE", Path.home() / ".cache" / "statectl-bench"))
    folder = base / f"export-sizes-{digest[:16]}"
    done = folder / "done"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for factor in (1, 4):
            progress(f"export: writing a savepoint of {factor * BASE_KEYS:,} keys (once)")
            subprocess.run([sys.executable, str(BENCH_DIR / "bench_export.py"), "--write",
                            str(factor * BASE_KEYS), str(folder / f"x{factor}")], cwd=REPO,
                           check=True)
        done.write_text("ok")
    return folder / "x1", folder / "x4"


def write_savepoint(keys: int, out: Path) -> None:
    """A canonical savepoint of ``keys`` keys: a string value and a list of 3 longs each."""
    sys.path.insert(0, str(REPO))
    from formats.open import open_checkpoint
    from formats.ops.convert import convert_checkpoint
    from formats.statectl.writer import write_checkpoint
    from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
    from statecore.keyed_backend import HeapKeyedStateBackend
    from statecore.keyed_state import list_state, value_state

    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    value = backend.get_value_state(value_state("name", "string"))
    items = backend.get_list_state(list_state("items", "int64"))
    for i in range(keys):
        backend.set_current_key(f"key-{i}")
        value.update(f"value-{i}-" + "x" * 40)
        items.add_all([i, i + 1, i + 2])
    source = out.with_name(out.name + "-statectl")
    write_checkpoint(str(source), 1, [OperatorSnapshot(
        "op", "op", 1, 128, [SubtaskSnapshot(0, backend.snapshot())])])
    del backend, value, items
    convert_checkpoint(open_checkpoint(str(source)), str(out))
    shutil.rmtree(source)


def quick(section: Section) -> Section:
    sys.path.insert(0, str(REPO / "tests"))
    from flink_fixtures import snapshots
    seconds = rows = 0.0
    for fixture, snap in snapshots("heap")[:6]:
        s, n, _ = export_once(str(fixture / snap["path"]), None)
        seconds, rows = seconds + s, rows + n
    section.rows.append(Row("export fixtures (small, start-up included: no bar), rows/s",
                            rows / seconds, TARGET, "ops/s"))
    return section


def bench_export(cfg: Config) -> Section:
    section = Section("export")
    if cfg.snapshot_entries < 1_000_000:
        return quick(section)
    from flink_big import snapshots
    folder, manifest = snapshots()
    snaps = manifest["snapshots"]
    cores = len(os.sched_getaffinity(0))
    found: dict[str, dict[str, Any]] = {}
    for workers, pure in ((None, False), (1, False), (1, True)):
        for name in NAMES:
            label = ("default workers" if workers is None else
                     "one process, pure Python" if pure else "one process")
            progress(f"export: {NAMES[name]}, {label}")
            seconds, rows, rss = best(str(folder / snaps[name]["path"]), workers, pure)
            found.setdefault(name, {})[label] = {"seconds": seconds, "rows": rows, "rss": rss}
    rate = {name: found[name]["default workers"]["rows"] / found[name]["default workers"][
        "seconds"] for name in NAMES}
    for name in ("heap-checkpoint", "canonical-savepoint"):
        section.rows.append(Row(f"export big {NAMES[name]}: entries/s ({cores} cores) vs 1M/s",
                                rate[name], TARGET, "ops/s", Bar(">=", 1.0, ">= 1M/s")))
    section.rows.append(Row("export big RocksDB incremental vs canonical savepoint, entries/s",
                            rate["rocksdb-incremental-checkpoint"], rate["canonical-savepoint"],
                            "ops/s", Bar(">=", ROCKSDB_BAR, f">= {ROCKSDB_BAR}")))
    for name in NAMES:  # which means gave what: both cores, then the compiled decoder
        one, pure = found[name]["one process"], found[name]["one process, pure Python"]
        section.rows.append(Row(f"export big {NAMES[name]}: {cores} cores vs one process",
                                rate[name], one["rows"] / one["seconds"], "ops/s"))
        section.rows.append(Row(f"export big {NAMES[name]}, one process: compiled decoder vs "
                                f"pure Python", one["rows"] / one["seconds"],
                                pure["rows"] / pure["seconds"], "ops/s"))
        size = snaps[name]["bytes"]
        section.rows.append(Row(f"export big {NAMES[name]}: MB/s per core (info)",
                                size / found[name]["default workers"]["seconds"] / cores,
                                size / one["seconds"], "B/s"))
    if ldb_available():
        progress("export: ldb scan of the RocksDB checkpoint (RocksDB's own tool)")
        location = folder / snaps["rocksdb-incremental-checkpoint"]["path"]
        native = min(ldb_scan(location)[0] for _ in range(REPS))
        one = found["rocksdb-incremental-checkpoint"]["one process"]["seconds"]
        section.rows.append(Row("export big RocksDB incremental (one process) vs ldb scan of "
                                "its column families (time, info)", one * 1e9, native * 1e9,
                                "ns"))
        section.raw["ldb_scan_seconds"] = native
    else:
        section.notes.append("export: no ldb on PATH (make system-deps): the ldb scan row "
                             "is left out")
    anchor = manifest.get("jvm_anchor") or {}
    if anchor.get("flink_restore_seconds"):
        section.rows.append(Row(
            "export big canonical savepoint vs Flink's restore of it (time)",
            found["canonical-savepoint"]["default workers"]["seconds"] * 1e9,
            anchor["flink_restore_seconds"] * 1e9, "ns", Bar("<=", 0.5, "<= 0.5x")))
    x1, x4 = sized_savepoints()
    progress("export: peak RSS at 1x and 4x the size")
    _, rows1, rss1 = best(str(x1), 1)
    _, rows4, rss4 = best(str(x4), 1)
    section.rows.append(Row(f"export peak RSS: 4x the snapshot ({rows4:,} rows) vs 1x "
                            f"({rows1:,})", rss4, rss1, "bytes", Bar("<=", 1.2, "<= 1.2x")))
    section.notes.append(
        f"export: fresh processes, start-up included, best of {REPS}; entries are the rows "
        f"exported; default workers = {cores} (every core); peak RSS of the exporting process "
        f"alone, one process (STATECTL_WORKERS=1): {rss1 / 1e6:.0f} MB at 1x, "
        f"{rss4 / 1e6:.0f} MB at 4x")
    section.raw.update({"found": found, "rss": {"x1": rss1, "x4": rss4}})
    return section


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--write":
    write_savepoint(int(sys.argv[2]), Path(sys.argv[3]))
