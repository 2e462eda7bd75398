"""Real Flink 2.3 restores what statectl writes, and every key's state is what it should be.

Issue 21's acceptance, proven by Flink itself (the harness: ``tests/flink_restore.py``):

- every fixture set of the Java, SQL and PyFlink jobs (``$STATECTL_FLINK_FIXTURES``, iterated,
  never named) rewritten by ``statectl rescale --out`` from its canonical savepoint: at a new
  parallelism, at a higher max parallelism (x2, or 128 from below 128) and at a lower one (/4),
  restored on the heap and on the RocksDB backend; Flink's fixture checkers compare every key;
- every set of the types job (``$STATECTL_FLINK_TYPES_FIXTURES``: POJOs, enums, instants, dates,
  a Kryo value, TTL, ``Tuple2`` keys, window state and timers, every value re-encoded by
  statectl) rewritten at a new parallelism and restored on both backends, and at a higher max
  parallelism (its keys are Strings and ``Tuple2`` s, whose hash Flink's is); the TTL clock of
  the restored job starts when the snapshot was taken (``RestoreCase.ttl_now_ms``), and a month
  later (a negative control) the TTL state is gone, so Flink read the timestamps statectl wrote;
- every RocksDB incremental checkpoint (``$STATECTL_FLINK_ROCKSDB_FIXTURES``) converted to a
  canonical savepoint and restored into the heap backend;
- a ``statectl build`` result (count, sum, list, map, last; with and without TTL) converted and
  restored by a Flink job that declares matching states (``tests/flink_jobs/BootstrapJob.java``),
  every key compared with what statectl wrote.

Each written savepoint is also read back by statectl: ``diff`` with its source says equal and
``verify`` is clean.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flink_fixtures import expected, fixture_sets
from flink_restore import FlinkRestorer, RestoreCase, bootstrap_state, built_for_bootstrap

from formats.open import open_checkpoint
from formats.ops.convert import convert_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.verify import verify_checkpoint
from statecore.ttl import TtlValue

REPO = Path(__file__).resolve().parent.parent
JOBS = ("java", "sql", "pyds")
TYPES = "types"
#: A restore's TTL clock: this long after the latest last access of the snapshot's TTL state.
TTL_CLOCK_AFTER_MS = 60_000
MONTH_MS = 30 * 24 * 3600 * 1000


def _canonical(fixture_set: Path) -> dict[str, Any]:
    return next(s for s in expected(fixture_set)["snapshots"]
                if s["format"] == "canonical" and "rescaled_from" not in s)


def _rescale_cases() -> list[tuple[Path, int, int | None, str]]:
    """(set, new parallelism, new max parallelism or None, backend) per heap and types set."""
    out = []
    for fixture_set in fixture_sets("heap"):
        document = expected(fixture_set)
        if document["job"] not in JOBS:
            continue
        max_p = int(document["max_parallelism"])
        up = 128 if max_p < 128 else max_p * 2
        down = max(2, max_p // 4)
        out += [(fixture_set, 3, None, "rocksdb"), (fixture_set, 2, up, "hashmap"),
                (fixture_set, 2, up, "rocksdb"), (fixture_set, 2, down, "hashmap")]
    for fixture_set in fixture_sets("types"):
        document = expected(fixture_set)
        if document["job"] != TYPES:
            continue
        max_p = int(document["max_parallelism"])
        out += [(fixture_set, 3, None, "hashmap"), (fixture_set, 3, None, "rocksdb"),
                (fixture_set, 2, max_p * 2, "hashmap")]
    return out


RESCALES = _rescale_cases()


def _written_equals_source(source: Any, written: Path) -> None:
    assert diff_checkpoints(source, open_checkpoint(str(written))).equal
    report = verify_checkpoint(str(written))
    assert report.clean, report.problems[:3]


def test_there_are_restore_cases() -> None:
    assert RESCALES and {expected(s)["job"] for s, *_ in RESCALES} == {*JOBS, TYPES}


def _ttl_values(stored: Any) -> Iterator[TtlValue[Any]]:
    if isinstance(stored, TtlValue):
        yield stored
    elif isinstance(stored, list):
        for element in stored:
            yield from _ttl_values(element)
    elif isinstance(stored, dict):
        for element in stored.values():
            yield from _ttl_values(element)


def _ttl_state(source: Any) -> tuple[set[str], int | None]:
    """The names of ``source``'s TTL states, and their latest last-access timestamp."""
    names, latest = set(), None
    for op in source.metadata.operators:
        for state in op.states:
            if state.scope != "keyed":
                continue
            for *_, stored in source.keyed_entries(op.uid, state.name):
                for value in _ttl_values(stored):
                    names.add(state.name)
                    latest = max(latest or value.last_access_timestamp,
                                 value.last_access_timestamp)
    return names, latest


def _ttl_clock(source: Any) -> int | None:
    """The restored job's TTL clock: just after the snapshot's TTL state was last accessed
    (else, restored more than its TTL after that day, Flink hides the state as expired)."""
    latest = _ttl_state(source)[1]
    return None if latest is None else latest + TTL_CLOCK_AFTER_MS


@pytest.mark.parametrize(("fixture_set", "parallelism", "max_parallelism", "backend"), RESCALES,
                         ids=[f"{s.name}-p{p}-m{m}-{b}" for s, p, m, b in RESCALES])
