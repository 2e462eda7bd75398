"""One value, one JSON form, whichever command shows it (issue 41).

Every value type the fixtures hold -- the types fixtures (POJOs, enums, instants, dates, maps
with enum keys, tuple keys, window namespaces, TTL), the Flink SQL fixtures (row keys, row
accumulators with bytes, maps with integer keys) and statectl's own samples -- goes through
``inspect --key K --output json``, ``export --format jsonl`` and ``query --output json``
(``SELECT *`` of the state's rows for K), and each gives the same JSON value: key, namespace,
value and TTL timestamp of every entry. Keys are taken from the snapshot itself (from what
``export`` wrote), a few per state; operator state (no key to look up) is compared between
``export`` and ``query`` whole.

The one difference by design: export's JSON Lines write non-finite floats as the literals
``NaN``/``Infinity`` (a column keeps one type for pyarrow and pandas), JSON documents as the
strings ``"NaN"``/``"Infinity"`` (docs/json.md); they are compared as the same value.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED, OPERATOR, run_json
from flink_fixtures import expected, fixture_sets
from test_flink_undecodable import DAY_SNAPSHOT, UNKNOWN_SNAPSHOT

#: Keys looked up per state: the first, a middle and the last (by their JSON text).
KEYS_PER_STATE = 3


def _sources() -> list[tuple[str, str]]:
    """``(id, location)``: per fixture set of the types root and every SQL set, the first
    snapshot of each format its expected.json lists; statectl's samples."""
    found = []
    sets = fixture_sets("types") + [s for root in ("heap", "rocksdb")
                                    for s in fixture_sets(root) if expected(s)["job"] == "sql"]
    for fixture in sets:
        formats: set[str] = set()
        for snap in expected(fixture)["snapshots"]:
            if snap["format"] not in formats:
                formats.add(snap["format"])
                found.append((f"{fixture.name}:{snap['path']}", str(fixture / snap["path"])))
    return found + [(Path(KEYED).name, KEYED), (Path(OPERATOR).name, OPERATOR)]


SOURCES = _sources()


