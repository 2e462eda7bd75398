"""``statectl query``: SQL over snapshots (issue 33).

Proven against ``export`` (every state's rows and values equal what export writes, on the
samples and on every Flink fixture snapshot), against ``diff`` (a join of two snapshots finds
exactly the keys diff reports), against itself without pushdown (a key filter that reads only
its key groups gives the rows a full read gives: hypothesis), and by counting the bytes a
point query reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from cli_support import KEYED, OPERATOR, run, run_json
from flink_fixtures import snapshot_ids, snapshots
from hypothesis import given, settings
from hypothesis import strategies as st
from test_json_contract import check

from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.export import export_checkpoint, jsonable
from formats.ops.query import SnapshotTables, run_query
from formats.storage.io_stats import CountingHandler
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows(table: pa.Table) -> list[str]:
    """Rows as sorted JSON text (values in export's JSON form), for comparing tables."""
    return sorted(json.dumps({k: jsonable(v, strict=False) for k, v in row.items()},
                             sort_keys=True) for row in table.to_pylist())


def _equal_to_export(location: str, tmp_path: Path) -> int:
    """Every state's table equals export's Parquet table of it; the states compared.

    The query reads the snapshot as ``statectl query`` opens it (a Flink snapshot: not
    decoded at opening; each state decoded as it is read); export reads it decoded whole.
    """
    checkpoint = open_checkpoint(location, partial=True)
    exported = export_checkpoint(checkpoint, str(tmp_path / "export"))
    checkpoint = open_checkpoint(location, partial=True, decode=False)
    tables = SnapshotTables.of(checkpoint)
    compared = 0
    for table in exported.tables:
        found = next(t for t in tables.tables.values()
                     if t.op.identity == table.operator and t.name == table.state)
        sql = f"SELECT * FROM {_quoted(found.schema_name)}.{_quoted(found.name)}"
        result = run_query({"snapshot": checkpoint}, sql).table
        written = pq.read_table(tmp_path / "export" / table.path)
        assert result.num_rows == table.rows, (table.state, result.num_rows, table.rows)
        # export's columns, then the parts query adds (docs/query.md: window bounds, key fields)
        names = written.column_names
        assert result.column_names[:len(names)] == names
        assert all(c in ("window_start", "window_end") or c.startswith("key_")
                   for c in result.column_names[len(names):]), result.column_names
        result = result.select(names)
        assert _rows(result) == _rows(written), table.state
        key = result.column("key")[result.num_rows // 2].as_py() if result.num_rows else None
        if found.state.scope == "keyed" and type(key) in (str, int):
            # a key filter decodes that key's key group alone, and finds what the whole has
            literal = f"'{key.replace(chr(39), chr(39) * 2)}'" if isinstance(key, str) else key
            point = run_query({"snapshot": open_checkpoint(location, partial=True,
                                                           decode=False)},
                              f"{sql} WHERE key = {literal}")
            assert point.read[0][3] is not None and len(point.read[0][3]) == 1, point.read
            assert _rows(point.table.select(names)) == _rows(result.filter(pc.equal(
                result.column("key"), key))), (table.state, key)
        compared += 1
    return compared


@pytest.mark.parametrize("sample", [KEYED, OPERATOR], ids=lambda p: Path(p).name)
def test_every_state_equals_what_export_writes(sample: str, tmp_path: Path) -> None:
    assert _equal_to_export(sample, tmp_path) >= 3


@pytest.mark.parametrize(("fixture", "snap"), snapshots("heap", "rocksdb", "types"),
                         ids=snapshot_ids("heap", "rocksdb", "types"))
def test_every_flink_state_equals_what_export_writes(fixture: Path, snap: dict[str, Any],
                                                     tmp_path: Path) -> None:
    assert _equal_to_export(str(fixture / snap["path"]), tmp_path) > 0


def test_a_join_of_two_snapshots_finds_the_keys_diff_reports(tmp_path: Path) -> None:
    fresh = str(tmp_path / "fresh")
    run_json("rescale", KEYED, "-p", "3", "--out", fresh, "--drop-expired", "--now",
             "2023-11-14T23:05:00")
    old, new = open_checkpoint(KEYED), open_checkpoint(fresh)
    report = diff_checkpoints(old, new)
    for state in ("recent_events", "last_amount", "clicks_per_minute"):
        expected = {(d.change, d.key, d.namespace) for d in report.differences
                    if d.state == state and d.scope == "entry"}
        sql = f"""
            SELECT CASE WHEN n.key IS NULL THEN 'removed' WHEN o.key IS NULL THEN 'added'
                        ELSE 'changed' END AS change,
                   coalesce(o.key, n.key) AS key, coalesce(o.namespace, n.namespace) AS ns
            FROM old.purchases.{state} o
            FULL JOIN new.purchases.{state} n ON o.key = n.key
                 AND o.namespace IS NOT DISTINCT FROM n.namespace
            WHERE o.value IS DISTINCT FROM n.value
               OR o.ttl_timestamp IS DISTINCT FROM n.ttl_timestamp"""
        found = run_query({"old": old, "new": new}, sql).table.to_pylist()
        assert {(r["change"], r["key"], r["ns"]) for r in found} == expected, state
    assert any(d.state == "recent_events" for d in report.differences)


# -- pushdown -------------------------------------------------------------------------------

MAX_P, P, KEYS, VALUE = 32, 2, 2000, 2048


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two subtasks of 2 KiB values under 2000 string keys: data pages dominate."""
    location = str(tmp_path_factory.mktemp("query") / "chk")
    ranges = [compute_key_group_range_for_operator_index(MAX_P, P, i) for i in range(P)]
    backends = [HeapKeyedStateBackend("string", max_parallelism=MAX_P, key_group_range=r)
                for r in ranges]
    for i in range(KEYS):
        key = f"key-{i}"
        group = assign_to_key_group(key, MAX_P, "string")
        backend = next(b for b, r in zip(backends, ranges, strict=True) if group in r)
        backend.set_current_key(key)
        backend.get_value_state(value_state("blob", "bytes")).update(os.urandom(VALUE))
        backend.get_value_state(value_state("n", "int64")).update(i)
    from formats.statectl.writer import write_checkpoint
    write_checkpoint(location, 1, [OperatorSnapshot(
        "op", "op", P, MAX_P, [SubtaskSnapshot(i, keyed=b.snapshot())
                               for i, b in enumerate(backends)])])
    return location


def _counted(location: str, sql: str) -> tuple[int, int, Any]:
    """Bytes read by ``sql`` over ``location``, the snapshot's bytes, the result."""
    handler = CountingHandler()
    checkpoint = open_checkpoint(location, filesystem=pafs.PyFileSystem(handler))
    result = run_query({"snapshot": checkpoint}, sql)
    total = sum(p.stat().st_size for p in Path(location).rglob("*") if p.is_file())
    return sum(handler.counts.values()), total, result


def test_a_point_query_reads_only_its_key_group(blobs: str) -> None:
    read_all, total, everything = _counted(blobs, "SELECT count(*) FROM op.blob")
    assert everything.table.column(0).to_pylist() == [KEYS]
    read, _, point = _counted(blobs, "SELECT key, octet_length(value) AS n FROM op.blob "
                                     "WHERE key = 'key-7'")
    assert point.table.to_pylist() == [{"key": "key-7", "n": VALUE}]
    group = assign_to_key_group("key-7", MAX_P, "string")
    assert point.read == (("snapshot", "op", "blob", (group,)),)
    assert read_all > total * 0.9
    assert read < total / 10, (read, total)  # 1 of 32 key groups, footers and metadata
    # a state the query does not name is not read at all
    read_n, _, _ = _counted(blobs, "SELECT sum(value) FROM op.n")
    assert read_n < total / 20


KEY_TEXT = st.integers(min_value=0, max_value=KEYS + 50).map(lambda i: f"key-{i}")


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(KEY_TEXT, min_size=1, max_size=6), form=st.sampled_from(
    ["in", "eq-or", "join"]))
def test_pushdown_returns_what_a_full_read_returns(blobs: str, keys: list[str],
                                                   form: str) -> None:
    checkpoint = open_checkpoint(blobs)
    listed = ", ".join(f"'{k}'" for k in keys)
    if form == "in":
        pushed = f"SELECT key, value FROM op.n WHERE key IN ({listed})"
        full = f"SELECT key, value FROM op.n WHERE key || '' IN ({listed})"
    elif form == "eq-or":  # an OR at the top: not a conjunct, no pushdown, same answer
        pushed = f"SELECT key, value FROM op.n WHERE key = '{keys[0]}' AND value >= 0"
        full = f"SELECT key, value FROM op.n WHERE key || '' = '{keys[0]}' AND value >= 0"
    else:  # the same table twice, once filtered: read whole
        pushed = (f"SELECT a.key, b.value FROM op.n a JOIN op.n b ON a.value = b.value "
                  f"WHERE a.key IN ({listed})")
        full = (f"SELECT a.key, b.value FROM op.n a JOIN op.n b ON a.value = b.value "
                f"WHERE a.key || '' IN ({listed})")
    got = run_query({"snapshot": checkpoint}, pushed)
    want = run_query({"snapshot": checkpoint}, full)
    assert _rows(got.table) == _rows(want.table)
    assert all(groups is None for *_, groups in want.read)
    if form == "in":
        assert got.read[0][3] is not None
    if form == "join":
        assert all(groups is None for *_, groups in got.read)


# -- the command -----------------------------------------------------------------------------


def test_the_command_prints_a_table_json_and_files(tmp_path: Path) -> None:
    sql = ("SELECT key, len(value) AS events FROM purchases.recent_events "
           "ORDER BY events DESC, key LIMIT 3")
    code, out, err = run("query", KEYED, sql)
    assert code == 0, err
    assert "user-21" in out and "3 rows" in err
    document = run_json("query", KEYED, sql)
    check(document, "query")
    assert [r["events"] for r in document["rows"]] == [7, 7, 5]
    assert document["row_count"] == 3 and document["columns"][0] == {"name": "key",
                                                                      "type": "string"}
    for suffix in ("parquet", "csv", "jsonl"):
        out_file = tmp_path / f"top.{suffix}"
        code, _, err = run("query", KEYED, sql, "--out", str(out_file))
        assert code == 0 and out_file.is_file(), err
    assert pq.read_table(tmp_path / "top.parquet").num_rows == 3
    lines = (tmp_path / "top.jsonl").read_text().splitlines()
    assert [json.loads(line)["events"] for line in lines] == [7, 7, 5]
    assert (tmp_path / "top.csv").read_text().splitlines()[0] == '"key","events"'


def test_several_snapshots_by_name(tmp_path: Path) -> None:
    document = run_json("query", "--as", f"a={KEYED}", "--as", f"b={OPERATOR}",
                        "SELECT (SELECT count(*) FROM a.statectl.states) AS a, "
                        "(SELECT count(*) FROM b.statectl.states) AS b")
    assert document["rows"] == [{"a": 6, "b": 3}]


@pytest.mark.parametrize(("sql", "says"), [
    ("SELEC 1", "syntax error"),
    ("SELECT * FROM purchases.nope", "purchases"),
    ("DELETE FROM purchases.last_amount", "SELECT"),
    ("SELECT 1; SELECT 2", "one query"),
    ("SELECT nope FROM purchases.last_amount", "nope"),
])
def test_sql_errors_are_one_line_and_exit_2(sql: str, says: str) -> None:
    code, out, err = run("query", KEYED, sql)
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("Error: SQL: ") and says in err, err
