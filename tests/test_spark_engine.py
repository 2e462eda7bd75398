"""The Spark engine against the local engine, on one embedded ``local[2]`` Spark session.

For sample and generated checkpoints: rescale (compact, max-parallelism change, drop
expired) on Spark gives checkpoints whose `diff` with the local engine's output (and with the
source) is empty and whose `verify` is clean; export on Spark holds the same rows; the
key-group histogram from Spark-read footers equals the local one; key groups computed in Spark
tasks equal Flink's (../shared/oracle). Through the CLI in both output modes, with the errors a
user can make, and a failing Spark job that leaves nothing behind. Without pyspark, `--engine
spark` says what to install and every other command works (a subprocess that blocks pyspark).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import KEYED, OPERATOR, run, run_json
from flink_fixtures import expected, require_fixtures
from hypothesis import given, settings
from hypothesis import strategies as hs
from oracle import REPO_ROOT
from test_export_content import logical
from test_key_groups_oracle import _load

from formats.model.arrow_types import arrow_type, to_arrow
from formats.model.checkpoint import Checkpoint
from formats.model.key_hash import key_groups
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.export import export_checkpoint
from formats.ops.key_group_stats import key_group_histograms, keyed_files
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.verify import verify_checkpoint
from formats.spark.jobs import (
    BLOCK_BYTES,
    BLOCKS,
    PARTITION,
    arrow_blocks,
    exchange_files,
    exchange_mode,
    partition_tags,
    read_blocks,
    read_exchange_files,
    spark_footers,
    spark_keyed_writer,
    spark_rehash_counter,
    spark_state_writer,
)
from formats.spark.session import spark_session
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.errors import EngineError, InvalidArgumentError, StatectlError
from statecore.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import list_state, map_state, value_state
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
)
from statecore.ttl import ManualClock, TtlConfig


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.pop("STATECTL_SPARK_MASTER", None)
    session = spark_session("local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> str:
    """3 subtasks, 128 key groups: value, list (TTL), map and windowed state; operator state."""
    location = str(tmp_path_factory.mktemp("gen") / "chk")
    clock = ManualClock(1_000_000)
    p, m = 3, 128
    ranges = [compute_key_group_range_for_operator_index(m, p, i) for i in range(p)]
    backends = [HeapKeyedStateBackend("string", m, r, clock=clock) for r in ranges]
    operators = []
    for i in range(p):
        backend = OperatorStateBackend()
        backend.get_list_state(OperatorListStateDescriptor("offsets", "int64")).add_all(
            [i * 10 + j for j in range(i + 1)])
        backend.get_union_list_state(OperatorListStateDescriptor("marks", "int64")).add(i)
        backend.get_broadcast_state(BroadcastStateDescriptor("rules", "string", "string")
                                    ).put_all([("a", "x"), ("b", "y")])
        operators.append(backend)
    rng = np.random.default_rng(7)
    for k in range(3000):
        key = f"user-{k}"
        group = assign_to_key_group(key, m, "string")
        backend = next(b for b, r in zip(backends, ranges, strict=True) if group in r)
        backend.set_current_key(key)
        clock.now = 1_000_000 + int(rng.integers(0, 100_000))  # type: ignore[attr-defined]
        backend.get_value_state(value_state("amount", "float64")).update(float(k) / 7)
        backend.get_list_state(list_state("events", "string", ttl=TtlConfig(50_000))).add_all(
            [f"e{k}-{j}" for j in range(k % 4)])
        backend.get_map_state(map_state("per_page", "string", "int32")).put("home", k % 100)
        windowed = backend.get_value_state(value_state("clicks", "int64",
                                                       namespace_type="int64"))
        for window in range(k % 3):
            windowed.set_current_namespace(window * 60_000)
            windowed.update(k + window)
    write_checkpoint(location, 7, [OperatorSnapshot("job", "job", p, m, tuple(
        SubtaskSnapshot(i, keyed=b.snapshot(), operator=o.snapshot())
        for i, (b, o) in enumerate(zip(backends, operators, strict=True))))])
    return location


def _both(spark: Any, source: str, out: Path, p: int, m: int | None, *, compact: bool = False,
          drop_expired: bool = False, block_bytes: int | None = None,
          exchange: str | None = None) -> tuple[Checkpoint, Checkpoint]:
    checkpoint = open_checkpoint(source)
    local_plan = plan_checkpoint(checkpoint, p, m)
    spark_plan = plan_checkpoint(checkpoint, p, m, spark_rehash_counter(spark))
    assert spark_plan == local_plan  # the key counts of a max-parallelism change too
    kwargs = {"compact": compact, "drop_expired": drop_expired, "now": 1_060_000}
    rescale_checkpoint(checkpoint, str(out / "local"), local_plan, **kwargs)  # type: ignore
    result = rescale_checkpoint(checkpoint, str(out / "spark"), spark_plan,  # type: ignore
                                keyed_writer=spark_keyed_writer(
                                    spark, BLOCK_BYTES if block_bytes is None else block_bytes,
                                    exchange), **kwargs)
    local, on_spark = open_checkpoint(str(out / "local")), open_checkpoint(str(out / "spark"))
    assert result.entries_written == sum(r.row_count for op in on_spark.metadata.operators
                                         for st in op.subtasks for h in st.keyed
                                         for r in h.rows)
    return local, on_spark


@pytest.mark.parametrize(("p", "m", "compact", "drop", "exchange"), [
    (2, None, True, False, "files"), (4, 256, False, False, "files"),
    (4, 256, False, False, "shuffle"), (3, 64, True, False, "shuffle"),
    (1, None, True, True, "files"), (5, 1024, False, True, "shuffle")])
def test_rescale_on_spark_equals_local(spark: Any, generated: str, tmp_path: Path, p: int,
                                       m: int | None, compact: bool, drop: bool,
                                       exchange: str) -> None:
    # exchange: rows reach their partition's task in files (a local master's default) or
    # through Spark's shuffle (a cluster's)
    local, on_spark = _both(spark, generated, tmp_path, p, m, compact=compact,
                            drop_expired=drop, exchange=exchange)
    assert diff_checkpoints(local, on_spark).equal
    if not drop:
        assert diff_checkpoints(open_checkpoint(generated), on_spark).equal
    else:
        assert not diff_checkpoints(open_checkpoint(generated), on_spark).equal
    for location in (str(tmp_path / "local"), str(tmp_path / "spark")):
        report = verify_checkpoint(location)
        assert report.clean, report.problems
    op = on_spark.metadata.operators[0]
    assert (op.parallelism, op.max_parallelism) == (p, m or 128)


@pytest.mark.parametrize("sample", [KEYED, OPERATOR])
def test_rescale_samples_on_spark(spark: Any, sample: str, tmp_path: Path) -> None:
    local, on_spark = _both(spark, sample, tmp_path, 3, 256 if sample == KEYED else None,
                            compact=True)
    assert diff_checkpoints(local, on_spark).equal
    assert verify_checkpoint(str(tmp_path / "spark")).clean


def test_export_on_spark_holds_the_same_rows(spark: Any, generated: str, tmp_path: Path
                                             ) -> None:
    checkpoint = open_checkpoint(generated)
    local = export_checkpoint(checkpoint, str(tmp_path / "l"))
    on_spark = export_checkpoint(checkpoint, str(tmp_path / "s"),
                                 state_writer=spark_state_writer(spark))
    assert [(t.state, t.rows) for t in local.tables] == [(t.state, t.rows)
                                                        for t in on_spark.tables]
    for mine, theirs in zip(local.tables, on_spark.tables, strict=True):
        assert (tmp_path / "s" / theirs.path).is_dir()
        rows = pq.read_table(tmp_path / "s" / theirs.path).to_pylist()
        expected = pq.read_table(tmp_path / "l" / mine.path).to_pylist()
        assert sorted(map(repr, rows)) == sorted(map(repr, expected)), mine.state
    manifest = json.loads((tmp_path / "s" / "_export.json").read_text())
    assert [t["location"] for t in manifest["tables"]] == [t.path for t in on_spark.tables]


def test_footers_read_by_spark_give_the_same_histogram(spark: Any, generated: str) -> None:
    checkpoint = open_checkpoint(generated)
    footers = spark_footers(spark, checkpoint, keyed_files(checkpoint))
    assert key_group_histograms(checkpoint, footers) == key_group_histograms(checkpoint)


def test_key_groups_on_spark_equal_the_oracle(spark: Any, key_groups_file: Path) -> None:
    data, keys = _load(key_groups_file)
    chosen = [k for k in keys if k.spec in ("string", "int32", "int64") and not (
        isinstance(k.value, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in k.value))]
    assert chosen
    maxima = data["max_parallelisms"]
    plain = [(k.spec, k.value) for k in chosen]  # workers cannot import this test module
    schema = pa.schema([("i", pa.int64()), ("groups", pa.list_(pa.int32()))])

    def compute(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            picked = [plain[i] for i in batch.column(0).to_pylist()]
            groups: list[list[int]] = [[] for _ in picked]
            for spec in {s for s, _ in picked}:
                where = [j for j, (s, _) in enumerate(picked) if s == spec]
                convert = to_arrow(spec)
                column = pa.array([convert(picked[j][1]) for j in where], arrow_type(spec))
                for m in maxima:
                    for j, g in zip(where, key_groups(column, spec, m), strict=True):
                        groups[j].append(int(g))
            yield pa.RecordBatch.from_pydict({"i": batch.column(0).to_pylist(),
                                              "groups": groups}, schema=schema)

    from pyspark.sql.pandas.types import from_arrow_schema
    rows = spark.range(len(chosen), numPartitions=2).mapInArrow(
        compute, from_arrow_schema(schema)).collect()
    assert len(rows) == len(chosen)
    for row in rows:
        assert row.groups == chosen[row.i].record["key_groups"], chosen[row.i].describe()


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_engine_spark_in_both_modes(spark: Any, tmp_path: Path) -> None:
    document = run_json("rescale", KEYED, "-p", "3", "--max-parallelism", "256", "--out",
                        str(tmp_path / "r"), "--engine", "spark")
    assert document["result"]["mode"] == "rehash" and document["plan"]["rehash"]
    assert run("diff", KEYED, str(tmp_path / "r"))[0] == 0
    code, out, _ = run("rescale", KEYED, "-p", "2", "--out", str(tmp_path / "c"), "--compact",
                       "--engine", "spark")
    assert code == 0 and f"wrote {tmp_path / 'c'} (compact)" in out
    document = run_json("export", KEYED, "--out", str(tmp_path / "e"), "--engine", "spark")
    assert document["rows"] == 269 and all(t["location"].endswith(".parquet")
                                          for t in document["tables"])
    code, out, _ = run("export", OPERATOR, "--out", str(tmp_path / "e2"), "--format", "jsonl",
                       "--engine", "spark")
    assert code == 0 and "(jsonl)" in out
    local = run_json("inspect", KEYED, "--key-groups")
    assert run_json("inspect", KEYED, "--key-groups", "--engine", "spark") == local
    code, out, _ = run("inspect", KEYED, "--key-groups", "--engine", "spark")
    assert code == 0 and "bytes per key group" in out


@pytest.mark.parametrize(("args", "code", "message"), [
    (["inspect", KEYED, "--engine", "spark"], 2, "--engine spark applies to --key-groups"),
    (["inspect", KEYED, "--key-groups", "--spark-master", "local[1]"], 3,
     "--spark-master and --spark-conf need --engine spark"),
    (["export", KEYED, "--out", "x", "--engine", "spark", "--spark-conf", "nonsense"], 3,
     "--spark-conf takes key=value"),
    (["rescale", KEYED, "-p", "2", "--plan", "--engine", "flink"], 2, "Invalid value"),
])
def test_cli_engine_mistakes(args: list[str], code: int, message: str) -> None:
    got, out, err = run(*args)
    assert got == code and message in err and "Traceback" not in err


def test_a_failing_spark_job_leaves_nothing(spark: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(KEYED, broken)
    victim = sorted(broken.rglob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes() + b"junk")  # found by the task that reads it

    checkpoint = open_checkpoint(str(broken))
    with pytest.raises(StatectlError) as caught:
        rescale_checkpoint(checkpoint, str(tmp_path / "out"), plan_checkpoint(checkpoint, 3),
                           compact=True, keyed_writer=spark_keyed_writer(spark))
    assert isinstance(caught.value, EngineError)
    assert "CorruptCheckpointError" in str(caught.value) and "metadata says" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]  # no output, no staging
    code, _, err = run("rescale", str(broken), "-p", "3", "--compact", "--out",
                       str(tmp_path / "out"), "--engine", "spark")
    assert code == 3 and err.startswith("Error: ") and "Traceback" not in err
    assert not (tmp_path / "out").exists()


BLOCK_PYSPARK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "py4j"):
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
from cli.main import statectl
statectl(sys.argv[1:], prog_name="statectl")
"""


