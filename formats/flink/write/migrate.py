"""A Flink snapshot written for another version of its job: what ``statectl migrate`` writes.

The rewrite (:mod:`formats.flink.write.rewrite`) writes each operator under the new job's
identity (:class:`~formats.flink.write.rewrite.Retarget`). A state the new job restores as it is
(or that Flink migrates itself) keeps the meta info and bytes the source has; a state Flink would
refuse is written with the new job's meta info -- its name and serializer snapshots, as the new
job's own snapshot holds them -- and every value converted to the new serializers and checked
(:func:`formats.flink.types.convert.converter`): a value that does not convert stops the write,
named, before anything is published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from formats.flink.read.metadata import FlinkOperator
from formats.flink.read.state_meta import KeyedHeader, StateInfo
from formats.flink.types.convert import converter
from formats.flink.write.rewrite import Retarget
from formats.model.compatibility import OperatorMigration
from statecore.checkpoint import OperatorMetadata
from statecore.errors import InvalidArgumentError

__all__ = ["retargets", "state_converter"]


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


def retargets(source: JobSnapshot, like: JobSnapshot,
              migrations: Sequence[OperatorMigration]) -> dict[str, Retarget]:
    """How each operator of ``source`` is written for the job that wrote ``like``."""
    out: dict[str, Retarget] = {}
    for m in migrations:
        new_op = like.operator(m.new_uid)
        new_header = like.keyed_header(m.new_uid)
        new_states: Mapping[str, StateInfo] = {
            s.name: s for s in (new_header.states if new_header else [])}
        header = source.keyed_header(m.uid)
        states: dict[str, StateInfo | None] = {}
        converters: dict[str, Callable[[Any], Any]] = {}
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
            states[info.name] = new_states[target]
            converters[info.name] = state_converter(
                new_states[target], f"operator {new_op.identity.label}, state {info.name!r}")
        out[m.uid] = Retarget(new_op.identity.id, like.flink_operator(m.new_uid).name,
                              new_op.identity.uid, states, converters)
    return out
