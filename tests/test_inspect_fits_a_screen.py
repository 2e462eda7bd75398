"""``inspect`` and ``rescale --plan`` of a real-sized job fit a screen; ``--all`` lists everything.

A 30-operator SQL job has a dozen operators with state and many without. The default summary
draws the operator tree with one line per stateful operator and per non-empty state, a keyed
operator's subtasks summed up on its line, and one line for the operators without state. Checked
on a generated 40-operator checkpoint shaped like a SQL job and on every Flink fixture snapshot.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import run
from flink_fixtures import require_fixtures, snapshot_ids, snapshots

from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import (
    assign_key_to_parallel_operator,
    compute_key_group_range_for_operator_index,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import list_state, map_state, value_state
from statecore.operator_backend import OperatorListStateDescriptor, OperatorStateBackend

SCREEN = 40
P, M = 4, 128
TIMERS = (list_state("_timer_state/processing_user-timers", "int64"),
          list_state("_timer_state/event_user-timers", "int64"))


def _keyed(uid: str, states: dict[str, object], keys: int) -> OperatorSnapshot:
    """A keyed operator: each descriptor filled for ``keys`` keys, the timers left empty."""
    backends = [HeapKeyedStateBackend("string", M, compute_key_group_range_for_operator_index(
        M, P, i)) for i in range(P)]
    for backend in backends:
        for descriptor in TIMERS:
            backend.get_list_state(descriptor)
    for k in range(keys):
        key = f"{uid}-key-{k}"
        backend = backends[assign_key_to_parallel_operator(key, M, P, "string")]
        backend.set_current_key(key)
        for descriptor, value in states.items():
            state = backend.get_state(descriptor)  # type: ignore[arg-type]
            if hasattr(state, "update"):
                state.update(value)
            else:
                state.put_all(value)
    return OperatorSnapshot(uid, uid, P, M, tuple(SubtaskSnapshot(i, keyed=b.snapshot())
                                                 for i, b in enumerate(backends)))


def sql_like_job(path: Path) -> int:
    """A checkpoint of 40 operators shaped like a SQL job; returns how many have state."""
    operators = []
    offsets = OperatorListStateDescriptor("SourceReaderState", "int64")
    for s in range(4):
        subtasks = []
        for i in range(P):
            backend = OperatorStateBackend()
            backend.get_list_state(offsets).add(1000 * s + i)
            subtasks.append(SubtaskSnapshot(i, operator=backend.snapshot()))
        operators.append(OperatorSnapshot(f"source-{s}", f"Source: table_{s}[{s}]", P, M,
                                          tuple(subtasks)))
    for a in range(8):
        operators.append(_keyed(f"agg-{a}", {value_state("accState", "int64"): 7}, 60))
    for j in range(4):
        operators.append(_keyed(f"join-{j}", {
            map_state("leftRecords", "string", "int64"): {"r": 1},
            map_state("rightRecords", "string", "int64"): {"r": 2}}, 40))
    for c in range(24):
        operators.append(OperatorSnapshot(f"calc-{c}", f"Calc[{100 + c}]", P, M,
                                          tuple(SubtaskSnapshot(i) for i in range(P))))
    write_checkpoint(str(path), 1, operators)
    return 16


def test_a_forty_operator_job_fits_a_screen(tmp_path: Path) -> None:
    stateful = sql_like_job(tmp_path / "c")
    code, out, err = run("inspect", str(tmp_path / "c"))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) <= SCREEN, out
    assert "24 operators without state" in out and "(--all lists them)" in out
    assert sum(1 for line in lines if "agg-" in line or "join-" in line
               or "source-" in line) == stateful
    code, everything, _ = run("inspect", "--all", str(tmp_path / "c"))
    assert code == 0
    for c in range(24):
        assert f"calc-{c}" in everything
    assert everything.count("_timer_state/event_user-timers") == 12  # every empty state
    assert len(everything.splitlines()) > 40 * P  # one table row per subtask


@pytest.mark.parametrize(("fixture", "snap"), snapshots("heap", "rocksdb"),
                         ids=snapshot_ids("heap", "rocksdb"))
def test_every_flink_snapshot_fits_a_screen(fixture: Path, snap: dict[str, object]) -> None:
    require_fixtures()
    code, out, err = run("inspect", str(fixture / str(snap["path"])))
    assert code == 0, err
    assert len(out.splitlines()) <= SCREEN, out


def test_a_forty_operator_rescale_plan_fits_a_screen(tmp_path: Path) -> None:
    """One row per operator with state, the stateless ones counted on one line (issue 32)."""
    stateful = sql_like_job(tmp_path / "c")
    code, out, err = run("rescale", str(tmp_path / "c"), "-p", "3", "--plan")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) <= SCREEN, out
    assert f"{stateful} operators with state" in out
    assert "24 operators without state" in out
    assert sum(1 for line in lines if "│ agg-" in line or "│ join-" in line
               or "│ source-" in line) == stateful
    code, everything, _ = run("rescale", str(tmp_path / "c"), "-p", "3", "--plan", "--all")
    assert code == 0
    assert all(f"calc-{c}: parallelism 4 -> 3" in everything for c in range(24))
    assert len(everything.splitlines()) > 40 * 3  # one table row per new subtask


def test_a_plan_of_many_stateful_operators_counts_the_rest(tmp_path: Path) -> None:
    operators = [_keyed(f"keyed-{i:02d}", {value_state("count", "int64"): i}, 3 + i)
                 for i in range(30)]
    write_checkpoint(str(tmp_path / "c"), 1, operators)
    code, out, err = run("rescale", str(tmp_path / "c"), "-p", "2", "--plan")
    assert code == 0, err
    assert len(out.splitlines()) <= SCREEN, out
    assert "30 operators with state" in out and "and 10 more operators with state" in out
    assert "keyed-29" in out and "keyed-00" not in out  # the largest shown first


@pytest.mark.parametrize(("fixture", "snap"), snapshots("heap", "rocksdb", "types"),
                         ids=snapshot_ids("heap", "rocksdb", "types"))
def test_every_flink_rescale_plan_fits_a_screen(fixture: Path, snap: dict[str, object]) -> None:
    require_fixtures()
    code, out, err = run("rescale", str(fixture / str(snap["path"])), "-p", "3", "--plan")
    assert code == 0, err
    assert len(out.splitlines()) <= SCREEN, out


def test_a_plan_fits_an_80_column_terminal(tmp_path: Path) -> None:
    """The one-table plan names every operator whole on an 80-column terminal."""
    from click.testing import CliRunner

    from cli.main import statectl

    sql_like_job(tmp_path / "c")
    result = CliRunner(env={"COLUMNS": "80"}).invoke(
        statectl, ["rescale", str(tmp_path / "c"), "-p", "3", "--plan"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), result.stdout
    assert len(lines) <= SCREEN
    for a in range(8):
        assert any(f"│ agg-{a} " in line for line in lines), result.stdout
