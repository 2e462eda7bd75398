"""The restore harness (``flink_restore.py``) restores fixture snapshots in real Flink 2.3.

Positive cases: a canonical savepoint of the first set of each job kind, restored at another
parallelism, on the heap backend and (java, sql) on RocksDB; every key's state printed by Flink
must equal ``expected.json``'s. Negative controls prove that the harness can fail: wrong expected
values, a max parallelism the snapshot does not have, a snapshot of another job. Sets are found
by iterating ``$STATECTL_FLINK_FIXTURES`` (and the RocksDB root), never by name.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from flink_fixtures import fixtures_dir
from flink_restore import (
    FixtureInput,
    FlinkRestorer,
    RestoreCase,
    iter_fixture_sets,
    log_excerpt,
    restore_timing,
)
from oracle import REPO_ROOT


def rocksdb_fixtures_dir() -> Path:
    return Path(os.environ.get("STATECTL_FLINK_ROCKSDB_FIXTURES",
                               REPO_ROOT.parent / "shared" / "flink-fixtures-rocksdb"))


def first_set(job: str, root: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """The first fixture set (in name order) whose expected.json says ``job``."""
    root = root or fixtures_dir()
    for fixture_set, expected in iter_fixture_sets(root):
        if expected["job"] == job:
            return fixture_set, expected
    pytest.fail(f"no fixture set of job {job!r} in {root} (set STATECTL_FLINK_FIXTURES)")


def canonical_savepoint(expected: dict[str, Any]) -> dict[str, Any]:
    """The set's first canonical savepoint that Flink wrote without rescaling."""
    for snap in expected["snapshots"]:
        if snap["format"] == "canonical" and "rescaled_from" not in snap:
            return snap
    pytest.fail("the set lists no canonical savepoint")


def other_parallelism(snap: dict[str, Any], expected: dict[str, Any]) -> int:
    """A parallelism the snapshot was not written with (a rescale on restore)."""
    p = int(snap["parallelism"])
    return p + 1 if p + 1 <= int(expected["max_parallelism"]) else max(1, p - 1)


def savepoint_case(job: str, backend: str = "hashmap", root: Path | None = None,
                   **overrides: Any) -> RestoreCase:
    fixture_set, expected = first_set(job, root)
    snap = canonical_savepoint(expected)
    parallelism = overrides.pop("parallelism", other_parallelism(snap, expected))
    return RestoreCase.from_fixture(fixture_set, snap["path"], parallelism=parallelism,
                                    backend=backend, **overrides)


def assert_restored(flink_restorer: FlinkRestorer, case: RestoreCase) -> None:
    result = flink_restorer.restore(case)
    print(result.report(), result.timings)
    assert result.ok, result.report()
    assert result.output_lines == result.expected_lines
    assert not result.problems and not result.flink_log


# ------------------------------------------------------------------------------ restores pass


def test_java_canonical_savepoint_heap(flink_restorer: FlinkRestorer) -> None:
    assert_restored(flink_restorer, savepoint_case("java"))


def test_java_canonical_savepoint_on_rocksdb(flink_restorer: FlinkRestorer) -> None:
    # a canonical savepoint is backend-independent: the heap set's savepoint restores on RocksDB;
    # hold_input: the verification records arrive only once every task has restored
    assert_restored(flink_restorer, savepoint_case("java", backend="rocksdb", parallelism=1,
                                                   hold_input=True))


def test_java_rocksdb_canonical_savepoint(flink_restorer: FlinkRestorer) -> None:
    # the RocksDB fixture root: a savepoint RocksDB wrote, restored on RocksDB
    assert_restored(flink_restorer, savepoint_case("java", backend="rocksdb",
                                                   root=rocksdb_fixtures_dir()))


def test_sql_canonical_savepoint(flink_restorer: FlinkRestorer) -> None:
    # the planner's operators have no uid: the harness' job graph must hash like job_sql.py's
    assert_restored(flink_restorer, savepoint_case("sql"))


