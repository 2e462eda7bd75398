"""``snapshot list`` of a Flink job's checkpoint directory (issue 41, item 3c).

It used to print an empty table (exit 0) while ``inspect`` of the same directory advised
running it. It lists every ``chk-N`` (complete or not) and the savepoints given as paths, with
the ids, kinds and paths expected.json gives.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_support import run, run_json
from flink_fixtures import expected, fixture_sets, require_fixtures


def _sets() -> list[Path]:
    return [s for root in ("heap", "rocksdb") for s in fixture_sets(root)] or require_fixtures()


def _checkpoints(fixture_set: Path) -> list[Path]:
    return [fixture_set / s["path"] for s in expected(fixture_set)["snapshots"]
            if s["kind"] == "checkpoint"]


@pytest.mark.parametrize("fixture_set", _sets(), ids=lambda p: p.name)
def test_a_flink_job_directory_lists_its_checkpoints(fixture_set: Path) -> None:
    for checkpoint in _checkpoints(fixture_set):
        metadata_id = run_json("inspect", str(checkpoint))["checkpoint_id"]
        for directory in (checkpoint.parent, checkpoint.parent.parent):  # job dir, its parent
            listed = run_json("snapshot", "list", str(directory))["snapshots"]
            mine = [s for s in listed if s["location"] == str(checkpoint)]
            assert len(mine) == 1, (directory, listed)
            assert mine[0]["checkpoint_id"] == metadata_id
            assert mine[0]["kind"] == "checkpoint" and mine[0]["complete"] is True
            assert mine[0]["bytes"] > 0
        code, out, err = run("snapshot", "list", str(checkpoint.parent))
        assert code == 0 and checkpoint.name in out and str(metadata_id) in out, err


@pytest.mark.parametrize("fixture_set", _sets(), ids=lambda p: p.name)
def test_savepoints_given_as_paths_are_listed_with_the_checkpoints(fixture_set: Path) -> None:
    snapshots = expected(fixture_set)["snapshots"]
    savepoints = [fixture_set / s["path"] for s in snapshots if s["kind"] == "savepoint"]
    job = _checkpoints(fixture_set)[0].parent
    listed = run_json("snapshot", "list", str(job), *map(str, savepoints))["snapshots"]
    kinds = {s["location"]: s["kind"] for s in listed}
    assert all(kinds[str(p)] == "savepoint" for p in savepoints), kinds
    assert [s["checkpoint_id"] for s in listed] == sorted(s["checkpoint_id"] for s in listed)


def test_an_incomplete_checkpoint_is_listed_as_such(tmp_path: Path) -> None:
    checkpoint = _checkpoints(require_fixtures()[0])[0]
    job = tmp_path / "job"
    shutil.copytree(checkpoint, job / checkpoint.name)
    (job / "chk-99").mkdir()
    (job / "chk-99" / "part").write_bytes(b"x" * 10)  # Flink was writing it
    (job / "shared").mkdir()
    listed = run_json("snapshot", "list", str(job))["snapshots"]
    assert [(s["checkpoint_id"], s["complete"]) for s in listed][-1] == (99, False)
    assert listed[-1]["bytes"] == 10 and all(s["complete"] for s in listed[:-1])
    code, out, _ = run("snapshot", "list", str(job))
    assert code == 0 and "incomplete" in out


def test_a_long_location_is_printed_whole_when_piped(tmp_path: Path) -> None:
    """Piped output (CliRunner is no terminal) holds each location on one line, however deep:
    CI's fixtures sit 6 characters deeper than a workstation's, and a folded path failed there."""
    checkpoint = _checkpoints(require_fixtures()[0])[0]
    job = tmp_path.joinpath(*["a-rather-long-directory-name"] * 4, "job")
    shutil.copytree(checkpoint, job / checkpoint.name)
    code, out, err = run("snapshot", "list", str(job))
    assert code == 0, err
    assert str(job / checkpoint.name) in out.splitlines()[3], out
