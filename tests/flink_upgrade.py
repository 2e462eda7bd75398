"""Flink's own outcome of job upgrades: the ground truth ``statectl compat OLD NEW`` is tested on.

Each :class:`UpgradeCase` is a job upgrade from version v1 to version v2 of one small job
(``tests/flink_jobs/upgrade/``: a file source, the keyed operator ``stateful`` with a POJO, a
count and an enum state, the keyed operator ``second`` with a running sum; max parallelism 128,
set explicitly; hashmap backend):

* ``old``: a canonical savepoint of v1 holding state for a few keys (4 keys, 2 records each);
* ``new``: a canonical savepoint of v2 started fresh (no restore) after it processed the same
  records, so that every state v2 registers is in it;
* ``outcome``: what Flink does when v2 restores ``old`` without allowNonRestoredState (restart
  strategy none): ``{"restored": True}`` once every stateful operator processed the records fed
  after the restore and a checkpoint completed after that; else ``{"restored": False,
  "exception": <the innermost cause's class>, "message": <its first line>}`` from the job's
  failure (or its submission's) -- ``causes`` holds the whole chain, outermost first;
* ``old_state``: ``old-state.json`` beside ``old`` (``<job>/savepoint`` and
  ``<job>/old-state.json``): v1's keyed state at the moment ``old`` was taken, dumped by the job
  itself (no record comes in between): after the savepoint the driver feeds the marker line
  ``0,dump`` and every stateful operator reads each of its keyed states for every key its
  backend holds, through its own state handles (``tests/flink_jobs/upgrade/driver/Probe.java``),
  as a JSON list of ``{"operator": uid, "state": name, "key": ..., "value": ...}`` sorted by
  operator, state and key, e.g.
  ``{"operator": "stateful", "state": "pojo", "key": 0, "value": {"id": 0, "name": "item-0",
  "qty": 3}}``. Values are canonical JSON: POJOs (and Tuples, Kryo-serialized classes) as objects
  of their fields by name, java.time values as ISO-8601 strings, lists, maps with sorted keys,
  enums by name, integers (Long) as numbers; an absent value (or an empty list) has no entry.

:func:`restore_and_dump` (many at once: :func:`restore_and_dump_many`, one JVM): any savepoint
directory (e.g. one statectl wrote) restored into a case's v2 job on the hashmap or the RocksDB
backend, without allowNonRestoredState, fed no records: restored once a checkpoint completed
and every stateful operator dumped its keyed state on the marker (the same dump as
``old_state``); else the failure, as ``outcome``. It uses the generation's compiled driver and
job classes (:func:`upgrade_cases` first); a JVM start and a MiniCluster's is 5-15 s, each
restore 1-3 s.

How: one JVM per Flink release (``tests/flink_jobs/upgrade/driver/UpgradeDriver.java``) with one
MiniCluster. The versions of the job hold classes of the same names with different fields, so
each version (a *variant*: ``common/`` with the files of its overlay directories in their place)
is compiled into its own class directory by the driver itself (javax.tools, in the same JVM) and
each job is submitted with its own directory as its class path (its own user class loader). The
other differences are settings the driver passes to the job's ``Topology.build`` (key type,
uids, which operators and states exist, max parallelism). The fresh savepoint of a version is
taken once and shared by the cases that start from (or upgrade to) it. Measured on two busy
cores (load 10-26), from a clean cache: 26-64 s for 2.3 and 26-102 s for 1.20 (most of it the
MiniCluster's start and the first compile); a case is 0.5-3 s. With the state dumps (load 5-10):
17-21 s for 2.3, 21-31 s for 1.20, 8 s for the cross-release case.

:func:`cross_release_case`: the job of ``same-java-time-collections`` (a POJO with java.time
fields, which Flink 1.x serializes with Kryo, and a List and a Map field) from the 1.20
generation, restored by the same job on Flink 2.3 (a second, smaller 2.3 run: 11-35 s).

The result is cached under ``~/.cache/statectl-flink/upgrade-<version>-<hash>``
(``$STATECTL_FLINK_CACHE``), the hash over the sources, the driver's spec (the case table),
the version and its jars' names and sizes; generated under a lock file, ``ok`` written last;
a cache missing any case's files is generated again. Flink missing raises
:class:`flink_restore.FlinkUnavailable`.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flink_coverage import JOB_JVM_OPTIONS, flink_lib
from flink_restore import DRIVER_SOURCES, FLINK_VERSION, FlinkUnavailable, cache_root, log_excerpt
from flink_versions import FLINK_1X

__all__ = ["BACKENDS", "CASES", "CROSS_RELEASE", "SOURCES", "RestoreOutcome", "RestoreRequest",
           "UpgradeCase", "cross_release_case", "load_state", "restore_and_dump",
           "restore_and_dump_many", "timings", "upgrade_case", "upgrade_cases"]

SOURCES = DRIVER_SOURCES / "upgrade"
#: Whole-run bound, seconds.
TIMEOUT = 900
#: The state backends :func:`restore_and_dump` restores on.
BACKENDS = ("hashmap", "rocksdb")


@dataclasses.dataclass(frozen=True)
class UpgradeCase:
    """One upgrade: v1's savepoint (``old``), v2's fresh savepoint (``new``), Flink's outcome."""

    name: str
    old: Path
    new: Path
    outcome: dict[str, Any]
    description: str
    #: the failure's cause chain (``"class: first line"``, outermost first); empty if restored
    causes: tuple[str, ...] = ()
    #: ``old-state.json``: v1's keyed state when ``old`` was taken (:func:`load_state`)
    old_state: Path | None = None


