"""Flink itself as the ground truth for every type statectl decodes (the coverage job).

``tests/flink_jobs/CoverageJob.java`` keeps one keyed state of each type statectl decodes
(POJOs with every field type, tuples, rows, ``Either``, arrays, ``java.sql``, big numbers, Value
types, subclasses, Kryo generic types, list/map/reducing/aggregating/TTL state, timers, a window,
operator list and broadcast state, a ``Tuple2`` and a POJO key), takes the five snapshot kinds
of the fixture jobs (:data:`KINDS`), restores each of them in Flink in a verify mode and writes
what Flink restored: one JSON line per (operator, state, key[, namespace]) in statectl's
canonical JSON forms (docs/flink-types.md), ``reference/<kind>.jsonl``. Those lines are the
reference the tests compare statectl's reading of the same snapshot with.

One JVM per Flink version (one MiniCluster for the two generation runs and the five restores;
40-50 s on two cores). The one source compiles against both versions' APIs; it is compiled
against each version's own jars (2.3: the Flink venv, ``flink_restore.pyflink_lib``; 1.20:
``flink_versions.pyflink_lib``). The snapshots and the reference are cached under
``~/.cache/statectl-flink/coverage-<version>-<hash>``
(``$STATECTL_FLINK_CACHE``), the hash over the job's source, the Flink version and its jars'
names and sizes; the snapshots are generated in place (checkpoints name their files by absolute
path), under a lock file, so concurrent tests generate once.

A reference line: ``{"op", "state", "kind", "key", "ns"?, "value"}`` with ``kind`` one of
``value``, ``list``, ``map`` (an object, or ``[{"key", "value"}]`` sorted by key for non-string
keys), ``reducing``, ``aggregating`` (the accumulator), ``timer`` (one line per timer),
``window`` (``ns``: ``[start, end]``), ``operator-list`` (every subtask's elements, sorted; key
``null``), ``broadcast`` (the map; key ``null``); or ``"undecodable": <class name>`` instead of
``value`` for a value only Kryo's ``FieldSerializer`` can read.
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

from flink_restore import (
    DRIVER_SOURCES,
    FLINK_VERSION,
    JVM_OPTIONS,
    FlinkUnavailable,
    cache_root,
    log_excerpt,
)
from flink_restore import pyflink_lib as venv_lib
from flink_versions import FLINK_1X
from flink_versions import pyflink_lib as release_lib

__all__ = ["KINDS", "VERSIONS", "Coverage", "coverage", "flink_lib", "restored_by_flink"]

#: The Flink versions the job runs on: the Flink venv's and the newest 1.x (Kryo 2.24 era).
VERSIONS = (FLINK_VERSION, FLINK_1X)
#: The snapshots the job takes, as the fixture jobs do.
KINDS = ("heap-checkpoint", "heap-savepoint-canonical", "rocksdb-savepoint-canonical",
         "rocksdb-savepoint-native", "rocksdb-checkpoint-incremental")
SOURCE = DRIVER_SOURCES / "CoverageJob.java"
#: Flink's own JVM options (its default ``env.java.opts.all``) open ``java.time`` too: Kryo's
#: ``FieldSerializer`` of Flink 1.x needs it for ``ZonedDateTime`` and ``Duration`` on Java 17.
JOB_JVM_OPTIONS = (*JVM_OPTIONS, "--add-opens", "java.base/java.time=ALL-UNNAMED")
#: Whole-run bound (generation and the five restores), seconds.
TIMEOUT = 900


@dataclasses.dataclass(frozen=True)
class Coverage:
    """One version's snapshots (per kind), Flink's reference lines (per kind) and timings (ms)."""

    version: str
    root: Path
    snapshots: dict[str, Path]
    reference: dict[str, list[dict[str, Any]]]
    timings: dict[str, int]


def flink_lib(version: str) -> Path:
    """The ``pyflink/lib`` folder of ``version`` (2.3: the Flink venv; else a cached install)."""
    return venv_lib() if version == FLINK_VERSION else release_lib(version)


def _digest(version: str, lib: Path) -> str:
    hasher = hashlib.sha256(SOURCE.read_bytes() + b"\0" + version.encode())
    for jar in sorted(lib.glob("*.jar")):
        hasher.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return hasher.hexdigest()[:16]


def _load(version: str, root: Path) -> Coverage:
    out = root / "out"
    result = json.loads((out / "result.json").read_text())
    snapshots = {kind: Path(path) for kind, path in result["snapshots"].items()}
    missing = set(KINDS) - snapshots.keys()
    if missing:
        raise RuntimeError(f"the coverage job took no {sorted(missing)} snapshot ({root})")
    reference = {kind: [json.loads(line) for line in
                        (out / "reference" / f"{kind}.jsonl").read_text().splitlines() if line]
                 for kind in KINDS}
    return Coverage(version=version, root=root, snapshots=snapshots, reference=reference,
                    timings={k: int(v) for k, v in result["timings"].items()})


def coverage(version: str) -> Coverage:
    """The snapshots and Flink's reference of ``version``: cached, else generated now."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise FlinkUnavailable("java and javac (JDK 17) must be on PATH")
    lib = flink_lib(version)
    root = cache_root() / f"coverage-{version}-{_digest(version, lib)}"
    if (root / "ok").is_file():
        return _load(version, root)
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "ok").is_file():
            _generate(version, lib, root)
    return _load(version, root)


