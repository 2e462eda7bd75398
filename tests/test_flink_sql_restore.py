"""SQL jobs moved by statectl are restored by Flink 2.3 and go on (issue 40's acceptance).

Each coverage snapshot of the SQL coverage job (``tests/flink_sql_coverage.py``) is rewritten by
``rescale -p 3 --max-parallelism 256``, ``rescale -p 1`` or ``convert``; the job restores the
result in Flink 2.3 on both state backends at the new parallelism and max parallelism, completes
two checkpoints and takes a savepoint, which Flink's own reader (``StateReader.java``) reads: its
entries per keyed state equal the source's (an empty map or list, which only the heap format
keeps, not counted), and every operator with state in the source still has it.

The states of ``MATCH_RECOGNIZE`` (CEP's NFA, shared buffer and event queues) are compared for
presence only: CEP buffers events until the watermark passes them, and a restored job's operators
start from the watermark their inputs send again, so Flink's own restore of the unchanged source
already holds another number of them (measured: 25 before, 24 after, on the source itself).

Operators the planner pins to parallelism 1 (a global aggregate, the file sink's committer) stay
at their own parallelism in statectl's rewrite, as the new job pins them too.

All 30 cases (both variants x five source kinds x three commands) run in ``make test``: statectl
rewrites every one in this process, then one JVM restores them all and one reads every savepoint
(``flink_sql_coverage.restore_many``), once per session; each case then checks its own result.
"""

from __future__ import annotations

import fcntl
import json
import os
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner
from flink_restore import FLINK_VERSION
from flink_sql_coverage import KINDS, Restore, keyed_counts, restore_many, sql_coverage

from cli.main import statectl

#: (variant, source kind, command, backend restored on, parallelism, max parallelism): every
#: coverage snapshot x every command. These eight restore each source kind and both variants,
#: each command on both backends; the others restore on the backend that did not take the
#: source, as restoring into another backend is the harder case.
CASES = [
    ("plain", "heap-checkpoint", "rescale-p3-m256", "hashmap", 3, 256),
    ("plain", "rocksdb-checkpoint-incremental", "rescale-p3-m256", "rocksdb", 3, 256),
    ("minibatch", "heap-savepoint-canonical", "rescale-p3-m256", "rocksdb", 3, 256),
    ("plain", "rocksdb-savepoint-native", "rescale-p1", "hashmap", 1, 128),
    ("minibatch", "rocksdb-checkpoint-incremental", "rescale-p1", "rocksdb", 1, 128),
    ("plain", "heap-savepoint-canonical", "rescale-p1", "rocksdb", 1, 128),
    ("plain", "rocksdb-savepoint-canonical", "convert", "hashmap", 2, 128),
    ("minibatch", "heap-checkpoint", "convert", "rocksdb", 2, 128),
]
TARGETS = {"rescale-p3-m256": (3, 256), "rescale-p1": (1, 128), "convert": (2, 128)}
CASES += [(variant, kind, command, "rocksdb" if kind.startswith("heap") else "hashmap",
           *TARGETS[command])
          for variant in ("plain", "minibatch") for kind in KINDS for command in TARGETS
          if not any(c[:3] == (variant, kind, command) for c in CASES)]
IDS = [f"{variant}-{kind}-{command}-{backend}" for variant, kind, command, backend, _, _ in CASES]
#: The keyed states of a MATCH_RECOGNIZE operator (CepOperator).
CEP = {"nfaStateName", "eventQueuesStateName", "sharedBuffer-events",
       "sharedBuffer-entries-with-lockable-edges"}
COMMANDS = {
    "rescale-p3-m256": ["rescale", "--parallelism", "3", "--max-parallelism", "256"],
    "rescale-p1": ["rescale", "--parallelism", "1"],
    "convert": ["convert"],
}


def _rewrite_and_restore(root: Path) -> dict[str, dict[str, object]]:
    """Every case's statectl rewrite (in this process), then one JVM restoring every rewritten
    snapshot and one reading every savepoint (:func:`flink_sql_coverage.restore_many`: a restore
    alone is 30-60 s, most of it a JVM's start and the planner's first planning)."""
    cov = sql_coverage(FLINK_VERSION)
    outcome: dict[str, dict[str, object]] = {}
    restores = {}
    for case_id, (variant, kind, command, backend, parallelism, max_parallelism) in zip(
            IDS, CASES, strict=True):
        name = f"{variant}/{kind}"
        out = root / case_id / "rewritten"
        result = CliRunner().invoke(statectl, [*COMMANDS[command], "--out", str(out),
                                               str(cov.snapshots[name])])
        outcome[case_id] = {"exit_code": result.exit_code, "output": result.output[-3000:]}
        if result.exit_code == 0:
            restores[case_id] = Restore(name, backend, parallelism, max_parallelism, out)
    for case_id, done in restore_many(FLINK_VERSION, restores, root / "flink").items():
        outcome[case_id].update(error=done.error,
                                reference=None if done.reference is None else str(done.reference))
    return outcome


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """:func:`_rewrite_and_restore`'s outcome per case id, done once per session: pytest-xdist's
    workers share the session's base temporary folder, the first to take its lock does the work
    and the others read what it wrote."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "sql-restore"
    root.mkdir(parents=True, exist_ok=True)
    with open(base / ".sql-restore.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        outcome, failed = root / "outcome.json", root / "failed.txt"
        if failed.is_file():
            raise RuntimeError(f"another worker's rewrites and restores failed:\n"
                               f"{failed.read_text()}")
        if not outcome.is_file():
            try:
                cases = _rewrite_and_restore(root)
            except BaseException:
                failed.write_text(traceback.format_exc())
                raise
            outcome.write_text(json.dumps(cases))
        return json.loads(outcome.read_text())


@pytest.mark.parametrize(("variant", "kind", "command", "backend", "parallelism",
                          "max_parallelism"), CASES, ids=IDS)
def test_flink_restores_what_statectl_wrote(variant: str, kind: str, command: str, backend: str,
                                            parallelism: int, max_parallelism: int,
                                            restored: dict[str, dict[str, object]]) -> None:
    cov = sql_coverage(FLINK_VERSION)
    name = f"{variant}/{kind}"
    case = restored[f"{variant}-{kind}-{command}-{backend}"]
    assert case["exit_code"] == 0, case["output"]
    if case["error"] is not None:
        raise AssertionError(case["error"])
    after = [json.loads(line) for line in Path(str(case["reference"])).read_text().splitlines()
             if line]
    before = keyed_counts(cov.reference[name])
    now = keyed_counts(after)
    differences = [f"{op}/{state}: {n} entries before, {now.get((op, state))} after"
                   for (op, state), n in sorted(before.items())
                   if (op, state) not in now or (now[op, state] != n and state not in CEP)]
    assert not differences, "\n".join(differences[:30])
