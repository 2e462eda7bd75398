"""Writing Kryo's bytes: :func:`kryo_encoder`, the mirror of ``kryo_codec``.

Ports of Kryo's ``Output`` (``writeVarInt``, ``writeVarLong``, ``writeVarIntFlag``,
``writeString``, ``writeAscii``), ``Kryo.writeClassAndObject`` / ``writeObjectOrNull``,
``DefaultClassResolver.writeClass`` and ``MapReferenceResolver`` (:class:`_Writer`), and of the
serializers' ``write`` methods whose ``read`` the reading modules port: ``DefaultSerializers``,
``CollectionSerializer``, ``MapSerializer``, ``DefaultArraySerializers``, Kryo 5's
``TimeSerializers`` (:func:`_w_time`), Kryo 2.24's ``FieldSerializer`` of the ``java.time``
classes (the ``_wf_*`` writers) and chill's serializers of Flink 1.x's registrar. The tables
:data:`WRITERS5` (Kryo 5) and :data:`WRITERS2` (Kryo 2.24) map a class to its writer.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from formats.flink.types.kryo.registrations import (
    COLLECTIONS,
    FINAL,
    IMMUTABLE,
    MAPS,
    MAX_KRYO_NESTING,
    NO_REFERENCES,
    PRIMITIVE_ARRAYS,
    KryoRegistrations,
    component_class,
    kryo_registrations,
)
from formats.flink.types.kryo.typed import TYPED_SPECS
from formats.flink.types.kryo.values import JavaFloat, jint, jstr
from statecore.errors import InvalidArgumentError
from statecore.values import NANOS_PER_DAY, NANOS_PER_SECOND, civil_from_days

# ---------------------------------------------------------------------------------- writing


def kryo_encoder(class_name: str, registrations: Iterable[str] = (), kryo_major: int = 5,
                 serializers: Mapping[str, str] | None = None,
                 default_serializers: Iterable[str] = (), enums: Iterable[str] = ()
                 ) -> Callable[[bytearray, Any], None]:
    """The mirror of :func:`kryo_codec`: writes a value as ``Kryo.writeClassAndObject``.

    A value :func:`kryo_codec` decoded is written back byte for byte; plain Python values get
    default classes (see the module doc). Bytes (a value of an undecodable class, kept) are
    written as they are.
    """
    reg = kryo_registrations(registrations, kryo_major, serializers, default_serializers,
                             enums)
    typed = TYPED_SPECS.get(class_name)

    def write(out: bytearray, value: Any) -> None:
        if isinstance(value, bytes | bytearray):
            out += value
            return
        w = _Writer(out, reg)
        if typed is not None and value is not None:
            w.any(_from_typed(class_name, value), class_name)
        else:
            w.any(value, None)
    return write


def _from_typed(cls: str, value: Any) -> Any:
    """The JSON-form value (with class) of a typed value of the declared class."""
    import datetime
    if cls in ("java.lang.Integer", "java.lang.Double", "java.lang.Boolean"):
        return value
    if cls in ("java.lang.Long", "java.lang.Short", "java.lang.Byte", "java.math.BigInteger"):
        return jint(int(value), cls)
    if cls == "java.lang.Float":
        f = JavaFloat(value)
        f.java_class = cls
        return f
    if cls in ("java.lang.String", "java.lang.Character"):
        return jstr(str(value), cls)
    if cls == "java.util.UUID":
        h = str(value).replace("-", "")
        if len(h) != 32:
            raise InvalidArgumentError(f"{value!r} is not a UUID")
        n = int(h, 16)
        return jstr(str(value), cls, (_signed64(n >> 64), _signed64(n)))
    if cls == "java.math.BigDecimal":
        if not isinstance(value, decimal.Decimal) or not value.is_finite():
            raise InvalidArgumentError(f"{value!r} is not a finite Decimal")
        sign, digits, exp = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return jstr(str(value), cls, (unscaled, -int(exp), value))
    if cls == "java.time.LocalDate":
        if not isinstance(value, datetime.date):
            raise InvalidArgumentError(f"{value!r} is not a date")
        return jstr(value.isoformat(), cls, (value.year, value.month, value.day))
    if cls == "java.time.LocalTime":
        n = value.nano_of_day
        return jstr(str(value), cls, (n // 3_600_000_000_000, n // 60_000_000_000 % 60,
                                       n // NANOS_PER_SECOND % 60, n % NANOS_PER_SECOND))
    if cls == "java.time.LocalDateTime":
        days, n = divmod(value.epoch_nanos, NANOS_PER_DAY)
        return jstr(str(value), cls, (*civil_from_days(days), n // 3_600_000_000_000,
                                       n // 60_000_000_000 % 60, n // NANOS_PER_SECOND % 60,
                                       n % NANOS_PER_SECOND))
    if cls == "java.time.Instant":
        return jstr(str(value), cls, divmod(value.epoch_nanos, NANOS_PER_SECOND))
    if cls in ("java.util.Date", "java.sql.Date", "java.sql.Time"):
        return jstr(str(value), cls, (value.epoch_nanos // 1_000_000,))
    if cls == "java.sql.Timestamp":
        return jstr(str(value), cls, divmod(value.epoch_nanos, NANOS_PER_SECOND))
    raise InvalidArgumentError(f"statectl cannot write a {cls} from {value!r}")


def _signed64(n: int) -> int:
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >= 1 << 63 else n


class _Writer:
    """One top-level value's writing: class name ids and reference ids, as Kryo's."""

    def __init__(self, out: bytearray, reg: KryoRegistrations) -> None:
        self.out = out
        self.reg = reg
        self.le = reg.major >= 5
        self.names: dict[str, int] = {}
        self.refs: dict[Any, int] = {}
        self.keep: list[Any] = []  # the referenced objects, alive while their ids are keys
        self.depth = 0
        self.enums = set(reg.enums)

    # -- primitives of Kryo's Output

    def varint(self, v: int) -> None:
        v &= 0xFFFFFFFF
        out = self.out
        while v >= 0x80:
            out.append(v & 0x7F | 0x80)
            v >>= 7
        out.append(v)

    def zigzag(self, v: int) -> None:
        self.varint((v << 1) ^ (v >> 31))

    def varlong(self, v: int, zigzag: bool) -> None:
        v = ((v << 1) ^ (v >> 63)) if zigzag else v
        v &= (1 << 64) - 1
        out = self.out
        for _ in range(8):
            if v < 0x80:
                out.append(v)
                return
            out.append(v & 0x7F | 0x80)
            v >>= 7
        out.append(v)

    def var_flag(self, flag: bool, v: int) -> None:
        first = v & 0x3F | (0x80 if flag else 0)
        v >>= 6
        if v:
            first |= 0x40
        self.out.append(first)
        while v:
            b = v & 0x7F
            v >>= 7
            self.out.append(b | 0x80 if v else b)

    def fixed(self, code: str, v: Any) -> None:
        self.out += struct.pack(("<" if self.le else ">") + code, v)

    def string(self, text: str | None) -> None:
        """``Output.writeString``: a Kryo string.

        ASCII of 2..32 (Kryo 2: ..63) characters with the last byte's bit 8 set, else char
        count + 1 and each UTF-16 unit in 1 to 3 bytes.
        """
        if text is None:
            self.out.append(0x80)
            return
        units = _utf16_units(text)
        if not units:
            self.out.append(0x81)
            return
        limit = 32 if self.le else 63
        if 1 < len(units) <= limit and all(u < 0x80 for u in units):
            self.out += bytes(units[:-1])
            self.out.append(units[-1] | 0x80)
            return
        self.var_flag(True, len(units) + 1)
        out = self.out
        for c in units:
            if c <= 0x7F:
                out.append(c)
            elif c > 0x7FF:
                out += bytes((0xE0 | c >> 12 & 0x0F, 0x80 | c >> 6 & 0x3F, 0x80 | c & 0x3F))
            else:
                out += bytes((0xC0 | c >> 6 & 0x1F, 0x80 | c & 0x3F))

    # -- classes, references

    def write_class(self, cls: str | None) -> None:
        if cls is None:
            self.out.append(0)
            return
        class_id = self.reg.class_id(cls)
        if class_id is not None:
            self.varint(class_id + 2)
            return
        self.out.append(1)
        name_id = self.names.get(cls)
        if name_id is not None:
            self.varint(name_id)
            return
        name_id = self.names[cls] = len(self.names)
        self.varint(name_id)
        if self.le and len(cls) > 1 and all(ord(c) < 0x80 for c in cls):  # writeAscii
            self.out += cls[:-1].encode("ascii")
            self.out.append(ord(cls[-1]) | 0x80)
        else:
            self.string(cls)

    def uses_references(self, cls: str) -> bool:
        if cls in NO_REFERENCES:
            return False
        return not (self.le and cls in self.enums)

    def reference(self, value: Any, cls: str, may_be_null: bool) -> bool:
        """``Kryo.writeReferenceOrNull``: True when the value is written (null, reference)."""
        if value is None:
            self.out.append(0)
            return True
        if not self.uses_references(cls):
            if may_be_null:
                self.out.append(1)
            return False
        key: Any = id(value)
        if cls in self.enums:  # an enum constant is one Java object
            key = ("enum", cls, value["ordinal"])
        at = self.refs.get(key)
        if at is not None:
            self.varint(at + 2)
            return True
        self.refs[key] = len(self.refs)
        self.keep.append(value)
        self.out.append(1)
        return False

    # -- values

    def any(self, value: Any, cls: str | None) -> None:
        """``Kryo.writeClassAndObject``."""
        if value is None:
            self.out.append(0)
            return
        cls = cls or _class_of(value)
        self.write_class(cls)
        self.obj(value, cls, False)

    def obj(self, value: Any, cls: str, may_be_null: bool) -> None:
        if type(value) is dict and cls not in self.enums and set(value) == {"enum", "ordinal"}:
            self.enums.add(cls)  # an enum object: its class is an enum
        if self.reference(value, cls, may_be_null):
            return
        self.depth += 1
        if self.depth > MAX_KRYO_NESTING:
            raise InvalidArgumentError(f"a value nested deeper than {MAX_KRYO_NESTING} levels")
        try:
            _writer_for(self, cls)(self, value, cls)
        finally:
            self.depth -= 1


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-be", "surrogatepass")
    return [raw[i] << 8 | raw[i + 1] for i in range(0, len(raw), 2)]


def _class_of(value: Any) -> str:
    """The Java class of a JSON-form value (its own, or the default for plain values)."""
    cls = getattr(value, "java_class", None)
    if cls:
        return str(cls)
    if isinstance(value, bool):
        return "java.lang.Boolean"
    if isinstance(value, int):
        return ("java.lang.Integer" if -(1 << 31) <= value < 1 << 31 else
                "java.lang.Long" if -(1 << 63) <= value < 1 << 63 else "java.math.BigInteger")
    if isinstance(value, float):
        return "java.lang.Double"
    if isinstance(value, str):
        return "java.lang.String"
    if isinstance(value, dict):
        if set(value) == {"enum", "ordinal"}:
            return str(value["enum"])
        return "java.util.HashMap"
    if isinstance(value, list | tuple):
        return "java.util.ArrayList"
    raise InvalidArgumentError(f"statectl cannot write {type(value).__name__} {value!r} with "
                               f"Kryo")


_Write = Callable[[_Writer, Any, str], None]


def _writer_for(w: _Writer, cls: str) -> _Write:
    if cls in w.reg.custom:
        raise InvalidArgumentError(f"a {cls} has a serializer the job registered: statectl "
                                   f"cannot write it")
    fn = (WRITERS5 if w.le else WRITERS2).get(cls)
    if fn is not None:
        return fn
    if cls.startswith("["):
        return _w_array
    if cls in w.enums:
        return _w_enum
    raise InvalidArgumentError(f"statectl cannot write a {cls} with Kryo")


def _parts(value: Any, cls: str) -> tuple[Any, ...]:
    parts = getattr(value, "parts", None)
    if not parts:
        raise InvalidArgumentError(f"{value!r} is not a decoded {cls} (statectl writes only "
                                   f"the {cls} values it read)")
    return tuple(parts)


def _w_int(w: _Writer, v: Any, cls: str) -> None:
    w.zigzag(int(v))


def _w_long(w: _Writer, v: Any, cls: str) -> None:
    w.varlong(int(v), True)


def _w_short(w: _Writer, v: Any, cls: str) -> None:
    w.fixed("h", int(v))


def _w_byte(w: _Writer, v: Any, cls: str) -> None:
    w.fixed("b", int(v))


def _w_char(w: _Writer, v: Any, cls: str) -> None:
    units = _utf16_units(str(v))
    if len(units) != 1:
        raise InvalidArgumentError(f"{v!r} is not one Java char")
    w.fixed("H", units[0])


def _w_float(w: _Writer, v: Any, cls: str) -> None:
    w.fixed("f", float(v))


def _w_double(w: _Writer, v: Any, cls: str) -> None:
    w.fixed("d", float(v))


def _w_boolean(w: _Writer, v: Any, cls: str) -> None:
    w.out.append(1 if v else 0)


def _w_string(w: _Writer, v: Any, cls: str) -> None:
    w.string(str(v))


def _w_big_integer(w: _Writer, v: Any, cls: str) -> None:
    n = int(v)
    raw = n.to_bytes(_java_bit_length(n) // 8 + 1, "big", signed=True)
    w.varint(len(raw) + 1)
    w.out += raw


def _w_big_decimal(w: _Writer, v: Any, cls: str) -> None:
    parts = getattr(v, "parts", None)
    if parts:
        unscaled, scale = parts[0], parts[1]
    else:
        d = decimal.Decimal(str(v))
        sign, digits, exp = d.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        scale = -int(exp)
    raw = unscaled.to_bytes(_java_bit_length(unscaled) // 8 + 1, "big", signed=True)
    w.varint(len(raw) + 1)
    w.out += raw
    w.zigzag(scale)


def _java_bit_length(n: int) -> int:
    """``BigInteger.bitLength``: the bits of the two's complement without the sign bit."""
    return n.bit_length() if n >= 0 else (~n).bit_length()


