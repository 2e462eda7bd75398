"""Spark on real Flink snapshots against the local engine, on one embedded ``local[2]`` session.

For every snapshot of the heap and RocksDB fixture sets (heap checkpoints, native and canonical
savepoints, RocksDB incremental checkpoints), opened by the Spark engine with keyed handles cut
into small pieces of key groups (so that every stream is decoded in several pieces): the model
Spark tasks count is the one decoding the snapshot here builds (so `inspect` and the key-group
histogram are equal), plans are equal (the key counts of a max-parallelism change too), export
writes the same rows in the same order, and the max-parallelism rewrite writes the same state
files byte for byte (`diff` equal to the source and to the local rewrite, `verify` clean).
`migrate --engine spark` writes the local engine's savepoint byte for byte, values converted by
the tasks.
While Spark runs, the driver decodes nothing: its decoders are replaced by ones that fail.
Through the CLI in both output modes, and a corrupt stream that fails in a task.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_support import run, run_json
from flink_fixtures import require_fixtures, snapshot_ids, snapshots
from flink_upgrade import CROSS_RELEASE, upgrade_case

import formats.flink.read.pieces as flink_pieces
import formats.flink.read.snapshot_model as flink_snapshot_model
import formats.spark.flink as spark_flink
from formats.engines import SparkEngine
from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.read.metadata import parse_metadata
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.export import export_checkpoint
from formats.ops.inspect import inspect_checkpoint
from formats.ops.key_group_stats import key_group_histograms
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.verify import verify_checkpoint
from formats.spark.session import spark_session
from statecore.errors import EngineError, StatectlError, UnknownKeyHashError

SNAPSHOTS = snapshots("heap", "rocksdb")
IDS = snapshot_ids("heap", "rocksdb")
#: Pieces of a few kB: the fixtures' streams (up to ~60 kB) are decoded in several pieces.
PIECE_BYTES = 4096


@pytest.fixture(scope="module")
def engine() -> Iterator[SparkEngine]:
    os.environ.pop("STATECTL_SPARK_MASTER", None)
    session = spark_session("local[2]")
    session.sparkContext.setLogLevel("ERROR")
    runner = SparkEngine()  # the active session: this one
    yield runner
    session.stop()


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_flink, "MAX_PIECE_BYTES", PIECE_BYTES)
    monkeypatch.setattr(spark_flink, "MIN_PIECE_BYTES", PIECE_BYTES // 4)


def _refused_here(real: Any, driver: int) -> Any:
    """``real``, failing when called in process ``driver``. Spark pickles the functions its
    tasks call with the globals they use, this one included: in a task (another process) it
    decodes."""
    def call(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() == driver:
            raise AssertionError("the driver decoded keyed state")
        return real(*args, **kwargs)
    return call


@contextmanager
def driver_decodes_nothing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every keyed decoder fails in this process (Spark's Python workers are others)."""
    with monkeypatch.context() as patch:
        for module, name in ((flink_pieces, "decode_keyed_stream"),
                             (flink_pieces, "decode_incremental"),
                             (flink_pieces, "decode_piece"),
                             (flink_snapshot_model, "decode_keyed_handle"),
                             (spark_flink, "decode_piece")):
            patch.setattr(module, name, _refused_here(getattr(module, name), os.getpid()))
        yield


def _path(fixture_set: Path, snap: dict[str, Any]) -> str:
    return str(fixture_set / snap["path"])


