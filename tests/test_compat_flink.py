"""``statectl compat`` says what real Flink does, for every kind of job change (issue 43).

Ground truth: ``tests/flink_upgrade.py`` restores each v1 savepoint into v2 in real Flink (2.3
and 1.20, and a 1.20 job's savepoint into the same job on 2.3), without
``allowNonRestoredState``, and records whether it restored or the exception that stopped it.
For every case:

* restored by Flink -> ``restores`` (exit 0); refused -> never ``restores``: ``cannot`` (exit 3),
  ``restores-dropping-state`` (exit 1) exactly where Flink said it cannot map OLD's state to the
  new program (it restores only with ``allowNonRestoredState``), ``restores-after-migrate``
  (exit 1) exactly for the changes :data:`MIGRATABLE` names (int to long, Kryo 2 to Flink 2.x's
  own serializers);
* the reason compat gives is Flink's: a key serializer refusal names the key, a state type
  refusal the state, a max-parallelism mismatch the operators, an unmapped state the operator
  dropped.
"""

from __future__ import annotations

from typing import Any

import pytest
from cli_support import run_json
from flink_upgrade import CASES, UpgradeCase, cross_release_case, upgrade_cases
from test_json_contract import check

from statecore.hashing import operator_id_of_uid

RELEASES = ("2.3.0", "1.20.5")
#: the refused cases whose values statectl migrate converts
MIGRATABLE = {"pojo-field-type-int-to-long", "cross-release"}


def _case(version: str, name: str) -> UpgradeCase:
    if name == "cross-release":
        return cross_release_case()
    return next(c for c in upgrade_cases(version) if c.name == name)


PARAMS = [(v, n) for v in RELEASES for n in CASES] + [("1.20.5->2.3.0", "cross-release")]


def _flink_said(case: UpgradeCase) -> str:
    return " / ".join(case.causes) or str(case.outcome.get("message", ""))


def _incompatible(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for op in document["operators"] for s in op["states"]
            if s["verdict"] == "incompatible"]


@pytest.mark.parametrize(("version", "name"), PARAMS, ids=[f"{v}-{n}" for v, n in PARAMS])
def test_compat_agrees_with_flink(version: str, name: str) -> None:
    case = _case(version, name)
    restored = case.outcome["restored"]
    said = _flink_said(case)
    unmapped = "not available in the new program" in said  # Flink: "Cannot map ... state"
    expected_code = 0 if restored else (1 if unmapped or name in MIGRATABLE else 3)
    document = run_json("compat", str(case.old), str(case.new), code=expected_code)
    check(document, "compat")
    if restored:
        assert document["outcome"] == "restores", (case.description, document)
        assert not _incompatible(document)
        return
    assert document["outcome"] != "restores", (case.description, said)
    if name in MIGRATABLE:
        assert document["outcome"] == "restores-after-migrate", document
        assert all(s["migratable"] for s in _incompatible(document)), document
    elif unmapped:
        assert document["outcome"] == "restores-dropping-state"
        dropped = [op for op in document["operators"] if op["status"] == "dropped"]
        assert dropped and all(op["bytes"] > 0 for op in dropped)
    elif "Max parallelism mismatch" in said:
        assert any(op["problems"] for op in document["operators"]), document
    elif "key serializer" in said:
        assert any(s["scope"] == "key" for s in _incompatible(document)), document
    elif "Incompatible key/value state types" in said:
        assert any("state kind" in s["detail"] for s in _incompatible(document)), document
    else:  # a state serializer Flink found incompatible: compat names the same state
        assert _incompatible(document), (said, document)
        assert document["outcome"] == "cannot"
    if unmapped:  # the rename is hinted where the new-only operator has the same states
        notes = [n for op in document["operators"] for n in op["notes"]]
        assert ("--map" in " ".join(notes)) == (name == "uid-renamed"), notes


@pytest.mark.parametrize("version", RELEASES)
def test_map_pairs_a_renamed_operator_for_migrate(version: str) -> None:
    """``--map`` judges the renamed operator's states (all as is here), and says the restore
    needs ``statectl migrate --map`` (Flink pairs by OperatorID: it refused this case)."""
    case = _case(version, "uid-renamed")
    assert case.outcome["restored"] is False
    # by OperatorID: a Flink 1.x snapshot stores no uids (the ids are the uids' hashes)
    old_id, new_id = operator_id_of_uid("stateful"), operator_id_of_uid("stateful-v2")
    document = run_json("compat", str(case.old), str(case.new), "--map", f"{old_id}={new_id}",
                        code=1)
    check(document, "compat")
    assert document["outcome"] == "restores-after-migrate"
    mapped = [op for op in document["operators"] if op["new"] and op["old"]
              and op["new"]["id"] == new_id]
    assert len(mapped) == 1 and mapped[0]["status"] == "restored"
    assert mapped[0]["states"] and all(s["verdict"] == "as is" for s in mapped[0]["states"])
    assert any("--map" in n for n in mapped[0]["notes"])
    assert not [op for op in document["operators"] if op["status"] in ("dropped", "new")]