def test_pyds_canonical_savepoint(flink_restorer: FlinkRestorer) -> None:
    assert_restored(flink_restorer, savepoint_case("pyds"))


# ------------------------------------------------------------------- and can fail (controls)


def test_wrong_expected_values_fail(flink_restorer: FlinkRestorer) -> None:
    case = savepoint_case("java")
    # count_mod = keys - 1 changes the expectation of the last key only (1 record, not `keys`):
    # one wrong key among all must fail the restore
    wrong = dataclasses.replace(case.input, count_mod=max(2, case.input.keys - 1))
    result = flink_restorer.restore(dataclasses.replace(case, input=wrong))
    assert not result.ok
    assert result.job_status == "CANCELED"         # Flink restored it; the values differ
    assert any("expected" in p for p in result.problems), result.report()


def test_more_keys_expected_than_restored_fail(flink_restorer: FlinkRestorer) -> None:
    case = savepoint_case("sql")
    more = FixtureInput(**{**dataclasses.asdict(case.input), "keys": case.input.keys + 5})
    result = flink_restorer.restore(dataclasses.replace(case, input=more))
    assert not result.ok, result.report()


def test_other_max_parallelism_fails(flink_restorer: FlinkRestorer) -> None:
    case = savepoint_case("java")
    other = case.max_parallelism * 2 if case.max_parallelism <= 16384 else case.max_parallelism // 2
    result = flink_restorer.restore(dataclasses.replace(case, max_parallelism=other))
    assert not result.ok
    assert result.job_status == "FAILED", result.report()
    assert "max parallelism" in " ".join(result.problems).lower() + result.flink_log.lower()


def test_snapshot_of_another_job_fails(flink_restorer: FlinkRestorer) -> None:
    java = savepoint_case("java")
    sql_set, sql_expected = first_set("sql")
    sql_snapshot = sql_set / canonical_savepoint(sql_expected)["path"]
    result = flink_restorer.restore(dataclasses.replace(java, snapshot=sql_snapshot,
                                                        max_parallelism=sql_expected[
                                                            "max_parallelism"]))
    assert not result.ok
    assert result.job_status == "FAILED"
    assert result.flink_log, "the Flink log excerpt of a failed restore"


def test_missing_snapshot_fails(flink_restorer: FlinkRestorer, tmp_path: Path) -> None:
    result = flink_restorer.restore(dataclasses.replace(savepoint_case("java"), snapshot=tmp_path))
    assert not result.ok and "_metadata" in result.problems[0]


# ------------------------------------------------------------------------- log helpers (no JVM)

LOG = """\
23:59:59,100 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Restoring job 1f from Savepoint 13 @ 0 for 1f located at file:/x.
23:59:59,900 INFO  org.apache.flink.runtime.state.restore.FullSnapshotRestoreOperation [] - Starting to restore from state handle: KeyGroupsSavepointStateHandle{...}
00:00:01,400 INFO  org.apache.flink.runtime.state.restore.FullSnapshotRestoreOperation [] - Finished restoring from state handle: KeyGroupsSavepointStateHandle{...}
00:00:01,500 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - str-keyed (1/1) (a_b_0_0) switched from INITIALIZING to RUNNING.
00:00:02,000 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - something odd
00:00:09,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job j (1f) switched from state RUNNING to CANCELLING.
00:00:09,500 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - str-keyed (1/1) (a_b_0_1) switched from INITIALIZING to RUNNING.
"""  # noqa: E501


def test_restore_timing_reads_the_milestones_across_midnight() -> None:
    timing = restore_timing(LOG)
    assert timing.state_handles == 1
    assert timing.restore_seconds == pytest.approx(2.4)
    assert timing.state_seconds == pytest.approx(1.5)


def test_restore_timing_without_a_restore() -> None:
    timing = restore_timing("12:00:00,000 INFO  x [] - nothing\n")
    assert timing.restore_seconds is None and timing.state_seconds is None


def test_log_excerpt_keeps_warnings_and_errors() -> None:
    assert log_excerpt(LOG).splitlines() == [LOG.splitlines()[4]]
