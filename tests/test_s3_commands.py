"""Every command on ``s3://`` against the real S3 server, mixed with the local disk both ways.

``build`` with checkpoints to S3 and ``--resume``; ``snapshot take/list/release/prune``;
``inspect`` (every view equal to the same checkpoint's on disk; the summary and the histogram
fetch only metadata and footers: the server's byte counts say so); ``verify``; ``diff``;
``export`` to S3 and to disk; ``rescale`` (metadata, compact, max-parallelism change) S3 to
S3, S3 to disk and disk to S3; a metadata-only rescale within S3 copies on the server; every
Flink fixture set uploaded to S3 (a RocksDB checkpoint with its job's ``shared/``) read by every
command as from disk; storage failures as one-line errors within bounded time.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import snapshots
from s3_server import S3Place, S3Server, free_ports
from s3_support import state_of, statectl, upload, write_events

from formats.model.json_contract import SCHEMA_VERSION
from formats.open import open_checkpoint
from formats.ops.build import build_state
from formats.statectl.writer import write_checkpoint
from formats.storage.filesystems import resolve_filesystem
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import list_state, value_state

AGGREGATIONS = ["--agg", "count", "--agg", "sum:amount", "--agg", "list:amount",
                "--agg", "last:page"]


def without(document: Any, *keys: str) -> Any:
    """``document`` without ``keys`` anywhere (where the same state was read from)."""
    if isinstance(document, dict):
        return {k: without(v, *keys) for k, v in document.items() if k not in keys}
    if isinstance(document, list):
        return [without(v, *keys) for v in document]
    return document


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("events")
    return write_events(root / "day1.parquet", 1), write_events(root / "day2.parquet", 2)


# --- build and snapshots ------------------------------------------------------------------------

def test_build_checkpoints_snapshots_and_resume_on_s3(
        s3: S3Place, inputs: tuple[Path, Path], tmp_path: Path) -> None:
    day1, day2 = inputs
    state = s3.uri("jobs/state")
    document = run_json("build", str(day1), "--key", "user", *AGGREGATIONS,
                        "--checkpoint-dir", state, "--checkpoint-every", "500", "--keep", "10",
                        "--parallelism", "2")
    assert document["checkpoints"] == [1, 2, 3, 4, 5, 6]
    assert document["location"] == s3.uri("jobs/state/chk-0000007")
    listed = run_json("snapshot", "list", state)["snapshots"]
    assert [(s["checkpoint_id"], s["kind"]) for s in listed] == [
        (i, "checkpoint") for i in range(1, 8)]
    assert listed[0]["location"] == s3.uri("jobs/state/chk-0000001")

    before = s3.server.bucket_metrics(s3.bucket)
    (savepoint,) = run_json("snapshot", "take", state, "--from", "3")["snapshots"]
    after = s3.server.bucket_metrics(s3.bucket)
    assert (savepoint["checkpoint_id"], savepoint["kind"]) == (8, "savepoint")
    uploaded = after["bytes_received"] - before["bytes_received"]
    metadata = s3.fs().get_file_info(s3.path("jobs/state/savepoint-0000008/_metadata.json"))
    assert uploaded < metadata.size + 2048  # the data was copied on the server
    code, _, err = run("snapshot", "release", state, "7")
    assert code == 3 and "latest" in err
    third = state_of(s3.uri("jobs/state/chk-0000003"))
    assert run_json("snapshot", "release", state, "3") == {
        "schema_version": SCHEMA_VERSION, "released": [3]}
    assert state_of(savepoint["location"]) == third
    reopened = open_checkpoint(savepoint["location"])
    for info in reopened.metadata.files:
        reopened.verify_checksum(info.path)  # its own copies: releasing 3 took nothing
    assert run_json("snapshot", "prune", state, "--keep", "2") == {
        "schema_version": SCHEMA_VERSION, "released": [1, 2, 4, 5], "kept": [], "leftovers": []}
    assert [s["checkpoint_id"]
            for s in run_json("snapshot", "list", state)["snapshots"]] == [6, 7, 8]

    resumed = run_json("build", str(day1), str(day2), "--key", "user", *AGGREGATIONS,
                       "--checkpoint-dir", state, "--parallelism", "2", "--resume", "7")
    assert resumed["restored_from"] == 7 and resumed["final_checkpoint"] == 9
    reference = build_state([str(day1), str(day2)], key="user",
                            aggregations=AGGREGATIONS[1::2],
                            checkpoint_dir=str(tmp_path / "reference"), parallelism=2)
    assert state_of(resumed["location"]) == state_of(reference.final_location)
    code, out, err = run("diff", resumed["location"], reference.final_location)
    assert code == 0, out + err
    # query and history read the state directory on S3 as they read it on disk
    history = run_json("history", state, "--key", "u1")
    assert [snap["checkpoint_id"] for snap in history["snapshots"]] == [6, 7, 8, 9]
    local = run_json("history", str(tmp_path / "reference"), "--key", "u1")
    assert [{**v, "change": None} for v in history["snapshots"][-1]["values"]] == [
        {**v, "change": None} for v in local["snapshots"][-1]["values"]]
    sql = "SELECT key, value FROM build.count WHERE key IN ('u1', 'u2') ORDER BY key"
    on_s3 = run_json("query", resumed["location"], sql)
    assert on_s3["rows"] == run_json("query", reference.final_location, sql)["rows"]
    assert on_s3["rows"] and on_s3["read"][0]["key_groups"] is not None


# --- inspect ------------------------------------------------------------------------------------

VIEWS = [[], ["--all"], ["--key-groups"], ["--key-groups", "--by", "entries"], ["--top", "3"],
         ["--now", "2023-11-15T00:00:00"], ["--key", "user-1"], ["--entries", "--limit", "4"],
         ["--top", "2", "--state", "recent_events"]]


def test_every_inspect_view_reads_from_s3_what_it_reads_from_disk(s3: S3Place) -> None:
    upload(s3.fs(), Path(KEYED), s3.path("keyed"))
    for view in VIEWS:
        remote = run_json("inspect", s3.uri("keyed"), *view)
        local = run_json("inspect", KEYED, *view)
        assert without(remote, "location") == without(local, "location"), view
        code, text, err = run("inspect", s3.uri("keyed"), *view)
        assert code == 0 and err == "" and text, view


VALUE = 2048


def big_checkpoint(location: str) -> None:
    """2000 keys with 2 KiB random values: data pages dominate, footers are small."""
    import os
    max_p, p = 32, 2
    ranges = [compute_key_group_range_for_operator_index(max_p, p, i) for i in range(p)]
    backends = [HeapKeyedStateBackend("string", max_p, r) for r in ranges]
    for i in range(2000):
        key = f"key-{i}"
        group = assign_to_key_group(key, max_p, "string")
        backend = next(b for b, r in zip(backends, ranges, strict=True) if group in r)
        backend.set_current_key(key)
        backend.get_value_state(value_state("blob", "bytes")).update(os.urandom(VALUE))
        backend.get_list_state(list_state("seen", "int64")).add(i)
    write_checkpoint(location, 1, [OperatorSnapshot(
        "op", "op", p, max_p, [SubtaskSnapshot(i, keyed=b.snapshot())
                               for i, b in enumerate(backends)])])


def fetched(s3: S3Place, action: Callable[[], object]) -> float:
    """Object bytes the server sent while ``action`` ran."""
    before = s3.server.bucket_metrics(s3.bucket).get("bytes_sent", 0.0)
    action()
    return s3.server.bucket_metrics(s3.bucket).get("bytes_sent", 0.0) - before


def test_inspect_fetches_only_metadata_and_footers(s3: S3Place) -> None:
    big_checkpoint(s3.uri("big"))
    fs = s3.fs()
    sizes = {info.path.rsplit("/", 1)[1] if info.path.endswith(".json") else info.path:
             info.size for info in fs.get_file_info(
                 pafs.FileSelector(s3.path("big"), recursive=True))
             if info.type == pafs.FileType.File}
    metadata = sizes.pop("_metadata.json")
    data = sum(sizes.values())
    assert data > 4_000_000
    summary = fetched(s3, lambda: run_json("inspect", s3.uri("big")))
    assert summary == metadata  # the summary reads _metadata.json alone
    histogram = fetched(s3, lambda: run_json("inspect", s3.uri("big"), "--key-groups"))
    footers = histogram - metadata
    assert 0 < footers <= len(sizes) * 64 * 1024  # at most the tail pyarrow reads per file
    assert footers < data / 8
    one_key = fetched(s3, lambda: run_json("inspect", s3.uri("big"), "--key", "key-7"))
    assert one_key < data / 4  # one key group's row groups of the owning subtask's files


# --- verify, diff, export -----------------------------------------------------------------------

def test_verify_diff_and_export_between_s3_and_disk(s3: S3Place, tmp_path: Path) -> None:
    upload(s3.fs(), Path(KEYED), s3.path("keyed"))
    remote = s3.uri("keyed")
    report = run_json("verify", remote)
    assert report["clean"] and not report["problems"]
    code, out, err = run("diff", remote, KEYED)
    assert code == 0 and "hold the same state" in out, err

    to_s3 = run_json("export", remote, "--out", s3.uri("exported"))
    to_disk = run_json("export", remote, "--out", str(tmp_path / "exported"))
    assert [t["rows"] for t in to_s3["tables"]] == [t["rows"] for t in to_disk["tables"]]
    fs = s3.fs()
    for table in to_disk["tables"]:
        local = pq.read_table(tmp_path / "exported" / table["location"])
        assert pq.read_table(s3.path(f"exported/{table['location']}"), filesystem=fs).equals(local)
    code, _, err = run("export", remote, "--out", s3.uri("exported"))
    assert code == 3 and "already exists" in err

    # damage one data file on S3: verify finds it (exit 1), diff reads it no more
    (victim,) = [t for t in fs.get_file_info(pafs.FileSelector(s3.path("keyed"),
                                                               recursive=True))
                 if t.path.endswith(".parquet")][:1]
    with fs.open_output_stream(victim.path) as out_stream:
        out_stream.write(b"PAR1" + b"\0" * (victim.size - 8) + b"PAR1")
    code, out, _ = run("--output", "json", "verify", remote)
    assert code == 1 and {p["kind"] for p in json.loads(out)["problems"]} == {"checksum"}


# --- rescale between stores --------------------------------------------------------------------

MODES = {"metadata": ["-p", "3"], "compact": ["-p", "3", "--compact"],
         "rehash": ["-p", "2", "--max-parallelism", "64"]}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("route", ["s3-to-s3", "s3-to-disk", "disk-to-s3"])
def test_rescale_between_stores(s3: S3Place, tmp_path: Path, route: str, mode: str) -> None:
    upload(s3.fs(), Path(KEYED), s3.path("keyed"))
    source = KEYED if route == "disk-to-s3" else s3.uri("keyed")
    out = str(tmp_path / "out") if route == "s3-to-disk" else s3.uri("out")
    document = run_json("rescale", source, *MODES[mode], "--out", out)
    result = document["result"]
    assert (result["mode"], result["location"]) == (mode, out)
    if mode == "metadata":  # nothing rewritten: hard links are local-only, so copies
        assert result["files_copied"] == len(open_checkpoint(out).metadata.files)
        assert result["files_written"] == 0
    assert run_json("verify", out)["clean"]
    code, text, err = run("diff", out, KEYED)
    assert code == 0 and "hold the same state" in text, err


def test_a_metadata_rescale_within_s3_is_server_side_copies(s3: S3Place) -> None:
    """The cost of a metadata-only rescale on S3 does not pass through statectl: the data
    is copied by the server (CopyObject), so the bytes statectl sends or fetches are the
    metadata's, whatever the state's size. The time is printed (see docs/object-storage.md)."""
    timings = {}
    for name, values in (("small", 8), ("large", 256)):
        import os
        p, max_p = 4, 32
        ranges = [compute_key_group_range_for_operator_index(max_p, p, i) for i in range(p)]
        backends = [HeapKeyedStateBackend("string", max_p, r) for r in ranges]
        for i in range(2000):
            key = f"key-{i}"
            group = assign_to_key_group(key, max_p, "string")
            backend = next(b for b, r in zip(backends, ranges, strict=True) if group in r)
            backend.set_current_key(key)
            backend.get_value_state(value_state("blob", "bytes")).update(os.urandom(values * 16))
        write_checkpoint(s3.uri(f"{name}/chk"), 1, [OperatorSnapshot(
            "op", "op", p, max_p, [SubtaskSnapshot(i, keyed=b.snapshot())
                                   for i, b in enumerate(backends)])])
        size = sum(f.size for f in open_checkpoint(s3.uri(f"{name}/chk")).metadata.files)
        before = s3.server.bucket_metrics(s3.bucket)
        started = time.perf_counter()
        result = run_json("rescale", s3.uri(f"{name}/chk"), "-p", "3", "--out",
                          s3.uri(f"{name}/p3"))["result"]
        took = time.perf_counter() - started
        after = s3.server.bucket_metrics(s3.bucket)
        moved = (after["bytes_sent"] - before.get("bytes_sent", 0.0)
                 + after["bytes_received"] - before["bytes_received"])
        copies = after["requests{code=200,type=COPY}"] - before.get(
            "requests{code=200,type=COPY}", 0.0)
        assert result["files_copied"] == copies == 4
        assert moved < 64 * 1024, (name, moved, size)  # metadata, never the data
        timings[name] = (size, took)
    print("\nmetadata-only rescale within S3:", {k: f"{s / 1e6:.1f} MB in {t:.2f} s"
                                                 for k, (s, t) in timings.items()})
    (small_size, small_time), (large_size, large_time) = timings["small"], timings["large"]
    assert large_size > 20 * small_size
    assert large_time < small_time * 10 + 2  # grows far slower than the state


# --- Flink snapshots on S3 ----------------------------------------------------------------------

def _outcome(*args: str) -> tuple[int, Any]:
    code, out, err = run("--output", "json", *args)
    return code, without(json.loads(out), "location", "created_ms") if code in (0, 1) \
        else err.split(":", 1)[0]


def test_flink_snapshots_on_s3_are_read_by_every_command(s3: S3Place, tmp_path: Path) -> None:
    found = snapshots("heap", "rocksdb", "types")
    assert found, "no Flink fixture sets found"
    fs = s3.fs()
    uploaded: set[Path] = set()
    first_of_set: dict[Path, str] = {}
    for fixture_set, snapshot in found:
        local = fixture_set / snapshot["path"]
        # a checkpoint's state may be in its job's shared/ (RocksDB): upload the job directory
        unit = local.parent if snapshot["path"].startswith("checkpoints/") else local
        if unit not in uploaded:
            upload(fs, unit, s3.path(f"flink/{fixture_set.parent.name}/{fixture_set.name}/"
                                     f"{unit.relative_to(fixture_set)}"))
            uploaded.add(unit)
        remote = s3.uri(f"flink/{fixture_set.parent.name}/{fixture_set.name}/"
                        f"{snapshot['path']}")
        first_of_set.setdefault(fixture_set, remote)
        for command in (["inspect"], ["inspect", "--key-groups"], ["verify"],
                        ["rescale", "--plan", "-p", "3"]):
            assert _outcome(*command, remote) == _outcome(*command, str(local)), \
                (command, snapshot["path"])
        if _outcome("inspect", str(local))[0] == 0:
            code, out, err = run("diff", remote, str(local))
            assert code == 0 and "hold the same state" in out, (snapshot["path"], err)
            sql = ("SELECT state, count(*) AS groups, sum(rows) AS entries "
                   "FROM statectl.key_groups GROUP BY ALL ORDER BY ALL")
            assert run_json("query", remote, sql)["rows"] == run_json(
                "query", str(local), sql)["rows"], snapshot["path"]

    rewritten = 0
    for index, (fixture_set, remote) in enumerate(sorted(first_of_set.items())):
        local = str(fixture_set / next(s["path"] for s in json.loads(
            (fixture_set / "expected.json").read_text())["snapshots"]))
        if _outcome("inspect", local)[0] != 0:
            continue  # what statectl cannot decode is said alike above
        exported = run_json("export", remote, "--out", s3.uri(f"exports/{index}"))
        assert exported["tables"] == run_json(
            "export", local, "--out", str(tmp_path / f"export-{index}"))["tables"]
        code, _, err = run("rescale", remote, "-p", "3", "--out", s3.uri(f"p3/{index}"))
        if code == 0:  # a Flink canonical savepoint written to S3
            assert open_checkpoint(s3.uri(f"p3/{index}")).format_name == "flink"
            code, out, err = run("diff", s3.uri(f"p3/{index}"), local)
            assert code == 0, out + err
            assert run("convert", remote, "--out", s3.uri(f"converted/{index}"))[0] == 0
            rewritten += 1
        else:
            assert code == 3 and err.startswith("Error: ")
            assert run("rescale", local, "-p", "3", "--out",
                       str(tmp_path / f"p3-{index}"))[0] == 3
    print(f"\n{rewritten} of {len(first_of_set)} fixture sets rescaled into S3")
    assert rewritten >= len(first_of_set) // 2


# --- storage failures ---------------------------------------------------------------------------

def one_line_error(result: Any, took: float, within: float) -> str:
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert took < within, (took, lines[0])
    print(f"{took:.1f} s: {lines[0]}")
    return lines[0]


def timed(*args: str) -> tuple[Any, float]:
    started = time.monotonic()
    result = statectl(*args)
    return result, time.monotonic() - started


def test_bad_credentials_a_dead_endpoint_and_a_missing_bucket_fail_fast_in_one_line(
        s3: S3Place, inputs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    upload(s3.fs(), Path(KEYED), s3.path("keyed"))
    good = s3.uri("keyed")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    for args in (["inspect", good], ["snapshot", "list", s3.uri()],
                 ["build", str(inputs[0]), "--key", "user", "--agg", "count",
                  "--checkpoint-dir", s3.uri("state")]):
        line = one_line_error(*timed(*args), within=30)
        assert "the credentials were refused" in line and "AWS " in line, line
    monkeypatch.undo()
    from s3_server import credentials_env
    credentials_env(monkeypatch)

    dead = good.replace(s3.server.endpoint, f"127.0.0.1:{free_ports(1)[0]}")
    line = one_line_error(*timed("inspect", dead), within=30)
    assert "cannot reach the endpoint" in line and "NETWORK_CONNECTION" in line
    line = one_line_error(*timed("rescale", KEYED, "-p", "3", "--out", dead), within=30)
    assert "cannot reach the endpoint" in line

    missing = s3.server.uri("no-such-bucket-here", "state")
    line = one_line_error(*timed("build", str(inputs[0]), "--key", "user", "--agg", "count",
                                 "--checkpoint-dir", missing), within=30)
    assert "the bucket does not exist" in line


def test_a_hung_or_throttling_server_is_an_error_within_bounded_time(
        s3_server_factory: Callable[[], S3Server], s3: S3Place) -> None:
    server = s3_server_factory()
    server.create_bucket("hung")
    upload(server.filesystem(), Path(KEYED), "hung/keyed")
    server.pause()  # accepts connections, never answers
    try:
        line = one_line_error(*timed("inspect", server.uri("hung", "keyed")), within=30)
    finally:
        server.resume()
    assert "did not answer in time" in line and "request_timeout" in line

    upload(s3.fs(), Path(KEYED), s3.path("keyed"))
    s3.server.throttle(("Read", "List"), bucket=s3.bucket)
    try:
        line = one_line_error(*timed("snapshot", "list", s3.uri()), within=30)
    finally:
        s3.server.unthrottle(bucket=s3.bucket)
    assert "throttling" in line
    assert re.search(r"ErrTooManyRequest|503", line)


def test_statectl_options_tune_the_timeouts(s3: S3Place) -> None:
    fs, _ = resolve_filesystem(s3.uri("x", request_timeout="9", max_attempts="1"))
    assert fs.__reduce__()[1][0]["request_timeout"] == 9.0
    code, _, err = run("inspect", s3.uri("keyed", max_attempts="zero"))
    assert code == 3 and "max_attempts='zero'" in err
