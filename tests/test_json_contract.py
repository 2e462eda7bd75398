"""Every command's ``--output json`` against its JSON Schema in docs/schema/ (issue 32).

One schema file per command (``docs/schema/<command>.json``) and the definitions they share
(``common.json``); docs/json.md is generated from them (``test_docs_json_md_is_generated``), so
the documents, the schemas and the output cannot drift apart: an undocumented field, a missing
one or a wrong type fails here. Run on the sample checkpoints (every command), on every
snapshot of every Flink fixture set and on every release's snapshots (every reading command),
with the operator identities checked against what Flink's own classes read from each
``_metadata`` (``metadata-dump.json``), and one name for one thing across all documents
(``test_one_vocabulary``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_support import EMPTY, KEYED, OPERATOR, run_json
from flink_fixtures import (
    release_checkpoint,
    release_fixtures,
    require_fixtures,
    snapshot_ids,
    snapshots,
)
from oracle import REPO_ROOT
from referencing import Registry, Resource

from formats.model.json_contract import SCHEMA_VERSION
from statecore.hashing import operator_id_of_uid

SCHEMAS = REPO_ROOT / "docs" / "schema"
BASE = "https://statectl.dev/schema/"
SAMPLES = [KEYED, OPERATOR, EMPTY]


def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"] == BASE + path.name, path
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def check(document: Any, schema: str) -> None:
    """Validate ``document`` against ``schema``: a file of docs/schema/ without ``.json``
    (``inspect``), or a reference into one (``common.json#/$defs/identity``)."""
    reference = BASE + (schema if "#" in schema else f"{schema}.json")
    assert (SCHEMAS / reference[len(BASE):].split("#")[0]).is_file(), f"no schema {schema}"
    validator = jsonschema.Draft202012Validator({"$ref": reference}, registry=REGISTRY)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    if "#" not in schema:
        assert document["schema_version"] == SCHEMA_VERSION


def test_the_checker_rejects_what_the_contract_forbids() -> None:
    identity = "common.json#/$defs/identity"
    good = {"id": "0" * 32, "uid": None, "name": "x", "uid_from": None}
    check(good, identity)
    check({**good, "uid": "u", "uid_from": "uid-hash"}, identity)
    for bad in ({**good, "id": "ABC"}, {**good, "uid": ""}, {"id": "0" * 32, "uid": None},
                {**good, "extra": 1}, {**good, "uid_from": "guessed"},
                {"id": "0" * 32, "uid": None, "name": "x"}):
        with pytest.raises(AssertionError):
            check(bad, identity)
    for document, schema in (({"schema_version": "0.5", "released": []}, "snapshot-release"),
                             ({"schema_version": SCHEMA_VERSION, "released": [1], "x": 1},
                              "snapshot-release"),
                             ({"schema_version": SCHEMA_VERSION, "snapshots": [],
                               "build": {"records": 1}}, "snapshot-take")):
        with pytest.raises(AssertionError):
            check(document, schema)


def _identities(document: Any) -> list[dict[str, Any]]:
    """Every operator identity in a document (the objects under an ``operator`` field)."""
    found = []
    if isinstance(document, dict):
        for name, value in document.items():
            if name == "operator" and isinstance(value, dict):
                found.append(value)
            else:
                found += _identities(value)
    elif isinstance(document, list):
        for value in document:
            found += _identities(value)
    return found


#: One name for one thing: a field of these names has this shape in every document.
VOCABULARY: dict[str, Any] = {
    "operator": lambda v: v is None or set(v) == {"id", "uid", "name", "uid_from"},
    "subtask": lambda v: v is None or (isinstance(v, int) and v >= 0),
    "location": lambda v: v is None or isinstance(v, str),
    "seconds": lambda v: isinstance(v, int | float),
    "checkpoint_id": lambda v: isinstance(v, int),
    "state": lambda v: v is None or isinstance(v, str),
    "key_group_range": lambda v: v is None or (isinstance(v, list) and len(v) == 2),
}
#: Names of the same things used before 1.0: never again.
RETIRED = {"index", "path"}


def _vocabulary(document: Any, where: str = "$") -> list[str]:
    """Where ``document`` names a thing otherwise than the vocabulary says."""
    wrong = []
    if isinstance(document, dict):
        for name, value in document.items():
            at = f"{where}.{name}"
            if name in RETIRED:
                wrong.append(f"{at}: a retired name")
            if name in VOCABULARY and not VOCABULARY[name](value):
                wrong.append(f"{at}: {value!r:.60}")
            if name not in ("key", "value", "namespace", "left", "right", "details",
                            "settings", "steps", "rows"):  # values of state, query rows
                wrong += _vocabulary(value, at)
    elif isinstance(document, list):
        for n, value in enumerate(document):
            wrong += _vocabulary(value, f"{where}[{n}]")
    return wrong


def check_all(*documents: Any) -> None:
    """The vocabulary in every document, and every identity as Flink derives it."""
    wrong = [w for d in documents for w in _vocabulary(d)]
    assert not wrong, wrong[:5]
    for identity in _identities(list(documents)):
        if identity["uid"] is not None and identity["uid_from"] == "snapshot":
            assert identity["id"] == operator_id_of_uid(identity["uid"]), identity


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: Path(p).name)
def test_reading_commands_on_the_samples(sample: str, tmp_path: Path) -> None:
    views = ("--key-groups", "--top", "2", "--now", "now", "--entries", "--limit", "2")
    document = run_json("inspect", sample, *views)
    check(document, "inspect")
    assert document["created_from"] == "checkpoint"
    for op in document["operators"]:  # a statectl checkpoint: the id Flink derives
        identity = op["operator"]
        assert identity["uid"] is not None and identity["id"] == operator_id_of_uid(
            identity["uid"])
    key_ops = [op for op in document["operators"] if op["key_type"] == "string" and any(
        s["scope"] == "keyed" for s in op["states"])]
    looked_up = None
    if key_ops:
        looked_up = run_json("inspect", sample, "--key", "user-001")
        check(looked_up, "inspect")
    plans = [run_json("rescale", sample, "-p", "3", "--plan"),
             run_json("rescale", sample, "-p", "3", "--max-parallelism", "64", "--plan")]
    for plan in plans:
        check(plan, "rescale")
    out = run_json("rescale", sample, "-p", "3", "--out", str(tmp_path / "r"))
    check(out, "rescale")
    assert out["result"]["operators"] == [
        {"operator": op["operator"], "parallelism": 3, "max_parallelism": op["max_parallelism"]}
        for op in document["operators"]]
    verified = run_json("verify", sample)
    check(verified, "verify")
    diff = run_json("diff", sample, EMPTY, code=0 if sample == EMPTY else 1)
    check(diff, "diff")
    assert diff["left"] == {"location": sample} and diff["right"] == {"location": EMPTY}
    exported = run_json("export", sample, "--out", str(tmp_path / "e"))
    check(exported, "export")
    manifest = json.loads((tmp_path / "e" / "_export.json").read_text())
    check(manifest, "export-manifest")
    assert manifest["tables"] == exported["tables"]
    for table in exported["tables"]:
        assert (tmp_path / "e" / table["location"]).is_file()
    assert _identities([document, out, diff, exported])
    check_all(document, looked_up, *plans, out, verified, diff, exported, manifest)


