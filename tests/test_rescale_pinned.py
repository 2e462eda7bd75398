"""Operators at a parallelism of their own: what Flink's SQL planner pins stays pinned (issue 40).

Flink's SQL planner sets parallelism 1 and max parallelism 1 on a sink's committer and on a
global aggregate (no grouping key) in every job, whatever the job's parallelism; Flink restores
such an operator at the parallelism the job sets and refuses a savepoint whose max parallelism
differs from the one the job sets on it. So ``rescale`` and ``convert`` keep an operator whose
max parallelism was set lower than the other operators' at its parallelism and max
parallelism (where the new parallelism is above it, or ``--max-parallelism`` is given), and
say so in the plan; ``--operator-parallelism OP=N`` gives an operator a parallelism of its own.

The snapshots:

* a statectl checkpoint of three operators: a keyed aggregate (parallelism 2, max parallelism
  128), a global aggregate (one key, parallelism 1, max parallelism 1) and a committer
  (operator state only, parallelism 1, max parallelism 1);
* a real Flink canonical savepoint: the SQL fixture job's, rewritten by statectl so that one
  group aggregate and one sink have parallelism 1 and max parallelism 1 (as the planner pins
  them in a job with a global aggregate), the rest as Flink wrote them;
* the SQL coverage job's snapshots on Flink 2.3 (``tests/flink_sql_coverage.py``: a file
  sink's writer, global aggregates, a window Top-N).

Every written ``_metadata`` is parsed as Flink reads it: a kept operator's parallelism and max
parallelism are the source's, exactly. Errors say what the user can do, and only that.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import backend, expected, require_fixtures
from flink_restore import FLINK_VERSION
from flink_sql_coverage import sql_coverage
from test_json_contract import check

from formats.flink.read.metadata import parse_metadata
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.rescale import plan_checkpoint
from formats.ops.verify import verify_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    OperatorSnapshot,
    SubtaskSnapshot,
)
from statecore.errors import ParallelismError
from statecore.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state
from statecore.operator_backend import OperatorListStateDescriptor, OperatorStateBackend
from statecore.rescale_plan import KEPT, OPERATOR_PARALLELISM, PARALLELISM, rescale_targets

KEYS = [f"k{i}" for i in range(40)]
#: The statectl checkpoint's operators: uid -> (parallelism, max parallelism)
OURS = {"agg": (2, 128), "global": (1, 1), "committer": (1, 1)}


# -- snapshots -------------------------------------------------------------------------------


def _keyed(uid: str, p: int, m: int, keys: list[str]) -> OperatorSnapshot:
    count = value_state("count", "int64")
    backends = []
    for i in range(p):
        backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
            "string", m, compute_key_group_range_for_operator_index(m, p, i))
        backend.get_state(count)
        backends.append(backend)
    for n, key in enumerate(keys):
        backend = backends[compute_operator_index_for_key_group(
            m, p, assign_to_key_group(key, m, "string"))]
        backend.set_current_key(key)
        backend.get_value_state(count).update(n + 1)
    subtasks = [SubtaskSnapshot(i, b.snapshot(), None) for i, b in enumerate(backends)]
    return OperatorSnapshot(uid, f"GroupAggregate[{uid}]", p, m, subtasks)


def _committer() -> OperatorSnapshot:
    ob = OperatorStateBackend()
    ob.get_list_state(OperatorListStateDescriptor("committables", "int64")).add_all([7, 8, 9])
    return OperatorSnapshot("committer", "Sink: committer", 1, 1,
                            [SubtaskSnapshot(0, None, ob.snapshot())])


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The statectl checkpoint (see the module doc)."""
    location = str(tmp_path_factory.mktemp("ours") / "chk")
    write_checkpoint(location, 1, [_keyed("agg", 2, 128, KEYS), _keyed("global", 1, 1, [""]),
                                   _committer()])
    return location


def _sql_savepoint() -> tuple[Path, dict[str, Any]]:
    """The SQL fixture job's canonical savepoint (not a rescaled one) and its expected.json."""
    for fixture_set in require_fixtures():
        document = expected(fixture_set)
        if document["job"] != "sql":
            continue
        for snap in document["snapshots"]:
            if snap["format"] == "canonical" and "rescaled_from" not in snap:
                return fixture_set / snap["path"], document
    pytest.fail("no canonical savepoint of the SQL job in the Flink fixtures")


