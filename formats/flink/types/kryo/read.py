"""Reading Kryo's bytes: ``Kryo.readClassAndObject``, the reader tables, :func:`kryo_codec`.

Ports of ``Kryo.readClassAndObject`` / ``Kryo.readObject`` / ``readObjectOrNull``,
``DefaultClassResolver.readClass`` and ``MapReferenceResolver`` (:func:`_any`, :func:`_object`),
Kryo's ``CollectionSerializer``, ``MapSerializer`` and ``DefaultArraySerializers``, the
``Collections`` empty/singleton serializers, ``EnumSetSerializer``, Kryo 2.24's
``FieldSerializer`` of the ``java.time`` classes (Flink 1.x: the JDK's private fields, sorted by
name) and chill's ``ArraysAsListSerializer``: these read nested objects, so they live with
``readClassAndObject``. The serializers of single values are in
:mod:`~formats.flink.types.kryo.scalars`, Kryo 5's ``TimeSerializers`` in
:mod:`~formats.flink.types.kryo.java_time`. The tables :data:`READERS5` (Kryo 5, Flink 2.x) and
:data:`READERS2` (Kryo 2.24, Flink 1.x) map a class to its reader; :func:`kryo_codec` is
Flink's ``KryoSerializer`` as a :class:`~formats.flink.types.codec.Codec`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from formats.flink.java.input import DataReader, utf16_units_to_str
from formats.flink.types.codec import Codec
from formats.flink.types.kryo.input import (
    State,
    kryo_string,
    read_fixed,
    read_var_flag,
    read_varlong,
    zigzag_int,
)
from formats.flink.types.kryo.java_time import (
    local_date,
    read_duration,
    read_instant,
    read_local_datetime,
    read_local_time,
    read_month_day,
    read_offset_datetime,
    read_offset_time,
    read_period,
    read_year,
    read_year_month,
    zone_offset,
    zone_region,
    zoned_datetime,
)
from formats.flink.types.kryo.registrations import (
    COLLECTIONS,
    FINAL,
    FLINK_REGISTRAR,
    IMMUTABLE,
    MAPS,
    MAX_KRYO_NESTING,
    NO_REFERENCES,
    NOT_FINAL,
    PRIMITIVE_ARRAYS,
    component_class,
    kryo_registrations,
)
from formats.flink.types.kryo.scalars import (
    big_decimal,
    big_integer,
    read_boolean,
    read_byte,
    read_char,
    read_date,
    read_double,
    read_enum,
    read_float,
    read_int,
    read_long,
    read_short,
    read_string,
    read_timestamp,
    text_of,
    uuid,
)
from formats.flink.types.kryo.text import (
    date_text,
    duration_text,
    instant_text,
    offset_text,
    period_text,
    time_text,
    year_text,
)
from formats.flink.types.kryo.typed import TYPED_SPECS
from formats.flink.types.kryo.values import JavaDict, JavaList, JavaStr, jstr
from statecore.errors import CorruptCheckpointError, UnsupportedFormatError
from statecore.serializers import parse_type
from statecore.values import NANOS_PER_SECOND, civil_from_days, days_from_civil

# ---------------------------------------------------------------------------------- reading

_PENDING = object()
#: Most elements of a Kryo 5 collection of nulls only (they take no bytes) statectl reads.
_MAX_NULLS = 1 << 20  # a reference id taken by an object still being read


def _class(st: State) -> str | None:
    """``DefaultClassResolver.readClass``: the class of the next value (``None``: null)."""
    r = st.r
    tag = r.varint()
    if tag == 0:
        return None
    if tag == 1:
        name_id = r.varint()
        names = st.names
        if name_id < len(names):
            return names[name_id]
        if name_id > len(names):
            raise r.fail(f"Kryo class name id {name_id} before id {len(names)}")
        name = kryo_string(r)
        if not name or len(name) > 1024:
            raise r.fail("bad Kryo class name")
        names.append(name)
        return name
    name = st.reg.by_id.get(tag - 2)
    if name is None:
        raise UnsupportedFormatError(
            f"{r.where}: Kryo class id {tag - 2} is registered by no registration statectl "
            f"knows of (Scala classes, or registrations the snapshot does not list)")
    return name


def _uses_references(st: State, cls: str) -> bool:
    """``MapReferenceResolver.useReferences``: not the wrappers; Kryo 5: not enums either."""
    if cls in NO_REFERENCES:
        return False
    return not (st.le and cls in st.enums)


def _any(st: State) -> Any:
    """``Kryo.readClassAndObject``."""
    cls = _class(st)
    if cls is None:
        return None
    return _object(st, cls, False)


def _object(st: State, cls: str, may_be_null: bool) -> Any:
    """``Kryo.readObject`` (``may_be_null``: ``readObjectOrNull``) of a known class."""
    r = st.r
    read = _serializer(st, cls)  # an unknown class is refused before its bytes are read
    slot = -1
    if _uses_references(st, cls):
        marker = r.varint()
        if marker == 0 and may_be_null:
            return None
        if marker >= 2:
            at = marker - 2
            if at >= len(st.refs):
                raise r.fail(f"Kryo reference {at} to no earlier object ({len(st.refs)} read)")
            value = st.refs[at]
            if value is _PENDING:
                raise UnsupportedFormatError(f"{r.where}: a Kryo object that contains itself "
                                             f"(JSON cannot show a cycle)")
            return value
        if marker != 1:
            raise r.fail(f"Kryo reference marker {marker} where an object is expected")
        slot = len(st.refs)
        st.refs.append(_PENDING)
    elif may_be_null:
        marker = r.varint()
        if marker == 0:
            return None
        if marker != 1:
            raise r.fail(f"Kryo marker {marker} where 0 (null) or 1 is expected")
    st.depth += 1
    if st.depth > MAX_KRYO_NESTING:
        raise UnsupportedFormatError(f"{r.where}: Kryo values nested deeper than "
                                     f"{MAX_KRYO_NESTING} levels")
    try:
        value = read(st, cls)
    finally:
        st.depth -= 1
    if slot >= 0:
        st.refs[slot] = value
    return value


_Read = Callable[[State, str], Any]


def _serializer(st: State, cls: str) -> _Read:
    if cls in st.reg.custom:
        raise UnsupportedFormatError(
            f"{st.r.where}: a {cls} serialized by a Kryo serializer the job registered: its "
            f"layout is user code")
    read = (READERS5 if st.le else READERS2).get(cls)
    if read is not None:
        return read
    if cls.startswith("["):
        return _array
    if cls in st.enums:
        return read_enum
    if cls in FLINK_REGISTRAR or cls in _NOT_PORTED:
        raise UnsupportedFormatError(
            f"{st.r.where}: a {cls}, written by a Kryo serializer statectl does not port")
    raise UnsupportedFormatError(
        f"{st.r.where}: a {cls} serialized by Kryo's FieldSerializer: its fields are not in "
        f"the snapshot")


#: JDK classes with a Kryo default serializer statectl has no port of (not FieldSerializer's).
_NOT_PORTED = frozenset({"java.util.Optional", "java.util.OptionalInt", "java.util.OptionalLong",
                         "java.util.OptionalDouble", "java.lang.StringBuilder",
                         "java.lang.StringBuffer", "java.lang.Class", "java.util.Calendar",
                         "java.util.GregorianCalendar", "java.nio.charset.Charset",
                         "java.net.URL", "java.util.TimeZone", "sun.util.calendar.ZoneInfo"})


def _enum_set(st: State, cls: str) -> JavaList:
    """``EnumSetSerializer``: the enum's class, a count, each ordinal + 1."""
    enum_class = _class(st)
    if enum_class is None:
        raise st.r.fail("an EnumSet of no class")
    if enum_class not in st.enums:  # an EnumSet's class is an enum
        st.enums = st.enums | {enum_class}
    n = st.r.count("EnumSet size", 1, st.r.varint())
    out = JavaList(read_enum(st, enum_class) for _ in range(n))
    out.java_class = cls
    out.element_class = enum_class
    return out


