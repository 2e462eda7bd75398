"""Restore a Flink snapshot in real Flink 2.3 and check every key's state (the restore harness).

A restore passes only when Flink restored the snapshot and every key's state that Flink printed
equals the expected values. How (DESIGN "Ground truth"; the fixture README's "Verification"):

* The snapshot is copied to a temporary directory first; Flink restores the copy, so the input is
  never touched (the harness also checks that it did not change).
* The job is one of the fixture jobs (``$STATECTL_FLINK_FIXTURES/jobs``): ``java``
  (JavaStateJob), ``sql`` (job_sql.py), ``pyds`` (job_pyds.py), ``types`` (TypesJob), built with
  the same uids and state descriptors, restored at the given parallelism, max parallelism and
  state backend. Its input directory is fresh and holds only the verification records (one more
  record per key: value 1000; three for ``types``), so a key whose state was not restored prints
  a wrong count. The job prints every key's whole state; ``check_verify.py`` /
  ``check_verify_types.py`` (the fixture checkers, unchanged) compare it with the model of
  ``fixture_input.py`` / ``types_input.py`` for the input parameters of the fixture
  (``expected.json`` ``input``: the ``FIX_*`` variables).
* Speed: the cases run in long-lived drivers, compiled once and cached
  (``tests/flink_jobs/RestoreDriver.java`` for ``java``, ``sql``, ``types``: one JVM;
  ``tests/flink_jobs/pyds_driver.py`` for ``pyds``: one PyFlink process), each with one
  MiniCluster (8 slots: ``parallelism <= 8``) that runs the cases one after the other, submitted
  through its REST endpoint like any remote cluster, each with its own configuration (state
  backend, restore path). The verification records are in place before the job starts and the
  job is cancelled as soon as it printed every expected line, instead of the fixed sleeps of the
  fixture scripts (16-29 s a restore there, even with ``RUNSECS=0``). Here, once a driver is
  warm: 1-1.5 s (java, types), 2 s (sql), 4.5-7 s (pyds); the first case of a driver 6.5 s
  (java), 9 s (sql) or 13-15 s (pyds).

Flink comes from a virtualenv with ``apache-flink==2.3.0`` (``$STATECTL_FLINK_VENV``, default
``<repo>/.venv-flink``, made by ``make flink-venv``; it cannot share the project venv: apache-beam
pins pyarrow < 17 and numpy < 2.2, pyspark 4 needs pyarrow >= 18) and Java 17 on ``PATH``.
Compiled classes and a copy of the fixture jobs are cached under
``~/.cache/statectl-flink/build-<hash>`` (``$STATECTL_FLINK_CACHE``).

Usage::

    with FlinkRestorer() as flink:
        result = flink.restore(RestoreCase.from_fixture(fixture_set, snapshot_path, parallelism=3))
        assert result.ok, result.report()
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DRIVER_SOURCES = Path(__file__).resolve().parent / "flink_jobs"
JOB_KINDS = ("java", "sql", "pyds", "types", "bootstrap")
BACKENDS = ("hashmap", "rocksdb")
FLINK_VERSION = "2.3.0"
#: The value of the verification record of every key (fixture_input.EXTRA_VALUE).
EXTRA_VALUE = 1000
#: Per job kind: what a line of the job's verification output looks like (the driver counts
#: them to know when the job has printed everything).
OUTPUT_LINE = {
    "java": r"^(\d+> )?(STR|LONG|INT|BCAST) ",
    "pyds": r"^(\d+> )?(STR|LONG|BCAST) ",
    "sql": r"\+[IU]\[",
    "types": r"^(\d+> )?(POJO|TUPLE|WINDOW) ",
    "bootstrap": r"^(\d+> )?BOOT ",
}
#: JVM options of the fixture jobs (run_java.sh).
JVM_OPTIONS = ("--add-opens", "java.base/java.util=ALL-UNNAMED",
               "--add-opens", "java.base/java.lang=ALL-UNNAMED")


class FlinkUnavailable(RuntimeError):
    """Flink, Java or the fixture jobs are missing; the message says how to get them."""


# ---------------------------------------------------------------------------- what to restore


@dataclasses.dataclass(frozen=True)
class FixtureInput:
    """The input parameters of a fixture job (``fixture_input.py``'s ``FIX_*`` variables).

    They determine every key's expected state: key ``j`` (``0 <= j < keys``) is
    ``f"{key_prefix}{j}"`` with the values ``value_stride*j + 1 .. value_stride*j + count(j)``,
    ``count(j) = j + 1`` (``count_mod == 0``) or ``j % count_mod + 1``.
    """

    key_prefix: str = "k"
    keys: int = 100
    count_mod: int = 0
    value_stride: int = 0

    @classmethod
    def from_expected(cls, expected: dict[str, Any]) -> FixtureInput:
        """The ``input`` of an ``expected.json`` (schema 1)."""
        given = expected.get("input", {})
        return cls(key_prefix=given.get("key_prefix", "k"), keys=int(given.get("keys", 100)),
                   count_mod=int(given.get("count_mod", 0)),
                   value_stride=int(given.get("value_stride", 0)))

    def env(self) -> dict[str, str]:
        return {"FIX_KEY_PREFIX": self.key_prefix, "FIX_NKEYS": str(self.keys),
                "FIX_COUNT_MOD": str(self.count_mod), "FIX_VALUE_STRIDE": str(self.value_stride)}


@dataclasses.dataclass(frozen=True)
class BootstrapState:
    """What a ``bootstrap`` restore must print: every key's state, and how the job declares it."""

    expected: dict[str, dict[str, Any]]
    states: str  # BootstrapJob's spec: name:kind:type[:type],...
    uid: str = "build"
    ttl_ms: int = 0
    max_parallelism: int = 128  # the keyed operator's


#: The aggregations of the ``statectl build`` a bootstrap restore starts from, and how
#: BootstrapJob declares the states ``build`` keeps for them (name:kind:type).
BOOTSTRAP_AGGREGATIONS = ("count", "sum:amount", "list:page", "map:channel=amount",
                          "last:amount")
BOOTSTRAP_SPEC = ("count:reducing:long,sum_amount:reducing:long,list_page:list:string,"
                  "map_channel:map:string:long,last_amount:value:long")


def built_for_bootstrap(tmp_path: Path, ttl: int | None) -> Path:
    """A ``statectl build`` checkpoint of the docs' example events (p2), ``ttl`` ms TTL."""
    state = tmp_path / "state"
    args = [sys.executable, "-m", "cli.main", "build",
            str(REPO_ROOT / "docs" / "examples" / "events.csv"), "--key", "user",
            *[a for agg in BOOTSTRAP_AGGREGATIONS for a in ("--agg", agg)],
            "--checkpoint-dir", str(state), "--parallelism", "2"]
    if ttl:
        args += ["--ttl", str(ttl)]
    subprocess.run(args, check=True, cwd=REPO_ROOT, capture_output=True)
    (checkpoint,) = sorted(state.glob("chk-*"))
    return checkpoint


def _plain(stored: Any) -> Any:
    from statecore.ttl import TtlValue

    if isinstance(stored, TtlValue):
        return _plain(stored.user_value)
    if isinstance(stored, list):
        return [_plain(e) for e in stored]
    if isinstance(stored, dict):
        return {str(k): _plain(v) for k, v in sorted(stored.items())}
    return stored


def bootstrap_state(source: Any, ttl: int | None) -> BootstrapState:
    """What BootstrapJob must print for every key of a :func:`built_for_bootstrap` checkpoint."""
    (op,) = [o for o in source.metadata.operators if o.key_type is not None]
    states: dict[str, dict[str, Any]] = {}
    for name in ("count", "sum_amount", "list_page", "map_channel", "last_amount"):
        for _kg, key, _ns, stored in source.keyed_entries(op.uid, name):
            states.setdefault(key, {})[name] = _plain(stored)
    return BootstrapState(states, BOOTSTRAP_SPEC, uid=op.uid, ttl_ms=ttl or 0,
                          max_parallelism=op.max_parallelism)


@dataclasses.dataclass(frozen=True)
class RestoreCase:
    """One restore: ``snapshot`` (a savepoint or checkpoint directory holding ``_metadata``)
    restored by the fixture job ``job`` at ``parallelism`` (``1 <= parallelism <=
    max_parallelism``) on ``backend``, expected to hold the state that ``input`` describes.

    ``max_parallelism`` must be the snapshot's (Flink refuses another for keyed state).
    ``timeout`` bounds the job's run in seconds. ``hold_input``: the verification records
    reach the job only once every task has restored its state (always for ``pyds``), so that
    Flink's restore time in the log is not mixed with processing (a second or less later).
    """

    snapshot: Path
    job: str
    parallelism: int
    max_parallelism: int
    backend: str = "hashmap"
    input: FixtureInput = FixtureInput()
    name: str = ""
    timeout: float = 120.0
    hold_input: bool = False
    #: ``bootstrap`` (a savepoint statectl converted from a ``statectl build`` checkpoint): the
    #: expected state of every key (``{key: {state: value}}``, as BootstrapJob prints it), the
    #: states' spec (BootstrapJob's), the keyed operator's uid and the TTL the job declares
    bootstrap: BootstrapState | None = None
    #: The restored job's TTL clock starts at this time (epoch ms) instead of now
    #: (``tests/flink_jobs/TtlClockBackend.java``: the backend itself, unchanged but for its TTL
    #: time provider), so TTL state live when the snapshot was taken is live when restored
    #: however long after; ``None``: the wall clock.
    ttl_now_ms: int | None = None

    def __post_init__(self) -> None:
        if self.job not in JOB_KINDS:
            raise ValueError(f"job must be one of {JOB_KINDS}, not {self.job!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")
        if not 1 <= self.parallelism <= self.max_parallelism <= 32768:
            raise ValueError(f"need 1 <= parallelism ({self.parallelism}) <= max_parallelism "
                             f"({self.max_parallelism}) <= 32768")

    @classmethod
    def from_fixture(cls, fixture_set: Path, snapshot: str | Path, *, parallelism: int,
                     backend: str = "hashmap", **overrides: Any) -> RestoreCase:
        """A case for a snapshot checked against ``fixture_set/expected.json``.

        ``snapshot`` is a path relative to the set (an ``expected.json`` ``snapshots[].path``) or
        any directory (e.g. one statectl wrote from that set); ``overrides`` replace fields
        (``max_parallelism`` after a max-parallelism change, ``input`` for a negative control).
        """
        expected = json.loads((fixture_set / "expected.json").read_text())
        path = Path(snapshot)
        fields: dict[str, Any] = dict(
            snapshot=path if path.is_absolute() else fixture_set / path,
            job=expected["job"], parallelism=parallelism,
            max_parallelism=int(expected["max_parallelism"]), backend=backend,
            input=FixtureInput.from_expected(expected),
            name=f"{fixture_set.name}:{path.name}:p{parallelism}:{backend}")
        fields.update(overrides)
        return cls(**fields)

    @property
    def label(self) -> str:
        return self.name or f"{self.job}:{self.snapshot.name}:p{self.parallelism}:{self.backend}"


@dataclasses.dataclass
class RestoreResult:
    """What happened to a :class:`RestoreCase`.

    ``ok``: Flink restored the snapshot, printed every key's state, and every value equals the
    expected one (and the input snapshot is unchanged). ``problems``: why not (the checker's
    findings, the job's failure, a timeout). ``flink_log``: the warnings and errors of Flink's
    log during this case ('' when ok). ``seconds``: wall time of the restore in the warm driver
    (submission to cancellation); ``wall_seconds`` adds copying, driver start-up and the check.
    ``timings``: seconds from the case's start to ``submitted``, ``running`` (job status),
    ``restored`` (every task RUNNING), ``first_line`` and ``last_line`` (verification output),
    ``end``; and the driver JVM's CPU seconds during the case (``cpu_seconds``) and until
    restored (``cpu_restored_seconds``; not for ``pyds``). ``flink_timing``: Flink's
    own restore milestones from its log (:func:`restore_timing`).
    """

    case: RestoreCase
    ok: bool
    problems: list[str]
    flink_log: str
    seconds: float
    wall_seconds: float
    timings: dict[str, float]
    job_status: str
    output_lines: int
    expected_lines: int
    flink_timing: RestoreTiming | None = None

    def report(self) -> str:
        """A multi-line account for an assertion message."""
        head = (f"{self.case.label}: {'OK' if self.ok else 'FAILED'} in {self.seconds:.1f} s "
                f"(job {self.job_status}, {self.output_lines}/{self.expected_lines} lines)")
        parts = [head, *(f"  - {p}" for p in self.problems)]
        if self.flink_log:
            parts += ["  Flink log (warnings and errors):", self.flink_log]
        return "\n".join(parts)


# ------------------------------------------------------------------------ Flink and the jobs


def flink_venv() -> Path:
    """``$STATECTL_FLINK_VENV`` (a relative path is relative to the repository root), else
    ``<repo>/.venv-flink``."""
    return REPO_ROOT / os.environ.get("STATECTL_FLINK_VENV", ".venv-flink")


def pyflink_lib(venv: Path | None = None) -> Path:
    """The ``pyflink/lib`` folder (Flink's jars) of the Flink venv."""
    venv = venv or flink_venv()
    found = sorted(venv.glob("lib/python3*/site-packages/pyflink/lib"))
    if not found or not (found[-1] / f"flink-dist-{FLINK_VERSION}.jar").is_file():
        raise FlinkUnavailable(
            f"no apache-flink=={FLINK_VERSION} in {venv}: run `make flink-venv` (or set "
            f"$STATECTL_FLINK_VENV to a virtualenv with apache-flink=={FLINK_VERSION})")
    return found[-1]


def fixture_jobs_dir() -> Path:
    """``$STATECTL_FLINK_JOBS``, else ``jobs/`` of ``$STATECTL_FLINK_FIXTURES`` (default
    ``../shared/flink-fixtures``)."""
    configured = os.environ.get("STATECTL_FLINK_JOBS")
    if configured:
        return Path(configured)
    fixtures = os.environ.get("STATECTL_FLINK_FIXTURES",
                              str(REPO_ROOT.parent / "shared" / "flink-fixtures"))
    return Path(fixtures) / "jobs"


def cache_root() -> Path:
    return Path(os.environ.get("STATECTL_FLINK_CACHE",
                               Path.home() / ".cache" / "statectl-flink"))


def _tree_digest(hasher: Any, root: Path) -> None:
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and p.suffix != ".jar"):
        hasher.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")


