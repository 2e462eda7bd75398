"""The upgrade ground truth is sane: Flink's outcome of job upgrades (``tests/flink_upgrade.py``).

Per Flink release (2.3 and 1.20): every case is there with both savepoints; the control case
(v2 is v1) restored; the upgrades Flink must refuse (an operator's uid renamed, a stateful
operator dropped, a key type changed, a POJO field's type changed) refused, with Flink's
exception recorded; the upgrades it must accept (a POJO field added or removed, an enum constant
appended, a state or an operator added) restored. statectl opens every savepoint.

The state dumps: v1's ``old-state.json`` holds every key's states as the job holds them, and
:func:`flink_upgrade.restore_and_dump` (restoring a savepoint into a case's v2 job, then the v2
job's dump) gives each representative case's recorded outcome when it restores the case's own
OLD, and for the control case (on both backends) the state of ``old-state.json`` itself; the
cross-release case's refusal too.
"""

from __future__ import annotations

import functools
import json
import re

import pytest
from cli_support import run
from flink_restore import FLINK_VERSION
from flink_upgrade import (
    CASES,
    CROSS_RELEASE,
    RestoreOutcome,
    RestoreRequest,
    UpgradeCase,
    cross_release_case,
    load_state,
    restore_and_dump_many,
    upgrade_cases,
)
from flink_versions import FLINK_1X

VERSIONS = (FLINK_VERSION, FLINK_1X)
#: Flink refuses these upgrades (without allowNonRestoredState) on every release.
REFUSED = ("uid-renamed", "operator-dropped", "key-type-long-to-string",
           "pojo-field-type-int-to-long", "tuple-key-to-pojo-key", "value-type-long-to-string",
           "state-kind-value-to-list", "max-parallelism-changed")
#: And restores these.
RESTORED = ("same", "pojo-field-added", "pojo-field-removed", "enum-constant-appended",
            "operator-added", "state-added", "state-removed")
#: Restored again with restore_and_dump (their own OLD): (case, backend).
REPRESENTATIVE = (("same", "hashmap"), ("same", "rocksdb"), ("pojo-field-added", "hashmap"),
                  ("operator-dropped", "hashmap"), ("key-type-long-to-string", "rocksdb"))


@functools.cache
def cases(version: str) -> dict[str, UpgradeCase]:
    return {case.name: case for case in upgrade_cases(version)}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_case_with_both_savepoints(version: str) -> None:
    found = cases(version)
    assert list(found) == list(CASES)
    for case in found.values():
        assert (case.old / "_metadata").is_file(), case
        assert (case.new / "_metadata").is_file(), case
        assert case.description
        assert set(case.outcome) == ({"restored"} if case.outcome["restored"]
                                     else {"restored", "exception", "message"}), case


@pytest.mark.parametrize("version", VERSIONS)
def test_control_case_restored(version: str) -> None:
    same = cases(version)["same"]
    assert same.outcome == {"restored": True}
    assert same.causes == ()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", REFUSED)
def test_refused_with_flinks_exception(version: str, name: str) -> None:
    case = cases(version)[name]
    assert case.outcome["restored"] is False, case
    exception, message = case.outcome["exception"], case.outcome["message"]
    assert exception.count(".") >= 2 and exception.split(".")[-1][0].isupper(), exception
    assert message and "\n" not in message
    assert case.causes[-1] == f"{exception}: {message}"


