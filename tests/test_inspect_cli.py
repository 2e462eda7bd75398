"""`statectl build` then `statectl inspect`, in both output modes, and their error paths."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from click.testing import CliRunner

from cli.main import statectl


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(statectl, list(args))
    return result.exit_code, result.stdout, result.stderr


def events(path: Path) -> Path:
    pq.write_table(pa.table({"user": ["a", "b", "a", "c", "a"], "amount": [1, 2, 3, 4, 5],
                             "ts": [0, 1000, 61000, 62000, 130000]}), path)
    return path


def test_build_then_inspect_in_json(tmp_path: Path) -> None:
    data = events(tmp_path / "events.parquet")
    code, out, err = run("--output", "json", "build", str(data), "--key", "user", "--agg",
                         "count", "--agg", "sum:amount", "--agg", "window-count:ts:60000",
                         "--checkpoint-dir", str(tmp_path / "state"), "--parallelism", "2")
    assert code == 0, err
    built = json.loads(out)
    assert built["records"] == built["total_records"] == 5
    assert built["states"] == ["count", "sum_amount", "window_count_ts"]
    code, out, err = run("--output", "json", "inspect", built["location"])
    assert code == 0, err
    document = json.loads(out)
    assert document["format"] == "statectl" and document["kind"] == "checkpoint"
    (op,) = document["operators"]
    assert (op["operator"]["uid"], op["parallelism"], op["max_parallelism"]) == ("build", 2, 128)
    states = {s["state"]: s for s in op["states"]}
    assert states["count"]["entries"] == 3  # users a, b, c
    assert states["window_count_ts"]["entries"] == 5  # (a,0) (b,0) (a,60000) (c,60000) (a,120000)
    assert states["count"]["scope"] == "keyed" and states["count"]["bytes"] > 0
    assert states["source-positions"]["scope"] == "operator"
    assert [s["key_group_range"] for s in op["subtasks"]] == [[0, 63], [64, 127]]
    assert sum(s["entries"] for s in op["subtasks"]) == sum(
        s["entries"] for s in op["states"])


def test_build_resume_and_text_output(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    pacsv.write_csv(pa.table({"user": ["x", "y"], "amount": [1.5, 2.5]}), data)
    args = ["build", str(data), "--key", "user", "--agg", "max:amount", "--checkpoint-dir",
            str(tmp_path / "state")]
    code, out, _ = run(*args)
    assert code == 0 and "processed 2 of 2 records" in out and "final state: checkpoint 1" in out
    code, out, _ = run(*args, "--resume")
    assert code == 0 and "resumed from checkpoint 1" in out and "processed 0 of 2" in out
    code, out, _ = run("inspect", str(tmp_path / "state" / "chk-0000002"))
    assert code == 0 and "max_amount" in out and "subtask" in out


def test_errors_are_one_line_and_exit_3(tmp_path: Path) -> None:
    data = events(tmp_path / "events.parquet")
    cases = [
        ("build", str(data), "--key", "nope", "--agg", "count", "--checkpoint-dir",
         str(tmp_path / "s1")),
        ("build", str(data), "--key", "user", "--agg", "median:amount", "--checkpoint-dir",
         str(tmp_path / "s2")),
        ("build", str(data), "--key", "user", "--agg", "count", "--checkpoint-dir",
         str(tmp_path / "s3"), "--resume"),
        ("inspect", str(tmp_path)),
    ]
    for args in cases:
        code, out, err = run(*args)
        assert code == 3, (args, out, err)
        assert err.startswith("Error: ") and err.count("\n") == 1, err


def test_resume_with_other_aggregations_is_refused(tmp_path: Path) -> None:
    data = events(tmp_path / "events.parquet")
    state = str(tmp_path / "state")
    code, _, err = run("build", str(data), "--key", "user", "--agg", "count",
                       "--checkpoint-dir", state)
    assert code == 0, err
    code, _, err = run("build", str(data), "--key", "user", "--agg", "sum:amount",
                       "--checkpoint-dir", state, "--resume")
    assert code == 3 and "resume with the same settings" in err