def pin(source: Any, uids: set[str], location: str) -> None:
    """Write ``source`` (a Flink snapshot) as a canonical savepoint in which the operators
    ``uids`` have parallelism 1 and max parallelism 1 (their keys re-hashed into the one key
    group), the others as they are: what Flink's SQL planner makes of singleton operators."""
    at_one = plan_checkpoint(source, 1, 1)
    as_is = plan_checkpoint(source, max(op.parallelism for op in source.metadata.operators))
    operators = tuple(a if b.uid in uids else b
                      for a, b in zip(at_one.operators, as_is.operators, strict=True))
    source.write_rescaled(replace(as_is, operators=operators), location)


@pytest.fixture(scope="module")
def flink_pinned(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, set[str]]:
    """The SQL fixture's savepoint with one group aggregate and one stateless sink pinned."""
    path, document = _sql_savepoint()
    source = open_checkpoint(str(path))
    aggregate = sorted(document["operators"]["sql-aggregates"]["operator_ids"])[0]
    stateless = sorted(op.uid for op in source.metadata.operators
                       if not op.states and op.name.startswith("Sink"))
    assert stateless, "the SQL job has a sink"
    uids = {source.find_operator(aggregate).uid, stateless[0]}
    location = str(tmp_path_factory.mktemp("flink") / "pinned")
    pin(source, uids, location)
    return location, uids


def _flink_shape(location: str) -> dict[str, tuple[int, int]]:
    """``OperatorID -> (parallelism, max parallelism)`` as Flink reads the ``_metadata``."""
    metadata = parse_metadata((Path(location) / "_metadata").read_bytes())
    return {op.operator_id: (op.parallelism, op.max_parallelism) for op in metadata.operators}


def _shape(location: str) -> dict[str, tuple[int, int]]:
    checkpoint = open_checkpoint(location)
    return {op.uid: (op.parallelism, op.max_parallelism) for op in checkpoint.metadata.operators}


def _same_state_and_clean(source: str, written: str) -> None:
    assert diff_checkpoints(open_checkpoint(source), open_checkpoint(written)).equal
    report = verify_checkpoint(written)
    assert report.clean, report.problems[:3]


# -- statectl's format -----------------------------------------------------------------------


def test_a_rescale_keeps_the_pinned_operators(ours: str, tmp_path: Path) -> None:
    out = str(tmp_path / "p3")
    code, _, err = run("rescale", ours, "-p", "3", "--out", out)
    assert code == 0, err  # it was refused: "the maximum parallelism (1) is lower than..."
    assert _shape(out) == {"agg": (3, 128), "global": (1, 1), "committer": (1, 1)}
    _same_state_and_clean(ours, out)
    source, written = open_checkpoint(ours), open_checkpoint(out)
    for uid in ("global", "committer"):  # kept: its subtasks and handles exactly as they were
        assert written.operator(uid).subtasks == source.operator(uid).subtasks


def test_a_max_parallelism_change_keeps_the_pinned_max_parallelism(ours: str,
                                                                    tmp_path: Path) -> None:
    out = str(tmp_path / "m256")
    document = run_json("rescale", ours, "-p", "3", "--max-parallelism", "256", "--out", out)
    assert _shape(out) == {"agg": (3, 256), "global": (1, 1), "committer": (1, 1)}
    _same_state_and_clean(ours, out)
    check(document, "rescale")
    plan = {op["operator"]["uid"]: op for op in document["plan"]["operators"]}
    assert {uid: op["parallelism_from"] for uid, op in plan.items()} == {
        "agg": PARALLELISM, "global": KEPT, "committer": KEPT}
    assert not plan["global"]["rehash"] and plan["agg"]["rehash"]
    assert {op["operator"]["uid"]: (op["parallelism"], op["max_parallelism"])
            for op in document["result"]["operators"]} == _shape(out)


def test_the_plan_says_which_operators_are_kept(ours: str) -> None:
    code, out, err = run("rescale", ours, "-p", "3", "--plan")
    assert code == 0, err
    assert "agg: parallelism 2 -> 3, max parallelism 128" in out
    assert "global: parallelism 1 (kept), max parallelism 1 (kept)" in out
    kept = [line for line in out.splitlines() if line.startswith("kept at their parallelism")]
    assert len(kept) == 1 and "global" in kept[0] and "committer" in kept[0]
    assert "SQL planner" in kept[0]
    document = run_json("rescale", ours, "-p", "3", "--plan")
    check(document, "rescale")
    assert [(op["operator"]["uid"], op["new_parallelism"], op["new_max_parallelism"],
             op["parallelism_from"]) for op in document["plan"]["operators"]] == [
        ("agg", 3, 128, PARALLELISM), ("global", 1, 1, KEPT), ("committer", 1, 1, KEPT)]
    # within the operators' max parallelism nothing is kept apart, nor said to be
    code, out, _ = run("rescale", ours, "-p", "1", "--plan")
    assert code == 0 and "kept at their" not in out


