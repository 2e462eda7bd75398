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
  failure (or its submission's) -- ``causes`` holds the whole chain, outermost first.

How: one JVM per Flink release (``tests/flink_jobs/upgrade/driver/UpgradeDriver.java``) with one
MiniCluster. The versions of the job hold classes of the same names with different fields, so
each version (a *variant*: ``common/`` with the files of its overlay directories in their place)
is compiled into its own class directory by the driver itself (javax.tools, in the same JVM) and
each job is submitted with its own directory as its class path (its own user class loader). The
other differences are settings the driver passes to the job's ``Topology.build`` (key type,
uids, which operators and states exist, max parallelism). The fresh savepoint of a version is
taken once and shared by the cases that start from (or upgrade to) it. Measured on two busy
cores (load 10-26), from a clean cache: 26-64 s for 2.3 and 26-102 s for 1.20 (most of it the
MiniCluster's start and the first compile); a case is 0.5-3 s.

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
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from flink_coverage import JOB_JVM_OPTIONS, flink_lib
from flink_restore import DRIVER_SOURCES, FLINK_VERSION, FlinkUnavailable, cache_root, log_excerpt
from flink_versions import FLINK_1X

__all__ = ["CASES", "CROSS_RELEASE", "SOURCES", "UpgradeCase", "cross_release_case", "timings",
           "upgrade_cases"]

SOURCES = DRIVER_SOURCES / "upgrade"
#: Whole-run bound, seconds.
TIMEOUT = 900


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
        for path in (old, new):
            if not (path / "_metadata").is_file():
                raise FileNotFoundError(f"{path / '_metadata'} is missing")
        result.append(UpgradeCase(name=name, old=old, new=new, outcome=outcome,
                                  description=description, causes=tuple(causes)))
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
    spec = root / "spec.tsv"
    spec.write_text(spec_text)
    log = root / "flink.log"
    with open(root / "stdout.txt", "wb") as stdout, open(root / "stderr.txt", "wb") as stderr:
        run = subprocess.run(
            ["java", f"-Dlog.file={log}",
             f"-Dlog4j.configurationFile={DRIVER_SOURCES / 'log4j2.properties'}", *JOB_JVM_OPTIONS,
             "-cp", f"{lib}/*:{root / 'driver'}", "upgrade.driver.UpgradeDriver", str(spec),
             str(root / "out")],
            stdout=stdout, stderr=stderr, check=False, timeout=TIMEOUT)
    if run.returncode != 0 or not (root / "out" / "result.tsv").is_file():
        tail = ((root / "stdout.txt").read_text(errors="replace")[-3000:]
                + (root / "stderr.txt").read_text(errors="replace")[-4000:])
        excerpt = log_excerpt(log.read_text(errors="replace")) if log.is_file() else ""
        raise RuntimeError(f"the upgrade driver failed on Flink {version} (exit {run.returncode},"
                           f" {time.monotonic() - started:.0f} s; {root}):\n{tail}\n{excerpt}")
    (root / "ok").write_text(f"{time.monotonic() - started:.1f} s\n")
