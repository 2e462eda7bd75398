"""Flink itself as the ground truth for SQL jobs' state (the SQL coverage job and its reader).

``tests/flink_jobs/SqlCoverageJob.java`` runs two statement sets (``plain``: a query per stateful
SQL operator family -- group aggregates with distinct, filter, collect and retracting inputs, an
ungrouped aggregate, regular joins inner/outer with and without unique keys, interval and
event-time temporal joins, window TVF aggregates (tumble, hop, cumulate, session; with and without
a grouping key), a legacy group window, a window join, window Top-N and deduplication, ``Rank``
append-only / update-fast / retract, deduplication first/last row on proctime/rowtime, over
aggregates on rows and ranges, ``MATCH_RECOGNIZE``, ``ChangelogNormalize``, the sink upsert
materializer, a file sink; ``minibatch``: local/global aggregates, split distinct aggregates,
mini-batch deduplication, join and Top-N) over a deterministic input, and snapshots each on the
heap backend (a retained checkpoint, a canonical savepoint) and on RocksDB with incremental
checkpoints (a canonical and a native savepoint, a retained incremental checkpoint).

``tests/flink_jobs/StateReader.java`` then reads every snapshot with Flink's own classes (the
state meta infos' serializers, restored from their snapshots; RocksDB's own library for RocksDB
snapshots) and writes one JSON line per state (``{"op", "state", "scope", "kind", "entries"}``) and
per entry (``{"op", "state", "key", "ns", "value"}``): :class:`SqlCoverage` ``reference``. statectl
never checks itself: the tests compare statectl's reading of each snapshot with these lines.

Both run on Flink 2.3 (the Flink venv) and 1.20 (:data:`flink_versions.FLINK_1X`), compiled
against each version's jars. Cached under ``~/.cache/statectl-flink/sql-coverage-<version>-<hash>``
(``$STATECTL_FLINK_CACHE``), the hash over both sources, the version and its jars; generated in
place under a lock file (checkpoints name their files by absolute path). About 60 s per version.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from flink_coverage import JOB_JVM_OPTIONS, VERSIONS, flink_lib
from flink_restore import DRIVER_SOURCES, FlinkUnavailable, cache_root, log_excerpt

__all__ = ["KINDS", "VARIANTS", "VERSIONS", "Restore", "Restored", "SqlCoverage", "read_with_flink",
           "restore_in_flink", "restore_many", "sql_coverage"]

VARIANTS = ("plain", "minibatch")
KINDS = ("heap-checkpoint", "heap-savepoint-canonical", "rocksdb-savepoint-canonical",
         "rocksdb-savepoint-native", "rocksdb-checkpoint-incremental")
JOB = DRIVER_SOURCES / "SqlCoverageJob.java"
#: compiled with the job: it shares CoverageJob's waiting, checkpoint finding and cancelling
SHARED = DRIVER_SOURCES / "CoverageJob.java"
READER = DRIVER_SOURCES / "StateReader.java"
SOURCES = (JOB, SHARED, READER)
TIMEOUT = 900


@dataclasses.dataclass(frozen=True)
class SqlCoverage:
    """One version's snapshots (``"VARIANT/KIND"`` -> path) and the reader's lines for each."""

    version: str
    root: Path
    snapshots: dict[str, Path]
    reference: dict[str, list[dict[str, Any]]]

    def states(self, name: str) -> dict[tuple[str, str], dict[str, Any]]:
        """``(OperatorID, state) -> {"scope", "kind", "entries"}`` of one snapshot."""
        return {(line["op"], line["state"]): line for line in self.reference[name]
                if "entries" in line}

    def entries(self, name: str) -> list[dict[str, Any]]:
        """The reader's entries of one snapshot: ``{"op", "state", "key", "ns", "value"}``."""
        return [line for line in self.reference[name] if "entries" not in line]


