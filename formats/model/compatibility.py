"""Whether a new job version restores a snapshot's state: the verdicts, format-neutral.

A restore compares, for every state, what the snapshot's serializers wrote with what the new job
registers. Flink's answer (``TypeSerializerSchemaCompatibility``) is one of four; statectl adds
one for what it cannot tell. The verdicts are ordered: the worse of two is the larger.

* :attr:`Verdict.AS_IS` -- ``compatibleAsIs``: the new serializer reads the old bytes.
* :attr:`Verdict.RECONFIGURED` -- ``compatibleWithReconfiguredSerializer``: Flink reconfigures
  the new serializer to read them (an enum with constants appended, Kryo registrations in
  another order); the restore needs nothing more.
* :attr:`Verdict.MIGRATION` -- ``compatibleAfterMigration``: Flink reads every value with the
  old serializer and writes it with the new one while restoring (a POJO field added or removed).
  Flink does this for keyed state values only: a key or namespace serializer that needs it is
  refused.
* :attr:`Verdict.UNKNOWN` -- statectl cannot tell (a serializer snapshot it cannot read).
* :attr:`Verdict.INCOMPATIBLE` -- ``incompatible``: Flink refuses the restore (known for sure,
  so it outweighs an unknown part).

Formats fill :class:`StateCheck` s (:meth:`formats.model.checkpoint.Checkpoint.restore_checks`);
``statectl compat`` (:mod:`formats.ops.compat`) matches operators and gives the verdict of the
whole restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["OperatorMigration", "StateCheck", "Verdict", "worst"]


class Verdict(IntEnum):
    """How a state restores; ordered from best to worst (see the module doc)."""

    AS_IS = 0
    RECONFIGURED = 1
    MIGRATION = 2
    UNKNOWN = 3  # worse than any restore, better than a known refusal
    INCOMPATIBLE = 4

    @property
    def label(self) -> str:
        """What output calls it: ``as is``, ``reconfigured``, ``after migration``, ..."""
        return _LABELS[self]


_LABELS = {Verdict.AS_IS: "as is", Verdict.RECONFIGURED: "reconfigured",
           Verdict.MIGRATION: "after migration", Verdict.INCOMPATIBLE: "incompatible",
           Verdict.UNKNOWN: "unknown"}


def worst(*verdicts: Verdict) -> Verdict:
    """The worse of ``verdicts`` (:attr:`Verdict.AS_IS` for none)."""
    return max(verdicts, default=Verdict.AS_IS)


@dataclass(frozen=True)
class StateCheck:
    """One state of a matched operator, as the new job would restore it.

    ``detail`` says what differs (``""`` when nothing does), naming the first place where the
    verdict was decided (``Event.amount: IntSerializer -> LongSerializer``); ``cited`` the Flink
    class whose rule gave it. ``old`` and ``new`` describe the serializers (``None``: the state
    is not in that snapshot).
    """

    state: str
    scope: str  # keyed | operator | key (the operator's key serializer)
    verdict: Verdict
    detail: str
    cited: str
    old: str | None
    new: str | None
    #: incompatible, but ``statectl migrate`` converts its values (checked as it writes them)
    migratable: bool = False


@dataclass(frozen=True)
class OperatorMigration:
    """How ``statectl migrate`` writes one operator of OLD: as the new job's operator ``new_uid``.

    ``convert``: OLD's states written with the new job's serializers, under the new job's
    name for them (every value converted and checked, or nothing written); the other states
    are written as OLD holds them (the new job restores them as is or Flink migrates them),
    but those in ``drop``, which are left out.
    """

    uid: str
    new_uid: str
    convert: dict[str, str]
    drop: frozenset[str] = frozenset()
