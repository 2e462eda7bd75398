"""The local job: exactly-once resume, checkpoints at their trigger point, retention."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.checkpoint import CheckpointKind
from statecore.errors import CheckpointError
from statecore.job import LocalJob, RuntimeContext
from statecore.keyed_state import list_state, reducing_state, value_state
from statecore.operator_backend import BroadcastStateDescriptor

Record = tuple[str, int]


class ListSource:
    """Splits of records in memory; a position is the index of the next record."""

    def __init__(self, splits: dict[str, list[Record]]) -> None:
        self._splits = splits

    def splits(self) -> Sequence[str]:
        return list(self._splits)

    def read(self, split: str, position: int) -> Iterator[tuple[int, Any]]:
        records = self._splits[split]
        for i in range(position, len(records)):
            yield i + 1, records[i]


class Aggregate:
    """count (reducing), sum and last (value), values (list) per key; records in broadcast."""

    def open(self, context: RuntimeContext) -> None:
        keyed = context.keyed
        self.count = keyed.get_reducing_state(reducing_state("count", lambda a, b: a + b,
                                                             "int64"))
        self.total = keyed.get_value_state(value_state("sum", "int64"))
        self.last = keyed.get_value_state(value_state("last", "int64"))
        self.values = keyed.get_list_state(list_state("values", "int64"))
        self.seen = context.operator.get_broadcast_state(
            BroadcastStateDescriptor("records-seen", "int32", "int64"))

    def process(self, record: Record, context: RuntimeContext) -> None:
        _, value = record
        self.count.add(1)
        self.total.update((self.total.value() or 0) + value)
        self.last.update(value)
        self.values.add(value)
        self.seen.put(context.subtask_index, (self.seen.get(context.subtask_index) or 0) + 1)


def make_job(tmp: Path, source: ListSource, *, restore: int | str | None = None,
             every: int | None = 5, parallelism: int = 2, keep: int = 3) -> LocalJob:
    return LocalJob(uid="agg", name="aggregate", source=source, key_selector=lambda r: r[0],
                    key_type="string", function_factory=Aggregate,
                    storage=DirectoryCheckpointStorage(str(tmp)), parallelism=parallelism,
                    max_parallelism=16, checkpoint_every=every, keep=keep,
                    restore_from=restore)


def final_state(job: LocalJob) -> dict[str, dict[Any, Any]]:
    out: dict[str, dict[Any, Any]] = {}
    for context in job.subtasks:
        for descriptor in context.keyed.descriptors:
            table = out.setdefault(descriptor.name, {})
            table.update({e.key: e.state for e in context.keyed.table(descriptor.name)})
    return out


def random_source(rng: random.Random) -> ListSource:
    keys = [f"k{i}" for i in range(rng.randint(1, 12))]
    return ListSource({f"split-{s}": [(rng.choice(keys), rng.randint(-50, 50))
                                      for _ in range(rng.randint(0, 40))]
                       for s in range(rng.randint(1, 4))})


@pytest.mark.parametrize("seed", range(50))
def test_stopping_and_resuming_gives_the_uninterrupted_result(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    source = random_source(rng)
    parallelism = rng.randint(1, 3)
    every = rng.randint(1, 9)
    reference = make_job(tmp_path / "reference", source, every=None, parallelism=parallelism)
    total = reference.run().records
    expected = final_state(reference)

    root = tmp_path / "resumed"
    job = make_job(root, source, every=every, parallelism=parallelism)
    for _ in range(rng.randint(1, 4)):  # stop after a random number of records, resume
        job.run(limit=rng.randint(0, max(total, 1)))
        completed = DirectoryCheckpointStorage(str(root)).completed()
        job = make_job(root, source, every=every, parallelism=parallelism,
                       restore="latest" if completed else None)
    job.run()
    assert final_state(job) == expected


def test_a_checkpoint_holds_the_state_at_its_trigger_point(tmp_path: Path) -> None:
    source = random_source(random.Random(7))
    total = make_job(tmp_path / "count", source, every=None).run().records
    assert total > 10
    job = make_job(tmp_path / "job", source, every=4, keep=100)
    job.run()
    storage = DirectoryCheckpointStorage(str(tmp_path / "job"))
    for checkpoint in storage.completed():
        restored = make_job(tmp_path / "job", source, restore=checkpoint.checkpoint_id,
                            every=None, keep=100)
        trigger_point = make_job(tmp_path / f"model-{checkpoint.checkpoint_id}", source,
                                 every=None)
        trigger_point.run(limit=4 * checkpoint.checkpoint_id)
        assert final_state(restored) == final_state(trigger_point)


def test_retention_keeps_the_last_checkpoints_and_every_savepoint(tmp_path: Path) -> None:
    source = ListSource({"s": [(f"k{i % 5}", i) for i in range(60)]})
    job = make_job(tmp_path, source, every=5, keep=2)
    job.run(limit=20)
    savepoint = job.savepoint()
    job.run()
    completed = DirectoryCheckpointStorage(str(tmp_path)).completed()
    checkpoints = [c.checkpoint_id for c in completed if c.kind is CheckpointKind.CHECKPOINT]
    savepoints = [c.checkpoint_id for c in completed if c.kind is CheckpointKind.SAVEPOINT]
    assert savepoints == [savepoint]
    assert len(checkpoints) == 2 and checkpoints == sorted(checkpoints)[-2:]
    assert max(checkpoints) > savepoint
    resumed = make_job(tmp_path, source, restore=savepoint, every=None)
    reference = make_job(tmp_path / "ref", source, every=None)
    reference.run(limit=20)
    assert final_state(resumed) == final_state(reference)


def test_unknown_checkpoint_and_empty_storage_are_clear_errors(tmp_path: Path) -> None:
    source = ListSource({"s": [("a", 1)]})
    with pytest.raises(CheckpointError, match="no completed checkpoint"):
        make_job(tmp_path, source, restore="latest")
    make_job(tmp_path, source, every=1).run()
    with pytest.raises(CheckpointError, match="not a completed checkpoint"):
        make_job(tmp_path, source, restore=999)
