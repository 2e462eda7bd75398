"""`statectl inspect` views and `statectl export` through the CLI, in both output modes, with
every exit code, `--quiet`, and the user mistakes each answered by one line saying what to do.

The expected figures are computed independently of the views: from the sample checkpoints'
metadata, from `keyed_entries` (every stored entry) and from Flink's key-group assignment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_support import EMPTY, KEYED, OPERATOR, run, run_json, unchanged

from formats.open import open_checkpoint
from statecore.key_groups import assign_to_key_group
from statecore.ttl import TtlValue


@pytest.fixture(autouse=True)
def _samples_unchanged() -> Iterator[None]:
    yield from unchanged(KEYED, OPERATOR, EMPTY)


def stored(location: str, state: str) -> list[tuple[int, Any, Any, Any]]:
    checkpoint = open_checkpoint(location)
    (op,) = checkpoint.metadata.operators
    return list(checkpoint.keyed_entries(op.uid, state))


# -- the summary -------------------------------------------------------------------------------


def test_summary_in_both_modes_and_json_has_no_views() -> None:
    document = run_json("inspect", KEYED)
    assert not {"key_groups", "top", "expired", "lookup", "entries"} & document.keys()
    code, out, err = run("inspect", KEYED)
    assert code == 0 and err == ""
    assert "purchases (Purchases per user)" in out and "recent_events  keyed list  36 entries" \
        in out
    assert "115-154 entries" in out  # the subtasks summed up on the operator's line
    code, out, _ = run("inspect", "--all", KEYED)
    assert code == 0 and "│ purchases │       0 │ 0-63       │     154 │" in out


# -- --key-groups ------------------------------------------------------------------------------


def test_key_groups_json_matches_the_metadata() -> None:
    document = run_json("inspect", KEYED, "--key-groups")
    (histogram,) = document["key_groups"]
    metadata = open_checkpoint(KEYED).metadata
    (op,) = metadata.operators
    expected = [0] * op.max_parallelism
    for st in op.subtasks:
        for handle in st.keyed:
            for rows in handle.rows:
                expected[rows.key_group] += rows.row_count
    groups = histogram["key_groups"]
    assert [g["key_group"] for g in groups] == list(range(128))
    assert [g["entries"] for g in groups] == expected
    assert [g["subtask"] for g in groups] == [0] * 64 + [1] * 64
    entries = histogram["entries"]
    assert entries["max"] == max(expected) and entries["min"] == min(expected)
    assert entries["mean"] == pytest.approx(sum(expected) / 128)
    assert entries["skew"] == pytest.approx(max(expected) / (sum(expected) / 128))
    sizes = [g["bytes"] for g in groups]
    assert histogram["bytes"]["max"] == max(sizes) and 0 < sum(sizes) <= sum(
        f.size for f in metadata.files)
    shares = histogram["subtasks"]
    assert [s["key_group_range"] for s in shares] == [[0, 63], [64, 127]]
    assert sum(s["share"] for s in shares) == pytest.approx(1.0)
    assert shares[0]["bytes"] == sum(sizes[:64])


@pytest.mark.parametrize("measure", ["bytes", "entries"])
def test_key_groups_chart_in_text(measure: str) -> None:
    code, out, _ = run("inspect", KEYED, "--key-groups", "--by", measure)
    assert code == 0
    assert f"purchases: {measure} per key group, 128 key groups (2 per column" in out
    chart = [line for line in out.splitlines() if "│" in line and "┃" not in line
             and not line.startswith("│")]
    assert len(chart) == 8  # eight rows of bars, each 64 columns wide
    assert all(len(line.split("│", 1)[1]) == 64 for line in chart)
    assert "^0" in out and "^1" in out and "skew" in out and "subtasks' share" in out
    document = run_json("inspect", KEYED, "--key-groups", "--by", measure)
    stats = document["key_groups"][0][measure]
    assert f"skew {stats['skew']:.2f} (max/mean)" in out


def test_key_groups_of_an_operator_without_keyed_state_is_empty() -> None:
    assert run_json("inspect", OPERATOR, "--key-groups")["key_groups"] == []


# -- --top -------------------------------------------------------------------------------------


def test_top_is_the_largest_entries_by_data_bytes() -> None:
    document = run_json("inspect", KEYED, "--top", "3", "--state", "last_amount",
                        "--state", "recent_events")
    by_state = {t["state"]: t for t in document["top"]}
    assert set(by_state) == {"last_amount", "recent_events"}
    # last_amount: float64 values: key bytes + 4 + 8, so the longest keys win
    lengths = sorted((len(k.encode()) + 4 + 8 for _, k, _, _ in stored(KEYED, "last_amount")),
                     reverse=True)
    assert [e["bytes"] for e in by_state["last_amount"]["entries"]] == lengths[:3]
    # recent_events: list<string> with list<int64> timestamps
    sizes = sorted((len(k.encode()) + 4 + sum(len(e.user_value.encode()) + 4 + 8 for e in v)
                    + 8 for _, k, _, v in stored(KEYED, "recent_events")), reverse=True)
    assert [e["bytes"] for e in by_state["recent_events"]["entries"]] == sizes[:3]
    code, out, _ = run("inspect", KEYED, "--top", "2", "--state", "recent_events")
    assert code == 0 and "purchases/recent_events: largest entries" in out


def test_top_includes_broadcast_state_once() -> None:
    document = run_json("inspect", OPERATOR, "--top", "10")
    assert [t["state"] for t in document["top"]] == ["rules"]  # list states have no keys
    keys = [e["key"] for e in document["top"][0]["entries"]]
    assert len(keys) == len(set(keys)) > 0


# -- --now -------------------------------------------------------------------------------------


@pytest.mark.parametrize("now", [1700003040000, 1700003100000, 1700003300000])
def test_expired_share_follows_flinks_rule(now: int) -> None:
    document = run_json("inspect", KEYED, "--now", str(now))
    (share,) = document["expired"]["states"]
    assert document["expired"]["now"] == now and share["state"] == "recent_events"
    rows = stored(KEYED, "recent_events")
    ttl = share["ttl"]
    elements = [e for _, _, _, v in rows for e in v]
    assert all(isinstance(e, TtlValue) for e in elements)
    assert share["elements"] == len(elements)
    assert share["elements_expired"] == sum(e.last_access_timestamp + ttl <= now
                                            for e in elements)
    assert share["entries"] == len(rows)
    assert share["entries_expired"] == sum(all(e.last_access_timestamp + ttl <= now for e in v)
                                           for _, _, _, v in rows)
    assert 0 <= share["bytes_expired"] <= share["bytes"]
    code, out, _ = run("inspect", KEYED, "--now", str(now))
    assert f"{share['entries_expired']} of 36" in out and "TTL-expired at" in out


def test_now_accepts_iso_times_and_now() -> None:
    iso = run_json("inspect", KEYED, "--now", "2023-11-14T23:05:00")["expired"]["now"]
    assert iso == 1700003100000
    offset = run_json("inspect", KEYED, "--now", "2023-11-15T00:05:00+01:00")["expired"]["now"]
    assert offset == 1700003100000
    assert run_json("inspect", KEYED, "--now", "now")["expired"]["states"][0][
        "elements_expired"] == 120


# -- --key -------------------------------------------------------------------------------------


def test_key_lookup_finds_every_entry_of_the_key() -> None:
    document = run_json("inspect", KEYED, "--key", "user-26")
    (location,) = document["lookup"]["locations"]
    assert location["key_group"] == assign_to_key_group("user-26", 128, "string")
    assert location["subtask"] == (0 if location["key_group"] < 64 else 1)
    by_state = {s["state"]: s["entries"] for s in document["lookup"]["states"]}
    for state, entries in by_state.items():
        expected = [(ns, v) for _, k, ns, v in stored(KEYED, state) if k == "user-26"]
        assert len(entries) == len(expected), state
        assert all(e["key"] == "user-26" and e["key_group"] == location["key_group"]
                   for e in entries)
    windows = sorted(e["namespace"] for e in by_state["clicks_per_minute"])
    assert windows == sorted(ns for _, k, ns, _ in stored(KEYED, "clicks_per_minute")
                             if k == "user-26")
    one = run_json("inspect", KEYED, "--key", "user-26", "--state", "clicks_per_minute",
                   "--namespace", str(windows[0]))
    assert [e["namespace"] for e in one["lookup"]["states"][0]["entries"]] == windows[:1]
    code, out, _ = run("inspect", KEYED, "--key", "user-26")
    assert code == 0 and f"key user-26 is in key group {location['key_group']}" in out


def test_a_missing_key_has_no_entries() -> None:
    document = run_json("inspect", KEYED, "--key", "nobody", "--state", "total_cents")
    assert document["lookup"]["states"][0]["entries"] == []
    code, out, _ = run("inspect", KEYED, "--key", "nobody", "--state", "total_cents")
    assert code == 0 and "total_cents: no entry" in out


# -- --entries ---------------------------------------------------------------------------------


def test_entries_are_the_first_rows_of_each_state() -> None:
    document = run_json("inspect", KEYED, "--entries", "--limit", "2")
    assert {s["state"] for s in document["entries"]} == {
        s["state"] for s in document["operators"][0]["states"]}
    for state in document["entries"]:
        first = stored(KEYED, state["state"])[:2]
        assert [(e["key_group"], e["key"]) for e in state["entries"]] == [
            (kg, k) for kg, k, _, _ in first]
    ops = run_json("inspect", OPERATOR, "--entries", "--limit", "50")
    sizes = {s["state"]: len(s["entries"]) for s in ops["entries"]}
    summary = {s["state"]: s["entries"] for s in ops["operators"][0]["states"]}
    assert sizes["partition_offsets"] == summary["partition_offsets"]  # split: every element
    assert sizes["rules"] * 3 == summary["rules"]  # broadcast: one of three copies
    code, out, _ = run("inspect", OPERATOR, "--entries", "--limit", "1", "--state", "rules")
    assert code == 0 and "events-source/rules (operator broadcast): first 1 entry" in out


def test_void_namespace_is_null_in_json_and_dash_in_text() -> None:
    document = run_json("inspect", KEYED, "--entries", "--limit", "1", "--state", "total_cents")
    first = document["entries"][0]["entries"][0]
    assert first["namespace"] is None
    code, out, _ = run("inspect", KEYED, "--entries", "--limit", "1", "--state", "total_cents")
    (row,) = [line for line in out.splitlines() if f"│ {first['key']} " in line]
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [
        "0", str(first["key_group"]), first["key"], "-", str(first["value"]), "-",
        f"{first['bytes']} B"]


# -- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_export_in_both_modes(tmp_path: Path, fmt: str) -> None:
    document = run_json("export", KEYED, "--out", str(tmp_path / "j"), "--format", fmt)
    assert document["format"] == fmt and document["rows"] == 269
    manifest = json.loads((tmp_path / "j" / "_export.json").read_text())
    assert [t["location"] for t in manifest["tables"]] == [
        t["location"] for t in document["tables"]]
    for table in document["tables"]:
        assert (tmp_path / "j" / table["location"]).is_file()
    code, out, err = run("export", KEYED, "--out", str(tmp_path / "t"), "--format", fmt)
    assert code == 0 and err == ""  # no progress bar when not a terminal
    assert f"exported to {tmp_path / 't'} ({fmt}): 269 rows" in out


def test_export_parquet_holds_the_stored_entries(tmp_path: Path) -> None:
    run_json("export", KEYED, "--out", str(tmp_path / "x"), "--state", "total_cents")
    table = pq.read_table(tmp_path / "x" / "purchases" / "total_cents.parquet")
    assert table.column_names == ["operator", "state", "subtask", "key_group", "key",
                                  "namespace", "value", "ttl_timestamp"]
    assert sorted(zip(table.column("key_group").to_pylist(), table.column("key").to_pylist(),
                      table.column("value").to_pylist(), strict=True)) == sorted(
        (kg, k, v) for kg, k, _, v in stored(KEYED, "total_cents"))
    assert not list(tmp_path.glob("*.inprogress-*"))


# -- --quiet, stdout and stderr ----------------------------------------------------------------


def test_quiet_prints_nothing_but_errors_and_keeps_the_exit_code(tmp_path: Path) -> None:
    assert run("--quiet", "inspect", KEYED, "--key-groups") == (0, "", "")
    assert run("-q", "export", KEYED, "--out", str(tmp_path / "q")) == (0, "", "")
    assert (tmp_path / "q" / "_export.json").is_file()
    code, out, err = run("--quiet", "diff", KEYED, OPERATOR)
    assert (code, out, err) == (1, "", "")
    code, out, err = run("--quiet", "inspect", str(tmp_path / "missing"))
    assert code == 3 and out == "" and err.startswith("Error: ")
    document = run_json("--quiet", "inspect", KEYED)  # JSON mode still prints its document
    assert document["format"] == "statectl"


# -- user mistakes: one line that says what to do, the right exit code, no traceback -----------


@pytest.mark.parametrize(("args", "message"), [
    (["inspect", KEYED, "--namespace", "1"], "--namespace needs --key"),
    (["inspect", KEYED, "--state", "count"], "give one of them"),
    (["inspect", KEYED, "--top", "0"], "Invalid value for '--top'"),
    (["inspect", KEYED, "--limit", "0", "--entries"], "Invalid value for '--limit'"),
    (["inspect", KEYED, "--now", "yesterday"], "give epoch milliseconds"),
    (["inspect", KEYED, "--key-groups", "--by", "size"], "Invalid value for '--by'"),
    (["export", KEYED, "--out", "x", "--format", "xml"], "Invalid value for '--format'"),
    (["export", KEYED], "Missing option '--out'"),
    (["inspect"], "Missing argument 'PATH'"),
])
@pytest.mark.parametrize("mode", ["text", "json"])
def test_usage_mistakes_exit_2(args: list[str], message: str, mode: str) -> None:
    code, out, err = run("--output", mode, *args)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def _mistakes(tmp_path: Path) -> list[tuple[list[str], str]]:
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "state" / "chk-0000003").mkdir(parents=True)
    (tmp_path / "file.txt").write_text("x")
    return [
        (["inspect", str(tmp_path / "nope")], "does not exist; give a checkpoint"),
        (["inspect", str(tmp_path / "empty-dir")], "has no _metadata.json"),
        (["inspect", str(tmp_path / "file.txt")], "it is a file; give the directory"),
        (["inspect", str(tmp_path / "state")], "give one of its checkpoints (chk-0000003"),
        (["verify", str(tmp_path / "nope")], "does not exist"),
        (["export", str(tmp_path / "nope"), "--out", str(tmp_path / "o")], "does not exist"),
        (["inspect", KEYED, "--top", "1", "--state", "nope"], "its states: average_cents"),
        (["inspect", OPERATOR, "--key", "1"], "--key finds keyed state"),
        (["inspect", KEYED, "--key", "u", "--state", "clicks_per_minute", "--namespace", "x"],
         "'x' is not an int64 value"),
        (["export", KEYED, "--out", str(tmp_path)], "choose another --out"),
        (["export", KEYED, "--out", str(tmp_path / "o"), "--state", "nope"], "no state named"),
    ]


@pytest.mark.parametrize("mode", ["text", "json"])
def test_domain_mistakes_exit_3_with_what_to_do(tmp_path: Path, mode: str) -> None:
    for args, message in _mistakes(tmp_path):
        code, out, err = run("--output", mode, *args)
        assert code == 3, (args, out, err)
        assert out == "" and err.startswith("Error: ") and message in err, (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_verbose_adds_the_traceback(tmp_path: Path) -> None:
    code, _, err = run("--verbose", "inspect", str(tmp_path / "nope"))
    assert code == 3 and "Traceback" in err and "Error: " in err


def test_a_metadata_path_opens_its_checkpoint() -> None:
    assert run_json("inspect", str(Path(KEYED) / "_metadata.json"))["checkpoint_id"] == \
        run_json("inspect", KEYED)["checkpoint_id"]
