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
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from flink_restore import FLINK_VERSION
from flink_sql_coverage import KINDS, keyed_counts, restore_in_flink, sql_coverage

from cli.main import statectl

#: (variant, source kind, command, backend restored on, parallelism, max parallelism) that
#: ``make test`` restores: every source kind and both variants, each command on both backends.
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
#: The rest of every coverage snapshot x every command (on the backend that did not take the
#: source, as restoring into another backend is the harder case): ``make test-slow`` (a restore
#: is 30-60 s of planning the job and two checkpoints; all 30 would add 15 minutes to CI).
TARGETS = {"rescale-p3-m256": (3, 256), "rescale-p1": (1, 128), "convert": (2, 128)}
MORE = [pytest.param(variant, kind, command, "rocksdb" if kind.startswith("heap") else "hashmap",
                     *TARGETS[command], marks=pytest.mark.slow)
        for variant in ("plain", "minibatch") for kind in KINDS for command in TARGETS
        if not any(c[:3] == (variant, kind, command) for c in CASES)]
IDS = [f"{variant}-{kind}-{command}-{backend}" for variant, kind, command, backend, _, _ in CASES]
IDS += [f"{p.values[0]}-{p.values[1]}-{p.values[2]}-{p.values[3]}" for p in MORE]
#: The keyed states of a MATCH_RECOGNIZE operator (CepOperator).
CEP = {"nfaStateName", "eventQueuesStateName", "sharedBuffer-events",
       "sharedBuffer-entries-with-lockable-edges"}
COMMANDS = {
    "rescale-p3-m256": ["rescale", "--parallelism", "3", "--max-parallelism", "256"],
    "rescale-p1": ["rescale", "--parallelism", "1"],
    "convert": ["convert"],
}


@pytest.mark.parametrize(("variant", "kind", "command", "backend", "parallelism",
                          "max_parallelism"), CASES + MORE, ids=IDS)
def test_flink_restores_what_statectl_wrote(variant: str, kind: str, command: str, backend: str,
                                            parallelism: int, max_parallelism: int,
                                            tmp_path: Path) -> None:
    cov = sql_coverage(FLINK_VERSION)
    name = f"{variant}/{kind}"
    out = tmp_path / "rewritten"
    result = CliRunner().invoke(statectl, [*COMMANDS[command], "--out", str(out),
                                      str(cov.snapshots[name])])
    assert result.exit_code == 0, result.output[-3000:]
    _, after = restore_in_flink(FLINK_VERSION, name, backend, parallelism, max_parallelism, out,
                                tmp_path / "flink")
    before = keyed_counts(cov.reference[name])
    now = keyed_counts(after)
    differences = [f"{op}/{state}: {n} entries before, {now.get((op, state))} after"
                   for (op, state), n in sorted(before.items())
                   if (op, state) not in now or (now[op, state] != n and state not in CEP)]
    assert not differences, "\n".join(differences[:30])