def _digest(version: str, lib: Path, *sources: Path) -> str:
    hasher = hashlib.sha256(version.encode())
    for source in sources:
        hasher.update(source.read_bytes() + b"\0")
    for jar in sorted(lib.glob("*.jar")):
        hasher.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return hasher.hexdigest()[:16]


def _java(lib: Path, classes: Path, log: Path, *args: str, timeout: float = TIMEOUT
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", f"-Dlog.file={log}",
         f"-Dlog4j.configurationFile={DRIVER_SOURCES / 'log4j2.properties'}", *JOB_JVM_OPTIONS,
         "-cp", f"{lib}/*:{classes}", *args],
        capture_output=True, text=True, check=False, timeout=timeout)


def _label(name: str) -> str:
    return name.replace("/", "_")


def _load(version: str, root: Path, reference_dir: Path) -> SqlCoverage:
    out = root / "out"
    result = json.loads((out / "result.json").read_text())
    snapshots = {name: Path(path) for name, path in result["snapshots"].items()}
    missing = {f"{v}/{k}" for v in VARIANTS for k in KINDS} - snapshots.keys()
    if missing:
        raise RuntimeError(f"the SQL coverage job took no {sorted(missing)} snapshot ({root})")
    reference = {name: [json.loads(line) for line in
                        (reference_dir / f"{_label(name)}.jsonl").read_text().splitlines()
                        if line]
                 for name in snapshots}
    return SqlCoverage(version=version, root=root, snapshots=snapshots, reference=reference)


def sql_coverage(version: str) -> SqlCoverage:
    """The SQL coverage snapshots of Flink ``version`` and Flink's reading of them (cached)."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise FlinkUnavailable("java and javac (JDK 17) must be on PATH")
    lib = flink_lib(version)
    root = cache_root() / f"sql-coverage-{version}-{_digest(version, lib, JOB, SHARED)}"
    # the reader's lines are cached apart: a change of the reader does not rerun the job
    reference = root / "out" / f"reference-{_digest(version, lib, JOB, SHARED, READER)}"
    if (root / "ok").is_file() and (reference / "ok").is_file():
        return _load(version, root, reference)
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "ok").is_file():
            _generate(version, lib, root)
        if not (reference / "ok").is_file():
            for stale in (root / "out").glob("reference-*"):
                shutil.rmtree(stale, ignore_errors=True)
            classes = _compile(version, lib, root)
            snapshots = json.loads((root / "out" / "result.json").read_text())["snapshots"]
            _read(lib, classes, root, reference, snapshots)
            (reference / "ok").write_text("ok\n")
    return _load(version, root, reference)


def _compile(version: str, lib: Path, root: Path) -> Path:
    classes = root / "classes"
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    copies = []
    for source in SOURCES:
        shutil.copyfile(source, root / source.name)
        copies.append(str(root / source.name))
    done = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{lib}/*", *copies],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FlinkUnavailable(f"javac of the SQL coverage job against Flink {version} failed:"
                               f"\n{done.stdout}{done.stderr}")
    return classes


def _generate(version: str, lib: Path, root: Path) -> None:
    for stale in cache_root().glob(f"sql-coverage-{version}-*"):
        if stale.is_dir() and stale != root:
            shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    classes = _compile(version, lib, root)
    started = time.monotonic()
    run = _java(lib, classes, root / "flink.log", "SqlCoverageJob", str(root / "out"))
    if run.returncode != 0:  # once more, from scratch: a loaded machine can stall a MiniCluster
        shutil.rmtree(root / "out", ignore_errors=True)
        run = _java(lib, classes, root / "flink.log", "SqlCoverageJob", str(root / "out"))
    (root / "stdout.txt").write_text(run.stdout[-200_000:])
    (root / "stderr.txt").write_text(run.stderr[-200_000:])
    if run.returncode != 0 or not (root / "out" / "result.json").is_file():
        log = root / "flink.log"
        excerpt = log_excerpt(log.read_text(errors="replace")) if log.is_file() else ""
        raise RuntimeError(f"the SQL coverage job failed on Flink {version} (exit "
                           f"{run.returncode}, {time.monotonic() - started:.0f} s; {root}):\n"
                           f"{run.stdout[-2000:]}{run.stderr[-3000:]}\n{excerpt}")
    (root / "ok").write_text(f"{time.monotonic() - started:.1f} s\n")


def _read(lib: Path, classes: Path, root: Path, out: Path, snapshots: dict[str, str]) -> None:
    run = _java(lib, classes, root / "reader.log", "StateReader", str(out),
                *(f"{_label(name)}={path}" for name, path in snapshots.items()))
    if run.returncode != 0 or "DONE" not in run.stdout:
        raise RuntimeError(f"StateReader failed on {sorted(snapshots)} (exit {run.returncode}):"
                           f"\n{run.stdout[-3000:]}{run.stderr[-3000:]}")


def read_with_flink(version: str, snapshots: dict[str, Path], workdir: Path
                    ) -> dict[str, list[dict[str, Any]]]:
    """Flink ``version``'s reading (:class:`SqlCoverage` lines) of other snapshots, e.g. the
    savepoints statectl wrote from the coverage snapshots: ``{name: lines}``."""
    cov = sql_coverage(version)
    lib = flink_lib(version)
    out = workdir / "reference"
    _read(lib, cov.root / "classes", workdir, out, {k: str(v) for k, v in snapshots.items()})
    return {name: [json.loads(line) for line in
                   (out / f"{_label(name)}.jsonl").read_text().splitlines() if line]
            for name in snapshots}



@dataclasses.dataclass(frozen=True)
class Restore:
    """A snapshot for :func:`restore_many`: written from the coverage snapshot ``source``
    (``"VARIANT/KIND"``), restored on ``backend`` (``hashmap`` or ``rocksdb``) at
    ``parallelism`` / ``max_parallelism``."""

    source: str
    backend: str
    parallelism: int
    max_parallelism: int
    snapshot: Path


@dataclasses.dataclass(frozen=True)
class Restored:
    """What came of one :class:`Restore`: the savepoint Flink took after it and the file of the
    reader's lines of it, or ``error`` (why Flink did not restore it, or the reader not read it)."""

    savepoint: Path | None
    reference: Path | None
    error: str | None

    def lines(self) -> list[dict[str, Any]]:
        """The reader's lines (:class:`SqlCoverage`) of the savepoint."""
        assert self.reference is not None, self.error
        return [json.loads(line) for line in self.reference.read_text().splitlines() if line]


