"""Peers for ``statectl build``: the same keyed aggregation in Flink SQL, PyFlink and statectl.

One benchmark, ``peers`` (``bench/run.py --only peers``; part of ``make bench``). The job: count
and sum per key of CSV records ``key,value`` (string keys ``k<rank>``, 20,000 ranks drawn with
Zipf-like weights ``1/rank`` from a fixed seed, so a few keys hold most records; int values
0..999), parallelism 2, heap state, run by

* ``statectl build --key key --agg count --agg sum:value --parallelism 2`` (this repository's
  code, ``python -m cli.main``), which writes a checkpoint of the final state;
* Flink SQL, the JVM peer: ``INSERT INTO blackhole SELECT k, COUNT(*), SUM(v) FROM src GROUP BY
  k`` in streaming mode on the hashmap backend (``bench/peers/PeerSql.java``, a plain Java main
  on Flink 2.3's jars, with the MiniCluster a local TableEnvironment starts);
* Flink SQL with mini-batch and local-global aggregation (``PeerSql.java mini-batch``:
  Flink's own folding of records per key before the state; information);
* PyFlink DataStream, the Python peer: a ``KeyedProcessFunction`` with two Python
  ``ValueState`` (``bench/peers/peer_pyds.py``), configured fairly: ``python.execution-mode:
  thread`` and a Python state cache of 4x the keys (``python.state.cache-size``; PyFlink's
  default of 1000 is ~10x slower still). At the first size only: at ~25-35k records/s, 10M
  records would take 5-7 minutes a run.

The records are split into two files so that both of Flink's source subtasks read (a CSV file
is one split); statectl reads the same two files (with a header line). Every run is a fresh
process (one warm-up of nothing: the figures include JIT warm-up, as a user's run does), the
runs of the three interleaved, ``REPEATS`` rounds, best round kept per engine and size; every
run is in the notes and the raw JSON.

Two figures per run: records/s **end to end** (wall clock of the process, from exec to exit,
start-up included) and **excluding start-up**: for statectl, the time ``build`` measured itself
(``seconds`` of its JSON summary: opening and parsing the inputs, aggregating every record and
writing the final checkpoint — all but interpreter start-up and imports); for the Flink jobs,
from Flink's own log: from the moment the last task switched to RUNNING (deployed, state
backend and operators initialised) to the job's switch to FINISHED (the bounded source read to
its end and every record aggregated). Bars: statectl >= 1.2x Flink SQL end to end at 1M and
10M records; >= 0.5x Flink SQL excluding start-up. PyFlink is information, and so is statectl
with folding off (``build_state(fold=False)``: every record through the Python job, what
aggregations that cannot be folded take). Also information: records per CPU second (user +
system of the process, its threads and children, least of the rounds): on a shared machine it
varies less than wall time; the notes give every run's. Not for PyFlink: the JVM its Python
process starts is never reaped, so its CPU time is not counted anywhere.

Flink comes from the Flink venv (``$STATECTL_FLINK_VENV``, default ``.venv-flink``, made by
``make flink-venv``), never from the project's venv. The statectl checkpoint is checked after
each run (records counted per key and summed equal the input's totals).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from bench_state_maps import Bar, Config, Row, Section, progress

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
sys.path.insert(0, str(ROOT / "tests"))

from flink_restore import (  # noqa: E402
    FLINK_VERSION,
    JVM_OPTIONS,
    FlinkUnavailable,
    flink_venv,
    pyflink_lib,
)

MINI_BATCH = "Flink SQL mini-batch"
KEYS = 20_000
SEED = 20240601
PARALLELISM = 2
FILES = 2
#: Rounds of runs at each size (statectl, Flink SQL, PyFlink interleaved); best kept.
REPEATS = 3
#: PyFlink runs only up to this many records (see the module doc).
PYFLINK_MAX = 1_000_000
RUN_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Run:
    """One run of one engine: wall seconds of its process and of its work (start-up excluded)."""

    engine: str
    records: int
    wall: float
    work: float
    cpu: float | None  # None: not measurable (PyFlink's JVM is not reaped by its parent)
    detail: dict[str, Any]


def timed(command: list[str], env: dict[str, str], what: str
          ) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``command``: (its result, wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False,
                          timeout=RUN_TIMEOUT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, wall, cpu


# -- input ------------------------------------------------------------------------------------


def write_input(directory: Path, records: int) -> dict[str, int]:
    """``statectl/part-N.csv`` (header ``key,value``) and ``flink/part-N.csv`` (no header).

    Returns the input's totals (records, keys present, sum of values) to check results with.
    """
    rng = np.random.default_rng(SEED)
    weights = 1.0 / np.arange(1, KEYS + 1)
    ranks = rng.choice(KEYS, size=records, p=weights / weights.sum())
    values = rng.integers(0, 1000, size=records, dtype=np.int64)
    keys = pc.binary_join_element_wise("k", pc.cast(pa.array(ranks), pa.string()), "")
    table = pa.table({"key": keys, "value": values})
    for kind, header in (("statectl", True), ("flink", False)):
        (directory / kind).mkdir(parents=True)
        bounds = np.linspace(0, records, FILES + 1).astype(int)
        for i in range(FILES):
            pacsv.write_csv(table.slice(bounds[i], bounds[i + 1] - bounds[i]),
                            directory / kind / f"part-{i}.csv",
                            pacsv.WriteOptions(include_header=header, quoting_style="none"))
    return {"records": records, "keys": len(np.unique(ranks)), "sum": int(values.sum())}


# -- statectl -----------------------------------------------------------------------------------


def run_statectl(directory: Path, records: int, totals: dict[str, int], fold: bool = True
                 ) -> Run:
    inputs = sorted(str(p) for p in (directory / "statectl").glob("part-*.csv"))
    out = directory / "statectl-out"
    shutil.rmtree(out, ignore_errors=True)
    if fold:
        command = [sys.executable, "-m", "cli.main", "--output", "json", "build", *inputs,
                   "--key", "key", "--agg", "count", "--agg", "sum:value",
                   "--checkpoint-dir", str(out), "--parallelism", str(PARALLELISM)]
    else:  # the record-by-record path: build_state(fold=False), which the CLI does not offer
        command = [sys.executable, "-c", NO_FOLD_SCRIPT, str(out), *inputs]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done, wall, cpu = timed(command, env, "statectl build")
    summary = json.loads(done.stdout)
    assert summary["records"] == records and summary["folded"] == fold, summary
    check_statectl(summary["location"], totals)
    seconds = summary["phases"]
    shutil.rmtree(out)
    return Run("statectl" if fold else "statectl one by one", records, wall,
               seconds["setup"] + seconds["processing"] + seconds["final_checkpoint"], cpu,
               {"seconds": seconds})


NO_FOLD_SCRIPT = """
import json, sys
from formats.ops.build import build_state
s = build_state(sys.argv[2:], key="key", aggregations=["count", "sum:value"],
                checkpoint_dir=sys.argv[1], parallelism=2, fold=False)
