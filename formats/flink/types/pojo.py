"""``PojoSerializer`` and ``EnumSerializer``: a POJO's fields, an enum's constant.

``PojoSerializer`` (``flink-core``'s ``api.java.typeutils.runtime.PojoSerializer``): one flags
byte (``1`` null, ``2`` exactly this class, ``4`` a subclass whose name follows, ``8`` a
registered subclass whose tag follows), then per field of the snapshot a null byte and the
field's bytes. ``EnumSerializer``: an int32 index into the snapshot's constants.

**Subclasses.** A value of a subclass is the flags byte, the subclass's name (``writeUTF``,
flags ``4``) or its registration tag (one byte, flags ``8``), then the value as the subclass's
own serializer writes it (a ``PojoSerializer`` of the subclass: its own flags byte, then all its
fields, inherited ones included). Flink keeps the serializers of the registered subclasses
(in tag order) and of the subclasses it met while serializing in the POJO's snapshot; statectl
decodes the subclasses whose snapshots are there and are POJO snapshots it decodes.

The spec of a POJO with such subclasses (:func:`pojo_subclass_union`) is the POJO's struct
with a first field ``@class`` (the value's class name: ``@`` is in no Java field name) and,
after the POJO's own fields, the fields only subclasses have, in the order the snapshot lists
the subclasses (registered ones first); a value has ``None`` in the fields its class has not.
A subclass with a field of the same name as an earlier one but another type (``radius`` a
``float64`` in one subclass, a ``string`` in another), or whose serializer is no POJO
serializer statectl decodes (Kryo), is left out of the spec: its values are refused with
:class:`~statecore.errors.UnsupportedFormatError` naming it and why, as are values of a
subclass the snapshot does not have. A POJO without subclasses in its snapshot keeps the plain
struct of its fields.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.types.codec import Codec
from statecore.errors import UnsupportedFormatError

__all__ = ["CLASS_FIELD", "POJO_IS_NULL", "POJO_IS_SUBCLASS", "POJO_IS_TAGGED_SUBCLASS",
           "POJO_NO_SUBCLASS", "PojoSubclass", "enum_codec", "pojo_codec", "pojo_subclass_union"]

#: The field of a POJO struct with subclasses that names the value's class.
CLASS_FIELD = "@class"

#: ``PojoSerializer``'s flags (``IS_NULL``, ``NO_SUBCLASS``, ``IS_SUBCLASS``,
#: ``IS_TAGGED_SUBCLASS``).
POJO_IS_NULL, POJO_NO_SUBCLASS, POJO_IS_SUBCLASS, POJO_IS_TAGGED_SUBCLASS = 1, 2, 4, 8

_I = struct.Struct(">i")


@dataclass(frozen=True)
class PojoSubclass:
    """A subclass in a POJO's snapshot: its name, registration and fields.

    ``fields`` is ``None`` for no POJO statectl decodes (``why`` says what it is).
    """

    class_name: str
    registered: bool
    fields: tuple[tuple[str, str], ...] | None  # (name, spec) in its snapshot's order
    why: str = ""


def pojo_subclass_union(fields: Sequence[tuple[str, str]], subclasses: Sequence[PojoSubclass]
                        ) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The struct fields of a POJO with subclasses, and the subclasses left out (with why).

    ``fields``/``subclasses`` as (name, spec). See the module doc; with no subclass, the POJO's
    own fields.
    """
    if not subclasses:
        return list(fields), {}
    union = dict(fields)
    order = [name for name, _ in fields]
    excluded: dict[str, str] = {}
    for sub in subclasses:
        if sub.fields is None:
            excluded[sub.class_name] = sub.why or "its serializer is no POJO serializer"
            continue
        clash = next((f"its field {name!r} is a {spec} where "
                      f"{'the POJO' if name in dict(fields) else 'another subclass'} has a "
                      f"{union[name]}" for name, spec in sub.fields
                      if name in union and union[name] != spec), None)
        if clash is not None:
            excluded[sub.class_name] = clash
            continue
        for name, spec in sub.fields:
            if name not in union:
                union[name] = spec
                order.append(name)
    return [(CLASS_FIELD, "string"), *((name, union[name]) for name in order)], excluded


