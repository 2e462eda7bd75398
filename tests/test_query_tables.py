"""Tables users can query without knowing Flink's internals (issue 44, item 2).

Next to each state's table (``export``'s rows):

* ``"<state>$elements"`` of a keyed list state: a row per element, ``position`` 0-based, the
  element's own ``ttl_timestamp``; ``"<state>$entries"`` of a keyed map state: a row per
  entry, ``map_key``;
* ``window_start`` / ``window_end`` (TIMESTAMP, UTC) of a Flink time window namespace;
* ``key_<field>`` per field of a composite key (tuples, POJOs, rows).

Each is checked against the state's own table, which ``test_query.py`` checks against
``export``: the flattened rows are exactly the elements and entries of its rows, in order, the
window bounds and key fields exactly its namespace's and key's. On the sample checkpoints and
the Flink types fixtures (POJOs, tuple keys, windows, TTL).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED
from flink_fixtures import expected, fixture_sets, require_fixtures

from formats.open import open_checkpoint
from formats.ops.query import run_query


def _snapshots() -> list[str]:
    sets = fixture_sets("types") or require_fixtures("types")
    return [KEYED, *(str(s / snap["path"]) for s in sets for snap in expected(s)["snapshots"]
                     if "canonical" in snap["path"] or snap["kind"] == "checkpoint")]


def _rows(location: str, sql: str) -> list[dict[str, Any]]:
    return run_query({"snapshot": open_checkpoint(location, partial=True)},
                     sql).table.to_pylist()


def _states(location: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [s for s in _rows(location, "SELECT operator, state, kind, scope FROM statectl.states")
            if s["scope"] == "keyed" and (kind is None or s["kind"] == kind)]


def _table(state: dict[str, Any], suffix: str = "") -> str:
    return f'"{state["operator"]}"."{state["state"]}{suffix}"'


def _identity(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["subtask"], row["key_group"], repr(row["key"]), repr(row["namespace"]))


@pytest.mark.parametrize("location", _snapshots(), ids=lambda p: "/".join(Path(p).parts[-4:]))
def test_flattened_tables_are_the_elements_and_entries(location: str) -> None:
    checked = 0
    for kind, suffix in (("list", "$elements"), ("map", "$entries")):
        for state in _states(location, kind):
            base = _rows(location, f"SELECT * FROM {_table(state)}")
            flat = _rows(location, f"SELECT * FROM {_table(state, suffix)}")
            expected_rows = []
            for row in base:
                if row["value"] is None:
                    continue
                if kind == "list":
                    ttl = row["ttl_timestamp"] or [None] * len(row["value"])
                    expected_rows += [(*_identity(row), i, repr(v), t)
                                      for i, (v, t) in enumerate(zip(row["value"], ttl,
                                                                     strict=True))]
                else:
                    ttl = dict(row["ttl_timestamp"] or [])
                    expected_rows += [(*_identity(row), repr(k), repr(v), ttl.get(k))
                                      for k, v in row["value"]]
            got = [(*_identity(r), r["position"] if kind == "list" else repr(r["map_key"]),
                    repr(r["value"]), r["ttl_timestamp"]) for r in flat]
            assert sorted(got, key=repr) == sorted(expected_rows, key=repr), _table(state)
            checked += 1
    assert checked or "types" not in location


@pytest.mark.parametrize("location", _snapshots(), ids=lambda p: "/".join(Path(p).parts[-4:]))
def test_window_bounds_and_key_fields_are_columns(location: str) -> None:
    windows = keys = 0
    for state in _states(location):
        rows = _rows(location, f"SELECT * FROM {_table(state)}")
        for row in rows:
            namespace, key = row["namespace"], row["key"]
            if isinstance(namespace, dict) and set(namespace) == {"start", "end"}:
                assert row["window_start"] == datetime.fromtimestamp(
                    namespace["start"] / 1000, tz=UTC)
                assert row["window_end"] == datetime.fromtimestamp(namespace["end"] / 1000,
                                                                   tz=UTC)
                windows += 1
            else:
                assert "window_start" not in row
            if isinstance(key, dict):
                assert {f"key_{k}": v for k, v in key.items()} == {
                    c: v for c, v in row.items() if c.startswith("key_") and c != "key_group"}
                keys += 1
    said = _expected_operators(location)  # what the set's expected.json says its job holds
    if any(str(op.get("key_type", "")).startswith("Tuple") for op in said.values()):
        assert keys, "a tuple-keyed operator, but no key_<field> columns"
    if any("window" in name for op in said.values() for name in op.get("keyed_states", {})):
        assert windows, "a window state, but no window_start/window_end"


def _expected_operators(location: str) -> dict[str, Any]:
    for fixture in fixture_sets("types"):
        if location.startswith(str(fixture)):
            operators: dict[str, Any] = expected(fixture).get("operators", {})
            return operators
    return {}