print(json.dumps({"records": s.records, "folded": s.folded, "location": s.final_location,
                  "seconds": {"setup": s.seconds.setup, "processing": s.seconds.processing,
                              "final_checkpoint": s.seconds.final_checkpoint}}))
"""


def check_statectl(location: str, totals: dict[str, int]) -> None:
    """The checkpoint's counts and sums add up to the input's records and values."""
    from formats.open import open_checkpoint
    checkpoint = open_checkpoint(location)
    count = [v for _, _, _, v in checkpoint.keyed_entries("build", "count")]
    total = [v for _, _, _, v in checkpoint.keyed_entries("build", "sum_value")]
    found = {"records": sum(count), "keys": len(count), "sum": sum(total)}
    if found != totals:
        raise RuntimeError(f"statectl's checkpoint holds {found}, the input {totals}")


# -- Flink --------------------------------------------------------------------------------------


def compiled_sql_peer() -> tuple[Path, Path]:
    """(classes, Flink's lib folder): PeerSql.java compiled once per source and Flink jars."""
    lib = pyflink_lib()
    if shutil.which("javac") is None:
        raise FlinkUnavailable("javac (JDK 17) must be on PATH")
    hasher = hashlib.sha256((PEERS / "PeerSql.java").read_bytes())
    for jar in sorted(lib.glob("*.jar")):
        hasher.update(f"{jar.name}:{jar.stat().st_size}".encode())
    root = Path(os.environ.get("STATECTL_BENCH_CACHE",
                               Path.home() / ".cache" / "statectl-bench"))
    classes = root / f"peers-{hasher.hexdigest()[:16]}"
    if not (classes / "PeerSql.class").is_file():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="peers-", dir=root))
        done = subprocess.run(["javac", "-nowarn", "-d", str(staging), "-cp", f"{lib}/*",
                               str(PEERS / "PeerSql.java")],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise FlinkUnavailable(f"javac failed:\n{done.stdout}{done.stderr}")
        shutil.rmtree(classes, ignore_errors=True)
        staging.rename(classes)
    return classes, lib


_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def job_window(log_text: str) -> dict[str, float]:
    """Milestones of the (only) job in a Flink log, seconds since the epoch (local time).

    ``first_running`` / ``all_running``: the first and the last task's switch to RUNNING
    (ExecutionGraph: deployed, state backend and operators initialised); ``finished``: the
    job's switch to FINISHED.
    """
    running: list[float] = []
    finished = None
    for line in log_text.splitlines():
        m = _LOG_LINE.match(line)
        if not m:
            continue
        if "executiongraph.ExecutionGraph" not in line:
            continue
        t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if "switched from INITIALIZING to RUNNING" in line:
            running.append(t)
        elif "switched from state RUNNING to FINISHED" in line:
            finished = t
    if not running or finished is None:
        raise RuntimeError("the Flink log has no complete job (tasks RUNNING, job FINISHED)")
    return {"first_running": min(running), "all_running": max(running), "finished": finished}


def run_flink(engine: str, directory: Path, records: int) -> Run:
    logs = directory / "flink-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    inputs = str(directory / "flink")
    venv = flink_venv()
    if engine.startswith("Flink SQL"):
        classes, lib = compiled_sql_peer()
        log_file = logs / "peer-sql.log"
        command = ["java", *JVM_OPTIONS, f"-Dlog.file={log_file}",
                   f"-Dlog4j.configurationFile={PEERS / 'log4j2.properties'}",
                   "-cp", f"{classes}{os.pathsep}{lib}/*", "PeerSql", inputs, str(PARALLELISM)]
        if engine == MINI_BATCH:
            command.append("mini-batch")
        env = dict(os.environ)
    else:
        lib = pyflink_lib()
        python = venv / "bin" / "python"
        log_file = logs / "flink-peer-python.log"
        command = [str(python), str(PEERS / "peer_pyds.py"), inputs, str(PARALLELISM),
                   str(4 * KEYS)]
        # thread mode embeds CPython in the task (PEMJA): it needs the venv's packages on its
        # path; the log goes to flink-<ident>-python-<host>.log in FLINK_LOG_DIR
        env = dict(os.environ, PYTHONPATH=str(lib.parent.parent), FLINK_LOG_DIR=str(logs),
                   FLINK_IDENT_STRING="peer")
    done, wall, cpu = timed(command, env, engine)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if not engine.startswith("Flink SQL"):
        log_file = next(logs.glob("flink-peer-python-*.log"))
    window = job_window(log_file.read_text(errors="replace"))
    return Run(engine, records, wall, window["finished"] - window["all_running"],
               cpu if engine.startswith("Flink SQL") else None,
               {"job": report, "window": window,
                "from_first_running": window["finished"] - window["first_running"]})


# -- the benchmark ------------------------------------------------------------------------------


def bench_peers(cfg: Config) -> Section:
    section = Section("peers")
    full = cfg.snapshot_entries >= 1_000_000
    sizes = [1_000_000, 10_000_000] if full else [100_000]
    repeats = REPEATS if full else 1
    try:
        compiled_sql_peer()
    except FlinkUnavailable as exc:
        section.notes.append(f"peers: not measured: {exc}")
        return section
    runs: dict[tuple[str, int], list[Run]] = {}
    with tempfile.TemporaryDirectory(prefix="statectl-peers-") as name:
        for n in sizes:
            directory = Path(name) / str(n)
            progress(f"peers: writing {n:,} records")
            totals = write_input(directory, n)
            engines = ["statectl", "Flink SQL", MINI_BATCH]
            if n <= PYFLINK_MAX:
                engines += ["PyFlink DataStream", "statectl one by one"]
            for round_ in range(repeats):
                for engine in engines:
                    progress(f"peers: {engine}, {n:,} records, round {round_ + 1}/{repeats}")
                    if engine.startswith("statectl"):
                        run = run_statectl(directory, n, totals, fold=engine == "statectl")
                    else:
                        run = run_flink(engine, directory, n)
                    runs.setdefault((engine, n), []).append(run)
            shutil.rmtree(directory)
    best = {k: (min(v, key=lambda r: r.wall), min(v, key=lambda r: r.work))
            for k, v in runs.items()}
    for n in sizes:
        label = f"{n / 1e6:g}M"
        ours_wall, ours_work = best["statectl", n]
        sql_wall, sql_work = best["Flink SQL", n]
        section.rows.append(Row(f"peers {label}: statectl vs Flink SQL, end to end",
                                n / ours_wall.wall, n / sql_wall.wall, "ops/s",
                                Bar(">=", 1.2, ">= 1.2")))
        section.rows.append(Row(f"peers {label}: statectl vs Flink SQL, excl. start-up",
                                n / ours_work.work, n / sql_work.work, "ops/s",
                                Bar(">=", 0.5, ">= 0.5")))
        if ("PyFlink DataStream", n) in best:
            py_wall, py_work = best["PyFlink DataStream", n]
            section.rows.append(Row(f"peers {label}: statectl vs PyFlink, end to end",
                                    n / ours_wall.wall, n / py_wall.wall, "ops/s"))
            section.rows.append(Row(f"peers {label}: statectl vs PyFlink, excl. start-up",
                                    n / ours_work.work, n / py_work.work, "ops/s"))
        ours_cpu = min(r.cpu for r in runs["statectl", n] if r.cpu is not None)
        sql_cpu = min(r.cpu for r in runs["Flink SQL", n] if r.cpu is not None)
        section.rows.append(Row(f"peers {label}: statectl vs Flink SQL, per CPU second",
                                n / ours_cpu, n / sql_cpu, "ops/s"))
        mb_wall, mb_work = best[MINI_BATCH, n]
        section.rows.append(Row(f"peers {label}: statectl vs SQL mini-batch, end to end",
                                n / ours_wall.wall, n / mb_wall.wall, "ops/s"))
        section.rows.append(Row(f"peers {label}: statectl vs SQL mini-batch, excl. start-up",
                                n / ours_work.work, n / mb_work.work, "ops/s"))
        if ("statectl one by one", n) in best:
            one_wall, one_work = best["statectl one by one", n]
            section.rows.append(Row(f"peers {label}: statectl unfolded vs Flink SQL, e2e",
                                    n / one_wall.wall, n / sql_wall.wall, "ops/s"))
            section.rows.append(Row(f"peers {label}: statectl unfolded vs SQL, excl. start-up",
                                    n / one_work.work, n / sql_work.work, "ops/s"))
    for (engine, n), every in runs.items():
        walls = ", ".join(f"{r.wall:.2f}" for r in every)
        works = ", ".join(f"{r.work:.2f}" for r in every)
        cpus = ", ".join("n/a" if r.cpu is None else f"{r.cpu:.1f}" for r in every)
        section.notes.append(f"peers: {engine}, {n:,} records: end to end {walls} s; "
                             f"excluding start-up {works} s; CPU {cpus} s")
    section.notes.append(
        f"peers: {KEYS:,} Zipf-like keys (weights 1/rank, seed {SEED}), values 0..999, "
        f"{FILES} CSV files, parallelism {PARALLELISM}, heap state, Flink {FLINK_VERSION}; "
        f"best of {repeats} interleaved rounds per engine and size; PyFlink up to "
        f"{PYFLINK_MAX:,} records; 'statectl unfolded' = build_state(fold=False), every "
        "record through the Python job (what count/sum of floats, lists, maps or TTL take)")
    section.raw = {f"{engine} {n}": [{"wall": r.wall, "work": r.work, "cpu": r.cpu,
                                      **r.detail}
                                     for r in every]
                   for (engine, n), every in runs.items()}
    return section
