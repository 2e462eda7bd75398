"""``statectl history``: one key across checkpoints (issue 33).

Compared with the build's own record of each checkpoint: the input positions it stored (its
``source-positions`` operator state) say how many records it had processed, and the key's count
and sum over those first records are what the history must show for it. On the Flink fixtures:
every snapshot of a job holds its expected state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run, run_json
from flink_fixtures import expected, first_string_key, fixture_sets
from test_json_contract import check

ROWS = 3000
KEYS = ("u1", "u2", "u3", "u4", "u5", "u6", "u7")


def _events(path: Path) -> list[dict[str, Any]]:
    rows = [{"user": KEYS[(i * i) % len(KEYS)] if i % 11 else "u1", "amount": i % 97}
            for i in range(ROWS)]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=250)
    return rows


def test_history_shows_each_checkpoints_values_as_the_build_recorded_them(
        tmp_path: Path) -> None:
    rows = _events(tmp_path / "events.parquet")
    state = tmp_path / "state"
    built = run_json("build", str(tmp_path / "events.parquet"), "--key", "user", "--agg",
                     "count", "--agg", "sum:amount", "--parallelism", "1",
                     "--checkpoint-dir", str(state), "--checkpoint-every", "400",
                     "--keep", "5")
    assert len(built["checkpoints"]) > 5  # --keep 5 released the older ones
    assert not {"u4", "u6"} & {r["user"] for r in rows}  # i*i mod 7: never 3 or 5
    for key in ("u1", "u3", "u5", "u4"):
        history = run_json("history", str(state), "--key", key)
        check(history, "history")
        snapshots = history["snapshots"]
        kept = [s["checkpoint_id"] for s in run_json("snapshot", "list", str(state))[
            "snapshots"]]
        assert [s["checkpoint_id"] for s in snapshots] == kept and len(kept) == 5
        previous: dict[str, Any] = {}
        for snapshot in snapshots:
            positions = run_json("query", snapshot["location"],
                                 'SELECT value FROM build."source-positions"')["rows"]
            (processed,) = [row["value"][1] for row in positions]  # (file, rows) tuples
            seen = [r for r in rows[:processed] if r["user"] == key]
            values = {v["state"]: v for v in snapshot["values"]}
            if not seen:  # not yet processed: no state
                assert values == {}, snapshot
                continue
            assert values["count"]["value"] == len(seen), (snapshot, processed)
            assert values["sum_amount"]["value"] == sum(r["amount"] for r in seen)
            for name, value in values.items():
                change = ("added" if name not in previous else
                          "same" if previous[name] == value["value"] else "changed")
                assert value["change"] == change
                previous[name] = value["value"]
        assert key == "u4" or any(v["change"] == "changed" for s in snapshots
                                  for v in s["values"])
    code, out, err = run("history", str(state), "--key", "u1")
    assert code == 0 and "5 snapshots" in out, err


def test_history_marks_removed_values(tmp_path: Path) -> None:
    """A key whose state a later snapshot no longer holds (here: a TTL rescale dropped it)."""
    sample = Path(__file__).resolve().parent.parent / "sample_checkpoints" / "v1" / \
        "keyed-all-kinds-p2"
    later = tmp_path / "chk-0000002"
    run_json("rescale", str(sample), "-p", "2", "--out", str(later), "--drop-expired",
             "--now", "2023-11-14T23:05:00")  # its checkpoint id stays 1: written later
    history = run_json("history", str(sample), str(tmp_path), "--key", "user-01",
                       "--state", "recent_events")
    check(history, "history")
    first, second = history["snapshots"]
    assert [v["change"] for v in first["values"]] == ["added"]
    (value,) = second["values"]
    assert value["change"] in ("changed", "removed", "same")
    looked_up = run_json("inspect", str(later), "--key", "user-01", "--state",
                         "recent_events")
    entries = looked_up["lookup"]["states"][0]["entries"]
    if not entries:
        assert value["change"] == "removed" and value["value"] == first["values"][0]["value"]
    else:
        assert value["value"] == entries[0]["value"]


def _keyed_by_text_or_numbers(fixture: Path) -> list[tuple[str, str, Any]]:
    """``(operator, state, a key)`` of the keyed states whose expected entries name keys."""
    return [(name, state, content["entries"][3][0])
            for name, op in expected(fixture)["operators"].items()
            for state, content in op.get("keyed_states", {}).items()
            if isinstance(content, dict) and len(content.get("entries", ())) > 3
            and isinstance(content["entries"][3][0], str | int)]


@pytest.mark.parametrize("fixture", [f for f in fixture_sets("heap")
                                     if _keyed_by_text_or_numbers(f)], ids=lambda p: p.name)
def test_history_of_a_flink_job(fixture: Path) -> None:
    """A Flink job's checkpoints and savepoints (of both parallelisms): each holds the job's
    final state, so the key is added once and the same in every later snapshot."""
    document = expected(fixture)
    op, state, key = _keyed_by_text_or_numbers(fixture)[0]
    history = run_json("history", str(fixture / "checkpoints"), str(fixture / "savepoints"),
                       "--key", str(key), "--state", state)
    check(history, "history")
    snapshots = history["snapshots"]
    assert len(snapshots) == len(document["snapshots"])
    assert [s["checkpoint_id"] for s in snapshots] == sorted(s["checkpoint_id"]
                                                             for s in snapshots)
    changes = [v["change"] for s in snapshots for v in s["values"]
               if v["operator"]["uid"] in (op, None) and v["state"] == state]
    assert changes[0] == "added" and set(changes[1:]) <= {"same"}


def test_a_directory_without_snapshots_is_one_line(tmp_path: Path) -> None:
    code, _, err = run("history", str(tmp_path), "--key", "k")
    assert code == 3 and err.count("\n") == 1 and "no complete checkpoint" in err, err


def _has_string_key(fixture: Path) -> bool:
    try:
        first_string_key(fixture)
    except StopIteration:  # its expected.json lists no entry with a string key
        return False
    return True


def test_shared_sst_files_are_read_once(tmp_path: Path) -> None:
    """Two RocksDB incremental checkpoints of one job naming the same shared SST files (a copy
    of a fixture checkpoint beside it): history reads each shared file once."""
    import shutil

    import pyarrow.fs as pafs

    from formats.open import open_checkpoint
    from formats.ops.history import find_snapshots, key_history
    from formats.storage.io_stats import CountingHandler

    found = next(((fixture, Path(p)) for fixture in fixture_sets("rocksdb")
                  if _has_string_key(fixture)
                  for p in (fixture / s["path"] for s in expected(fixture)["snapshots"])
                  if p.name.startswith("chk-") and (p.parent / "shared").is_dir()
                  and any((p.parent / "shared").iterdir())), None)
    if found is None:
        pytest.fail("no RocksDB fixture checkpoint with shared files and a string key")
    fixture, checkpoint = found
    job = tmp_path / "job"
    shutil.copytree(checkpoint.parent, job)
    number = int(checkpoint.name[4:])
    shutil.copytree(job / checkpoint.name, job / f"chk-{number + 1}")
    shared = {str(p.resolve()): p.stat().st_size for p in (job / "shared").iterdir()}
    handler = CountingHandler()
    fs = pafs.PyFileSystem(handler)
    locations = find_snapshots([str(job)])
    assert len(locations) == 2
    op, state, key = first_string_key(fixture)
    history = key_history(locations, key,
                          lambda location: open_checkpoint(location, filesystem=fs),
                          states=[state])
    assert [v.change for s in history.snapshots for v in s.values if v.state == state] == [
        "added", "same"]
    read = {str(Path(p).resolve()): n for p, n in handler.counts.items()}
    sst = {p: n for p, n in read.items() if p in shared}
    assert sst and all(n == shared[p] for p, n in sst.items()), (sst, shared)
    # without the cache every shared file is read twice
    handler.counts.clear()
    for location in locations:
        open_checkpoint(location, filesystem=fs)
    again = {str(Path(p).resolve()): n for p, n in handler.counts.items()}
    assert all(again[p] == 2 * shared[p] for p in sst), (again, shared)
