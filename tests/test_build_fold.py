"""Folding runs of records per key (``formats/ops/fold.py``) reaches the one-by-one state exactly.

Property tests: the same random inputs built with folding and record by record
(``build_state(fold=False)``) give equal checkpoints — every checkpoint on the way
(``checkpoint_every``) with its source positions, the final one, and the final one after resuming
from any checkpoint on the way. Plus the job's side (``LocalJob`` with a ``RecordFolder``): runs
cut at ``limit`` and at checkpoint trigger points, folders that refuse runs (processed one by
one), stop and resume. Equal means: the same metadata (operators, states, per subtask and key
group the same rows), the same entries per key group (in any order: the order within a key group
is the in-memory map's, which folding does not preserve) and the same operator state.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.inputs import FileSource, InputError
from formats.open import open_checkpoint
from formats.ops.build import build_state
from formats.ops.fold import MIN_RUN_RECORDS, foldable
from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.aggregations import parse_aggregation
from statecore.errors import InvalidArgumentError, StatectlError
from statecore.job import FoldedRecords, LocalJob, RuntimeContext
from statecore.keyed_state import reducing_state

# -- comparing checkpoints ---------------------------------------------------------------------


def canonical(location: str, with_id: bool = True) -> dict[str, Any]:
    """What a checkpoint holds, independent of the order of entries within a key group."""
    checkpoint = open_checkpoint(location)
    metadata = checkpoint.metadata
    out: dict[str, Any] = {"kind": metadata.kind}
    if with_id:
        out["id"] = metadata.checkpoint_id
    for op in metadata.operators:
        out[op.uid] = {
            "operator": (op.name, op.parallelism, op.max_parallelism, op.key_type, op.states),
            "subtasks": [(s.index, s.key_group_range,
                          [(h.state, h.key_group_range,
                            [(r.key_group, r.row_count) for r in h.rows]) for h in s.keyed])
                         for s in op.subtasks],
            "keyed": {s.name: sorted(checkpoint.keyed_entries(op.uid, s.name), key=repr)
                      for s in op.states if s.scope == "keyed"},
            "operator_state": {s.index: checkpoint.operator_entries(op.uid, s.index)
                               for s in op.subtasks},
        }
    return out


def all_checkpoints(directory: Path) -> dict[int, dict[str, Any]]:
    return {c.checkpoint_id: canonical(c.location)
            for c in DirectoryCheckpointStorage(str(directory)).completed()}


# -- random inputs -----------------------------------------------------------------------------

AGGREGATIONS = ["count", "sum:v", "min:v", "max:v", "sum:w", "max:w"]


@st.composite
def inputs(draw: st.DrawFn) -> dict[str, Any]:
    key_type = draw(st.sampled_from(["string", "int64"]))
    pool = draw(st.lists(st.integers(-3, 40), min_size=1, max_size=12, unique=True))
    # huge values: a run's sum may not fit Arrow's int64 (folding refuses such runs), and the
    # final sum may not fit the int64 state (both builds fail writing the checkpoint)
    huge = draw(st.booleans())
    value = (st.integers(-(1 << 60), 1 << 60) if huge else st.integers(-1000, 1000))
    files = []
    for _ in range(draw(st.integers(1, 3))):
        rows = draw(st.integers(0, 60))
        keys = [draw(st.sampled_from(pool)) for _ in range(rows)]
        files.append({
            "k": [f"k{k}" for k in keys] if key_type == "string" else keys,
            "v": [draw(st.one_of(st.none(), value)) for _ in range(rows)],
            "w": [draw(st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1)))
                  for _ in range(rows)],  # int32: its sum's state is int32 too (may not fit)
        })
    aggregations = draw(st.lists(st.sampled_from(AGGREGATIONS), min_size=1, max_size=4,
                                 unique=True))
    parallelism = draw(st.integers(1, 3))
    return {
        "key_type": key_type, "files": files, "aggregations": aggregations,
        "parallelism": parallelism,
        "max_parallelism": draw(st.sampled_from([None, max(parallelism, 4), 7])),
        "checkpoint_every": draw(st.one_of(st.none(), st.integers(5, 40))),
        "fold_records": draw(st.integers(1, 50)),
        # the folder's own run length (it adapts between runs): short, so that it matters
        "min_run": draw(st.integers(1, 8)),
    }


def write_inputs(directory: Path, case: dict[str, Any]) -> list[str]:
    schema = pa.schema([("k", pa.string() if case["key_type"] == "string" else pa.int64()),
                        ("v", pa.int64()), ("w", pa.int32())])
    paths = []
    for i, columns in enumerate(case["files"]):
        path = directory / f"part-{i}.parquet"
        pq.write_table(pa.table(columns, schema=schema), path)
        paths.append(str(path))
    return paths


def build(paths: list[str], directory: Path, case: dict[str, Any], fold: bool,
          resume: int | None = None) -> Any:
    """The build's summary, or the type of the error it failed with."""
    try:
        with mock.patch("formats.ops.fold.MIN_RUN_RECORDS", case.get("min_run", MIN_RUN_RECORDS)):
            return build_state(paths, key="k", aggregations=case["aggregations"],
                               checkpoint_dir=str(directory),
                               parallelism=case["parallelism"],
                               max_parallelism=case["max_parallelism"],
                               checkpoint_every=case["checkpoint_every"], keep=1000,
                               resume=resume, fold=fold, fold_records=case["fold_records"])
    except StatectlError as exc:
        return type(exc)