@dataclasses.dataclass(frozen=True)
class RestoreRequest:
    """A savepoint to restore into ``case``'s v2 job on ``backend`` (:func:`restore_and_dump`)."""

    case: str
    savepoint: Path
    backend: str = "hashmap"


@dataclasses.dataclass(frozen=True)
class RestoreOutcome:
    """Flink's outcome of restoring a savepoint, and the restored job's keyed state.

    ``restored`` with ``state`` the dump (as ``old-state.json``: :func:`load_state`), or not,
    with the failure's innermost cause (``exception``, ``message``: its first line), its chain
    ``causes`` (outermost first) and ``state`` empty."""

    restored: bool
    exception: str
    message: str
    causes: tuple[str, ...]
    state: list[dict[str, Any]]

    @property
    def outcome(self) -> dict[str, Any]:
        """As :attr:`UpgradeCase.outcome`."""
        if self.restored:
            return {"restored": True}
        return {"restored": False, "exception": self.exception, "message": self.message}


@dataclasses.dataclass(frozen=True)
class Version:
    """A version of the job: the overlay directories over ``common/`` and Topology's settings."""

    overlays: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def variant(self) -> str:
        return "+".join(self.overlays) or "common"

    @property
    def job_id(self) -> str:
        return "+".join([self.variant, *(f"{k}={v}" for k, v in self.settings)])


def _v(*overlays: str, **settings: Any) -> Version:
    return Version(tuple(overlays),
                   tuple((k, str(v).lower()) for k, v in sorted(settings.items())))


BASE = _v()
#: name -> (description, v1, v2)
CASES: dict[str, tuple[str, Version, Version]] = {
    "same": ("control: v2 is v1", BASE, BASE),
    "pojo-field-added": ("the POJO of ValueState 'pojo' gains a field (int extra)",
                         BASE, _v("item-field-added")),
    "pojo-field-removed": ("the POJO of ValueState 'pojo' loses a field (String name)",
                           BASE, _v("item-field-removed")),
    "pojo-field-type-int-to-long": ("a field of the POJO of ValueState 'pojo' (qty) changes "
                                    "from int to long", BASE, _v("item-qty-long")),
    "value-type-long-to-string": ("ValueState 'count' changes from Long to String",
                                  BASE, _v(count="value-string")),
    "key-type-long-to-string": ("the key of operator 'stateful' changes from Long to String",
                                BASE, _v(key="string")),
    "state-kind-value-to-list": ("state 'count' changes from ValueState<Long> to "
                                 "ListState<Long>", BASE, _v(count="list-long")),
    "enum-constant-appended": ("the enum of ValueState 'color' gains a constant at its end",
                               BASE, _v("color-appended")),
    "kryo-field-to-pojo": ("a field of the POJO of ValueState 'pojo' has a type Flink treats "
                           "as a generic type (Kryo) in v1 and as a POJO in v2",
                           _v("kryo"), _v("kryo", "kryo-pojo")),
    "uid-renamed": ("operator 'stateful' gets the uid 'stateful-v2'",
                    BASE, _v(uid="stateful-v2")),
    "operator-dropped": ("the stateful operator 'second' is removed", BASE, _v(second=False)),
    "operator-added": ("a new stateful operator 'third' (ValueState<Long> 'sum')",
                       BASE, _v(third=True)),
    "state-added": ("operator 'stateful' registers a new ValueState<Long> 'added'",
                    BASE, _v(added=True)),
    "state-removed": ("operator 'stateful' no longer registers ValueState 'color'",
                      BASE, _v(color=False)),
    "max-parallelism-changed": ("the max parallelism, set explicitly, changes from 128 to 256",
                                BASE, _v(maxp=256)),
    "same-java-time-collections": ("control: v2 is v1, a POJO with java.time fields "
                                   "(ZonedDateTime and Duration: Kryo on Flink 1.x), a List and "
                                   "a Map field (the cross-release case's job)",
                                   _v("xrelease"), _v("xrelease")),
    "tuple-key-to-pojo-key": ("the key of operator 'stateful' changes from a Tuple2<String, "
                              "Long> to a POJO of the same fields",
                              _v(key="tuple"), _v(key="pojo")),
}


