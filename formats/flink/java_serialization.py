"""A strict reader of Java's Object Serialization Stream Protocol (version 2), without Java.

Flink stores a checkpoint's ``CheckpointProperties`` in ``_metadata`` (versions 4 and later) as
a Java-serialized object, read back by ``ObjectInputStream`` (``MetadataV4Serializer``). This
module reads such a stream into plain Python values, **never running or loading any class**:
objects become :class:`JavaObject` (class name and field values), enum constants
:class:`JavaEnum`, strings ``str``. It checks the grammar of the protocol as
``ObjectInputStream`` does (type codes, class descriptors, handles, block data) and leaves the
classes' meaning to the caller (:mod:`formats.flink.checkpoint_properties`), as Java resolves
classes and matches their fields only after reading a descriptor.

Covered: ``TC_OBJECT``, ``TC_CLASSDESC``, ``TC_ENUM``, ``TC_STRING``, ``TC_LONGSTRING``,
``TC_REFERENCE``, ``TC_NULL``, class annotations and custom data in block data. Not covered
(a :class:`~statecore.errors.CorruptCheckpointError`, as nothing Flink writes there uses them):
arrays, proxy classes, externalizable classes, long strings, ``TC_RESET``, ``TC_EXCEPTION``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from formats.flink.javaio import DataReader

__all__ = ["ClassDesc", "JavaEnum", "JavaObject", "read_object_stream"]

STREAM_MAGIC, STREAM_VERSION = 0xACED, 5
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING = 0x70, 0x71, 0x72, 0x73, 0x74
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_BLOCKDATALONG, TC_LONGSTRING = 0x77, 0x78, 0x7A, 0x7C
TC_ENUM = 0x7E
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_ENUM = 0x01, 0x02, 0x04, 0x10
#: primitive field type codes and their sizes (``ObjectStreamField``)
PRIMITIVES = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}
MAX_DEPTH = 64


@dataclass(frozen=True)
class ClassDesc:
    """A class descriptor as the stream gives it.

    ``fields`` are ``(type code, name, class signature or None)`` in stream order; ``parent``
    is the superclass's descriptor.
    """

    name: str
    suid: int
    flags: int
    fields: tuple[tuple[str, str, str | None], ...]
    parent: ClassDesc | None


@dataclass
class JavaObject:
    """An object: its descriptor and its fields' values per class (superclass first)."""

    desc: ClassDesc
    values: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class JavaEnum:
    """An enum constant: its class descriptor and the constant's name."""

    desc: ClassDesc
    constant: str


