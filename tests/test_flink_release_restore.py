"""Each Flink release restores what statectl writes for it, every key's state intact (issue 31).

For a Flink release R (its jars: ``apache-flink-libraries==R``, ``flink_versions.pyflink_lib``;
the drivers: ``flink_restore.FlinkRestorer(version=R)``):

- the java job's heap checkpoint, its RocksDB incremental checkpoint and the SQL job's
  checkpoint, as the release folder of R's major nearest to R wrote them (the versions root:
  1.18.1, 1.20.5, 2.0.2, ...), each rescaled by ``statectl rescale --flink-version R`` to
  parallelism 3 and max parallelism 256 and restored on the heap backend, and to 5 / 64 and
  restored on RocksDB; the fixture checker compares every key (``check_verify.py``);
- a ``statectl build`` converted with ``--flink-version R`` (a bootstrap), restored by
  BootstrapJob (Flink 1.19 and later: its API);
- for the newest 1.x: the 2.3 fixtures of the java and SQL jobs written for it (a downgrade,
  allowed for the serializers whose forms are the same).

``make test`` restores in the newest 1.x (``flink_versions.FLINK_1X``; Flink 2.3:
``test_flink_restore.py``); ``make test-flink-versions`` in 1.17 to 2.2 (marker
``flink_versions``; ``$STATECTL_FLINK_RELEASES`` lists them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from flink_fixtures import (
    VERSION_SETS,
    expected,
    fixture_sets,
    release_checkpoint,
    release_fixtures,
)
from flink_restore import (
    FixtureInput,
    FlinkRestorer,
    FlinkUnavailable,
    RestoreCase,
    bootstrap_state,
    built_for_bootstrap,
)
from flink_versions import FLINK_1X

from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints

REPO = Path(__file__).resolve().parent.parent
RELEASE_FOLDERS = release_fixtures()
#: The releases ``make test-flink-versions`` restores in (the newest patch of each).
OTHER_RELEASES = tuple(os.environ.get(
    "STATECTL_FLINK_RELEASES", "1.17.2,1.18.1,1.19.3,2.0.2,2.1.3,2.2.1").split(","))
#: (parallelism, max parallelism, backend) of each rescale.
RESCALES = ((3, 256, "hashmap"), (5, 64, "rocksdb"))


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _source_folder(release: str) -> Path | None:
    """The release folder of ``release``'s major nearest to it (its own when there is one)."""
    same = [f for f in RELEASE_FOLDERS if _minor(f.name)[0] == _minor(release)[0]]
    if not same:
        return None
    return min(same, key=lambda f: (abs(_minor(f.name)[1] - _minor(release)[1]), f.name))


def _param(release: str, *values: object) -> object:
    marks = () if release == FLINK_1X else (pytest.mark.flink_versions,)
    return pytest.param(release, *values, marks=marks,
                        id="-".join(str(v) for v in (release, *values)))


CASES = [_param(release, name, p, m, backend)
         for release in (FLINK_1X, *OTHER_RELEASES)
         for name in VERSION_SETS for p, m, backend in RESCALES]


@pytest.fixture(scope="module")
def restorers() -> Iterator[dict[str, FlinkRestorer]]:
    """One restorer (its drivers on that release's jars) per Flink release."""
    made: dict[str, FlinkRestorer] = {}
    yield made
    for restorer in made.values():
        restorer.close()


def _restorer(restorers: dict[str, FlinkRestorer], release: str) -> FlinkRestorer:
    if release not in restorers:
        restorers[release] = FlinkRestorer(version=release)
    return restorers[release]


def _rescale(source: Path, out: Path, release: str, parallelism: int,
             max_parallelism: int) -> None:
    done = subprocess.run([sys.executable, "-m", "cli.main", "rescale", str(source), "-p",
                           str(parallelism), "--max-parallelism", str(max_parallelism),
                           "--flink-version", ".".join(release.split(".")[:2]), "--out",
                           str(out)], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"for Flink {'.'.join(release.split('.')[:2])} (" in done.stdout
    assert diff_checkpoints(open_checkpoint(str(source)), open_checkpoint(str(out))).equal


def _restore(restorers: dict[str, FlinkRestorer], release: str, case: RestoreCase) -> None:
    try:
        result = _restorer(restorers, release).restore(case)
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    assert result.ok, result.report()


@pytest.mark.parametrize(("release", "name", "parallelism", "max_parallelism", "backend"),
                         CASES)
def test_the_release_restores_a_rescaled_snapshot(
        restorers: dict[str, FlinkRestorer], release: str, name: str, parallelism: int,
        max_parallelism: int, backend: str, tmp_path: Path) -> None:
    folder = _source_folder(release)
    if folder is None:
        pytest.fail(f"no Flink {release.split('.')[0]}.x folder in the versions root")
    source = release_checkpoint(folder, name)
    out = tmp_path / "savepoint"
    _rescale(source, out, release, parallelism, max_parallelism)
    job, _ = VERSION_SETS[name]
    _restore(restorers, release, RestoreCase(
        out, job, parallelism=parallelism, max_parallelism=max_parallelism, backend=backend,
        name=f"{folder.name}:{name}->{release}:p{parallelism}:m{max_parallelism}:{backend}"))


BOOTSTRAPS = [_param(release) for release in (FLINK_1X, *OTHER_RELEASES)
              if _minor(release) >= (1, 19)]


@pytest.mark.parametrize("release", BOOTSTRAPS)
def test_the_release_restores_a_bootstrapped_build(restorers: dict[str, FlinkRestorer],
                                                   release: str, tmp_path: Path) -> None:
    source = open_checkpoint(str(built_for_bootstrap(tmp_path, None)))
    out = tmp_path / "savepoint"
    target = ".".join(release.split(".")[:2])
    done = subprocess.run([sys.executable, "-m", "cli.main", "convert", str(source.location),
                           "--flink-version", target, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"for Flink {target} (" in done.stdout
    bootstrap = bootstrap_state(source, None)
    _restore(restorers, release, RestoreCase(
        out, "bootstrap", parallelism=3, max_parallelism=bootstrap.max_parallelism,
        name=f"bootstrap->{release}", bootstrap=bootstrap))


def _fixture_23(job: str) -> tuple[Path, int]:
    for fixture_set in fixture_sets("heap"):
        document = expected(fixture_set)
        if document["job"] == job and FixtureInput.from_expected(document) == FixtureInput():
            snap = next(s for s in document["snapshots"]
                        if s["format"] == "canonical" and "rescaled_from" not in s)
            return fixture_set / snap["path"], int(document["max_parallelism"])
    pytest.fail(f"no 2.3 fixture set of the {job} job with the default input")


@pytest.mark.parametrize("job", ["java", "sql"])
def test_a_2x_snapshot_written_for_1x_restores(restorers: dict[str, FlinkRestorer], job: str,
                                               tmp_path: Path) -> None:
    """A downgrade: Flink 2.3's snapshot of the java and SQL jobs, for the newest 1.x."""
    source, _ = _fixture_23(job)
    out = tmp_path / "savepoint"
    _rescale(source, out, FLINK_1X, 3, 256)
    _restore(restorers, FLINK_1X, RestoreCase(out, job, parallelism=3, max_parallelism=256,
                                              name=f"2.3:{job}->{FLINK_1X}"))
