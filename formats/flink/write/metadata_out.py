"""Writing Flink's ``_metadata`` of a savepoint, versions 3 to 6, as each Flink release writes it.

The mirror of :mod:`formats.flink.read.metadata`: header (magic, version, checkpoint id), no master
states, per operator its name and uid (version 5 and later: Flink 2.x; 1.x stores neither), its
OperatorID, parallelism, max parallelism, coordinator state and subtask states (managed operator
state and managed keyed state handles; handles of type 7, ``KeyGroupsSavepointStateHandle``, and
operator state handles, each referencing a file beside ``_metadata`` by its relative name), then
(version 4 and later) the ``CheckpointProperties`` of a canonical savepoint, Java-serialized --
without them Flink 1.16 and later would not take the directory for a savepoint. Which release
writes which version: :mod:`formats.flink.write.versions`. Version 6 differs from 5 only in the
channel state handles of unaligned checkpoints (``ChannelStateHandleSerializerV2``), of which a
savepoint
has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from formats.flink.java.output import DataWriter, utf_bytes
from formats.flink.read.metadata import (
    HEADER_MAGIC,
    OPERATOR_MODES,
    PARTITIONABLE_OPERATOR,
    SAVEPOINT_KEY_GROUPS,
)
from statecore.errors import InvalidArgumentError

__all__ = ["KeyedHandleOut", "OperatorHandleOut", "OperatorOut", "SubtaskOut",
           "savepoint_metadata", "savepoint_properties"]

METADATA_VERSION = 6  # Flink 2.1 and later
WRITTEN_VERSIONS = (3, 4, 5, 6)
BYTE_STREAM = 1
RELATIVE_STREAM = 6


@dataclass(frozen=True)
class KeyedHandleOut:
    """A ``KeyGroupsSavepointStateHandle``: key groups, their offsets, the file.

    ``offsets[i]`` is where key group ``first_key_group + i`` starts in the file (0: no data);
    ``file`` is relative to ``_metadata``'s directory.
    """

    first_key_group: int
    offsets: tuple[int, ...]
    file: str
    size: int


@dataclass(frozen=True)
class OperatorHandleOut:
    """An ``OperatorStreamStateHandle``: per state its mode and element offsets, the file."""

    states: dict[str, tuple[str, tuple[int, ...]]]
    file: str
    size: int


@dataclass(frozen=True)
class SubtaskOut:
    """One subtask's handles (``None``: no such state)."""

    index: int
    keyed: KeyedHandleOut | None = None
    operator: OperatorHandleOut | None = None


@dataclass(frozen=True)
class OperatorOut:
    """One operator's entry in ``_metadata``."""

    operator_id: str  # 32 hex digits
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    subtasks: tuple[SubtaskOut, ...] = ()
    coordinator: bytes | None = None  # the operator coordinator's state, carried over
    coordinator_name: str = ""  # the inline handle's name
    extra: dict[str, str] = field(default_factory=dict)


def savepoint_metadata(checkpoint_id: int, operators: Sequence[OperatorOut],
                       version: int = METADATA_VERSION) -> bytes:
    """The bytes of a canonical savepoint's ``_metadata`` (``MetadataV<version>Serializer``)."""
    if version not in WRITTEN_VERSIONS:
        raise InvalidArgumentError(f"_metadata version {version}: statectl writes versions "
                                   f"{WRITTEN_VERSIONS[0]} to {WRITTEN_VERSIONS[-1]}")
    w = DataWriter()
    w.i32(HEADER_MAGIC)
    w.i32(version)
    w.i64(checkpoint_id)
    w.i32(0)  # master states
    w.i32(len(operators))
    for op in operators:
        _operator(w, op, version)
    if version >= 4:  # MetadataV4Serializer and later: the checkpoint's properties
        w.raw(savepoint_properties())
    return w.getvalue()


def _operator(w: DataWriter, op: OperatorOut, version: int) -> None:
    if len(op.operator_id) != 32:
        raise InvalidArgumentError(f"OperatorID {op.operator_id!r} is not 32 hex digits")
    if version >= 5:  # MetadataV5Serializer: name and uid before the OperatorID
        w.utf(op.name or "")
        w.utf(op.uid or "")
    w.raw(bytes.fromhex(op.operator_id))
    w.i32(op.parallelism)
    w.i32(op.max_parallelism)
    if op.coordinator is None:
        w.u8(0)
    else:
        w.u8(BYTE_STREAM)
        w.utf(op.coordinator_name)
        w.sized_bytes(op.coordinator)
    w.i32(len(op.subtasks))  # every subtask, also those without state, as Flink writes them
    for st in op.subtasks:
        w.i32(st.index)
        _subtask(w, st)


def _subtask(w: DataWriter, st: SubtaskOut) -> None:
    """``serializeSubtaskState``: operator, keyed and channel state handles.

    Managed operator state, raw operator state (none), managed keyed state, raw keyed state
    (none), input channel and result subpartition state (none).
    """
    if st.operator is None:
        w.i32(0)
    else:
        w.i32(1)
        w.i8(PARTITIONABLE_OPERATOR)
        w.i32(len(st.operator.states))
        for name, (mode, offsets) in st.operator.states.items():
            w.utf(name)
            w.i8(OPERATOR_MODES.index(mode))
            w.i32(len(offsets))
            for offset in offsets:
                w.i64(offset)
        _relative(w, st.operator.file, st.operator.size)
    w.i32(0)  # raw operator state
    if st.keyed is None:
        w.i8(0)
    else:
        w.i8(SAVEPOINT_KEY_GROUPS)
        w.i32(st.keyed.first_key_group)
        w.i32(len(st.keyed.offsets))
        for offset in st.keyed.offsets:
            w.i64(offset)
        _relative(w, st.keyed.file, st.keyed.size)
    w.i8(0)  # raw keyed state
    w.i32(0)  # input channel state
    w.i32(0)  # result subpartition state