@dataclasses.dataclass(frozen=True)
class Build:
    """The compiled drivers and a private copy of the fixture jobs (never run from the shared
    folder: run_java.sh builds its jar beside itself, Python would write ``__pycache__``)."""

    root: Path
    lib: Path
    venv: Path
    version: str = FLINK_VERSION

    @property
    def unavailable(self) -> frozenset[str]:
        """The job kinds (:data:`OPTIONAL_SOURCES`) this release's build could not compile."""
        path = self.root / "unavailable"
        return frozenset(path.read_text().split()) if path.is_file() else frozenset()

    @property
    def jobs(self) -> Path:
        return self.root / "jobs"

    @property
    def classes(self) -> Path:
        return self.root / "classes"

    @property
    def log4j(self) -> Path:
        return self.root / "log4j2.properties"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


#: Sources compiled into every build: the driver and the java job's topology (from the fixture
#: jobs' ``java/``, else their ``java-1x/`` variant for Flink 1.15 to 1.18).
CORE_SOURCES = ("RestoreDriver.java",)
#: Sources of one job kind each, compiled apart: on a release whose API they do not fit (the
#: types job and the bootstrap job need Flink 1.19 or later, the TTL clock 2.x), the build goes
#: on without them and :attr:`Build.unavailable` names them (the driver refuses those cases).
OPTIONAL_SOURCES = {"types": ("TypesTopology.java", "jobs/java/TypesJob.java"),
                    "bootstrap": ("BootstrapJob.java",),
                    "ttl-clock": ("TtlClockBackend.java",),
                    "vectors": ("SerializerVectors.java",)}


