"""Decoding real Flink snapshots: entries/s of ``open_checkpoint`` on the fixtures.

One benchmark, ``flink`` (``bench/run.py --only flink``; part of ``make bench``). The snapshots
are those the fixture sets' ``expected.json`` files list (``$STATECTL_FLINK_FIXTURES``, default
``../shared/flink-fixtures``), in two groups:

* canonical savepoints (``KeyGroupsSavepointStateHandle``: key/value pairs);
* heap snapshots: checkpoints and native savepoints (the hashmap backend's full-snapshot
  format).

Each group's snapshots are opened round-robin until at least 1M entries (quick: 100k) are
decoded. Opening decodes everything: ``_metadata``, every keyed and operator state stream,
serializer snapshots, keys, namespaces and values, and builds the shared metadata model;
entries are the decoded rows (keyed: one per key, namespace and state; operator state: one per
element). The fixtures are small (about 600 entries per snapshot), so fixed costs per snapshot
(reading files, headers, serializer snapshots, the model) weigh in; the notes give the time
spent in the state decoders alone.

Two rows per group: the whole open (the bar: >= 200k entries/s; the "baseline" column is that
target, not a measurement), and the keyed-stream decoders alone (``decode_keyed_stream``:
headers with their serializer snapshots, then every entry; information) — the rate a large
snapshot approaches, where the fixed costs per snapshot no longer count. Reported as
measured, PASS or MISS.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from bench_state_maps import Bar, Config, Row, Section, progress

from formats.flink import keyed as flink_keyed
from formats.open import open_checkpoint
from statecore.checkpoint import CheckpointMetadata

TARGET = 200_000
ROOT = Path(__file__).resolve().parent.parent


def fixture_snapshots() -> dict[str, list[str]]:
    base = Path(os.environ.get("STATECTL_FLINK_FIXTURES",
                               ROOT.parent / "shared" / "flink-fixtures"))
    groups: dict[str, list[str]] = {"canonical savepoints": [], "heap snapshots": []}
    for fixture_set in sorted(p for p in base.iterdir() if (p / "expected.json").is_file()):
        for snap in json.loads((fixture_set / "expected.json").read_text())["snapshots"]:
            group = "canonical savepoints" if snap["format"] == "canonical" else "heap snapshots"
            groups[group].append(str(fixture_set / snap["path"]))
    return groups


def entries(metadata: CheckpointMetadata) -> int:
    return sum(g.row_count for op in metadata.operators for st in op.subtasks
               for h in st.keyed for g in h.rows) + sum(
        h.element_count for op in metadata.operators for st in op.subtasks for h in st.operator)


def bench_flink(cfg: Config) -> Section:
    section = Section("flink")
    goal = 1_000_000 if cfg.snapshot_entries >= 1_000_000 else 100_000
    decoder_seconds = [0.0]
    real_decode = flink_keyed.decode_keyed_stream

    def timed_decode(*args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return real_decode(*args, **kwargs)
        finally:
            decoder_seconds[0] += time.perf_counter() - started

    for group, locations in fixture_snapshots().items():
        if not locations:
            section.notes.append(f"{group}: no fixture snapshots found")
            continue
        progress(f"flink: decoding {group} until {goal:,} entries")
        # warm-up (imports, caches) and each snapshot's entries, counted outside the timing
        sizes = [entries(open_checkpoint(location).metadata) for location in locations]
        decoded = opened = 0
        seconds = decoder_seconds[0] = 0.0
        import formats.flink.checkpoint as flink_checkpoint
        flink_checkpoint.decode_keyed_stream = timed_decode  # type: ignore[assignment]
        try:
            while decoded < goal:
                index = opened % len(locations)
                started = time.perf_counter()
                open_checkpoint(locations[index])
                seconds += time.perf_counter() - started
                decoded += sizes[index]
                opened += 1
        finally:
            flink_checkpoint.decode_keyed_stream = real_decode  # type: ignore[assignment]
        rate = decoded / seconds
        section.rows.append(Row(f"flink: open {group}, entries/s vs 200k/s", rate, TARGET,
                                "ops/s", Bar(">=", 1.0, ">= 200k/s")))
        section.rows.append(Row(f"flink: {group}, keyed decoders alone", decoded /
                                decoder_seconds[0], TARGET, "ops/s"))
        section.notes.append(
            f"{group}: {len(locations)} snapshots opened {opened} times, {decoded:,} entries "
            f"in {seconds:.2f} s ({seconds / opened * 1000:.1f} ms per snapshot); keyed "
            f"stream decoders alone: {decoder_seconds[0]:.2f} s of it")
        section.raw[group] = {"snapshots": len(locations), "opened": opened,
                              "entries": decoded, "seconds": seconds,
                              "decoder_seconds": decoder_seconds[0]}
    return section
