"""A Flink snapshot written for another version of its job: what ``statectl migrate`` writes.

The rewrite (:mod:`formats.flink.write.rewrite`) writes each operator under the new job's
identity (:class:`~formats.flink.write.rewrite.Retarget`). A state the new job restores as it is
(or that Flink migrates itself) keeps the meta info and bytes the source has; a state Flink would
refuse is written with the new job's meta info -- its name and serializer snapshots, as the new
job's own snapshot holds them -- and every value converted to the new serializers and checked
(:func:`formats.flink.types.convert.converter`): a value that does not convert stops the write,
named, before anything is published.

How an operator is written is decided here, once (:func:`retargets`), as plain data
(:class:`RetargetSpec`: the new job's meta infos as Flink wrote them); the rewrite builds the
:class:`~formats.flink.write.rewrite.Retarget` from it where the values are converted -- in this
process, or in each Spark task (:mod:`formats.spark.flink`): the same converters either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from formats.flink.java.input import DataReader
from formats.flink.read.metadata import FlinkOperator
from formats.flink.read.state_meta import KeyedHeader, StateInfo, read_state_info
from formats.flink.types.convert import converter
from formats.flink.write.rewrite import Retarget
from formats.model.compatibility import OperatorMigration
from statecore.checkpoint import OperatorMetadata
from statecore.errors import InvalidArgumentError

__all__ = ["RetargetSpec", "retargets", "state_converter"]


class JobSnapshot(Protocol):
    """What the migration reads of the new job's snapshot (``FlinkCheckpoint`` provides it)."""

    def operator(self, uid: str) -> OperatorMetadata: ...

    def keyed_header(self, uid: str) -> KeyedHeader | None: ...

    def flink_operator(self, uid: str) -> FlinkOperator: ...


def state_converter(info: StateInfo, what: str) -> Callable[[Any], Any]:
    """A state's values (as the state's kind holds them) converted to ``info``'s serializers."""
    value = info.serializers.get("VALUE_SERIALIZER")
    if value is None or info.kind == "timers":
        raise InvalidArgumentError(f"{what}: statectl cannot convert a state of kind "
                                   f"{info.kind or info.backend_type} yet")
    if info.kind == "list":
        if not value.nested:
            raise InvalidArgumentError(f"{what}: a list state without its element serializer")
        element = converter(value.nested[0], what)
        return lambda values: [element(v) for v in values]
    if info.kind == "map":
        if len(value.nested) != 2:
            raise InvalidArgumentError(f"{what}: a map state without its key and value "
                                       "serializers")
        key, item = converter(value.nested[0], f"{what} (map key)"), converter(
            value.nested[1], what)
        return lambda entries: {key(k): item(v) for k, v in entries.items()}
    return converter(value, what)


@dataclass(frozen=True)
class RetargetSpec:
    """How one operator is written for the new job, as data (a task of Spark receives it).

    The new job's identity (OperatorID, name, uid; ``label`` names it in messages) and each
    keyed state of the source that is written: ``None`` as the source holds it, else the new
    job's meta info of the state it is written as, its bytes as Flink wrote them
    (``StateInfo.raw``). A :class:`Retarget`'s meta infos hold codecs and its converters
    closures, which do not cross to another process; :meth:`retarget` builds them.
    """

    operator_id: str
    name: str | None
    uid: str | None
    label: str
    states: Mapping[str, bytes | None]

    def retarget(self) -> Retarget:
        """The :class:`Retarget`: meta infos read, each converted state's converter built.

        Build it under the Kryo of the release written for (``written_by``), as the
        converters and encoders built from it write that Kryo's bytes.
        """
        states: dict[str, StateInfo | None] = {}
        converters: dict[str, Callable[[Any], Any]] = {}
        for name, raw in self.states.items():
            what = f"operator {self.label}, state {name!r}"
            states[name] = info = None if raw is None else read_state_info(DataReader(raw, what))
            if info is not None:
                converters[name] = state_converter(info, what)
        return Retarget(self.operator_id, self.name, self.uid, states, converters)


def retargets(source: JobSnapshot, like: JobSnapshot,
              migrations: Sequence[OperatorMigration]) -> dict[str, RetargetSpec]:
    """How each operator of ``source`` is written for the job that wrote ``like``.

    Checked as far as the states' kinds; what cannot be converted is refused when the
    converters are built (:meth:`RetargetSpec.retarget`, before any value is read).
    """
    out: dict[str, RetargetSpec] = {}
    for m in migrations:
        new_op = like.operator(m.new_uid)
        new_header = like.keyed_header(m.new_uid)
        new_states: Mapping[str, StateInfo] = {
            s.name: s for s in (new_header.states if new_header else [])}
        header = source.keyed_header(m.uid)
        states: dict[str, bytes | None] = {}
        for info in header.states if header else []:
            if info.name in m.drop:
                continue
            target = m.convert.get(info.name)
            if target is None:
                states[info.name] = None
                continue
            if target not in new_states:
                raise InvalidArgumentError(
                    f"operator {new_op.identity.label}: the new job has no state {target!r} "
                    f"to write {info.name!r} as (its states: {', '.join(sorted(new_states))})")
            if (new_states[target].kind or "?") != (info.kind or "?"):
                raise InvalidArgumentError(
                    f"operator {new_op.identity.label}, state {info.name!r}: a {info.kind} state "
                    f"in OLD, a {new_states[target].kind} state in the new job: statectl does "
                    "not turn one kind of state into another")
            states[info.name] = new_states[target].raw
        out[m.uid] = RetargetSpec(new_op.identity.id, like.flink_operator(m.new_uid).name,
                                  new_op.identity.uid, new_op.identity.label, states)
    return out