# -- build: folded vs one by one ---------------------------------------------------------------


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=inputs(), pick=st.randoms(use_true_random=False))
def test_folded_and_one_by_one_builds_write_equal_checkpoints(
        tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any],
        pick: random.Random) -> None:
    root = tmp_path_factory.mktemp("fold")
    paths = write_inputs(root, case)
    folded = build(paths, root / "folded", case, fold=True)
    one_by_one = build(paths, root / "one-by-one", case, fold=False)
    assert all_checkpoints(root / "folded") == all_checkpoints(root / "one-by-one")
    if isinstance(folded, type) or isinstance(one_by_one, type):
        assert folded == one_by_one  # the same error (a sum that does not fit its state)
        return
    assert folded.folded and not one_by_one.folded
    assert folded.records == one_by_one.records == sum(len(f["k"]) for f in case["files"])
    assert sorted(folded.checkpoints) == sorted(one_by_one.checkpoints)

    # resume from a checkpoint on the way (or the final one), folded and one by one
    ids = [*folded.checkpoints, folded.final_checkpoint]
    start = pick.choice(ids)
    uninterrupted = canonical(folded.final_location, with_id=False)
    finals = []
    for fold in (True, False):
        copy = root / f"resumed-{fold}"
        shutil.copytree(root / "folded", copy)
        resumed = build(paths, copy, case, fold=fold, resume=start)
        assert not isinstance(resumed, type) and resumed.restored_from == start
        finals.append(canonical(resumed.final_location))
    assert finals[0] == finals[1]
    assert {k: v for k, v in finals[0].items() if k != "id"} == uninterrupted