# -- collections, maps, arrays


def _collection(st: State, cls: str, header: bool = False) -> JavaList:
    """``CollectionSerializer`` with no element class known.

    Kryo 5: size + 1 with a flag
    (``writeVarIntFlag``) "all elements of one class": then the class (null: all null), a
    "has null" boolean and the elements without class; else each with its class. Kryo 2:
    the size, then each element with its class. ``header``: a comparator (``TreeSet``,
    ``PriorityQueue``), before the size in Kryo 2, after it in Kryo 5.
    """
    r = st.r
    out = JavaList()
    out.java_class = cls
    if not st.le:
        if header:
            _comparator(st, cls)
        n = r.count(f"{cls} size", 1, r.varint())
        for _ in range(n):
            out.append(_any(st))
        return out
    same, n = read_var_flag(r)
    if n == 0:
        raise r.fail(f"a null {cls} inside its own bytes")
    n -= 1
    if header:
        _comparator(st, cls)
    if n == 0:
        return out
    if not same:
        r.count(f"{cls} size", 1, n)
        for _ in range(n):
            out.append(_any(st))
        return out
    element = _class(st)
    if element is None:  # all null: no byte per element
        if n > _MAX_NULLS:
            raise UnsupportedFormatError(f"{r.where}: a {cls} of {n} nulls, more than the "
                                         f"{_MAX_NULLS} statectl reads")
        out.extend([None] * n)
        return out
    r.count(f"{cls} size", 1, n)
    # JdkImmutable*Serializer: setElementsCanBeNull(false), no "has null" byte
    has_null = cls not in IMMUTABLE and r.u8() != 0
    for _ in range(n):
        out.append(_object(st, element, has_null))
    return out


