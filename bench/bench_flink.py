"""Decoding real Flink snapshots at scale: open + every entry, single process.

One benchmark, ``flink`` (``bench/run.py --only flink``; part of ``make bench``), on the big
snapshots of :mod:`flink_big` (real Flink 2.3, generated once and cached: 1,000,000 String keys
of the fixture job, Long/List/Map state plus timers, operator and broadcast state; a heap
checkpoint, a canonical savepoint and a RocksDB incremental checkpoint of the same logical state).
``--quick`` uses the small fixture sets of ``$STATECTL_FLINK_FIXTURES`` instead (a smoke test:
fixed costs per snapshot dominate there; no bar applies).

What is timed, per snapshot: ``open_checkpoint`` (``_metadata``, every state stream or SST file,
serializer snapshots, keys, namespaces and values decoded, the model built) plus iterating every
entry the model offers (``keyed_entries`` of every keyed state, ``operator_entries`` of every
subtask), in this process. Entries are the model's rows: one per key, namespace and state (a
timer state's row is one key and namespace with its timestamps), one per operator-state element
or broadcast entry. The snapshots are decoded alternately, ``REPS`` times each, and the median
counts, so the RocksDB/canonical ratio is measured side by side.

Rows:

* heap checkpoint and canonical savepoint: entries/s against 300k/s (the bar: ratio >= 1; the
  baseline column is that target, not a measurement);
* RocksDB incremental checkpoint against the canonical savepoint of the same state (bar >= 0.8);
* information: bytes/s of each (the snapshot's files), and statectl's decode of the canonical
  savepoint against Flink's own restore of it (the JVM anchor: from the JobManager's
  ``Restoring job`` line to the last task RUNNING, from the generation run's restore log).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import time
from pathlib import Path

from bench_state_maps import Bar, Config, Row, Section, median, progress

from formats.open import open_checkpoint

TARGET = 300_000
ROCKSDB_BAR = 0.8
REPS = 3
ROOT = Path(__file__).resolve().parent.parent
NAMES = {"heap-checkpoint": "heap checkpoint", "canonical-savepoint": "canonical savepoint",
         "rocksdb-incremental-checkpoint": "RocksDB incremental checkpoint"}


def decode_everything(location: str) -> int:
    """Open ``location`` and walk every entry of its model; the number of entries."""
    checkpoint = open_checkpoint(location)
    entries = 0
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope == "keyed":
                for _ in checkpoint.keyed_entries(op.uid, state.name):
                    entries += 1
        for st in op.subtasks:
            if st.operator:
                for entry in checkpoint.operator_entries(op.uid, st.index):
                    entries += len(entry.elements) + len(entry.entries)
    return entries


def timed(location: str) -> tuple[float, int]:
    from cli.main import GC_THRESHOLDS
    gc.set_threshold(*GC_THRESHOLDS)  # as the statectl command runs (cli.main.main)
    gc.collect()
    started = time.perf_counter()
    entries = decode_everything(location)
    return time.perf_counter() - started, entries


def fixture_snapshots() -> dict[str, list[str]]:
    base = Path(os.environ.get("STATECTL_FLINK_FIXTURES",
                               ROOT.parent / "shared" / "flink-fixtures"))
    groups: dict[str, list[str]] = {}
    for fixture_set in sorted(p for p in base.iterdir() if (p / "expected.json").is_file()):
        for snap in json.loads((fixture_set / "expected.json").read_text())["snapshots"]:
            group = "canonical savepoints" if snap["format"] == "canonical" else "heap snapshots"
            groups.setdefault(group, []).append(str(fixture_set / snap["path"]))
    return groups


def quick(section: Section) -> Section:
    """The fixtures, once each: that decoding works end to end, and its rate there."""
    for group, locations in fixture_snapshots().items():
        progress(f"flink (quick): {group}")
        seconds = entries = 0
        for location in locations:
            s, n = timed(location)
            seconds += s
            entries += n
        section.rows.append(Row(f"flink fixtures: {group}, entries/s (small: no bar)",
                                entries / seconds, TARGET, "ops/s"))
        section.notes.append(f"{group}: {len(locations)} fixture snapshots, {entries:,} entries "
                             f"in {seconds:.2f} s")
    return section


def bench_flink(cfg: Config) -> Section:
    section = Section("flink")
    if cfg.snapshot_entries < 1_000_000:
        return quick(section)
    from flink_big import snapshots
    folder, manifest = snapshots()
    snaps = manifest["snapshots"]
    runs: dict[str, list[float]] = {name: [] for name in NAMES}
    counts: dict[str, int] = {}
    for rep in range(REPS):
        for name in NAMES:  # alternately: the ratios compare runs under the same conditions
            progress(f"flink: {NAMES[name]}, run {rep + 1} of {REPS}")
            seconds, entries = timed(str(folder / snaps[name]["path"]))
            runs[name].append(seconds)
            if counts.setdefault(name, entries) != entries:
                raise AssertionError(f"{name}: {entries} entries, then {counts[name]}")
    rate = {name: counts[name] / median(runs[name]) for name in NAMES}
    for name in ("heap-checkpoint", "canonical-savepoint"):
        section.rows.append(Row(f"flink big {NAMES[name]}: open + entries/s vs 300k/s",
                                rate[name], TARGET, "ops/s", Bar(">=", 1.0, ">= 300k/s")))
    section.rows.append(Row("flink big RocksDB incremental vs canonical savepoint, entries/s",
                            rate["rocksdb-incremental-checkpoint"], rate["canonical-savepoint"],
                            "ops/s", Bar(">=", ROCKSDB_BAR, f">= {ROCKSDB_BAR}")))
    for name in NAMES:
        size = snaps[name]["bytes"]
        section.rows.append(Row(f"flink big {NAMES[name]}: bytes/s (vs canonical's)",
                                size / median(runs[name]),
                                snaps["canonical-savepoint"]["bytes"]
                                / median(runs["canonical-savepoint"]), "B/s"))
    anchor = manifest.get("jvm_anchor") or {}
    if anchor.get("flink_restore_seconds"):
        statectl_ns = median(runs["canonical-savepoint"]) * 1e9
        section.rows.append(Row("flink big canonical savepoint: statectl decode vs Flink "
                                "restore (time)", statectl_ns,
                                anchor["flink_restore_seconds"] * 1e9, "ns"))
        section.notes.append(
            f"JVM anchor: Flink 2.3 restored the canonical savepoint ({anchor['keys']:,} keys, "
            f"{anchor['bytes'] / 1e6:.0f} MB) in {anchor['flink_restore_seconds']:.1f} s at "
            f"parallelism {snaps['canonical-savepoint']['parallelism']} ("
            f"{anchor.get('cpu_seconds_until_restored', 0):.0f} CPU s until restored; "
            f"the generation run's log); statectl decodes it in one process")
    for name in NAMES:
        section.notes.append(
            f"{NAMES[name]}: {counts[name]:,} entries, {snaps[name]['bytes'] / 1e6:.0f} MB in "
            f"{snaps[name]['files']} files; runs {', '.join(f'{s:.1f}' for s in runs[name])} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    section.notes.append(f"peak RSS of the benchmark process: {peak / 1e9:.1f} GB (a Flink "
                         "snapshot opened locally is held decoded in memory)")
    section.notes.append(f"snapshots: {folder} (bench/flink_big.py; {manifest['input']['keys']:,} "
                         f"keys, {manifest['input']['records']:,} input records)")
    section.raw.update({"folder": str(folder), "entries": counts, "seconds": runs,
                        "bytes": {n: snaps[n]["bytes"] for n in NAMES}, "jvm_anchor": anchor,
                        "peak_rss_bytes": peak})
    return section
