"""Small things that add up (issue 41, item 6): one exit code for a missing path, errors that
say which side and which file, values in the form they are shown, tables that cut nothing.

Each test failed on the code before its fix. The Flink fixtures give only what their
expected.json says (keys, windows, timers), or what the snapshot itself holds.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import expected, release_checkpoint, release_fixtures, require_fixtures

from statecore.values import Instant


def _types_checkpoint() -> tuple[Path, dict[str, Any]]:
    fixture_set = require_fixtures("types")[0]
    document = expected(fixture_set)
    snap = next(s for s in document["snapshots"] if s["kind"] == "checkpoint")
    return fixture_set / snap["path"], document


def _window_entry() -> tuple[Path, str, list[int]]:
    """A checkpoint, a key and one of its windows, from expected.json's window state."""
    path, document = _types_checkpoint()
    for op in document["operators"].values():
        for state in op.get("keyed_states", {}).values():
            if state.get("namespace") == "TimeWindow":
                key, window, _ = state["entries"][0]
                return path, key, window
    pytest.fail("no window state in the types fixtures' expected.json")


def _instant(ms: int) -> str:
    """An epoch-ms time as text shows it (``2023-11-14T23:59:59.999Z``)."""
    return str(Instant.of_epoch_milli(ms))


@pytest.mark.parametrize("args", [
    ["history", "{}", "--key", "k"], ["snapshot", "list", "{}"], ["snapshot", "take", "{}"],
    ["snapshot", "release", "{}", "1"], ["snapshot", "prune", "{}", "--keep", "1"],
    ["trace", "{}"], ["inspect", "{}"], ["verify", "{}"], ["diff", "{}", KEYED],
    ["export", "{}", "--out", "{}-out"], ["rescale", "{}", "-p", "2", "--plan"],
])
def test_a_missing_path_is_exit_code_3_in_every_command(args: list[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-path")
    code, out, err = run(*(a.replace("{}", missing) for a in args))
    assert code == 3, (args, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("Error: ") and missing in err


def _damaged_copy(source: str, tmp_path: Path) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(source, copy)
    data = next(p for p in sorted(copy.rglob("*.parquet")))
    data.write_bytes(data.read_bytes()[:100])
    return copy


def test_diff_says_which_side_is_damaged(tmp_path: Path) -> None:
    damaged = _damaged_copy(KEYED, tmp_path)
    for args, side in (((str(damaged), KEYED), "first"), ((KEYED, str(damaged)), "second")):
        code, out, err = run("diff", *args)
        assert code == 3 and out == "", err
        assert err.startswith(f"Error: the {side} snapshot ({damaged}): "), err


def test_a_truncated_flink_metadata_says_truncated_with_its_path(tmp_path: Path) -> None:
    path, _ = _types_checkpoint()
    data = (path / "_metadata").read_bytes()
    for cut in (5, 20, len(data) // 3, len(data) // 2):
        copy = tmp_path / f"cut-{cut}"
        shutil.copytree(path, copy)
        (copy / "_metadata").chmod(0o644)
        (copy / "_metadata").write_bytes(data[:cut])
        code, out, err = run("inspect", str(copy))
        assert code == 3 and out == "", err
        assert err.startswith(f"Error: {copy}/_metadata is truncated: "), err
        assert "impossible" not in err.split("(")[0]


def test_a_truncated_statectl_metadata_says_truncated_with_its_path(tmp_path: Path) -> None:
    copy = tmp_path / "cut"
    shutil.copytree(KEYED, copy)
    metadata = copy / "_metadata.json"
    metadata.write_bytes(metadata.read_bytes()[:300])
    code, _, err = run("inspect", str(copy))
    assert code == 3 and err.startswith(f"Error: {copy}/_metadata.json is truncated"), err


def test_namespace_takes_a_window_in_every_form_it_is_shown_in() -> None:
    path, key, (start, end) = _window_entry()
    forms = [f"[{_instant(start)}, {_instant(end)})", f"[{start}, {end}]",
             json.dumps([start, end]), str(start), _instant(start)]
    for form in forms:
        lookup = run_json("inspect", str(path), "--key", key, "--namespace", form,
                          "--state", "window-contents")["lookup"]
        found = [e for s in lookup["states"] for e in s["entries"]]
        assert found and all(e["namespace"] == [start, end] for e in found), form
    code, out, err = run("inspect", str(path), "--key", key, "--namespace", forms[0])
    assert code == 0 and forms[0] in out, err


def test_timers_show_as_times_in_text_and_epoch_ms_in_json() -> None:
    path, document = _types_checkpoint()
    for op in document["operators"].values():
        for name, timers in op.get("timers", {}).items():
            key, stamps = timers["entries"][0]
            code, out, err = run("inspect", str(path), "--key", key, "--state", name)
            assert code == 0, err
            assert all(_instant(t) in out for t in stamps), out
            assert not any(str(t) in out for t in stamps), out
            lookup = run_json("inspect", str(path), "--key", key, "--state", name)["lookup"]
            shown = sorted(t for s in lookup["states"] for e in s["entries"] for t in e["value"])
            assert shown == sorted(stamps)
            return
    pytest.fail("no timers in the types fixtures' expected.json")


def test_parquet_windows_are_structs_of_start_and_end(tmp_path: Path) -> None:
    path, key, (start, end) = _window_entry()
    document = run_json("export", str(path), "--out", str(tmp_path / "out"))
    for table in document["tables"]:
        data = pq.read_table(tmp_path / "out" / table["location"])
        namespace = data.schema.field("namespace").type
        if str(namespace).startswith("struct"):
            assert [namespace.field(i).name for i in range(namespace.num_fields)] == [
                "start", "end"], table
    rows = pq.read_table(tmp_path / "out" / next(
        t["location"] for t in document["tables"] if t["state"] == "window-contents")).to_pylist()
    assert {"start": start, "end": end} in [r["namespace"] for r in rows if r["key"] == key]
    run_json("export", str(path), "--out", str(tmp_path / "jsonl"), "--format", "jsonl",
             "--state", "window-contents")  # JSON Lines: arrays, as before
    lines = (tmp_path / "jsonl").rglob("*.jsonl")
    assert any(json.loads(line)["namespace"] == [start, end]
               for f in lines for line in f.read_text().splitlines())


def test_a_subtask_has_the_same_bytes_with_and_without_all() -> None:
    for fixture_set in require_fixtures():
        for snap in expected(fixture_set)["snapshots"]:
            path = str(fixture_set / snap["path"])
            summary, everything = (
                {(op["operator"]["id"], s["subtask"]): s["bytes"]
                 for op in run_json("inspect", path, *extra)["operators"]
                 for s in op["subtasks"]} for extra in ((), ("--all",)))
            assert summary == everything, path


def test_the_export_table_shows_every_file_whole(tmp_path: Path) -> None:
    path, _ = _types_checkpoint()
    code, out, err = run("export", str(path), "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "…" not in out
    cells = "".join(re.sub(r"[│┃]", " ", line).split()[-1] if "│" in line else ""
                    for line in out.splitlines())
    manifest = json.loads((tmp_path / "out" / "_export.json").read_text())
    assert all(t["location"].split("/")[-1] in cells for t in manifest["tables"]), out


def test_empty_states_in_entries_are_one_line_not_an_empty_table() -> None:
    path, _ = _types_checkpoint()
    code, out, err = run("inspect", str(path), "--entries", "--limit", "1")
    assert code == 0, err
    empty = [line for line in out.splitlines() if line.endswith(": no entries")]
    assert empty, out
    titles = [line for line in out.splitlines() if ": first " in line]
    assert titles and all("0 entries" not in t for t in titles)


def test_a_1x_snapshot_hints_at_uid_once() -> None:
    releases = [r for r in release_fixtures() if r.name.startswith("1.")]
    if not releases:
        pytest.fail("no Flink 1.x snapshots in the versions fixtures")
    checkpoint = release_checkpoint(releases[0], "java-heap")
    code, out, err = run("inspect", str(checkpoint))
    assert code == 0 and out.count("--uid UID") == 1, out
    code, out, err = run("inspect", KEYED)
    assert code == 0 and "--uid" not in out
