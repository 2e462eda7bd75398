"""A statectl checkpoint as a Flink canonical savepoint: bootstrapping a Flink job's state.

Each operator keeps its uid, name, parallelism and max parallelism; its OperatorID is the one
Flink derives from the uid (``StreamGraphHasherV2``: MurmurHash3 x64 128 of the uid), so the
Flink job that declares the same uids finds the state. Types map onto Flink's built-in
serializers (:mod:`formats.flink.write.snapshot_out`), state kinds onto Flink's (value, list, map,
reducing, aggregating: ``KEYED_STATE_TYPE``), TTL onto Flink's TTL serializer with the stored
last-access timestamps (the TTL itself is the job's to declare; Flink does not store it). Keyed
entries stay in their key groups (statectl's and Flink's hash are the same); operator state
keeps its per-subtask lists (split, union) and copies (broadcast).

What Flink has no serializer for, or statectl cannot name (state of type ``any``; a namespace
other than the void namespace, such as statectl's ``int64`` window starts, which are no
``TimeWindow``), is refused with a message naming the state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from formats.flink.types.encoders import Encoder, encoder_for
from formats.flink.write.savepoint_writer import (
    Entry,
    KeyedStateOut,
    OperatorStateOut,
    SavepointOperator,
    write_savepoint,
)
from formats.flink.write.snapshot_out import (
    LIST_SNAPSHOT,
    MAP_SNAPSHOT,
    FlinkSerializer,
    composite,
    serializer_for_spec,
    state_meta_info,
    ttl_serializer,
)
from formats.flink.write.versions import TargetRelease, target_release
from formats.model.checkpoint import Checkpoint, WrittenSnapshot
from statecore.checkpoint import OperatorMetadata, StateMetadata
from statecore.errors import UnsupportedFormatError
from statecore.key_groups import KeyGroupRange

__all__ = ["bootstrap_release", "write_flink_savepoint"]

KEY_VALUE, OPERATOR, BROADCAST = 0, 1, 2
_MODES = {"split": "SPLIT_DISTRIBUTE", "union": "UNION", "broadcast": "BROADCAST"}


def bootstrap_release(flink_version: str | None) -> TargetRelease:
    """The release a bootstrap savepoint is for: ``flink_version`` ("1.20"), else the newest.

    Raises :class:`~statecore.errors.InvalidArgumentError` for one statectl does not write for.
    """
    return target_release(flink_version, None)


def write_flink_savepoint(checkpoint: Checkpoint, location: str, *,
                          checkpoint_id: int | None = None, compress: bool = False,
                          flink_version: str | None = None) -> WrittenSnapshot:
    """Write ``checkpoint`` (statectl's format) as a canonical savepoint for ``flink_version``.

    The serializers statectl's types map onto are written alike by every release it writes for
    (:mod:`formats.flink.write.versions`); only ``_metadata`` differs. The default is the newest.
    """
    target = bootstrap_release(flink_version)
    operators = [_operator(checkpoint, op) for op in checkpoint.metadata.operators]
    new_id = checkpoint.metadata.checkpoint_id if checkpoint_id is None else checkpoint_id
    written = write_savepoint(location, new_id, operators, compress=compress,
                              release=target.release)
    return replace(written, release=target.to_json(), release_text=target.describe())


def _encoder(serializer: FlinkSerializer) -> Encoder:
    encoder = encoder_for(serializer.snapshot)
    assert encoder is not None, serializer.snapshot.class_name  # every snapshot we name has one
    return encoder


def _operator(checkpoint: Checkpoint, op: OperatorMetadata) -> SavepointOperator:
    where = f"operator {op.identity.label}"
    out = SavepointOperator(op.identity.id, op.name or None, op.uid, op.parallelism,
                            op.max_parallelism)
    keyed = [s for s in op.states if s.scope == "keyed"]
    if keyed:
        assert op.key_type is not None
        key = serializer_for_spec(op.key_type, f"{where} (keys)")
        out.key_snapshot, out.key = key.with_proxy, _encoder(key)
        out.key_length = _fixed_length(op.key_type)
        out.keyed_states = [_keyed_state(state, where) for state in keyed]
        for st in op.subtasks:
            if st.key_group_range is None:
                continue
            out.keyed[st.index] = (st.key_group_range, [
                list(_entries(checkpoint, op, state, st.key_group_range)) for state in keyed])
    for st in op.subtasks:
        states = [_operator_state(checkpoint, op, state, st.index, where)
                  for state in op.states if state.scope == "operator"]
        if states:
            out.operator[st.index] = states
    return out


#: ``TypeSerializer.getLength()`` of the fixed-size serializers statectl's specs map onto.
_LENGTHS = {"int64": 8, "int32": 4, "int16": 2, "int8": 1, "float64": 8, "float32": 4,
            "bool": 1, "char": 2}


def _fixed_length(spec: str) -> int:
    return _LENGTHS.get(spec, -1)


def _keyed_state(state: StateMetadata, where: str) -> KeyedStateOut:
    what = f"{where}, state {state.name!r}"
    if state.namespace_type != "void":
        raise UnsupportedFormatError(
            f"{what}: its namespace ({state.namespace_type}) has no Flink equivalent statectl "
            f"can write; only state in the void namespace converts")
    if state.kind == "list":  # a list of (TTL-wrapped) elements
        element = serializer_for_spec(state.value_type, what)
        stored = ttl_serializer(element) if state.ttl else element
        value = composite(LIST_SNAPSHOT, 1, b"", [stored])
        layout, encoded, user_key = "list", stored, None
    elif state.kind == "map":
        assert state.user_key_type is not None
        item = serializer_for_spec(state.value_type, what)
        stored = ttl_serializer(item) if state.ttl else item
        user_key = serializer_for_spec(state.user_key_type, f"{what} (map keys)")
        value = composite(MAP_SNAPSHOT, 1, b"", [user_key, stored])
        layout, encoded = "map", stored
    else:
        plain = serializer_for_spec(state.value_type, what)
        value = ttl_serializer(plain) if state.ttl else plain
        layout, encoded, user_key = "value", value, None
    void = serializer_for_spec("void", what)
    meta = state_meta_info(state.name, KEY_VALUE, {"KEYED_STATE_TYPE": state.kind.upper()},
                           {"NAMESPACE_SERIALIZER": void, "VALUE_SERIALIZER": value})
    return KeyedStateOut(state.name, meta, layout, _encoder(void), 0, _encoder(encoded),
                         user_key=None if user_key is None else _encoder(user_key))


def _entries(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
             key_groups: KeyGroupRange) -> Iterator[Entry]:
    """The state's entries of ``key_groups``.

    TTL-wrapped values stay ``TtlValue`` s, as the TTL serializer's encoder takes them.
    """
    yield from checkpoint.keyed_entries(op.uid, state.name, key_groups)


def _operator_state(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
                    subtask: int, where: str) -> OperatorStateOut:
    what = f"{where}, operator state {state.name!r}"
    mode = _MODES[state.kind]
    value = serializer_for_spec(state.value_type, what)
    entries = [e for e in checkpoint.operator_entries(op.uid, subtask) if e.name == state.name]
    if state.kind == "broadcast":
        assert state.user_key_type is not None
        key = serializer_for_spec(state.user_key_type, f"{what} (keys)")
        meta = state_meta_info(state.name, BROADCAST,
                               {"OPERATOR_STATE_DISTRIBUTION_MODE": mode},
                               {"KEY_SERIALIZER": key, "VALUE_SERIALIZER": value})
        pairs = [pair for e in entries for pair in e.entries]
        return OperatorStateOut(state.name, meta, mode, pairs, _encoder(value), _encoder(key))
    meta = state_meta_info(state.name, OPERATOR, {"OPERATOR_STATE_DISTRIBUTION_MODE": mode},
                           {"VALUE_SERIALIZER": value})
    elements = [x for e in entries for x in e.elements]
    return OperatorStateOut(state.name, meta, mode, elements, _encoder(value))
