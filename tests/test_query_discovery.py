"""Every snapshot of a job in one SQL session (issue 44, items 1 and 4).

A directory holding snapshots -- a statectl state directory with 20 retained checkpoints and a
savepoint, a Flink job's RocksDB incremental checkpoint directory, a folder of Flink savepoints
-- is discovered: each complete snapshot a database named by its label (``chk_<id>``,
``savepoint_<id>``), the newest the default, the ``snapshots`` table listing them all (read
from metadata only: the bytes read are counted), and ``all_snapshots."<op>"."<state>"`` holding
a state's rows of every snapshot, so that one SQL follows a key across all of them -- equal to
``statectl history``. ``connect`` gives a notebook the same tables in a DuckDB connection.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import expected, require_fixtures

from formats.open import open_checkpoint
from formats.ops.catalog import databases
from formats.ops.query import connect, run_query
from formats.storage.io_stats import CountingHandler

EVENTS = Path(__file__).resolve().parent.parent / "docs" / "examples" / "events.csv"
KEY = "user-001"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A statectl state directory (20 checkpoints and a savepoint), a Flink RocksDB job's
    checkpoint directory and a folder with two Flink savepoints."""
    root = tmp_path_factory.mktemp("job")
    state = root / "state"
    code, _, err = run("build", str(EVENTS), "--key", "user", "--agg", "count", "--agg",
                       "sum:amount", "--checkpoint-dir", str(state), "--checkpoint-every", "100",
                       "--keep", "20")
    assert code == 0, err
    code, _, err = run("snapshot", "take", str(state))
    assert code == 0, err
    rocksdb = require_fixtures("rocksdb")[0]
    checkpoint = next(rocksdb / s["path"] for s in expected(rocksdb)["snapshots"]
                      if s["kind"] == "checkpoint")
    heap = require_fixtures()[0]
    savepoints = root / "savepoints"
    for snap in [s for s in expected(heap)["snapshots"] if s["kind"] == "savepoint"][:2]:
        source = heap / snap["path"]
        shutil.copytree(source, savepoints / f"{source.parent.name}-{source.name}")
    listed = run_json("snapshot", "list", str(state))["snapshots"]
    return {"state": str(state), "flink_job": str(checkpoint.parent),
            "savepoints": str(savepoints), "statectl": listed}


def _locations(job: dict[str, Any]) -> list[str]:
    return [job["state"], job["flink_job"], job["savepoints"]]


def test_every_snapshot_in_the_directories_is_a_database(job: dict[str, Any]) -> None:
    found = databases(_locations(job))
    rows = run_query(found.snapshots, "SELECT label, kind, checkpoint_id, location, bytes, "
                     "flink_release FROM snapshots ORDER BY checkpoint_id, label",
                     default=found.default, extra=found.extra).table.to_pylist()
    statectl = [s for s in job["statectl"]]
    assert len(statectl) == 21 and len(rows) == 21 + 1 + 2
    assert {r["location"] for r in rows} >= {s["location"] for s in statectl}
    assert {r["label"] for r in rows} == set(found.snapshots)
    for row in rows:
        assert row["label"] == f"{'chk' if row['kind'] == 'checkpoint' else 'savepoint'}_" \
                               f"{row['checkpoint_id']}" or row["label"].rsplit("_", 1)[1].isdigit()
        assert row["bytes"] > 0
        flink = not row["location"].startswith(job["state"])
        assert (row["flink_release"] is not None) == flink, row
    newest = max(rows, key=lambda r: r["checkpoint_id"])
    assert found.default == newest["label"]


def test_one_sql_follows_a_key_across_every_snapshot_as_history_does(job: dict[str, Any]
                                                                      ) -> None:
    found = databases([job["state"]])
    result = run_query(found.snapshots, "SELECT snapshot, value FROM all_snapshots.build.count "
                       f"WHERE key = '{KEY}' ORDER BY snapshot", default=found.default,
                       extra=found.extra)
    by_sql = {r["snapshot"]: r["value"] for r in result.table.to_pylist()}
    history = run_json("history", job["state"], "--key", KEY, "--state", "count", "--all")
    locations = {cp.location: label for label, cp in found.snapshots.items()}
    by_history = {locations[s["location"]]: v["value"] for s in history["snapshots"]
                  for v in s["values"] if v["state"] == "count" and v["value"] is not None}
    assert by_sql == by_history and len(by_sql) == 21
    # only the key's key group was read, in every snapshot
    assert {r[0] for r in result.read} == set(found.snapshots)
    assert all(r[3] is not None and len(r[3]) == 1 for r in result.read)


def test_the_listing_reads_only_metadata(job: dict[str, Any]) -> None:
    handler = CountingHandler()
    filesystem = pafs.PyFileSystem(handler)

    def opener(location: str) -> Any:
        return open_checkpoint(location, filesystem=filesystem, decode=False, partial=True)

    found = databases([job["state"]], opener=opener)
    opened = dict(handler.counts)
    assert opened and all(Path(p).name == "_metadata.json" for p in opened), opened
    rows = run_query(found.snapshots, "SELECT count(*) AS n FROM snapshots",
                     default=found.default, extra=found.extra).table.to_pylist()
    assert rows == [{"n": 21}] and handler.counts == opened  # nothing more read


def test_connect_gives_a_notebook_the_same_tables(job: dict[str, Any]) -> None:
    found = databases([job["state"]])
    connection = connect(found.snapshots, default=found.default, extra=found.extra)
    try:
        count = connection.execute("SELECT count(*) FROM snapshots").fetchone()
        across = connection.execute(
            "SELECT count(DISTINCT snapshot) FROM all_snapshots.build.count").fetchone()
        value = connection.execute(f"SELECT value FROM build.count WHERE key = '{KEY}'"
                                   ).fetchone()
    finally:
        connection.close()
    assert count == (21,) and across == (21,)
    newest = run_query(found.snapshots, f"SELECT value FROM build.count WHERE key = '{KEY}'",
                       default=found.default).table.to_pylist()
    assert value == (newest[0]["value"],)
    assert json.dumps(value)  # plain Python values


def test_the_command_takes_directories(job: dict[str, Any]) -> None:
    document = run_json("query", *_locations(job), "SELECT label FROM snapshots ORDER BY label")
    assert document["row_count"] == 24
    newest = run_json("query", job["state"], "SELECT count(*) AS n FROM build.count")
    assert newest["rows"][0]["n"] > 0  # the default database: the newest snapshot
    code, _, err = run("query", str(Path(job["state"]).parent / "nothing-here"), "SELECT 1")
    assert code == 3, err
    empty = Path(job["state"]).parent / "empty"
    empty.mkdir()
    code, _, err = run("query", str(empty), "SELECT 1")
    assert code == 3 and "no complete snapshot" in err, err
    label = run_json("query", job["state"], "SELECT label FROM snapshots LIMIT 1")["rows"][0][
        "label"]
    code, _, err = run("query", job["state"], "--as", f"{label}={KEYED}", "SELECT 1")
    assert code == 2 and "labelled so" in err, err