#: The cross-release case: v1 on Flink 1.20, restored by the same job on Flink 2.3.
CROSS_RELEASE = "cross-release-1.20-to-2.3"
CROSS_DESCRIPTION = ("the same job on Flink 1.20 (v1) and 2.3 (v2): a POJO with java.time fields "
                     "(ZonedDateTime and Duration: Kryo on 1.20), a List and a Map field")
XRELEASE = _v("xrelease")


def _variant_line(version: Version) -> str:
    files = {p.name: p for p in sorted((SOURCES / "common").glob("*.java"))}
    for overlay in version.overlays:
        files.update({p.name: p for p in sorted((SOURCES / overlay).glob("*.java"))})
    return "\t".join(["VARIANT", version.variant, *(str(files[n]) for n in sorted(files))])


def _job_line(version: Version) -> str:
    return "\t".join(["JOB", version.job_id, version.variant,
                      ";".join(f"{k}={val}" for k, val in version.settings)])


def _spec(version: str) -> str:
    """The driver's spec of ``version``: the variants (their sources), the jobs, the cases."""
    del version  # the same cases on every release
    versions = {v.job_id: v for _d, v1, v2 in CASES.values() for v in (v1, v2)}
    variants = {v.variant: v for v in versions.values()}
    lines = [_variant_line(v) for v in variants.values()]
    lines += [_job_line(v) for v in versions.values()]
    lines += ["\t".join(["CASE", name, v1.job_id, v2.job_id])
              for name, (_d, v1, v2) in CASES.items()]
    return "\n".join(lines) + "\n"


def _digest(version: str, lib: Path, spec: str) -> str:
    hasher = hashlib.sha256(version.encode() + b"\0" + spec.encode() + b"\0")
    for path in sorted(SOURCES.rglob("*.java")):
        hasher.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes() + b"\0")
    for jar in sorted(lib.glob("*.jar")):
        hasher.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return hasher.hexdigest()[:16]


def _unescape(value: str) -> str:
    return value.replace("\\\\", "\0").replace("\\t", "\t").replace("\\n", "\n").replace("\0", "\\")


def _parse(root: Path) -> tuple[dict[str, Path], dict[str, tuple[bool, list[str], int]], int]:
    jobs: dict[str, Path] = {}
    cases: dict[str, tuple[bool, list[str], int]] = {}
    total = 0
    for line in (root / "out" / "result.tsv").read_text().splitlines():
        fields = [_unescape(f) for f in line.split("\t")]
        if fields[0] == "JOB":
            jobs[fields[1]] = Path(fields[2])
        elif fields[0] == "CASE":
            cases[fields[1]] = (fields[2] == "restored", fields[4:], int(fields[3]))
        elif fields[0] == "RESTORE":  # the dump's path first
            cases[fields[1]] = (fields[2] == "restored", fields[4:], int(fields[3]))
        elif fields[0] == "TOTAL":
            total = int(fields[1])
    return jobs, cases, total


def _load(root: Path, table: dict[str, tuple[str, Path | Version, Version]]
          ) -> list[UpgradeCase]:
    jobs, outcomes, _total = _parse(root)
    result = []
    for name, (description, v1, v2) in table.items():
        restored, causes, _ms = outcomes[name]
        outcome: dict[str, Any] = {"restored": restored}
        if not restored:
            cls, _, message = causes[-1].partition(": ")
            outcome.update(exception=cls, message=message)
        old = v1 if isinstance(v1, Path) else jobs[v1.job_id]
        new = jobs[v2.job_id]
        for path in (old / "_metadata", new / "_metadata", old.parent / "old-state.json",
                     new.parent / "old-state.json"):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing")
        result.append(UpgradeCase(name=name, old=old, new=new, outcome=outcome,
                                  description=description, causes=tuple(causes),
                                  old_state=old.parent / "old-state.json"))
    return result