def _sorted_collection(st: State, cls: str) -> JavaList:
    return _collection(st, cls, True)


def _comparator(st: State, cls: str) -> None:
    if _any(st) is not None:
        raise UnsupportedFormatError(f"{st.r.where}: a {cls} with a comparator: statectl reads "
                                     f"only the natural order (comparator null)")


def _map(st: State, cls: str, header: bool = False) -> JavaDict | JavaList:
    """``MapSerializer`` with no key or value class known.

    Kryo 5 size + 1, Kryo 2 the size, then each key and value with its class. ``header``: a
    comparator (``TreeMap``), before the size in Kryo 2, after it in Kryo 5.
    """
    r = st.r
    if not st.le and header:
        _comparator(st, cls)
    n = r.varint()
    if st.le:
        if n == 0:
            raise r.fail(f"a null {cls} inside its own bytes")
        n -= 1
        if header:
            _comparator(st, cls)
    r.count(f"{cls} size", 2, n)
    entries = [(_any(st), _any(st)) for _ in range(n)]
    return _map_value(cls, entries)


def _map_value(cls: str, entries: list[tuple[Any, Any]]) -> JavaDict | JavaList:
    if all(type(k) is JavaStr and k.java_class == "java.lang.String" for k, _ in entries):
        d = JavaDict(entries)
        if len(d) == len(entries):
            d.java_class = cls
            return d
    out = JavaList({"key": k, "value": v} for k, v in entries)
    out.java_class = cls
    return out


def _sorted_map(st: State, cls: str) -> JavaDict | JavaList:
    return _map(st, cls, True)


def _nothing(kind: str) -> _Read:
    def read(st: State, cls: str) -> JavaDict | JavaList:
        out: JavaDict | JavaList = JavaDict() if kind == "map" else JavaList()
        out.java_class = cls
        return out
    return read


def _singleton(st: State, cls: str) -> JavaList:
    out = JavaList([_any(st)])
    out.java_class = cls
    return out


def _singleton_map(st: State, cls: str) -> JavaDict | JavaList:
    key = _any(st)
    return _map_value(cls, [(key, _any(st))])


def _array(st: State, cls: str) -> JavaList:
    """``DefaultArraySerializers``: length + 1 (0: null), then the elements.

    Primitives packed, a final component's objects without class (``writeObjectOrNull``),
    others each with its class.
    """
    r = st.r
    n = r.varint()
    if n == 0:
        raise r.fail(f"a null {cls} inside its own bytes")
    n -= 1
    out = JavaList()
    out.java_class = cls
    primitive = PRIMITIVE_ARRAYS.get(cls)
    if primitive is not None:
        out.element_class = primitive
        r.count(f"{cls} length", 1, n)
        read = _PRIMITIVE_READ[primitive]
        out.extend(read(st) for _ in range(n))
        return out
    component = component_class(cls)
    if component is None:
        raise r.fail(f"bad array class {cls[:80]}")
    out.element_class = component
    r.count(f"{cls} length", 1, n)
    if component == "java.lang.String" or component in FINAL or component.startswith("["):
        for _ in range(n):
            out.append(_object(st, component, True))
        return out
    if component not in NOT_FINAL:
        raise UnsupportedFormatError(
            f"{r.where}: an array of {component}: whether Kryo writes its elements' classes "
            f"depends on whether {component} is final, which statectl does not know")
    for _ in range(n):
        out.append(_any(st))
    return out


