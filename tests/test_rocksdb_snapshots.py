"""Flink RocksDB snapshots as files on disk: where statectl finds them, and verify's findings.

A checkpoint's RocksDB files live in its job's ``shared/`` directory beside ``chk-N``: found
there, also after the job directory was moved; a missing or damaged file is a verify problem
naming it, and inspect fails with exit 3 and one line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_support import run, run_json
from flink_fixtures import expected, require_fixtures, snapshots

from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata
from formats.open import open_checkpoint


def _checkpoint_with_shared_files() -> tuple[Path, str]:
    """A RocksDB checkpoint with an SST file in ``<job>/shared/``, and that file's name."""
    for fixture_set, snap in snapshots("rocksdb"):
        path = fixture_set / snap["path"]
        if snap["kind"] == "checkpoint" and (name := _shared_sst(path)) is not None:
            return path, name
    pytest.fail("no RocksDB fixture checkpoint keeps an SST file in shared/")


def _shared_sst(path: Path) -> str | None:
    """The stored name (in ``shared/``) of one SST file the checkpoint references."""
    for op in parse_metadata((path / "_metadata").read_bytes()).operators:
        for st in op.subtasks:
            for h in st.managed_keyed:
                if isinstance(h, FlinkIncrementalHandle):
                    for local, stream in h.shared:
                        if local.endswith(".sst") and stream.kind == "file":
                            return stream.file_name
    return None


def _moved(tmp_path: Path, path: Path) -> Path:
    """The job directory (checkpoint and shared/) copied elsewhere, under another parent."""
    job = tmp_path / "elsewhere" / path.parent.name
    job.mkdir(parents=True)
    shutil.copytree(path, job / path.name)
    shutil.copytree(path.parent / "shared", job / "shared")
    return job / path.name


def test_shared_files_are_found_after_the_job_directory_moved(tmp_path: Path) -> None:
    require_fixtures("rocksdb")
    path, _ = _checkpoint_with_shared_files()
    moved = _moved(tmp_path, path)
    original = {(op.uid, s.name): sorted(map(repr, open_checkpoint(str(path)).keyed_entries(
        op.uid, s.name))) for op in open_checkpoint(str(path)).metadata.operators
        for s in op.states if s.scope == "keyed"}
    checkpoint = open_checkpoint(str(moved))
    for (uid, name), entries in original.items():
        assert sorted(map(repr, checkpoint.keyed_entries(uid, name))) == entries
    assert run_json("verify", str(moved))["clean"] is True


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_damaged_shared_file_is_a_verify_problem(tmp_path: Path, damage: str) -> None:
    require_fixtures("rocksdb")
    path, name = _checkpoint_with_shared_files()
    moved = _moved(tmp_path, path)
    victim = moved.parent / "shared" / name
    if damage == "missing":
        victim.unlink()
    else:
        victim.write_bytes(victim.read_bytes()[:-20])
    report = run_json("verify", str(moved), code=1)
    # the file, by its kind and its path (verify's kinds)
    kind = {"missing": "missing-file", "truncated": "size"}[damage]
    assert any(p["kind"] == kind and p["where"] == f"../shared/{victim.name}"
               for p in report["problems"]), report["problems"]
    code, out, err = run("inspect", str(moved))
    assert code == 3 and err.startswith("Error: ") and victim.name in err
    assert "Traceback" not in out + err


def test_without_its_shared_directory_a_checkpoint_is_an_error_not_a_guess(tmp_path: Path
                                                                            ) -> None:
    require_fixtures("rocksdb")
    path, _ = _checkpoint_with_shared_files()
    alone = tmp_path / "job" / path.name
    shutil.copytree(path, alone)  # no shared/ beside it: nothing outside the job is read
    code, _, err = run("inspect", str(alone))
    assert code == 3 and "shared/" in err


def test_every_rocksdb_set_has_incremental_and_canonical_snapshots() -> None:
    for fixture_set in require_fixtures("rocksdb"):
        formats = {s["format"] for s in expected(fixture_set)["snapshots"]}
        assert formats == {"native", "canonical"}
