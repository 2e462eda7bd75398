"""diff reads two snapshots key group by key group, in bounded memory (issue 45, item 1).

Two sides of one max parallelism and key type have every key in the same key group:
``diff`` reads them together a run of key groups at a time (``keyed_entries``; a Flink
snapshot opened without decoding decodes a run, then lets it go) and holds only the
differences it lists. Checked here:

* on random pairs of keyed states (statectl checkpoints at parallelisms 1-3), the report is the
  one a comparison of the two sides read whole into maps gives (written here): the listed
  differences in the same order, whatever the limit, and every count;
* on the Flink fixture snapshots (heap, RocksDB, types, versions), a snapshot read in runs of
  a few hundred bytes is equal to itself read whole, every entry compared;
* a snapshot whose decoded state is far bigger than the memory a process may take
  (``RLIMIT_AS``) is compared with itself by ``statectl diff`` under that limit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from big_snapshot import KEYS, run_limited
from flink_fixtures import expected, fixture_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_diff_pairs import keyed_checkpoint

import formats.flink.checkpoint as flink_checkpoint
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.diff import canonical, diff_checkpoints

KEYS_DRAWN = [f"k{i}" for i in range(40)]
values = st.dictionaries(st.sampled_from(KEYS_DRAWN),
                         st.one_of(st.floats(allow_nan=True, width=64), st.sampled_from([1.5])),
                         min_size=1, max_size=25)


def _whole(checkpoint: Checkpoint) -> dict[Any, tuple[Any, Any, Any]]:
    """Every entry of the ``amount`` state, read whole into one map."""
    return {(canonical(key), canonical(ns)): (key, ns, stored)
            for _, key, ns, stored in checkpoint.keyed_entries("op", "amount")}


def _expected(a: Checkpoint, b: Checkpoint) -> list[tuple[str, Any, Any, Any]]:
    """The differences of the two sides read whole, in the order of their keys' ``repr``."""
    left, right = _whole(a), _whole(b)
    out = []
    for composite in sorted(left.keys() | right.keys(), key=repr):
        la, rb = left.get(composite), right.get(composite)
        if rb is None:
            out.append(("removed", la[0], la[2], None))  # type: ignore[index]
        elif la is None:
            out.append(("added", rb[0], None, rb[2]))
        elif canonical(la[2]) != canonical(rb[2]):
            out.append(("changed", la[0], la[2], rb[2]))
    return out


def _same(x: Any, y: Any) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float)
                      and math.isnan(x) and math.isnan(y))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values, values, st.integers(1, 3), st.integers(1, 3), st.one_of(st.none(),
                                                                      st.integers(0, 30)))
def test_read_key_group_by_key_group_the_report_is_the_whole_maps_one(
        tmp_path_factory: pytest.TempPathFactory, left: dict[str, float],
        right: dict[str, float], p_left: int, p_right: int, limit: int | None) -> None:
    base = tmp_path_factory.mktemp("pair")
    a = keyed_checkpoint(base / "a", {"amount": {(k, None): v for k, v in left.items()}},
                         p_left)
    b = keyed_checkpoint(base / "b", {"amount": {(k, None): v for k, v in right.items()}},
                         p_right)
    report = diff_checkpoints(a, b, limit=limit)
    want = _expected(a, b)
    got = [(d.change, d.key, d.left, d.right) for d in report.differences]
    shown = want if limit is None else want[:limit]
    assert len(got) == len(shown)
    assert all(g[:2] == w[:2] and _same(g[2], w[2]) and _same(g[3], w[3])
               for g, w in zip(got, shown, strict=True)), (got, shown)
    assert report.found == len(want)
    assert dict(report.counts) == {c: sum(w[0] == c for w in want)
                                   for c in {w[0] for w in want}}
    assert report.compared == len(left.keys() | right.keys())


ROOTS = ("heap", "rocksdb", "types", "versions")
#: every set's snapshots at its lowest parallelism (only what each set's expected.json says)
CASES = [(s, snap) for root in ROOTS for s in fixture_sets(root)
         for snap in expected(s)["snapshots"]
         if snap["parallelism"] == min(x["parallelism"] for x in expected(s)["snapshots"])]


@pytest.mark.parametrize("root,snap", CASES,
                         ids=[f"{s.name}-{snap['path'].replace('/', '-')}" for s, snap in CASES])
def test_a_flink_snapshot_read_in_small_runs_equals_itself_read_whole(
        root: Path, snap: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(root / snap["path"])
    runs = []
    decoded_runs = flink_checkpoint.FlinkCheckpoint.decoded_runs

    def counted(self: Any, relative: str, first: int, last: int
                ) -> Iterator[list[tuple[int, Any, Any, Any]]]:
        n = 0
        for run in decoded_runs(self, relative, first, last):
            n += 1
            yield run
        runs.append(n)

    monkeypatch.setattr(flink_checkpoint.FlinkCheckpoint, "decoded_runs", counted)
    in_runs = open_checkpoint(path, partial=True, decode=False)
    in_runs.run_bytes = 200  # type: ignore[attr-defined]
    whole = open_checkpoint(path, partial=True)
    report = diff_checkpoints(in_runs, whole, limit=None)
    assert report.equal, report.differences[:5]
    keyed = sum(1 for op in whole.metadata.operators for state in op.states
                if state.scope == "keyed" for _ in whole.keyed_entries(op.uid, state.name))
    assert report.compared >= keyed  # every entry compared (operator state besides)
    if keyed:
        assert max(runs) > 1, runs  # and read in runs


def test_a_snapshot_far_bigger_than_the_memory_limit_is_compared(big_savepoint: Path) -> None:
    """Both sides read whole took about 2 GB of address space; in runs, far less."""
    done = run_limited("--output", "json", "diff", str(big_savepoint), str(big_savepoint))
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["equal"] and report["compared"] == KEYS, report