def _w_date(w: _Writer, v: Any, cls: str) -> None:
    w.varlong(_parts(v, cls)[0], False)


def _w_timestamp(w: _Writer, v: Any, cls: str) -> None:
    """Kryo 5: the whole seconds' milliseconds; chill (Kryo 2): ``getTime()``."""
    seconds, nanos = _parts(v, cls)
    w.varlong(seconds * 1000 + (0 if w.le else nanos // 1_000_000), False)
    w.varint(nanos)


def _w_uuid(w: _Writer, v: Any, cls: str) -> None:
    msb, lsb = getattr(v, "parts", None) or _from_typed(cls, v).parts
    if w.le:
        w.fixed("q", msb)
        w.fixed("q", lsb)
    else:
        w.varlong(msb, True)
        w.varlong(lsb, True)


def _w_text(w: _Writer, v: Any, cls: str) -> None:
    w.string(str(v))


def _w_enum(w: _Writer, v: Any, cls: str) -> None:
    w.varint(int(v["ordinal"]) + 1)


def _w_enum_set(w: _Writer, v: Any, cls: str) -> None:
    enum_class = getattr(v, "element_class", None) or (v[0]["enum"] if v else None)
    if enum_class is None:
        raise InvalidArgumentError("an empty EnumSet whose enum class statectl does not know")
    w.enums.add(enum_class)
    w.write_class(enum_class)
    w.varint(len(v))
    for e in v:
        _w_enum(w, e, enum_class)


def _w_local_date(w: _Writer, y: int, m: int, d: int) -> None:
    w.varint(y)
    w.out += bytes((m, d))


def _w_local_time(w: _Writer, h: int, mi: int, s: int, n: int) -> None:
    if n == 0:
        if s == 0:
            if mi == 0:
                w.out.append(~h & 0xFF)
            else:
                w.out += bytes((h, ~mi & 0xFF))
        else:
            w.out += bytes((h, mi, ~s & 0xFF))
    else:
        w.out += bytes((h, mi, s))
        w.varint(n)


def _w_offset(w: _Writer, seconds: int) -> None:
    if seconds % 900 == 0:
        w.fixed("b", seconds // 900)
    else:
        w.out.append(127)
        w.fixed("i", seconds)


def _w_time(kind: str) -> _Write:
    def write(w: _Writer, v: Any, cls: str) -> None:
        p = _parts(v, cls)
        if kind == "date":
            _w_local_date(w, *p)
        elif kind == "time":
            _w_local_time(w, *p)
        elif kind == "datetime":
            _w_local_date(w, *p[:3])
            _w_local_time(w, *p[3:7])
        elif kind == "instant":
            w.varlong(p[0], False)
            w.varint(p[1])
        elif kind == "duration":
            w.fixed("q", p[0])
            w.varint(p[1])
        elif kind == "offset":
            _w_offset(w, p[0])
        elif kind == "zone":
            w.string(p[0])
        elif kind == "offset_time":
            _w_local_time(w, *p[:4])
            _w_offset(w, p[4])
        elif kind == "offset_datetime":
            _w_local_date(w, *p[:3])
            _w_local_time(w, *p[3:7])
            _w_offset(w, p[7])
        elif kind == "zoned":
            _w_local_date(w, *p[:3])
            _w_local_time(w, *p[3:7])
            w.string(p[7])
        elif kind == "year":
            w.varint(p[0])
        elif kind == "year_month":
            w.varint(p[0])
            w.fixed("b", p[1])
        elif kind == "month_day":
            w.out += bytes(p)
        else:  # period
            for x in p:
                w.varint(x)
    return write


def _w_collection(w: _Writer, v: Any, cls: str, header: bool = False) -> None:
    """The mirror of :func:`_collection`."""
    items = list(v)
    if not w.le:
        if header:
            w.out.append(0)
        w.varint(len(items))
        for item in items:
            w.any(item, None)
        return
    if not items:
        w.out.append(1)
        if header:
            w.out.append(0)
        return
    classes = {_class_of(x) for x in items if x is not None}
    same = len(classes) <= 1
    w.var_flag(same, len(items) + 1)
    if header:
        w.out.append(0)
    if not same:
        for item in items:
            w.any(item, None)
        return
    if not classes:
        w.out.append(0)
        return
    element = classes.pop()
    w.write_class(element)
    has_null = any(x is None for x in items)
    if cls not in IMMUTABLE:
        w.out.append(1 if has_null else 0)
    for item in items:
        w.obj(item, element, has_null) if item is not None else w.out.append(0)


def _w_sorted_collection(w: _Writer, v: Any, cls: str) -> None:
    _w_collection(w, v, cls, True)


def _entries(v: Any) -> list[tuple[Any, Any]]:
    if isinstance(v, dict):
        return list(v.items())
    entries = []
    for e in v:
        if not isinstance(e, dict) or set(e) != {"key", "value"}:
            raise InvalidArgumentError(f"{e!r} is no map entry {{'key': .., 'value': ..}}")
        entries.append((e["key"], e["value"]))
    return entries


def _w_map(w: _Writer, v: Any, cls: str, header: bool = False) -> None:
    entries = _entries(v)
    if not w.le and header:
        w.out.append(0)
    w.varint(len(entries) + (1 if w.le else 0))
    if w.le and header:
        w.out.append(0)
    for key, value in entries:
        w.any(key, None)
        w.any(value, None)


def _w_sorted_map(w: _Writer, v: Any, cls: str) -> None:
    _w_map(w, v, cls, True)


def _w_nothing(w: _Writer, v: Any, cls: str) -> None:
    if len(v):
        raise InvalidArgumentError(f"a {cls} holds nothing, not {v!r}")


def _w_singleton(w: _Writer, v: Any, cls: str) -> None:
    if len(v) != 1:
        raise InvalidArgumentError(f"a {cls} holds one element, not {len(v)}")
    w.any(v[0], None)


def _w_singleton_map(w: _Writer, v: Any, cls: str) -> None:
    entries = _entries(v)
    if len(entries) != 1:
        raise InvalidArgumentError(f"a {cls} holds one entry, not {len(entries)}")
    w.any(entries[0][0], None)
    w.any(entries[0][1], None)


_PRIMITIVE_WRITE: dict[str, Callable[[_Writer, Any], None]] = {
    "int": lambda w, x: w.zigzag(int(x)),
    "long": lambda w, x: w.varlong(int(x), True),
    "byte": lambda w, x: w.fixed("b", int(x)),
    "short": lambda w, x: w.fixed("h", int(x)),
    "char": lambda w, x: _w_char(w, x, "char"),
    "float": lambda w, x: w.fixed("f", float(x)),
    "double": lambda w, x: w.fixed("d", float(x)),
    "boolean": lambda w, x: w.out.append(1 if x else 0),
}


def _w_array(w: _Writer, v: Any, cls: str) -> None:
    w.varint(len(v) + 1)
    primitive = PRIMITIVE_ARRAYS.get(cls)
    if primitive is not None:
        write = _PRIMITIVE_WRITE[primitive]
        for x in v:
            write(w, x)
        return
    component = component_class(cls)
    if component is None:
        raise InvalidArgumentError(f"bad array class {cls[:80]}")
    if component == "java.lang.String" or component in FINAL or component.startswith("["):
        for x in v:
            if x is None:
                w.out.append(0)
            else:
                w.obj(x, component, True)
        return
    for x in v:
        w.any(x, None)


_W_COMMON: dict[str, _Write] = {
    "java.lang.Integer": _w_int, "java.lang.Long": _w_long, "java.lang.Short": _w_short,
    "java.lang.Byte": _w_byte, "java.lang.Character": _w_char, "java.lang.Float": _w_float,
    "java.lang.Double": _w_double, "java.lang.Boolean": _w_boolean,
    "java.lang.String": _w_string, "java.math.BigInteger": _w_big_integer,
    "java.math.BigDecimal": _w_big_decimal, "java.util.Date": _w_date,
    "java.sql.Date": _w_date, "java.sql.Time": _w_date, "java.sql.Timestamp": _w_timestamp,
    "java.util.UUID": _w_uuid, "java.util.Currency": _w_text,
    "java.util.RegularEnumSet": _w_enum_set, "java.util.JumboEnumSet": _w_enum_set,
    "java.util.EnumSet": _w_enum_set,
    "java.util.Collections$EmptyList": _w_nothing, "java.util.Collections$EmptySet": _w_nothing,
    "java.util.Collections$EmptyMap": _w_nothing,
    "java.util.Collections$SingletonList": _w_singleton,
    "java.util.Collections$SingletonSet": _w_singleton,
    "java.util.Collections$SingletonMap": _w_singleton_map,
    "java.util.TreeSet": _w_sorted_collection, "java.util.PriorityQueue": _w_sorted_collection,
    "java.util.TreeMap": _w_sorted_map,
    "java.util.concurrent.ConcurrentSkipListMap": _w_sorted_map,
    **dict.fromkeys(COLLECTIONS, _w_collection), **dict.fromkeys(MAPS, _w_map),
}
WRITERS5: dict[str, _Write] = {
    **_W_COMMON,
    "java.util.Arrays$ArrayList": _w_collection, "java.net.URI": _w_text,
    "java.time.LocalDate": _w_time("date"), "java.time.LocalTime": _w_time("time"),
    "java.time.LocalDateTime": _w_time("datetime"), "java.time.Instant": _w_time("instant"),
    "java.time.Duration": _w_time("duration"), "java.time.ZoneOffset": _w_time("offset"),
    "java.time.ZoneRegion": _w_time("zone"), "java.time.OffsetTime": _w_time("offset_time"),
    "java.time.OffsetDateTime": _w_time("offset_datetime"),
    "java.time.ZonedDateTime": _w_time("zoned"), "java.time.Year": _w_time("year"),
    "java.time.YearMonth": _w_time("year_month"), "java.time.MonthDay": _w_time("month_day"),
    "java.time.Period": _w_time("period"),
}
def _w_field(w: _Writer, v: Any, index: int, cls: str, parts: tuple[Any, ...]) -> None:
    """An object field: the object read (its identity kept), else a new one of ``parts``."""
    nested = getattr(v, "nested", ())
    w.obj(nested[index] if nested else jstr("", cls, parts), cls, True)


def _wf_local_date(w: _Writer, v: Any, cls: str) -> None:
    y, m, d = _parts(v, cls)
    w.fixed("h", d)
    w.fixed("h", m)
    w.zigzag(y)


def _wf_local_time(w: _Writer, v: Any, cls: str) -> None:
    h, mi, s, n = _parts(v, cls)
    w.fixed("b", h)
    w.fixed("b", mi)
    w.zigzag(n)
    w.fixed("b", s)


def _wf_local_datetime(w: _Writer, v: Any, cls: str) -> None:
    p = _parts(v, cls)
    _w_field(w, v, 0, "java.time.LocalDate", p[:3])
    _w_field(w, v, 1, "java.time.LocalTime", p[3:7])


def _wf_seconds_nanos(w: _Writer, v: Any, cls: str) -> None:
    seconds, nanos = _parts(v, cls)
    w.zigzag(nanos)
    w.varlong(seconds, True)


def _wf_zone_offset(w: _Writer, v: Any, cls: str) -> None:
    w.zigzag(_parts(v, cls)[0])


def _wf_zone_region(w: _Writer, v: Any, cls: str) -> None:
    nested = getattr(v, "nested", ())
    w.obj(nested[0] if nested else jstr(str(v), "java.lang.String"), "java.lang.String", True)


def _wf_zoned_datetime(w: _Writer, v: Any, cls: str) -> None:
    nested = getattr(v, "nested", ())
    if not nested:
        raise InvalidArgumentError(f"{v!r}: Kryo 2 writes a ZonedDateTime's offset, which "
                                   f"statectl knows only of the values it read")
    dt, offset, zone = nested
    w.obj(dt, "java.time.LocalDateTime", True)
    w.obj(offset, "java.time.ZoneOffset", True)
    w.any(zone, None)


def _wf_offset_datetime(w: _Writer, v: Any, cls: str) -> None:
    p = _parts(v, cls)
    _w_field(w, v, 0, "java.time.LocalDateTime", p[:7])
    _w_field(w, v, 1, "java.time.ZoneOffset", p[7:])


def _wf_offset_time(w: _Writer, v: Any, cls: str) -> None:
    p = _parts(v, cls)
    _w_field(w, v, 0, "java.time.ZoneOffset", p[4:])
    _w_field(w, v, 1, "java.time.LocalTime", p[:4])


def _wf_ints(order: tuple[int, ...]) -> _Write:
    """Int fields in name order, from ``parts`` (``order``: the parts' indexes)."""
    def write(w: _Writer, v: Any, cls: str) -> None:
        p = _parts(v, cls)
        for i in order:
            w.zigzag(p[i])
    return write


def _w_chill_as_list(w: _Writer, v: Any, cls: str) -> None:
    w.varint(len(v))
    w.write_class(getattr(v, "element_class", None) or "java.lang.Object")
    for item in v:
        w.any(item, None)


WRITERS2: dict[str, _Write] = {
    **_W_COMMON,
    "java.util.Arrays$ArrayList": _w_chill_as_list,
    "java.time.LocalDate": _wf_local_date, "java.time.LocalTime": _wf_local_time,
    "java.time.LocalDateTime": _wf_local_datetime, "java.time.Instant": _wf_seconds_nanos,
    "java.time.Duration": _wf_seconds_nanos, "java.time.ZoneOffset": _wf_zone_offset,
    "java.time.ZoneRegion": _wf_zone_region, "java.time.ZonedDateTime": _wf_zoned_datetime,
    "java.time.OffsetDateTime": _wf_offset_datetime, "java.time.OffsetTime": _wf_offset_time,
    "java.time.Period": _wf_ints((2, 1, 0)), "java.time.Year": _wf_ints((0,)),
    "java.time.YearMonth": _wf_ints((1, 0)), "java.time.MonthDay": _wf_ints((1, 0)),
}
