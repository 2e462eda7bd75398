"""The CLI on real Flink snapshots (issue 8, scope 4): every command on every fixture snapshot.

``inspect --output json`` names each operator by Flink's OperatorID (32 lowercase hex digits)
with its uid and name as stored (``null`` when empty), as ``metadata-dump.json`` (Flink's own
``Checkpoints.loadCheckpointMetadata``) reports them; the format is detected from a directory
or a ``_metadata`` path; ``verify`` is clean; ``export`` writes typed Parquet; ``diff`` of two
snapshots of one job at one moment is empty; ``rescale --plan`` works, while writing a Flink
snapshot (``--out``), changing its max parallelism and the Spark engine are refused with exit
code 3 and a message. No fixture file changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.cli_support import run, run_json, unchanged
from tests.flink_fixtures import (
    expected,
    fixtures_dir,
    require_fixtures,
    snapshot_ids,
    snapshots,
)

SNAPSHOTS = snapshots()
IDS = snapshot_ids()


@pytest.fixture(autouse=True, scope="module")
def fixtures_unchanged() -> Iterator[None]:
    require_fixtures()
    yield from unchanged(str(fixtures_dir()))


def _dump(fixture_set: Path, snap: dict[str, Any]) -> dict[str, Any]:
    dump: dict[str, Any] = json.loads((fixture_set / "metadata-dump.json").read_text())
    return dump[snap["path"]]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_inspect_json_names_operators_as_flink_does(fixture_set: Path, snap: dict[str, Any]
                                                    ) -> None:
    location = str(fixture_set / snap["path"])
    document = run_json("inspect", location)
    assert document == run_json("inspect", location + "/_metadata") | {
        "location": location}  # a _metadata path opens the same snapshot
    dump = _dump(fixture_set, snap)
    assert document["format"] == "flink"
    assert document["checkpoint_id"] == dump["checkpointId"]
    assert document["kind"] == ("savepoint" if dump["checkpointProperties"]["isSavepoint"]
                                else "checkpoint")
    got = [(op["operator"]["id"], op["operator"]["uid"], op["operator"]["name"],
            op["parallelism"], op["max_parallelism"])
           for op in document["operators"]]
    want = [(op["operatorId"], op["operatorUid"] or None, op["operatorName"] or None,
             op["parallelism"], op["maxParallelism"]) for op in dump["operators"]]
    assert got == want
    assert all(re.fullmatch(r"[0-9a-f]{32}", op["operator"]["id"]) for op in document["operators"])


def test_inspect_text_says_flink() -> None:
    fixture_set, snap = SNAPSHOTS[0]
    code, out, err = run("inspect", str(fixture_set / snap["path"]))
    assert code == 0, err
    kind = "savepoint" if snap["kind"] == "savepoint" else "checkpoint"
    assert out.startswith(f"Flink {kind} ")


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_verify_is_clean(fixture_set: Path, snap: dict[str, Any]) -> None:
    report = run_json("verify", str(fixture_set / snap["path"]))
    assert report["clean"] is True and not report["problems"], report
    assert report["entries"] > 0


@pytest.mark.parametrize("fixture_set", sorted({s for s, _ in SNAPSHOTS}),
                         ids=lambda p: p.name)
def test_export_writes_typed_parquet(fixture_set: Path, tmp_path: Path) -> None:
    snap = next(s for s in expected(fixture_set)["snapshots"] if s["kind"] == "savepoint")
    out = tmp_path / "out"
    result = run_json("export", str(fixture_set / snap["path"]), "--out", str(out))
    files = sorted(out.rglob("*.parquet"))
    assert files and len(result["tables"]) == len(files)
    keyed = [pq.read_schema(out / t["location"]) for t in result["tables"] if t["scope"] == "keyed"]
    assert keyed, "no keyed state exported"
    for schema in keyed:  # fixture keys are strings, numbers or rows of them, never raw bytes
        assert schema.field("key").type.num_fields or str(schema.field("key").type) in (
            "string", "int64", "int32"), schema


@pytest.mark.parametrize("fixture_set", sorted({s for s, _ in SNAPSHOTS}),
                         ids=lambda p: p.name)
def test_diff_of_one_moment_is_empty(fixture_set: Path) -> None:
    """The p2 checkpoint and the p2 savepoints were taken of the same finished input."""
    p2 = [s for s in expected(fixture_set)["snapshots"] if s["parallelism"] == 2
          and "p2/" in s["path"]]
    assert len(p2) >= 2
    first = str(fixture_set / p2[0]["path"])
    for other in p2[1:]:
        report = run_json("diff", first, str(fixture_set / other["path"]))
        assert report["equal"] and report["differences"] == [], report
        assert report["compared"] > 0


def test_rescale_plan_out_and_refusals(tmp_path: Path) -> None:
    fixture_set, snap = min(SNAPSHOTS, key=lambda s: s[1]["parallelism"])  # any set's lowest
    location = str(fixture_set / snap["path"])
    plan = run_json("rescale", location, "--parallelism", "3", "--plan")["plan"]
    keyed = [op for op in plan["operators"] if any(s["key_group_range"] for s in
                                                   op["subtasks"])]
    assert keyed and all(len(op["subtasks"]) == 3 for op in plan["operators"])

    # --out writes a Flink canonical savepoint (tests/test_flink_savepoint_writer.py); a plan
    # may change the max parallelism, which statectl's rewrite does and Flink's restore cannot
    code, out, err = run("rescale", location, "--parallelism", "3", "--out",
                         str(tmp_path / "new"))
    assert code == 0 and (tmp_path / "new" / "_metadata").is_file(), err
    rehash = run_json("rescale", location, "--parallelism", "3", "--plan",
                      "--max-parallelism", "256")["plan"]
    assert rehash["rehash"] is True and rehash["max_parallelism"] == 256
    # --engine spark decodes a Flink snapshot in Spark tasks (tests/test_spark_flink.py), but
    # unpickling is for this process only
    code, _, err = run("--allow-pickle", "export", location, "--out", str(tmp_path / "e"),
                       "--engine", "spark")
    assert code == 3 and "run it with the local engine" in err, err
    assert not (tmp_path / "e").exists()