def _without_pyspark(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK_PYSPARK, *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


def test_without_pyspark_spark_says_what_to_install_and_the_rest_works(tmp_path: Path) -> None:
    for args in (["export", KEYED, "--out", str(tmp_path / "x"), "--engine", "spark"],
                 ["rescale", KEYED, "-p", "3", "--compact", "--out", str(tmp_path / "y"),
                  "--engine", "spark"],
                 ["inspect", KEYED, "--key-groups", "--engine", "spark"]):
        done = _without_pyspark(tmp_path, *args)
        assert done.returncode == 3, done.stderr
        assert "pip install 'statectl[spark]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    for args in (["inspect", KEYED, "--key-groups", "--top", "2"],
                 ["rescale", KEYED, "-p", "3", "--max-parallelism", "256", "--out",
                  str(tmp_path / "r")],
                 ["export", KEYED, "--out", str(tmp_path / "e")],
                 ["verify", str(tmp_path / "r")], ["diff", KEYED, str(tmp_path / "r")],
                 ["trace", "--example", "seed000-copy-on-write"],
                 ["build", str(REPO_ROOT / "docs" / "examples" / "events.csv"), "--key", "user",
                  "--agg", "count", "--checkpoint-dir", str(tmp_path / "b")],
                 ["snapshot", "take", str(tmp_path / "b")],
                 ["snapshot", "list", str(tmp_path / "b")]):
        done = _without_pyspark(tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr)


