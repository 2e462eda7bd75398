"""Verify reads a snapshot piece by piece, in bounded memory (issue 45, item 1).

``verify`` opens a Flink snapshot without decoding its keyed state and checks each keyed
handle run of key groups by run (:func:`formats.ops.key_group_runs.keyed_runs`), as
``export`` reads it. Checked here:

* on the Flink fixture snapshots (heap, RocksDB, types, versions; see :data:`CASES`), the
  report read in runs of a third of a handle is the report read in the default runs (a
  fixture's handle is one), field for field
  (problems, warnings, counts, bytes, entries, exit code);
* on statectl checkpoints with a problem of each keyed kind (overlap, offsets, misplaced and
  duplicate keys, a duplicate whose second copy is misplaced into another run), read in runs
  of one key group, likewise;
* a snapshot whose decoded state is far bigger than the memory a process may take
  (``RLIMIT_AS``) is verified by ``statectl verify`` under that limit, with the right report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from big_snapshot import KEYS, VALUE_BYTES, limited
from cli_support import run
from flink_fixtures import expected, fixture_sets
from oracle import REPO_ROOT
from small_runs import cut_in_small_runs
from test_verify_kinds import (
    _copy,
    _first_keyed_file,
    _rewrite,
    key_duplicated,
    key_misplaced,
    offsets_swapped,
    stored_twice,
)

import formats.ops.key_group_runs as runs_module
from formats.open import open_checkpoint

ROOTS = ("heap", "rocksdb", "types", "versions")
#: As tests/test_export_stream.py chooses: every set's snapshots at its lowest parallelism, all
#: snapshots of the first set of each root (only what each set's expected.json says).
CASES = [(s, snap) for root in ROOTS for i, s in enumerate(fixture_sets(root))
         for snap in expected(s)["snapshots"]
         if i == 0 or snap["parallelism"] == min(
             x["parallelism"] for x in expected(s)["snapshots"])]


def _verify(path: str) -> tuple[int, Any]:
    code, out, err = run("--output", "json", "verify", path)
    assert code in (0, 1), err
    return code, json.loads(out)


def _one_key_group_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_module, "CHUNK_BYTES", 1)
    monkeypatch.setattr(runs_module, "CHUNK_ROWS", 1)


@pytest.mark.parametrize(("fixture", "snap"), CASES,
                         ids=[f"{s.name}:{snap['path']}" for s, snap in CASES])
def test_read_in_runs_the_report_is_the_default_ones(
        fixture: Path, snap: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(fixture / snap["path"])
    default = _verify(path)
    checkpoint = open_checkpoint(path, partial=True, strict=False, decode=False)
    runs = cut_in_small_runs(checkpoint, monkeypatch)  # a few runs per handle
    assert _verify(path) == default
    if default[1]["entries"]:  # states with entries were read in runs
        assert max(runs) > 1, runs


def _misplaced_duplicate(root: Path) -> None:
    """The first row's key becomes the key of a row in another key group (both listed)."""
    relative, rows = _first_keyed_file(root)
    other = next(r for r in rows if r[0] != rows[0][0])

    def copy_key(columns: dict[str, list[Any]]) -> None:
        columns["key"][0] = columns["key"][other[1]]
    _rewrite(root, relative, copy_key)


@pytest.mark.parametrize(("damage", "kinds"), [
    (_misplaced_duplicate, {"key-placement", "duplicate-key"}),
    (key_misplaced, {"key-placement"}), (key_duplicated, {"duplicate-key"}),
    (stored_twice, {"overlap", "duplicate-key"}), (offsets_swapped, {"offsets"})],
    ids=["misplaced-duplicate", "misplaced", "duplicate", "overlap", "offsets"])
def test_keyed_problems_read_in_runs_are_those_read_whole(
        damage: Any, kinds: set[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy(tmp_path)
    damage(root)
    code, whole = _verify(str(root))
    assert code == 1 and set(whole["counts"]) == kinds, whole["counts"]
    _one_key_group_runs(monkeypatch)
    assert _verify(str(root)) == (code, whole)



def test_a_snapshot_far_bigger_than_the_memory_limit_is_verified(big_savepoint: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "cli.main", "--quiet", "--output", "json",
                           "verify", str(big_savepoint)], cwd=REPO_ROOT, preexec_fn=limited,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["clean"] and not report["problems"] and not report["warnings"], report
    assert report["entries"] == KEYS
    assert report["bytes"] > KEYS * VALUE_BYTES  # every value's bytes counted
