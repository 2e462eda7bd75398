"""A reader for Java object serialization streams, without deserializing anything.

Some Flink serializer snapshots embed ``ObjectOutputStream`` data: ``RowDataSerializer`` writes
its ``LogicalType`` objects this way, ``ExternalSerializer`` a ``DataType``, and ``_metadata``
ends with the ``CheckpointProperties``. To read past them we parse the stream grammar of the
Java Object Serialization Specification, chapter 6 (class descriptors, objects, strings, enums,
arrays, block data, back references) into plain Python values: :class:`JavaObject` (class
name and field values), :class:`JavaEnum`, strings, lists for arrays, ``None``. No class is ever
instantiated and no code runs: this is a parser of untrusted bytes, bounded in depth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from formats.flink.java.input import DataReader

__all__ = ["ClassDesc", "JavaEnum", "JavaObject", "read_java_object"]

STREAM_MAGIC = 0xACED
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY = range(0x70, 0x76)
TC_CLASS, TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET, TC_BLOCKDATALONG = range(0x76, 0x7B)
TC_EXCEPTION, TC_LONGSTRING, TC_PROXYCLASSDESC, TC_ENUM = range(0x7B, 0x7F)
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
MAX_DEPTH = 64


@dataclass
class ClassDesc:
    """A class descriptor as the stream gives it (the class itself is never looked up)."""

    name: str
    flags: int
    fields: list[tuple[str, str]]  # (type code, field name)
    superclass: ClassDesc | None
    suid: int = 0  # serialVersionUID
    #: an object or array field's type signature (``Ljava/lang/String;``), by field name
    signatures: dict[str, str] = field(default_factory=dict)


@dataclass
class JavaObject:
    """A serialized object: its class name, field values and custom-written data."""

    class_name: str
    fields: dict[str, Any] = field(default_factory=dict)
    annotations: list[Any] = field(default_factory=list)
    #: its class's descriptor as the stream gave it
    desc: ClassDesc | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class JavaEnum:
    """An enum constant."""

    class_name: str
    constant: str
    #: its enum class's descriptor as the stream gave it
    desc: ClassDesc | None = field(default=None, compare=False, repr=False)


class _Stream:
    def __init__(self, r: DataReader) -> None:
        self.r = r
        self.handles: list[Any] = []

    def new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def type_code(self, depth: int) -> int:
        """The next type code, at nesting ``depth`` (bounded: the stream is untrusted)."""
        if depth > MAX_DEPTH:
            raise self.r.fail("Java object stream nested too deeply")
        return self.r.u8()

    def reference(self) -> Any:
        """The object a ``TC_REFERENCE`` points back to (its handle follows)."""
        index = self.r.i32() - BASE_HANDLE
        if not 0 <= index < len(self.handles):
            raise self.r.fail(f"Java object stream: bad back reference {index}")
        return self.handles[index]

    def content(self, depth: int) -> Any:
        r = self.r
        tc = self.type_code(depth)
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self.reference()
        if tc in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            r.pos -= 1
            return self.class_desc(depth)
        if tc == TC_OBJECT:
            desc = self.class_desc(depth + 1)
            if desc is None:
                raise r.fail("Java object stream: object without a class")
            obj = JavaObject(desc.name, desc=desc)
            self.new_handle(obj)
            chain = []
            d: ClassDesc | None = desc
            while d is not None:
                chain.append(d)
                d = d.superclass
            for d in reversed(chain):
                self.class_data(d, obj, depth + 1)
            return obj
        if tc == TC_STRING:
            value = r.utf()
            self.new_handle(value)
            return value
        if tc == TC_LONGSTRING:
            n = r.i64()
            if n < 0 or n > r.remaining:
                raise r.fail(f"Java object stream: long string of {n} bytes")
            value = r.raw(n).decode("utf-8", "replace")
            self.new_handle(value)
            return value
        if tc == TC_ENUM:
            desc = self.class_desc(depth + 1)
            slot = self.new_handle(None)
            name = self.content(depth + 1)
            if desc is None or not isinstance(name, str):
                raise r.fail("Java object stream: malformed enum constant")
            self.handles[slot] = JavaEnum(desc.name, name, desc)
            return self.handles[slot]
        if tc == TC_ARRAY:
            desc = self.class_desc(depth + 1)
            if desc is None or not desc.name.startswith("["):
                raise r.fail("Java object stream: array without an array class")
            values: list[Any] = []
            self.new_handle(values)
            n = r.count("Java array elements")
            code = desc.name[1]
            for _ in range(n):
                values.append(self.value(code, depth + 1))
            return values
        if tc == TC_CLASS:
            desc = self.class_desc(depth + 1)
            self.new_handle(desc)
            return desc
        if tc == TC_BLOCKDATA:
            return r.raw(r.u8())
        if tc == TC_BLOCKDATALONG:
            return r.raw(r.count("Java block data bytes"))
        if tc == TC_RESET:
            self.handles.clear()
            return self.content(depth + 1)
        raise r.fail(f"Java object stream: unexpected type code {tc:#x}")

    def class_desc(self, depth: int) -> ClassDesc | None:
        r = self.r
        tc = self.type_code(depth)
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            desc = self.reference()
            if not isinstance(desc, ClassDesc):
                raise r.fail("Java object stream: bad class descriptor reference")
            return desc
        if tc == TC_PROXYCLASSDESC:
            desc = ClassDesc("<proxy>", SC_SERIALIZABLE, [], None)
            self.new_handle(desc)
            for _ in range(r.count("proxy interfaces", 2)):
                r.utf()
            self.annotations(depth + 1)
            desc.superclass = self.class_desc(depth + 1)
            return desc
        if tc != TC_CLASSDESC:
            raise r.fail(f"Java object stream: expected a class descriptor, got {tc:#x}")
        name = r.utf()
        desc = ClassDesc(name, 0, [], None, suid=r.i64())
        self.new_handle(desc)
        desc.flags = r.u8()
        for _ in range(r.count("Java fields", 3, r.u16())):
            code = chr(r.u8())
            field_name = r.utf()
            if code in ("L", "["):
                signature = self.content(depth + 1)  # the field's type, a string
                if not isinstance(signature, str):
                    raise r.fail(f"Java object stream: field {field_name!r} of {name} has no "
                                 f"type signature")
                desc.signatures[field_name] = signature
            elif code not in "BCDFIJSZ":
                raise r.fail(f"Java object stream: unknown field type {code!r}")
            desc.fields.append((code, field_name))
        self.annotations(depth + 1)
        desc.superclass = self.class_desc(depth + 1)
        return desc

    def annotations(self, depth: int) -> list[Any]:
        out: list[Any] = []
        while True:
            if self.r.data[self.r.pos:self.r.pos + 1] == bytes([TC_ENDBLOCKDATA]):
                self.r.pos += 1
                return out
            out.append(self.content(depth))

    def class_data(self, desc: ClassDesc, obj: JavaObject, depth: int) -> None:
        if desc.flags & SC_EXTERNALIZABLE:
            if not desc.flags & SC_BLOCK_DATA:
                raise self.r.fail(f"Java object stream: {desc.name} uses the old "
                                  f"externalizable protocol, which cannot be skipped")
            obj.annotations.extend(self.annotations(depth))
            return
        for code, name in desc.fields:
            obj.fields[name] = self.value(code, depth)
        if desc.flags & SC_WRITE_METHOD:
            obj.annotations.extend(self.annotations(depth))

    def value(self, code: str, depth: int) -> Any:
        r = self.r
        if code == "B":
            return r.i8()
        if code == "C":
            return chr(r.u16())
        if code == "D":
            return r.f64()
        if code == "F":
            return r.f32()
        if code == "I":
            return r.i32()
        if code == "J":
            return r.i64()
        if code == "S":
            return r.i16()
        if code == "Z":
            return r.boolean()
        return self.content(depth)


def read_java_object(r: DataReader) -> Any:
    """Read one stream (``AC ED 00 05``) holding one top-level object; the parsed object.

    ``r`` is left after the object (what follows is the caller's).
    """
    if r.u16() != STREAM_MAGIC or r.u16() != 5:
        raise r.fail("not a Java object serialization stream")
    return _Stream(r).content(0)
