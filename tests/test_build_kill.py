"""Exactly once and crash safety of `statectl build`, with real SIGKILLs.

A build subprocess is killed at random moments (in imports, mid-processing, mid-checkpoint
write), then resumed with --resume; after the last resume runs to the end, the final state must
equal an uninterrupted build's. After every kill, every checkpoint that looks complete (it has
_metadata.json) must open and pass its checksums: a killed writer never leaves a checkpoint that
looks complete but is not, and never damages an earlier one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from formats.open import open_checkpoint
from formats.ops.build import build_state
from formats.statectl.storage import DirectoryCheckpointStorage

REPO = Path(__file__).resolve().parent.parent
AGGREGATIONS = ["count", "sum:amount", "list:amount", "last:page"]
INPUTS = 5
TRIALS = 50


def write_input(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    n = 8000
    pq.write_table(pa.table({
        "user": [f"u{rng.randrange(400)}" for _ in range(n)],
        "amount": [rng.randint(-100, 100) for _ in range(n)],
        "page": [rng.choice(["home", "cart", "buy"]) for _ in range(n)],
    }), path)


def state_of(location: str) -> dict[str, dict[Any, Any]]:
    checkpoint = open_checkpoint(location)
    op = checkpoint.operator("build")
    return {s.name: {(key, namespace): stored
                     for _, key, namespace, stored in checkpoint.keyed_entries("build", s.name)}
            for s in op.states if s.scope == "keyed"}


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("inputs")
    out = []
    for i in range(INPUTS):
        data = root / f"events-{i}.parquet"
        write_input(data, i)
        summary = build_state([str(data)], key="user", aggregations=AGGREGATIONS,
                              checkpoint_dir=str(root / f"reference-{i}"), parallelism=2)
        out.append((data, state_of(summary.final_location)))
    return out


def command(data: Path, checkpoints: Path, resume: bool) -> list[str]:
    args = [sys.executable, "-m", "cli.main", "build", str(data), "--key", "user",
            "--checkpoint-dir", str(checkpoints), "--checkpoint-every", "250",
            "--parallelism", "2", "--keep", "2"]
    for spec in AGGREGATIONS:
        args += ["--agg", spec]
    return args + (["--resume"] if resume else [])


def assert_complete_checkpoints_are_intact(checkpoints: Path) -> None:
    for checkpoint in DirectoryCheckpointStorage(str(checkpoints)).completed():
        opened = open_checkpoint(checkpoint.location)
        for info in opened.metadata.files:
            opened.verify_checksum(info.path)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_killed_builds_resume_to_the_uninterrupted_state(
        trial: int, tmp_path: Path, references: list[tuple[Path, dict[str, Any]]]) -> None:
    rng = random.Random(1000 + trial)
    data, expected = references[trial % INPUTS]
    checkpoints = tmp_path / "checkpoints"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(rng.randint(1, 3)):
        resume = bool(DirectoryCheckpointStorage(str(checkpoints)).completed())
        process = subprocess.Popen(command(data, checkpoints, resume), cwd=REPO, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.6))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        assert_complete_checkpoints_are_intact(checkpoints)
    resume = bool(DirectoryCheckpointStorage(str(checkpoints)).completed())
    finished = subprocess.run(command(data, checkpoints, resume), cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    final = DirectoryCheckpointStorage(str(checkpoints)).completed()[-1]
    assert state_of(final.location) == expected


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(TRIALS, TRIALS + 200))
def test_many_more_killed_builds(trial: int, tmp_path: Path,
                                 references: list[tuple[Path, dict[str, Any]]]) -> None:
    """The same property over 200 more trials: `make test-slow` (not part of `make test`)."""
    test_killed_builds_resume_to_the_uninterrupted_state(trial, tmp_path, references)
