"""What a decoder of Flink state could not decode, counted; and how it is named in messages.

:class:`Losses` collects, per state, key group, class and reason, the values a decoder kept as
:class:`~statecore.undecodable.Undecodable` markers or had to leave out
(:mod:`formats.flink.read.keyed`, :mod:`formats.flink.read.incremental`); the snapshot turns them
into :class:`~statecore.undecodable.UndecodablePart` s (:mod:`formats.flink.checkpoint`).
"""

from __future__ import annotations

import re

from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import CorruptCheckpointError, UnsupportedFormatError

__all__ = ["Losses", "described", "reason_of", "refuse_losses", "short_names"]


class Losses:
    """What a decoder could not decode, counted per state, key group, class and reason.

    :meth:`parts` lists them as ``(state, key_group, values, class, serializer, reason,
    damaged, kept)``, which :class:`statecore.undecodable.UndecodablePart` completes with the
    operator and subtask. ``kept``: the values are in the rows as
    :class:`~statecore.undecodable.Undecodable` markers; else they are missing from them.
    """

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int | None, str, str, str, bool, bool], int] = {}

    def add(self, state: str, key_group: int | None, values: int, class_name: str,
            serializer: str, reason: str, damaged: bool, kept: bool) -> None:
        key = (state, key_group, class_name, serializer, reason, damaged, kept)
        known = self._counts.get(key, 0)
        self._counts[key] = -1 if values < 0 or known < 0 else known + values

    def extend(self, other: Losses) -> None:
        for (state, kg, cls, ser, reason, damaged, kept), n in other._counts.items():
            self.add(state, kg, n, cls, ser, reason, damaged, kept)

    def parts(self) -> list[tuple[str, int | None, int, str, str, str, bool, bool]]:
        return [(state, kg, n, cls, ser, reason, damaged, kept)
                for (state, kg, cls, ser, reason, damaged, kept), n in self._counts.items()]

    def __bool__(self) -> bool:
        return bool(self._counts)


def described(snapshot: SerializerSnapshot | None) -> tuple[str, str]:
    """``(class, serializer)`` of the values of a serializer snapshot, for markers.

    The class the snapshot names (a POJO's, an enum's, Kryo's type class), else the
    serializer's own name: the snapshot says no more of the values' class.
    """
    if snapshot is None:
        return "(unknown)", "(no serializer)"
    named = snapshot.outer.get("class")
    if isinstance(named, str):
        return named, snapshot.short_name
    return snapshot.short_name.split("$")[0], snapshot.short_name


#: Java package prefixes, left out of messages (``org.apache.flink...base.LongSerializer``).
_PACKAGE = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+(?=[A-Z])")


def short_names(text: str) -> str:
    """``text`` with Java class names without their packages."""
    return _PACKAGE.sub("", text)


def reason_of(exc: BaseException, where: str) -> str:
    """An error's message without the location every message of one stream starts with."""
    text = str(exc)
    return text[len(where) + 2:] if where and text.startswith(where + ": ") else text


def refuse_losses(losses: Losses, where: str) -> None:
    """Raise when anything could not be decoded, for a reader that cannot report it.

    A Spark task: a partial result must not pass for a whole one. A
    :class:`CorruptCheckpointError` for damage, else an :class:`UnsupportedFormatError`; the
    message names the first part and says that the local engine reads the rest.
    """
    parts = losses.parts()
    if not parts:
        return
    damaged = [p for p in parts if p[6]]
    state, key_group, _values, cls, _ser, reason, is_damaged, _kept = (damaged or parts)[0]
    error = CorruptCheckpointError if is_damaged else UnsupportedFormatError
    raise error(f"{where}: state {state!r}, key group {key_group}: {cls}: {reason} (the local "
                f"engine reads everything else and reports what it could not decode)")
