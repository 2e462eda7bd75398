"""Flink's operator state streams (reference §7).

``OperatorBackendSerializationProxy``: version (5 or 6), the compression flag (version 6 only),
``short`` count and meta infos of the list states, then of the broadcast states. The handle
records, per state, the byte offset of each list element (one offset for a broadcast state,
where ``int size`` and the key/value pairs start). Elements are decoded at their offsets with
the state's value serializer; a serializer statectl cannot decode leaves each element as its
raw bytes (from its offset to the next one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.read.keyed import StateInfo, described, read_state_info, reason_of, short_names
from formats.flink.read.metadata import FlinkOperatorHandle
from formats.flink.read.state_meta import recover_state_infos
from formats.flink.types.codecs import Codec, codec_for, why_undecodable
from statecore.errors import CheckpointError, UnsupportedFormatError
from statecore.undecodable import Undecodable

__all__ = ["DecodedOperatorState", "decode_operator_stream"]


@dataclass
class DecodedOperatorState:
    """One state of one operator handle: its mode, codecs and decoded elements."""

    name: str
    mode: str  # SPLIT_DISTRIBUTE | UNION | BROADCAST
    value: Codec | None
    key: Codec | None
    elements: list[Any]  # list states: elements; broadcast: (key, value) pairs
    bytes: int
    info: StateInfo | None
    #: broadcast entries left out: ``(values, class, serializer, reason, damaged)``
    lost: list[tuple[int, str, str, str, bool]] = field(default_factory=list)

    def undecodable(self) -> list[tuple[int, str, str, str, bool, bool]]:
        """What could not be decoded: ``(values, class, serializer, reason, damaged, kept)``.

        The markers in :attr:`elements`, counted per reason, and the broadcast entries lost.
        """
        counts: dict[tuple[str, str, str, bool], int] = {}
        for e in self.elements:
            if type(e) is Undecodable:
                k = (e.class_name, e.serializer, e.reason, e.damaged)
                counts[k] = counts.get(k, 0) + 1
        return ([(n, *k, True) for k, n in counts.items()]
                + [(n, cls, ser, why, damaged, False) for n, cls, ser, why, damaged in self.lost])


def decode_operator_stream(data: bytes, handle: FlinkOperatorHandle, where: str
                           ) -> list[DecodedOperatorState]:
    r = DataReader(data, where)
    version = r.i32()
    if version not in (5, 6):
        raise UnsupportedFormatError(f"{where}: operator state written with serialization "
                                     f"proxy version {version}; statectl reads 5 and 6")
    compressed = r.boolean() if version >= 6 else False
    infos: dict[str, StateInfo] = {}
    info: StateInfo | None
    states_at = r.pos
    try:
        for _ in range(2):  # list states, then broadcast states
            for _ in range(r.count("operator states", 10, r.i16())):
                info = read_state_info(r)
                infos[info.name] = info
    except UnsupportedFormatError as exc:  # a serializer snapshot statectl cannot parse
        infos = _recovered(data, handle, where, states_at, exc)
        r.pos = len(data)
    if compressed and any(offsets for _mode, offsets in handle.states.values()):
        raise UnsupportedFormatError(f"{where}: compressed operator state is not supported yet")
    all_offsets = sorted({o for _mode, offsets in handle.states.values() for o in offsets})
    if all_offsets and r.pos == len(data):  # recovered: the elements follow the header
        r.pos = all_offsets[0]
    out = []
    for name, (mode, offsets) in handle.states.items():
        info = infos.get(name)
        if info is None:
            raise r.fail(f"the handle names state {name!r}, the stream's header does not")
        value_snapshot = info.serializers.get("VALUE_SERIALIZER")
        key_snapshot = info.serializers.get("KEY_SERIALIZER")
        value = None if value_snapshot is None else codec_for(value_snapshot)
        key = None if key_snapshot is None else codec_for(key_snapshot)
        elements: list[Any] = []
        size = 0
        cls, ser = described(value_snapshot)
        why = short_names(f"no decoder for "
                          f"{why_undecodable(value_snapshot) if value_snapshot else 'none'}")
        lost: list[tuple[int, str, bool]] = []  # (values, reason, damaged) left out
        for offset in offsets:
            if offset < r.pos or offset >= len(data):
                raise r.fail(f"state {name!r}: element offset {offset} outside the data")
            end = next((o for o in all_offsets if o > offset), len(data))
            e = DataReader(data, where, offset, len(data))
            if mode == "BROADCAST":
                n = e.count("broadcast entries", 2)
                if key is None or value is None:
                    lost.append((n, short_names(
                        f"no decoder for the broadcast state's serializers "
                        f"({key_snapshot and key_snapshot.class_name}, "
                        f"{value_snapshot and value_snapshot.class_name})"), False))
                    size += end - offset
                    continue
                pairs = []
                try:
                    for _ in range(n):
                        k = key.read(e)
                        pairs.append((k, value.read(e)))
                except CheckpointError as exc:  # nothing delimits the pairs: the rest is lost
                    lost.append((n - len(pairs), reason_of(exc, where),
                                 not isinstance(exc, UnsupportedFormatError)))
                elements.extend(pairs)
                size += e.pos - offset
            elif value is None:  # an element is delimited by the next one's offset
                elements.append(Undecodable(cls, ser, why, data[offset:end]))
                size += end - offset
            else:
                try:
                    elements.append(value.read(e))
                    size += e.pos - offset
                except CheckpointError as exc:
                    elements.append(Undecodable(cls, ser, reason_of(exc, where),
                                                data[offset:end],
                                                not isinstance(exc, UnsupportedFormatError)))
                    size += end - offset
        out.append(DecodedOperatorState(name, mode, value, key, elements, size, info,
                                        [(n, cls, ser, why_lost, damaged)
                                         for n, why_lost, damaged in lost]))
    return out


def _recovered(data: bytes, handle: FlinkOperatorHandle, where: str, states_at: int,
               exc: UnsupportedFormatError) -> dict[str, StateInfo]:
    """The header's states found by their structure (:func:`recover_state_infos`).

    The header ends where the first element starts (the stream's end without elements). Each
    state keeps its name and mode; an element of one whose serializer was not read is kept as
    its bytes (each is delimited by the offsets).
    """
    end = min((o for _mode, offsets in handle.states.values() for o in offsets),
              default=len(data))
    infos = recover_state_infos(data, where, states_at, end, reason_of(exc, where), gap=2)
    if not infos:
        raise exc
    # the list states' count, then theirs; the broadcast states' count, then theirs: a list
    # state read as far as it parses may end with the broadcast count, which is no part of it
    lists = int.from_bytes(data[states_at:states_at + 2], "big", signed=True)
    if 0 < lists < len(infos):
        last = infos[lists - 1]
        unparsed = any(snapshot.outer.get("unparsed") for snapshot in last.serializers.values())
        if (unparsed or last.unread) and last.raw[-2:] == (len(infos) - lists).to_bytes(2, "big"):
            last.raw = last.raw[:-2]
    return {info.name: info for info in infos}