def test_a_null_key_fails_at_the_same_record_folded_or_not(tmp_path: Path) -> None:
    keys = [f"k{i % 7}" for i in range(100)]
    keys[63] = None  # type: ignore[call-overload]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"k": pa.array(keys, pa.string()), "v": list(range(100))}), path)
    # build refuses the input before reading a record, naming the row, folded or not
    for fold in (True, False):
        with pytest.raises(InputError, match="row 64: the key column 'k'"):
            build_state([str(path)], key="k", aggregations=["count", "sum:v"],
                        checkpoint_dir=str(tmp_path / f"refused-{fold}"), fold=fold)
        assert not list((tmp_path / f"refused-{fold}").glob("chk-*"))
    # the job itself (a source that does not check its keys): the same record fails
    errors = []
    unchecked = FileSource
    for fold in (True, False):
        with mock.patch("formats.ops.build.FileSource",
                        lambda inputs, key, **_: unchecked(inputs)), \
                pytest.raises(InvalidArgumentError) as caught:
            build_state([str(path)], key="k", aggregations=["count", "sum:v"],
                        checkpoint_dir=str(tmp_path / str(fold)), parallelism=2,
                        checkpoint_every=10, keep=100, fold=fold, fold_records=8)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    # checkpoint n was triggered after record 10 n (n = 1..6); those still in flight when the
    # build failed are cancelled (LocalJob.run). Several writers run at once, so which ones
    # completed depends on timing, and not always the first ones: 5 may have published while 4
    # was cancelled. Each that did holds exactly the first 10 n records, folded or not.
    folded, unfolded = all_checkpoints(tmp_path / "True"), all_checkpoints(tmp_path / "False")
    for checkpoints in (folded, unfolded):
        for checkpoint_id, checkpoint in checkpoints.items():
            assert 1 <= checkpoint_id <= 6
            held = {state: {key: value for _, key, _, value in entries}
                    for state, entries in checkpoint["build"]["keyed"].items()}
            first = range(10 * checkpoint_id)
            assert held == {"count": dict(Counter(keys[i] for i in first)),
                            "sum_v": {key: sum(i for i in first if keys[i] == key)
                                      for key in {keys[i] for i in first}}}
    assert folded or unfolded
    for checkpoint_id in folded.keys() & unfolded.keys():
        assert folded[checkpoint_id] == unfolded[checkpoint_id]


def test_csv_input_as_the_benchmark_writes_it(tmp_path: Path) -> None:
    rng = random.Random(5)
    table = pa.table({"key": [f"k{int(rng.paretovariate(1.0))}" for _ in range(5000)],
                      "value": [rng.randrange(1000) for _ in range(5000)]})
    paths = []
    for i, part in enumerate((table.slice(0, 2500), table.slice(2500))):
        pacsv.write_csv(part, tmp_path / f"part-{i}.csv")
        paths.append(str(tmp_path / f"part-{i}.csv"))
    finals = []
    for fold in (True, False):
        summary = build_state(paths, key="key", aggregations=["count", "sum:value"],
                              checkpoint_dir=str(tmp_path / str(fold)), parallelism=2,
                              fold=fold)
        assert summary.folded == fold
        assert summary.seconds is not None and summary.seconds.processing >= 0
        finals.append(canonical(summary.final_location))
    assert finals[0] == finals[1]
    counts = defaultdict(int)
    for key in table.column("key").to_pylist():
        counts[key] += 1
    assert {k: v for _, k, _, v in
            open_checkpoint(str(tmp_path / "True" / "chk-0000001")).keyed_entries(
                "build", "count")} == counts


@pytest.mark.parametrize(("specs", "column_type", "key_type", "expected"), [
    (["count", "sum:i", "min:i", "max:i"], "string", "string", True),
    (["count"], "int64", "int64", True),
    (["sum:f"], "string", "string", False),      # float sums depend on the order
    (["max:f"], "string", "string", False),      # NaN, -0.0
    (["count", "last:i"], "string", "string", False),
    (["count"], "float64", "float64", False),    # 0.0 == -0.0 in Python, not in Java
    (["count"], "int64", "int32", False),        # --key-type other than the column's
])
def test_what_folds(specs: list[str], column_type: str, key_type: str, expected: bool) -> None:
    columns = {"i": "int64", "f": "float64"}
    parsed = [parse_aggregation(spec, columns) for spec in specs]
    assert foldable(parsed, column_type, key_type) is expected


def test_ttl_never_folds() -> None:
    from statecore.ttl import TtlConfig
    parsed = [parse_aggregation("count", {}, TtlConfig(1000))]
    assert not foldable(parsed, "string", "string")


# -- the job's side: runs cut at limits and checkpoints, refused runs -------------------------

Record = tuple[str, int]


class ListSource:
    def __init__(self, splits: dict[str, list[Record]]) -> None:
        self.records = splits

    def splits(self) -> Sequence[str]:
        return list(self.records)

    def read(self, split: str, position: int) -> Iterator[tuple[int, Any]]:
        for i in range(position, len(self.records[split])):
            yield i + 1, self.records[split][i]