def test_an_operator_at_a_parallelism_of_its_own(ours: str, tmp_path: Path) -> None:
    source = open_checkpoint(ours)
    agg_id = source.operator("agg").identity.id
    for name in ("agg", "GroupAggregate[agg]", agg_id, agg_id.upper()):
        document = run_json("rescale", ours, "-p", "3", "--operator-parallelism", f"{name}=5",
                            "--plan")
        check(document, "rescale")
        (agg,) = [op for op in document["plan"]["operators"] if op["operator"]["uid"] == "agg"]
        assert (agg["new_parallelism"], agg["parallelism_from"]) == (5, OPERATOR_PARALLELISM)
    code, out, _ = run("rescale", ours, "-p", "3", "--operator-parallelism", "agg=5", "--plan")
    assert code == 0 and "agg: parallelism 2 -> 5 (--operator-parallelism)" in out
    # named, an operator takes --max-parallelism: the user asked for it
    out_dir = str(tmp_path / "unpinned")
    code, _, err = run("rescale", ours, "-p", "3", "--max-parallelism", "64",
                       "--operator-parallelism", "global=2", "--out", out_dir)
    assert code == 0, err
    assert _shape(out_dir) == {"agg": (3, 64), "global": (2, 64), "committer": (1, 1)}
    _same_state_and_clean(ours, out_dir)


@pytest.mark.parametrize(("value", "message"), [
    ("nope=2", "no operator 'nope' in this checkpoint (by uid, name or OperatorID)"),
    ("agg=129", "give agg=N with N at most 128"),
    ("global=2", "give global=N with N at most 1"),
    ("agg=0", "give OP=N"),
    ("agg", "give OP=N"),
    ("=3", "give OP=N"),
])
def test_operator_parallelism_usage_errors_exit_2(ours: str, value: str, message: str) -> None:
    code, out, err = run("rescale", ours, "-p", "3", "--operator-parallelism", value, "--plan")
    assert code == 2, err
    assert message in err and "--operator-parallelism" in err and out == ""


def test_two_parallelisms_for_one_operator_are_a_usage_error(ours: str) -> None:
    code, _, err = run("rescale", ours, "-p", "3", "--operator-parallelism", "agg=2",
                       "--operator-parallelism", "GroupAggregate[agg]=3", "--plan")
    assert code == 2 and "two parallelisms (2, 3)" in err


# -- errors say what the user can do -----------------------------------------------------------


def test_a_parallelism_above_every_max_parallelism_is_refused_with_what_to_give() -> None:
    code, _, err = run("rescale", KEYED, "-p", "200", "--plan")
    assert code == 3
    assert "lower than the parallelism" in err
    assert "Give a parallelism of at most 128, or --max-parallelism 200 or more" in err


def test_no_max_parallelism_advice_for_keys_that_cannot_be_re_hashed(ours: str) -> None:
    metadata = open_checkpoint(ours).metadata
    with pytest.raises(ParallelismError) as info:
        rescale_targets(metadata, 200, rehashable=lambda op: False)
    assert "at most 128" in str(info.value) and "--max-parallelism" not in str(info.value)
    with pytest.raises(ParallelismError, match="--max-parallelism 200 or more"):
        rescale_targets(metadata, 200, rehashable=lambda op: True)


def test_a_new_max_parallelism_below_the_parallelism_says_what_to_give(ours: str) -> None:
    code, _, err = run("rescale", ours, "-p", "40", "--max-parallelism", "32", "--plan")
    assert code == 3
    assert "the new maximum parallelism (32) is lower than the parallelism" in err
    assert "a parallelism of at most 32, or --max-parallelism 40 or more" in err


