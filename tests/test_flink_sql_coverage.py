"""Every SQL operator's state, as Flink's own classes read it (issue 40's acceptance).

The SQL coverage job (``tests/flink_sql_coverage.py``) snapshots a statement set with a query per
stateful SQL operator family five ways on Flink 2.3 and 1.20; ``StateReader.java`` reads each
snapshot with Flink's classes (and RocksDB's library). For every snapshot, statectl's commands,
as a user runs them:

* ``inspect --all --output json`` lists exactly the (operator, state) pairs the reader finds,
  never an operator with state among those without, and every state's entry count equals the
  reader's (an entry: a keyed state's key and namespace, an operator state's element);
* nothing is left unread (``not_read`` empty everywhere);
* ``export --format jsonl`` holds every keyed entry with the reader's value (parsed JSON
  compared; map entries of non-string keys and timers in any order);
* ``verify`` says clean (exit 0).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flink_sql_coverage import KINDS, VARIANTS, VERSIONS, SqlCoverage, sql_coverage

from cli.main import statectl

CASES = [(version, f"{variant}/{kind}") for version in VERSIONS for variant in VARIANTS
         for kind in KINDS]
IDS = [f"{version}-{name.replace('/', '-')}" for version, name in CASES]
SHOWN = 15
#: statectl's kind of a keyed state, by the kind Flink's meta info names.
KEYED_KINDS = {"VALUE": "value", "LIST": "list", "MAP": "map", "REDUCING": "reducing",
               "AGGREGATING": "aggregating"}


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@functools.cache
def _coverage(version: str) -> SqlCoverage:
    return sql_coverage(version)


def _run(*args: str) -> tuple[int, str]:
    """Exit code and stdout, stderr after it when the command failed."""
    result = CliRunner().invoke(statectl, list(args))
    if result.exit_code != 0:
        return result.exit_code, result.stdout[-1500:] + "\n" + result.stderr[-1500:]
    return result.exit_code, result.stdout


@functools.cache
def _inspect(version: str, name: str) -> dict[str, Any]:
    code, out = _run("--output", "json", "inspect", "--all",
                     str(_coverage(version).snapshots[name]))
    assert code == 0, out[-2000:]
    return json.loads(out)  # type: ignore[no-any-return]


def _listed(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(op["operator"]["id"], st["state"]): {**st, "operator": op["operator"]}
            for op in doc["operators"] for st in op["states"]}


def _name(op: dict[str, Any]) -> str:
    return f"{op.get('name') or op.get('uid') or ''} ({op['id']})"


def _shown(items: list[str]) -> str:
    more = f"\n  ... and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return "\n  " + "\n  ".join(items[:SHOWN]) + more


@pytest.mark.parametrize(("version", "name"), CASES, ids=IDS)
def test_inspect_lists_every_state_the_reader_finds(version: str, name: str) -> None:
    reference = _coverage(version).states(name)
    listed = _listed(_inspect(version, name))
    missing = sorted(f"{op}/{state}" for op, state in reference.keys() - listed.keys())
    extra = sorted(f"{op}/{state}" for op, state in listed.keys() - reference.keys())
    assert not missing and not extra, (f"states Flink's reader finds that inspect does not list:"
                                       f"{_shown(missing)}\nstates inspect lists that the reader "
                                       f"does not find:{_shown(extra)}")


@pytest.mark.parametrize(("version", "name"), CASES, ids=IDS)
def test_every_state_counted_and_read(version: str, name: str) -> None:
    reference = _coverage(version).states(name)
    listed = _listed(_inspect(version, name))
    wrong, unread = [], []
    for pair, line in sorted(reference.items()):
        mine = listed.get(pair)
        if mine is None:
            continue  # the test above reports it
        if mine["entries"] != line["entries"]:
            wrong.append(f"{_name(mine['operator'])}/{pair[1]}: {mine['entries']} entries, "
                         f"Flink's reader {line['entries']}")
        kind = KEYED_KINDS.get(line["kind"])
        if kind is not None and mine["kind"] != kind:
            wrong.append(f"{_name(mine['operator'])}/{pair[1]}: kind {mine['kind']}, Flink's "
                         f"{line['kind']}")
        if mine.get("not_read"):
            unread.append(f"{_name(mine['operator'])}/{pair[1]}: {mine['not_read']}")
    ops_unread = [f"{_name(op['operator'])}: {op['not_read']}"
                  for op in _inspect(version, name)["operators"] if op.get("not_read")]
    assert not wrong and not unread and not ops_unread, (
        f"counts that differ from Flink's:{_shown(wrong)}\nstates not read:{_shown(unread)}"
        f"\noperators not read:{_shown(ops_unread)}")


#: Fields of CEP's ``NFAState`` that hold priority queues: their order is the queue's heap
#: order, not data.
QUEUES = ("partialMatches", "completedMatches")


def _normal(value: Any) -> Any:
    """Order without meaning removed: lists of ``{key, value}`` by key, an NFA state's queues."""
    if isinstance(value, list) and value and all(
            isinstance(e, dict) and set(e) == {"key", "value"} for e in value):
        return sorted(value, key=lambda e: _text(e["key"]))
    if isinstance(value, dict) and set(QUEUES) <= value.keys():
        return {**value, **{q: sorted(value[q], key=_text) for q in QUEUES}}
    return value


@functools.cache
def _exported(version: str, name: str, tmp: Path) -> dict[tuple[str, str], Counter[str]]:
    out = tmp / "export"
    code, text = _run("export", "--format", "jsonl", "--out", str(out),
                      str(_coverage(version).snapshots[name]))
    assert code == 0, text[-2000:]
    manifest = json.loads((out / "_export.json").read_text())
    rows: dict[tuple[str, str], Counter[str]] = {}
    for table in manifest["tables"]:
        if table["scope"] != "keyed":
            continue
        pair = (table["operator"]["id"], table["state"])
        counter = rows.setdefault(pair, Counter())
        for line in (out / table["location"]).read_text().splitlines():
            row = json.loads(line)
            value = row["value"]
            if table["state"].startswith("_timer_state/") and isinstance(value, list):
                value = sorted(value)
            counter[_text([row["key"], row.get("namespace"), _normal(value)])] += 1
    return rows


@pytest.mark.parametrize(("version", "name"), CASES, ids=IDS)
def test_export_values_equal_the_readers(version: str, name: str, tmp_path: Path) -> None:
    cov = _coverage(version)
    keyed = {pair for pair, line in cov.states(name).items() if line["scope"] == "keyed"}
    theirs: dict[tuple[str, str], Counter[str]] = {}
    for line in cov.entries(name):
        pair = (line["op"], line["state"])
        if pair in keyed:
            value = line["value"]
            theirs.setdefault(pair, Counter())[
                _text([line["key"], line["ns"], _normal(value)])] += 1
    mine = _exported(version, name, tmp_path)
    differences = []
    for pair in sorted(keyed):
        a, b = mine.get(pair, Counter()), theirs.get(pair, Counter())
        if a != b:
            only_mine = sorted((a - b).elements())[:2]
            only_theirs = sorted((b - a).elements())[:2]
            differences.append(f"{pair[0]}/{pair[1]}: statectl {only_mine} / Flink "
                               f"{only_theirs}"[:600])
    assert not differences, f"exported entries that differ from Flink's:{_shown(differences)}"


@pytest.mark.parametrize(("version", "name"), CASES, ids=IDS)
def test_verify_is_clean(version: str, name: str) -> None:
    code, out = _run("verify", str(_coverage(version).snapshots[name]))
    assert code == 0, out[-3000:]
    assert "clean" in out, out[-3000:]