def test_logical_content_helper_sees_generated_state(generated: str) -> None:
    content = logical(open_checkpoint(generated))
    assert len(content["job", "amount"]) == 3000 and content["job", "marks"]


# -- build -------------------------------------------------------------------------------------


AGGREGATIONS = ["count", "sum:amount", "min:amount", "max:amount", "last:page", "list:page",
                "map:page=amount", "window-count:ts:60000"]


def _inputs(directory: Path) -> list[str]:
    """Three inputs with the same columns: Parquet, CSV, JSON Lines; skewed users, floats."""
    rng = np.random.default_rng(11)
    paths = []
    for j, suffix in enumerate(["parquet", "csv", "jsonl"]):
        n = 700 + 150 * j
        table = pa.table({
            "user": [f"u{int(u)}" for u in rng.zipf(1.6, n) % 300],
            "page": [["home", "cart", "pay"][int(x)] for x in rng.integers(0, 3, n)],
            "amount": rng.normal(50, 20, n).round(3),
            "ts": np.sort(rng.integers(0, 600_000, n)).astype(np.int64)})
        path = directory / f"in{j}.{suffix}"
        if suffix == "parquet":
            pq.write_table(table, path)
        elif suffix == "csv":
            import pyarrow.csv as pacsv
            pacsv.write_csv(table, path)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()))
        paths.append(str(path))
    return paths


