"""Start at once (issue 45, item 3): how long ``statectl`` takes to answer, as a user runs it.

One benchmark, ``startup`` (``bench/run.py`` runs it with the others). Each case is the
``statectl`` script of this environment (``python -m cli.main`` where there is none) run as a
subprocess, its wall time from start to exit the median of ``REPS`` runs (quick: fewer), against
a bare ``python -c pass`` measured the same way (information) and against its bar:

* ``statectl --version``, bar <= 0.15 s;
* ``statectl --help``, bar <= 0.15 s;
* ``statectl inspect`` of a small savepoint, bar <= 0.4 s: a Flink fixture's canonical
  savepoint (``../shared/flink-fixtures``, where it is checked out) and the statectl checkpoint
  ``sample_checkpoints/v1/keyed-all-kinds-p2``.

Every run finds its modules' bytecode cached, as an installed statectl does (``pip install``
compiles it): the runs share a ``PYTHONPYCACHEPREFIX`` of their own, which the warm-up run
fills, and ``PYTHONDONTWRITEBYTECODE`` is dropped. Without a cache every run compiles
statectl's modules from source again (about 0.2 s more CPU for ``inspect`` on this machine), a
cost of the environment, not of statectl.

Runs standalone too: ``.venv/bin/python bench/bench_startup.py [--quick]``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from bench_state_maps import FULL, QUICK, Bar, Config, Row, Section, median, progress

REPO = Path(__file__).resolve().parent.parent
REPS = 15
QUICK_REPS = 5
NS = cast(Any, "ns")
#: The small savepoints ``inspect`` is timed on (label, path); those absent are skipped.
SAVEPOINTS = (
    ("flink savepoint java-mp128 p2", REPO.parent / "shared" / "flink-fixtures" / "java-mp128"
     / "savepoints" / "p2" / "canonical"),
    ("statectl keyed-all-kinds-p2", REPO / "sample_checkpoints" / "v1" / "keyed-all-kinds-p2"),
)


def statectl() -> list[str]:
    """How a user starts statectl here: the environment's script, else ``python -m cli.main``."""
    script = Path(sys.executable).parent / "statectl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]


def savepoint(folder: Path) -> Path | None:
    """``folder`` itself if it is a snapshot, else its one ``savepoint-*`` (``None``: absent)."""
    if (folder / "_metadata").exists() or (folder / "_metadata.json").exists():
        return folder
    found = sorted(folder.glob("savepoint-*")) if folder.is_dir() else []
    return found[0] if found else None


def timed(args: list[str], reps: int, cache: str) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``reps`` runs of ``args`` (after one warm-up run); each exits 0.

    CPU: the run's user and system time, which another process's load on the machine changes
    less than the wall time (information beside the bar). ``cache``: the bytecode cache of the
    runs (``PYTHONPYCACHEPREFIX``; the module doc).
    """
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
           "COLUMNS": "100", "PYTHONPYCACHEPREFIX": cache}
    times, cpu = [], []
    for rep in range(reps + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"{args} exited {done.returncode}: {done.stderr.decode()}")
        if rep:  # the first run warms the page cache and the bytecode
            times.append(elapsed)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return times, cpu


def bench_startup(cfg: Config) -> Section:
    section = Section("startup")
    reps = REPS if cfg.snapshot_entries >= 1_000_000 else QUICK_REPS
    with tempfile.TemporaryDirectory(prefix="statectl-startup-") as cache:
        return _bench(section, reps, cache)


def _bench(section: Section, reps: int, cache: str) -> Section:
    progress(f"startup: python -c pass, {reps} runs")
    bare, bare_cpu = timed([sys.executable, "-c", "pass"], reps, cache)
    section.raw["python_pass_seconds"] = bare
    section.raw["python_pass_cpu_seconds"] = bare_cpu
    cases = [("statectl --version", ["--version"], 0.15),
             ("statectl --help", ["--help"], 0.15)]
    for label, folder in SAVEPOINTS:
        path = savepoint(folder)
        if path is None:
            section.notes.append(f"{label}: {folder} is absent, not measured")
            continue
        cases.append((f"statectl inspect, {label}", ["inspect", str(path)], 0.4))
    for name, args, bar in cases:
        progress(f"startup: {name}, {reps} runs")
        seconds, cpu = timed([*statectl(), *args], reps, cache)
        section.raw[name] = {"args": args, "seconds": seconds, "cpu_seconds": cpu}
        section.rows.append(Row(f"{name} vs python -c pass (time)", median(seconds) * 1e9,
                                median(bare) * 1e9, NS, None))
        section.rows.append(Row(f"{name} vs {bar} s", median(seconds) * 1e9, bar * 1e9, NS,
                                Bar("<=", 1.0, f"<= {bar} s")))
        section.notes.append(f"{name}: {median(seconds):.3f} s (min {min(seconds):.3f} s), bar "
                             f"{bar} s; CPU {median(cpu):.3f} s; python -c pass "
                             f"{median(bare):.3f} s (CPU {median(bare_cpu):.3f} s); medians of "
                             f"{reps}, bytecode cached; load average {os.getloadavg()[0]:.1f}")
    return section


if __name__ == "__main__":
    result = bench_startup(QUICK if "--quick" in sys.argv[1:] else FULL)
    for row in result.rows:
        print(f"{row.name:<64} {row.statecore / 1e9:7.3f} s  {row.result}")
    for note in result.notes:
        print(f"  - {note}")
