"""The upgrade ground truth is sane: Flink's outcome of job upgrades (``tests/flink_upgrade.py``).

Per Flink release (2.3 and 1.20): every case is there with both savepoints; the control case
(v2 is v1) restored; the upgrades Flink must refuse (an operator's uid renamed, a stateful
operator dropped, a key type changed, a POJO field's type changed) refused, with Flink's
exception recorded; the upgrades it must accept (a POJO field added or removed, an enum constant
appended, a state or an operator added) restored. statectl opens every savepoint.
"""

from __future__ import annotations

import functools
import json

import pytest
from cli_support import run
from flink_restore import FLINK_VERSION
from flink_upgrade import CASES, CROSS_RELEASE, UpgradeCase, cross_release_case, upgrade_cases
from flink_versions import FLINK_1X

VERSIONS = (FLINK_VERSION, FLINK_1X)
#: Flink refuses these upgrades (without allowNonRestoredState) on every release.
REFUSED = ("uid-renamed", "operator-dropped", "key-type-long-to-string",
           "pojo-field-type-int-to-long", "tuple-key-to-pojo-key", "value-type-long-to-string",
           "state-kind-value-to-list", "max-parallelism-changed")
#: And restores these.
RESTORED = ("same", "pojo-field-added", "pojo-field-removed", "enum-constant-appended",
            "operator-added", "state-added", "state-removed")


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
            failed[path.name] = err[-500:]
            continue
        operators = json.loads(out)["operators"]
        if not any(state["state"] == "pojo" for op in operators for state in op["states"]):
            failed[path.name] = "no state 'pojo'"
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