def _javac(lib: Path, classes: Path, sources: list[Path]) -> str | None:
    done = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{lib}/*:{classes}",
                           *map(str, sources)], capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else f"{done.stdout}{done.stderr}"


def build(version: str = FLINK_VERSION) -> Build:
    """Copies the fixture jobs and compiles RestoreDriver with them, once per content hash.

    ``version``: the Flink release whose jars the drivers are compiled against and run on
    (the Flink venv's 2.3.0, or ``apache-flink-libraries==version`` installed by
    :func:`flink_versions.pyflink_lib`). The cache key covers the fixture jobs, the drivers,
    the release and its jars' names and sizes, so a change to any of them builds anew.
    Concurrent callers serialise on a lock file.
    """
    venv = flink_venv()
    if version == FLINK_VERSION:
        lib = pyflink_lib(venv)
    else:
        from flink_versions import pyflink_lib as release_lib
        lib = release_lib(version)
    jobs = fixture_jobs_dir()
    if not (jobs / "java" / "JavaStateJob.java").is_file():
        raise FlinkUnavailable(f"no fixture jobs in {jobs} (set $STATECTL_FLINK_FIXTURES)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise FlinkUnavailable("java and javac (JDK 17) must be on PATH")
    hasher = hashlib.sha256(version.encode())
    _tree_digest(hasher, jobs)
    _tree_digest(hasher, DRIVER_SOURCES)
    for jar in sorted(lib.glob("*.jar")):
        hasher.update(f"{jar.name}:{jar.stat().st_size}".encode())
    suffix = "" if version == FLINK_VERSION else f"-{version}"
    root = cache_root() / f"build{suffix}-{hasher.hexdigest()[:16]}"
    result = Build(root=root, lib=lib, venv=venv, version=version)
    if (root / "ok").is_file():
        return result
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "ok").is_file():
            return result
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=cache_root()))
        try:
            _copy_tree(jobs, staging / "jobs", skip=("__pycache__", ".jar"))
            for name in ("RestoreDriver.java", "BootstrapJob.java", "TtlClockBackend.java",
                         "TypesTopology.java", "SerializerVectors.java", "pyds_driver.py",
                         "log4j2.properties"):
                shutil.copyfile(DRIVER_SOURCES / name, staging / name)
            classes = staging / "classes"
            classes.mkdir()
            failed = None
            for job in ("jobs/java/JavaStateJob.java", "jobs/java-1x/JavaStateJob.java"):
                if (staging / job).is_file():
                    failed = _javac(lib, classes, [staging / "RestoreDriver.java", staging / job])
                    if failed is None:
                        break
            if failed is not None:
                raise FlinkUnavailable(f"javac failed on Flink {version}:\n{failed}")
            unavailable = []
            for kind, sources in OPTIONAL_SOURCES.items():
                failed = _javac(lib, classes, [staging / name for name in sources])
                if failed is not None:
                    if version == FLINK_VERSION:  # the release the tests are written for
                        raise FlinkUnavailable(f"javac failed ({kind}):\n{failed}")
                    unavailable.append(kind)
            (staging / "unavailable").write_text("\n".join(unavailable))
            (staging / "ok").write_text(datetime.datetime.now(datetime.UTC).isoformat())
            shutil.rmtree(root, ignore_errors=True)
            staging.rename(root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return result


# ------------------------------------------------------------------------------- file helpers


def _copy_tree(source: Path, target: Path, skip: tuple[str, ...] = ()) -> None:
    """A writable copy (the fixtures are read-only; a copy must be deletable)."""
    for directory, dirnames, filenames in os.walk(source):
        dirnames[:] = [d for d in dirnames if not d.endswith(skip)]
        relative = Path(directory).relative_to(source)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            if not name.endswith(skip):
                shutil.copyfile(Path(directory) / name, target / relative / name)


def _fingerprint(root: Path) -> list[tuple[str, int, int]]:
    """Names, sizes and modification times of every file under ``root``."""
    out = []
    for directory, _dirs, filenames in os.walk(root):
        for name in filenames:
            stat = os.stat(os.path.join(directory, name))
            out.append((os.path.relpath(os.path.join(directory, name), root), stat.st_size,
                        stat.st_mtime_ns))
    return sorted(out)


def _missing_external_files(snapshot: Path) -> list[str]:
    """A hint for a failed restore: absolute ``file:`` paths named in ``_metadata`` that point
    outside the snapshot and do not exist (a RocksDB incremental checkpoint names its
    ``shared/`` files so; inline handles name such paths too, harmlessly)."""
    data = (snapshot / "_metadata").read_bytes()
    paths = {m.decode() for m in re.findall(rb"file:(/[\x21-\x7e]+)", data)}
    missing = sorted(p for p in paths if not os.path.exists(p)
                     and not p.startswith(str(snapshot.resolve()) + os.sep))
    if not missing:
        return []
    return [f"note: _metadata names {len(missing)} absolute paths that do not exist here, e.g. "
            f"{missing[0]} (a RocksDB incremental checkpoint reads its shared/ files from there)"]


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m[1], m[1]), value)


#: Lines of a Flink log worth showing: warnings, errors and stack traces.
_LOG_INTERESTING = re.compile(r" (WARN|ERROR) |Exception|^\s+at |^Caused by")
_LOG_NOISE = re.compile(r"DelegationTokenManager|No tokens obtained|scheduled executor service "
                        r"is shutdown|FnApiControlClient closed")


def log_excerpt(text: str, limit: int = 120) -> str:
    """The warnings, errors and stack traces of a Flink log (at most ``limit`` lines)."""
    lines = [ln for ln in text.splitlines()
             if _LOG_INTERESTING.search(ln) and not _LOG_NOISE.search(ln)]
    if len(lines) > limit:
        cut = f"... ({len(lines) - limit} lines) ..."
        lines = lines[: limit // 2] + [cut] + lines[-limit // 2:]
    return "\n".join(line[:500] for line in lines)


# --------------------------------------------------------------------------------- the drivers


class _Driver:
    """One long-lived driver process speaking the line protocol of RestoreDriver.java."""

    def __init__(self, command: list[str], env: dict[str, str], log_file: Path,
                 stderr_file: Path) -> None:
        self.log_file = log_file
        self._stderr = open(stderr_file, "ab")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._stderr, env=env, text=True, bufsize=1)
        self._selector = selectors.DefaultSelector()
        assert self.process.stdout is not None
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        ready = self._read_line(time.monotonic() + 180)
        if ready != "READY":
            self.close()
            raise FlinkUnavailable(f"Flink driver did not start: {ready!r}; see {stderr_file}")

    def _read_line(self, deadline: float) -> str | None:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                return None
            line = stdout.readline()
            if not line:
                return None                # the driver died
            if line.strip():
                return line.rstrip("\n")

    def run(self, fields: dict[str, object], wait: float) -> dict[str, str] | None:
        """Sends one case; its RESULT fields, or None if the driver died or hung."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write("\t".join(f"{k}={_escape(v)}" for k, v in fields.items())
                                     + "\n")
            self.process.stdin.flush()
        except OSError:
            return None
        line = self._read_line(time.monotonic() + wait)
        if line is None or not line.startswith("RESULT\t"):
            return None
        return {k: _unescape(v) for k, _, v in
                (f.partition("=") for f in line.split("\t")[1:])}

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self._selector.close()
        self._stderr.close()


class FlinkRestorer:
    """Restores :class:`RestoreCase` s in real Flink, reusing its drivers between cases.

    A context manager; ``close()`` stops the drivers and deletes the work directory (unless
    ``keep``). Cases run one at a time (each Flink job uses both cores of a small machine
    while it starts). Not thread-safe.
    """

    def __init__(self, workdir: Path | None = None, keep: bool = False,
                 version: str = FLINK_VERSION) -> None:
        self.version = version  # the Flink release that restores (jars: see build())
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="statectl-flink-restore-"))
        self.keep = keep
        self._build: Build | None = None
        self._drivers: dict[str, _Driver] = {}
        self._count = 0

    def __enter__(self) -> FlinkRestorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for driver in self._drivers.values():
            driver.close()
        self._drivers.clear()
        if self._own_workdir and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- drivers

    def _driver(self, job: str) -> _Driver:
        family = "pyds" if job == "pyds" else "jvm"
        driver = self._drivers.get(family)
        if driver is not None and driver.alive():
            return driver
        if driver is not None:
            driver.close()
        self._build = self._build or build(self.version)
        b = self._build
        if family == "pyds" and self.version != FLINK_VERSION:
            raise FlinkUnavailable(f"the pyds job runs on PyFlink {FLINK_VERSION} only")
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        if family == "jvm":
            log_file = logs / f"flink-jvm-{self._count}.log"
            (self.workdir / "tmp").mkdir(exist_ok=True)
            command = ["java", f"-Dlog.file={log_file}", f"-Dstatectl.tmp={self.workdir / 'tmp'}",
                       f"-Dlog4j.configurationFile={b.log4j}", *JVM_OPTIONS,
                       "-cp", f"{b.lib}/*:{b.classes}", "RestoreDriver"]
        else:
            ident = f"statectl-pyds-{self._count}"
            log_file = logs / f"flink-{ident}-python-{os.uname().nodename}.log"
            (self.workdir / "tmp").mkdir(exist_ok=True)
            env.update(FLINK_LOG_DIR=str(logs), LOG4J_PROPERTIES=str(b.log4j),
                       FLINK_IDENT_STRING=ident, STATECTL_TMP=str(self.workdir / "tmp"))
            command = [str(b.python), str(b.root / "pyds_driver.py"), str(b.jobs)]
        driver = _Driver(command, env, log_file, logs / f"driver-{family}-{self._count}.stderr")
        self._drivers[family] = driver
        return driver

    # -- cases

    def restore(self, case: RestoreCase) -> RestoreResult:
        """Restores ``case.snapshot`` (a copy of it) in Flink and checks every key."""
        started = time.monotonic()
        self._count += 1
        case_dir = self.workdir / f"case-{self._count:03d}"
        try:
            return self._restore(case, case_dir, started)
        finally:
            if not self.keep:
                shutil.rmtree(case_dir, ignore_errors=True)

    def restore_all(self, cases: Iterable[RestoreCase]) -> list[RestoreResult]:
        return [self.restore(case) for case in cases]

    def _restore(self, case: RestoreCase, case_dir: Path, started: float) -> RestoreResult:
        if not (case.snapshot / "_metadata").is_file():
            return self._failed(case, started, [f"{case.snapshot} holds no _metadata"])
        driver = self._driver(case.job)
        b = self._build
        assert b is not None
        before = _fingerprint(case.snapshot)
        snapshot = case_dir / "snapshot"
        _copy_tree(case.snapshot, snapshot)
        base = case_dir / "job"
        expect, fields = self._prepare_input(case, base, b)
        out = case_dir / "stdout.txt"
        fields.update(
            id=self._count, kind=case.job, base=base, restore=f"file://{snapshot}",
            parallelism=case.parallelism, max_parallelism=case.max_parallelism,
            backend=case.backend, prefix=case.input.key_prefix, nkeys=case.input.keys, out=out,
            expect=expect, count_regex=OUTPUT_LINE[case.job],
            timeout_ms=int(case.timeout * 1000), quiet_ms=5000,
            ttl_now_ms="" if case.ttl_now_ms is None else case.ttl_now_ms)
        reply = driver.run(fields, wait=case.timeout + 120)
        problems: list[str] = []
        if reply is None:
            problems.append("the Flink driver died or hung; it is restarted for the next case")
            driver.close()
            reply = {}
        log_text = self._log_slice(driver.log_file, reply)
        if reply.get("status") == "failed":
            problems.append(f"Flink job {reply.get('job_status') or 'not started'}: "
                            f"{reply.get('error', '')}")
        elif reply.get("status") == "timeout":
            problems.append(f"timed out after {case.timeout:.0f} s")
        lines = int(reply.get("lines", 0))
        if reply and lines < expect:
            problems.append(f"Flink printed {lines} of the {expect} verification lines")
        if out.is_file() and reply.get("status") != "failed":
            problems += self._check(case, out, b)
        if problems:
            problems += _missing_external_files(case.snapshot)
        if _fingerprint(case.snapshot) != before:
            problems.append(f"the input snapshot {case.snapshot} changed during the restore")
        start_ms = int(reply.get("start", 0))
        timings = {k: (int(reply[k]) - start_ms) / 1000 for k in
                   ("submitted", "running", "restored", "first_line", "last_line", "end")
                   if int(reply.get(k, 0) or 0) > 0}
        timings.update({k.removesuffix("_ms") + "_seconds": int(reply[k]) / 1000
                        for k in ("cpu_ms", "cpu_restored_ms") if reply.get(k)})
        ok = not problems
        return RestoreResult(
            case=case, ok=ok, problems=problems, flink_log="" if ok else log_excerpt(log_text),
            seconds=timings.get("end", 0.0), wall_seconds=time.monotonic() - started,
            timings=timings, job_status=reply.get("job_status", ""), output_lines=lines,
            expected_lines=expect, flink_timing=restore_timing(log_text))

    def generate(self, base: Path, *, parallelism: int, max_parallelism: int,
                 fixture_input: FixtureInput, backend: str = "hashmap",
                 incremental: bool = False, savepoint: bool = False, checkpoint: bool = False,
                 checkpoint_interval: str = "5s", timeout: float = 1800.0) -> dict[str, str]:
        """Runs the ``java`` fixture job on ``base/input`` (written beforehand, e.g. by
        ``fixture_input.py BASE``) until it has processed the last input record, then takes a
        canonical savepoint (``savepoint``) and/or waits for a checkpoint triggered after that
        point (``checkpoint``; retained in ``base/checkpoints/<job id>/chk-N``), and cancels.

        The last record must belong to key ``keys - 1`` (a probe key: the job prints its count);
        the caller chooses the input so. Returns the driver's RESULT fields (``status``,
        ``savepoint``, ``checkpoint_id``; millisecond timestamps ``start``, ``processed``,
        ``savepoint_done``, ``checkpoint_done``, ``end``); raises RuntimeError on failure.
        """
        n = fixture_input.keys
        last = n - 1
        mod = fixture_input.count_mod
        count = last + 1 if mod == 0 else last % mod + 1
        if mod and count != min(mod, n):
            raise ValueError(f"the last input record is key {last}'s only if it has the most "
                             f"records: need (keys - 1) % count_mod == count_mod - 1")
        driver = self._driver("java")
        self._count += 1
        fields: dict[str, object] = dict(
            id=self._count, mode="generate", kind="java", base=base, parallelism=parallelism,
            max_parallelism=max_parallelism, backend=backend,
            incremental=str(incremental).lower(), checkpoint_interval=checkpoint_interval,
            prefix=fixture_input.key_prefix, nkeys=n, out=base / "stdout.txt",
            expect=1, count_regex=rf"STR {re.escape(fixture_input.key_prefix)}{last} "
                                  rf"count={count}\s*$",
            savepoint="canonical" if savepoint else "", checkpoint="yes" if checkpoint else "",
            timeout_ms=int(timeout * 1000), quiet_ms=int(timeout * 1000))
        reply = driver.run(fields, wait=timeout + 300)
        if reply is None or reply.get("status") != "done":
            log = self._log_slice(driver.log_file, reply or {})
            raise RuntimeError(f"generation failed: {reply}\n{log_excerpt(log)}")
        return reply

    def _failed(self, case: RestoreCase, started: float, problems: list[str]) -> RestoreResult:
        return RestoreResult(case=case, ok=False, problems=problems, flink_log="", seconds=0.0,
                             wall_seconds=time.monotonic() - started, timings={}, job_status="",
                             output_lines=0, expected_lines=0)

    @staticmethod
    def _log_slice(log_file: Path, reply: dict[str, str]) -> str:
        if not log_file.is_file():
            return ""
        start = int(reply.get("log_from", 0) or 0)
        end = int(reply.get("log_to", 0) or 0) or log_file.stat().st_size
        with open(log_file, "rb") as handle:
            handle.seek(start)
            return handle.read(max(0, end - start)).decode("utf-8", "replace")

    @staticmethod
    def _prepare_input(case: RestoreCase, base: Path, b: Build) -> tuple[int, dict[str, object]]:
        """The job's input folder, holding only the verification records, and the number of
        lines the job prints for them.

        The snapshot's FileSource enumerator lists the files it already read by absolute path
        (the fixtures': ``/data/flink-fixtures/...``); none of them is here, so the source reads
        exactly what this folder holds. ``part-0.txt`` and the rules file exist but are empty:
        the fixture scripts would write the whole input into them, and the broadcast state must
        come from the snapshot.
        """
        (base / "input").mkdir(parents=True)
        (base / "input" / "part-0.txt").write_text("")
        (base / "rules").mkdir()
        (base / "rules" / "rules-0.txt").write_text("")
        n = case.input.keys
        fields: dict[str, object] = {}
        if case.job == "bootstrap":
            assert case.bootstrap is not None
            keys = sorted(case.bootstrap.expected)
            (base / "input" / "part-1.txt").write_text("".join(f"{k}\n" for k in keys))
            fields.update(states=case.bootstrap.states, uid=case.bootstrap.uid,
                          ttl_ms=case.bootstrap.ttl_ms)
            return len(keys), fields
        if case.job == "types":
            extra = _run_model(b, case.input, "types_input.py", "--extra")
            target = base / "input" / (".staged" if case.hold_input else "part-1.txt")
            target.write_text(extra, encoding="utf-8")
            if case.hold_input:
                fields["staged"] = target
            windows = int(_run_model(b, case.input, "-c", (
                "import types_input as ti; p = ti.params(); print(sum(len(ti.windows(j, p, "
                "n_extra=len(ti.EXTRA_AMOUNTS))) for j in range(p['nkeys'])))")))
            fields["types_extra"] = 3 * n
            return 6 * n + windows, fields
        records = "".join(f"{case.input.key_prefix}{j},{EXTRA_VALUE}\n" for j in range(n))
        lines = {"java": 3 * n + 1, "sql": 2 * n, "pyds": 2 * n + 1}[case.job]
        if case.job == "pyds" or case.hold_input:
            # PyFlink 2.3 fails ("A serializer has already been registered for the state") when
            # records reach the Python operators while the restored job is still initialising:
            # the driver moves the file in once every task is RUNNING.
            staged = base / "input" / ".staged"
            staged.write_text(records)
            fields["staged"] = staged
        else:
            (base / "input" / "part-1.txt").write_text(records)
        return lines, fields

    @staticmethod
    def _check(case: RestoreCase, out: Path, b: Build) -> list[str]:
        """The fixture checker's verdict on the job's output: [] or its findings."""
        if case.job == "bootstrap":
            assert case.bootstrap is not None
            return _check_bootstrap(case.bootstrap, out)
        if case.job == "types":
            args = [str(b.jobs / "check_verify_types.py"), str(out)]
        else:
            args = [str(b.jobs / "check_verify.py"), case.job, str(out)]
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              env=_model_env(case.input), cwd=b.jobs, check=False)
        if done.returncode == 0 and "VERIFY OK" in done.stdout:
            return []
        findings = [ln.strip() for ln in done.stdout.splitlines()[1:] if ln.strip()]
        findings = [f for f in findings if f != str(out)]
        return findings or [f"checker failed: {done.stdout}{done.stderr}".strip()]


def _check_bootstrap(state: BootstrapState, out: Path) -> list[str]:
    """Every key printed once, its state equal to the expected (lists in order, maps as sets
    of entries): [] or the differences (the first 20)."""
    printed: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for line in out.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^(\d+> )?BOOT (.*)$", line)
        if match:
            document = json.loads(match.group(2))
            if document["key"] in printed:
                problems.append(f"key {document['key']!r} printed twice")
            printed[document["key"]] = document["state"]
    for key, want in sorted(state.expected.items()):
        got = printed.get(key)
        if got != want:
            problems.append(f"key {key!r}: Flink restored {got}, statectl wrote {want}")
    extra = sorted(printed.keys() - state.expected.keys())
    if extra:
        problems.append(f"keys Flink printed that statectl did not write: {extra[:5]}")
    return problems[:20]


def _model_env(fixture_input: FixtureInput) -> dict[str, str]:
    return dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **fixture_input.env())


def _run_model(b: Build, fixture_input: FixtureInput, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env=_model_env(fixture_input), cwd=b.jobs, check=True)
    return done.stdout


def restore(case: RestoreCase) -> RestoreResult:
    """One restore with its own drivers (a JVM start-up more than in a shared FlinkRestorer)."""
    with FlinkRestorer() as restorer:
        return restorer.restore(case)


# ------------------------------------------------------------- restore timing from Flink's log


@dataclasses.dataclass(frozen=True)
class RestoreTiming:
    """Flink's own restore of a snapshot, read from its log (seconds, ``None`` when absent).

    ``restore_started``: the CheckpointCoordinator's ``Restoring job ... from ...`` line (the
    JobManager hands the snapshot to the tasks). ``state_restored``: the last ``Finished
    restoring from state handle`` (heap backend, canonical savepoints on any backend) or
    RocksDB's ``Finished restoring from state handle`` / ``... restore ... completed`` line.
    ``tasks_running``: the last task that switched from INITIALIZING to RUNNING.
    """

    restore_started: float | None
    first_state_handle: float | None
    state_restored: float | None
    tasks_running: float | None
    state_handles: int

    @property
    def restore_seconds(self) -> float | None:
        """From the JobManager's ``Restoring job`` to the last task RUNNING: Flink's restore."""
        if self.restore_started is None or self.tasks_running is None:
            return None
        return self.tasks_running - self.restore_started

    @property
    def state_seconds(self) -> float | None:
        """From the first state handle read to the last one finished: reading the state."""
        if self.first_state_handle is None or self.state_restored is None:
            return None
        return self.state_restored - self.first_state_handle


_LOG_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d),(\d\d\d) ")


def restore_timing(log_text: str) -> RestoreTiming:
    """The restore milestones of the first restored job in ``log_text`` (a Flink log with the
    default ``HH:mm:ss,SSS`` timestamps; a midnight wrap is handled)."""
    started = first = restored = running = None
    handles = 0
    previous = 0.0
    offset = 0.0
    for line in log_text.splitlines():
        m = _LOG_TIME.match(line)
        if not m:
            continue
        t = int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + int(m[4]) / 1000 + offset
        if t < previous - 43200:
            offset += 86400
            t += 86400
        previous = t
        if started is None:
            if "CheckpointCoordinator" in line and "Restoring job" in line:
                started = t
            continue
        if ("Starting to restore from state handle" in line
                or "Starting RocksDB incremental recovery" in line):
            first = t if first is None else first
            handles += 1
        elif ("Finished restoring from state handle" in line
              or "Finished RocksDB incremental recovery" in line):
            restored = t
        elif ("executiongraph.ExecutionGraph" in line
              and "switched from INITIALIZING to RUNNING" in line):
            running = t
        elif " switched from state RUNNING to " in line and "Job " in line:
            break
    return RestoreTiming(restore_started=started, first_state_handle=first,
                         state_restored=restored, tasks_running=running, state_handles=handles)


def iter_fixture_sets(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``(set, expected.json)`` for every immediate subdirectory of ``root`` with one."""
    if not root.is_dir():
        return
    for path in sorted(root.iterdir()):
        if (path / "expected.json").is_file():
            yield path, json.loads((path / "expected.json").read_text())