class SumFolder:
    """Folds (count, sum) per key; refuses a run when ``refuse`` says so (one by one then)."""

    def __init__(self, source: ListSource, max_parallelism: int, rng: random.Random) -> None:
        self.source, self.max_parallelism, self.rng = source, max_parallelism, rng
        self.runs: list[tuple[int, int]] = []

    def fold(self, split: str, position: int, count: int) -> FoldedRecords | None:
        from statecore.key_groups import assign_to_key_group
        records = self.source.records[split][position:position + count]
        self.runs.append((position, len(records)))
        if records and self.rng.random() < 0.3:
            return None
        folded: dict[str, list[int]] = {}
        for key, value in records:
            entry = folded.setdefault(key, [0, 0])
            entry[0] += 1
            entry[1] += value
        return FoldedRecords(position + len(records), list(folded),
                             [assign_to_key_group(k, self.max_parallelism, "string")
                              for k in folded], [tuple(v) for v in folded.values()])


class CountSum:
    def open(self, context: RuntimeContext) -> None:
        add = reducing_state("count", lambda a, b: a + b, "int64")
        self.count = context.keyed.get_reducing_state(add)
        self.total = context.keyed.get_reducing_state(
            reducing_state("sum", lambda a, b: a + b, "int64"))

    def process(self, record: Record, context: RuntimeContext) -> None:
        self.count.add(1)
        self.total.add(record[1])

    def process_folded(self, folded: tuple[int, int], context: RuntimeContext) -> None:
        self.count.add(folded[0])
        self.total.add(folded[1])


def make_job(directory: Path, source: ListSource, folder: SumFolder | None, *,
             every: int | None, parallelism: int, fold_records: int,
             restore: int | str | None = None) -> LocalJob:
    return LocalJob(uid="agg", name="aggregate", source=source, key_selector=lambda r: r[0],
                    key_type="string", function_factory=CountSum,
                    storage=DirectoryCheckpointStorage(str(directory)),
                    parallelism=parallelism, max_parallelism=8, checkpoint_every=every,
                    keep=1000, restore_from=restore, folder=folder, fold_records=fold_records)


def final_state(job: LocalJob) -> dict[str, dict[Any, Any]]:
    out: dict[str, dict[Any, Any]] = {}
    for context in job.subtasks:
        for descriptor in context.keyed.descriptors:
            out.setdefault(descriptor.name, {}).update(
                {e.key: e.state for e in context.keyed.table(descriptor.name)})
    return out


@pytest.mark.parametrize("seed", range(30))
def test_folded_runs_stop_resume_and_checkpoint_like_records(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(rng.randint(1, 10))]
    source = ListSource({f"split-{s}": [(rng.choice(keys), rng.randint(-50, 50))
                                        for _ in range(rng.randint(0, 60))]
                         for s in range(rng.randint(1, 4))})
    parallelism, every = rng.randint(1, 3), rng.choice([None, rng.randint(1, 12)])
    fold_records = rng.randint(1, 20)

    def job(name: str, fold: bool, restore: int | str | None = None) -> LocalJob:
        folder = SumFolder(source, 8, rng) if fold else None
        return make_job(tmp_path / name, source, folder, every=every, parallelism=parallelism,
                        fold_records=fold_records, restore=restore)

    reference = job("one-by-one", fold=False)
    total = reference.run().records
    folded = job("folded", fold=True)
    assert folded.run().records == total
    assert final_state(folded) == final_state(reference)
    assert all_checkpoints(tmp_path / "folded") == all_checkpoints(tmp_path / "one-by-one")
    assert folded.folder is not None
    assert all(0 < count <= fold_records for _, count in folded.folder.runs[:-1] if count)

    # stop after random numbers of records, resume from the latest checkpoint, go on folding
    stopping = job("stopping", fold=True)
    for _ in range(rng.randint(1, 4)):
        stopping.run(limit=rng.randint(0, max(total, 1)))
        completed = DirectoryCheckpointStorage(str(tmp_path / "stopping")).completed()
        stopping = job("stopping", fold=True, restore="latest" if completed else None)
    stopping.run()
    assert final_state(stopping) == final_state(reference)