@pytest.mark.parametrize(("parallelism", "max_parallelism", "block_bytes", "exchange"), [
    (3, None, None, "files"), (1, 64, None, "shuffle"), (4, 512, None, "files"),
    (2, 128, 300, "shuffle"), (3, None, None, "shuffle")])
def test_build_on_spark_equals_local(spark: Any, tmp_path: Path, parallelism: int,
                                     max_parallelism: int | None, block_bytes: int | None,
                                     exchange: str) -> None:
    # block_bytes: records cross the shuffle in blocks of a few records each, many per
    # subtask, and are put back into reading order there
    from formats.ops.build import build_state
    from formats.spark.build import spark_build
    inputs = _inputs(tmp_path)
    settings = {"key": "user", "aggregations": AGGREGATIONS, "parallelism": parallelism,
                "max_parallelism": max_parallelism, "uid": "u"}
    local = build_state(inputs, checkpoint_dir=str(tmp_path / "local"), **settings)  # type: ignore
    if block_bytes is not None:
        settings["block_bytes"] = block_bytes
    settings["exchange"] = exchange
    on_spark = spark_build(spark, inputs, checkpoint_dir=str(tmp_path / "spark"),
                           **settings)  # type: ignore[arg-type]
    assert (on_spark.records, on_spark.final_checkpoint) == (local.records, 1)
    a, b = open_checkpoint(local.final_location), open_checkpoint(on_spark.final_location)
    report = diff_checkpoints(a, b)
    assert report.equal, report.differences[:5]  # keyed state, positions, configuration
    assert verify_checkpoint(on_spark.final_location).clean
    assert a.metadata.operators[0].states == b.metadata.operators[0].states


