"""The serializers of Flink's CEP library (``flink-cep``; SQL's ``MATCH_RECOGNIZE``).

A CEP operator keeps, per key, its ``NFAState`` (value state), the events of its shared buffer
(map state ``EventId`` -> ``Lockable<event>``) and the buffer's nodes (map state ``NodeId`` ->
``Lockable<SharedBufferNode>``). Readers (:data:`CEP_CODECS`) and writers (:data:`CEP_ENCODERS`)
by the short class name of the snapshot, ports of Flink 2.3's ``org.apache.flink.cep.nfa``
serializers (Flink 1.20 writes the same bytes and snapshots):

==================================  ===========================================================
serializer                          bytes
==================================  ===========================================================
``EventId.EventIdSerializer``       ``int id``, ``long timestamp``
``NodeId.NodeIdSerializer``         ``byte`` 1, the ``EventId``, ``StringValue`` page name; or
                                    ``byte`` 0 (null)
``DeweyNumber.DeweyNumberSerializer``  ``int`` length, the ``int`` digits
``SharedBufferEdgeSerializer``      the target ``NodeId``, the ``DeweyNumber``
``SharedBufferNodeSerializer``      ``int`` count, per edge ``int`` reference count and the edge
                                    (``SharedBufferNodeSerializerSnapshotV2``); the old
                                    ``SharedBufferNode.SharedBufferNodeSerializer`` (Flink < 1.13,
                                    still read by 1.20): a ``ListSerializer`` of edges
``Lockable.LockableTypeSerializer``  ``int`` reference count, the element
``NFAStateSerializer``              the partial matches, then the completed matches: each an
                                    ``int`` count of computation states: ``StringValue`` state
                                    name, previous ``NodeId``, ``DeweyNumber`` version, ``long``
                                    start timestamp, ``long`` previous timestamp (only when the
                                    snapshot's outer snapshot says so: outer version 2's
                                    boolean; Flink before 1.16 wrote none), ``byte`` 1 and the
                                    start ``EventId`` or ``byte`` 0
==================================  ===========================================================

``EventId`` and ``NodeId`` are map state keys, so they are tuples (hashable): ``(id,
timestamp)`` and ``((id, timestamp), pageName)``. The other values are dicts named with Flink's
field names (a ``DeweyNumber`` is the list of its digits,
``{"target", "deweyNumber"}`` an edge, ``{"edges"}`` a node of ``{"refCounter", "element"}``
lockables, ``{"partialMatches", "completedMatches"}`` an ``NFAState`` of computation states
``{"currentStateName", "previousBufferEntry", "version", "startTimestamp",
["previousTimestamp",] "startEventID"}``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.java.output import string_value_bytes
from formats.flink.types.codec import Codec
from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import InvalidArgumentError

__all__ = ["CEP_CODECS", "CEP_ENCODERS"]

Encoder = Callable[[bytearray, Any], None]
CodecOf = Callable[[SerializerSnapshot], Codec | None]
EncoderOf = Callable[[SerializerSnapshot], Encoder | None]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_EVENT_ID = struct.Struct(">iq")
#: Longest ``DeweyNumber`` statectl reads (a pattern's nesting; real ones have a few digits).
MAX_DEWEY_DIGITS = 1 << 16

EVENT_ID_SPEC = "tuple<int32,int64>"
DEWEY_SPEC = "list<int32>"


def _flag(r: DataReader, what: str) -> bool:
    """A ``writeByte(1)``/``writeByte(0)`` presence flag."""
    flag = r.u8()
    if flag > 1:
        raise r.fail(f"{what} flag {flag}, expected 0 or 1")
    return flag == 1


def _fields(value: Any, names: tuple[str, ...], what: str) -> None:
    if not isinstance(value, dict) or tuple(value) != names and set(value) != set(names):
        raise InvalidArgumentError(f"{value!r} is not {what} (fields {', '.join(names)})")


# -- EventId, NodeId, DeweyNumber ----------------------------------------------------------------


def _read_event_id(r: DataReader) -> tuple[int, int]:
    """``EventId.EventIdSerializer.deserialize``: ``int id``, ``long timestamp``."""
    return r.i32(), r.i64()


def _pair(value: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidArgumentError(f"{value!r} is not {what}")
    return value[0], value[1]


def _write_event_id(out: bytearray, value: Any) -> None:
    event, timestamp = _pair(value, "an EventId [id, timestamp]")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (event, timestamp)):
        raise InvalidArgumentError(f"{value!r} is not an EventId [id, timestamp]")
    try:
        out += _EVENT_ID.pack(event, timestamp)
    except struct.error as exc:
        raise InvalidArgumentError(f"{value!r} is not an EventId: {exc}") from exc


def _read_dewey(r: DataReader) -> list[int]:
    """``DeweyNumber.DeweyNumberSerializer.deserialize``: ``int`` length, the digits."""
    n = r.count("DeweyNumber digits", 4)
    if n > MAX_DEWEY_DIGITS:
        raise r.fail(f"a DeweyNumber of {n} digits")
    return [r.i32() for _ in range(n)]


def _write_dewey(out: bytearray, value: Any) -> None:
    if not isinstance(value, list | tuple) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise InvalidArgumentError(f"{value!r} is not a DeweyNumber (a list of ints)")
    out += _I32.pack(len(value))
    for digit in value:
        out += _I32.pack(digit)


def _node_id_codec(event_id: Codec) -> Codec:
    """``NodeId.NodeIdSerializer``: a presence byte, the ``EventId``, the page name."""
    read_event = event_id.read

    def read(r: DataReader) -> tuple[Any, str | None] | None:
        if not _flag(r, "NodeId"):
            return None
        return read_event(r), r.string_value()
    return Codec(read, f"tuple<{event_id.spec},string>", -1, "NodeId")


def _node_id_encoder(event_id: Encoder) -> Encoder:
    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(0)
            return
        event, page = _pair(value, "a NodeId [eventId, pageName]")
        if page is not None and not isinstance(page, str):
            raise InvalidArgumentError(f"{value!r}: a NodeId's page name is a string")
        out.append(1)
        event_id(out, event)
        out += string_value_bytes(page)
    return write


def _nested_codecs(snapshot: SerializerSnapshot, codec_of: CodecOf, n: int) -> list[Codec] | None:
    parts = [codec_of(s) for s in snapshot.nested]
    if len(parts) != n or any(p is None for p in parts):
        return None
    return [p for p in parts if p is not None]


def _nested_encoders(snapshot: SerializerSnapshot, encoder_of: EncoderOf, n: int
                     ) -> list[Encoder] | None:
    parts = [encoder_of(s) for s in snapshot.nested]
    if len(parts) != n or any(p is None for p in parts):
        return None
    return [p for p in parts if p is not None]


# -- SharedBufferEdge, SharedBufferNode, Lockable ------------------------------------------------


def _edge_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``SharedBufferEdge.SharedBufferEdgeSerializer``: the target ``NodeId``, the version."""
    parts = _nested_codecs(snapshot, codec_of, 2)
    if parts is None:
        return None
    node, dewey = parts
    read_node, read_dewey = node.read, dewey.read

    def read(r: DataReader) -> dict[str, Any]:
        return {"target": read_node(r), "deweyNumber": read_dewey(r)}
    return Codec(read, f"struct<target:{node.spec},deweyNumber:{dewey.spec}>", -1,
                 "SharedBufferEdge")


