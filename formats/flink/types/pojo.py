"""``PojoSerializer`` and ``EnumSerializer``: a POJO's fields, an enum's constant.

``PojoSerializer`` (``flink-core``'s ``api.java.typeutils.runtime.PojoSerializer``): one flags
byte (``1`` null, ``2`` exactly this class, ``4`` a subclass whose name follows, ``8`` a
registered subclass whose tag follows), then per field of the snapshot a null byte and the
field's bytes. ``EnumSerializer``: an int32 index into the snapshot's constants.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from formats.flink.javaio import DataReader
from formats.flink.types.codec import Codec
from statecore.errors import UnsupportedFormatError

__all__ = ["POJO_IS_NULL", "POJO_IS_SUBCLASS", "POJO_IS_TAGGED_SUBCLASS", "POJO_NO_SUBCLASS",
           "enum_codec", "pojo_codec"]

#: ``PojoSerializer``'s flags (``IS_NULL``, ``NO_SUBCLASS``, ``IS_SUBCLASS``,
#: ``IS_TAGGED_SUBCLASS``).
POJO_IS_NULL, POJO_NO_SUBCLASS, POJO_IS_SUBCLASS, POJO_IS_TAGGED_SUBCLASS = 1, 2, 4, 8

_I = struct.Struct(">i")


def pojo_codec(class_name: str, fields: Sequence[tuple[str, Codec]],
               subclasses: Sequence[str] = ()) -> Codec:
    """``PojoSerializer`` of ``class_name``: a dict of its fields, in the snapshot's order.

    Values of exactly the POJO class are decoded; a value of a subclass (flags ``4``: its class
    name follows; ``8``: the tag of a registered subclass, ``subclasses`` in tag order) is
    refused with its class named -- its fields are not the POJO's.
    """
    # per field: its name, its reader, and for a fixed-size primitive its struct (read in place)
    layout = [(name, codec.read,
               struct.Struct(">" + codec.struct_code) if codec.struct_code else None)
              for name, codec in fields]

    def read(r: DataReader) -> dict[str, Any] | None:
        data, pos, end = r.data, r.pos, r.end
        if pos >= end:
            raise r.fail(f"truncated: a {class_name} POJO expected")
        flags = data[pos]
        r.pos = pos = pos + 1
        if flags & POJO_IS_NULL:
            return None
        if flags & (POJO_IS_SUBCLASS | POJO_IS_TAGGED_SUBCLASS) or not flags & POJO_NO_SUBCLASS:
            raise _subclass(r, flags, class_name, subclasses)
        out: dict[str, Any] = {}
        for name, read_field, fixed in layout:
            if pos >= end:
                raise r.fail(f"truncated: field {name!r} of a {class_name} POJO expected")
            if data[pos]:  # the field's null flag
                out[name] = None
                r.pos = pos = pos + 1
            elif fixed is not None:
                after = pos + 1 + fixed.size
                if after > end:
                    r.pos = pos + 1
                    raise r.fail(f"truncated: {fixed.size} more bytes expected, "
                                 f"{end - pos - 1} left")
                out[name] = fixed.unpack_from(data, pos + 1)[0]
                r.pos = pos = after
            else:
                r.pos = pos + 1
                out[name] = read_field(r)
                pos = r.pos
        return out

    spec = "struct<" + ",".join(f"{name}:{codec.spec}" for name, codec in fields) + ">"
    return Codec(read, spec, -1, f"POJO {class_name}")


def _subclass(r: DataReader, flags: int, class_name: str, subclasses: Sequence[str]
              ) -> Exception:
    if flags & POJO_IS_SUBCLASS:
        what = f"class {r.utf()}"
    elif flags & POJO_IS_TAGGED_SUBCLASS:
        tag = r.u8()
        what = (f"registered subclass {subclasses[tag]}" if tag < len(subclasses)
                else f"registered subclass #{tag}")
    else:
        return r.fail(f"POJO flags {flags:#x} name no class")
    return UnsupportedFormatError(
        f"{r.where}: a value of {what}, a subclass of POJO {class_name}: statectl decodes "
        f"values of the POJO class itself (their fields are the snapshot's)")


def enum_codec(class_name: str, constants: Sequence[str]) -> Codec:
    """``EnumSerializer``: the constant whose index the int32 is, in the snapshot's order."""
    values = tuple(constants)
    n = len(values)

    def read(r: DataReader) -> str:
        pos = r.pos
        if pos + 4 > r.end:
            raise r.fail(f"truncated: 4 more bytes expected, {r.end - pos} left")
        index: int = _I.unpack_from(r.data, pos)[0]
        if not 0 <= index < n:
            raise r.fail(f"enum ordinal {index} is none of the {n} constants of {class_name}")
        r.pos = pos + 4
        return values[index]

    return Codec(read, "enum<" + ",".join(values) + ">", 4, f"enum {class_name}")


