"""Kryo's registration ids in Flink's ``KryoSerializer``; the class facts readers and writers share.

**Registration ids** (port of ``KryoSerializer.checkKryoInitialized``): ``Kryo()`` registers
``int String float boolean byte char short long double`` (ids 0..8; Kryo 2.24 also ``void``,
9); Flink's ``FlinkChillPackageRegistrar`` ids 73..84 (:data:`FLINK_REGISTRAR`);
``KryoUtils.applyRegistrations`` the snapshot's registrations from id 85 on
(:func:`kryo_registrations`, :class:`KryoRegistrations`).

**Class facts** that decide a layout: the classes that keep no references
(``MapReferenceResolver.useReferences``), the JDK enums, the final classes
(``ObjectArraySerializer`` writes no class per element of a final component), the primitive
arrays (``DefaultArraySerializers``), the collections and maps of Kryo's
``CollectionSerializer`` / ``MapSerializer``, and :data:`MAX_KRYO_NESTING`, the nesting bound of
both directions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from statecore.errors import UnsupportedFormatError

#: Deepest nesting of Kryo values statectl follows (a hostile value cannot exhaust the stack).
MAX_KRYO_NESTING = 64

_WRAPPERS = {"int": "java.lang.Integer", "float": "java.lang.Float",
             "boolean": "java.lang.Boolean", "byte": "java.lang.Byte",
             "char": "java.lang.Character", "short": "java.lang.Short",
             "long": "java.lang.Long", "double": "java.lang.Double"}
#: ``Kryo()``'s own registrations, ids 0.. (a primitive's id also serves its wrapper).
_KRYO_DEFAULTS = {5: ("int", "java.lang.String", "float", "boolean", "byte", "char", "short",
                      "long", "double"),
                  2: ("int", "java.lang.String", "float", "boolean", "byte", "char", "short",
                      "long", "double", "void")}
#: ``FlinkChillPackageRegistrar.registerSerializers`` (Flink 1.x and 2.x): ids 73..84; the
#: snapshot's registrations follow from id 85 (``getNextRegistrationId``).
FLINK_REGISTRAR = ("java.util.Arrays$ArrayList", "java.util.BitSet", "java.util.PriorityQueue",
                   "java.util.regex.Pattern", "java.sql.Date", "java.sql.Time",
                   "java.sql.Timestamp", "java.net.URI", "java.net.InetSocketAddress",
                   "java.util.UUID", "java.util.Locale", "java.text.SimpleDateFormat")
_REGISTRAR_FIRST = 73
_FIRST_USER_ID = _REGISTRAR_FIRST + len(FLINK_REGISTRAR)
NO_REFERENCES = frozenset(_WRAPPERS.values())
#: JDK enums statectl knows are enums (Kryo writes an enum as its ordinal; other classes
#: written by name cannot be told from an object of Kryo's FieldSerializer).
_JDK_ENUMS = frozenset({
    "java.time.DayOfWeek", "java.time.Month", "java.time.temporal.ChronoUnit",
    "java.time.temporal.ChronoField", "java.util.concurrent.TimeUnit", "java.math.RoundingMode",
    "java.time.format.TextStyle", "java.time.format.FormatStyle"})
#: Classes whose ``Class.getModifiers()`` say final, for ``ObjectArraySerializer``: an array of
#: a final component writes no class per element.
FINAL = frozenset({*_WRAPPERS.values(), "java.lang.String", "java.util.UUID",
                    "java.util.Currency", "java.time.LocalDate", "java.time.LocalTime",
                    "java.time.LocalDateTime", "java.time.Instant", "java.time.Duration",
                    "java.time.ZoneOffset", "java.time.OffsetTime", "java.time.OffsetDateTime",
                    "java.time.ZonedDateTime", "java.time.Year", "java.time.YearMonth",
                    "java.time.MonthDay", "java.time.Period", "java.net.URI", *_JDK_ENUMS})
PRIMITIVE_ARRAYS = {"[I": "int", "[J": "long", "[B": "byte", "[S": "short", "[C": "char",
                     "[F": "float", "[D": "double", "[Z": "boolean"}


# --------------------------------------------------------------------------- registrations


@dataclass(frozen=True)
class KryoRegistrations:
    """Which class each Kryo registration id stands for in one ``KryoSerializer``."""

    major: int
    by_id: dict[int, str]
    custom: frozenset[str]  # classes the user gave a serializer of their own
    ids: dict[str, int]  # class name -> registration id
    enums: frozenset[str]  # classes known to be enums (Kryo writes their ordinal)

    def class_id(self, name: str) -> int | None:
        return self.ids.get(name)


def kryo_registrations(registrations: Iterable[str], kryo_major: int = 5,
                       serializers: Mapping[str, str] | None = None,
                       default_serializers: Iterable[str] = (),
                       enums: Iterable[str] = ()) -> KryoRegistrations:
    """Port of the registrations of ``KryoSerializer.checkKryoInitialized`` (module doc).

    ``registrations``: the snapshot's registrations in order; ``serializers``: those that name
    a serializer (``KryoRegistration`` of a serializer class or instance) by class;
    ``default_serializers``: classes the user gave a default serializer; ``enums``: classes
    known to be enums besides the JDK's (e.g. from the job's ``EnumSerializer`` snapshots).
    """
    if kryo_major not in _KRYO_DEFAULTS:
        raise UnsupportedFormatError(f"Kryo {kryo_major}: statectl reads Kryo 2 and Kryo 5")
    by_id: dict[int, str] = {}
    known: set[str] = set()
    for i, name in enumerate(_KRYO_DEFAULTS[kryo_major]):
        name = _WRAPPERS.get(name, name)
        by_id[i] = name
        known.add(name)
    for i, name in enumerate(FLINK_REGISTRAR, _REGISTRAR_FIRST):
        by_id[i] = name
        known.add(name)
    next_id = _FIRST_USER_ID
    custom = set(default_serializers)
    for name in registrations:
        if serializers and name in serializers:
            custom.add(name)
        if name in known:  # Kryo.register(Class, int) keeps the registration it has
            continue
        by_id[next_id] = name
        known.add(name)
        next_id += 1
    # Flink's placeholder for Avro's GenericData$Array (no Avro on the class path) is no data.
    custom.discard("org.apache.avro.generic.GenericData$Array")
    return KryoRegistrations(kryo_major, by_id, frozenset(custom),
                             {name: i for i, name in by_id.items()},
                             frozenset(enums) | _JDK_ENUMS)


NOT_FINAL = frozenset({"java.lang.Object", "java.io.Serializable", "java.lang.Number",
                        "java.util.EnumSet", "java.util.AbstractMap", "java.util.AbstractList",
                        "java.lang.Comparable", "java.math.BigDecimal", "java.math.BigInteger",
                        "java.util.Date", "java.util.List", "java.util.Map", "java.util.Set",
                        "java.util.Collection", "java.lang.CharSequence", "java.lang.Enum",
                        "java.time.ZoneId"})


def component_class(cls: str) -> str | None:
    inner = cls[1:]
    if inner.startswith("["):
        return inner if len(inner) > 1 else None
    if inner.startswith("L") and inner.endswith(";") and len(inner) > 2:
        return inner[1:-1]
    return None


COLLECTIONS = (
    "java.util.ArrayList", "java.util.LinkedList", "java.util.HashSet",
    "java.util.LinkedHashSet", "java.util.Vector", "java.util.Stack", "java.util.ArrayDeque",
    "java.util.concurrent.CopyOnWriteArrayList", "java.util.concurrent.CopyOnWriteArraySet",
    "java.util.concurrent.ConcurrentLinkedQueue", "java.util.concurrent.ConcurrentLinkedDeque",
    "java.util.concurrent.ConcurrentSkipListSet",
    "java.util.Collections$UnmodifiableCollection", "java.util.Collections$UnmodifiableList",
    "java.util.Collections$UnmodifiableRandomAccessList", "java.util.Collections$UnmodifiableSet",
    "java.util.Collections$SynchronizedCollection", "java.util.Collections$SynchronizedList",
    "java.util.Collections$SynchronizedRandomAccessList", "java.util.Collections$SynchronizedSet",
    "java.util.ImmutableCollections$List12", "java.util.ImmutableCollections$ListN",
    "java.util.ImmutableCollections$Set12", "java.util.ImmutableCollections$SetN",
    "java.util.ImmutableCollections$SubList")
IMMUTABLE = frozenset(c for c in COLLECTIONS if "ImmutableCollections" in c)
MAPS = ("java.util.HashMap", "java.util.LinkedHashMap", "java.util.Hashtable",
         "java.util.concurrent.ConcurrentHashMap", "java.util.Collections$UnmodifiableMap",
         "java.util.Collections$SynchronizedMap", "java.util.ImmutableCollections$Map1",
         "java.util.ImmutableCollections$MapN")
