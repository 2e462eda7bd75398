"""Spark: the max-parallelism change on the local engine, Spark ``local[1]`` and ``local[2]``.

One benchmark, ``spark`` (``bench/run.py --only spark``; part of ``make bench``). Checkpoints
of string keys with one int64 value state, max parallelism 128, parallelism 4, are written
directly with the format's writer (sorted Arrow columns; building 5M entries through a backend
would take minutes), at 0.5M, 2M and 5M entries (quick: 50k and 200k). Each is rescaled to
max parallelism 256 and parallelism 3 (plan, which hashes every key, plus the rewrite) by:

* the local engine (``rescale_checkpoint`` in this process);
* Spark ``local[1]`` on 1 CPU, ``local[1]`` with all the machine's CPUs, and ``local[2]`` on
  2 CPUs (``--engine spark``: tasks hash, Spark shuffles, tasks write), each in a fresh process
  (a fresh JVM and Python workers) whose CPU set limits the whole run; session start-up
  excluded (reported in the notes).

Rows: entries/s of Spark ``local[2]`` vs the local engine (information: where Spark overtakes
is the size at which this passes 1), Spark's scaling from 1 to 2 cores at 5M entries
(``local[2]`` on 2 CPUs vs ``local[1]`` on 1 CPU; bar >= 1.5x) and, for information,
``local[2]`` vs ``local[1]`` left all CPUs (its JVM threads, Python daemon and driver then
use the second core too). Every output is checked with ``statectl diff`` against the source
on the smallest size. One run per point, except the largest size: best of ``REPEATS`` runs in
a row for every engine (the bar's point). Single runs of ``local[2]`` there varied by 20%:
successive runs get faster as the JVM warms up (its JIT compiles the shuffle's code), and
anything else running on this 2-CPU machine takes one of its two cores. Every run is
reported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from bench_state_maps import Bar, Config, Row, Section, progress

from formats.columns import keyed_schema
from formats.commit import staged
from formats.diff import diff_checkpoints
from formats.key_hash import key_groups

# The checkpoint is assembled from the format's own building blocks (private to formats):
# a backend of 5M entries would dominate the benchmark's time.
from formats.open import open_checkpoint
from formats.rescale import plan_checkpoint, rescale_checkpoint
from formats.statectl.publish import publish
from formats.statectl.writer import ParquetFileWriter
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorMetadata,
    StateMetadata,
    SubtaskMetadata,
)
from statecore.key_groups import compute_key_group_range_for_operator_index

M, P, NEW_M, NEW_P = 128, 4, 256, 3
#: Runs at the largest size, best kept (see the module doc).
REPEATS = 3
STATE = StateMetadata("amount", "keyed", "value", "int64", None, "void", None)


def make_checkpoint(location: str, entries: int) -> None:
    keys = pa.array([f"key-{i:010d}" for i in range(entries)], pa.string())
    groups = key_groups(keys, "string", M)
    order = np.argsort(groups, kind="stable")
    groups = groups[order]
    table = pa.table({"key_group": pa.array(groups, pa.int32()), "key": keys.take(order),
                      "value": pa.array(np.arange(entries, dtype=np.int64)[order])})
    schema = keyed_schema(STATE, "string")
    fs_location = str(Path(location).resolve())
    import pyarrow.fs as pafs
    fs = pafs.LocalFileSystem()
    with staged(fs, fs_location, location, "writing") as staging:
        files, subtasks = [], []
        for i in range(P):
            kg = compute_key_group_range_for_operator_index(M, P, i)
            lo, hi = np.searchsorted(groups, [kg.start, kg.end + 1])
            writer = ParquetFileWriter(fs, staging, f"op-0/keyed/0/{i}.parquet", schema)
            rows = []
            sub = groups[lo:hi]
            values, starts, counts = np.unique(sub, return_index=True, return_counts=True)
            for g, s, c in zip(values, starts, counts, strict=True):
                rows.append(KeyGroupRows(int(g), int(s), int(c)))
                writer.write_table(table.slice(lo + int(s), int(c)))
            files.append(writer.close())
            subtasks.append(SubtaskMetadata(i, kg, (KeyedStateHandle(
                "amount", f"op-0/keyed/0/{i}.parquet", kg, tuple(rows)),), ()))
        publish(fs, staging, fs_location, CheckpointMetadata(
            1, CheckpointKind.CHECKPOINT, 0, (OperatorMetadata(
                "bench", "bench", P, M, "string", (STATE,), tuple(subtasks)),), tuple(files)))


def rescale(source: str, out: str, spark: Any = None) -> float:
    from formats.spark.jobs import spark_keyed_writer, spark_rehash_counter
    start = time.perf_counter()
    checkpoint = open_checkpoint(source)
    plan = plan_checkpoint(checkpoint, NEW_P, NEW_M,
                           None if spark is None else spark_rehash_counter(spark))
    rescale_checkpoint(checkpoint, out, plan,
                       keyed_writer=None if spark is None else spark_keyed_writer(spark))
    return time.perf_counter() - start


#: Spark runs: (label, master, CPUs the whole run may use, None = all the machine's). Each runs
#: in a fresh process (and so a fresh JVM and Python workers, which inherit its CPU set).
SPARK_RUNS = (("local[1]", "local[1]", 1), ("local[1], all CPUs", "local[1]", None),
              ("local[2]", "local[2]", 2))


def bench_spark(cfg: Config) -> Section:
    section = Section("spark")
    sizes = [500_000, 2_000_000, 5_000_000] if cfg.snapshot_entries >= 1_000_000 else [
        50_000, 200_000]
    seconds: dict[tuple[str, int], float] = {}
    spread: dict[tuple[str, int], list[float]] = {}  # every run at the largest size
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as name:
        directory = Path(name)
        for n in sizes:
            progress(f"spark: writing a checkpoint of {n:,} entries")
            make_checkpoint(str(directory / f"src-{n}"), n)
            progress(f"spark: local engine, {n:,}")
            runs = []
            for _ in range(REPEATS if n == sizes[-1] else 1):
                runs.append(rescale(str(directory / f"src-{n}"), str(directory / "out")))
                shutil.rmtree(directory / "out")
            seconds["local", n] = min(runs)
            if len(runs) > 1:
                spread["local", n] = runs
        for label, master, cpus in SPARK_RUNS:
            progress(f"spark: {label}, sizes {', '.join(f'{n:,}' for n in sizes)}")
            report = spark_run(master, cpus, directory, sizes)
            for n, took in report["seconds"].items():
                seconds[label, int(n)] = took
            for n, runs in report["runs"].items():
                spread[label, int(n)] = runs
            section.notes.append(
                f"spark: {label}: master {report['master']}, CPUs {report['cpus']}, session "
                f"start {report['session_seconds']:.1f} s (excluded)")
    big = sizes[-1]
    for n in sizes:
        section.rows.append(Row(f"max-p change {n / 1e6:g}M: spark[2] vs local",
                                n / seconds["local[2]", n], n / seconds["local", n], "ops/s"))
    section.rows.append(Row(f"max-p change {big / 1e6:g}M: spark 2 cores vs 1",
                            big / seconds["local[2]", big], big / seconds["local[1]", big],
                            "ops/s", Bar(">=", 1.5, ">= 1.5")))
    section.rows.append(Row(f"max-p change {big / 1e6:g}M: spark[2] vs [1] on all CPUs",
                            big / seconds["local[2]", big],
                            big / seconds["local[1], all CPUs", big], "ops/s"))
    overtakes = [n for n in sizes if seconds["local[2]", n] < seconds["local", n]]
    section.notes += [
        f"spark: {engine} {n:,} entries: {seconds[engine, n]:.1f} s, "
        f"{n / seconds[engine, n] / 1e3:.0f}k entries/s"
        for n in sizes for engine in ["local", *(label for label, _, _ in SPARK_RUNS)]]
    section.notes += [
        f"spark: {engine} {n:,} entries, best of {len(runs)} runs: "
        + ", ".join(f"{s:.2f}" for s in runs) + " s"
        for (engine, n), runs in spread.items()]
    section.notes.append("spark: Spark local[2] overtakes the local engine at "
                         + (f"{overtakes[0]:,} entries" if overtakes
                            else f"none of the sizes measured (up to {big:,})"))
    section.notes.append(
        "spark: cores: each Spark run is a fresh process whose CPU set (sched_setaffinity, "
        "inherited by the JVM and the Python workers) is what it may use: 'local[1]' = one "
        "task slot on 1 CPU, 'local[2]' = two task slots on 2 CPUs, the scaling bar's pair. "
        "'local[1], all CPUs' = one task slot with the machine's CPUs free for the JVM's "
        "own threads (GC, JIT, shuffle), the Python daemon and the driver: more than one "
        "core's worth, so its ratio understates scaling")
    section.raw = {f"{engine} {n}": s for (engine, n), s in seconds.items()}
    return section


def spark_run(master: str, cpus: int | None, directory: Path, sizes: list[int]
              ) -> dict[str, Any]:
    """Rescale every size on Spark ``master`` in a fresh process limited to ``cpus`` CPUs."""
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if cpus is not None and available and cpus > len(available):
        raise RuntimeError(f"{master} on {cpus} CPUs: this machine has {len(available)}")

    def pin() -> None:
        if cpus is not None and available:
            os.sched_setaffinity(0, available[:cpus])

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "bench")]))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--spark-run", master,
         str(directory), *map(str, sizes)],
        env=env, preexec_fn=pin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"spark run {master} failed:\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _spark_run_main(master: str, directory: Path, sizes: list[int]) -> None:
    from formats.spark.session import spark_session
    started = time.perf_counter()
    spark = spark_session(master, {"spark.sql.shuffle.partitions": "8"})
    actual = spark.sparkContext.master
    assert actual == master, f"asked for {master}, got {actual}"
    session_seconds = time.perf_counter() - started
    seconds, every = {}, {}
    for n in sizes:
        out = str(directory / f"out-{master}")
        runs = []
        for _ in range(REPEATS if n == sizes[-1] else 1):
            runs.append(rescale(str(directory / f"src-{n}"), out, spark))
            if n == sizes[0]:
                same = diff_checkpoints(open_checkpoint(str(directory / f"src-{n}")),
                                        open_checkpoint(out)).equal
                assert same, f"{master}: the rescaled checkpoint differs"
            shutil.rmtree(out)
        seconds[n] = min(runs)
        if len(runs) > 1:
            every[n] = runs
    spark.stop()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(json.dumps({"master": actual, "cpus": cpus, "session_seconds": session_seconds,
                      "seconds": seconds, "runs": every}))


if __name__ == "__main__" and sys.argv[1:2] == ["--spark-run"]:
    _spark_run_main(sys.argv[2], Path(sys.argv[3]), [int(n) for n in sys.argv[4:]])
