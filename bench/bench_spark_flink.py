"""Spark on a big real Flink snapshot: export and the max-parallelism rewrite, 1 core vs 2.

One benchmark, ``spark-flink`` (``bench/run.py --only spark-flink``; part of ``make bench``), on
the big heap checkpoint of :mod:`flink_big` (real Flink 2.3, 1,000,000 String keys, Long, List
and Map state plus timers and operator state; ~140 MB). ``--quick`` uses a small fixture
checkpoint of ``$STATECTL_FLINK_FIXTURES`` instead (a smoke test: no bar applies).

Timed, per engine, from opening the snapshot to the published output (session start-up
excluded, reported in the notes):

* export: ``open_checkpoint`` (Spark: ``_metadata``, headers, operator state; no keyed state
  decoded in the driver) and ``export`` to Parquet (Spark: tasks decode key-group pieces and
  write part files);
* rewrite: the max-parallelism change 128 -> 256 at parallelism 2 (``rescale
  --max-parallelism 256 -p 2 --out``: plan, which counts every key's new key group, and the
  canonical savepoint; Spark: a counting scan, then tasks decode, re-hash and encode, Spark
  shuffles the pairs, a task per new subtask writes its stream).

Each engine runs in a fresh process (a fresh JVM and Python workers) whose CPU set is what it
may use: Spark ``local[1]`` on 1 CPU and ``local[2]`` on 2 CPUs (the bar's pair, >= 1.6x), and
the local engine on 1 CPU (information). Best of ``REPEATS`` runs each. Outputs are checked:
every run exports the same rows and rewrites the same entries as the local engine.
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

from bench_state_maps import Bar, Config, Row, Section, progress

ROOT = Path(__file__).resolve().parent.parent
BAR = 1.6
REPEATS = 2
NEW_M, NEW_P = 256, 2
#: (label, master or None for the local engine, CPUs the whole run may use)
RUNS = (("local engine", None, 1), ("spark local[1]", "local[1]", 1),
        ("spark local[2]", "local[2]", 2))
WORK = ("export", "rewrite")


def big_checkpoint() -> tuple[str, dict[str, Any]]:
    from flink_big import snapshots
    folder, manifest = snapshots()
    snap = manifest["snapshots"]["heap-checkpoint"]
    return str(folder / snap["path"]), snap


def small_checkpoint() -> str:
    base = Path(os.environ.get("STATECTL_FLINK_FIXTURES", ROOT.parent / "shared" /
                               "flink-fixtures"))
    fixture_set = base / "java-mp128-allfiles"
    snap = next(s for s in json.loads((fixture_set / "expected.json").read_text())["snapshots"]
                if s["kind"] == "checkpoint" and s["parallelism"] == 2)
    return str(fixture_set / snap["path"])


def bench_spark_flink(cfg: Config) -> Section:
    section = Section("spark-flink")
    big = cfg.snapshot_entries >= 1_000_000
    if big:
        source, snap = big_checkpoint()
        described = f"the big heap checkpoint ({snap['bytes'] / 1e6:.0f} MB, {source})"
    else:
        source = small_checkpoint()
        described = f"a fixture checkpoint ({source})"
    reports = {}
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as name:
        for label, master, cpus in RUNS:
            progress(f"spark-flink: {label} on {cpus} CPU(s): export and rewrite of "
                     f"{described}")
            reports[label] = run_pinned(master, cpus, source, Path(name), REPEATS if big else 1)
    seconds = {(label, work): min(reports[label][work]) for label, _, _ in RUNS
               for work in WORK}
    for work in WORK:
        for label, _, _ in RUNS[1:]:
            if reports[label]["counts"][work] != reports["local engine"]["counts"][work]:
                raise AssertionError(f"{label} {work}: {reports[label]['counts'][work]} "
                                     f"entries, the local engine "
                                     f"{reports['local engine']['counts'][work]}")
    entries = {work: reports["local engine"]["counts"][work] for work in WORK}
    for work in WORK:
        what = "export" if work == "export" else f"max-p change 128->{NEW_M} rewrite"
        rate = {label: entries[work] / seconds[label, work] for label, _, _ in RUNS}
        section.rows.append(Row(f"flink {what}: spark 2 cores vs 1", rate["spark local[2]"],
                                rate["spark local[1]"], "ops/s",
                                Bar(">=", BAR, f">= {BAR}") if big else None))
        section.rows.append(Row(f"flink {what}: spark[2] vs local engine",
                                rate["spark local[2]"], rate["local engine"], "ops/s"))
    for label, master, cpus in RUNS:
        report = reports[label]
        section.notes.append(
            f"spark-flink: {label}: {cpus} CPU(s)"
            + (f", session start {report['session_seconds']:.1f} s (excluded)" if master else "")
            + "; " + "; ".join(f"{work} " + ", ".join(f"{s:.1f}" for s in report[work]) + " s"
                               for work in WORK))
    section.notes.append(f"spark-flink: {described}; export writes {entries['export']:,} rows, "
                         f"the rewrite {entries['rewrite']:,} entries (every run the same)")
    section.raw.update({"source": source, "entries": entries,
                        "seconds": {f"{label} {work}": s for (label, work), s in seconds.items()},
                        "runs": reports})
    return section


def run_pinned(master: str | None, cpus: int, source: str, directory: Path, repeats: int
               ) -> dict[str, Any]:
    """Export and rewrite ``source`` ``repeats`` times each in a fresh process on ``cpus``."""
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if available and cpus > len(available):
        raise RuntimeError(f"{cpus} CPUs asked for: this machine has {len(available)}")

    def pin() -> None:
        if available:
            os.sched_setaffinity(0, available[:cpus])

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench")]))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--run", master or "local", source,
         str(directory), str(repeats)],
        env=env, preexec_fn=pin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"run {master or 'local'} failed:\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _run_main(master: str, source: str, directory: Path, repeats: int) -> None:
    from formats.engines import open_engine
    from formats.ops.export import export_checkpoint
    from formats.ops.rescale import plan_checkpoint, rescale_checkpoint

    session_seconds = 0.0
    if master == "local":
        engine = open_engine("local")
    else:
        engine = open_engine("spark", master)
        started = time.perf_counter()
        spark = engine.session  # type: ignore[attr-defined]
        assert spark.sparkContext.master == master
        session_seconds = time.perf_counter() - started
    report: dict[str, Any] = {"session_seconds": session_seconds, "export": [], "rewrite": [],
                              "counts": {}}
    out = directory / f"out-{master}"
    for _ in range(repeats):
        started = time.perf_counter()
        checkpoint = engine.open_checkpoint(source, count=False)
        result = export_checkpoint(checkpoint, str(out), state_writer=engine.state_writer(
            checkpoint))
        report["export"].append(time.perf_counter() - started)
        report["counts"]["export"] = result.rows
        shutil.rmtree(out)
        del checkpoint
        started = time.perf_counter()
        checkpoint = engine.open_checkpoint(source, max_parallelism=NEW_M)
        plan = plan_checkpoint(checkpoint, NEW_P, NEW_M, engine.rehash_counter())
        written = rescale_checkpoint(checkpoint, str(out), plan)
        report["rewrite"].append(time.perf_counter() - started)
        report["counts"]["rewrite"] = written.entries_written
        shutil.rmtree(out)
        del checkpoint
    print(json.dumps(report))


if __name__ == "__main__" and sys.argv[1:2] == ["--run"]:
    _run_main(sys.argv[2], sys.argv[3], Path(sys.argv[4]), int(sys.argv[5]))
