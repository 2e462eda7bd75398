"""What a job's sources have read, format-neutral: splits and enumerator progress.

``inspect`` shows it as "what this job has read". A format fills it from its own state (Flink's
``SourceReaderState`` and source coordinator state: :mod:`formats.flink.read.sources`); statectl's
own checkpoints keep source offsets as ordinary operator state and report none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SourceProgress", "SourceSplit"]


@dataclass(frozen=True)
class SourceSplit:
    """One split: what it reads (``resource``), from where, and how far a reader got.

    For a file split: ``resource`` is the file's path, ``start`` and ``length`` the byte range,
    ``position`` the checkpointed offset a reader resumes from (``None``: from ``start``) and
    ``records_to_skip`` the records after ``position`` already emitted; ``details`` has the
    file's modification time, size and the hosts holding it.
    """

    split_id: str
    resource: str
    start: int | None
    length: int | None
    position: int | None = None
    records_to_skip: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceProgress:
    """What one source operator has read: reader splits and enumerator state.

    ``connector`` names the format decoded (``"file"``), ``None`` when none was recognised.
    ``readers`` has the splits each subtask held, in flight, ``pending`` the splits the
    enumerator had not assigned yet, ``processed`` the paths it had already enumerated (a
    continuous FileSource never reads them again). ``notes`` say what was not decoded.
    """

    uid: str
    connector: str | None
    readers: tuple[tuple[int, tuple[SourceSplit, ...]], ...]
    pending: tuple[SourceSplit, ...]
    processed: tuple[str, ...]
    notes: tuple[str, ...] = ()