def pojo_codec(class_name: str, fields: Sequence[tuple[str, Codec]],
               subclasses: Sequence[str] = (),
               subclass_codecs: Sequence[tuple[PojoSubclass, Codec | None]] = ()) -> Codec:
    """``PojoSerializer`` of ``class_name``: a dict of its fields, in the snapshot's order.

    ``subclasses``: the registered subclasses' names in tag order (for messages);
    ``subclass_codecs``: the subclasses of the snapshot with the codec of each (a plain POJO
    codec of its fields) -- with any, values carry ``@class`` (see the module doc).
    """
    plain = _plain_pojo(class_name, fields, subclasses)
    if not subclass_codecs:
        return plain
    union, excluded = pojo_subclass_union([(n, c.spec) for n, c in fields],
                                          [sub for sub, _ in subclass_codecs])
    template: dict[str, Any] = dict.fromkeys(name for name, _ in union)
    read_base = plain.read
    # per tag / per name: the subclass's reader and its name (None: refused, see excluded)
    tagged: list[tuple[str, Any]] = []
    named: dict[str, Any] = {}
    for sub, codec in subclass_codecs:
        reader = codec.read if codec is not None and sub.class_name not in excluded else None
        if sub.registered:
            tagged.append((sub.class_name, reader))
        else:
            named[sub.class_name] = reader

    def read_union(r: DataReader) -> dict[str, Any] | None:
        data, pos = r.data, r.pos
        if pos >= r.end:
            raise r.fail(f"truncated: a {class_name} POJO expected")
        flags = data[pos]
        if flags & POJO_IS_NULL or not flags & (POJO_IS_SUBCLASS | POJO_IS_TAGGED_SUBCLASS):
            fields_read = read_base(r)
            if fields_read is None:
                return None
            out = dict(template)
            out.update(fields_read)
            out[CLASS_FIELD] = class_name
            return out
        r.pos = pos + 1
        if flags & POJO_IS_SUBCLASS:
            sub_name = r.utf()
            reader = named.get(sub_name)
        else:
            tag = r.u8()
            if tag >= len(tagged):
                raise r.fail(f"registered subclass tag {tag} of POJO {class_name}, which has "
                             f"{len(tagged)} registered subclasses")
            sub_name, reader = tagged[tag]
        if reader is None:
            raise _subclass_refused(r, class_name, sub_name, excluded)
        fields_read = reader(r)
        if fields_read is None:
            raise r.fail(f"a null value of subclass {sub_name} inside a {class_name} value")
        out = dict(template)
        out.update(fields_read)
        out[CLASS_FIELD] = sub_name
        return out

    spec = "struct<" + ",".join(f"{name}:{spec}" for name, spec in union) + ">"
    return Codec(read_union, spec, -1, f"POJO {class_name}")


def _plain_pojo(class_name: str, fields: Sequence[tuple[str, Codec]],
                subclasses: Sequence[str]) -> Codec:
    """The fields of a value of exactly ``class_name`` (flags ``2``), or null (flags ``1``).

    A subclass's value is refused, naming the subclass (``subclasses``: the registered ones'
    names in tag order).
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
        if flags & (POJO_IS_SUBCLASS | POJO_IS_TAGGED_SUBCLASS):
            raise _subclass(r, flags, class_name, subclasses, {})
        if not flags & POJO_NO_SUBCLASS:
            raise r.fail(f"POJO flags {flags:#x} name no class")
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


def _subclass_refused(r: DataReader, class_name: str, sub_name: str, excluded: dict[str, str]
                      ) -> Exception:
    why = excluded.get(sub_name)
    if why is None:
        why = "the POJO's snapshot has no serializer of it"
    return UnsupportedFormatError(
        f"{r.where}: a value of class {sub_name}, a subclass of POJO {class_name}, which "
        f"statectl cannot decode: {why}")


def _subclass(r: DataReader, flags: int, class_name: str, subclasses: Sequence[str],
              excluded: dict[str, str]) -> Exception:
    """The error for a subclass value of a POJO whose snapshot has no subclass serializers."""
    if flags & POJO_IS_SUBCLASS:
        return _subclass_refused(r, class_name, r.utf(), excluded)
    tag = r.u8()
    if tag < len(subclasses):
        return _subclass_refused(r, class_name, subclasses[tag], excluded)
    return r.fail(f"registered subclass tag {tag} of POJO {class_name}, which has "
                  f"{len(subclasses)} registered subclasses")


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


