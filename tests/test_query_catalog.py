"""The query catalog lists itself (issue 44, item 2): ``SHOW TABLES``, ``DESCRIBE`` and
``information_schema`` name every database, table and column, without reading any state.

Before, they listed nothing (the tables a query did not name did not exist). Now:

* ``information_schema.tables`` lists every state of every snapshot given, and the metadata
  tables, and nothing else (none of statectl's own registrations); ``SHOW TABLES`` the same;
* ``information_schema.columns`` of a state's table are the columns the table has when read;
* listing reads only the snapshot's metadata (bytes counted) -- a table listed but not read
  refuses a scan instead of answering empty;
* a query that lists and reads at once gets the rows read.

On the sample checkpoints and the Flink fixtures of every kind (heap, RocksDB, types).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from cli_support import KEYED, OPERATOR, run, run_json
from flink_fixtures import expected, fixture_sets, require_fixtures

from formats.open import open_checkpoint
from formats.ops.query import QueryError, run_query
from formats.storage.io_stats import CountingHandler

TABLES = ("SELECT table_catalog, table_schema, table_name FROM information_schema.tables "
          "ORDER BY ALL")


def _snapshots() -> list[str]:
    sets = [s for root in ("heap", "rocksdb", "types") for s in fixture_sets(root)]
    flink = [str(s / snap["path"]) for s in sets or require_fixtures()
             for snap in expected(s)["snapshots"][:1]]
    return [KEYED, OPERATOR, *flink]


def _query(location: str, sql: str, **kwargs: Any) -> list[dict[str, Any]]:
    checkpoint = open_checkpoint(location, decode=False, partial=True, **kwargs)
    return run_query({"snapshot": checkpoint}, sql).table.to_pylist()


@pytest.mark.parametrize("location", _snapshots(), ids=lambda p: "/".join(Path(p).parts[-3:]))
def test_information_schema_lists_every_state_and_its_columns(location: str) -> None:
    states = _query(location, "SELECT operator, state, scope, kind FROM statectl.states")
    listed = _query(location, TABLES)
    flattened = {"list": "$elements", "map": "$entries"}  # a keyed list's, map's rows
    assert {(r["table_schema"], r["table_name"]) for r in listed} == {
        (s["operator"], s["state"]) for s in states} | {
        (s["operator"], s["state"] + flattened[s["kind"]]) for s in states
        if s["scope"] == "keyed" and s["kind"] in flattened} | {
        ("statectl", t) for t in ("operators", "states", "subtasks", "key_groups")}
    assert {r["table_catalog"] for r in listed} == {"snapshot"}
    assert _query(location, "SHOW TABLES") == _query(location, "SHOW ALL TABLES")
    tables = [(s["operator"], s["state"]) for s in states[:6]] + [
        (s["operator"], s["state"] + flattened[s["kind"]]) for s in states
        if s["scope"] == "keyed" and s["kind"] in flattened][:3]
    for operator, name in tables:
        state = {"operator": operator, "state": name}
        columns = _query(location, "SELECT column_name FROM information_schema.columns "
                         f"WHERE table_schema = '{state['operator']}' AND "
                         f"table_name = '{state['state']}' ORDER BY ordinal_position")
        table = f'"{state["operator"]}"."{state["state"]}"'
        read = open_checkpoint(location, partial=True)
        names = run_query({"snapshot": read}, f"SELECT * FROM {table} LIMIT 0").table.column_names
        shown = [c["column_name"] for c in columns]
        # value_undecodable is listed once statectl knows of undecodable values (after reading)
        assert shown == [n for n in names if n != "value_undecodable" or n in shown], table


def _savepoint_with_state_files() -> tuple[str, bool]:
    """A fixture savepoint whose state is (also) in files beside ``_metadata``, and True; else
    (a set's small state may all be inline in ``_metadata``, where a scan reads nothing more)
    the first savepoint, and False."""
    savepoints = [fixture / snap["path"] for fixture in require_fixtures()
                  for snap in expected(fixture)["snapshots"] if snap["kind"] == "savepoint"]
    for folder in savepoints:
        if any(p.name != "_metadata" for p in folder.iterdir()):
            return str(folder), True
    return str(savepoints[0]), False


def test_listing_reads_only_the_metadata() -> None:
    location, in_files = _savepoint_with_state_files()
    summary = run_json("inspect", location, "--all")  # the largest keyed state: its bytes
    keyed = max(({"operator": op["operator"]["id"], "state": s["state"], "bytes": s["bytes"]}
                 for op in summary["operators"] for s in op["states"]
                 if s["scope"] == "keyed"), key=lambda s: s["bytes"])  # are past the headers
    # its table's schema as the query names it (a uid, else a SQL operator's name, ...)
    (named,) = _query(location, "SELECT operator FROM statectl.operators "
                                f"WHERE operator_id = '{keyed['operator']}'")
    keyed["operator"] = named["operator"]
    for sql, reads_state in ((TABLES, False), ("SHOW TABLES", False),
                             ("SELECT count(*) FROM information_schema.columns", False),
                             (f'SELECT count(*) FROM "{keyed["operator"]}"."{keyed["state"]}"',
                              in_files)):
        handler = CountingHandler()
        checkpoint = open_checkpoint(location, filesystem=pafs.PyFileSystem(handler),
                                     decode=False)
        opened = sum(handler.counts.values())  # _metadata and the state headers
        run_query({"snapshot": checkpoint}, sql)
        assert (sum(handler.counts.values()) > opened) == reads_state, sql


def test_a_listed_table_is_not_scanned_as_empty() -> None:
    """A listing creates the tables the query does not name without their rows: a scan of
    one (which statectl's reading of the query would have to miss) fails, never answers 0."""
    checkpoint = open_checkpoint(KEYED)
    with pytest.raises(QueryError, match="listed, not read"):
        run_query({"snapshot": checkpoint},
                  "SELECT (SELECT count(*) FROM information_schema.tables), "
                  "(SELECT count(*) FROM query_table('purchases.last_amount'))")


def test_listing_and_reading_at_once() -> None:
    listed = _query(KEYED, "SELECT count(*) AS t FROM information_schema.tables")[0]["t"]
    rows = _query(KEYED, "SELECT count(*) AS n, (SELECT count(*) FROM information_schema.tables)"
                         " AS t FROM purchases.last_amount")
    assert rows[0]["n"] > 0 and rows[0]["t"] == listed > 10
    code, out, err = run("query", KEYED, "DESCRIBE purchases.last_amount")
    assert code == 0 and "ttl_timestamp" in out, err