def timings(version: str) -> dict[str, int]:
    """The generation's timings of ``version`` (ms): ``total`` and ``case:<name>`` (with the
    fresh runs of the case's versions when it was the first to need them)."""
    _jobs, outcomes, total = _parse(_root(version))
    return {"total": total, **{f"case:{n}": ms for n, (_r, _c, ms) in outcomes.items()}}


def _root(version: str) -> Path:
    spec = _spec(version)
    return cache_root() / f"upgrade-{version}-{_digest(version, flink_lib(version), spec)}"


def _cached(version: str, root: Path, spec: str,
            table: dict[str, tuple[str, Path | Version, Version]]) -> list[UpgradeCase]:
    """The cases of ``table`` from ``root``; generated first if missing or damaged."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise FlinkUnavailable("java and javac (JDK 17) must be on PATH")
    if (root / "ok").is_file():
        try:
            return _load(root, table)
        except (OSError, KeyError, IndexError, ValueError):
            pass  # damaged: generated again
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if (root / "ok").is_file():
                return _load(root, table)
        except (OSError, KeyError, IndexError, ValueError):
            pass
        _generate(version, flink_lib(version), root, spec)
        return _load(root, table)


def upgrade_cases(version: str = FLINK_VERSION) -> list[UpgradeCase]:
    """Every case of :data:`CASES` on Flink ``version`` (``2.3.0`` or ``1.20.5``): cached, else
    generated now. Raises :class:`FlinkUnavailable` when Java or Flink is missing."""
    if version not in (FLINK_VERSION, FLINK_1X):
        raise ValueError(f"no upgrade cases for Flink {version}: {FLINK_VERSION} or {FLINK_1X}")
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise FlinkUnavailable("java and javac (JDK 17) must be on PATH")
    return _cached(version, _root(version), _spec(version), dict(CASES))


def cross_release_case() -> UpgradeCase:
    """:data:`CROSS_RELEASE`: ``old`` the job's savepoint on Flink 1.20 (of the 1.20 generation,
    :func:`upgrade_cases`), ``new`` the same job's fresh savepoint on Flink 2.3, ``outcome``
    Flink 2.3 restoring ``old``."""
    older = _root(FLINK_1X)
    upgrade_cases(FLINK_1X)
    jobs, _outcomes, _total = _parse(older)
    old = jobs[XRELEASE.job_id]
    spec = "\n".join([_variant_line(XRELEASE), _job_line(XRELEASE),
                      f"CASE\t{CROSS_RELEASE}\t{old}\t{XRELEASE.job_id}"]) + "\n"
    lib = flink_lib(FLINK_VERSION)
    root = cache_root() / f"upgrade-cross-{FLINK_VERSION}-{_digest(FLINK_VERSION, lib, spec)}"
    (case,) = _cached(FLINK_VERSION, root, spec,
                      {CROSS_RELEASE: (CROSS_DESCRIPTION, old, XRELEASE)})
    return case


def upgrade_case(name: str) -> UpgradeCase:
    """The case ``name`` of :func:`upgrade_cases` on Flink 2.3, or :data:`CROSS_RELEASE`."""
    if name == CROSS_RELEASE:
        return cross_release_case()
    return next(c for c in upgrade_cases(FLINK_VERSION) if c.name == name)


def load_state(path: Path) -> list[dict[str, Any]]:
    """A state dump (``old-state.json``, :attr:`RestoreOutcome.state`): its entries sorted by
    operator, state and key."""
    return _sorted_state(json.loads(Path(path).read_text()))


def _sorted_state(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: (e["operator"], e["state"],
                                          json.dumps(e["key"], sort_keys=True)))


def _v2(version: str, case: str) -> Version:
    if case == CROSS_RELEASE:
        if version != FLINK_VERSION:
            raise ValueError(f"{CROSS_RELEASE}: its v2 runs on Flink {FLINK_VERSION}, "
                             f"not {version}")
        return XRELEASE
    if case not in CASES:
        raise ValueError(f"no upgrade case {case!r}")
    return CASES[case][2]


def restore_and_dump(version: str, case: str, savepoint: Path,
                     backend: str = "hashmap") -> RestoreOutcome:
    """Flink ``version`` restores ``savepoint`` (a directory with a ``_metadata``) into the v2 job
    of ``case`` (of :data:`CASES`, or :data:`CROSS_RELEASE` on 2.3) on ``backend`` (hashmap or
    rocksdb), without allowNonRestoredState: restored once a checkpoint completed and the job
    dumped its keyed state (every key of every stateful operator, as ``old-state.json``), else
    the failure. One JVM; for several, :func:`restore_and_dump_many`."""
    (outcome,) = restore_and_dump_many(version, [RestoreRequest(case, Path(savepoint), backend)])
    return outcome


def restore_and_dump_many(version: str, requests: Iterable[RestoreRequest | tuple[str, Path, str]]
                          ) -> list[RestoreOutcome]:
    """:func:`restore_and_dump` of each request (a :class:`RestoreRequest` or ``(case,
    savepoint, backend)``), in order, in one JVM and MiniCluster."""
    reqs = [r if isinstance(r, RestoreRequest) else RestoreRequest(r[0], Path(r[1]), r[2])
            for r in requests]
    if not reqs:
        return []
    jobs: dict[str, Version] = {}
    for req in reqs:
        if req.backend not in BACKENDS:
            raise ValueError(f"backend {req.backend!r}: one of {BACKENDS}")
        if not (Path(req.savepoint) / "_metadata").is_file():
            raise FileNotFoundError(f"{Path(req.savepoint) / '_metadata'} is missing")
        v2 = _v2(version, req.case)
        jobs[v2.job_id] = v2
    upgrade_cases(version)  # the generation: its driver and the job classes, compiled
    root = _root(version)
    classes = {v.variant: root / "out" / "classes" / v.variant for v in jobs.values()}
    lines = [f"CLASSES\t{variant}\t{path}" for variant, path in classes.items()]
    lines += [_job_line(v) for v in jobs.values()]
    lines += [f"RESTORE\tr{i}\t{_v2(version, r.case).job_id}\t{Path(r.savepoint).resolve()}"
              f"\t{r.backend}" for i, r in enumerate(reqs)]
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="restore-upgrade-", dir=cache_root()) as tmp:
        work = Path(tmp)
        (work / "spec.tsv").write_text("\n".join(lines) + "\n")
        _run_driver(version, flink_lib(version), root / "driver", work)
        _jobs, rows, _total = _parse(work)
        result = []
        for i in range(len(reqs)):
            restored, fields, _ms = rows[f"r{i}"]
            dump, causes = Path(fields[0]), tuple(fields[1:])
            cls, _, message = causes[-1].partition(": ") if causes else ("", "", "")
            state = load_state(dump) if restored else []
            result.append(RestoreOutcome(restored=restored, exception="" if restored else cls,
                                         message="" if restored else message,
                                         causes=() if restored else causes, state=state))
        return result


def _run_driver(version: str, lib: Path, driver: Path, root: Path) -> None:
    """Runs the compiled driver on ``root/spec.tsv`` into ``root/out``; raises if it failed."""
    started = time.monotonic()
    log = root / "flink.log"
    with open(root / "stdout.txt", "wb") as stdout, open(root / "stderr.txt", "wb") as stderr:
        run = subprocess.run(
            ["java", f"-Dlog.file={log}",
             f"-Dlog4j.configurationFile={DRIVER_SOURCES / 'log4j2.properties'}", *JOB_JVM_OPTIONS,
             "-cp", f"{lib}/*:{driver}", "upgrade.driver.UpgradeDriver", str(root / "spec.tsv"),
             str(root / "out")],
            stdout=stdout, stderr=stderr, check=False, timeout=TIMEOUT)
    if run.returncode != 0 or not (root / "out" / "result.tsv").is_file():
        tail = ((root / "stdout.txt").read_text(errors="replace")[-3000:]
                + (root / "stderr.txt").read_text(errors="replace")[-4000:])
        excerpt = log_excerpt(log.read_text(errors="replace")) if log.is_file() else ""
        raise RuntimeError(f"the upgrade driver failed on Flink {version} (exit {run.returncode},"
                           f" {time.monotonic() - started:.0f} s; {root}):\n{tail}\n{excerpt}")


def _generate(version: str, lib: Path, root: Path, spec_text: str) -> None:
    """Compiles the driver and runs it into ``root/out`` (in place); ``root/ok`` marks success."""
    prefix = root.name.rsplit("-", 1)[0]
    for stale in cache_root().glob(f"{prefix}-*"):  # an older generation
        if stale.is_dir() and stale != root:
            shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    (root / "driver").mkdir(parents=True)
    started = time.monotonic()
    done = subprocess.run(["javac", "-nowarn", "-d", str(root / "driver"), "-cp", f"{lib}/*",
                           *map(str, sorted((SOURCES / "driver").glob("*.java")))],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FlinkUnavailable(f"javac of the upgrade driver against Flink {version} failed:\n"
                               f"{done.stdout}{done.stderr}")
    (root / "spec.tsv").write_text(spec_text)
    _run_driver(version, lib, root / "driver", root)
    (root / "ok").write_text(f"{time.monotonic() - started:.1f} s\n")