def _edge_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    parts = _nested_encoders(snapshot, encoder_of, 2)
    if parts is None:
        return None
    node, dewey = parts

    def write(out: bytearray, value: Any) -> None:
        _fields(value, ("target", "deweyNumber"), "a SharedBufferEdge")
        node(out, value["target"])
        dewey(out, value["deweyNumber"])
    return write


def _lockable_spec(element: Codec) -> str:
    return f"struct<refCounter:int32,element:{element.spec}>"


def _node_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``SharedBufferNodeSerializer``: ``int`` count, per edge its reference count and itself.

    The old ``SharedBufferNode.SharedBufferNodeSerializer`` (its nested snapshot a
    ``ListSerializer`` of edges): ``int`` count, the edges; each edge's reference count is 0,
    as its ``deserialize`` (``addEdge``) makes it.
    """
    parts = _nested_codecs(snapshot, codec_of, 1)
    if parts is None:
        return None
    legacy = snapshot.short_name.startswith("SharedBufferNode$")
    edge = parts[0]
    if legacy:  # the nested ListSerializer's codec reads the count and the edges
        read_edges = edge.read
        inner_spec = edge.spec[len("list<"):-1]

        def read_legacy(r: DataReader) -> dict[str, Any]:
            return {"edges": [{"refCounter": 0, "element": e} for e in read_edges(r)]}
        return Codec(read_legacy, f"struct<edges:list<struct<refCounter:int32,"
                                  f"element:{inner_spec}>>>", -1, "SharedBufferNode")
    read_edge = edge.read

    def read(r: DataReader) -> dict[str, Any]:
        edges = []
        for _ in range(r.count("SharedBufferNode edges", 5)):
            ref_counter = r.i32()
            edges.append({"refCounter": ref_counter, "element": read_edge(r)})
        return {"edges": edges}
    return Codec(read, f"struct<edges:list<{_lockable_spec(edge)}>>", -1, "SharedBufferNode")


def _node_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    parts = _nested_encoders(snapshot, encoder_of, 1)
    if parts is None:
        return None
    legacy = snapshot.short_name.startswith("SharedBufferNode$")
    edge = parts[0]

    def write(out: bytearray, value: Any) -> None:
        _fields(value, ("edges",), "a SharedBufferNode")
        edges = value["edges"]
        if not isinstance(edges, list | tuple):
            raise InvalidArgumentError(f"{edges!r} is not a list of edges")
        for lockable in edges:
            _fields(lockable, ("refCounter", "element"), "a Lockable edge")
        if legacy:
            if any(lockable["refCounter"] != 0 for lockable in edges):
                raise InvalidArgumentError("the old SharedBufferNodeSerializer writes no "
                                           "reference counts (they must be 0)")
            edge(out, [lockable["element"] for lockable in edges])
            return
        out += _I32.pack(len(edges))
        for lockable in edges:
            out += _I32.pack(lockable["refCounter"])
            edge(out, lockable["element"])
    return write


def _lockable_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``Lockable.LockableTypeSerializer``: ``int`` reference count, the element."""
    parts = _nested_codecs(snapshot, codec_of, 1)
    if parts is None:
        return None
    element = parts[0]
    read_element = element.read

    def read(r: DataReader) -> dict[str, Any]:
        ref_counter = r.i32()
        return {"refCounter": ref_counter, "element": read_element(r)}
    return Codec(read, _lockable_spec(element), -1, f"Lockable<{element.name}>")