_PRIMITIVE_READ: dict[str, Callable[[State], Any]] = {
    "int": lambda st: zigzag_int(st.r),
    "long": lambda st: read_varlong(st.r, True),
    "byte": lambda st: st.r.i8(),
    "short": lambda st: read_fixed(st, "h", 2),
    "char": lambda st: utf16_units_to_str([read_fixed(st, "H", 2)]),
    "float": lambda st: read_fixed(st, "f", 4),
    "double": lambda st: read_fixed(st, "d", 8),
    "boolean": lambda st: st.r.u8() != 0,
}


_COMMON: dict[str, _Read] = {
    "java.lang.Integer": read_int, "java.lang.Long": read_long, "java.lang.Short": read_short,
    "java.lang.Byte": read_byte, "java.lang.Character": read_char, "java.lang.Float": read_float,
    "java.lang.Double": read_double, "java.lang.Boolean": read_boolean,
    "java.lang.String": read_string,
    "java.math.BigInteger": big_integer, "java.math.BigDecimal": big_decimal,
    "java.util.Date": read_date, "java.sql.Date": read_date, "java.sql.Time": read_date,
    "java.sql.Timestamp": read_timestamp, "java.util.UUID": uuid, "java.util.Currency": text_of,
    "java.util.RegularEnumSet": _enum_set, "java.util.JumboEnumSet": _enum_set,
    # a job's registration of EnumSet covers both (Kryo's DefaultClassResolver.getRegistration)
    "java.util.EnumSet": _enum_set,
    "java.util.Collections$EmptyList": _nothing("list"),
    "java.util.Collections$EmptySet": _nothing("list"),
    "java.util.Collections$EmptyMap": _nothing("map"),
    "java.util.Collections$SingletonList": _singleton,
    "java.util.Collections$SingletonSet": _singleton,
    "java.util.Collections$SingletonMap": _singleton_map,
    "java.util.TreeSet": _sorted_collection, "java.util.PriorityQueue": _sorted_collection,
    "java.util.TreeMap": _sorted_map, "java.util.concurrent.ConcurrentSkipListMap": _sorted_map,
    **dict.fromkeys(COLLECTIONS, _collection), **dict.fromkeys(MAPS, _map),
}
#: Kryo 5 (Flink 2.x): the common serializers, java.time, Optional, Flink's registrar's.
READERS5: dict[str, _Read] = {
    **_COMMON,
    "java.util.Arrays$ArrayList": _collection,  # ArraysAsListSerializer (a collection)
    "java.net.URI": text_of,
    "java.time.LocalDate": local_date, "java.time.LocalTime": read_local_time,
    "java.time.LocalDateTime": read_local_datetime, "java.time.Instant": read_instant,
    "java.time.Duration": read_duration, "java.time.ZoneOffset": zone_offset,
    "java.time.ZoneRegion": zone_region, "java.time.OffsetTime": read_offset_time,
    "java.time.OffsetDateTime": read_offset_datetime, "java.time.ZonedDateTime": zoned_datetime,
    "java.time.Year": read_year, "java.time.YearMonth": read_year_month,
    "java.time.MonthDay": read_month_day, "java.time.Period": read_period,
}
# -- java.time in Kryo 2.24: its FieldSerializer (the JDK's fields, sorted by name; ints and
#    longs zig-zag varints, shorts big-endian; a field of a final class with a reference
#    marker, of ZonedDateTime's ZoneId with its class). JDK 8..21 name the fields alike.


def _field(st: State, cls: str) -> JavaStr:
    """A non-null object field (``ObjectField.write`` of a final class: with a marker)."""
    value = _object(st, cls, True)
    if type(value) is not JavaStr or value.java_class != cls:
        raise st.r.fail(f"a {cls} field that is {value!r}")
    return value


