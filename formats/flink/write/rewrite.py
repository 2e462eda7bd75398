"""A Flink snapshot rewritten as a canonical savepoint: rescaled, re-hashed, backend-neutral.

The source is any Flink snapshot statectl reads (a heap checkpoint, a native or canonical
savepoint, a RocksDB incremental checkpoint); the output is a canonical savepoint, which Flink
restores into any state backend. The plan (:func:`formats.ops.rescale.plan_checkpoint`) says where
everything goes:

- Keyed state: every new subtask gets its key-group range; its entries come from the old
  subtasks' decoded state. With a new max parallelism every key's key group is recomputed from
  the key serializer's Java hash (``KeyGroupRangeAssignment``); a key type whose hash is not
  known (user code) is refused. Keys and values are encoded back with encoders that mirror the
  decoders, and the serializer snapshots are carried over as Flink wrote them, so Flink sees
  the serializers it wrote.
- Split (``SPLIT_DISTRIBUTE``) operator state: repartitioned as Flink's
  ``RoundRobinOperatorStateRepartitioner`` would (the plan's ranges). Union state: Flink gives
  every subtask the union of all subtasks' lists on restore, so the savepoint keeps each element
  once: old subtask ``i``'s list goes to new subtask ``i % P``. Broadcast state: copy
  ``i % old_p``, as planned.
- Coordinator state (a source's split enumerator) is carried over as is.

Every operator gets the parallelism and max parallelism its plan gives
(:func:`statecore.rescale_plan.rescale_targets`): the new ones, as Flink refuses a job whose
configured max parallelism differs from the savepoint's, except for an operator kept at its own
(a max parallelism set lower than the other operators', as Flink's SQL planner sets 1 on a
sink's committer or a global aggregate), whose ``_metadata`` entry keeps the source's exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, Protocol

from formats.flink.read.keyed import KeyedHeader, StateInfo
from formats.flink.read.metadata import FlinkOperator
from formats.flink.read.operator import DecodedOperatorState
from formats.flink.types.encoders import Encoder, encoder_for
from formats.flink.types.snapshots import SerializerSnapshot
from formats.flink.write.savepoint_writer import (
    Entry,
    KeyedStateOut,
    OperatorProgress,
    OperatorStateOut,
    SavepointOperator,
    write_savepoint,
)
from formats.flink.write.versions import LATEST, FlinkRelease
from formats.model.checkpoint import WrittenSnapshot
from statecore.checkpoint import CheckpointMetadata, OperatorMetadata
from statecore.errors import CheckpointError, UnsupportedFormatError
from statecore.key_groups import KeyGroupRange, compute_key_group_for_key_hash
from statecore.rescale_plan import OperatorPlan, RescalePlan
from statecore.ttl import TtlValue, expired

__all__ = ["Expiry", "FlinkSource", "Retarget", "converted", "keyed_layout", "retargeted_header",
           "rewrite_flink_savepoint", "savepoint_operators"]


class FlinkSource(Protocol):
    """What the rewrite reads of a decoded Flink snapshot (``FlinkCheckpoint`` provides it)."""

    metadata: CheckpointMetadata
    unpickled: bool

    def open_problems(self) -> list[tuple[str, str, str]]: ...

    def keyed_header(self, uid: str) -> KeyedHeader | None: ...

    keyed_decoded: bool

    def decoded_rows(self, relative: str) -> list[tuple[int, Any, Any, Any]]: ...

    def decoded_runs(self, relative: str, first: int, last: int
                     ) -> Iterator[list[tuple[int, Any, Any, Any]]]: ...

    def decoded_operator_state(self, relative: str) -> DecodedOperatorState: ...

    def flink_operator(self, uid: str) -> FlinkOperator: ...


@dataclass(frozen=True)
class Retarget:
    """An operator written for another job version (``statectl migrate``).

    It is written under that job's identity (OperatorID, name, uid). Each keyed state of the
    source listed in ``states`` is written: with its own meta info (``None``: as the source
    holds it), or with the new job's (``StateInfo``: its name and serializers, every value
    passed through ``converters[state]`` first); a state not listed is left out.
    """

    operator_id: str
    name: str | None
    uid: str | None
    states: Mapping[str, StateInfo | None]
    converters: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)


def rewrite_flink_savepoint(checkpoint: FlinkSource, plan: RescalePlan, location: str, *,
                            checkpoint_id: int | None = None, compress: bool = False,
                            release: FlinkRelease = LATEST,
                            drop_expired_at: int | None = None,
                            retargets: Mapping[str, Retarget] | None = None,
                            progress: OperatorProgress | None = None) -> WrittenSnapshot:
    """Write ``checkpoint`` as ``plan`` says, as a canonical savepoint for ``release``.

    ``drop_expired_at`` (epoch ms): leave out what TTL expired then (:class:`Expiry`).
    ``retargets`` (by the source's model uid): the operators written for another job version,
    the only ones written then (:class:`Retarget`). ``progress``: per operator, as
    :func:`~formats.flink.write.savepoint_writer.write_savepoint` reports it (each
    operator's keyed entries are read, converted and written in its turn).
    """
    expiry = None if drop_expired_at is None else Expiry(drop_expired_at)
    operators = savepoint_operators(checkpoint, plan, expiry=expiry, retargets=retargets)
    new_id = checkpoint.metadata.checkpoint_id if checkpoint_id is None else checkpoint_id
    written = write_savepoint(location, new_id, operators, compress=compress, release=release,
                              progress=progress)
    return written if expiry is None else replace(written, dropped=expiry.dropped)


class Expiry:
    """What ``rescale --drop-expired`` leaves out: TTL values expired at ``now``.

    Flink's rule ``last access + ttl <= now`` (:func:`statecore.ttl.expired`), with each
    state's TTL from the model (a Flink snapshot has none: given with ``--ttl``,
    :mod:`formats.ops.ttl_given`). A value-like entry goes when its value expired; list elements
    and map entries go one by one, and the entry with them when none is left (as a rewrite
    of statectl's format drops them: :func:`formats.ops.rescale.drop_expired_rows`). A value
    without a last access (not decoded) is kept. ``dropped`` counts the entries left out.
    """

    def __init__(self, now: int) -> None:
        self.now, self.dropped = now, 0

    def alive(self, value: Any, ttl: int) -> bool:
        return not (isinstance(value, TtlValue) and value.last_access_timestamp is not None
                    and expired(value.last_access_timestamp, ttl, self.now))

    def filter(self, entries: Iterator[Entry], kind: str, ttl: int | None) -> Iterator[Entry]:
        """``entries`` of a state of ``kind`` without what expired (all: without a TTL)."""
        if ttl is None or ttl <= 0 or kind == "timers":
            yield from entries
            return
        for key_group, key, namespace, value in entries:
            if isinstance(value, list):
                value = [v for v in value if self.alive(v, ttl)]
            elif isinstance(value, dict):
                value = {k: v for k, v in value.items() if self.alive(v, ttl)}
            elif not self.alive(value, ttl):
                value = None
            if value is None or (not value and isinstance(value, list | dict)):
                self.dropped += 1
                continue
            yield key_group, key, namespace, value


def savepoint_operators(checkpoint: FlinkSource, plan: RescalePlan, *,
                        keyed_entries: bool = True,
                        expiry: Expiry | None = None,
                        retargets: Mapping[str, Retarget] | None = None
                        ) -> list[SavepointOperator]:
    """The savepoint's operators as ``plan`` says, in the source's order.

    ``keyed_entries=False`` leaves out the keyed entries (``SavepointOperator.keyed``): whoever
    writes the keyed files elsewhere (Spark tasks) decodes them; the key and state layouts
    and the refusals (an unknown key hash with a new max parallelism) are the same.
    ``expiry``: leave out what TTL expired (:class:`Expiry`). ``retargets``: write only these
    operators, each for another job version (:class:`Retarget`).
    """
    if checkpoint.unpickled:
        raise UnsupportedFormatError("a snapshot opened with --allow-pickle shows unpickled "
                                     "values and cannot be written back; open it without")
    problems = checkpoint.open_problems()
    if problems:
        raise CheckpointError(f"the source could not be read completely: {problems[0][2]}")
    return [_operator(checkpoint, op, op_plan, keyed_entries, expiry,
                      None if retargets is None else retargets[op.uid])
            for op, op_plan in zip(checkpoint.metadata.operators, plan.operators, strict=True)
            if retargets is None or op.uid in retargets]


def keyed_layout(header: KeyedHeader, where: str
                 ) -> tuple[Encoder, int, list[KeyedStateOut]]:
    """How an operator's keyed state is written: key encoder, key length, each state's layout.

    From the header as Flink wrote it (its serializer snapshots are carried over).
    """
    key = _encoder(header.key_snapshot, f"{where} (keys)")
    assert key is not None and header.key is not None
    return key, header.key.length, [_state_out(info, where) for info in header.states]


def _operator(checkpoint: FlinkSource, op: OperatorMetadata, plan: OperatorPlan,
              keyed_entries: bool = True, expiry: Expiry | None = None,
              retarget: Retarget | None = None) -> SavepointOperator:
    flink_op = checkpoint.flink_operator(op.uid)
    where = f"operator {op.identity.label}"
    # the uid as stored, or as the user named the operator (--uid: Flink 1.x stores none)
    identity = ((op.identity.id, flink_op.name, op.identity.uid) if retarget is None else
                (retarget.operator_id, retarget.name, retarget.uid))
    out = SavepointOperator(*identity, plan.new_parallelism, plan.new_max_parallelism,
                            coordinator=None if flink_op.coordinator_state is None
                            else flink_op.coordinator_state.data)
    header = checkpoint.keyed_header(op.uid)
    if header is not None and retarget is not None:
        header = retargeted_header(header, retarget)
    if header is not None and (retarget is None or header.states):
        _keyed(checkpoint, op, plan, header, out, where, keyed_entries, expiry,
               {} if retarget is None else retarget.converters)
    _operator_state(checkpoint, op, plan, out, where)
    return out


def _encoder(snapshot: SerializerSnapshot | None, what: str, required: bool = True
             ) -> Encoder | None:
    encoder = None if snapshot is None else encoder_for(snapshot)
    if encoder is None and required:
        shown = snapshot.class_name if snapshot is not None else "(none)"
        raise UnsupportedFormatError(f"{what}: statectl cannot write values of serializer "
                                     f"{shown}")
    return encoder


def _state_out(info: StateInfo, where: str) -> KeyedStateOut:
    """How one state's entries are written, from its meta info as Flink wrote it."""
    what = f"{where}, state {info.name!r}"
    value = info.serializers.get("VALUE_SERIALIZER")
    if info.kind == "timers":
        return KeyedStateOut(info.name, info.raw, "timers", None, -1, None,
                             timer=_encoder(value, what))
    namespace = info.serializers.get("NAMESPACE_SERIALIZER")
    ns_encoder = _encoder(namespace, f"{what} (namespace)")
    ns_length = info.namespace.length if info.namespace is not None else -1
    # a value serializer statectl cannot decode left raw bytes: they are written back as is
    if info.kind == "list":
        element = value.nested[0] if value is not None and value.nested else None
        return KeyedStateOut(info.name, info.raw, "list", ns_encoder, ns_length,
                             _encoder(element, what, required=False))
    if info.kind == "map":
        if value is None or len(value.nested) != 2:
            raise UnsupportedFormatError(f"{what}: a map state without its key and value "
                                         f"serializers")
        return KeyedStateOut(info.name, info.raw, "map", ns_encoder, ns_length,
                             _encoder(value.nested[1], what, required=False),
                             user_key=_encoder(value.nested[0], f"{what} (map keys)"))
    return KeyedStateOut(info.name, info.raw, "value", ns_encoder, ns_length,
                         _encoder(value, what, required=False))


def retargeted_header(header: KeyedHeader, retarget: Retarget) -> KeyedHeader:
    """The header written for the new job: the states kept, each with its meta info.

    A converted state's meta info is the new job's, under its name there; the decoded rows are
    still found under the source's name (:attr:`StateInfo.source_name`).
    """
    states = []
    for info in header.states:
        if info.name not in retarget.states:
            continue
        new = retarget.states[info.name]
        states.append(info if new is None else replace(new, source_name=info.name))
    return replace(header, states=states)


def _keyed(checkpoint: FlinkSource, op: OperatorMetadata, plan: OperatorPlan,
           header: KeyedHeader, out: SavepointOperator, where: str,
           keyed_entries: bool = True, expiry: Expiry | None = None,
           converters: Mapping[str, Callable[[Any], Any]] | None = None) -> None:
    out.key_snapshot = header.key_snapshot_raw
    out.key, out.key_length, out.keyed_states = keyed_layout(header, where)
    assert header.key is not None
    java_hash = header.key.java_hash
    if plan.rehash and java_hash is None:
        raise UnsupportedFormatError(
            f"{where}: the key group of a {header.key.name} key cannot be computed (its "
            f"hashCode is user code or unknown), so the max parallelism cannot change")
    if not keyed_entries:
        return
    ttls = {s.name: s.ttl for s in op.states if s.scope == "keyed"}
    converters = converters or {}
    # generators: each subtask's entries are read (and converted) as its file is written;
    # run by run, in key-group order, where the source was not decoded at open (issue 45)
    out.keyed_in_order = in_order = (not plan.rehash and not checkpoint.keyed_decoded
                                      and _disjoint(op))
    entries = _entries_in_order if in_order else _entries
    for sub in plan.subtasks:
        key_groups = sub.key_group_range
        assert key_groups is not None
        rehash = plan.new_max_parallelism if plan.rehash else None
        out.keyed[sub.index] = (key_groups, [
            converted(entries(checkpoint, op, info.source_name or info.name, key_groups,
                              rehash, java_hash),
                      converters.get(info.source_name or info.name))
            if expiry is None else expiry.filter(
                entries(checkpoint, op, info.name, key_groups, rehash, java_hash),
                info.kind, ttls.get(info.name))
            for info in header.states])


def converted(entries: Iterable[Entry], convert: Callable[[Any], Any] | None
              ) -> Iterator[Entry]:
    """``entries`` with each value passed through ``convert`` (``None``: as they are)."""
    if convert is None:
        yield from entries
        return
    for key_group, key, namespace, value in entries:
        yield key_group, key, namespace, convert(value)


def _entries(checkpoint: FlinkSource, op: OperatorMetadata, state: str,
             key_groups: KeyGroupRange, rehash: int | None,
             java_hash: Any) -> Iterator[Entry]:
    """A state's entries that fall into ``key_groups`` (at the new max parallelism)."""
    for st in op.subtasks:
        for handle in st.keyed:
            if handle.state != state:
                continue
            for key_group, key, namespace, value in checkpoint.decoded_rows(handle.file):
                if rehash is not None:
                    key_group = compute_key_group_for_key_hash(java_hash(key), rehash)
                if key_group in key_groups:
                    yield key_group, key, namespace, value


def _entries_in_order(checkpoint: FlinkSource, op: OperatorMetadata, state: str,
                      key_groups: KeyGroupRange, rehash: int | None,
                      java_hash: Any) -> Iterator[Entry]:
    """:func:`_entries` (without a rehash) in key-group order, read run by run.

    The old handles are disjoint (:func:`_disjoint`), so each key group's entries are one
    handle's, in the order decoded, as :func:`_entries` gives them; a run of stored bytes
    (``FlinkCheckpoint.run_bytes``) is held at a time.
    """
    assert rehash is None
    handles = sorted((h for st in op.subtasks for h in st.keyed if h.state == state),
                     key=lambda h: h.key_group_range.start)
    for handle in handles:
        first = max(key_groups.start, handle.key_group_range.start)
        last = min(key_groups.end, handle.key_group_range.end)
        if first > last:
            continue
        for run in checkpoint.decoded_runs(handle.file, first, last):
            run.sort(key=itemgetter(0))  # stable: each key group's entries as decoded
            yield from run


def _disjoint(op: OperatorMetadata) -> bool:
    """Whether no two keyed handles of a state of ``op`` share a key group."""
    by_state: dict[str, list[KeyGroupRange]] = {}
    for st in op.subtasks:
        for handle in st.keyed:
            by_state.setdefault(handle.state, []).append(handle.key_group_range)
    for ranges in by_state.values():
        ranges.sort(key=lambda r: r.start)
        if any(a.end >= b.start for a, b in zip(ranges, ranges[1:], strict=False)):
            return False
    return True


def _operator_state(checkpoint: FlinkSource, op: OperatorMetadata, plan: OperatorPlan,
                    out: SavepointOperator, where: str) -> None:
    """Split and broadcast state as planned; union state kept once (see the module doc)."""
    union: dict[int, list[OperatorStateOut]] = {}
    declared: dict[str, OperatorStateOut] = {}  # every state, empty: each subtask declares all
    for old in op.subtasks:
        for handle in old.operator:
            if handle.state not in declared:
                declared[handle.state] = _operator_out(
                    checkpoint.decoded_operator_state(handle.file), [], where)
            if handle.mode.name != "UNION":
                continue
            state = checkpoint.decoded_operator_state(handle.file)
            union.setdefault(old.index % plan.new_parallelism, []).append(_operator_out(
                state, state.elements[handle.first_element:handle.first_element
                                      + handle.element_count], where))
    for sub in plan.subtasks:
        merged: dict[str, OperatorStateOut] = {}
        for handle in sub.operator:
            if handle.mode.name == "UNION":
                continue
            state = checkpoint.decoded_operator_state(handle.file)
            part = state.elements[handle.first_element:handle.first_element
                                  + handle.element_count]
            if handle.state in merged:  # split chunks of several old subtasks: one list
                before = merged[handle.state]
                part = [*before.elements, *part]
            merged[handle.state] = _operator_out(state, part, where)
        for state_out in union.get(sub.index, ()):
            if state_out.name in merged:
                before = merged[state_out.name]
                state_out = OperatorStateOut(state_out.name, state_out.meta, state_out.mode,
                                             [*before.elements, *state_out.elements],
                                             state_out.value, state_out.key)
            merged[state_out.name] = state_out
        for name, empty in declared.items():
            merged.setdefault(name, empty)
        if merged:
            out.operator[sub.index] = list(merged.values())


def _operator_out(state: Any, elements: list[Any], where: str) -> OperatorStateOut:
    if state.info is None:
        raise UnsupportedFormatError(f"{where}: operator state {state.name!r} without its "
                                     f"meta info")
    what = f"{where}, operator state {state.name!r}"
    value = state.info.serializers.get("VALUE_SERIALIZER")
    key = state.info.serializers.get("KEY_SERIALIZER")
    broadcast = state.mode == "BROADCAST"
    return OperatorStateOut(state.name, state.info.raw, state.mode, elements,
                            _encoder(value, what, required=broadcast),
                            _encoder(key, what) if broadcast else None)
