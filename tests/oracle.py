"""Locating and loading the vectors computed by real Flink (``../shared/oracle``).

The directories are mandatory: a missing directory or an empty glob fails the run, it never
skips. Tests iterate over every file matching a pattern, because other runs add files of the
same schemas (``key_groups*.json``, ``ranges*.json``, ...).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _resolve_dir(env_var: str, default: Path, what: str) -> Path:
    configured = os.environ.get(env_var)
    directory = Path(configured) if configured else default
    if not directory.is_dir():
        pytest.fail(
            f"{what} directory {directory} does not exist; set ${env_var} or provide "
            f"{default} (these tests are mandatory, they are never skipped)",
            pytrace=False,
        )
    return directory


def resolve_oracle_dir() -> Path:
    """``$STATECTL_ORACLE_DIR``, else ``<repo root>/../shared/oracle``."""
    return _resolve_dir(
        "STATECTL_ORACLE_DIR", REPO_ROOT.parent / "shared" / "oracle", "Flink oracle"
    )


def resolve_flink_fixtures_dir() -> Path:
    """``$STATECTL_FLINK_FIXTURES``, else ``<repo root>/../shared/flink-fixtures``."""
    return _resolve_dir(
        "STATECTL_FLINK_FIXTURES",
        REPO_ROOT.parent / "shared" / "flink-fixtures",
        "Flink fixtures",
    )


def oracle_files(oracle_dir: Path, pattern: str) -> list[Path]:
    """Every file in ``oracle_dir`` matching ``pattern``, sorted; fails if there is none."""
    files = sorted(oracle_dir.glob(pattern))
    if not files:
        pytest.fail(f"no oracle file matches {pattern!r} in {oracle_dir}", pytrace=False)
    return files


@functools.cache
def load_json(path: Path) -> Any:
    """The parsed JSON of ``path``, parsed once per session."""
    with path.open(encoding="ascii") as handle:
        return json.load(handle)