def _same(value: Any) -> Any:
    """A JSON value with non-finite floats as the strings documents hold."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [_same(v) for v in value]
    if isinstance(value, dict):
        return {k: _same(v) for k, v in value.items()}
    return value


def _entry(row: dict[str, Any]) -> str:
    """What one entry holds, as comparable text (an undecodable value: its marker)."""
    value = row.get("value_undecodable") or row.get("value")
    return json.dumps(_same({"key": row.get("key"), "namespace": row.get("namespace"),
                             "value": value, "ttl_timestamp": row.get("ttl_timestamp")}),
                      sort_keys=True)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(key: Any) -> str | None:
    """``key`` (its JSON form) as a SQL constant, or None (then: its key group)."""
    if isinstance(key, bool):
        return "TRUE" if key else "FALSE"
    if isinstance(key, str):
        return "'" + key.replace("'", "''") + "'"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, list) and key and all(not isinstance(v, list | dict) for v in key):
        fields = [_literal(v) for v in key]
        if None in fields:
            return None
        return "{" + ", ".join(f"'f{i}': {f}" for i, f in enumerate(fields)) + "}"
    return None


def _key_text(key: Any, key_type: str) -> str:
    """``key`` (its JSON form) as ``inspect --key`` takes it."""
    if key_type == "bytes":
        return base64.b64decode(key).hex()
    if isinstance(key, str):
        return key
    return json.dumps(key)


def _sample(keys: list[Any]) -> list[Any]:
    ordered = sorted({json.dumps(k, sort_keys=True) for k in keys})
    picked = sorted({0, len(ordered) // 2, len(ordered) - 1})[:KEYS_PER_STATE]
    return [json.loads(ordered[i]) for i in picked]


@pytest.mark.parametrize("location", [loc for _, loc in SOURCES],
                         ids=[name for name, _ in SOURCES])
def test_inspect_export_and_query_give_every_value_one_form(location: str,
                                                            tmp_path: Path) -> None:
    compared = _compare(location, tmp_path)
    assert compared["keyed"] or compared["operator"], "nothing compared"


def test_a_value_statectl_cannot_decode_is_one_marker_everywhere(tmp_path: Path) -> None:
    """The ``day`` state of a canonical savepoint of the types fixtures, its serializer
    renamed to one statectl does not know: its values are markers with their bytes, the
    same object from each command (query: the ``value_undecodable`` column)."""
    snapshots = [fixture / snap["path"] for fixture in fixture_sets("types")
                 for snap in expected(fixture)["snapshots"] if snap["format"] == "canonical"]
    assert snapshots, "no canonical savepoint in the types fixtures"
    copy = tmp_path / "savepoint"
    shutil.copytree(snapshots[0], copy)
    for path in copy.rglob("*"):
        if path.is_file() and DAY_SNAPSHOT in path.read_bytes():
            path.write_bytes(path.read_bytes().replace(DAY_SNAPSHOT, UNKNOWN_SNAPSHOT))
    compared = _compare(str(copy), tmp_path, state="day")
    assert compared["undecodable"] > 0, compared


def _compare(location: str, tmp_path: Path, state: str | None = None) -> Counter[str]:
    """Compare every state's (or ``state``'s) values; what was compared, by kind."""
    out = tmp_path / "export"
    run_json("export", location, "--format", "jsonl", "--out", str(out))
    manifest = json.loads((out / "_export.json").read_text())
    sql_names = {r["operator_id"]: r["operator"] for r in run_json(
        "query", location, "SELECT operator, operator_id FROM statectl.operators")["rows"]}
    key_types = {(r["operator"], r["state"]): r["key_type"] for r in run_json(
        "query", location, "SELECT operator, state, key_type FROM statectl.states")["rows"]}
    looked_up: dict[str, dict[tuple[str, str], list[dict[str, Any]]]] = {}
    compared: Counter[str] = Counter()
    for table in manifest["tables"]:
        if not table["rows"] or state not in (None, table["state"]):
            continue
        exported = [json.loads(line) for line in
                    (out / table["location"]).read_text(encoding="utf-8").splitlines()]
        operator = sql_names[table["operator"]["id"]]
        name = f"{_quoted(operator)}.{_quoted(table['state'])}"
        where = (table["operator"]["id"], table["state"])
        if table["scope"] != "keyed":
            rows = run_json("query", location, f"SELECT * FROM {name}")["rows"]
            assert Counter(map(_entry, rows)) == Counter(map(_entry, exported)), where
            compared["operator"] += len(rows)
            continue
        key_type = key_types[operator, table["state"]]
        for key in _sample([row["key"] for row in exported]):
            want = Counter(_entry(r) for r in exported if r["key"] == key)
            literal = _literal(key)
            groups = sorted({r["key_group"] for r in exported if r["key"] == key})
            sql = (f"SELECT * FROM {name} WHERE key = {literal}" if literal is not None else
                   f"SELECT * FROM {name} WHERE key_group IN ({', '.join(map(str, groups))})")
            rows = [r for r in run_json("query", location, sql)["rows"] if r["key"] == key]
            assert Counter(map(_entry, rows)) == want, (where, key, "query")
            text = _key_text(key, key_type)
            if text not in looked_up:
                document = run_json("inspect", location, "--key", text)
                looked_up[text] = {(s["operator"]["id"], s["state"]): s["entries"]
                                   for s in document["lookup"]["states"]}
            entries = looked_up[text][where]
            assert Counter(map(_entry, entries)) == want, (where, key, "inspect")
            compared["keyed"] += sum(want.values())
            compared["undecodable"] += sum(
                isinstance(r.get("value_undecodable"), dict) for r in rows)
    return compared