def test_the_targets_of_every_operator(ours: str) -> None:
    """The rule, on metadata alone (statecore.rescale_plan.rescale_targets)."""
    metadata = open_checkpoint(ours).metadata

    def targets(p: int, m: int | None = None, named: dict[str, int] | None = None
                ) -> dict[str, tuple[int, int, str]]:
        got = rescale_targets(metadata, p, m, named)
        return {uid: (t.parallelism, t.max_parallelism, t.source) for uid, t in got.items()}

    assert targets(3) == {"agg": (3, 128, PARALLELISM), "global": (1, 1, KEPT),
                          "committer": (1, 1, KEPT)}
    # within every max parallelism and without a new one, -p is every operator's
    assert targets(1) == {"agg": (1, 128, PARALLELISM), "global": (1, 1, PARALLELISM),
                          "committer": (1, 1, PARALLELISM)}
    # a new max parallelism: set apart, the pinned ones keep theirs even at -p 1
    assert targets(1, 256)["global"] == (1, 1, KEPT)
    assert targets(3, 64, {"committer": 4})["committer"] == (4, 64, OPERATOR_PARALLELISM)
    # one operator alone, or every operator at max parallelism 1: that is the job's own
    alone = CheckpointMetadata(1, CheckpointKind.CHECKPOINT, 0,
                               (metadata.operators[1],), metadata.files)
    got = rescale_targets(alone, 1, 128)
    assert (got["global"].max_parallelism, got["global"].source) == (128, PARALLELISM)
    with pytest.raises(ParallelismError, match="at most 1, or --max-parallelism 2"):
        rescale_targets(alone, 2)


# -- real Flink savepoints ---------------------------------------------------------------------


@pytest.mark.parametrize("max_parallelism", [None, 256])
def test_a_flink_savepoint_keeps_its_pinned_operators_in_metadata(
        flink_pinned: tuple[str, set[str]], max_parallelism: int | None,
        tmp_path: Path) -> None:
    location, uids = flink_pinned
    before = _flink_shape(location)
    assert {before[uid] for uid in uids} == {(1, 1)}
    out = str(tmp_path / "out")
    args = ["rescale", location, "-p", "3", "--out", out]
    if max_parallelism:
        args += ["--max-parallelism", str(max_parallelism)]
    code, text, err = run(*args)
    assert code == 0, err
    after = _flink_shape(out)
    assert {uid: after[uid] for uid in uids} == {uid: before[uid] for uid in uids}
    kept = _sql_savepoint()[1]["max_parallelism"]  # the source's, as its expected.json says
    assert {after[uid] for uid in after if uid not in uids} == {(3, max_parallelism or kept)}
    assert "kept at their parallelism and max parallelism" in text
    _same_state_and_clean(location, out)


def test_convert_keeps_every_operators_parallelism(flink_pinned: tuple[str, set[str]],
                                                   tmp_path: Path) -> None:
    location, _ = flink_pinned
    out = str(tmp_path / "converted")
    code, _, err = run("convert", location, "--out", out)
    assert code == 0, err  # it was refused: every operator went to the highest parallelism
    assert _flink_shape(out) == _flink_shape(location)
    _same_state_and_clean(location, out)


def test_the_sql_coverage_snapshots_keep_their_pinned_operators(tmp_path: Path) -> None:
    """Flink's own pins (a sink's writer, global aggregates, a window Top-N at parallelism 1
    and max parallelism 1), where the SQL coverage job has run, in every kind of snapshot:
    rescaled (with and without a new max parallelism) and converted, the pinned operators keep
    their parallelism and max parallelism in ``_metadata`` and the others take the new ones.
    (The lead's restore test restores them in Flink.)"""
    found = [path for _, path in sorted(sql_coverage(FLINK_VERSION).snapshots.items())]
    pinned_somewhere = False
    for n, snapshot in enumerate(found):
        before = _flink_shape(str(snapshot))
        ones = {op_id for op_id, shape in before.items() if shape[1] == 1}
        pinned_somewhere = pinned_somewhere or bool(ones)
        runs = [(["rescale", "-p", "3"], lambda old: (3, old[1])),
                (["rescale", "-p", "3", "--max-parallelism", "256"], lambda old: (3, 256)),
                (["convert"], lambda old: old)]
        for i, (command, others) in enumerate(runs):
            out = str(tmp_path / f"{n}-{i}")
            code, text, err = run(command[0], str(snapshot), *command[1:], "--out", out)
            assert code == 0, (snapshot, command, err)
            after = _flink_shape(out)
            assert {op_id: after[op_id] for op_id in ones} == {
                op_id: before[op_id] for op_id in ones}, (snapshot, command)
            assert {op_id: after[op_id] for op_id in before if op_id not in ones} == {
                op_id: others(before[op_id]) for op_id in before if op_id not in ones}, (
                snapshot, command)
            if ones and command[0] == "rescale":
                assert "kept at their parallelism and max parallelism" in text
            shutil.rmtree(out)
    assert pinned_somewhere, "the SQL coverage job has operators at max parallelism 1"