@pytest.mark.parametrize("version", VERSIONS)
def test_refusals_name_the_reason(version: str) -> None:
    found = cases(version)
    for name in ("uid-renamed", "operator-dropped"):
        assert "Cannot map checkpoint/savepoint state" in found[name].outcome["message"]
    for name in ("key-type-long-to-string", "tuple-key-to-pojo-key"):
        assert found[name].outcome["exception"] == "org.apache.flink.util.StateMigrationException"
        assert "key serializer" in found[name].outcome["message"]
    assert "Max parallelism mismatch" in found["max-parallelism-changed"].outcome["message"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", RESTORED)
def test_restored(version: str, name: str) -> None:
    assert cases(version)[name].outcome == {"restored": True}


@pytest.mark.parametrize("version", VERSIONS)
def test_statectl_opens_every_savepoint(version: str) -> None:
    paths = sorted({p for case in cases(version).values() for p in (case.old, case.new)})
    failed = {}
    for path in paths:
        code, out, err = run("--output", "json", "inspect", str(path))
        if code != 0:
            failed[path.parent.name] = err[-500:]
            continue
        operators = json.loads(out)["operators"]
        if not any(state["state"] == "pojo" for op in operators for state in op["states"]):
            failed[path.parent.name] = "no state 'pojo'"
    assert not failed, failed


def test_cross_release_case() -> None:
    case = cross_release_case()
    assert case.name == CROSS_RELEASE
    assert (case.old / "_metadata").is_file() and (case.new / "_metadata").is_file()
    assert case.old != case.new
    # the job restores its own savepoint on both releases (the control)...
    for version in VERSIONS:
        assert cases(version)["same-java-time-collections"].outcome == {"restored": True}
    # ...but Flink 2.3 refuses 1.20's: its heap backend fails to read the POJO's values
    assert case.outcome["restored"] is False, case
    assert case.outcome["exception"] and case.outcome["message"], case
    code, _out, err = run("--output", "json", "inspect", str(case.old))
    assert code == 0, err


# ---------------------------------------------------------------------- the state dumps


def _same_state() -> list[dict]:
    """v1's state in ``same``: 4 keys, the values 0 and 1 each (see upgrade.job.Stateful)."""
    entries = []
    for key in range(4):
        entries += [
            {"operator": "second", "state": "sum", "key": key, "value": 1},
            {"operator": "stateful", "state": "color", "key": key,
             "value": ("RED", "GREEN", "BLUE")[(key + 1) % 3]},
            {"operator": "stateful", "state": "count", "key": key, "value": 2},
            {"operator": "stateful", "state": "pojo", "key": key,
             "value": {"id": key, "name": f"item-{key}", "qty": 3}},
        ]
    return _sorted(entries)


def _sorted(entries: list[dict]) -> list[dict]:
    return sorted(entries, key=lambda e: (e["operator"], e["state"], json.dumps(e["key"])))


@pytest.mark.parametrize("version", VERSIONS)
def test_old_state_dumped(version: str) -> None:
    found = cases(version)
    for case in found.values():
        assert case.old_state is not None and case.old_state.parent == case.old.parent, case
        state = load_state(case.old_state)
        assert {e["operator"] for e in state} >= {"stateful"}, case.name
        assert {e["state"] for e in state} >= {"pojo"}, case.name
        assert all(set(e) == {"operator", "state", "key", "value"} for e in state), case.name
    assert load_state(found["same"].old_state) == _same_state()
    # keys and values as canonical JSON: a Tuple2 key by its fields, java.time as ISO strings
    tuple_key = load_state(found["tuple-key-to-pojo-key"].old_state)
    assert {"f0": "k1", "f1": 1} in [e["key"] for e in tuple_key]
    java_time = {e["key"]: e["value"]
                 for e in load_state(found["same-java-time-collections"].old_state)
                 if e["state"] == "pojo"}
    assert java_time[1] == {"id": 1, "name": "item-1", "qty": 3, "at": "2023-11-14T22:13:21.001Z",
                            "day": "2024-01-02", "when": "2024-02-03T04:06:06Z", "took": "PT1M1S",
                            "tags": ["v0", "v1"], "counts": {"n": 2}}


@functools.cache
def restored(version: str) -> tuple[RestoreOutcome, ...]:
    """restore_and_dump of each REPRESENTATIVE case's own OLD (and, on 2.3, the cross-release
    case's), in one JVM."""
    found = cases(version)
    requests = [RestoreRequest(name, found[name].old, backend) for name, backend in REPRESENTATIVE]
    if version == FLINK_VERSION:
        requests.append(RestoreRequest(CROSS_RELEASE, cross_release_case().old, "hashmap"))
    return tuple(restore_and_dump_many(version, requests))


def _comparable(outcome: dict) -> dict:
    """An outcome without the serializers' identity hash codes in its message."""
    if "message" in outcome:
        return {**outcome, "message": re.sub(r"@[0-9a-f]+\b", "@", outcome["message"])}
    return outcome


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("index", range(len(REPRESENTATIVE)),
                         ids=[f"{n}-{b}" for n, b in REPRESENTATIVE])
def test_restore_and_dump_gives_the_recorded_outcome(version: str, index: int) -> None:
    name, _backend = REPRESENTATIVE[index]
    case, outcome = cases(version)[name], restored(version)[index]
    assert _comparable(outcome.outcome) == _comparable(case.outcome), (outcome, case)
    if outcome.restored:
        assert outcome.causes == () and outcome.state
    else:
        assert outcome.causes and outcome.state == []


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_restored_state_is_the_old_state(version: str, backend: str) -> None:
    index = REPRESENTATIVE.index(("same", backend))
    assert restored(version)[index].state == load_state(cases(version)["same"].old_state)


@pytest.mark.parametrize("version", VERSIONS)
def test_restored_state_migrated(version: str) -> None:
    # pojo-field-added: every value intact, the new field at its default
    old = load_state(cases(version)["pojo-field-added"].old_state)
    expected = [{**e, "value": {**e["value"], "extra": 0}} if e["state"] == "pojo" else e
                for e in old]
    index = REPRESENTATIVE.index(("pojo-field-added", "hashmap"))
    assert restored(version)[index].state == expected


def test_restore_and_dump_cross_release() -> None:
    outcome = restored(FLINK_VERSION)[len(REPRESENTATIVE)]
    case = cross_release_case()
    assert _comparable(outcome.outcome) == _comparable(case.outcome), (outcome, case)
