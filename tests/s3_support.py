"""Helpers of the object-storage tests: inputs, uploads, raw listings, statectl in a process."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from s3_server import S3Server

from formats.open import open_checkpoint

REPO = Path(__file__).resolve().parent.parent


def write_events(path: Path, seed: int, rows: int = 3000, users: int = 200) -> Path:
    rng = random.Random(seed)
    pq.write_table(pa.table({
        "user": [f"u{rng.randrange(users)}" for _ in range(rows)],
        "amount": [rng.randint(-100, 100) for _ in range(rows)],
        "page": [rng.choice(["home", "cart", "buy"]) for _ in range(rows)],
    }), path)
    return path


def upload(fs: pafs.FileSystem, local: Path, path: str) -> None:
    """Copy the local directory (or file) ``local`` to ``path`` on ``fs``."""
    pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)


def raw_keys(server: S3Server, bucket: str, prefix: str = "") -> list[str]:
    """The object keys stored under ``prefix`` (a signed ListObjectsV2, markers included)."""
    keys: list[str] = []
    token = None
    while True:
        query = {"list-type": "2", "prefix": prefix}
        if token:
            query["continuation-token"] = token
        body = server.request("GET", bucket, query=query).body.decode()
        keys += [part.split("</Key>")[0] for part in body.split("<Key>")[1:]]
        if "<NextContinuationToken>" not in body:
            return sorted(keys)
        token = body.split("<NextContinuationToken>")[1].split("</NextContinuationToken>")[0]


def state_of(location: str) -> dict[str, dict[Any, Any]]:
    """Every keyed state of the build operator: {state: {(key, namespace): value}}."""
    checkpoint = open_checkpoint(location)
    op = checkpoint.operator("build")
    return {s.name: {(key, namespace): stored
                     for _, key, namespace, stored in checkpoint.keyed_entries("build", s.name)}
            for s in op.states if s.scope == "keyed"}


def statectl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``statectl ARGS`` in a process of its own (this checkout's code, this environment)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def statectl_process(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def verify_all(location: str) -> list[int]:
    """Open every completed checkpoint of a state directory and check every file's checksum;
    the ids."""
    from formats.statectl.storage import DirectoryCheckpointStorage
    storage = DirectoryCheckpointStorage(location, create=False)
    ids = []
    for checkpoint in storage.completed():
        opened = open_checkpoint(checkpoint.location)
        for info in opened.metadata.files:
            opened.verify_checksum(info.path)
        ids.append(checkpoint.checkpoint_id)
    return ids