class _Reader(DataReader):
    def __init__(self, data: bytes, where: str) -> None:
        super().__init__(data, where)
        self.handles: list[Any] = []

    def new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def reference(self) -> Any:
        handle = self.i32() - BASE_HANDLE
        if not 0 <= handle < len(self.handles) or self.handles[handle] is None:
            raise self.fail(f"a reference to handle {handle + BASE_HANDLE:#x}, not yet written")
        return self.handles[handle]

    # -- grammar ---------------------------------------------------------------------------

    def content(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(f"objects nested deeper than {MAX_DEPTH}")
        code = self.u8()
        if code == TC_NULL:
            return None
        if code == TC_REFERENCE:
            return self.reference()
        if code == TC_LONGSTRING:
            raise self.fail("a string of more than 65535 bytes (none is in what Flink writes)")
        if code == TC_STRING:
            text = self.utf()
            self.new_handle(text)
            return text
        if code == TC_OBJECT:
            return self.new_object(depth)
        if code == TC_ENUM:
            desc = self.class_desc(depth)
            if desc is None or not desc.flags & SC_ENUM:
                raise self.fail("an enum constant whose class is no enum")
            slot = self.new_handle(None)
            name = self.content(depth + 1)
            if not isinstance(name, str):
                raise self.fail(f"enum {desc.name}: its constant's name is no string")
            self.handles[slot] = JavaEnum(desc, name)
            return self.handles[slot]
        if code == TC_CLASSDESC:
            self.pos -= 1
            return self.class_desc(depth)
        raise self.fail(f"type code {code:#04x} where an object is expected")

    def class_desc(self, depth: int) -> ClassDesc | None:
        code = self.u8()
        if code == TC_NULL:
            return None
        if code == TC_REFERENCE:
            desc = self.reference()
            if not isinstance(desc, ClassDesc):
                raise self.fail("a reference to something other than a class descriptor")
            return desc
        if code != TC_CLASSDESC:
            raise self.fail(f"type code {code:#04x} where a class descriptor is expected")
        name = self.utf()
        suid = self.i64()
        slot = self.new_handle(None)
        flags = self.u8()
        if flags & SC_EXTERNALIZABLE or not flags & SC_SERIALIZABLE:
            raise self.fail(f"class {name}: flags {flags:#04x} (only Serializable classes are "
                            f"read)")
        count = self.u16()
        fields: list[tuple[str, str, str | None]] = []
        for _ in range(count):
            type_code = chr(self.u8())
            field_name = self.utf()
            if type_code in PRIMITIVES:
                fields.append((type_code, field_name, None))
            elif type_code in ("L", "["):
                signature = self.content(depth + 1)
                if not isinstance(signature, str):
                    raise self.fail(f"class {name}, field {field_name}: no type signature")
                fields.append((type_code, field_name, signature))
            else:
                raise self.fail(f"class {name}, field {field_name}: type code {type_code!r}")
        self.annotation(depth)
        parent = self.class_desc(depth + 1)
        desc = ClassDesc(name, suid, flags, tuple(fields), parent)
        self.handles[slot] = desc
        return desc

    def annotation(self, depth: int) -> None:
        """Block data and objects up to ``TC_ENDBLOCKDATA`` (skipped)."""
        while True:
            code = self.u8()
            if code == TC_ENDBLOCKDATA:
                return
            if code == TC_BLOCKDATA:
                self.raw(self.u8())
            elif code == TC_BLOCKDATALONG:
                self.raw(self.count('block data bytes'))
            else:
                self.pos -= 1
                self.content(depth + 1)

    def new_object(self, depth: int) -> JavaObject:
        desc = self.class_desc(depth)
        if desc is None:
            raise self.fail("an object without a class")
        if desc.flags & SC_ENUM:
            raise self.fail(f"enum class {desc.name} written as an object")
        obj = JavaObject(desc)
        self.new_handle(obj)
        chain = []
        walk: ClassDesc | None = desc
        while walk is not None:
            chain.append(walk)
            walk = walk.parent
        for cls in reversed(chain):  # superclass data first
            values: dict[str, Any] = {}
            for code, name, _signature in cls.fields:
                if code in PRIMITIVES:
                    raw = self.raw(PRIMITIVES[code])
                    values[name] = raw[0] != 0 if code == "Z" else int.from_bytes(
                        raw, "big", signed=code != "C")
                else:
                    values[name] = self.content(depth + 1)
            if cls.flags & SC_WRITE_METHOD:
                self.annotation(depth)  # the class's own writeObject data
            obj.values[cls.name] = values
        return obj


def read_object_stream(data: bytes, where: str) -> tuple[Any, int]:
    """The first object of a Java serialization stream and the bytes it took.

    The header is included; what follows is the caller's. Raises
    :class:`~statecore.errors.CorruptCheckpointError`.
    """
    r = _Reader(data, where)
    if len(data) < 4:
        raise r.fail("a Java serialization stream is cut before its header")
    magic, version = r.u16(), r.u16()
    if (magic, version) != (STREAM_MAGIC, STREAM_VERSION):
        raise r.fail(f"no Java serialization stream (header {magic:#06x} {version})")
    value = r.content(0)
    return value, r.pos