def _relative(w: DataWriter, file: str, size: int) -> None:
    """A ``RelativeFileStateHandle``: the file's name relative to ``_metadata``'s directory."""
    w.u8(RELATIVE_STREAM)
    w.utf(file)
    w.i64(size)


# -- CheckpointProperties, Java-serialized ------------------------------------------------------

_TC_NULL, _TC_REFERENCE, _TC_CLASSDESC, _TC_OBJECT = 0x70, 0x71, 0x72, 0x73
_TC_STRING, _TC_ENDBLOCKDATA, _TC_ENUM = 0x74, 0x78, 0x7E
_BASE_HANDLE = 0x7E0000
_SC_SERIALIZABLE, _SC_ENUM = 0x02, 0x10


class _JavaWriter:
    """Just enough of Java's object serialization protocol for ``CheckpointProperties``.

    Objects with primitive and object fields, enums, strings; a class descriptor or string
    written twice becomes a back reference (``TC_REFERENCE``), as ``ObjectOutputStream`` does.
    """

    def __init__(self) -> None:
        self.w = DataWriter()
        self.w.u16(0xACED)  # STREAM_MAGIC
        self.w.u16(5)  # STREAM_VERSION
        self.handles: dict[tuple[str, str], int] = {}

    def _new_handle(self, key: tuple[str, str]) -> None:
        self.handles[key] = _BASE_HANDLE + len(self.handles)

    def _reference(self, key: tuple[str, str]) -> bool:
        handle = self.handles.get(key)
        if handle is None:
            return False
        self.w.u8(_TC_REFERENCE)
        self.w.i32(handle)
        return True

    def string(self, text: str) -> None:
        if not self._reference(("string", text)):
            self.w.u8(_TC_STRING)
            self.w.raw(utf_bytes(text))
            self._new_handle(("string", text))

    def class_desc(self, name: str, uid: int, flags: int,
                   fields: Sequence[tuple[str, str, str | None]],
                   superclass: tuple[str, int, int] | None = None) -> None:
        """``fields``: (type code, name, class signature for object fields)."""
        if self._reference(("class", name)):
            return
        self.w.u8(_TC_CLASSDESC)
        self.w.utf(name)
        self.w.i64(uid)
        self._new_handle(("class", name))
        self.w.u8(flags)
        self.w.i16(len(fields))
        for code, field_name, signature in fields:
            self.w.u8(ord(code))
            self.w.utf(field_name)
            if signature is not None:
                self.string(signature)
        self.w.u8(_TC_ENDBLOCKDATA)
        if superclass is None:
            self.w.u8(_TC_NULL)
        else:
            self.class_desc(superclass[0], superclass[1], superclass[2], ())

    def enum(self, name: str, constant: str) -> None:
        self.w.u8(_TC_ENUM)
        self.class_desc(name, 0, _SC_SERIALIZABLE | _SC_ENUM, (),
                        ("java.lang.Enum", 0, _SC_SERIALIZABLE | _SC_ENUM))
        self._new_handle(("enum", f"{name}.{constant}"))
        self.string(constant)


def savepoint_properties(format_type: str = "CANONICAL") -> bytes:
    """``CheckpointProperties.forSavepoint(false, format_type)``, Java-serialized.

    As ``ObjectOutputStream`` writes it: a forced, never discarded savepoint of
    ``SavepointType.savepoint(format_type)``.
    """
    j = _JavaWriter()
    flink = "org.apache.flink."
    snapshot_type = f"L{flink.replace('.', '/')}runtime/checkpoint/SnapshotType;"
    j.w.u8(_TC_OBJECT)
    j.class_desc(f"{flink}runtime.checkpoint.CheckpointProperties", 2, _SC_SERIALIZABLE, [
        ("Z", "discardCancelled", None), ("Z", "discardFailed", None),
        ("Z", "discardFinished", None), ("Z", "discardSubsumed", None),
        ("Z", "discardSuspended", None), ("Z", "forced", None), ("Z", "unclaimed", None),
        ("L", "checkpointType", snapshot_type)])
    j._new_handle(("object", "properties"))
    for flag in (False, False, False, False, False, True, False):  # discard* x5, forced, unclaimed
        j.w.boolean(flag)
    j.w.u8(_TC_OBJECT)
    post_action = f"{flink}runtime.checkpoint.SavepointType$PostCheckpointAction"
    j.class_desc(f"{flink}runtime.checkpoint.SavepointType", -0x5F782CF75BA7EB48,
                 _SC_SERIALIZABLE, [
                     ("L", "formatType",
                      f"L{flink.replace('.', '/')}core/execution/SavepointFormatType;"),
                     ("L", "name", "Ljava/lang/String;"),
                     ("L", "postCheckpointAction", f"L{post_action.replace('.', '/')};")])
    j._new_handle(("object", "type"))
    j.enum(f"{flink}core.execution.SavepointFormatType", format_type)
    j.string("Savepoint")
    j.enum(post_action, "NONE")
    return j.w.getvalue()
