"""The committed sample checkpoints: goldens, checksums, restore, and no drift from the generator.

Every sample directory under ``sample_checkpoints/v1`` is found by iterating (no names listed
here). Goldens are compared with every field but ``bytes`` equal; the ``bytes`` fields are
checked against the sizes the checkpoint's own metadata records, because Parquet footers name
the pyarrow version that wrote them and sizes change with it.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import statectl
from formats.open import open_checkpoint
from formats.statectl.publish import METADATA_FILE
from statecore.checkpoint import CheckpointMetadata, StateMetadata
from statecore.operator_backend import OperatorStateSnapshot

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_checkpoints"
V1 = SAMPLES / "v1"
GENERATOR = SAMPLES / "generate.py"
GOLDEN_SUFFIX = ".inspect.json"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sample_checkpoints_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


generate = _load_generator()
SAMPLE_DIRS = sorted(p for p in V1.iterdir() if p.is_dir()) if V1.is_dir() else []


def golden_of(sample: Path) -> Path:
    return sample.with_name(sample.name + GOLDEN_SUFFIX)


def inspect_json(location: Path) -> dict[str, Any]:
    result = CliRunner().invoke(statectl, ["--output", "json", "inspect", str(location)])
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def drop_bytes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_bytes(v) for k, v in value.items() if k != "bytes"}
    if isinstance(value, list):
        return [drop_bytes(v) for v in value]
    return value


def count_bytes_fields(value: Any) -> int:
    if isinstance(value, dict):
        return ("bytes" in value) + sum(count_bytes_fields(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_bytes_fields(v) for v in value)
    return 0


def assert_bytes_match_metadata(document: dict[str, Any], metadata: CheckpointMetadata) -> None:
    """Every ``bytes`` field equals the sum of the sizes of the files it covers (metadata)."""
    sizes = {f.path: f.size for f in metadata.files}
    checked = 0
    assert [op["operator"]["uid"] for op in document["operators"]] == [
        op.uid for op in metadata.operators]
    for shown, op in zip(document["operators"], metadata.operators, strict=True):
        handles = {st.index: [(h.state, h.file) for h in st.keyed]
                   + [(h.state, h.file) for h in st.operator] for st in op.subtasks}
        for state in shown["states"]:
            expected = sum(sizes[f] for files in handles.values() for name, f in files
                           if name == state["state"])
            assert state["bytes"] == expected, (op.uid, state)
            checked += 1
        for subtask in shown["subtasks"]:
            assert subtask["bytes"] == sum(sizes[f] for _, f in handles[subtask["subtask"]]), (
                op.uid, subtask)
            checked += 1
    assert checked == count_bytes_fields(document)  # no bytes field escaped the check


def test_there_are_samples_and_each_has_a_golden() -> None:
    assert len(SAMPLE_DIRS) >= 3, f"expected sample checkpoints in {V1}"
    missing = [p.name for p in SAMPLE_DIRS if not golden_of(p).is_file()]
    assert not missing, f"samples without a golden {GOLDEN_SUFFIX}: {missing}"


def test_every_golden_has_a_sample() -> None:
    orphans = [p.name for p in V1.glob(f"*{GOLDEN_SUFFIX}")
               if not (V1 / p.name.removesuffix(GOLDEN_SUFFIX)).is_dir()]
    assert not orphans, f"goldens without a sample directory: {orphans}"


def test_the_generator_knows_every_sample() -> None:
    assert sorted(p.name for p in SAMPLE_DIRS) == sorted(generate.SAMPLES)


@pytest.mark.parametrize("sample", SAMPLE_DIRS, ids=lambda p: p.name)
def test_inspect_json_equals_the_golden(sample: Path) -> None:
    golden = json.loads(golden_of(sample).read_text(encoding="utf-8"))
    relative = sample.relative_to(ROOT).as_posix()
    assert golden["location"] == relative
    document = inspect_json(sample)
    assert document["location"] == str(sample)
    document["location"] = relative
    assert drop_bytes(document) == drop_bytes(golden)
    metadata = open_checkpoint(str(sample)).metadata
    assert_bytes_match_metadata(document, metadata)
    assert_bytes_match_metadata(golden, metadata)


@pytest.mark.parametrize("sample", SAMPLE_DIRS, ids=lambda p: p.name)
def test_checkpoint_opens_and_every_checksum_verifies(sample: Path) -> None:
    checkpoint = open_checkpoint(str(sample))
    for info in checkpoint.metadata.files:
        assert (sample / info.path).stat().st_size == info.size
        checkpoint.verify_checksum(info.path)
    on_disk = sorted(p.relative_to(sample).as_posix() for p in sample.rglob("*")
                     if not p.is_dir())
    assert on_disk == sorted([METADATA_FILE] + [f.path for f in checkpoint.metadata.files])


@pytest.mark.parametrize("sample", SAMPLE_DIRS, ids=lambda p: p.name)
def test_restore_gives_the_generated_state(sample: Path) -> None:
    checkpoint = open_checkpoint(str(sample))
    built = generate.SAMPLES[sample.name].build()
    assert [op.uid for op in checkpoint.metadata.operators] == [op.uid for op in built]
    for op in built:
        meta = checkpoint.operator(op.uid)
        assert (meta.name, meta.parallelism, meta.max_parallelism, meta.key_type) == (
            op.name, op.parallelism, op.max_parallelism, op.key_type)
        for index in range(op.parallelism):
            original = op.keyed[index] if op.keyed else None
            if original is not None:
                restored = op.new_keyed_backend(index)
                expected = generate.stored_contents(original)
                loaded = checkpoint.restore_keyed(op.uid, restored)
                assert loaded == sum(len(entries) for entries in expected.values())
                assert generate.stored_contents(restored) == expected
            operators = op.operator[index] if op.operator else None
            expected_ops = OperatorStateSnapshot() if operators is None else operators.snapshot()
            assert checkpoint.restore_operator(op.uid, index).snapshot() == expected_ops


def test_keyed_sample_covers_every_kind_ttl_and_a_namespace() -> None:
    kinds: dict[tuple[str, str], list[tuple[int, int, StateMetadata]]] = {}
    for sample in SAMPLE_DIRS:
        for op in open_checkpoint(str(sample)).metadata.operators:
            for state in op.states:
                kinds.setdefault((state.scope, state.kind), []).append(
                    (op.parallelism, op.max_parallelism, state))
    for kind in ("value", "list", "map", "reducing", "aggregating"):
        assert any(p == 2 and m == 128 for p, m, _ in kinds[("keyed", kind)]), kind
    for kind in ("split", "union", "broadcast"):
        assert any(p == 3 for p, _, _ in kinds[("operator", kind)]), kind
    keyed = [s for (scope, _), states in kinds.items() if scope == "keyed" for _, _, s in states]
    assert any(s.ttl for s in keyed) and any(s.namespace_type == "int64" for s in keyed)
    assert any(not open_checkpoint(str(p)).metadata.files for p in SAMPLE_DIRS)  # an empty one


def test_generator_reports_no_drift() -> None:
    result = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, text=True,
                            cwd="/", timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "match the generator" in result.stdout


def test_generator_detects_drift(tmp_path: Path) -> None:
    copy = tmp_path / "v1"
    shutil.copytree(V1, copy)
    assert generate.check(copy) == []
    # a changed entry count in a golden, a changed creation time, a stray file, a lost sample
    names = sorted(generate.SAMPLES)
    golden = golden_of(copy / names[0])
    document = json.loads(golden.read_text(encoding="utf-8"))
    document["operators"][0]["subtasks"][0]["entries"] += 1
    golden.write_text(json.dumps(document), encoding="utf-8")
    metadata = copy / names[1] / METADATA_FILE
    tampered = json.loads(metadata.read_text())
    tampered["created_ms"] += 1
    metadata.write_text(json.dumps(tampered))
    (copy / "stray.txt").write_text("not a sample")
    shutil.rmtree(copy / names[2])
    problems = "\n".join(generate.check(copy))
    assert f"{names[0]}: golden differs" in problems
    assert f"{names[1]}: contents differ" in problems and "created_ms" in problems
    assert "stray.txt: not written by this generator" in problems
    assert f"{names[2]}: sample directory" in problems and "is missing" in problems


def test_generator_detects_wrong_bytes_in_a_golden(tmp_path: Path) -> None:
    copy = tmp_path / "v1"
    shutil.copytree(V1, copy)
    name = next(s.name for s in SAMPLE_DIRS if open_checkpoint(str(s)).metadata.files)
    golden = golden_of(copy / name)
    document = json.loads(golden.read_text(encoding="utf-8"))
    document["operators"][0]["states"][0]["bytes"] += 1
    golden.write_text(json.dumps(document), encoding="utf-8")
    problems = generate.check(copy)
    assert len(problems) == 1 and "bytes, the metadata" in problems[0], problems
