"""Finding the real Flink fixtures (DESIGN "Ground truth from real Flink").

Every immediate subdirectory of ``$STATECTL_FLINK_FIXTURES`` (default ``../shared/flink-fixtures``
beside the repository) that holds an ``expected.json`` is a fixture set; nothing here names
one. A missing directory fails the tests that need it, with a message saying so.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The fixture roots (DESIGN "Ground truth"): name -> (environment variable, default folder).
ROOTS = {
    "heap": ("STATECTL_FLINK_FIXTURES", "flink-fixtures"),
    "rocksdb": ("STATECTL_FLINK_ROCKSDB_FIXTURES", "flink-fixtures-rocksdb"),
    "types": ("STATECTL_FLINK_TYPES_FIXTURES", "flink-fixtures-types"),
    "versions": ("STATECTL_FLINK_VERSIONS_FIXTURES", "flink-fixtures-versions"),
}

#: The sets of every release in the versions root (its README): job kind and backend.
VERSION_SETS = {"java-heap": ("java", "hashmap"), "java-rocksdb": ("java", "rocksdb"),
                "sql-heap": ("sql", "hashmap")}


def fixtures_dir(root: str = "heap") -> Path:
    variable, default = ROOTS[root]
    return Path(os.environ.get(variable, ROOT.parent / "shared" / default))


def fixture_sets(root: str = "heap") -> list[Path]:
    base = fixtures_dir(root)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / "expected.json").is_file())


def release_fixtures() -> list[Path]:
    """The release folders of the versions root (``1.20.5``, ...): the fixture jobs' snapshots
    as that Flink release wrote them (no ``expected.json``: their README says what they hold)."""
    base = fixtures_dir("versions")
    if not base.is_dir():
        return []
    return sorted((p for p in base.iterdir() if p.is_dir() and p.name[:1].isdigit()),
                  key=lambda p: tuple(int(x) for x in p.name.split(".") if x.isdigit()))


def release_checkpoint(release: Path, name: str) -> Path:
    """The retained p2 checkpoint of set ``name`` (``java-heap``, ...) of a release folder."""
    found = sorted(release.glob(f"{name}/checkpoints/p2/*/chk-*"))
    if len(found) != 1:
        pytest.fail(f"expected one p2 checkpoint in {release / name}, found {found}")
    return found[0]


def require_fixtures(root: str = "heap") -> list[Path]:
    sets = fixture_sets(root)
    if not sets:
        pytest.fail(f"no Flink fixture sets (directories with expected.json) in "
                    f"{fixtures_dir(root)}; set {ROOTS[root][0]}")
    return sets


def expected(fixture_set: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((fixture_set / "expected.json").read_text())
    return document


def snapshots(*roots: str) -> list[tuple[Path, dict[str, Any]]]:
    """``(fixture set, snapshot entry of its expected.json)`` for every listed snapshot of the
    sets under ``roots`` (default: the heap fixtures)."""
    return [(s, snap) for root in roots or ("heap",) for s in fixture_sets(root)
            for snap in expected(s)["snapshots"]]


def snapshot_ids(*roots: str) -> list[str]:
    return [f"{s.name}:{snap['path']}" for s, snap in snapshots(*roots)]


def snapshot_files(snapshot: Path) -> list[Path]:
    """Every file a snapshot's ``_metadata`` may reference: the directory's own files and,
    for a checkpoint, those of its job's ``shared/`` directory (RocksDB's)."""
    own = sorted(p for p in snapshot.iterdir() if p.is_file())
    shared = snapshot.parent / "shared"
    if snapshot.name.startswith("chk-") and shared.is_dir():
        own += sorted(p for p in shared.iterdir() if p.is_file())
    return own


def plain(value: Any) -> Any:
    """A decoded value as JSON would hold it (tuples as lists)."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain_key(k): plain(v) for k, v in value.items()}
    return value


def plain_key(value: Any) -> Any:
    """A key usable in a dict or set: tuples stay tuples."""
    if isinstance(value, list | tuple):
        return tuple(plain_key(v) for v in value)
    return value


def first_string_key(fixture_set: Path) -> tuple[str, str, str]:
    """``(operator, state, key)`` of the first keyed state in ``expected.json`` whose first
    entry has a string key."""
    return next(
        (name, state, content["entries"][0][0])
        for name, op in expected(fixture_set)["operators"].items()
        for state, content in op.get("keyed_states", {}).items()
        if isinstance(content, dict) and content.get("entries")
        and isinstance(content["entries"][0][0], str))


@functools.cache
def backend(fixture_set: Path) -> str:
    """``rocksdb`` when Flink's own reading (``metadata-dump.json``) found incremental handles
    in the set's snapshots, else ``hashmap`` (expected.json does not say; set names may not)."""
    dump = (fixture_set / "metadata-dump.json").read_text()
    return "rocksdb" if '"IncrementalRemoteKeyedStateHandle"' in dump else "hashmap"