# -- a savepoint that would lose values: what the user can do ------------------------------------

#: Serializer snapshot classes renamed, the same number of bytes, to one statectl does not know:
#: Tuple2 keys (their keys, so every pair of the operator's state) and LocalDate values.
TUPLE_KEYS = (b"TupleSerializerSnapshot", b"TupleSerializerSnapshoX")
DAY_VALUES = (b"LocalDateSerializer$LocalDateSerializerSnapshot",
              b"LocalDatXSerializer$LocalDateSerializerSnapshot")


def _types_snapshot(kind: str, snapshot_format: str) -> Path:
    """A heap snapshot that a types fixture set's job took itself (not a rescaled restore) of
    a set with Tuple2 keys (its expected.json says; the backend as Flink's reading found)."""
    for fixture_set in require_fixtures("types"):
        document = expected(fixture_set)
        if not any(op.get("key_type", "").startswith("Tuple2")
                   for op in document["operators"].values()):
            continue
        for snap in document["snapshots"]:
            if (snap["kind"], snap["format"]) == (kind, snapshot_format) and \
                    "rescaled_from" not in snap and backend(fixture_set) != "rocksdb":
                return fixture_set / snap["path"]
    pytest.fail(f"no {snapshot_format} {kind} of a heap types set with Tuple2 keys")


def _renamed(snapshot: Path, tmp_path: Path, names: tuple[bytes, bytes]) -> Path:
    """A copy of ``snapshot`` (with its job folder) with a serializer snapshot class renamed."""
    base = snapshot.parent if snapshot.name.startswith("chk-") else snapshot
    shutil.copytree(base, tmp_path / base.name)
    copy = tmp_path / base.name / snapshot.relative_to(base)
    changed = 0
    for path in sorted((tmp_path / base.name).rglob("*")):
        if path.is_file() and names[0] in (data := path.read_bytes()):
            path.write_bytes(data.replace(*names))
            changed += 1
    assert changed
    return copy


def test_a_canonical_savepoint_is_not_told_to_become_one(tmp_path: Path) -> None:
    """Keys statectl cannot read in a canonical savepoint: their pairs would be lost. Taking a
    canonical savepoint would not help (it is one); Flink rescaling it itself would."""
    copy = _renamed(_types_snapshot("savepoint", "canonical"), tmp_path, TUPLE_KEYS)
    code, _, err = run("rescale", str(copy), "-p", "3", "--out", str(tmp_path / "out"))
    assert code == 3 and "would lose" in err, err
    assert "canonical savepoint of the job" not in err
    assert "Flink rescales this snapshot itself when a job starts from it" in err
    # a new max parallelism: those keys' key groups cannot be computed; what can stay
    code, _, err = run("rescale", str(copy), "-p", "3", "--max-parallelism", "256",
                       "--out", str(tmp_path / "out"))
    assert code == 3 and "canonical savepoint" not in err, err
    assert "Its max parallelism (128) can stay: rescale without --max-parallelism" in err
    code, _, err = run("convert", str(copy), "--out", str(tmp_path / "out"))
    assert code == 3 and "would lose" in err and "canonical savepoint of the job" not in err
    assert "Flink rescales" not in err  # a conversion is not a rescale
    assert not (tmp_path / "out").exists()


def test_a_heap_checkpoint_is_told_of_a_canonical_savepoint(tmp_path: Path) -> None:
    """Values the heap format does not delimit: a canonical savepoint would keep them."""
    copy = _renamed(_types_snapshot("checkpoint", "native"), tmp_path, DAY_VALUES)
    code, _, err = run("rescale", str(copy), "-p", "3", "--max-parallelism", "256",
                       "--out", str(tmp_path / "out"))
    assert code == 3 and "would lose" in err and "'day'" in err, err
    assert "a canonical savepoint of the job (flink savepoint --type canonical)" in err
    assert "Flink rescales" not in err  # not with a new max parallelism
