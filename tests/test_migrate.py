"""``statectl migrate`` (issue 43): OLD rewritten so that the new job restores it.

On the job-upgrade cases of ``tests/flink_upgrade.py`` (real Flink's snapshots of each job
version):

* what Flink refuses and statectl converts -- a 1.20 job's POJO with ``java.time`` fields (Kryo
  2) and ``List``/``Map`` fields for the same job on 2.3, a POJO field turned ``long`` -- is
  written for NEW's release: ``compat`` of the output and NEW says it restores, and every value
  reads back equal to OLD's (Flink restoring it, value by value: ``test_migrate_flink.py``);
* a renamed uid (``--map``) and a dropped operator (``--drop``) likewise, with nothing converted;
* what it cannot convert is refused before anything is written, naming the first value, the
  state or the key serializer, and the refusal leaves no output; OLD is never modified;
* progress names each operator written, in turn.

``migrate --engine spark`` writes the same savepoint byte for byte: ``test_spark_flink.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_support import digest, run, run_json
from flink_upgrade import CROSS_RELEASE, upgrade_case
from test_json_contract import check

from formats.flink.types.convert import plain
from formats.open import open_checkpoint
from formats.ops.migrate import migrate_checkpoint


def _values(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Every keyed state's entries by (OperatorID, state): ``{repr(key, namespace): value}``."""
    checkpoint = open_checkpoint(str(path))
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope != "keyed":
                continue
            rows = out.setdefault((op.identity.id, state.name), {})
            for _, key, namespace, value in checkpoint.keyed_entries(op.uid, state.name):
                rows[repr(plain((key, namespace)))] = plain(value)
    return out


CASES = [  # (case, options, what is converted)
    (CROSS_RELEASE, (), {"pojo"}),
    ("pojo-field-type-int-to-long", (), {"pojo"}),
    ("uid-renamed", ("--map", "stateful=stateful-v2"), set()),
    ("operator-dropped", ("--drop", "second"), set()),
]


@pytest.mark.parametrize(("name", "options", "converted"), CASES, ids=[c[0] for c in CASES])
def test_migrate_writes_what_the_new_job_restores(name: str, options: tuple[str, ...],
                                                  converted: set[str], tmp_path: Path) -> None:
    case = upgrade_case(name)
    before = digest(str(case.old))
    out = tmp_path / "migrated"
    document = run_json("migrate", str(case.old), "--like", str(case.new), "--out", str(out),
                        *options)
    check(document, "migrate")
    assert {c["state"] for op in document["operators"] for c in op["converted"]} == converted
    assert digest(str(case.old)) == before  # OLD untouched
    verdict = run_json("compat", str(out), str(case.new))
    assert verdict["outcome"] == "restores", verdict
    # every value of OLD is in the output, under the new job's OperatorIDs, equal
    old, new = _values(case.old), _values(out)
    ids = {op["old"]["id"]: op["new"]["id"] for op in run_json(
        "compat", str(case.old), str(case.new), code=1 if options or converted else 0
    )["operators"] if op["old"] and op["new"]}
    renamed = {op: new_id for op, new_id in ids.items()}
    if name == "uid-renamed":
        renamed = {**renamed, _op_id(case.old, "stateful"): _op_id(case.new, "stateful-v2")}
    dropped = {_op_id(case.old, "second")} if name == "operator-dropped" else set()
    expected = {(renamed.get(op, op), state): rows for (op, state), rows in old.items()
                if op not in dropped}
    assert new == expected


def _op_id(path: Path, uid: str) -> str:
    return open_checkpoint(str(path), decode=False).find_operator(uid).identity.id


def test_a_value_that_does_not_convert_is_named_and_nothing_written(tmp_path: Path) -> None:
    case = upgrade_case("value-type-long-to-string")
    out = tmp_path / "migrated"
    code, _, err = run("migrate", str(case.old), "--like", str(case.new), "--out", str(out))
    assert code == 3 and "state 'count'" in err and "is not a string" in err, err
    assert not out.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize(("name", "message"), [
    ("state-kind-value-to-list", "a value state in OLD, a list state in the new job"),
    ("key-type-long-to-string", "cannot convert keys"),
    ("uid-renamed", "--map it to the new job's operator"),
    ("operator-dropped", "--drop it"),
])
def test_what_cannot_be_migrated_is_refused_clearly(name: str, message: str,
                                                    tmp_path: Path) -> None:
    case = upgrade_case(name)
    out = tmp_path / "migrated"
    code, _, err = run("migrate", str(case.old), "--like", str(case.new), "--out", str(out))
    assert code == 3 and message in err and "Traceback" not in err, err
    assert not out.exists()


def test_drop_and_rename_name_real_states(tmp_path: Path) -> None:
    case = upgrade_case("same")
    for option, value, message in (("--drop", "stateful/nope", "has no state 'nope'"),
                                   ("--rename-state", "stateful/pojo", "expected OLD=NEW"),
                                   ("--map", "nope=stateful", "no operator 'nope'")):
        code, _, err = run("migrate", str(case.old), "--like", str(case.new), "--out",
                           str(tmp_path / "x"), option, value)
        assert code in (2, 3) and message in err, (option, err)
    renamed = run_json("migrate", str(case.old), "--like", str(case.new), "--out",
                       str(tmp_path / "r"), "--rename-state", "stateful/count=count")
    assert [c["as"] for op in renamed["operators"] for c in op["converted"]] == ["count"]
    assert run_json("compat", str(tmp_path / "r"), str(case.new))["outcome"] == "restores"


def test_progress_names_each_operator_in_turn(tmp_path: Path) -> None:
    case = upgrade_case("operator-dropped")
    calls: list[tuple[int, int, str]] = []
    result = migrate_checkpoint(open_checkpoint(str(case.old)),
                                open_checkpoint(str(case.new), decode=False),
                                str(tmp_path / "migrated"), drops=("second",),
                                progress=lambda done, total, what: calls.append(
                                    (done, total, what)))
    written = [op.new for op in result.operators]  # the new job's labels, in OLD's order
    assert len(written) >= 2 and "second" not in written
    assert calls == [*((i, len(written), name) for i, name in enumerate(written)),
                     (len(written), len(written), "")]
