"""TTLs given by the user (``--ttl STATE=DURATION``) for states whose snapshot lacks them.

A Flink snapshot stores each TTL value's last access but not the TTL itself (it is in the job's
``StateTtlConfig``): such a state's :attr:`~statecore.checkpoint.StateMetadata.ttl` is
:data:`~statecore.checkpoint.TTL_UNKNOWN`, and what expired cannot be computed until the TTL is
given. A state is named as the CLI names states elsewhere: its name alone when one operator
has a state of that name, else ``OP/STATE`` with OP the operator's uid, name or OperatorID.
A statectl checkpoint stores its TTLs; one given replaces the stored one (what would expire
with another TTL).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from formats.model.checkpoint import Checkpoint
from statecore.checkpoint import TTL_UNKNOWN, OperatorMetadata, StateMetadata
from statecore.errors import InvalidArgumentError

__all__ = ["apply_ttls", "resolve_ttls", "state_label", "unknown_ttls"]

#: ``(operator uid, state name) -> TTL in ms`` (the model's uid, as every view names states)
Ttls = dict[tuple[str, str], int]


def state_label(op: OperatorMetadata, state: StateMetadata) -> str:
    """How ``--ttl`` names a state unambiguously: ``OP/STATE``, OP as output names it."""
    identity = op.identity
    return f"{identity.uid or identity.name or identity.id}/{state.name}"


def _names(op: OperatorMetadata) -> set[str]:
    identity = op.identity
    return {n for n in (op.uid, identity.uid, identity.id, op.name) if n}


def resolve_ttls(checkpoint: Checkpoint, given: Sequence[tuple[str, int]]) -> Ttls:
    """The states ``given`` names (``(STATE, ms)`` pairs), by ``(uid, state)``, checked.

    Raises :class:`~statecore.errors.InvalidArgumentError` for a name that matches no state,
    or a bare name several operators have, or a state without TTL, or one given twice with two
    TTLs; the message lists the states with TTL by the names ``--ttl`` takes.
    """
    out: Ttls = {}
    operators = checkpoint.metadata.operators
    with_ttl = [state_label(op, s) for op in operators for s in op.states if s.ttl is not None]
    listed = (f"the states with TTL: {', '.join(with_ttl)}" if with_ttl
              else "no state of this snapshot has TTL")
    for text, ttl in given:
        if ttl <= 0:
            raise InvalidArgumentError(f"{text}: a TTL must be positive, got {ttl} ms")
        matches = [(op, s) for op in operators for s in op.states if s.scope == "keyed"
                   and (text == s.name or any(text == f"{n}/{s.name}" for n in _names(op)))]
        if not matches:
            raise InvalidArgumentError(f"no keyed state {text!r} in this snapshot ({listed})")
        if len(matches) > 1:
            raise InvalidArgumentError(
                f"{len(matches)} operators have a state {text!r}: name one as OP/STATE ("
                + ", ".join(state_label(op, s) for op, s in matches) + ")")
        op, state = matches[0]
        if state.ttl is None:
            raise InvalidArgumentError(f"state {state_label(op, state)} has no TTL ({listed})")
        if out.get((op.uid, state.name), ttl) != ttl:
            raise InvalidArgumentError(f"state {state_label(op, state)} is given two TTLs")
        out[(op.uid, state.name)] = ttl
    return out


def apply_ttls(checkpoint: Checkpoint, ttls: Ttls) -> None:
    """Declare the TTLs ``ttls`` gives in ``checkpoint``'s metadata (its data is unchanged)."""
    if not ttls:
        return
    metadata = checkpoint.metadata
    checkpoint.metadata = replace(metadata, operators=tuple(
        replace(op, states=tuple(replace(s, ttl=ttls.get((op.uid, s.name), s.ttl))
                                 for s in op.states))
        for op in metadata.operators))


def unknown_ttls(checkpoint: Checkpoint) -> list[tuple[OperatorMetadata, StateMetadata]]:
    """The states with TTL values whose TTL is neither stored nor given."""
    return [(op, s) for op in checkpoint.metadata.operators for s in op.states
            if s.ttl == TTL_UNKNOWN]