def _nested(text: str, cls: str, parts: tuple[Any, ...], nested: tuple[Any, ...]) -> JavaStr:
    value = jstr(text, cls, parts)
    value.nested = nested  # the field objects, whose identity Kryo's references keep
    return value


def _f_local_date(st: State, cls: str) -> JavaStr:
    """``LocalDate``'s fields ``day``, ``month`` (shorts), ``year`` (int)."""
    day, month = read_fixed(st, "h", 2), read_fixed(st, "h", 2)
    year = zigzag_int(st.r)
    if not 1 <= month <= 12 or not 1 <= day <= 31 or civil_from_days(
            days_from_civil(year, month, day)) != (year, month, day):
        raise st.r.fail(f"{year}-{month}-{day} is not a date")
    return jstr(date_text(year, month, day), cls, (year, month, day))


def _f_local_time(st: State, cls: str) -> JavaStr:
    """``LocalTime``'s fields ``hour``, ``minute`` (bytes), ``nano`` (int), ``second``."""
    r = st.r
    hour, minute = r.i8(), r.i8()
    nano = zigzag_int(r)
    second = r.i8()
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60
            and 0 <= nano < NANOS_PER_SECOND):
        raise r.fail(f"{hour}:{minute}:{second}.{nano} is not a time of day")
    p = (hour, minute, second, nano)
    return jstr(time_text(*p), cls, p)


def _f_local_datetime(st: State, cls: str) -> JavaStr:
    """``LocalDateTime``'s fields ``date``, ``time``."""
    d, t = _field(st, "java.time.LocalDate"), _field(st, "java.time.LocalTime")
    return _nested(f"{d}T{t}", cls, d.parts + t.parts, (d, t))


def _f_seconds_nanos(what: str) -> _Read:
    """``Instant``'s and ``Duration``'s fields ``nanos`` (int), ``seconds`` (long)."""
    def read(st: State, cls: str) -> JavaStr:
        nanos = zigzag_int(st.r)
        seconds = read_varlong(st.r, True)
        if not 0 <= nanos < NANOS_PER_SECOND:
            raise st.r.fail(f"{what} nanoseconds {nanos}")
        text = (instant_text if what == "Instant" else duration_text)(seconds, nanos)
        return jstr(text, cls, (seconds, nanos))
    return read


def _f_zone_offset(st: State, cls: str) -> JavaStr:
    """``ZoneOffset``'s field ``totalSeconds`` (``id`` is transient)."""
    seconds = zigzag_int(st.r)
    if abs(seconds) > 18 * 3600:
        raise st.r.fail(f"a zone offset of {seconds} s")
    return jstr(offset_text(seconds), cls, (seconds,))


def _f_zone_region(st: State, cls: str) -> JavaStr:
    """``ZoneRegion``'s field ``id`` (``rules`` is transient)."""
    zone = _field(st, "java.lang.String")
    if not zone:
        raise st.r.fail("a ZoneId without id")
    return _nested(zone, cls, (str(zone),), (zone,))


def _f_zoned_datetime(st: State, cls: str) -> JavaStr:
    """``ZonedDateTime``'s fields ``dateTime``, ``offset``, ``zone``.

    The zone is a ``ZoneId`` field, written with its class: often the offset object itself,
    then a reference.
    """
    dt = _field(st, "java.time.LocalDateTime")
    offset = _field(st, "java.time.ZoneOffset")
    zone = _any(st)
    if type(zone) is not JavaStr or zone.java_class not in ("java.time.ZoneRegion",
                                                            "java.time.ZoneOffset"):
        raise st.r.fail(f"a ZonedDateTime's zone {zone!r}")
    shown = f"{dt}{offset}" + ("" if str(zone) == str(offset) else f"[{zone}]")
    return _nested(shown, cls, (*dt.parts, str(zone)), (dt, offset, zone))


def _f_offset_datetime(st: State, cls: str) -> JavaStr:
    """``OffsetDateTime``'s fields ``dateTime``, ``offset``."""
    dt = _field(st, "java.time.LocalDateTime")
    offset = _field(st, "java.time.ZoneOffset")
    return _nested(f"{dt}{offset}", cls, (*dt.parts, *offset.parts), (dt, offset))


