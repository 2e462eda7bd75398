"""Rescale: metadata-only cost against state size, and the max-parallelism change's rate.

One benchmark, ``rescale`` (``bench/run.py`` runs it with the others), on checkpoints of
string keys with one int64 value state, max parallelism 128, parallelism 4 (made by a
backend at parallelism 1 and a compact rescale to 4):

* metadata-only rescale 4 -> 3 (``open_checkpoint`` + ``plan_checkpoint`` +
  ``rescale_checkpoint``, what ``statectl rescale`` runs) of a checkpoint with 10x the
  entries against the same of 1x: the time ratio (bar <= 1.5: the cost must not grow with
  the state).
* max-parallelism change 128 -> 256 and parallelism 4 -> 3 on the local engine (plan, which
  reads and hashes the keys, plus the rewrite): entries/s against the issue's first bar of
  250k entries/s (ratio >= 1); the plan step and the rewrite are also reported alone.

Sizes: ``snapshot_entries // 10`` entries at 1x (100k; quick 5k), the max-parallelism change on
``snapshot_entries`` entries (1M; quick 50k); medians of ``snapshot_reps`` runs.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

from bench_backend import fill, new_backend, random_string_keys
from bench_state_maps import NANOS, SEED, Bar, Config, Row, Section, median, progress

from formats.open import open_checkpoint
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot

MAX_PARALLELISM = 128
PARALLELISM = 4
#: The issue's first bar for the local engine's max-parallelism change.
REHASH_BAR_ENTRIES_PER_S = 250_000


def make_checkpoint(directory: Path, entries: int, seed: int) -> str:
    """A checkpoint of ``entries`` string keys at parallelism 4, max parallelism 128."""
    keys = random_string_keys(random.Random(seed), entries)
    backend, state = new_backend("copy_on_write", MAX_PARALLELISM)
    fill(backend, state, keys)
    single = str(directory / f"p1-{entries}")
    write_checkpoint(single, 1, [OperatorSnapshot("bench", "bench", 1, MAX_PARALLELISM, [
        SubtaskSnapshot(0, keyed=backend.snapshot())])])
    source = open_checkpoint(single)
    target = str(directory / f"p{PARALLELISM}-{entries}")
    rescale_checkpoint(source, target, plan_checkpoint(source, PARALLELISM), compact=True)
    shutil.rmtree(single)
    return target


def time_rescale(source: str, out: Path, parallelism: int,
                 max_parallelism: int | None = None) -> tuple[int, int]:
    """(ns of the whole rescale, ns of open + plan alone); the output is removed after."""
    start = time.perf_counter_ns()
    checkpoint = open_checkpoint(source)
    plan = plan_checkpoint(checkpoint, parallelism, max_parallelism)
    planned = time.perf_counter_ns()
    rescale_checkpoint(checkpoint, str(out), plan)
    end = time.perf_counter_ns()
    shutil.rmtree(out)
    return end - start, planned - start


def bench_rescale(cfg: Config) -> Section:
    section = Section("rescale")
    small = max(1, cfg.snapshot_entries // 10)
    big_rehash = cfg.snapshot_entries
    reps = cfg.snapshot_reps
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as name:
        directory = Path(name)
        progress(f"rescale: writing checkpoints of {small:,} and {small * 10:,} entries")
        one_x = make_checkpoint(directory, small, SEED + 30)
        ten_x = make_checkpoint(directory, small * 10, SEED + 31)
        times: dict[str, list[int]] = {"1x": [], "10x": []}
        for rep in range(reps):
            for label, source in (("1x", one_x), ("10x", ten_x)):  # interleaved, side by side
                times[label].append(time_rescale(source, directory / f"out-{rep}", 3)[0])
        t1, t10 = median(times["1x"]), median(times["10x"])
        section.rows.append(Row(
            "metadata-only rescale, time 10x/1x",
            t10, t1, "ns", Bar("<=", 1.5, "<= 1.5")))
        section.notes.append(f"metadata-only rescale: {t1 / 1e6:.1f} ms at {small:,} entries, "
                             f"{t10 / 1e6:.1f} ms at {small * 10:,} (median of {reps})")

        progress(f"rescale: writing a checkpoint of {big_rehash:,} entries")
        source = ten_x if big_rehash == small * 10 else make_checkpoint(
            directory, big_rehash, SEED + 32)
        total_ns, plan_ns = [], []
        for rep in range(max(1, reps - 2)):
            progress(f"rescale: max parallelism 128 -> 256, run {rep + 1}")
            whole, planned = time_rescale(source, directory / f"rehash-{rep}", 3, 256)
            total_ns.append(whole)
            plan_ns.append(planned)
        whole, planned = median(total_ns), median(plan_ns)
        rate = big_rehash * NANOS / whole
        section.rows.append(Row(
            "max-p change entries/s vs 250k/s bar",
            rate, REHASH_BAR_ENTRIES_PER_S, "ops/s", Bar(">=", 1.0, ">= 1")))
        section.rows.append(Row(
            "  max-p change: plan vs rewrite",
            big_rehash * NANOS / planned, big_rehash * NANOS / max(1, whole - planned),
            "ops/s"))
        section.notes.append(
            f"max-parallelism change of {big_rehash:,} entries: {whole / 1e9:.2f} s "
            f"({rate:,.0f} entries/s), plan {planned / 1e9:.2f} s, rewrite "
            f"{(whole - planned) / 1e9:.2f} s")
        section.raw = {"metadata_only_ns": times, "rehash_total_ns": total_ns,
                       "rehash_plan_ns": plan_ns, "entries_small": small,
                       "entries_rehash": big_rehash}
    return section