def test_build_on_spark_through_the_cli(spark: Any, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path)
    document = run_json("build", *inputs, "--key", "user", "--agg", "count", "--agg",
                        "list:page", "--checkpoint-dir", str(tmp_path / "s"), "--parallelism",
                        "2", "--engine", "spark")
    assert document["records"] == document["total_records"] == 700 + 850 + 1000
    code, out, _ = run("build", *inputs, "--key", "user", "--agg", "count", "--agg",
                       "list:page", "--checkpoint-dir", str(tmp_path / "l"), "--parallelism",
                       "2")
    assert code == 0
    assert run("diff", document["location"], str(tmp_path / "l" / "chk-0000001"))[0] == 0
    # a second Spark build in the same directory takes the next id; snapshot take continues
    again = run_json("build", *inputs, "--key", "user", "--agg", "count", "--agg",
                     "list:page", "--checkpoint-dir", str(tmp_path / "s"), "--parallelism",
                     "2", "--engine", "spark")
    assert again["final_checkpoint"] == 2
    for extra, option in ((["--resume"], "--resume"), (["--checkpoint-every", "10"],
                                                     "--checkpoint-every")):
        code, _, err = run("build", *inputs, "--key", "user", "--agg", "count",
                           "--checkpoint-dir", str(tmp_path / "x"), "--engine", "spark", *extra)
        assert code == 3 and option in err and "one pass" in err
    code, _, err = run("build", inputs[0], "--key", "nope", "--agg", "count",
                       "--checkpoint-dir", str(tmp_path / "y"), "--engine", "spark")
    assert code == 3 and "is not a column" in err
    assert not (tmp_path / "x").exists() or not list((tmp_path / "x").iterdir())


@pytest.mark.parametrize("partitions", [1, 2, 3, 4, 8])
def testpartition_tags_land_in_their_partitions(spark: Any, partitions: int) -> None:
    # the rewrite and the build decide each row's partition in their read tasks; Spark's own
    # hash partitioning must send each partition's tag there (plain subtask numbers collide:
    # pmod(hash(0), 2) == pmod(hash(1), 2))
    from pyspark.sql import functions as F
    tags = partition_tags(spark, partitions)
    assert len(set(tags)) == partitions
    rows = (spark.createDataFrame([(t,) for t in tags], "tag long")
            .repartition(partitions, "tag")
            .select("tag", F.spark_partition_id().alias("partition")).collect())
    assert {r.tag: r.partition for r in rows} == {t: j for j, t in enumerate(tags)}


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(0, 5), hs.text(max_size=12),
                          hs.none() | hs.integers(-(1 << 63), (1 << 63) - 1)), max_size=60),
       hs.integers(1, 400))
def test_arrow_blocks_carry_each_row_to_its_partition_in_order(
        rows: list[tuple[int, str, int | None]], block_bytes: int) -> None:
    # what the rewrite and the build shuffle: blocks of rows, each tagged for one partition
    table = pa.table({"key": pa.array([r[1] for r in rows], pa.string()),
                      "value": pa.array([r[2] for r in rows], pa.int64())})
    partitions = np.asarray([r[0] for r in rows], dtype=np.int64)
    tags = [100 + 7 * j for j in range(6)]
    batches = list(arrow_blocks(table, partitions, tags, block_bytes))
    assert all(b.schema.equals(BLOCKS) and b.num_rows == 1 for b in batches)  # a block each
    by_tag: dict[int, list[pa.RecordBatch]] = {}
    for batch in batches:
        by_tag.setdefault(batch.column(PARTITION)[0].as_py(), []).append(batch)
    assert set(by_tag) == {tags[j] for j in set(partitions.tolist())}
    for j, tag in enumerate(tags):
        got = read_blocks(iter(by_tag.get(tag, [])), table.schema)
        assert got.schema.equals(table.schema)
        expected = [(r[1], r[2]) for r in rows if r[0] == j]
        assert list(zip(got.column("key").to_pylist(), got.column("value").to_pylist(),
                        strict=True)) == expected
    blocks = sum(b.num_rows for b in batches)
    if block_bytes < 12:  # a row takes at least 12 bytes (value, string offset): one per block
        assert blocks == len(rows)
    elif block_bytes >= table.nbytes:  # everything fits: one block per partition
        assert blocks == len(by_tag)