def test_writing_commands(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    events = str(REPO_ROOT / "docs" / "examples" / "events.csv")
    built = run_json("build", events, "--key", "user", "--agg", "count", "--checkpoint-dir",
                     state, "--checkpoint-every", "1000")
    check(built, "build")
    phases = built["phases"]
    assert built["seconds"] == pytest.approx(
        phases["setup"] + phases["processing"] + phases["final_checkpoint"], abs=1e-5)
    listed = run_json("snapshot", "list", state)
    check(listed, "snapshot-list")
    taken = run_json("snapshot", "take", state)
    check(taken, "snapshot-take")
    taken_after_input = run_json("snapshot", "take", state, "--input", events)
    check(taken_after_input, "snapshot-take")
    assert "build" in taken_after_input
    converted = run_json("convert", built["location"], "--out", str(tmp_path / "savepoint"))
    check(converted, "convert")
    pruned = run_json("snapshot", "prune", state, "--keep", "1")
    check(pruned, "snapshot-prune")
    listed = run_json("snapshot", "list", state)
    released = run_json("snapshot", "release", state,
                        str(listed["snapshots"][-1]["checkpoint_id"]))
    check(released, "snapshot-release")
    traced = run_json("trace", "--example", "seed000-copy-on-write")
    check(traced, "trace")
    examples = run_json("trace", "--list-examples")
    check(examples, "trace-list-examples")
    history = run_json("history", state, "--key", "user-001")
    check(history, "history")
    remaining = run_json("snapshot", "list", state)["snapshots"]
    queried = run_json("query", remaining[-1]["location"], "SELECT * FROM statectl.operators")
    check(queried, "query")
    screen = run_json("browse", remaining[-1]["location"], "--svg", str(tmp_path / "s.svg"))
    check(screen, "browse")
    check_all(built, listed, taken, taken_after_input, converted, pruned, released, examples,
              history, queried, screen)


def test_every_schema_file_is_used_by_a_test() -> None:
    """A schema of a command nobody checks would let the contract drift unnoticed."""
    text = Path(__file__).read_text()
    for path in SCHEMAS.glob("*.json"):
        if path.stem != "common":
            assert f'"{path.stem}"' in text, f"{path.name} is not checked here"


def test_a_verify_problem_names_its_operator(tmp_path: Path) -> None:
    import shutil
    copy = tmp_path / "c"
    shutil.copytree(KEYED, copy)
    victim = next(p for p in sorted(copy.rglob("*.parquet")))
    victim.write_bytes(victim.read_bytes()[:-10])
    document = run_json("verify", str(copy), code=1)
    check(document, "verify")
    named = [p for p in document["problems"] if p["operator"] is not None]
    assert named and named[0]["operator"] == run_json("inspect", KEYED)[
        "operators"][0]["operator"]


def _flink_snapshot_documents(path: Path, parallelism: int, tmp_path: Path
                              ) -> tuple[dict[str, Any], list[Any]]:
    """Every reading command's document of a Flink snapshot, each checked: (inspect, all)."""
    document = run_json("inspect", str(path), "--key-groups", "--top", "1", "--entries",
                        "--limit", "1")
    check(document, "inspect")
    assert document["created_from"] == "file-time"
    summary = run_json("inspect", str(path))  # the summary: with the sources
    check(summary, "inspect")
    plan = run_json("rescale", str(path), "-p", str(parallelism + 1), "--plan")
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
    verified = run_json("verify", str(path))
    check(verified, "verify")
    diff = run_json("diff", str(path), str(path))
    check(diff, "diff")
    compat = run_json("compat", str(path), str(path))
    check(compat, "compat")
    exported = run_json("export", str(path), "--out", str(tmp_path / "e"))
    check(exported, "export")
    manifest = json.loads((tmp_path / "e" / "_export.json").read_text())
    check(manifest, "export-manifest")
    documents = [document, summary, plan, verified, diff, compat, exported, manifest]
    check_all(*documents)
    return document, documents


@pytest.mark.parametrize(("fixture", "snap"), snapshots("heap", "rocksdb", "types"),
                         ids=snapshot_ids("heap", "rocksdb", "types"))
def test_reading_commands_on_every_flink_snapshot(fixture: Path, snap: dict[str, Any],
                                                  tmp_path: Path) -> None:
    require_fixtures()
    path = fixture / snap["path"]
    document, _ = _flink_snapshot_documents(path, snap["parallelism"], tmp_path)
    dump = json.loads((fixture / "metadata-dump.json").read_text())[snap["path"]]
    assert sorted((op["operator"]["id"], op["operator"]["uid"], op["operator"]["name"])
                  for op in document["operators"]) == sorted(
        (op["operatorId"], op["operatorUid"] or None, op["operatorName"] or None)
        for op in dump["operators"])


@pytest.mark.parametrize("release", release_fixtures(), ids=lambda p: p.name)
@pytest.mark.parametrize("name", ["java-heap", "java-rocksdb", "sql-heap"])
def test_reading_commands_on_every_release(release: Path, name: str, tmp_path: Path) -> None:
    """The snapshots Flink 1.18, 1.20 and 2.0 wrote (1.x: no uids, ``uid`` null)."""
    path = release_checkpoint(release, name)
    document, _ = _flink_snapshot_documents(path, 2, tmp_path)
    assert document["operators"]


def test_docs_json_md_is_generated_from_the_schemas() -> None:
    """docs/json.md's reference section is what ``make json-docs`` writes from docs/schema/."""
    result = subprocess.run([sys.executable, str(SCHEMAS / "render.py"), "--check"],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_difference_with_ttl_pairs_values_as_inspect_does(tmp_path: Path) -> None:
    """Before 1.0 a TTL entry's difference was a ``[value, timestamp]`` pair, where inspect
    and export keep ``value`` and ``ttl_timestamp`` apart."""
    fresh = str(tmp_path / "fresh")
    run_json("rescale", KEYED, "-p", "2", "--out", fresh, "--drop-expired", "--now",
             "2023-11-14T23:05:00")
    diff = run_json("diff", KEYED, fresh, code=1)
    check(diff, "diff")
    changed = [d for d in diff["differences"] if d["state"] == "recent_events"
               and d["change"] == "changed"]
    assert changed
    looked_up = run_json("inspect", KEYED, "--key", changed[0]["key"], "--state",
                         "recent_events")
    (entry,) = looked_up["lookup"]["states"][0]["entries"]
    assert changed[0]["left"] == entry["value"]
    assert changed[0]["left_ttl_timestamp"] == entry["ttl_timestamp"]
    assert len(changed[0]["right"]) == len(changed[0]["right_ttl_timestamp"])
    assert all(isinstance(t, int) for t in changed[0]["right_ttl_timestamp"])


def test_migrate_document(tmp_path: Path) -> None:
    """``migrate`` of a Flink snapshot for its own job (nothing to convert) against its schema."""
    fixture = require_fixtures()[0]
    snap = next(s for s in snapshots() if s[0] == fixture and s[1]["kind"] == "savepoint")[1]
    path = fixture / snap["path"]
    document = run_json("migrate", str(path), "--like", str(path), "--out",
                        str(tmp_path / "migrated"))
    check(document, "migrate")
    assert document["operators"] and not any(op["converted"] for op in document["operators"])
    check_all(document)
