"""Every command's ``--output json`` against the contract in docs/json.md.

The schema is read from the document itself (its one ```json block), so the document and the
output cannot drift apart: an undocumented field, a missing one or a wrong type fails here. Run
on the sample checkpoints (every command) and on every snapshot of every Flink fixture set
(every reading command), with the operator identities checked against what Flink's own classes
read from each ``_metadata`` (``metadata-dump.json``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_support import EMPTY, KEYED, OPERATOR, run_json
from flink_fixtures import require_fixtures, snapshot_ids, snapshots
from oracle import REPO_ROOT

from statecore.hashing import operator_id_of_uid

DOC = REPO_ROOT / "docs" / "json.md"
SAMPLES = [KEYED, OPERATOR, EMPTY]


def _schema() -> dict[str, Any]:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "docs/json.md must hold exactly one ```json block: the schema"
    schema: dict[str, Any] = json.loads(blocks[0])
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


SCHEMA = _schema()


def check(document: Any, definition: str) -> None:
    assert definition in SCHEMA["$defs"], f"docs/json.md defines no {definition}"
    validator = jsonschema.Draft202012Validator(
        {**SCHEMA, "$ref": f"#/$defs/{definition}"})
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_the_checker_rejects_what_the_contract_forbids() -> None:
    good = {"id": "0" * 32, "uid": None, "name": "x", "uid_from": None}
    check(good, "identity")
    check({**good, "uid": "u", "uid_from": "uid-hash"}, "identity")
    for bad in ({**good, "id": "ABC"}, {**good, "uid": ""}, {"id": "0" * 32, "uid": None},
                {**good, "extra": 1}, {**good, "uid_from": "guessed"},
                {"id": "0" * 32, "uid": None, "name": "x"}):
        with pytest.raises(AssertionError):
            check(bad, "identity")


def _identities(document: Any) -> list[dict[str, Any]]:
    """Every operator object and operator reference in a document."""
    found = []
    if isinstance(document, dict):
        if {"id", "uid", "name"} <= document.keys() and isinstance(document["id"], str) \
                and re.fullmatch(r"[0-9a-f]{32}", document["id"]):
            found.append({k: document[k] for k in ("id", "uid", "name", "uid_from")})
        for value in document.values():
            found += _identities(value)
    elif isinstance(document, list):
        for value in document:
            found += _identities(value)
    return found


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: Path(p).name)
def test_reading_commands_on_the_samples(sample: str, tmp_path: Path) -> None:
    views = ("--key-groups", "--top", "2", "--now", "now", "--entries", "--limit", "2")
    document = run_json("inspect", sample, *views)
    check(document, "inspect")
    for op in document["operators"]:  # a statectl checkpoint: the id Flink derives
        assert op["uid"] is not None and op["id"] == operator_id_of_uid(op["uid"])
    key_ops = [op for op in document["operators"] if op["key_type"] == "string" and any(
        s["scope"] == "keyed" for s in op["states"])]
    if key_ops:
        check(run_json("inspect", sample, "--key", "user-001"), "inspect")
    check(run_json("rescale", sample, "-p", "3", "--plan"), "rescale")
    check(run_json("rescale", sample, "-p", "3", "--max-parallelism", "64", "--plan"),
          "rescale")
    out = run_json("rescale", sample, "-p", "3", "--out", str(tmp_path / "r"))
    check(out, "rescale")
    assert out["result"]["operators"] == [
        {k: op[k] for k in ("id", "uid", "name", "uid_from")} | {"parallelism": 3,
                                                     "max_parallelism": op["max_parallelism"]}
        for op in document["operators"]]
    check(run_json("verify", sample), "verify")
    diff = run_json("diff", sample, EMPTY, code=0 if sample == EMPTY else 1)
    check(diff, "diff")
    exported = run_json("export", sample, "--out", str(tmp_path / "e"))
    check(exported, "export")
    check(json.loads((tmp_path / "e" / "_export.json").read_text()), "export_manifest")
    everything = _identities([document, out, diff, exported])
    assert everything and all(i["id"] == operator_id_of_uid(i["uid"]) for i in everything
                              if i["uid"] is not None)


def test_writing_commands(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    events = str(REPO_ROOT / "docs" / "examples" / "events.csv")
    check(run_json("build", events, "--key", "user", "--agg", "count", "--checkpoint-dir",
                   state, "--checkpoint-every", "1000"), "build")
    check(run_json("snapshot", "list", state), "snapshots")
    check(run_json("snapshot", "take", state), "snapshots")
    check(run_json("snapshot", "prune", state, "--keep", "1"), "pruned")
    listed = run_json("snapshot", "list", state)["snapshots"]
    check(run_json("snapshot", "release", state, str(listed[-1]["id"])), "released")
    check(run_json("trace", "--example", "seed000-copy-on-write"), "trace")
    check(run_json("trace", "--list-examples"), "walkthroughs")


def test_a_verify_problem_names_its_operator(tmp_path: Path) -> None:
    import shutil
    copy = tmp_path / "c"
    shutil.copytree(KEYED, copy)
    victim = next(p for p in sorted(copy.rglob("*.parquet")))
    victim.write_bytes(victim.read_bytes()[:-10])
    document = run_json("verify", str(copy), code=1)
    check(document, "verify")
    named = [p for p in document["problems"] if p["operator"] is not None]
    assert named and named[0]["operator"]["uid"] == run_json("inspect", KEYED)[
        "operators"][0]["uid"]


@pytest.mark.parametrize(("fixture", "snap"), snapshots("heap", "rocksdb", "types"),
                         ids=snapshot_ids("heap", "rocksdb", "types"))
def test_reading_commands_on_every_flink_snapshot(fixture: Path, snap: dict[str, Any],
                                                  tmp_path: Path) -> None:
    require_fixtures()
    path = fixture / snap["path"]
    document = run_json("inspect", str(path), "--key-groups", "--top", "1", "--entries",
                        "--limit", "1")
    check(document, "inspect")
    check(run_json("inspect", str(path)), "inspect")  # the summary: with the sources
    dump = json.loads((fixture / "metadata-dump.json").read_text())[snap["path"]]
    assert sorted((op["id"], op["uid"], op["name"]) for op in document["operators"]) == sorted(
        (op["operatorId"], op["operatorUid"] or None, op["operatorName"] or None)
        for op in dump["operators"])
    plan = run_json("rescale", str(path), "-p", str(snap["parallelism"] + 1), "--plan")
    check(plan, "rescale")
    handles = [h for op in plan["plan"]["operators"] for st in op["subtasks"]
               for h in st["keyed_handles"] + st["operator_handles"]]
    assert all(h["file"] == ", ".join(h["files"]) for h in handles)
    files = [name for h in handles for name in h["files"]]
    assert files, "a Flink plan with no handles"
    downloads = [d["file"] for op in plan["plan"]["operators"] for st in op["subtasks"]
                 for d in st["downloads"]]
    for name in files + downloads:  # as Flink stores them: beside _metadata, shared, inline
        assert name == "inline" or (path / name).is_file(), name
    check(run_json("verify", str(path)), "verify")
    check(run_json("diff", str(path), str(path)), "diff")
    exported = run_json("export", str(path), "--out", str(tmp_path / "e"))
    check(exported, "export")
    check(json.loads((tmp_path / "e" / "_export.json").read_text()), "export_manifest")
    for identity in _identities([document, plan, exported]):
        if identity["uid"] is not None:
            assert identity["id"] == operator_id_of_uid(identity["uid"])