#: Restores :func:`restore_many` runs side by side in its MiniCluster (planned one at a time: a
#: job's checkpoints and savepoint are mostly waiting, during which the next one is planned).
CONCURRENCY = 2


def _case_excerpt(log: Path, start: int, end: int) -> str:
    """The log excerpt of bytes ``start:end`` of Flink's log (the job writes them per case)."""
    if not log.is_file():
        return ""
    return log_excerpt(log.read_bytes()[start:end].decode(errors="replace"))


def _failure(text: str, limit: int = 8000) -> str:
    """A stack trace cut to about ``limit`` characters, keeping every ``Caused by`` line."""
    if len(text) <= limit:
        return text
    head, middle, tail = text[:2000], text[2000:-(limit - 2000)], text[-(limit - 2000):]
    causes = [line for line in middle.splitlines() if line.startswith("Caused by")]
    return "\n".join([head, "...", *causes, "...", tail])


def restore_many(version: str, restores: dict[str, Restore], workdir: Path
                 ) -> dict[str, Restored]:
    """Flink ``version`` restores each snapshot (``{name: Restore}``, names usable as file names)
    into the job of its source's variant on its backend at its parallelism / max parallelism,
    reading the input the source's generation read (its restored source state says it was read),
    completes two checkpoints and takes a canonical savepoint, which Flink's reader reads.

    One JVM restores them all (one MiniCluster, :data:`CONCURRENCY` jobs at a time) and one
    reader JVM reads every savepoint: a JVM's start and the planner's first planning are paid once.
    A case that fails fails alone: its :class:`Restored` holds the failure and the part of Flink's
    log written while it ran (other cases ran beside it)."""
    cov = sql_coverage(version)
    lib = flink_lib(version)
    classes = cov.root / "classes"
    out = workdir / "restore"
    manifest = workdir / "manifest.tsv"
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, r in restores.items():
        variant, kind = r.source.split("/")
        generation = cov.root / "out" / f"gen-{kind.split('-')[0]}-{variant}"
        rows.append("\t".join((name, variant, r.backend, str(r.parallelism),
                               str(r.max_parallelism), str(generation), str(r.snapshot))))
    manifest.write_text("\n".join(rows) + "\n")
    log = workdir / "restore.log"
    run = _java(lib, classes, log, "SqlCoverageJob", str(out), "--restore-many", str(manifest),
                str(CONCURRENCY), timeout=TIMEOUT + 120 * len(restores))
    results: dict[str, Restored] = {}
    for name, r in restores.items():
        variant = r.source.split("/")[0]
        what = (f"Flink {version} did not restore {r.snapshot} ({variant}, {r.backend}, "
                f"p{r.parallelism}/m{r.max_parallelism}")
        case = out / name / "result.json"
        if not case.is_file():
            excerpt = log_excerpt(log.read_text(errors="replace")) if log.is_file() else ""
            results[name] = Restored(None, None, (
                f"{what}; the restoring JVM ended, exit {run.returncode}, before this case's "
                f"result):\n{run.stdout[-2000:]}{run.stderr[-3000:]}\n{excerpt}"))
            continue
        result = json.loads(case.read_text())
        if result["error"] is not None:
            excerpt = _case_excerpt(log, result["log_from"], result["log_to"])
            results[name] = Restored(None, None, f"{what}):\n{_failure(result['error'])}\n"
                                                 f"Flink's log while it ran:\n{excerpt}")
            continue
        results[name] = Restored(Path(result["savepoint"]), None, None)
    savepoints = {name: r.savepoint for name, r in results.items() if r.savepoint is not None}
    reference = workdir / "reference"
    try:
        if savepoints:
            _read(lib, classes, workdir, reference, {k: str(v) for k, v in savepoints.items()})
    except RuntimeError:
        # the reader failed on one of them: each alone, each failure its own case's
        for name, savepoint in savepoints.items():
            try:
                _read(lib, classes, workdir, reference, {name: str(savepoint)})
            except RuntimeError as exc:
                results[name] = Restored(savepoint, None, str(exc))
    for name, savepoint in savepoints.items():
        if results[name].error is None:
            results[name] = Restored(savepoint, reference / f"{_label(name)}.jsonl", None)
    return results


def restore_in_flink(version: str, source: str, backend: str, parallelism: int,
                     max_parallelism: int, snapshot: Path, workdir: Path
                     ) -> tuple[Path, list[dict[str, Any]]]:
    """:func:`restore_many` of one snapshot: the savepoint Flink took after restoring it and the
    reader's lines of it (an :class:`AssertionError` if Flink did not restore it)."""
    done = restore_many(version, {"after": Restore(source, backend, parallelism, max_parallelism,
                                                   snapshot)}, workdir)["after"]
    if done.error is not None:
        raise AssertionError(done.error)
    assert done.savepoint is not None
    return done.savepoint, done.lines()


def keyed_counts(lines: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Entries per keyed (OperatorID, state) that hold something: an empty map or list, which
    the heap format keeps and the canonical one leaves out, is not counted."""
    keyed = {(line["op"], line["state"]) for line in lines
             if "entries" in line and line["scope"] == "keyed"}
    counts = dict.fromkeys(keyed, 0)
    for line in lines:
        pair = (line["op"], line.get("state"))
        if "entries" not in line and pair in counts and line["value"] not in ({}, []):
            counts[pair] += 1
    return counts