def _f_offset_time(st: State, cls: str) -> JavaStr:
    """``OffsetTime``'s fields ``offset``, ``time``."""
    offset = _field(st, "java.time.ZoneOffset")
    t = _field(st, "java.time.LocalTime")
    return _nested(f"{t}{offset}", cls, (*t.parts, *offset.parts), (offset, t))


def _f_ints(names: str) -> _Read:
    """Int fields (zig-zag varints) in name order.

    ``Period`` (``days months years``), ``Year`` (``year``), ``YearMonth`` (``month year``),
    ``MonthDay`` (``day month``).
    """
    def read(st: State, cls: str) -> JavaStr:
        values = dict(zip(names.split(), (zigzag_int(st.r) for _ in names.split()),
                          strict=True))
        if names == "days months years":
            p = (values["years"], values["months"], values["days"])
            return jstr(period_text(*p), cls, p)
        if names == "year":
            return jstr(str(values["year"]), cls, (values["year"],))
        if names == "month year":
            year, month = values["year"], values["month"]
            if not 1 <= month <= 12:
                raise st.r.fail(f"month {month}")
            return jstr(f"{year_text(year, False)}-{month:02d}", cls, (year, month))
        month, day = values["month"], values["day"]
        if not 1 <= month <= 12 or not 1 <= day <= 31:
            raise st.r.fail(f"--{month}-{day} is not a month-day")
        return jstr(f"--{month:02d}-{day:02d}", cls, (month, day))
    return read


def _chill_as_list(st: State, cls: str) -> JavaList:
    """Chill's ``ArraysAsListSerializer`` (Flink 1.x, id 73).

    The length, the backing array's component class, each element with its class.
    """
    r = st.r
    n = r.count(f"{cls} length", 1, r.varint())
    component = _class(st)
    if component is None:
        raise r.fail("an Arrays.asList of no component class")
    out = JavaList(_any(st) for _ in range(n))
    out.java_class = cls
    out.element_class = component
    return out


#: Kryo 2.24 (Flink 1.x): chill's registrar serializers; java.time by its FieldSerializer.
READERS2: dict[str, _Read] = {
    **_COMMON,
    "java.util.Arrays$ArrayList": _chill_as_list,
    "java.time.LocalDate": _f_local_date, "java.time.LocalTime": _f_local_time,
    "java.time.LocalDateTime": _f_local_datetime,
    "java.time.Instant": _f_seconds_nanos("Instant"),
    "java.time.Duration": _f_seconds_nanos("Duration"),
    "java.time.ZoneOffset": _f_zone_offset, "java.time.ZoneRegion": _f_zone_region,
    "java.time.ZonedDateTime": _f_zoned_datetime,
    "java.time.OffsetDateTime": _f_offset_datetime, "java.time.OffsetTime": _f_offset_time,
    "java.time.Period": _f_ints("days months years"), "java.time.Year": _f_ints("year"),
    "java.time.YearMonth": _f_ints("month year"), "java.time.MonthDay": _f_ints("day month"),
}
#: Every class statectl decodes from Kryo's bytes, per Kryo major version.
KRYO_CLASSES: dict[int, frozenset[str]] = {5: frozenset(READERS5), 2: frozenset(READERS2)}


