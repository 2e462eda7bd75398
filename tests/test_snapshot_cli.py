"""`statectl snapshot`: take a savepoint, list, release (refusing the latest), prune."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from cli.main import statectl
from formats.model.json_contract import SCHEMA_VERSION
from formats.open import open_checkpoint


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(statectl, list(args))
    return result.exit_code, result.stdout, result.stderr


def built_state(tmp_path: Path) -> Path:
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": [f"u{i % 7}" for i in range(50)],
                             "amount": list(range(50))}), data)
    state = tmp_path / "state"
    code, _, err = run("build", str(data), "--key", "user", "--agg", "sum:amount",
                       "--checkpoint-dir", str(state), "--checkpoint-every", "10", "--keep", "10")
    assert code == 0, err
    return state


def listed(state: Path) -> list[dict[str, object]]:
    code, out, err = run("--output", "json", "snapshot", "list", str(state))
    assert code == 0, err
    return json.loads(out)["snapshots"]  # type: ignore[no-any-return]


def test_savepoint_release_and_prune(tmp_path: Path) -> None:
    state = built_state(tmp_path)
    before = listed(state)
    assert [s["checkpoint_id"] for s in before] == [1, 2, 3, 4, 5, 6]
    assert all(s["kind"] == "checkpoint" and s["bytes"] for s in before)

    code, out, _ = run("--output", "json", "snapshot", "take", str(state), "--from", "3")
    assert code == 0
    (savepoint,) = json.loads(out)["snapshots"]
    assert (savepoint["checkpoint_id"], savepoint["kind"]) == (7, "savepoint")
    same = open_checkpoint(str(state / "chk-0000003")).metadata
    taken = open_checkpoint(str(savepoint["location"])).metadata
    assert taken.operators == same.operators and taken.files == same.files

    code, _, err = run("snapshot", "release", str(state), "6")
    assert code == 3 and "latest" in err  # a resume would need it
    code, out, _ = run("--output", "json", "snapshot", "release", str(state), "3")
    assert code == 0 and json.loads(out) == {"schema_version": SCHEMA_VERSION, "released": [3]}
    # the savepoint's files are hard links: releasing the checkpoint took nothing from it
    reopened = open_checkpoint(str(savepoint["location"]))
    for info in reopened.metadata.files:
        reopened.verify_checksum(info.path)

    code, out, _ = run("--output", "json", "snapshot", "prune", str(state), "--keep", "2")
    assert code == 0 and json.loads(out) == {"schema_version": SCHEMA_VERSION,
                                             "released": [1, 2, 4], "kept": [], "leftovers": []}
    assert [(s["checkpoint_id"], s["kind"]) for s in listed(state)] == [
        (5, "checkpoint"), (6, "checkpoint"), (7, "savepoint")]
    code, _, _ = run("snapshot", "release", str(state), "6", "--force")
    assert code == 0


def test_snapshot_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run("snapshot", "take", str(empty))
    assert code == 3 and err.startswith("Error: no completed checkpoint")
    code, _, err = run("snapshot", "release", str(empty), "9")
    assert code == 3 and "no completed checkpoint 9" in err
    code, _, err = run("snapshot", "list", str(tmp_path / "missing"))
    assert code == 3 and err.startswith(f"Error: {tmp_path / 'missing'} does not exist")


def _day(path: Path, users: list[str], amounts: list[int]) -> Path:
    pq.write_table(pa.table({"user": users, "amount": amounts}), path)
    return path


def test_take_processes_more_input_first_then_savepoints(tmp_path: Path) -> None:
    """`snapshot take --input` = `build --resume` with the stored settings, then a savepoint:
    its state equals one uninterrupted build over all the inputs."""
    day1 = _day(tmp_path / "day1.parquet", ["a", "b", "a"], [1, 2, 3])
    day2 = _day(tmp_path / "day2.parquet", ["c", "a"], [10, 20])
    settings = ["--key", "user", "--agg", "count", "--agg", "sum:amount", "--agg",
                "list:amount", "--parallelism", "2", "--max-parallelism", "64", "--uid", "u"]
    state, reference = tmp_path / "state", tmp_path / "reference"
    assert run("build", str(day1), "--checkpoint-dir", str(state), *settings)[0] == 0
    code, out, err = run("--output", "json", "snapshot", "take", str(state),
                         "--input", str(day1), "--input", str(day2))
    assert code == 0, err
    document = json.loads(out)
    assert document["build"]["records"] == 2 and document["build"]["restored_from"] == 1
    (savepoint,) = document["snapshots"]
    assert savepoint["kind"] == "savepoint"
    assert savepoint["checkpoint_id"] == document["build"]["final_checkpoint"] + 1
    assert run("build", str(day1), str(day2), "--checkpoint-dir", str(reference),
               *settings)[0] == 0
    code, out, err = run("diff", savepoint["location"], str(reference / "chk-0000001"))
    assert code == 0, out + err
    taken = open_checkpoint(savepoint["location"]).metadata.operators[0]
    assert (taken.uid, taken.parallelism, taken.max_parallelism) == ("u", 2, 64)
    code, out, _ = run("snapshot", "take", str(state), "--input", str(day1), "--input",
                       str(day2))
    assert code == 0 and "processed 0 of 5 records" in out and "savepoint" in out
    code, _, err = run("snapshot", "take", str(state), "--input", str(day2))
    assert code == 3 and "resume with the inputs the checkpoint was built from" in err


def test_take_input_needs_a_build_to_continue(tmp_path: Path) -> None:
    day = _day(tmp_path / "day.parquet", ["a"], [1])
    (tmp_path / "empty").mkdir()
    code, _, err = run("snapshot", "take", str(tmp_path / "empty"), "--input", str(day))
    assert code == 3 and "no completed checkpoint to continue from" in err
    code, _, err = run("snapshot", "take", str(tmp_path / "empty"), "--input", str(day),
                       "--from", "1")
    assert code == 2 and "--from and --input exclude each other" in err
