"""``statectl query``: the faults a new user met (issue 41), each pinned.

- A key filter over keys that different subtasks hold (``IN``, ``= AND =``, ``IN AND =``)
  read every handle with all the filter's key groups: a traceback from the Flink reader.
- A non-finite float in ``--output json`` or ``--out x.jsonl``: a traceback and a 0-byte file.
- Values in other forms than every other command gives them (maps as pairs, tuples as
  ``{"f0": ...}``, instants as ISO text, ``sum`` of a ``BIGINT`` as the string of a decimal).
- Text output that is not a terminal cut to a screenful.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import snapshot_ids, snapshots
from rich.console import Console

from cli.views.query import draw_query, rows_shown
from formats.open import open_checkpoint
from formats.ops.query import SnapshotTables, run_query
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state

SCALAR_KEYS = ("string", "int32", "int64")
ONE_FIELD_KEYS = tuple(f"tuple<{k}>" for k in SCALAR_KEYS)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(key: Any) -> str:
    return "'" + key.replace("'", "''") + "'" if isinstance(key, str) else str(key)


# -- 1a: a key filter over keys of several subtasks -----------------------------------------


@pytest.mark.parametrize(("fixture", "snap"), snapshots("heap", "rocksdb", "types"),
                         ids=snapshot_ids("heap", "rocksdb", "types"))
def test_a_key_filter_over_keys_of_several_subtasks(fixture: Path, snap: dict[str, Any]
                                                    ) -> None:
    """Keys taken from the snapshot, one from each of two subtasks; the answers a full read
    gives, and each filter reads only its keys' key groups."""
    location = str(fixture / snap["path"])
    tables = SnapshotTables.of(open_checkpoint(location, partial=True, decode=False))
    keyed = [t for t in tables.tables.values() if t.state.scope == "keyed"
             and t.op.key_type in SCALAR_KEYS and t.op.parallelism > 1]
    if not keyed:  # PyFlink's and SQL's keys: one-field rows, filtered by their field
        one_field = [t for t in tables.tables.values() if t.state.scope == "keyed"
                     and t.op.key_type in ONE_FIELD_KEYS and t.op.parallelism > 1]
        assert one_field, "no keyed state with a string, an integer or a one-field row key"
        _one_field_key_filter(location, one_field)
        return
    checked = 0
    for table in sorted(keyed, key=lambda t: (t.schema_name, t.name)):
        name = f"{_quoted(table.schema_name)}.{_quoted(table.name)}"
        rows = run_query({"snapshot": open_checkpoint(location, partial=True, decode=False)},
                         f"SELECT key, subtask FROM {name}").table.to_pylist()
        by_subtask: dict[int, Any] = {}
        for row in sorted(rows, key=lambda r: str(r["key"])):
            by_subtask.setdefault(row["subtask"], row["key"])
        if len(by_subtask) < 2:
            continue
        a, b = (by_subtask[s] for s in sorted(by_subtask)[:2])
        count = {key: sum(r["key"] == key for r in rows) for key in (a, b)}
        for where, expected in (
                (f"key IN ({_literal(a)}, {_literal(b)})", count[a] + count[b]),
                (f"key = {_literal(a)} AND key = {_literal(b)}", 0),
                (f"key IN ({_literal(a)}, {_literal(b)}) AND key = {_literal(b)}", count[b])):
            sql = f"SELECT count(*) AS n FROM {name} WHERE {where}"
            result = run_query({"snapshot": open_checkpoint(location, partial=True,
                                                            decode=False)}, sql)
            assert result.table.to_pylist() == [{"n": expected}], (table.name, where)
            groups = {assign_to_key_group(k, table.op.max_parallelism, table.op.key_type)
                      for k in (a, b)}
            assert result.read[0][3] == tuple(sorted(groups)), result.read
        # the command, as the issue ran it: no traceback
        code, out, err = run("query", location, f"SELECT count(*) FROM {name} "
                                                f"WHERE key IN ({_literal(a)}, {_literal(b)})")
        assert code == 0 and "Traceback" not in err, err
        checked += 1
        if checked == 2:  # two states a snapshot: the reader paths, not every state again
            break
    assert checked, "no keyed state with keys in two subtasks"


