"""A SQL operator's key typed as a user types it: the grouping column's value alone.

Flink SQL keys every stateful operator by a row of its grouping columns; grouped by one column,
the key is a one-field row (``tuple<int64>``). ``inspect --key 1000`` finds it as
``inspect --key '[1000]'`` does, and both show what Flink's own reader
(``tests/flink_jobs/StateReader.java``) found under that key, for every operator of the SQL
coverage job keyed by one column.
"""

from __future__ import annotations

import json
from typing import Any

from cli_support import run
from flink_restore import FLINK_VERSION
from flink_sql_coverage import sql_coverage

NAME = "plain/heap-savepoint-canonical"


def _inspect_key(path: str, key: str) -> dict[str, Any]:
    code, out, err = run("--output", "json", "inspect", path, "--key", key)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _normal(value: Any) -> Any:
    if isinstance(value, list) and value and all(
            isinstance(e, dict) and set(e) == {"key", "value"} for e in value):
        return sorted(value, key=lambda e: json.dumps(e["key"], sort_keys=True))
    return value


def _found(doc: dict[str, Any], op: str) -> dict[str, Any]:
    """``state -> value`` that ``inspect --key`` found in one operator (no namespace)."""
    return {s["state"]: _normal(e["value"]) for s in doc["lookup"]["states"]
            if s["operator"]["id"] == op for e in s["entries"] if e["namespace"] is None}


def test_a_one_column_key_is_typed_as_its_value() -> None:
    cov = sql_coverage(FLINK_VERSION)
    path = str(cov.snapshots[NAME])
    keys: dict[str, Any] = {}
    for line in cov.entries(NAME):
        key = line["key"]
        if isinstance(key, list) and len(key) == 1 and isinstance(key[0], int | str) \
                and line["ns"] is None and line["value"] not in ({}, []):
            keys.setdefault(line["op"], key)
    assert len(keys) >= 5, keys  # the job groups by one column in many operators
    for op, key in sorted(keys.items()):
        bare = key[0] if isinstance(key[0], str) else str(key[0])
        by_value = _found(_inspect_key(path, bare), op)
        assert by_value == _found(_inspect_key(path, json.dumps(key)), op), (op, bare)
        theirs = {line["state"]: _normal(line["value"]) for line in cov.entries(NAME)
                  if line["op"] == op and line["key"] == key and line["ns"] is None
                  and line["value"] not in ({}, [])}
        assert theirs, (op, key)
        assert {state: by_value.get(state) for state in theirs} == theirs, (op, bare)
