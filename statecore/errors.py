"""The one exception tree of statectl.

Every error statectl raises on purpose is a :class:`StatectlError`; the CLI turns it into one
line on stderr and exit code 3 (see the README). Errors of the layers below (pyarrow, OSError,
JSON) are translated at the boundary with ``raise ... from exc``.

::

    StatectlError
    ├── InvalidArgumentError          (also ValueError) a precondition Flink checks, e.g. bounds
    │   ├── ParallelismError          parallelism / max parallelism outside 1..32768 or p > max p
    │   └── UnknownKeyHashError       a key type whose Java hashCode statectl cannot compute
    │                                 (a POJO's, an enum's): its key groups are unknown
    ├── KeyGroupError                 a key or key group outside a backend's KeyGroupRange
    ├── StateMapError                 misuse of a state map or of one of its snapshots
    │   ├── ConcurrentModificationError   the map changed structurally under an iterator
    │   └── SnapshotReleasedError     a released snapshot was read, or an unknown one released
    ├── TraceScriptError              a `statectl trace` script line that cannot be applied
    ├── MissingDependencyError        an optional extra is not installed (says what to install)
    ├── EngineError                   a distributed job (Spark) failed; nothing was published
    └── CheckpointError               a checkpoint cannot be written or read as asked
        ├── CheckpointCancelledError  an asynchronous write was cancelled (nothing was kept)
        ├── ConcurrentWriteError      another process holds the state directory, or claimed
        │                             the same output or checkpoint id first
        ├── CorruptCheckpointError    malformed, truncated or inconsistent files or metadata
        ├── StorageError              the storage failed or refused: unreachable endpoint,
        │                             timeout, credentials, missing bucket, throttling
        ├── UnsafePathError           a path in a checkpoint escapes its directory
        └── UnsupportedFormatError    an unknown format marker or version, or a value type
                                      the format cannot store
"""

from __future__ import annotations

__all__ = [
    "CheckpointCancelledError",
    "CheckpointError",
    "ConcurrentModificationError",
    "ConcurrentWriteError",
    "CorruptCheckpointError",
    "EngineError",
    "InvalidArgumentError",
    "KeyGroupError",
    "MissingDependencyError",
    "ParallelismError",
    "SnapshotReleasedError",
    "StateMapError",
    "StatectlError",
    "StorageError",
    "TraceScriptError",
    "UnsafePathError",
    "UnknownKeyHashError",
    "UnsupportedFormatError",
]


class StatectlError(Exception):
    """Root of every error statectl raises deliberately."""


class InvalidArgumentError(StatectlError, ValueError):
    """An argument violates a documented precondition."""


class ParallelismError(InvalidArgumentError):
    """Parallelism or max parallelism outside Flink's bounds (1..32768, p <= max p)."""


class UnknownKeyHashError(InvalidArgumentError):
    """The key type's Java ``hashCode`` is user code or identity-based: no key group is known."""


class KeyGroupError(StatectlError):
    """A key (or key group) does not belong to the key-group range at hand."""


class StateMapError(StatectlError):
    """A state map or one of its snapshots was used against its contract."""


class ConcurrentModificationError(StateMapError):
    """Port of Java's ``ConcurrentModificationException`` for state-map iterators."""


class SnapshotReleasedError(StateMapError):
    """A snapshot was used after release, or released by a map that does not own it."""


class TraceScriptError(StatectlError):
    """A line of a ``statectl trace`` script is malformed or cannot be applied."""

    def __init__(self, message: str, line_number: int | None = None) -> None:
        self.line_number = line_number
        prefix = f"line {line_number}: " if line_number is not None else ""
        super().__init__(prefix + message)


class MissingDependencyError(StatectlError):
    """An optional dependency is not installed; the message gives the ``pip install``."""


class EngineError(StatectlError):
    """A job on a distributed engine (Spark) failed; its partial output was removed."""


class CheckpointError(StatectlError):
    """A checkpoint cannot be written or read as asked."""


class CheckpointCancelledError(CheckpointError):
    """An asynchronous checkpoint write was cancelled; its partial files were removed."""


class ConcurrentWriteError(CheckpointError):
    """Another process writes the same state directory, or claimed the same output first."""


class StorageError(CheckpointError):
    """The storage failed or refused a request (network, timeout, credentials, bucket, 503).

    The message says what was being done, where, and the store's own error code.
    """


class CorruptCheckpointError(CheckpointError):
    """Files or metadata are malformed, truncated, or disagree with each other."""


class UnsafePathError(CheckpointError):
    """A path recorded in a checkpoint is absolute, climbs out with ``..`` or a symlink."""


class UnsupportedFormatError(CheckpointError):
    """An unknown format marker or major version, or a type the format cannot store."""