def _one_field_key_filter(location: str, tables: list[Any]) -> None:
    """A filter on the field of a one-field row key (``key.f0``), keys of two subtasks: the
    answers a full read gives, and no traceback from the command. (No key group is pushed
    down for it: the pushdown takes filters on ``key`` itself.)"""
    checked = 0
    for table in sorted(tables, key=lambda t: (t.schema_name, t.name)):
        name = f"{_quoted(table.schema_name)}.{_quoted(table.name)}"
        rows = run_query({"snapshot": open_checkpoint(location, partial=True, decode=False)},
                         f"SELECT key.f0 AS k, subtask FROM {name}").table.to_pylist()
        by_subtask: dict[int, Any] = {}
        for row in sorted(rows, key=lambda r: str(r["k"])):
            by_subtask.setdefault(row["subtask"], row["k"])
        if len(by_subtask) < 2:
            continue
        a, b = (by_subtask[s] for s in sorted(by_subtask)[:2])
        count = {key: sum(r["k"] == key for r in rows) for key in (a, b)}
        where = f"key.f0 IN ({_literal(a)}, {_literal(b)})"
        sql = f"SELECT count(*) AS n FROM {name} WHERE {where}"
        result = run_query({"snapshot": open_checkpoint(location, partial=True, decode=False)},
                           sql)
        assert result.table.to_pylist() == [{"n": count[a] + count[b]}], (table.name, where)
        code, _, err = run("query", location, sql)
        assert code == 0 and "Traceback" not in err, err
        checked += 1
    assert checked, "no keyed state with keys in two subtasks"


# -- 1b: non-finite floats ------------------------------------------------------------------