def _new_max(checkpoint: Checkpoint) -> int:
    """A new max parallelism: up from 16, down from 128 (every fixture has one of them)."""
    return 128 if checkpoint.metadata.operators[0].max_parallelism <= 16 else 32


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_tasks_count_what_decoding_here_gives(engine: SparkEngine, fixture_set: Path,
                                              snap: dict[str, Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    here = open_checkpoint(_path(fixture_set, snap))
    m = _new_max(here)
    with driver_decodes_nothing(monkeypatch):
        on_spark = engine.open_checkpoint(_path(fixture_set, snap), max_parallelism=m)
        assert isinstance(on_spark, FlinkCheckpoint) and not on_spark.keyed_decoded
        assert on_spark.metadata == here.metadata
        assert key_group_histograms(on_spark, engine.footers(on_spark)) == \
            key_group_histograms(here)
        assert inspect_checkpoint(on_spark, "x", key_groups=True,
                                  footers=engine.footers(on_spark)) == \
            inspect_checkpoint(here, "x", key_groups=True)
        for p, new_max in ((3, m), (3, None), (1, None)):
            assert plan_checkpoint(on_spark, p, new_max, engine.rehash_counter()) == \
                plan_checkpoint(here, p, new_max)


def _rows(path: Path) -> tuple[Any, list[dict[str, Any]]]:
    table = pq.read_table(path)
    return table.schema.remove_metadata(), table.to_pylist()


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_export_on_spark_writes_the_local_rows_in_order(
        engine: SparkEngine, fixture_set: Path, snap: dict[str, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    local = export_checkpoint(open_checkpoint(_path(fixture_set, snap)), str(tmp_path / "l"))
    with driver_decodes_nothing(monkeypatch):
        checkpoint = engine.open_checkpoint(_path(fixture_set, snap), count=False)
        on_spark = export_checkpoint(checkpoint, str(tmp_path / "s"),
                                     state_writer=engine.state_writer(checkpoint))
    assert [(t.state, t.path, t.rows) for t in on_spark.tables] == \
        [(t.state, t.path, t.rows) for t in local.tables]
    for mine, theirs in zip(local.tables, on_spark.tables, strict=True):
        assert (tmp_path / "s" / theirs.path).is_dir()  # a directory of parts
        assert _rows(tmp_path / "s" / theirs.path) == _rows(tmp_path / "l" / mine.path), \
            mine.state


def _state_files(location: Path) -> dict[str, int]:
    """Digest -> count of a savepoint's state files (their names are random UUIDs)."""
    out: dict[str, int] = {}
    for path in location.iterdir():
        if path.name != "_metadata":
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[digest] = out.get(digest, 0) + 1
    return out


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_max_parallelism_rewrite_on_spark_is_the_local_one(
        engine: SparkEngine, fixture_set: Path, snap: dict[str, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = _path(fixture_set, snap)
    here = open_checkpoint(source)
    m = _new_max(here)
    local = rescale_checkpoint(here, str(tmp_path / "l"), plan_checkpoint(here, 3, m))
    with driver_decodes_nothing(monkeypatch):
        checkpoint = engine.open_checkpoint(source, max_parallelism=m)
        plan = plan_checkpoint(checkpoint, 3, m, engine.rehash_counter())
        on_spark = rescale_checkpoint(checkpoint, str(tmp_path / "s"), plan)
    assert (on_spark.mode, on_spark.entries_written, on_spark.files_written) == \
        (local.mode, local.entries_written, local.files_written)
    assert _state_files(tmp_path / "s") == _state_files(tmp_path / "l")  # byte for byte
    written = open_checkpoint(str(tmp_path / "s"))
    assert {op.max_parallelism for op in written.metadata.operators} == {m}
    assert diff_checkpoints(here, written).equal
    assert diff_checkpoints(open_checkpoint(str(tmp_path / "l")), written).equal
    assert verify_checkpoint(str(tmp_path / "s")).clean


def _first(kind: str, root: str = "heap") -> str:
    require_fixtures(root)
    return next(_path(fixture_set, s) for fixture_set, s in snapshots(root)
                if s["kind"] == kind and s["parallelism"] == 2)


def test_a_rescale_at_the_same_max_parallelism_and_a_backend_switch(
        engine: SparkEngine, tmp_path: Path) -> None:
    for name, source, p in (("p", _first("checkpoint"), 3),
                            ("rocks", _first("checkpoint", "rocksdb"), 2)):
        here = open_checkpoint(source)
        rescale_checkpoint(here, str(tmp_path / f"{name}-l"), plan_checkpoint(here, p))
        checkpoint = engine.open_checkpoint(source)
        rescale_checkpoint(checkpoint, str(tmp_path / f"{name}-s"),
                           plan_checkpoint(checkpoint, p))
        assert _state_files(tmp_path / f"{name}-s") == _state_files(tmp_path / f"{name}-l")
        assert diff_checkpoints(here, open_checkpoint(str(tmp_path / f"{name}-s"))).equal


def test_a_compressed_rewrite_is_the_local_one(engine: SparkEngine, tmp_path: Path) -> None:
    source = _first("savepoint")
    here = open_checkpoint(source)
    here.write_rescaled(plan_checkpoint(here, 2, 256), str(tmp_path / "l"), compress=True)
    checkpoint = engine.open_checkpoint(source, max_parallelism=256)
    checkpoint.write_rescaled(plan_checkpoint(checkpoint, 2, 256, engine.rehash_counter()),
                              str(tmp_path / "s"), compress=True)
    assert _state_files(tmp_path / "s") == _state_files(tmp_path / "l")
    assert diff_checkpoints(here, open_checkpoint(str(tmp_path / "s"))).equal


def test_keys_whose_hash_is_unknown_are_refused_before_spark_runs(
        engine: SparkEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = engine.open_checkpoint(_first("checkpoint"), count=False)
    monkeypatch.setattr(checkpoint, "unknown_key_hash",
                        lambda op: "a MyPojo key's hashCode is user code" if op.key_type
                        else None)
    with pytest.raises(UnknownKeyHashError, match="MyPojo"):
        plan_checkpoint(checkpoint, 2, 256, engine.rehash_counter())


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_engine_spark_on_a_flink_snapshot_in_both_modes(engine: SparkEngine,
                                                           tmp_path: Path) -> None:
    source = _first("checkpoint")
    local = run_json("inspect", source, "--key-groups")
    assert run_json("inspect", source, "--key-groups", "--engine", "spark") == local
    code, out, _ = run("inspect", source, "--key-groups", "--engine", "spark")
    assert code == 0 and "bytes per key group" in out
    document = run_json("rescale", source, "-p", "3", "--max-parallelism", "256", "--out",
                        str(tmp_path / "r"), "--engine", "spark")
    expected = run_json("rescale", source, "-p", "3", "--max-parallelism", "256", "--out",
                        str(tmp_path / "r2"))
    assert document["plan"] == expected["plan"]
    assert document["result"]["entries_written"] == expected["result"]["entries_written"]
    assert run("diff", source, str(tmp_path / "r"))[0] == 0
    assert run("verify", str(tmp_path / "r"))[0] == 0
    exported = run_json("export", source, "--out", str(tmp_path / "e"), "--engine", "spark")
    assert exported["rows"] == run_json("export", source, "--out", str(tmp_path / "e2"))["rows"]
    code, out, _ = run("export", source, "--out", str(tmp_path / "e3"), "--format", "jsonl",
                       "--engine", "spark")
    assert code == 0 and "(jsonl)" in out
    for table in run_json("export", source, "--out", str(tmp_path / "e4"), "--format", "csv",
                          "--engine", "spark")["tables"]:
        assert (tmp_path / "e4" / table["location"]).is_dir()


def test_text_exports_hold_the_local_lines_in_order(engine: SparkEngine,
                                                   tmp_path: Path) -> None:
    source = _first("savepoint", "rocksdb")
    for fmt in ("jsonl", "csv"):
        local = export_checkpoint(open_checkpoint(source), str(tmp_path / f"l{fmt}"), fmt)
        checkpoint = engine.open_checkpoint(source, count=False)
        export_checkpoint(checkpoint, str(tmp_path / f"s{fmt}"), fmt,
                          state_writer=engine.state_writer(checkpoint))
        for table in local.tables:
            parts = sorted((tmp_path / f"s{fmt}" / table.path).iterdir())
            lines = [line for part in parts for line in part.read_text().splitlines()
                     if not (fmt == "csv" and line.startswith('"operator"'))]
            want = (tmp_path / f"l{fmt}" / table.path).read_text().splitlines()
            assert lines == [w for w in want if not (fmt == "csv"
                                                     and w.startswith('"operator"'))]


def test_a_corrupt_stream_fails_in_a_task_and_leaves_nothing(engine: SparkEngine,
                                                            tmp_path: Path) -> None:
    fixture_set = next(s for s in require_fixtures() if s.name.endswith("allfiles"))
    snap = next(s for f, s in snapshots() if f == fixture_set and s["kind"] == "checkpoint")
    broken = tmp_path / "broken"
    shutil.copytree(fixture_set / snap["path"], broken)
    flink = parse_metadata((broken / "_metadata").read_bytes())
    handle = next(h for op in flink.operators for st in op.subtasks for h in st.managed_keyed
                  if getattr(h, "stream", None) is not None and h.stream.kind != "inline"
                  and len(h.offsets) > 3)
    target = broken / handle.stream.file_name
    data = bytearray(target.read_bytes())
    at = handle.offsets[2]  # the third key group's id, as the heap format stores it
    data[at:at + 4] = (0x7FFF).to_bytes(4, "big")
    target.write_bytes(bytes(data))
    with pytest.raises(StatectlError) as caught:
        checkpoint = engine.open_checkpoint(str(broken), count=False)
        export_checkpoint(checkpoint, str(tmp_path / "out"),
                          state_writer=engine.state_writer(checkpoint))
    assert isinstance(caught.value, EngineError)
    assert "CorruptCheckpointError" in str(caught.value) and "32767" in str(caught.value)
    code, _, err = run("rescale", str(broken), "-p", "3", "--max-parallelism", "256", "--out",
                       str(tmp_path / "out"), "--engine", "spark")
    assert code == 3 and err.startswith("Error: ") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]  # no output, no staging


def test_the_guard_catches_a_driver_that_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    with driver_decodes_nothing(monkeypatch), pytest.raises(AssertionError, match="driver"):
        open_checkpoint(_first("checkpoint"))


# -- migrate -----------------------------------------------------------------------------------

_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _savepoint(location: Path) -> bytes:
    """A savepoint's ``_metadata`` with each state file's random name replaced by the file's
    digest, its directory and the other random names (coordinator handles) by marks: equal
    for two savepoints of the same bytes wherever written."""
    files = {path.name.encode(): hashlib.sha256(path.read_bytes()).hexdigest().encode()
             for path in location.iterdir() if path.name != "_metadata"}
    metadata = (location / "_metadata").read_bytes().replace(str(location).encode(), b"<dir>")
    return _UUID.sub(lambda found: files.get(found.group(), b"<random>"), metadata)


@pytest.mark.parametrize("name", [CROSS_RELEASE, "pojo-field-type-int-to-long"])
def test_migrate_on_spark_writes_the_local_savepoint(engine: SparkEngine, name: str,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Values converted (Kryo 2 -> Flink 2.x's serializers; int -> long) by the tasks."""
    case = upgrade_case(name)
    local = run_json("migrate", str(case.old), "--like", str(case.new), "--out",
                     str(tmp_path / "local"))
    assert [c for op in local["operators"] for c in op["converted"]]  # a case that converts
    with driver_decodes_nothing(monkeypatch):
        on_spark = run_json("migrate", str(case.old), "--like", str(case.new), "--out",
                            str(tmp_path / "spark"), "--engine", "spark")
    assert {k: v for k, v in on_spark.items() if k not in ("location", "seconds")} == \
        {k: v for k, v in local.items() if k not in ("location", "seconds")}
    assert _state_files(tmp_path / "spark") == _state_files(tmp_path / "local")
    assert _savepoint(tmp_path / "spark") == _savepoint(tmp_path / "local")  # byte for byte


def test_a_value_that_does_not_convert_fails_in_a_task_and_leaves_nothing(
        engine: SparkEngine, tmp_path: Path) -> None:
    case = upgrade_case("value-type-long-to-string")
    code, _, err = run("migrate", str(case.old), "--like", str(case.new), "--out",
                       str(tmp_path / "spark"), "--engine", "spark")
    assert code == 3 and "failed on Spark" in err and "state 'count'" in err, err
    assert "is not a string" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not list(tmp_path.iterdir())  # no output, no staging