def test_rewrite_in_many_small_blocks_equals_local(spark: Any, generated: str,
                                                  tmp_path: Path) -> None:
    # blocks of a few rows: every partition receives many blocks from every read task
    local, on_spark = _both(spark, generated, tmp_path, 3, 256, block_bytes=200,
                            exchange="shuffle")
    assert diff_checkpoints(local, on_spark).equal
    assert verify_checkpoint(str(tmp_path / "spark")).clean


def test_rewrite_spreads_key_groups_over_every_partition(spark: Any, generated: str,
                                                         tmp_path: Path) -> None:
    _local, on_spark = _both(spark, generated, tmp_path, 2, 256)
    # local[2]: 4 partitions, each a quarter of the new key groups, so each writes files
    files = [h.file for op in on_spark.metadata.operators for st in op.subtasks
             for h in st.keyed]
    assert {f.rsplit("-p", 1)[1].split(".")[0] for f in files} == {"0", "1", "2", "3"}
    for op in on_spark.metadata.operators:
        for st in op.subtasks:
            for h in st.keyed:
                partition = int(h.file.rsplit("-p", 1)[1].split(".")[0])
                assert all(r.key_group * 4 // 256 == partition for r in h.rows)


def test_spark_reads_the_export_of_pojo_state(spark: Any, tmp_path: Path) -> None:
    """Issue 20: a Flink snapshot's POJO state exported to Parquet is a struct Spark reads as
    one, with the POJO's field names and types (instants as timestamps, enums as strings)."""
    fixture_set = require_fixtures("types")[0]
    snap = next(s for s in expected(fixture_set)["snapshots"] if s["format"] == "canonical")
    checkpoint = open_checkpoint(str(fixture_set / snap["path"]))
    result = export_checkpoint(checkpoint, str(tmp_path / "out"))
    structs = [t for t in result.tables
               if pa.types.is_struct(pq.read_schema(tmp_path / "out" / t.path).field(
                   "value").type) and t.kind == "value"]
    assert structs
    table = structs[0]
    arrow = pq.read_schema(tmp_path / "out" / table.path).field("value").type
    frame = spark.read.parquet(str(tmp_path / "out" / table.path))
    value = frame.schema["value"].dataType
    assert [f.name for f in value.fields] == [arrow.field(i).name
                                              for i in range(arrow.num_fields)]
    kinds = {f.name: f.dataType.typeName() for f in value.fields}
    for i in range(arrow.num_fields):
        field = arrow.field(i)
        if pa.types.is_timestamp(field.type):
            assert kinds[field.name] in ("timestamp", "timestamp_ntz")
        elif pa.types.is_string(field.type):
            assert kinds[field.name] == "string"
    assert frame.count() == table.rows
    want = dict(expected(fixture_set)["operators"][table.operator.uid]["keyed_states"][
        table.state]["entries"])
    row = frame.where(frame.key == next(iter(want))).collect()[0]
    got = row["value"].asDict(recursive=True)
    for name, json_value in want[next(iter(want))].items():
        if kinds[name] == "string" or isinstance(json_value, bool | float):
            assert got[name] == json_value, name


# --- on S3 (tests/s3_server.py) ---------------------------------------------------------------


def test_spark_reads_and_writes_s3(spark: Any, s3: Any, tmp_path: Path) -> None:
    """Spark's Python workers reach S3 as the driver does: the AWS_* settings are forwarded
    to them (they are taken out of the workers' environment first, so only the forwarding
    can have put them there), and checkpoints travel into tasks with their credentials."""
    from s3_support import state_of, upload
    environment = spark.sparkContext.environment
    for name in [n for n in environment if n.startswith("AWS_")]:
        del environment[name]
    local_inputs = _inputs(tmp_path)
    for path in local_inputs:  # parquet, csv, jsonl
        upload(s3.fs(), Path(path), s3.path(f"in/{Path(path).name}"))
    inputs = [s3.uri(f"in/{Path(path).name}") for path in local_inputs]
    aggregations = ["--agg", "count", "--agg", "list:page"]
    built = run_json("build", *inputs, "--key", "user", *aggregations, "--checkpoint-dir",
                     s3.uri("state"), "--parallelism", "2", "--engine", "spark")
    assert built["records"] == 700 + 850 + 1000
    assert built["location"] == s3.uri("state/chk-0000001")
    code, _, err = run("build", *local_inputs, "--key", "user", *aggregations,
                       "--checkpoint-dir", str(tmp_path / "local"), "--parallelism", "2")
    assert code == 0, err
    local = str(tmp_path / "local" / "chk-0000001")
    # the same keyed state (the source positions name the inputs where they were read)
    assert state_of(built["location"]) == state_of(local)

    for args, out in ((["-p", "3", "--compact"], s3.uri("compact")),
                      (["-p", "2", "--max-parallelism", "64"], s3.uri("m64")),
                      (["-p", "3", "--compact"], str(tmp_path / "compact-local"))):
        result = run_json("rescale", built["location"], *args, "--out", out, "--engine",
                          "spark")["result"]
        assert result["files_written"] > 0 and result["location"] == out
        assert run_json("verify", out)["clean"]
        code, text, err = run("diff", out, built["location"])
        assert code == 0, text + err

    exported = run_json("export", built["location"], "--out", s3.uri("exported"), "--engine",
                        "spark")
    assert {t["state"] for t in exported["tables"]} >= {"count", "list_page"}
    histogram = run_json("inspect", built["location"], "--key-groups", "--engine", "spark")
    assert histogram["key_groups"] == run_json("inspect", built["location"],
                                               "--key-groups")["key_groups"]


def test_exchange_mode_follows_the_master_and_can_be_chosen(spark: Any) -> None:
    assert exchange_mode(spark) == "files"  # local[2]: every task on this machine
    assert exchange_mode(spark, "shuffle") == "shuffle"
    spark.conf.set("statectl.exchange", "shuffle")
    try:
        assert exchange_mode(spark) == "shuffle"
        spark.conf.set("statectl.exchange", "carrier-pigeon")
        with pytest.raises(InvalidArgumentError, match="statectl.exchange"):
            exchange_mode(spark)
    finally:
        spark.conf.unset("statectl.exchange")


def test_exchange_files_hand_each_row_to_its_partition_in_order(tmp_path: Path) -> None:
    table = pa.table({"n": pa.array(range(1000), pa.int64())})
    partitions = np.random.default_rng(3).integers(0, 5, 1000)
    written = dict(exchange_files(table, partitions, str(tmp_path / "piece")))
    assert sorted(written) == sorted(set(partitions.tolist()))
    for partition, path in written.items():
        rows = read_exchange_files([path], table.schema).column("n").to_pylist()
        assert rows == [i for i in range(1000) if partitions[i] == partition]
    assert read_exchange_files([], table.schema).num_rows == 0


def test_task_profiles_are_written_on_demand_and_add_up_by_step(
        spark: Any, generated: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from formats.spark.profiling import PROFILE_VARIABLE, STEPS, summarise
    monkeypatch.setenv(PROFILE_VARIABLE, str(tmp_path / "profiles"))
    for name in ("out", "again"):
        (tmp_path / name).mkdir()
    local, on_spark = _both(spark, generated, tmp_path / "out", 3, 256, exchange="files")
    assert diff_checkpoints(local, on_spark).equal  # profiling changes nothing
    profiles = sorted((tmp_path / "profiles").glob("*.prof"))
    # the plan's counting tasks and both sides of the rewrite's exchange
    assert {"rewrite-map", "rewrite-reduce"} <= {p.name.rsplit("-", 3)[0] for p in profiles}
    steps = summarise(profiles)
    assert set(steps) == {name for name, _ in STEPS} | {"other", "total"}
    assert steps["total"] > 0
    assert sum(v for k, v in steps.items() if k != "total") == pytest.approx(steps["total"])
    monkeypatch.delenv(PROFILE_VARIABLE)
    _both(spark, generated, tmp_path / "again", 3, 256, exchange="files")
    assert len(list((tmp_path / "profiles").glob("*.prof"))) == len(profiles)  # off: none
