"""What statectl could not decode: a value shown as such, and the parts of a snapshot it hides.

A snapshot written by a job nobody here wrote holds some field statectl has no decoder for, or
a corrupt byte. Reading never stops there (docs/flink-types.md, "Never all-or-nothing"): every
other value, state and operator is read, and what could not be decoded is accounted for in two
ways.

- :class:`Undecodable` stands *in place of a value* where the format delimits values (a Flink
  canonical savepoint's or RocksDB's key/value pairs, operator state elements): its Java class,
  the Flink serializer, the reason, and its bytes, untouched. The model keeps it where the value
  would be; outputs show it as a marker (text), an object ``{"undecodable": true, "class",
  "serializer", "reason", "bytes"}`` (JSON, bytes base64), or a null typed value with a
  ``value_undecodable`` struct beside it (Parquet).
- :class:`UndecodablePart` counts *what a reader had to leave out*: the values of one state in
  one key group of one subtask (a Flink heap checkpoint does not delimit values, so a value it
  cannot decode hides the rest of its state block; the block's end is found again, see
  :mod:`formats.flink.read.keyed`), or the keys of a stream whose key serializer is unknown.

Two cases are kept apart, as the exit codes are: **unsupported** (the bytes are intact and
statectl lacks a decoder: exit 0, a warning) and **damaged** (the bytes do not parse under a
serializer statectl knows, a stream ends early: exit 3 unless partial results are accepted,
and a problem for ``verify``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["PartsSummary", "Undecodable", "UndecodablePart", "describe_damage",
           "summarize_parts"]

#: Most bytes of one undecodable value kept in memory (longer values keep their first bytes
#: and say so): a corrupt length must not make statectl hold a huge copy.
MAX_KEPT_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A value statectl could not decode, kept in place of it.

    ``class_name``: the Java class of the value as far as the snapshot tells (a POJO's class,
    the class Kryo was given, else the serializer's). ``serializer``: the Flink serializer
    (its snapshot class, shortened). ``data``: the value's bytes exactly as stored where the
    format delimits the value (``None`` where it does not). ``damaged``: the bytes do not parse
    under a serializer statectl knows (else: statectl has no decoder for them).
    """

    class_name: str
    serializer: str
    reason: str
    data: bytes | None = None
    damaged: bool = False

    def __repr__(self) -> str:
        size = "" if self.data is None else f", {len(self.data)} bytes"
        return f"<undecodable {self.class_name}{size}: {self.reason}>"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class UndecodablePart:
    """What one reader left out: ``values`` values of one state (or keys of one stream).

    ``key_group`` is ``None`` when the part is not one key group's (a whole stream's keys).
    ``values`` is ``-1`` where the count is unknown. ``kept`` says whether the values are in
    the state's rows as :class:`Undecodable` markers (delimited formats) or missing from them
    (a heap checkpoint's block that could not be read). ``state`` is a state's name, or in
    parentheses what else was not read (``(keyed state)``: a subtask's keyed state stream,
    ``(operator state)``, ``(key group)``: a whole key group of a heap stream).

    ``operator`` is the operator's uid in the model; ``operator_label`` names it as output
    does (:attr:`statecore.checkpoint.OperatorIdentity.label`: the uid, else Flink's name
    with the OperatorID), :attr:`shown` whichever is known.
    """

    operator: str
    state: str
    subtask: int
    key_group: int | None
    values: int
    class_name: str
    serializer: str
    reason: str
    damaged: bool
    kept: bool = False
    operator_label: str = ""

    @property
    def shown(self) -> str:
        """The operator as output names it."""
        return self.operator_label or self.operator

    @property
    def of_state(self) -> bool:
        """Whether the part is one state's (else: a stream's or a key group's, see above)."""
        return not (self.state.startswith("(") and self.state.endswith(")"))


class PartsSummary(NamedTuple):
    """The parts of one ``(operator, state, damaged)``: see :func:`summarize_parts`."""

    operator: str
    state: str
    damaged: bool
    #: values not decoded, summed; -1 where some count is unknown
    values: int
    #: key groups they are in
    key_groups: int
    class_name: str
    #: the first part's reason
    reason: str
    #: the operator as output names it (:attr:`UndecodablePart.shown`)
    label: str
    #: values left out of the rows (not kept as markers), summed; -1 where unknown
    left_out: int
    #: the subtasks they are in
    subtasks: tuple[int, ...]


def summarize_parts(parts: Iterable[UndecodablePart]) -> list[PartsSummary]:
    """Parts grouped per ``(operator, state, damaged)``, sorted."""
    grouped: dict[tuple[str, str, bool], list[UndecodablePart]] = {}
    for part in parts:
        grouped.setdefault((part.operator, part.state, part.damaged), []).append(part)
    out = []
    for (operator, state, damaged), group in sorted(grouped.items()):
        out.append(PartsSummary(
            operator, state, damaged, _total(group),
            len({(p.subtask, p.key_group) for p in group if p.key_group is not None}),
            group[0].class_name, group[0].reason, group[0].shown,
            _total([p for p in group if not p.kept]),
            tuple(sorted({p.subtask for p in group if p.subtask >= 0}))))
    return out


def _total(parts: list[UndecodablePart]) -> int:
    """The parts' values summed; -1 where one's is unknown."""
    return -1 if any(p.values < 0 for p in parts) else sum(p.values for p in parts)


def describe_damage(parts: Iterable[UndecodablePart]) -> str:
    """The first damaged part in words (where, which value, why) and how many more.

    ``""`` when no part is damaged.
    """
    damaged = [p for p in parts if p.damaged]
    if not damaged:
        return ""
    first = damaged[0]
    where = f"operator {first.shown}, state {first.state!r}, subtask {first.subtask}" + (
        f", key group {first.key_group}" if first.key_group is not None else "")
    what = f" ({first.class_name} of {first.serializer})" if first.serializer else ""
    more = f" (and {len(damaged) - 1} more damaged parts)" if len(damaged) > 1 else ""
    return f"{where}{what}: {first.reason}{more}"