def test_flink_restores_a_rescaled_savepoint(flink_restorer: FlinkRestorer, fixture_set: Path,
                                             parallelism: int, max_parallelism: int | None,
                                             backend: str, tmp_path: Path) -> None:
    snap = _canonical(fixture_set)
    source = open_checkpoint(str(fixture_set / snap["path"]))
    out = tmp_path / "savepoint"
    rescale_checkpoint(source, str(out), plan_checkpoint(source, parallelism, max_parallelism))
    _written_equals_source(source, out)
    overrides: dict[str, Any] = {"ttl_now_ms": _ttl_clock(source)}
    if max_parallelism is not None:
        overrides["max_parallelism"] = max_parallelism
    result = flink_restorer.restore(RestoreCase.from_fixture(
        fixture_set, out, parallelism=parallelism, backend=backend, **overrides))
    assert result.ok, result.report()


TYPE_SETS = [s for s in fixture_sets("types") if expected(s)["job"] == TYPES]


@pytest.mark.parametrize("fixture_set", TYPE_SETS[:1], ids=[s.name for s in TYPE_SETS[:1]])
def test_flink_restores_the_ttl_timestamps_statectl_wrote(flink_restorer: FlinkRestorer,
                                                          fixture_set: Path,
                                                          tmp_path: Path) -> None:
    """A negative control of the TTL clock: the rewrite of the types job restored as a month
    after its TTL state's last access. What the checker finds differ is the TTL state alone:
    Flink read the timestamps statectl wrote (and with the clock of the other cases, a month
    earlier, the values)."""
    snap = _canonical(fixture_set)
    source = open_checkpoint(str(fixture_set / snap["path"]))
    out = tmp_path / "savepoint"
    rescale_checkpoint(source, str(out), plan_checkpoint(source, 3))
    names, latest = _ttl_state(source)
    assert names and latest is not None
    result = flink_restorer.restore(RestoreCase.from_fixture(
        fixture_set, out, parallelism=3, ttl_now_ms=latest + MONTH_MS, name="ttl-expired"))
    assert not result.ok
    # the checker's findings: "POJO <key> at <amount>: states ['<name>', ...] differ: ..."
    differing = [re.match(r"POJO \S+ at \d+: states \[([^]]*)\] differ", p)
                 for p in result.problems if not p.startswith("note: ")]
    assert differing and all(differing), result.report()
    assert {name.strip(" '") for m in differing if m for name in m[1].split(",")} == names


def _rocksdb_checkpoints() -> list[tuple[Path, dict[str, Any]]]:
    return [(s, snap) for s in fixture_sets("rocksdb") for snap in expected(s)["snapshots"]
            if snap["kind"] == "checkpoint" and "rescaled_from" not in snap
            and expected(s)["job"] in JOBS]


ROCKSDB = _rocksdb_checkpoints()


def test_there_are_rocksdb_checkpoints() -> None:
    assert ROCKSDB


@pytest.mark.parametrize(("fixture_set", "snap"), ROCKSDB,
                         ids=[f"{s.name}:{p['path']}" for s, p in ROCKSDB])
def test_a_rocksdb_checkpoint_converted_restores_into_the_heap_backend(
        flink_restorer: FlinkRestorer, fixture_set: Path, snap: dict[str, Any],
        tmp_path: Path) -> None:
    source = open_checkpoint(str(fixture_set / snap["path"]))
    out = tmp_path / "canonical"
    convert_checkpoint(source, str(out))
    _written_equals_source(source, out)
    result = flink_restorer.restore(RestoreCase.from_fixture(
        fixture_set, out, parallelism=snap["parallelism"] + 1, backend="hashmap"))
    assert result.ok, result.report()


# -- bootstrap: statectl build -> Flink -------------------------------------------------------

WEEK_MS = 7 * 24 * 3600 * 1000


@pytest.mark.parametrize(("ttl", "backend"), [(None, "hashmap"), (WEEK_MS, "rocksdb")],
                         ids=["no-ttl-hashmap", "ttl-rocksdb"])
def test_flink_restores_a_bootstrapped_build(flink_restorer: FlinkRestorer, ttl: int | None,
                                             backend: str, tmp_path: Path) -> None:
    checkpoint = built_for_bootstrap(tmp_path, ttl)
    source = open_checkpoint(str(checkpoint))
    out = tmp_path / "savepoint"
    convert_checkpoint(source, str(out))
    _written_equals_source(source, out)
    bootstrap = bootstrap_state(source, ttl)
    assert bootstrap.expected
    result = flink_restorer.restore(RestoreCase(
        out, "bootstrap", parallelism=3, max_parallelism=bootstrap.max_parallelism,
        backend=backend,
        name=f"bootstrap-{backend}", bootstrap=bootstrap))
    assert result.ok, result.report()


def test_the_bootstrap_check_can_fail(flink_restorer: FlinkRestorer, tmp_path: Path) -> None:
    """A negative control: one key's expected count off by one is found."""
    checkpoint = built_for_bootstrap(tmp_path, None)
    source = open_checkpoint(str(checkpoint))
    out = tmp_path / "savepoint"
    convert_checkpoint(source, str(out))
    bootstrap = bootstrap_state(source, None)
    victim = sorted(bootstrap.expected)[0]
    bootstrap.expected[victim]["count"] += 1
    result = flink_restorer.restore(RestoreCase(
        out, "bootstrap", parallelism=2, max_parallelism=bootstrap.max_parallelism,
        name="bootstrap-negative", bootstrap=bootstrap))
    assert not result.ok and any(victim in p for p in result.problems), result.report()
