"""Rescale and convert rewrite a Flink snapshot run by run, in bounded memory (issue 45, item 1).

Opened to be rewritten (:func:`formats.open.open_in_runs`), a Flink snapshot is
counted piece by piece and each new subtask's keyed file is written key group by key group as
its old handles are read run by run (:mod:`formats.flink.write.rewrite`,
:func:`formats.flink.write.savepoint_writer.write_keyed_file`). Checked here:

* on the Flink fixture snapshots (heap, RocksDB, types; see :data:`CASES`), the savepoint
  written by ``rescale`` (and, for each root's first case, ``convert``) is the one written
  from the snapshot decoded at open, file for file and byte for byte, in runs of one key group
  and in the default runs (or both are refused with the same message);
* a snapshot whose decoded state is far bigger than the memory a process may take
  (``RLIMIT_AS``) is rescaled by ``statectl rescale`` under that limit, and its output
  verifies with every entry.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from big_snapshot import KEYS, run_limited
from flink_fixtures import expected, fixture_sets

import formats.ops.key_group_runs as runs_module
from formats.engines import Engine
from formats.model.checkpoint import Checkpoint
from formats.open import WHOLE_RUNS, open_checkpoint
from formats.ops.convert import convert_checkpoint
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from statecore.errors import StatectlError

ROOTS = ("heap", "rocksdb", "types")
#: Each set's snapshots at its lowest parallelism: all of them for the first set of each root,
#: the checkpoints of the others (only what each set's expected.json says is assumed).
CASES = [(i, s, snap) for root in ROOTS for i, s in enumerate(fixture_sets(root))
         for snap in expected(s)["snapshots"]
         if snap["parallelism"] == min(x["parallelism"] for x in expected(s)["snapshots"])
         and (i == 0 or snap["kind"] == "checkpoint")]


def _written(write: Callable[[Checkpoint, str], Any], checkpoint: Checkpoint, out: Path,
             monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes] | str:
    """The files ``write`` wrote at ``out`` (removed then), or its refusal.

    Their names are the same on every run (``_metadata`` holds them, and ``out``).
    """
    numbers = iter(range(1, 1 << 20))
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(numbers)))
    try:
        write(checkpoint, str(out))
    except StatectlError as exc:
        return str(exc)
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    shutil.rmtree(out)
    return files


@pytest.mark.parametrize(("index", "fixture", "snap"), CASES,
                         ids=[f"{s.name}:{snap['path']}" for _, s, snap in CASES])
def test_written_run_by_run_the_savepoint_is_the_decoded_ones(
        index: int, fixture: Path, snap: dict[str, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(fixture / snap["path"])
    new_parallelism = snap["parallelism"] + 1
    # the fixtures hold kilobytes: runs of about a third of the smallest keyed handle, and
    # small enough that the snapshot is more than WHOLE_RUNS runs (else decoded at open)
    sizes = [s.size for s in getattr(open_checkpoint(path, partial=True, decode=False),
                                     "keyed_sources", ()) if s.size]
    small = max(1, min(min(sizes, default=3) // 3, sum(sizes) // (2 * WHOLE_RUNS)))

    def rescaled(checkpoint: Checkpoint, out: str) -> Any:
        return rescale_checkpoint(checkpoint, out, plan_checkpoint(checkpoint, new_parallelism))

    def converted(checkpoint: Checkpoint, out: str) -> Any:
        return convert_checkpoint(checkpoint, out)

    writes = [("rescale", rescaled)] + ([("convert", converted)]
                                        if index == 0 and snap["kind"] == "checkpoint" else [])
    for name, write in writes:
        whole = _written(write, open_checkpoint(path, partial=True), tmp_path / name,
                         monkeypatch)
        for chunk in (small, runs_module.CHUNK_BYTES):  # small runs; the default
            monkeypatch.setattr(runs_module, "CHUNK_BYTES", chunk)
            checkpoint = Engine().open_checkpoint(path, partial=True, rewrite=True)
            if sizes and isinstance(whole, dict):  # read run by run, not decoded at open,
                # unless the snapshot is at most WHOLE_RUNS runs (the default's, for these)
                assert getattr(checkpoint, "keyed_decoded", True) == (
                    sum(sizes) <= WHOLE_RUNS * chunk), (chunk, sum(sizes))
            streamed = _written(write, checkpoint, tmp_path / name, monkeypatch)
            if isinstance(whole, dict):
                assert isinstance(streamed, dict), streamed
                assert streamed.keys() == whole.keys(), name
                for file, data in whole.items():
                    assert streamed[file] == data, (name, chunk, file)
            else:
                assert streamed == whole, (name, chunk)
            monkeypatch.undo()



def test_a_snapshot_far_bigger_than_the_memory_limit_is_rescaled(big_savepoint: Path,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_limited("--quiet", "rescale", str(big_savepoint), "-p", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    verified = run_limited("--output", "json", "verify", str(out))
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["clean"] and report["entries"] == KEYS, report
    assert sorted(p.name for p in out.iterdir()).count("_metadata") == 1
    assert len(list(out.iterdir())) == 4  # three keyed files, _metadata


def test_a_snapshot_far_bigger_than_the_memory_limit_is_migrated(big_savepoint: Path,
                                                                 tmp_path: Path) -> None:
    """migrate opens OLD as rescale --out does (run by run): like itself, under the limit it
    needed about 1 GB for before; the state file written holds the source's bytes."""
    out = tmp_path / "out"
    done = run_limited("--quiet", "migrate", str(big_savepoint), "--like", str(big_savepoint),
                       "--out", str(out))
    assert done.returncode == 0, done.stderr
    verified = run_limited("--output", "json", "verify", str(out))
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["clean"] and report["entries"] == KEYS, report
    (written,) = [p for p in out.iterdir() if p.name != "_metadata"]
    (source,) = [p for p in big_savepoint.iterdir() if p.name != "_metadata"]
    assert written.read_bytes() == source.read_bytes()
