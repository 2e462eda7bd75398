"""Every snapshot of a job in one SQL session (issue 44, items 1 and 4).

A directory holding snapshots -- a statectl state directory with 20 retained checkpoints and a
savepoint, a Flink job's RocksDB incremental checkpoint directory, a folder of Flink savepoints
-- is discovered: each complete snapshot a database named by its label (``chk_<id>``,
``savepoint_<id>``), the newest the default, the ``snapshots`` table listing them all (read
from metadata only: the bytes read are counted), and ``all_snapshots."<op>"."<state>"`` holding
a state's rows of every snapshot, so that one SQL follows a key across all of them -- equal to
``statectl history``. ``connect`` gives a notebook the same tables in a DuckDB connection.
``history`` and ``browse`` take the same directories (browse: the newest); on object storage the
listing fetches the metadata files alone (the server's byte count), several at once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import expected, first_string_key, require_fixtures
from s3_server import S3Place

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
    rocksdb = _holding_count("rocksdb")
    checkpoint = next(rocksdb / s["path"] for s in expected(rocksdb)["snapshots"]
                      if s["kind"] == "checkpoint")
    heap = _holding_count("heap")
    savepoints = root / "savepoints"
    for snap in [s for s in expected(heap)["snapshots"] if s["kind"] == "savepoint"][:2]:
        source = heap / snap["path"]
        shutil.copytree(source, savepoints / f"{source.parent.name}-{source.name}")
    listed = run_json("snapshot", "list", str(state))["snapshots"]
    return {"state": str(state), "flink_job": str(checkpoint.parent),
            "savepoints": str(savepoints), "statectl": listed}


def _holding_count(root: str) -> Path:
    """A fixture set of ``root`` whose expected.json names a keyed state ``count`` (history
    --state count reads it in every snapshot; the build's state of that name)."""
    def names_count(node: Any) -> bool:
        if isinstance(node, dict):
            return "count" in node.get("keyed_states", {}) or any(
                names_count(v) for v in node.values())
        return False
    for fixture_set in require_fixtures(root):
        if names_count(expected(fixture_set)["operators"]):
            return fixture_set
    pytest.fail(f"no {root} fixture set with a keyed state named count")


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


# --- history and browse take the same directories; listing reads metadata, concurrently ------

def test_history_reads_every_snapshot_query_finds(job: dict[str, Any]) -> None:
    """history over the three directories: every snapshot query lists, in id order (the two
    savepoints' folders have names of their own: history found none of them before)."""
    found = databases(_locations(job))
    history = run_json("history", *_locations(job), "--key", KEY, "--state", "count")
    listed = [s["location"] for s in history["snapshots"]]
    assert sorted(listed) == sorted(cp.location for cp in found.snapshots.values())
    ids = [s["checkpoint_id"] for s in history["snapshots"]]
    assert ids == sorted(ids) and len(listed) == 24


def test_several_snapshots_given_are_each_a_database(job: dict[str, Any]) -> None:
    first, last = job["statectl"][0]["location"], job["statectl"][-1]["location"]
    document = run_json("query", first, last, "SELECT label, location FROM snapshots "
                        "ORDER BY checkpoint_id")
    assert [r["location"] for r in document["rows"]] == [first, last]


def test_browse_a_directory_opens_its_newest(job: dict[str, Any], tmp_path: Path) -> None:
    from test_browse import _screen_text

    newest = job["statectl"][-1]
    screen = tmp_path / "screen.svg"
    code, _, err = run("browse", job["state"], "--svg", str(screen))
    assert code == 0, err
    label = f"{'chk' if newest['kind'] == 'checkpoint' else 'savepoint'}_" \
            f"{newest['checkpoint_id']}"
    assert f"statectl: {label} ({newest['location']}), the newest of 21 snapshots in " \
           f"{job['state']}" in err, err
    assert Path(newest["location"]).name in _screen_text(screen.read_text(encoding="utf-8"))
    # against the same directory (spelled otherwise): the snapshot before the newest
    code, _, err = run("browse", job["state"], "--against", job["state"] + "/", "--svg",
                       str(screen))
    before = job["statectl"][-2]
    assert code == 0 and f"chk-{before['checkpoint_id']:07d}), the newest before the one " \
                         "browsed of 21 snapshots" in err, err
    empty = tmp_path / "nothing"
    empty.mkdir()
    code, _, err = run("browse", str(empty), "--svg", str(screen))
    assert code == 3 and "no complete snapshot" in err, err
    code, _, err = run("browse", str(tmp_path / "missing"), "--svg", str(screen))
    assert code == 3 and "does not exist" in err, err


def test_listing_reads_metadata_alone(job: dict[str, Any]) -> None:
    """Every snapshot of the three directories opened once: what is read is each metadata file
    whole, of a Flink savepoint also its keyed streams' headers (a few KiB), nothing else."""
    from formats.ops.catalog import discover

    handler = CountingHandler()
    filesystem = pafs.PyFileSystem(handler)
    found = discover(_locations(job), lambda location: open_checkpoint(
        location, filesystem=filesystem, decode=False, partial=True))
    assert len(found) == 24 and len(handler.counts) >= 24
    sizes = {p: Path(p).stat().st_size for p in handler.counts}
    metadata = {p for p in sizes if Path(p).name in ("_metadata.json", "_metadata")}
    assert len(metadata) == 24 and all(handler.counts[p] == sizes[p] for p in metadata)
    headers = {p: n for p, n in handler.counts.items() if p not in metadata}
    assert all(n <= 4096 and n < sizes[p] / 4 for p, n in headers.items()), headers
    assert all(p.startswith(job["savepoints"]) for p in headers), headers  # Flink's only


def _several_at_once(locations: list[str]) -> tuple[list[str], int, int]:
    """discover's labels, and how many snapshots its opener had open at most, on how many
    threads (each open held a while, ending in an order of its own)."""
    import threading
    import time

    from formats.ops.catalog import discover

    lock, flight, most, threads = threading.Lock(), [0], [0], set()

    def opener(location: str) -> Any:
        with lock:
            flight[0] += 1
            most[0] = max(most[0], flight[0])
            threads.add(threading.get_ident())
        time.sleep(0.01 * (len(location) % 3))
        try:
            return open_checkpoint(location, decode=False, partial=True)
        finally:
            with lock:
                flight[0] -= 1

    return [f.label for f in discover(locations, opener)], most[0], len(threads)


def test_query_history_and_browse_over_object_storage(job: dict[str, Any], s3: S3Place,
                                                      tmp_path: Path) -> None:
    """A bucket holding the state directory and the Flink job: query lists it fetching the
    metadata files alone (the server's own byte count), history and browse take it too."""
    from s3_support import upload

    fs = s3.fs()
    upload(fs, Path(job["state"]), s3.path("jobs/state"))
    upload(fs, Path(job["flink_job"]), s3.path("jobs/flink"))
    files = [i for i in fs.get_file_info(pafs.FileSelector(s3.path("jobs"), recursive=True))
             if i.type == pafs.FileType.File]
    metadata = sum(i.size for i in files if i.base_name in ("_metadata.json", "_metadata"))
    before = s3.server.bucket_metrics(s3.bucket).get("bytes_sent", 0.0)
    listed = run_json("query", s3.uri("jobs"), "SELECT label, location FROM snapshots "
                      "ORDER BY checkpoint_id, label")
    sent = s3.server.bucket_metrics(s3.bucket).get("bytes_sent", 0.0) - before
    assert listed["row_count"] == 22 and sent == metadata, (sent, metadata)
    # the metadata read several at once (at most READERS), the order as one by one
    from formats.ops.catalog import discover
    from formats.storage.concurrent import READERS

    labels, most, threads = _several_at_once([s3.uri("jobs")])
    assert 1 < most <= READERS and threads > 1
    assert labels == [f.label for f in discover([s3.uri("jobs")], lambda location: (
        open_checkpoint(location, decode=False, partial=True)))]
    assert labels == [r["label"] for r in listed["rows"]]
    history = run_json("history", s3.uri("jobs"), "--key", KEY, "--state", "count")
    assert sorted(s["location"] for s in history["snapshots"]) == sorted(
        r["location"] for r in listed["rows"])
    code, _, err = run("browse", s3.uri("jobs/state"), "--svg", str(tmp_path / "s.svg"))
    assert code == 0 and "the newest of 21 snapshots" in err, err


def test_shared_sst_files_are_read_once_across_checkpoints(tmp_path: Path) -> None:
    """Two RocksDB incremental checkpoints of one job naming the same shared SST files (a copy
    of a fixture checkpoint beside it): a key across both reads each shared file once, as
    history does (each snapshot decodes only the key's key group)."""
    fixture = require_fixtures("rocksdb")[0]
    checkpoint = next(Path(p) for p in (fixture / s["path"] for s in expected(fixture)[
        "snapshots"]) if p.name.startswith("chk-") and (p.parent / "shared").is_dir())
    job = tmp_path / "job"
    shutil.copytree(checkpoint.parent, job)
    shutil.copytree(job / checkpoint.name, job / f"chk-{int(checkpoint.name[4:]) + 1}")
    shared = {str(p.resolve()): p.stat().st_size for p in (job / "shared").iterdir()}
    op, state, key = first_string_key(fixture)
    handler = CountingHandler()
    filesystem = pafs.PyFileSystem(handler)
    found = databases([str(job)], opener=lambda location: open_checkpoint(
        location, filesystem=filesystem, decode=False, partial=True))
    result = run_query(found.snapshots, f'SELECT snapshot FROM all_snapshots."{op}"."{state}" '
                       f"WHERE key = '{key}'", default=found.default, extra=found.extra)
    assert result.table.num_rows == 2
    read = {str(Path(p).resolve()): n for p, n in handler.counts.items()}
    sst = {p: n for p, n in read.items() if p in shared}
    assert sst and all(n == shared[p] for p, n in sst.items()), (sst, shared)
