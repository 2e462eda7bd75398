"""``build --engine spark`` reads inputs as the local engine does (issue 41, item 4).

The same bad input built by both engines with ``--on-bad-record skip``: the output JSON counts
the same records left out for the same reasons (and names the same first ones), and
``statectl diff`` finds the two checkpoints equal (keyed state, source positions, the stored
counts of skipped records). Keys are converted to ``--key-type`` and integer sums wrap on Spark
too; ``refuse`` names the local engine's record; ``fail`` is refused before Spark starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run

from formats.open import open_checkpoint
from formats.spark.session import spark_session

LONG_MAX = (1 << 63) - 1


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.pop("STATECTL_SPARK_MASTER", None)
    session = spark_session("local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def bad_inputs(directory: Path) -> list[str]:
    """CSV, JSON Lines and Parquet inputs holding every kind of bad record, and a long sum."""
    csv = directory / "events.csv"
    csv.write_bytes(b"user,amount\n1,5\n2,7\nx,3\n3,4,9\n1,zz\n\n2,8\n,1\n\xff3,2\n"
                    + b"4,%d\n4,%d\n" % (LONG_MAX, LONG_MAX) + b"3,NA\n")
    jsonl = directory / "events.jsonl"
    jsonl.write_text('{"user": 1, "amount": 2}\n{"user": "y", "amount": 1}\n'
                     '{"user": 2, "amount":\n\n{"user": 5, "amount": 9}\n{"amount": 3}\n'
                     '{"user": 1.5, "amount": 1}\n{"user": 5, "amount": 1}\n')
    parquet = directory / "events.parquet"
    pq.write_table(pa.table({"user": pa.array([6, None, 7, 6], pa.int64()),
                             "amount": pa.array([1, 2, 3, 4], pa.int64())}), parquet)
    header = directory / "header.csv"
    header.write_text("user,amount\n")
    return [str(csv), str(jsonl), str(parquet), str(header)]


def test_both_engines_skip_the_same_records_and_build_the_same_state(
        spark: Any, tmp_path: Path) -> None:
    inputs = bad_inputs(tmp_path)
    args = [*inputs, "--key", "user", "--key-type", "int64", "--agg", "count", "--agg",
            "sum:amount", "--parallelism", "2", "--on-bad-record", "skip"]
    documents = {}
    for engine in ("local", "spark"):
        code, out, err = run("--output", "json", "build", *args, "--engine", engine,
                             "--checkpoint-dir", str(tmp_path / engine))
        assert code == 0, err
        documents[engine] = json.loads(out)
    local, on_spark = documents["local"], documents["spark"]
    assert local["skipped"] == {"empty-key": 1, "invalid-utf8": 1, "key-type": 2,
                                "malformed": 2, "missing-key": 2, "mixed-type": 2}
    for field in ("skipped", "skipped_examples", "records", "total_records", "on_bad_record"):
        assert on_spark[field] == local[field], field
    code, out, err = run("diff", local["location"], on_spark["location"])
    assert code == 0, out + err
    checkpoint = open_checkpoint(on_spark["location"])
    op = checkpoint.metadata.operators[0]
    assert op.key_type == "int64"
    sums = {key: value for _, key, _, value in checkpoint.keyed_entries(op.uid, "sum_amount")}
    assert sums[4] == 2 * LONG_MAX - (1 << 64) and sums[1] == 7 and sums[6] == 5


def test_both_engines_refuse_the_same_record(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n1,5\n\nx,7\n")
    errors = []
    for engine in ("local", "spark"):
        code, out, err = run("build", str(data), "--key", "user", "--key-type", "int64",
                             "--agg", "count", "--checkpoint-dir", str(tmp_path / engine),
                             "--engine", engine)
        assert code == 3 and out == "" and err.count("\n") == 1, err
        errors.append(err)
    assert errors[0] == errors[1]
    assert f"{data}: row 2 (line 4), column 'user': the key 'x'" in errors[0]


def test_spark_numeric_ids_as_strings_and_the_local_engine_agree(spark: Any,
                                                                 tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": 594, "amount": 1}\n{"user": 1e3, "amount": 2}\n'
                    '{"user": "abc", "amount": 3}\n{"user": 1.0, "amount": 4}\n')
    locations = []
    for engine in ("local", "spark"):
        code, out, err = run("--output", "json", "build", str(data), "--key", "user",
                             "--key-type", "string", "--agg", "sum:amount", "--engine",
                             engine, "--checkpoint-dir", str(tmp_path / engine))
        assert code == 0, err
        locations.append(json.loads(out)["location"])
    assert run("diff", *locations)[0] == 0
    checkpoint = open_checkpoint(locations[1])
    op = checkpoint.metadata.operators[0]
    assert sorted(key for _, key, _, _ in checkpoint.keyed_entries(op.uid, "sum_amount")) == [
        "1.0", "1e3", "594", "abc"]