def kryo_codec(class_name: str, registrations: Iterable[str] = (), kryo_major: int = 5,
               serializers: Mapping[str, str] | None = None,
               default_serializers: Iterable[str] = (), enums: Iterable[str] = ()) -> Codec:
    """``KryoSerializer`` of ``class_name`` (the snapshot's type class).

    ``registrations``: the snapshot's, in order; ``kryo_major``: the Kryo of the Flink that
    wrote the values (5: Flink 2.x, 2: Flink 1.x).

    The spec is :data:`TYPED_SPECS`' for the declared class, ``kryo<class>`` where the declared
    class itself is one statectl cannot decode (``read_all`` then raises: the reader keeps the
    value as an undecodable marker with its bytes), else ``json``. ``read`` finds the value's
    end (the heap format) or raises :class:`~statecore.errors.UnsupportedFormatError` naming
    the class it cannot decode.
    """
    reg = kryo_registrations(registrations, kryo_major, serializers, default_serializers,
                             enums)
    readers = READERS5 if kryo_major >= 5 else READERS2
    typed = TYPED_SPECS.get(class_name)
    if typed is not None and class_name not in readers:
        typed = None
    decodable = (class_name in readers or class_name in reg.enums or class_name.startswith("[")
                 or class_name in _INTERFACES) and class_name not in reg.custom
    spec = typed[0] if typed else "json" if decodable else f"kryo<{class_name}>"

    def read(r: DataReader) -> Any:
        st = State(r, reg)
        value = _any(st)
        if typed is None or value is None:
            return value
        actual = getattr(value, "java_class", None)
        if actual is None and class_name in _PLAIN:
            actual = _PLAIN[class_name] if isinstance(value, _PLAIN_TYPES[class_name]) else None
        if actual != class_name:
            raise UnsupportedFormatError(f"{r.where}: a Kryo value of class {actual} where a "
                                         f"{class_name} is declared")
        return typed[1](value)

    def read_delimited(r: DataReader) -> Any:
        """A value Flink delimited: it must fill the bytes, in this Kryo's layout."""
        start = r.pos
        try:
            value = read(r)
        except CorruptCheckpointError as exc:
            raise UnsupportedFormatError(
                f"{r.where}: Flink's {r.end - start} bytes of a Kryo value ({class_name}) do not "
                f"fit Kryo {kryo_major}'s layout ({exc}); a Flink 1.x job writes Kryo 2's, "
                f"Flink 2.x Kryo 5's") from exc
        if not r.at_end():
            raise UnsupportedFormatError(
                f"{r.where}: Kryo {kryo_major}'s layout of a {class_name} ends after "
                f"{r.pos - start} of the {r.end - start} bytes Flink wrote (a Flink 1.x job "
                f"writes Kryo 2's layout, Flink 2.x Kryo 5's)")
        return value

    if decodable:
        return Codec(read, spec, -1, f"Kryo {class_name}", _key_hash(class_name, spec),
                     read_all=read_delimited)

    def read_all(r: DataReader) -> bytes:
        """No decoder: the value is undecodable (its bytes are kept by the reader's marker)."""
        raise UnsupportedFormatError(
            f"{r.where}: a {class_name} serialized by Kryo's FieldSerializer (or a serializer "
            f"the job registered): its fields are not in the snapshot")

    return Codec(read, spec, -1, f"Kryo {class_name}", read_all=read_all)


#: Declared classes whose ``hashCode`` is their statectl spec's Java hash (so a Kryo key of
#: theirs can be placed in its key group); ``UUID`` has its own.
_SPEC_HASHED = frozenset({
    "java.lang.String", "java.lang.Integer", "java.lang.Long", "java.lang.Short",
    "java.lang.Byte", "java.lang.Boolean", "java.lang.Float", "java.lang.Double",
    "java.lang.Character", "java.math.BigInteger", "java.math.BigDecimal", "java.time.LocalDate",
    "java.time.LocalTime", "java.time.LocalDateTime", "java.time.Instant"})


def _uuid_hash(value: str) -> int:
    """``UUID.hashCode``: the two halves of ``msb ^ lsb`` xor-ed, as an int."""
    n = int(value.replace("-", ""), 16)
    hilo = (n >> 64) ^ (n & (1 << 64) - 1)
    h = ((hilo >> 32) ^ hilo) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _key_hash(class_name: str, spec: str) -> Callable[[Any], int] | None:
    if class_name == "java.util.UUID":
        return _uuid_hash
    if class_name in _SPEC_HASHED:
        return parse_type(spec).java_hash
    return None


_PLAIN = {"java.lang.Integer": "java.lang.Integer", "java.lang.Double": "java.lang.Double",
          "java.lang.Boolean": "java.lang.Boolean"}
_PLAIN_TYPES: dict[str, type | tuple[type, ...]] = {
    "java.lang.Integer": int, "java.lang.Double": float, "java.lang.Boolean": bool}
#: Declared classes Kryo writes values of any class for (the classes are in the bytes).
_INTERFACES = NOT_FINAL | {"java.lang.Iterable", "java.util.Queue", "java.util.Deque",
                            "java.util.SortedMap", "java.util.SortedSet",
                            "java.util.NavigableMap", "java.util.NavigableSet",
                            "java.time.temporal.Temporal", "java.time.temporal.TemporalAmount"}
