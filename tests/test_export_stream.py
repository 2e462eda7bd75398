"""Export reads a snapshot piece by piece, in bounded memory (issue 45, item 1).

The local engine opens a Flink snapshot for ``export`` without decoding its keyed state and
reads each keyed handle in runs of key groups (:func:`formats.ops.key_group_runs.key_group_chunks`),
every state of an operator side by side, so that a run is decoded once and memory holds a few
runs, never the snapshot. Checked here:

* on the Flink fixture snapshots (heap, RocksDB, types; see :data:`CASES`), each handle cut
  into runs of key groups, the export is the one of the snapshot decoded whole, file for file;
* a snapshot whose decoded state is far bigger than the memory a process may take
  (``RLIMIT_AS``) is exported whole by ``statectl export`` under that limit, every value
  right, while decoding it whole under the same limit fails;
* memory running out is one clear ``Error:`` line (exit 3), not a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from big_snapshot import KEYS, limited, value
from cli_support import run
from flink_fixtures import expected, fixture_sets, snapshots
from oracle import REPO_ROOT
from small_runs import cut_in_small_runs

import formats.ops.export as export_module
import formats.ops.key_group_runs as runs_module
from formats.engines import Engine
from formats.open import open_checkpoint
from formats.ops.export import export_checkpoint

ROOTS = ("heap", "rocksdb", "types")
#: Every set's snapshots at its lowest parallelism; all snapshots (the rescaled ones too, whose
#: subtasks' key groups start elsewhere than 0) of the first set of each root. Only what each
#: set's expected.json says is assumed.
CASES = [(s, snap) for root in ROOTS for i, s in enumerate(fixture_sets(root))
         for snap in expected(s)["snapshots"]
         if i == 0 or snap["parallelism"] == min(
             x["parallelism"] for x in expected(s)["snapshots"])]


def _tables(out: Path) -> dict[str, Any]:
    manifest = json.loads((out / "_export.json").read_text())
    return {t["location"]: (t["rows"], pq.read_table(out / t["location"]))
            for t in manifest["tables"]}


@pytest.mark.parametrize(("fixture", "snap"), CASES,
                         ids=[f"{s.name}:{snap['path']}" for s, snap in CASES])
def test_read_piece_by_piece_the_export_is_the_whole_ones(
        fixture: Path, snap: dict[str, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(fixture / snap["path"])
    export_checkpoint(open_checkpoint(path, partial=True), str(tmp_path / "whole"))
    checkpoint = Engine().open_checkpoint(path, count=False, partial=True)
    assert not getattr(checkpoint, "keyed_decoded", True)  # read as exported, not at open
    runs = cut_in_small_runs(checkpoint, monkeypatch)  # a few runs per handle
    export_checkpoint(checkpoint, str(tmp_path / "pieces"))
    whole, pieces = _tables(tmp_path / "whole"), _tables(tmp_path / "pieces")
    assert whole.keys() == pieces.keys()
    for name, (rows, table) in whole.items():
        assert pieces[name][0] == rows, name
        assert pieces[name][1].equals(table), name
    if sum(rows for rows, _ in whole.values()):  # states with entries were cut in runs
        assert max(runs) > 1, runs



def test_a_snapshot_far_bigger_than_the_memory_limit_is_exported_whole(
        big_savepoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "cli.main", "--quiet", "export",
                           str(big_savepoint), "--out", str(out)], cwd=REPO_ROOT,
                          preexec_fn=limited, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out / "blobs" / "blob.parquet", columns=["key", "value"])
    assert table.num_rows == KEYS
    values = dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                      strict=True))
    assert values == {f"key-{i}": value(i) for i in range(KEYS)}
    # the limit is far below the decoded state: decoding it whole under it fails
    whole = subprocess.run([sys.executable, "-c", "from formats.open import open_checkpoint; "
                            f"open_checkpoint({str(big_savepoint)!r})"], cwd=REPO_ROOT,
                           preexec_fn=limited, capture_output=True, text=True, timeout=300,
                           check=False)
    assert whole.returncode != 0 and "MemoryError" in whole.stderr, whole.stderr[-2000:]


def test_memory_running_out_is_one_clear_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """What a limit too small for one run gives: the error line, exit 3, no traceback."""
    import pyarrow as pa

    import formats.flink.read.tables as tables

    def out_of_memory(*_: Any, **__: Any) -> Any:
        raise pa.ArrowMemoryError("realloc of size 2097152 failed")

    monkeypatch.setattr(tables, "arrow_table", out_of_memory)
    fixture, snap = snapshots("heap")[0]
    code, out, err = run("export", str(fixture / snap["path"]), "--out", str(tmp_path / "out"))
    assert code == 3, err
    assert "Error: out of memory (realloc of size 2097152 failed)" in err
    assert "Traceback" not in err + out
    assert not (tmp_path / "out").exists()


def _small_runs(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    monkeypatch.setattr(runs_module, "CHUNK_BYTES", 512)
    monkeypatch.setenv("STATECTL_WORKERS", str(workers))


@pytest.mark.parametrize("change", ["none", "unsupported", "damaged"])
def test_worker_processes_export_what_one_process_does(
        change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs decoded by two forked workers (:mod:`formats.ops.parallel_reads`): the same files,
    the same report of what could not be decoded, the same exit code on damage."""
    from test_flink_undecodable import (
        ADDRESS,
        BAD_FLAGS,
        DAY_SNAPSHOT,
        SNAPSHOTS,
        UNKNOWN_SNAPSHOT,
        _copy,
        _patch,
    )

    name, source = next((n, s) for n, s in SNAPSHOTS if ":canonical-savepoint " in n)
    snapshot = _copy(source, tmp_path)
    if change == "unsupported":
        assert _patch(snapshot, lambda b: b.replace(DAY_SNAPSHOT, UNKNOWN_SNAPSHOT)) >= 1
    elif change == "damaged":
        assert _patch(snapshot, lambda b: b.replace(
            ADDRESS, bytes([BAD_FLAGS]) + ADDRESS[1:], 1) if ADDRESS in b else None) >= 1
    import formats.ops.parallel_reads as parallel_reads

    forked: list[int] = []
    real_read = parallel_reads.read_units

    def counting(checkpoint: Any, units: Any, workers: int) -> Any:
        forked.append(workers)
        return real_read(checkpoint, units, workers)

    monkeypatch.setattr(export_module, "read_units", counting)
    outcomes = []
    for workers in (1, 2):
        _small_runs(monkeypatch, workers)
        out = tmp_path / f"out-{workers}"
        code, _, err = run("--partial", "export", str(snapshot), "--out", str(out))
        outcomes.append((code, [ln for ln in err.splitlines() if "not decoded" in ln],
                         {k: (r, t.to_pylist()) for k, (r, t) in _tables(out).items()}))
        strict = run("export", str(snapshot), "--out", str(tmp_path / f"strict-{workers}"))
        outcomes.append((strict[0], strict[2].splitlines()[-1:], None))
    assert max(forked) == 2, forked  # the workers did read
    assert outcomes[:2] == outcomes[2:], name
    assert outcomes[1][0] == (3 if change == "damaged" else 0), outcomes[1]
    assert bool(outcomes[0][1]) == (change != "none"), outcomes[0][1]