def _generate(version: str, lib: Path, root: Path) -> None:
    """Compiles the job against ``lib`` and runs it into ``root/out`` (in place: checkpoints
    name their files by absolute path); ``root/ok`` marks success."""
    for stale in cache_root().glob(f"coverage-{version}-*"):  # an older job's snapshots
        if stale.is_dir() and stale != root:
            shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    (root / "classes").mkdir(parents=True)
    shutil.copyfile(SOURCE, root / SOURCE.name)
    done = subprocess.run(["javac", "-nowarn", "-d", str(root / "classes"), "-cp", f"{lib}/*",
                           str(root / SOURCE.name)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FlinkUnavailable(f"javac of CoverageJob against Flink {version} failed:\n"
                               f"{done.stdout}{done.stderr}")
    log = root / "flink.log"
    started = time.monotonic()
    with open(root / "stdout.txt", "wb") as stdout, open(root / "stderr.txt", "wb") as stderr:
        run = subprocess.run(
            ["java", f"-Dlog.file={log}",
             f"-Dlog4j.configurationFile={DRIVER_SOURCES / 'log4j2.properties'}", *JOB_JVM_OPTIONS,
             "-cp", f"{lib}/*:{root / 'classes'}", "CoverageJob", str(root / "out")],
            stdout=stdout, stderr=stderr, check=False, timeout=TIMEOUT)
    if run.returncode != 0 or not (root / "out" / "result.json").is_file():
        tail = (root / "stderr.txt").read_text(errors="replace")[-4000:]
        excerpt = log_excerpt(log.read_text(errors="replace")) if log.is_file() else ""
        raise RuntimeError(f"the coverage job failed on Flink {version} (exit {run.returncode}, "
                           f"{time.monotonic() - started:.0f} s; {root}):\n{tail}\n{excerpt}")
    (root / "ok").write_text(f"{time.monotonic() - started:.1f} s\n")


def restored_by_flink(version: str, snapshots: dict[str, Path], workdir: Path
                      ) -> dict[str, list[dict[str, Any]]]:
    """Flink ``version`` restores each snapshot (``{kind: path}``, e.g. savepoints statectl
    wrote from the coverage snapshots) in the coverage job's verify mode: its reference lines
    per kind, as for the job's own snapshots (``java CoverageJob OUT --verify KIND=PATH``)."""
    cov = coverage(version)
    lib = flink_lib(version)
    out = workdir / "out"
    log = workdir / "flink.log"
    run = subprocess.run(
        ["java", f"-Dlog.file={log}",
         f"-Dlog4j.configurationFile={DRIVER_SOURCES / 'log4j2.properties'}", *JOB_JVM_OPTIONS,
         "-cp", f"{lib}/*:{cov.root / 'classes'}", "CoverageJob", str(out), "--verify",
         *(f"{kind}={path}" for kind, path in snapshots.items())],
        capture_output=True, text=True, check=False, timeout=TIMEOUT)
    if run.returncode != 0 or "DONE" not in run.stdout:
        excerpt = log_excerpt(log.read_text(errors="replace")) if log.is_file() else ""
        raise RuntimeError(f"Flink {version} could not restore {sorted(snapshots)} in the "
                           f"coverage job (exit {run.returncode}):\n{run.stdout[-3000:]}"
                           f"{run.stderr[-3000:]}\n{excerpt}")
    return {kind: [json.loads(line) for line in
                   (out / "reference" / f"{kind}.jsonl").read_text().splitlines() if line]
            for kind in snapshots}
