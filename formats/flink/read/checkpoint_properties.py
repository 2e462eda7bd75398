"""The checkpoint properties at the end of a Flink ``_metadata``, checked as Flink reads them.

``MetadataV4Serializer`` ends ``_metadata`` with ``CheckpointProperties`` written by Java
serialization, and ``Checkpoints.loadCheckpointMetadata`` reads it back with
``ObjectInputStream`` before anything is restored. Java then refuses a class that does not
exist, a ``serialVersionUID`` other than the class's, a field whose type is not the class's
field of that name, an enum constant the enum has not, and a stream cut short. This module
reads the stream (:mod:`formats.flink.java.serialization`, no class is ever loaded) and checks
it against the classes Flink 1.16 to 2.3 write there (below, from Flink's sources: the same in
every release), so that ``verify`` reports what Flink's loader would refuse.

Where statectl is deliberately stricter than Java: a field name the class has not (Java skips
its value) and flags other than the class's are reported too; Flink never writes them, and they
are damage. Bytes after the properties, which Flink's loader leaves unread, are a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.java.serialization import ClassDesc, JavaEnum, JavaObject, read_java_object
from statecore.errors import CorruptCheckpointError

__all__ = ["PropertiesCheck", "check_properties"]

_CHECKPOINT = "org.apache.flink.runtime.checkpoint."
_SNAPSHOT_TYPE = f"L{_CHECKPOINT.replace('.', '/')}SnapshotType;"
_STRING = "Ljava/lang/String;"


@dataclass(frozen=True)
class _Known:
    """A class as Flink has it.

    Its ``serialVersionUID``, descriptor flags, fields by name (type code and signature), and
    for an enum its constants.
    """

    suid: int
    flags: int
    fields: dict[str, tuple[str, str | None]]
    constants: frozenset[str] = frozenset()
    #: the signatures of fields whose value may be an instance of this class
    assignable_to: frozenset[str] = frozenset()


def _enum(*constants: str, signature: str) -> _Known:
    return _Known(0, 0x12, {}, frozenset(constants), frozenset({signature}))


#: Every class in the properties stream of Flink 1.16 to 2.3 (``CheckpointProperties``,
#: ``CheckpointType``, ``SavepointType``, ``SnapshotType.SharingFilesStrategy``,
#: ``SavepointType.PostCheckpointAction``, ``SavepointFormatType``; enums have
#: ``serialVersionUID`` 0 and flags ``SC_SERIALIZABLE | SC_ENUM``).
KNOWN_CLASSES: dict[str, _Known] = {
    f"{_CHECKPOINT}CheckpointProperties": _Known(
        2, 0x02, {**{name: ("Z", None) for name in (
            "discardCancelled", "discardFailed", "discardFinished", "discardSubsumed",
            "discardSuspended", "forced", "unclaimed")},
            "checkpointType": ("L", _SNAPSHOT_TYPE)}),
    f"{_CHECKPOINT}CheckpointType": _Known(
        -2963844630364414662, 0x02,
        {"name": ("L", _STRING),
         "sharingFilesStrategy": ("L", f"L{_CHECKPOINT.replace('.', '/')}"
                                       f"SnapshotType$SharingFilesStrategy;")},
        assignable_to=frozenset({_SNAPSHOT_TYPE})),
    f"{_CHECKPOINT}SavepointType": _Known(
        -6879297871714708296, 0x02,
        {"name": ("L", _STRING),
         "formatType": ("L", "Lorg/apache/flink/core/execution/SavepointFormatType;"),
         "postCheckpointAction": ("L", f"L{_CHECKPOINT.replace('.', '/')}"
                                       f"SavepointType$PostCheckpointAction;")},
        assignable_to=frozenset({_SNAPSHOT_TYPE})),
    f"{_CHECKPOINT}SnapshotType$SharingFilesStrategy": _enum(
        "FORWARD_BACKWARD", "FORWARD", "NO_SHARING",
        signature=f"L{_CHECKPOINT.replace('.', '/')}SnapshotType$SharingFilesStrategy;"),
    f"{_CHECKPOINT}SavepointType$PostCheckpointAction": _enum(
        "NONE", "SUSPEND", "TERMINATE",
        signature=f"L{_CHECKPOINT.replace('.', '/')}SavepointType$PostCheckpointAction;"),
    "org.apache.flink.core.execution.SavepointFormatType": _enum(
        "CANONICAL", "NATIVE", signature="Lorg/apache/flink/core/execution/SavepointFormatType;"),
    "java.lang.Enum": _Known(0, 0x12, {}),
}


@dataclass(frozen=True)
class PropertiesCheck:
    """What the check found.

    ``problem``: what Flink's loader would refuse, else ``None``; ``trailing``: the bytes
    after the properties, which Flink leaves unread.
    """

    problem: str | None
    trailing: int


def check_properties(data: bytes, where: str = "_metadata") -> PropertiesCheck:
    """Check ``CheckpointProperties`` as ``Checkpoints.loadCheckpointMetadata`` reads them.

    ``data``: all bytes of ``_metadata`` after the operator states (Java-serialized).
    """
    try:
        reader = DataReader(data, f"{where}: checkpoint properties")
        value = read_java_object(reader)
        used = reader.pos
        if not isinstance(value, JavaObject) or value.class_name != (
                f"{_CHECKPOINT}CheckpointProperties"):
            raise CorruptCheckpointError(
                f"{where}: checkpoint properties: the stream holds {_what(value)}, not "
                f"{_CHECKPOINT}CheckpointProperties")
        _check_value(value, where, set())
    except CorruptCheckpointError as exc:
        return PropertiesCheck(str(exc), 0)
    return PropertiesCheck(None, len(data) - used)


def _what(value: Any) -> str:
    if isinstance(value, JavaObject):
        return f"an object of class {value.class_name}"
    if isinstance(value, JavaEnum):
        return f"an enum constant of {value.class_name}"
    return "a string" if isinstance(value, str) else "nothing (null)" if value is None else (
        "a class descriptor")


def _check_desc(desc: ClassDesc, where: str) -> _Known:
    known = KNOWN_CLASSES.get(desc.name)
    prefix = f"{where}: checkpoint properties"
    if known is None:
        raise CorruptCheckpointError(f"{prefix}: class {desc.name!r} is none Flink writes there "
                                     f"(Java: ClassNotFoundException)")
    if desc.suid != known.suid:
        raise CorruptCheckpointError(f"{prefix}: class {desc.name} has serialVersionUID "
                                     f"{desc.suid}, Flink's {known.suid} (Java: "
                                     f"InvalidClassException)")
    if desc.flags != known.flags:
        raise CorruptCheckpointError(f"{prefix}: class {desc.name} has descriptor flags "
                                     f"{desc.flags:#04x}, Flink's {known.flags:#04x}")
    for code, name in desc.fields:
        signature = desc.signatures.get(name)
        if known.fields.get(name) != (code, signature):
            raise CorruptCheckpointError(f"{prefix}: class {desc.name} has no field {name!r} "
                                         f"of type {signature or code}")
    expected_parent = "java.lang.Enum" if known.constants else None
    parent = desc.superclass.name if desc.superclass is not None else None
    if parent != expected_parent:
        raise CorruptCheckpointError(f"{prefix}: class {desc.name} extends {parent}, in Flink "
                                     f"{expected_parent or 'nothing serializable'}")
    if desc.superclass is not None:
        _check_desc(desc.superclass, where)
    return known


def _check_value(value: Any, where: str, seen: set[int]) -> None:
    """Every class and constant in ``value`` is Flink's, every field's value fits its type."""
    if id(value) in seen or value is None or isinstance(value, str):
        return
    seen.add(id(value))
    prefix = f"{where}: checkpoint properties"
    if isinstance(value, JavaEnum):
        assert value.desc is not None  # (read from a stream)
        known = _check_desc(value.desc, where)
        if value.constant not in known.constants:
            raise CorruptCheckpointError(f"{prefix}: enum {value.class_name} has no constant "
                                         f"{value.constant!r} (Java: IllegalArgumentException)")
        return
    if not isinstance(value, JavaObject) or value.desc is None:
        raise CorruptCheckpointError(f"{prefix}: {_what(value)} where a value is expected")
    known = _check_desc(value.desc, where)
    for name, (_code, signature) in known.fields.items():
        field_value = value.fields.get(name)
        if signature is None or field_value is None:
            continue
        _check_value(field_value, where, seen)  # its own classes first (Java resolves them)
        if signature == _STRING:
            fits = isinstance(field_value, str)
        else:
            owner = (field_value.class_name if isinstance(field_value, JavaObject | JavaEnum)
                     else None)
            fits = owner is not None and (
                signature in KNOWN_CLASSES.get(owner, _Known(0, 0, {})).assignable_to)
        if not fits:
            raise CorruptCheckpointError(f"{prefix}: field {name} of {value.class_name} holds "
                                         f"{_what(field_value)} (Java: ClassCastException)")
