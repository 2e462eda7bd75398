"""Finding the real Flink fixtures (DESIGN "Ground truth from real Flink").

Every immediate subdirectory of ``$STATECTL_FLINK_FIXTURES`` (default ``../shared/flink-fixtures``
beside the repository) that holds an ``expected.json`` is a fixture set; nothing here names
one. A missing directory fails the tests that need it, with a message saying so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def fixtures_dir() -> Path:
    default = ROOT.parent / "shared" / "flink-fixtures"
    return Path(os.environ.get("STATECTL_FLINK_FIXTURES", default))


def fixture_sets() -> list[Path]:
    base = fixtures_dir()
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / "expected.json").is_file())


def require_fixtures() -> list[Path]:
    sets = fixture_sets()
    if not sets:
        pytest.fail(f"no Flink fixture sets (directories with expected.json) in {fixtures_dir()}; "
                    f"set STATECTL_FLINK_FIXTURES")
    return sets


def expected(fixture_set: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((fixture_set / "expected.json").read_text())
    return document


def snapshots() -> list[tuple[Path, dict[str, Any]]]:
    """``(fixture set, snapshot entry of its expected.json)`` for every listed snapshot."""
    return [(s, snap) for s in fixture_sets() for snap in expected(s)["snapshots"]]


def snapshot_ids() -> list[str]:
    return [f"{s.name}:{snap['path']}" for s, snap in snapshots()]


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
