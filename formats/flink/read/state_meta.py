"""A keyed state stream's header: the key serializer and every state's meta info (reference §6.1).

``KeyedBackendSerializationProxy`` version 6, the compression flag, the key serializer
snapshot, then per state its name, type, options and serializer snapshots
(``StateMetaInfoSnapshotReadersWriters``). A state's id is its position in this list
(``HeapSnapshotResources`` assigns ids in the order it writes the meta infos; the restore reads
them back the same way). The header is what the heap format, the canonical savepoint format
and a RocksDB handle's meta-data stream start with; an ``inspect`` summary reads it alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from formats.flink.java.input import DataReader
from formats.flink.read.losses import reason_of
from formats.flink.read.metadata import FlinkKeyedHandle
from formats.flink.types.codecs import Codec, codec_for
from formats.flink.types.snapshots import SNAPSHOT_PROXY_VERSION, SerializerSnapshot, read_snapshot
from statecore.errors import CheckpointError, UnsupportedFormatError

__all__ = ["KEYED_PROXY_VERSION", "STATE_TYPES", "HeaderCache", "KeyedHeader", "StateInfo",
           "cached_header", "header_end", "read_keyed_header", "read_state_info",
           "read_state_infos", "recover_state_infos"]

KEYED_PROXY_VERSION = 6
STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")


@dataclass
class StateInfo:
    """One state of the header: name, kind and serializers (with codecs where known)."""

    name: str
    backend_type: str  # KEY_VALUE | PRIORITY_QUEUE | ...
    options: dict[str, str]
    serializers: dict[str, SerializerSnapshot]
    kind: str = ""  # value | list | map | reducing | aggregating | timers
    value: Codec | None = None  # heap layout: the whole state value
    namespace: Codec | None = None
    element: Codec | None = None  # list element / map value / timer (canonical layout)
    user_key: Codec | None = None
    #: the meta info's bytes exactly as Flink wrote them (a savepoint writer carries them over)
    raw: bytes = b""
    #: why statectl could not read this meta info to its end (its serializers or some of them
    #: are unknown: :func:`recover_state_infos`); ``""`` when it was read
    unread: str = ""
    #: where a migrated state's rows are found in the snapshot it comes from, when its name
    #: there differs (``statectl migrate``: :class:`formats.flink.write.rewrite.Retarget`)
    source_name: str = ""

    @property
    def serializer_names(self) -> dict[str, str]:
        return {k: s.describe() for k, s in self.serializers.items()}

    @property
    def time_window_namespace(self) -> bool:
        """Whether Flink wrote this state's namespaces with ``TimeWindow.Serializer``.

        Its codec's spec, ``tuple<int64,int64>``, is a ``Tuple2<Long, Long>``'s too: only the
        serializer snapshot tells a window from a pair of numbers.
        """
        if self.kind == "timers":  # TimerSerializer<key, namespace>
            timer = self.serializers.get("VALUE_SERIALIZER")
            snapshot = timer.nested[1] if timer is not None and len(timer.nested) == 2 else None
        else:
            snapshot = self.serializers.get("NAMESPACE_SERIALIZER")
        codec = None if snapshot is None else codec_for(snapshot)
        return codec is not None and codec.name == "TimeWindow"


@dataclass
class KeyedHeader:
    """The header of a keyed state stream: compression, key serializer, states."""

    compressed: bool
    key_snapshot: SerializerSnapshot
    key: Codec | None
    states: list[StateInfo]
    size: int = 0  # bytes of the header
    #: the key serializer snapshot's bytes as Flink wrote them (proxy version included)
    key_snapshot_raw: bytes = b""
    #: the states the header declares whose meta info was not found at all (their names are
    #: unknown: :func:`recover_state_infos`)
    missing: int = 0
    #: why the header could not be read exactly (``""``: it was); its states were then
    #: recovered as far as they could be (:func:`recover_state_infos`)
    recovered: str = ""


def read_keyed_header(r: DataReader, end: int | None = None) -> KeyedHeader:
    """``KeyedBackendSerializationProxy.read``: the key serializer, then every state's meta info.

    ``end``: where the header ends when the caller knows it (the first key group's offset, a
    RocksDB meta-data stream's length). Then a serializer snapshot statectl cannot parse (its
    layout is the serializer's own, and nothing frames it) does not stop the header: its
    state keeps the snapshot as unparsed (no codec: its values are reported undecodable) and
    reading goes on where the rest of the header parses exactly up to ``end``
    (:func:`_resync_header`). Where several such snapshots leave no exact parse, or the key
    serializer's is one, the states are recovered from the header's structure
    (:func:`recover_state_infos`): every state keeps its name and kind, and says in
    :attr:`StateInfo.unread` what could not be read.
    """
    start = r.pos
    version = r.i32()
    if version != KEYED_PROXY_VERSION:
        raise UnsupportedFormatError(
            f"{r.where}: keyed state written with serialization proxy version {version}; "
            f"statectl reads version {KEYED_PROXY_VERSION} (Flink 1.17 and later)")
    compressed = r.boolean()
    at = r.pos
    try:
        key_snapshot = read_snapshot(r)
    except UnsupportedFormatError as exc:
        if end is None:
            raise
        return _recovered_header(r, start, at, end, compressed, exc, None)
    key_raw = r.data[at:r.pos]
    n = r.count("states", 10, r.i16())
    states_at = r.pos
    try:
        states = read_state_infos(r, n, end)
    except UnsupportedFormatError as exc:
        if end is None:
            raise
        r.pos = states_at
        return _recovered_header(r, start, at, end, compressed, exc, (key_snapshot, key_raw, n))
    return KeyedHeader(compressed, key_snapshot, codec_for(key_snapshot), states, r.pos - start,
                       key_raw)


def _recovered_header(r: DataReader, start: int, key_at: int, end: int, compressed: bool,
                      exc: UnsupportedFormatError,
                      key: tuple[SerializerSnapshot, bytes, int] | None) -> KeyedHeader:
    """The header as far as :func:`recover_state_infos` finds it.

    ``key``: the key's snapshot, its bytes and the states' count, when they were read.
    """
    reason = reason_of(exc, r.where)
    if key is None:  # the key serializer's snapshot: the states' count is just before them
        r.pos = key_at
        key_snapshot = _unparsed(r, exc)
        first = next((p for p in _meta_starts(r.data, key_at + 4, end)
                      if int.from_bytes(r.data[p - 2:p], "big", signed=True) > 0), None)
        if first is None:
            raise UnsupportedFormatError(f"{exc} (and no state of the header could be found "
                                         f"past it)") from exc
        n = int.from_bytes(r.data[first - 2:first], "big", signed=True)
        key_raw = r.data[key_at:first - 2]
    else:
        key_snapshot, key_raw, n = key
        first = r.pos
    states = recover_state_infos(r.data, r.where, first, end, reason)
    if not states:
        raise UnsupportedFormatError(f"{exc} (and no state of the header could be found past "
                                     f"it)") from exc
    r.pos = end
    return KeyedHeader(compressed, key_snapshot, None if key is None else codec_for(key_snapshot),
                       states[:n], end - start, key_raw, max(0, n - len(states)), reason)


def read_state_infos(r: DataReader, n: int, end: int | None = None) -> list[StateInfo]:
    """``n`` meta infos; with ``end`` known, an unparsable serializer snapshot is stepped over."""
    states: list[StateInfo] = []
    while len(states) < n:
        states.append(read_state_info(r, n - len(states) - 1, end))
    return states


def read_state_info(r: DataReader, states_after: int = 0, end: int | None = None
                    ) -> StateInfo:
    """One ``StateMetaInfoSnapshot`` (reference §6.1); its bytes are kept in ``raw``.

    ``states_after`` and ``end``: how many meta infos follow and where they end, which lets a
    serializer snapshot statectl cannot parse be stepped over (:func:`_resync_header`).
    """
    start = r.pos
    name = r.utf()
    ordinal = r.i32()
    if not 0 <= ordinal < len(STATE_TYPES):
        raise r.fail(f"state {name!r}: unknown backend state type {ordinal}")
    options = {}
    for _ in range(r.count("state options", 4)):
        key = r.utf()
        options[key] = r.utf()
    serializers = {}
    n = r.count("state serializers", 4)
    for i in range(n):
        key = r.utf()
        at = r.pos
        try:
            serializers[key] = read_snapshot(r)
        except UnsupportedFormatError as exc:
            if end is None:
                raise
            r.pos = at
            serializers[key] = _unparsed(r, exc)
            r.pos = _resync_header(r, at, n - i - 1, states_after, end, exc)
    info = StateInfo(name, STATE_TYPES[ordinal], options, serializers, raw=r.data[start:r.pos])
    _assign_codecs(info)
    return info


#: Most candidate positions :func:`_resync_header` tries before it gives up.
MAX_RESYNC_TRIES = 4096


def _unparsed(r: DataReader, exc: CheckpointError) -> SerializerSnapshot:
    """The class and version of a snapshot statectl could not parse, and why (no codec)."""
    start = r.pos
    try:
        r.i32()  # the proxy version
        name, version = r.utf(), r.i32()
    except CheckpointError:
        name, version = "(unknown serializer)", 0
    r.pos = start
    return SerializerSnapshot(name, version, outer={"unparsed": True, "reason": str(exc)})


def _resync_header(r: DataReader, at: int, serializers_after: int, states_after: int, end: int,
                   exc: UnsupportedFormatError) -> int:
    """Where the header goes on after a serializer snapshot at ``at`` statectl cannot parse.

    Nothing frames a snapshot, so its end is found from what must follow: ``serializers_after``
    more ``(name, snapshot)`` entries of this state, then ``states_after`` meta infos, ending
    exactly at ``end``. The first position after ``at`` from which all of that parses is taken
    (a snapshot's bytes are its serializer's own: they rarely look like that, and at worst the
    serializer entries taken are statectl's to decode, checked as everything else).
    """
    data = r.data
    if end > r.end or end < at:
        raise exc
    if not serializers_after and not states_after:
        return end  # the last snapshot of the header: it ends where the header does
    tries = 0
    for candidate in range(at + 4, end):
        # a serializer entry starts with its name (writeUTF: a 2-byte length), a meta info too
        length = int.from_bytes(data[candidate:candidate + 2], "big")
        if not 0 < length <= 1024 or candidate + 2 + length > end:
            continue
        tries += 1
        if tries > MAX_RESYNC_TRIES:
            break
        probe = DataReader(data, r.where, candidate, end)
        try:
            for _ in range(serializers_after):
                probe.utf()
                read_snapshot(probe)
            for _ in range(states_after):
                read_state_info(probe)
        except CheckpointError:
            continue
        if probe.pos == end:
            return candidate
    raise UnsupportedFormatError(f"{exc} (and the rest of the header could not be found past "
                                 f"it)") from exc


# -- recovering the states of a header that does not parse exactly ---------------------------

#: A meta info's serializer key (``StateMetaInfoSnapshot.CommonSerializerKeys``: KEY_, NAMESPACE_,
#: VALUE_SERIALIZER) and option key (``CommonOptionsKeys``), and a Java class name.
_SERIALIZER_KEY = re.compile(r"[A-Z][A-Z_]*_SERIALIZER")
_OPTION_KEY = re.compile(r"[A-Z][A-Z_]*")
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
#: Most options and serializers a meta info has (Flink writes 0-1 and 1-2).
_MAX_ENTRIES = 16


def recover_state_infos(data: bytes, where: str, start: int, end: int, reason: str,
                        gap: int = 0) -> list[StateInfo]:
    """The meta infos of a header from ``start`` to ``end``, found by their structure.

    For a header that does not parse exactly (several serializer snapshots statectl cannot
    parse, whose ends nothing frames). A ``StateMetaInfoSnapshot`` starts with the state's
    name, its type, its options and the count of its serializers, then each serializer's key
    (``VALUE_SERIALIZER``...) and snapshot (proxy version 2, a class name): every position
    where that structure holds starts a meta info, which ends where the next one starts (the
    last: at ``end``). Each is then read exactly where it parses so (a meta info inside a
    span that parses exactly is no start), else as far as it does: its name, kind and options
    always (they come before the serializers), every serializer snapshot that parses, and in
    :attr:`StateInfo.unread` why the rest was not read (``reason``: why the header did not
    parse). ``gap``: bytes that may stand between two meta infos (an operator state header's
    count of broadcast states after its list states: 2).
    """
    infos: list[StateInfo] = []
    starts = _meta_starts(data, start, end)
    i = 0
    while i < len(starts):
        at = starts[i]
        following = starts[i + 1:]
        exact = _exact_info(data, where, at, end, [*following, *(p - gap for p in following)])
        if exact is not None:
            infos.append(exact)
            i = next((j for j in range(i + 1, len(starts)) if starts[j] >= at + len(exact.raw)),
                     len(starts))
            continue
        upto = starts[i + 1] if i + 1 < len(starts) else end
        infos.append(_partial_info(data, where, at, upto, reason, gap))
        i += 1
    return infos


def _meta_starts(data: bytes, start: int, end: int) -> list[int]:
    """Every position in ``start..end`` where a meta info's structure holds."""
    found = []
    for p in range(start, end - 10):
        length = int.from_bytes(data[p:p + 2], "big")
        after = p + 2 + length
        # the state type's ordinal: an int 0..4
        if after + 12 > end or data[after:after + 3] != b"\0\0\0" or data[after + 3] >= len(
                STATE_TYPES):
            continue
        if _meta_skeleton(data, p, end) is not None:
            found.append(p)
    return found


def _meta_skeleton(data: bytes, p: int, end: int) -> tuple[str, int, dict[str, str], int] | None:
    """``(name, ordinal, options, serializers)`` when a meta info's structure holds at ``p``."""
    r = DataReader(data, "", p, end)
    try:
        name = r.utf()
        ordinal = r.i32()
        n_options = r.i32()
        if not 0 <= ordinal < len(STATE_TYPES) or not 0 <= n_options <= _MAX_ENTRIES:
            return None
        options = {}
        for _ in range(n_options):
            key = r.utf()
            if not _OPTION_KEY.fullmatch(key):
                return None
            options[key] = r.utf()
        n = r.i32()
        if not 0 < n <= _MAX_ENTRIES or not _serializer_entry(data, r.pos, end):
            return None
    except CheckpointError:
        return None
    return name, ordinal, options, n


def _serializer_entry(data: bytes, p: int, end: int) -> bool:
    """Whether a serializer entry starts at ``p``: its key, proxy version 2, a class name."""
    r = DataReader(data, "", p, end)
    try:
        if not _SERIALIZER_KEY.fullmatch(r.utf()) or r.i32() != SNAPSHOT_PROXY_VERSION:
            return False
        return bool(_CLASS_NAME.fullmatch(r.utf()))
    except CheckpointError:
        return False


def _exact_info(data: bytes, where: str, at: int, end: int, following: list[int]
                ) -> StateInfo | None:
    """The meta info at ``at`` when it parses exactly, up to another start or ``end``."""
    r = DataReader(data, where, at, end)
    try:
        info = read_state_info(r)
    except CheckpointError:
        return None
    return info if r.pos == end or r.pos in following else None


def _partial_info(data: bytes, where: str, at: int, upto: int, reason: str, gap: int = 0
                  ) -> StateInfo:
    """The meta info from ``at`` to ``upto``, read as far as it parses.

    See :func:`recover_state_infos`.
    """
    skeleton = _meta_skeleton(data, at, upto)
    assert skeleton is not None  # a start
    name, ordinal, options, n = skeleton
    r = DataReader(data, where, at, upto)
    r.utf()
    r.i32()
    for _ in range(r.i32() * 2):
        r.utf()
    r.i32()
    serializers: dict[str, SerializerSnapshot] = {}
    missing = n
    while missing:
        key = r.utf()
        at_snapshot = r.pos
        missing -= 1
        try:
            snapshot = read_snapshot(r)
            if r.pos not in (upto, upto - gap) and not (
                    missing and _serializer_entry(data, r.pos, upto)):
                raise UnsupportedFormatError(f"{where}: serializer snapshot {snapshot.class_name} "
                                             f"does not end where the next entry starts")
        except CheckpointError as exc:
            r.pos = at_snapshot
            snapshot = _unparsed(r, exc)
            following = next((q for q in range(at_snapshot + 4, upto)
                              if _serializer_entry(data, q, upto)), None) if missing else None
            serializers[key] = snapshot
            if following is None:
                r.pos = upto
                break
            r.pos = following
            continue
        serializers[key] = snapshot
    # its bytes: up to the next meta info, the gap before it aside when the last snapshot
    # parsed to there (an unparsed last snapshot may end at either)
    info = StateInfo(name, STATE_TYPES[ordinal], options, serializers, raw=data[at:r.pos])
    _assign_codecs(info)
    if missing:  # (an unparsed snapshot found says itself why: ``why_undecodable``)
        info.unread = f"{missing} of its {n} serializer snapshots could not be found ({reason})"
    return info


def _assign_codecs(info: StateInfo) -> None:
    value = info.serializers.get("VALUE_SERIALIZER")
    if info.backend_type == "PRIORITY_QUEUE":
        info.kind = "timers"
        info.value = info.element = None if value is None else codec_for(value)
        return
    if info.backend_type not in ("KEY_VALUE", "KEY_VALUE_V2"):
        info.kind = info.backend_type.lower()
        return
    info.kind = info.options.get("KEYED_STATE_TYPE", "VALUE").lower()
    namespace = info.serializers.get("NAMESPACE_SERIALIZER")
    info.namespace = None if namespace is None else codec_for(namespace)
    if value is None:
        return
    info.value = codec_for(value)
    if info.kind == "list" and value.nested:
        info.element = codec_for(value.nested[0])
    elif info.kind == "map" and len(value.nested) == 2:
        info.user_key = codec_for(value.nested[0])
        info.element = codec_for(value.nested[1])
    else:
        info.element = info.value


#: Parsed headers by their exact bytes, grouped by length (see :func:`decode_keyed_stream`).
HeaderCache = dict[int, dict[bytes, KeyedHeader]]


def cached_header(data: bytes, where: str, headers: HeaderCache | None,
                  end: int | None = None) -> KeyedHeader:
    """The header ``data`` starts with, parsed once per snapshot (see ``decode_keyed_stream``).

    ``end``: where the header ends, when known (:func:`header_end`).
    """
    if headers:
        for size, known in headers.items():
            header = known.get(data[:size])
            if header is not None:
                return header
    header = read_keyed_header(DataReader(data, where), end)
    if headers is not None:
        headers.setdefault(header.size, {})[data[:header.size]] = header
    return header


def header_end(handle: FlinkKeyedHandle, size: int) -> int:
    """Where a keyed stream's header ends: its first key group's offset.

    The stream's size when no key group has data (a canonical savepoint of empty state).
    """
    starts = [o for o in handle.offsets if o > 0]
    return min(starts) if starts else size