@pytest.fixture(scope="module")
def floats(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A checkpoint whose float64 value state holds inf, -inf, nan and finite numbers."""
    location = str(tmp_path_factory.mktemp("floats") / "chk")
    max_p, p = 8, 2
    ranges = [compute_key_group_range_for_operator_index(max_p, p, i) for i in range(p)]
    backends = [HeapKeyedStateBackend("string", max_parallelism=max_p, key_group_range=r)
                for r in ranges]
    for key, value in (("a", math.inf), ("b", -math.inf), ("c", math.nan), ("d", 1.5)):
        group = assign_to_key_group(key, max_p, "string")
        backend = next(b for b, r in zip(backends, ranges, strict=True) if group in r)
        backend.set_current_key(key)
        backend.get_value_state(value_state("x", "float64")).update(value)
    from formats.statectl.writer import write_checkpoint
    write_checkpoint(location, 1, [OperatorSnapshot(
        "op", "op", p, max_p, [SubtaskSnapshot(i, keyed=b.snapshot())
                               for i, b in enumerate(backends)])])
    return location


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT 1/0 AS v", "Infinity"),
    ("SELECT 'inf'::DOUBLE AS v", "Infinity"),
    ("SELECT '-inf'::DOUBLE AS v", "-Infinity"),
    ("SELECT 'nan'::DOUBLE AS v", "NaN"),
    ("SELECT max(value) AS v FROM op.x WHERE key <> 'c'", "Infinity"),
    ("SELECT value AS v FROM op.x WHERE key = 'b'", "-Infinity"),
])
def test_non_finite_floats_are_strings_in_json(floats: str, sql: str, expected: str) -> None:
    code, out, err = run("--output", "json", "query", floats, sql)
    assert code == 0, err
    assert json.loads(out)["rows"] == [{"v": expected}]  # strict JSON: json.loads takes it


def test_non_finite_floats_in_files_as_export_writes_them(floats: str, tmp_path: Path) -> None:
    sql = "SELECT key, value FROM op.x ORDER BY key"
    for suffix in ("jsonl", "csv", "parquet"):
        target = tmp_path / f"out.{suffix}"
        code, _, err = run("query", floats, sql, "--out", str(target))
        assert code == 0, err
        assert target.stat().st_size > 0
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    values = [json.loads(line)["value"] for line in lines]  # the literals export writes
    assert values[:2] == [math.inf, -math.inf] and math.isnan(values[2]) and values[3] == 1.5
    exported = tmp_path / "export"
    code, _, err = run("export", floats, "--format", "jsonl", "--out", str(exported))
    assert code == 0, err
    export_rows = [json.loads(line) for line in
                   next(exported.rglob("*.jsonl")).read_text().splitlines()]
    by_key = {row["key"]: row["value"] for row in export_rows}
    assert [by_key["a"], by_key["b"]] == values[:2] and math.isnan(by_key["c"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "export", "out.csv", "out.jsonl", "out.parquet"]  # nothing left beside them


def test_a_failed_write_leaves_no_file(floats: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.jsonl"
    code, out, err = run("query", floats, "SELECT 1", "--out", str(tmp_path / "no" / "x.jsonl"))
    assert code == 3 and err.startswith("Error: cannot write ") and err.count("\n") == 1, err
    assert "Traceback" not in err and not (tmp_path / "no").exists()
    target.write_text("kept\n")

    def fail(*args: Any) -> None:
        Path(args[1]).write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("formats.ops.query._write_file", fail)
    code, _, err = run("query", floats, "SELECT 1", "--out", str(target))
    assert code == 3 and "No space left on device" in err and err.count("\n") == 1, err
    assert target.read_text() == "kept\n"  # an existing file stays as it was
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no partial file


# -- 2: values in the forms every command gives them ----------------------------------------


def test_values_take_the_forms_of_every_other_command() -> None:
    sql = ("SELECT key, value FROM purchases.count_per_channel WHERE key = 'user-07'")
    row = run_json("query", KEYED, sql)["rows"][0]
    looked_up = run_json("inspect", KEYED, "--key", "user-07")["lookup"]["states"]
    channels = next(s for s in looked_up if s["state"] == "count_per_channel")
    assert isinstance(row["value"], dict) and row["value"] == channels["entries"][0]["value"]
    average = run_json("query", KEYED, "SELECT value FROM purchases.average_cents "
                                       "WHERE key = 'user-07'")["rows"][0]["value"]
    assert isinstance(average, list) and len(average) == 2  # a tuple: an array
    total = run_json("query", KEYED, "SELECT sum(value) AS s, count(*) AS n FROM "
                                     "purchases.total_cents")
    assert total["columns"][0]["type"].startswith("decimal128")  # DuckDB's HUGEINT
    assert isinstance(total["rows"][0]["s"], int) and total["rows"][0]["s"] > 0
    forms = run_json("query", KEYED, "SELECT TIMESTAMPTZ '2023-11-14 22:13:20.250+00' AS i, "
                                     "DATE '2023-11-14' AS d, 'ab'::BLOB AS b, "
                                     "{'f0': 1, 'f1': 'x'} AS t, {'n': 1} AS p, "
                                     "MAP {1: 'a'} AS m, 2.50::DECIMAL(4, 2) AS c")["rows"][0]
    assert forms == {"i": 1700000000250, "d": "2023-11-14", "b": "YWI=", "t": [1, "x"],
                     "p": {"n": 1}, "m": [{"key": 1, "value": "a"}], "c": "2.50"}


def test_text_shows_values_as_inspect_does() -> None:
    code, out, err = run("query", KEYED, "SELECT key, value FROM purchases.count_per_channel "
                                         "WHERE key = 'user-07'")
    assert code == 0, err
    assert '{"' in out and "[[" not in out and "('" not in out  # a map, not pairs
    code, out, _ = run("query", KEYED, "SELECT value FROM purchases.average_cents "
                                       "WHERE key = 'user-07'")
    assert "f0" not in out and "[" in out


# -- 3: output that is not a terminal holds every row ----------------------------------------


def test_text_that_is_not_a_terminal_holds_every_row() -> None:
    sql = "SELECT key FROM purchases.last_amount ORDER BY key"
    document = run_json("query", KEYED, sql)
    code, out, err = run("query", KEYED, sql)
    assert code == 0, err
    keys = [r["key"] for r in document["rows"]]
    assert len(keys) > 20 and all(key in out for key in keys)
    assert err.strip() == f"{len(keys)} rows"
    code, out, err = run("query", KEYED, sql, "--limit", "3")
    assert keys[2] in out and keys[3] not in out and "first 3 shown" in err


def test_a_terminal_gets_a_screenful() -> None:
    assert rows_shown(100, None, 30) == 22 and rows_shown(100, None, 6) == 5
    assert rows_shown(100, None, None) == 100 and rows_shown(100, 7, None) == 7
    assert rows_shown(3, None, 30) == 3 and rows_shown(3, 7, 30) == 3
    result = run_query({"snapshot": open_checkpoint(KEYED)},
                       "SELECT key FROM purchases.last_amount ORDER BY key")
    screen = Console(force_terminal=True, height=20, width=80, record=True)
    notes = Console(force_terminal=True, record=True)
    draw_query(screen, notes, result, None, None, "")
    assert "first 12 shown" in notes.export_text()
    assert screen.export_text().count("user-") == 12