def _lockable_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    parts = _nested_encoders(snapshot, encoder_of, 1)
    if parts is None:
        return None
    element = parts[0]

    def write(out: bytearray, value: Any) -> None:
        _fields(value, ("refCounter", "element"), "a Lockable")
        out += _I32.pack(value["refCounter"])
        element(out, value["element"])
    return write


# -- NFAState ------------------------------------------------------------------------------------

_STATE_FIELDS = ("currentStateName", "previousBufferEntry", "version", "startTimestamp",
                 "previousTimestamp", "startEventID")


def _nfa_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``NFAStateSerializer``: the partial matches, then the completed matches.

    The nested serializers are the version's, the ``NodeId``'s and the ``EventId``'s.
    """
    parts = _nested_codecs(snapshot, codec_of, 3)
    if parts is None:
        return None
    dewey, node, event = parts
    read_dewey, read_node, read_event = dewey.read, node.read, event.read
    previous = bool(snapshot.outer.get("previous_timestamp", False))

    def read_state(r: DataReader) -> dict[str, Any]:
        state: dict[str, Any] = {"currentStateName": r.string_value(),
                                 "previousBufferEntry": read_node(r),
                                 "version": read_dewey(r), "startTimestamp": r.i64()}
        if previous:
            state["previousTimestamp"] = r.i64()
        state["startEventID"] = read_event(r) if _flag(r, "start event") else None
        return state

    def read_states(r: DataReader) -> list[dict[str, Any]]:
        return [read_state(r) for _ in range(r.count("computation states", 11))]

    def read(r: DataReader) -> dict[str, Any]:
        return {"partialMatches": read_states(r), "completedMatches": read_states(r)}

    fields = [f"currentStateName:string,previousBufferEntry:{node.spec},version:{dewey.spec}",
              "startTimestamp:int64"]
    if previous:
        fields.append("previousTimestamp:int64")
    fields.append(f"startEventID:{event.spec}")
    state_spec = f"struct<{','.join(fields)}>"
    return Codec(read, f"struct<partialMatches:list<{state_spec}>,"
                       f"completedMatches:list<{state_spec}>>", -1, "NFAState")


def _nfa_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    parts = _nested_encoders(snapshot, encoder_of, 3)
    if parts is None:
        return None
    dewey, node, event = parts
    previous = bool(snapshot.outer.get("previous_timestamp", False))
    names = _STATE_FIELDS if previous else tuple(f for f in _STATE_FIELDS
                                                 if f != "previousTimestamp")

    def write_states(out: bytearray, states: Any) -> None:
        if not isinstance(states, list | tuple):
            raise InvalidArgumentError(f"{states!r} is not a list of computation states")
        out += _I32.pack(len(states))
        for state in states:
            _fields(state, names, "a ComputationState")
            out += string_value_bytes(state["currentStateName"])
            node(out, state["previousBufferEntry"])
            dewey(out, state["version"])
            out += _I64.pack(state["startTimestamp"])
            if previous:
                out += _I64.pack(state["previousTimestamp"])
            if state["startEventID"] is None:
                out.append(0)
            else:
                out.append(1)
                event(out, state["startEventID"])

    def write(out: bytearray, value: Any) -> None:
        _fields(value, ("partialMatches", "completedMatches"), "an NFAState")
        write_states(out, value["partialMatches"])
        write_states(out, value["completedMatches"])
    return write


def _node_id(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    parts = _nested_codecs(snapshot, codec_of, 1)
    return None if parts is None else _node_id_codec(parts[0])


def _node_id_writer(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    parts = _nested_encoders(snapshot, encoder_of, 1)
    return None if parts is None else _node_id_encoder(parts[0])


_EVENT_ID_CODEC = Codec(_read_event_id, EVENT_ID_SPEC, 12, "EventId")
_DEWEY_CODEC = Codec(_read_dewey, DEWEY_SPEC, -1, "DeweyNumber")

#: Short snapshot class -> the codec of its serializer's values (``None``: not decodable).
CEP_CODECS: dict[str, Callable[[SerializerSnapshot, CodecOf], Codec | None]] = {
    "EventId$EventIdSerializer$EventIdSerializerSnapshot": lambda s, c: _EVENT_ID_CODEC,
    "DeweyNumber$DeweyNumberSerializer$DeweyNumberSerializerSnapshot": lambda s, c: _DEWEY_CODEC,
    "NodeId$NodeIdSerializer$NodeIdSerializerSnapshot": _node_id,
    "SharedBufferEdge$SharedBufferEdgeSerializer$SharedBufferEdgeSerializerSnapshot": _edge_codec,
    "SharedBufferNodeSerializerSnapshotV2": _node_codec,
    "SharedBufferNode$SharedBufferNodeSerializer$SharedBufferNodeSerializerSnapshot": _node_codec,
    "LockableTypeSerializerSnapshot": _lockable_codec,
    "NFAStateSerializerSnapshot": _nfa_codec,
}

#: Short snapshot class -> the encoder of its serializer's values (the mirror of the above).
CEP_ENCODERS: dict[str, Callable[[SerializerSnapshot, EncoderOf], Encoder | None]] = {
    "EventId$EventIdSerializer$EventIdSerializerSnapshot": lambda s, e: _write_event_id,
    "DeweyNumber$DeweyNumberSerializer$DeweyNumberSerializerSnapshot": lambda s, e: _write_dewey,
    "NodeId$NodeIdSerializer$NodeIdSerializerSnapshot": _node_id_writer,
    "SharedBufferEdge$SharedBufferEdgeSerializer$SharedBufferEdgeSerializerSnapshot":
        _edge_encoder,
    "SharedBufferNodeSerializerSnapshotV2": _node_encoder,
    "SharedBufferNode$SharedBufferNodeSerializer$SharedBufferNodeSerializerSnapshot":
        _node_encoder,
    "LockableTypeSerializerSnapshot": _lockable_encoder,
    "NFAStateSerializerSnapshot": _nfa_encoder,
}
