"""Honest accounting (issue 40): a state statectl cannot read is listed, counted and reported.

Real snapshots of the fixture sets (heap checkpoint, canonical savepoint, RocksDB incremental
checkpoint and native savepoint), copied, with serializer snapshots renamed to classes statectl
does not know (the same number of bytes, so every offset stays valid):

* **values**: the ``LocalDate`` serializer of the ``day`` state: its header parses, its values
  cannot be decoded. The state shows its entries in every kind (a heap checkpoint writes each
  state block's entry count before its entries), with why they were not decoded;
* **header**: the ``LocalDate`` and the ``Enum`` serializers: the header no longer parses
  exactly (two snapshots nothing frames), so its states are recovered from its structure: every
  state keeps its name and kind, the unreadable ones say why, the operator never shows among
  those "without state";
* **SQL**: the SQL fixtures' ``RowDataSerializer`` (keys and values): the SQL operators have no
  uid, and every message names them as ``inspect`` does (``GroupAggregate[13] (<id>)``).

``verify`` is clean only when every state was read: else it exits 1 with one problem per state
not read. Every JSON document is checked against docs/schema.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import run, run_json
from flink_fixtures import backend, expected, require_fixtures
from test_json_contract import check

from formats.flink.java.input import DataReader
from formats.flink.read.state_meta import read_keyed_header

DAY = ("LocalDateSerializer$LocalDateSerializerSnapshot",
       "LocalDatXSerializer$LocalDateSerializerSnapshot")
ENUM = ("EnumSerializer$EnumSerializerSnapshot", "EnumSerializXr$EnumSerializerSnapshot")
ROW = ("RowDataSerializer$RowDataSerializerSnapshot", "RowDataSerializXr$RowDataSerializerSnapshot")
#: The states of ``pojo-keyed`` whose values have an Enum or LocalDate serializer somewhere.
BROKEN = {"day", "status", "per-status", "last-event", "recent"}


def _p2(*roots: str, job: str | None = None) -> Iterator[tuple[str, Path]]:
    """The snapshots each set's job took itself (not Flink's rescaled restores of them), at
    whatever parallelism its expected.json says; of ``job``'s sets only, when given. Each is
    labelled ``SET:FORMAT-KIND [BACKEND]`` (the backend as Flink's reading of the set found)."""
    for root in roots:
        for fixture_set in require_fixtures(root):
            said = expected(fixture_set)
            if job is not None and said["job"] != job:
                continue
            for snap in said["snapshots"]:
                if "rescaled_from" not in snap:
                    yield (f"{fixture_set.name}:{snap['format']}-{snap['kind']} "
                           f"[{backend(fixture_set)}]", fixture_set / snap["path"])


TYPES = list(_p2("types"))
SQL = list(_p2("heap", "rocksdb", job="sql"))


def _broken_copy(snapshot: Path, tmp_path: Path, *renames: tuple[str, str]) -> Path:
    """The snapshot (with a checkpoint's job folder: RocksDB's shared files) copied, each
    ``(class, unknown class)`` renamed in every file (the meta info of a RocksDB handle is a
    stream of its own: inline in ``_metadata`` or a file)."""
    base = snapshot.parent if snapshot.name.startswith("chk-") else snapshot
    shutil.copytree(base, tmp_path / base.name)
    copy = tmp_path / base.name / snapshot.name if base != snapshot else tmp_path / base.name
    changed = 0
    for path in sorted((tmp_path / base.name).rglob("*")):
        if not path.is_file():
            continue
        data = new = path.read_bytes()
        for known, unknown in renames:
            assert len(known) == len(unknown)
            new = new.replace(known.encode(), unknown.encode())
        if new != data:
            path.write_bytes(new)
            changed += 1
    assert changed, f"nothing renamed in {snapshot}"
    return copy


def _states(document: dict[str, Any], uid: str | None = None) -> dict[tuple[str, str], Any]:
    """``inspect``'s states by (operator label, state)."""
    out = {}
    for op in document["operators"]:
        identity = op["operator"]
        label = identity["uid"] or f"{identity['name']} ({identity['id']})"
        if uid is None or identity["uid"] == uid:
            for state in op["states"]:
                out[(label, state["state"])] = state
    return out


@pytest.mark.parametrize(("name", "snapshot"), TYPES, ids=[t[0] for t in TYPES])
def test_values_without_a_decoder_are_counted_in_every_kind(name: str, snapshot: Path,
                                                            tmp_path: Path) -> None:
    copy = _broken_copy(snapshot, tmp_path, DAY)
    before = _states(run_json("inspect", str(snapshot), "--all"), "pojo-keyed")
    document = run_json("inspect", str(copy), "--all")
    check(document, "inspect")
    after = _states(document, "pojo-keyed")
    assert set(after) == set(before)
    day = after[("pojo-keyed", "day")]
    entries = before[("pojo-keyed", "day")]["entries"]
    assert entries > 0
    # counted: the heap format's blocks say how many entries, the others keep them as markers
    assert day["entries"] == entries and day["bytes"] > 0, day
    assert day["not_read"]["entries"] == entries and not day["not_read"]["damaged"]
    assert "LocalDatXSerializer" in day["not_read"]["reason"]
    for key, state in before.items():
        if key[1] != "day":
            assert after[key] == state, key  # nothing else changed
    code, out, err = run("inspect", str(copy), "--all")
    assert code == 0 and "100 entries not decoded" in out, out
    # the summary decodes nothing: the state's declaration tells what cannot be decoded
    summary = run_json("inspect", str(copy))
    check(summary, "inspect")
    state = _states(summary, "pojo-keyed")[("pojo-keyed", "day")]
    assert state["entries"] is None and "LocalDatXSerializer" in state["not_read"]["reason"]
    _verify_names(copy, {("pojo-keyed", "day")}, entries)


@pytest.mark.parametrize(("name", "snapshot"), TYPES, ids=[t[0] for t in TYPES])
def test_a_header_that_does_not_parse_still_lists_every_state(name: str, snapshot: Path,
                                                              tmp_path: Path) -> None:
    copy = _broken_copy(snapshot, tmp_path, DAY, ENUM)
    before = _states(run_json("inspect", str(snapshot), "--all"), "pojo-keyed")
    document = run_json("inspect", str(copy), "--all")
    check(document, "inspect")
    after = _states(document, "pojo-keyed")
    assert set(after) == set(before)  # every state, by name
    exact = 0
    for key, state in after.items():
        was = before[key]
        assert state["kind"] == was["kind"] and state["scope"] == was["scope"], key
        if key[1] not in BROKEN:
            assert "not_read" not in state and state["entries"] == was["entries"], key
            continue
        not_read = state["not_read"]
        assert not_read["reason"] and not not_read["damaged"], key
        if not_read["entries"] is not None:  # counted: exactly the state's entries
            exact += 1
            assert not_read["entries"] == state["entries"] == was["entries"], key
    # the formats that delimit values count every state; the heap format the states whose
    # block it met first in each key group (the next block is found by decoding one)
    heap = "native" in name and "[rocksdb]" not in name
    assert exact >= 1 if heap else exact == len(BROKEN), exact
    code, out, err = run("inspect", str(copy))  # the summary: not "without state"
    assert code == 0 and "pojo-keyed" in out, err
    assert "pojo-keyed" not in next((line for line in out.splitlines()
                                     if "without state" in line), ""), out
    for state in BROKEN:
        assert any(state in line and ("not decodable" in line or "not read" in line)
                   for line in out.splitlines()), (state, out)
    _verify_names(copy, {("pojo-keyed", s) for s in BROKEN}, None)


def _verify_names(copy: Path, unread: set[tuple[str, str]], entries: int | None) -> None:
    """``verify`` exits 1 with one ``undecodable`` problem per state not read."""
    report = run_json("verify", str(copy), code=1)
    check(report, "verify")
    assert not report["clean"]
    problems = [p for p in report["problems"] if p["kind"] == "undecodable"]
    assert {tuple(p["where"].split("/", 1)) for p in problems} == unread, problems
    assert all(p["operator"]["uid"] == "pojo-keyed" for p in problems)
    assert report["not_read"]["states"] == len(unread)
    if entries is not None:
        assert report["not_read"]["entries"] == entries
    code, out, _ = run("verify", str(copy))
    assert code == 1 and "clean" not in out and "not read: " in out, out


def test_the_header_is_recovered_from_its_structure() -> None:
    """Two unparsable snapshots in one header (a heap stream of the types fixture): the states
    are found by their structure, in the header's order, and say what was not read."""
    snapshot = next(path for name, path in TYPES if ":native-checkpoint " in name
                    and "[rocksdb]" not in name)
    found = 0
    for path in sorted(snapshot.iterdir()):
        data = path.read_bytes()
        if DAY[0].encode() not in data or path.name == "_metadata":
            continue
        exact = read_keyed_header(DataReader(data, "test"))
        broken = data.replace(DAY[0].encode(), DAY[1].encode()).replace(
            ENUM[0].encode(), ENUM[1].encode())
        # the header's end (the first key group's offset) is what lets it be recovered
        header = read_keyed_header(DataReader(broken, "test"), exact.size)
        assert header.recovered and not exact.recovered and not header.missing
        assert [(s.name, s.kind) for s in header.states] == [
            (s.name, s.kind) for s in exact.states]
        assert header.size == exact.size and header.key is not None
        for state, was in zip(header.states, exact.states, strict=True):
            if state.name not in BROKEN:
                assert state.raw == was.raw and state.value is not None, state.name
            else:
                assert state.value is None, state.name
        found += 1
    assert found


@pytest.mark.parametrize(("name", "snapshot"), SQL, ids=[s[0] for s in SQL])
def test_sql_operators_are_named_as_inspect_names_them(name: str, snapshot: Path,
                                                       tmp_path: Path) -> None:
    """Keys and values of an unknown ``RowDataSerializer``: every SQL operator's states are
    listed and reported by the operator's name and OperatorID, never by the OperatorID alone."""
    copy = _broken_copy(snapshot, tmp_path, ROW)
    before = _states(run_json("inspect", str(snapshot), "--all"))
    document = run_json("inspect", str(copy), "--all")
    check(document, "inspect")
    after = _states(document)
    assert set(after) == set(before)
    keyed = {key for key, state in before.items() if state["scope"] == "keyed"}
    assert keyed and all(key[0].startswith(("GroupAggregate[", "Group")) for key in keyed)
    for key in keyed:
        if before[key]["entries"]:
            assert after[key]["not_read"]["reason"], key
    labels = {key[0] for key in keyed}
    report = run_json("verify", str(copy), code=1)
    check(report, "verify")
    wheres = {p["where"] for p in report["problems"] if p["kind"] == "undecodable"}
    assert wheres and all(any(w.startswith(f"{label}/") for label in labels)
                          for w in wheres), wheres
    for problem in report["problems"]:
        assert problem["operator"]["name"] and problem["operator"]["uid"] is None
    code, _, err = run("inspect", str(copy), "--all")
    assert code == 0 and "not decoded" in err
    for label in labels:  # the stderr line names every operator as inspect does
        assert label in err, err
    # the id alone never names an operator
    ids = {label.rsplit("(", 1)[1].rstrip(")") for label in labels}
    assert not any(f"{i}/" in err and f"({i})/" not in err for i in ids), err


def test_operator_state_with_an_unknown_serializer_is_listed(tmp_path: Path) -> None:
    """An operator state header with a serializer snapshot statectl cannot parse: its states are
    recovered, the readable one decoded, the other's elements kept as their bytes (each is
    delimited by the handle's offsets) and counted."""
    snapshots = [path for name, path in _p2("heap", job="java") if ":canonical-" in name]
    assert snapshots, "no canonical savepoint of the java fixture"
    long = ("LongSerializer$LongSerializerSnapshot", "LongSerializXr$LongSerializerSnapshot")
    copy = _broken_copy(snapshots[0], tmp_path, long)
    before = _states(run_json("inspect", str(snapshots[0]), "--all"), "op-state-map")
    document = run_json("inspect", str(copy), "--all")
    check(document, "inspect")
    after = _states(document, "op-state-map")
    assert set(after) == set(before) and len(after) == 2
    unread = [key for key, state in after.items() if "not_read" in state]
    assert len(unread) == 1, after
    for key, state in after.items():
        assert state["entries"] == before[key]["entries"] > 0, key
        if key in unread:
            assert state["not_read"]["entries"] == state["entries"]
            assert "LongSerializXr" in state["not_read"]["reason"]
        else:
            assert state == before[key]
    report = run_json("verify", str(copy), code=1)
    check(report, "verify")
    assert any(p["where"] == "/".join(unread[0]) for p in report["problems"]), report
