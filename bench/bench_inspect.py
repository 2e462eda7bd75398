"""Inspect at scale: what ``statectl inspect`` reads of a 1 GB checkpoint, view by view.

One benchmark, ``inspect`` (``bench/run.py`` runs it with the others). A checkpoint of string
keys with one ``bytes`` value state (4 KiB of random, incompressible bytes per key), max
parallelism 128, parallelism 4, written by ``write_checkpoint`` from four backends: 256k keys,
about 1 GB (quick: 4k keys, about 16 MB). Each view is run on the checkpoint opened through
``formats.storage.io_stats.CountingHandler`` (a ``pyarrow.fs.PyFileSystem`` over the local disk that
counts the bytes read through it), against the total bytes of the checkpoint's files:

* the summary (``inspect PATH``: ``open_checkpoint`` + ``summarize``), bar <= 1%;
* the key-group histogram (``inspect --key-groups``), bar <= 1%: metadata and footers only;
* one key (``inspect --key K``): its key group's row groups in one file (information);
* the largest entries (``inspect --top 10``): reads every keyed file (information).

Times are reported in the notes.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pyarrow.fs as pafs
from bench_state_maps import SEED, Bar, Config, Row, Section, progress

from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.inspect import summarize
from formats.ops.key_group_stats import key_group_histograms
from formats.ops.state_scan import largest_entries, lookup
from formats.statectl.writer import write_checkpoint
from formats.storage.io_stats import CountingHandler
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state

MAX_PARALLELISM = 128
PARALLELISM = 4
VALUE_BYTES = 4096
BYTES = cast(Any, "bytes")


def make_checkpoint(location: str, keys: int, seed: int) -> list[str]:
    """Write the benchmark's checkpoint at ``location``; returns its keys."""
    rng = random.Random(seed)
    names = [f"key-{i:08d}" for i in range(keys)]
    ranges = [compute_key_group_range_for_operator_index(MAX_PARALLELISM, PARALLELISM, i)
              for i in range(PARALLELISM)]
    backends = [HeapKeyedStateBackend("string", max_parallelism=MAX_PARALLELISM,
                                      key_group_range=r) for r in ranges]
    states = [b.get_value_state(value_state("payload", "bytes")) for b in backends]
    for name in names:
        group = assign_to_key_group(name, MAX_PARALLELISM, "string")
        owner = next(i for i, r in enumerate(ranges) if group in r)
        backends[owner].set_current_key(name)
        states[owner].update(rng.randbytes(VALUE_BYTES))
    subtasks = [SubtaskSnapshot(i, keyed=b.snapshot()) for i, b in enumerate(backends)]
    write_checkpoint(location, 1, [OperatorSnapshot("bench", "bench", PARALLELISM,
                                                    MAX_PARALLELISM, subtasks)])
    return names


def measured(location: str, view: Callable[[Checkpoint], object]) -> tuple[int, float, int]:
    """(bytes read, seconds, files opened) of ``view`` on a freshly opened checkpoint."""
    handler = CountingHandler()
    start = time.perf_counter()
    view(open_checkpoint(location, filesystem=pafs.PyFileSystem(handler)))
    seconds = time.perf_counter() - start
    return sum(handler.counts.values()), seconds, len(handler.counts)


def bench_inspect(cfg: Config) -> Section:
    section = Section("inspect")
    keys = cfg.snapshot_entries // 4 if cfg.snapshot_entries >= 1_000_000 else 4_096
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory:
        location = str(Path(directory) / "chk")
        progress(f"inspect: writing a checkpoint of {keys:,} keys x {VALUE_BYTES} bytes")
        names = make_checkpoint(location, keys, SEED + 40)
        total = sum(os.path.getsize(os.path.join(root, f))
                    for root, _, files in os.walk(location) for f in files)
        key = names[len(names) // 2]
        views: list[tuple[str, Callable[[Checkpoint], object], Bar | None]] = [
            ("summary", lambda c: summarize(c, location), Bar("<=", 0.01, "<= 1%")),
            ("--key-groups", key_group_histograms, Bar("<=", 0.01, "<= 1%")),
            ("--key K", lambda c: lookup(c, key), None),
            ("--top 10", lambda c: largest_entries(c, 10), None),
        ]
        for name, view, bar in views:
            progress(f"inspect: {name}")
            read, seconds, opened = measured(location, view)
            section.rows.append(Row(f"inspect {name}: bytes read / total", read, total, BYTES,
                                    bar))
            section.raw[name] = {"bytes_read": read, "total_bytes": total, "seconds": seconds,
                                 "files_opened": opened}
            section.notes.append(f"inspect {name}: {read:,} of {total:,} bytes read, "
                                 f"{opened} files opened, {seconds:.2f} s")
    section.notes.insert(0, f"inspect: a {total / 1e9:.2f} GB checkpoint, {keys:,} string keys "
                            f"with {VALUE_BYTES}-byte values, parallelism {PARALLELISM}, max "
                            f"parallelism {MAX_PARALLELISM}; bytes counted through "
                            "formats.storage.io_stats.CountingHandler; lower is better")
    return section
