"""A Flink savepoint far bigger decoded than the memory a test process may take (issue 45).

:func:`write_big_savepoint` writes :data:`KEYS` keys of a bytes value state, each value
:data:`VALUE_BYTES` bytes: decoded whole, several times ``KEYS x VALUE_BYTES``. :data:`LIMIT`
(``RLIMIT_AS`` of :func:`limited`, for ``subprocess.run(preexec_fn=...)``) is far below that,
and above what reading it piece by piece takes (about 0.6 GB of address space for ~0.1 GB
resident).
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

KEYS, VALUE_BYTES = 300, 1 << 20
LIMIT = 900 << 20


def value(i: int) -> bytes:
    """The value of key ``key-<i>``."""
    return f"{i:08d}".encode() * (VALUE_BYTES // 8)


def write_big_savepoint(base: Path) -> Path:
    """A Flink canonical savepoint of :data:`KEYS` values of 1 MiB under ``base`` (its path).

    Written by statectl: a statectl checkpoint converted to Flink's format.
    """
    from formats.open import open_checkpoint
    from formats.ops.convert import convert_checkpoint
    from formats.statectl.writer import write_checkpoint
    from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
    from statecore.keyed_backend import HeapKeyedStateBackend
    from statecore.keyed_state import value_state

    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    state = backend.get_value_state(value_state("blob", "bytes"))
    for i in range(KEYS):
        backend.set_current_key(f"key-{i}")
        state.update(value(i))
    source = base / "statectl"
    write_checkpoint(str(source), 1, [OperatorSnapshot(
        "blobs", "blobs", 1, 128, [SubtaskSnapshot(0, backend.snapshot())])])
    del backend, state
    savepoint = base / "savepoint"
    convert_checkpoint(open_checkpoint(str(source)), str(savepoint))
    return savepoint


def limited() -> None:
    """Limit this process's address space to :data:`LIMIT`."""
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run_limited(*args: str) -> subprocess.CompletedProcess[str]:
    """``statectl ARGS`` in a process limited to :data:`LIMIT` (:func:`limited`)."""
    from oracle import REPO_ROOT
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO_ROOT,
                          preexec_fn=limited, capture_output=True, text=True, timeout=300,
                          check=False)
