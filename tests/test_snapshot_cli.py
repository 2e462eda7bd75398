"""`statectl snapshot`: take a savepoint, list, release (refusing the latest), prune."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from cli.main import statectl
from formats.checkpoint_v1 import open_checkpoint


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
    assert [s["id"] for s in before] == [1, 2, 3, 4, 5, 6]
    assert all(s["kind"] == "checkpoint" and s["bytes"] for s in before)

    code, out, _ = run("--output", "json", "snapshot", "take", str(state), "--from", "3")
    assert code == 0
    (savepoint,) = json.loads(out)["snapshots"]
    assert (savepoint["id"], savepoint["kind"]) == (7, "savepoint")
    same = open_checkpoint(str(state / "chk-0000003")).metadata
    taken = open_checkpoint(str(savepoint["location"])).metadata
    assert taken.operators == same.operators and taken.files == same.files

    code, _, err = run("snapshot", "release", str(state), "6")
    assert code == 3 and "latest" in err  # a resume would need it
    code, out, _ = run("--output", "json", "snapshot", "release", str(state), "3")
    assert code == 0 and json.loads(out) == {"released": [3]}
    # the savepoint's files are hard links: releasing the checkpoint took nothing from it
    reopened = open_checkpoint(str(savepoint["location"]))
    for info in reopened.metadata.files:
        reopened.verify_checksum(info.path)

    code, out, _ = run("--output", "json", "snapshot", "prune", str(state), "--keep", "2")
    assert code == 0 and json.loads(out) == {"released": [1, 2, 4]}
    assert [(s["id"], s["kind"]) for s in listed(state)] == [
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
    code, _, _ = run("snapshot", "list", str(tmp_path / "missing"))
    assert code == 2
