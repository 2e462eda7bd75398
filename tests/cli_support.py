"""Helpers shared by the CLI tests: run ``statectl`` in-process, the sample checkpoints, and a
guard that a test leaves them unchanged (inputs are never modified)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cli.main import statectl

SAMPLES = Path(__file__).resolve().parent.parent / "sample_checkpoints" / "v1"
KEYED = str(SAMPLES / "keyed-all-kinds-p2")
OPERATOR = str(SAMPLES / "operator-split-union-broadcast-p3")
EMPTY = str(SAMPLES / "empty")


def run(*args: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``statectl ARGS``."""
    result = CliRunner().invoke(statectl, list(args))
    return result.exit_code, result.stdout, result.stderr


def run_json(*args: str, code: int = 0) -> Any:
    """The one JSON document ``statectl --output json ARGS`` prints (exit ``code``)."""
    exit_code, out, err = run("--output", "json", *args)
    assert exit_code == code, err
    return json.loads(out)  # exactly one document: json.loads refuses trailing data


def digest(root: str) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(root).rglob("*")) if p.is_file()}


def unchanged(*roots: str) -> Iterator[None]:
    """For an autouse fixture: fails the test if any file under ``roots`` changed."""
    before = {root: digest(root) for root in roots}
    yield
    assert {root: digest(root) for root in roots} == before
