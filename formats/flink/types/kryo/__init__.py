"""Values Flink hands to Kryo (``KryoSerializer``, every generic type): Kryo's own bytes.

Flink's ``KryoSerializer.serialize`` calls ``Kryo.writeClassAndObject`` once per value, with
references on (``checkKryoInitialized``: ``kryo.setReferences(true)``), so a value is:

- the class tag (``DefaultClassResolver.writeClass``), an unsigned varint: ``0`` null, ``1`` a
  class written by name (then the name id, a varint, and the first time a name id appears the
  class name as a Kryo string), else the registration id + 2;
- the reference marker (``Kryo.writeReferenceOrNull``) unless the class keeps no references
  (``MapReferenceResolver.useReferences``: the eight primitive wrappers, and in Kryo 5 enums):
  ``1`` a new object (it takes the next reference id), ``id + 2`` the object of an earlier id;
- the bytes of the class's Kryo serializer (``Kryo``'s default serializers; see
  :data:`KRYO_CLASSES`), in which nested values repeat the same scheme.

Name ids and reference ids start anew with each value (Kryo resets after each top-level
``writeClassAndObject``).

**Registration ids.** ``Kryo()`` registers ``int String float boolean byte char short long
double`` (ids 0..8; Kryo 2.24 also ``void``, 9; a wrapper shares its primitive's id). Flink's
``FlinkChillPackageRegistrar`` then registers ids 73..84 (:data:`FLINK_REGISTRAR`). Then
``KryoUtils.applyRegistrations`` registers, from id 85 on, the snapshot's registrations in their
order (the serializer's type class first, then the user's types, then Flink's Avro entry),
skipping the classes that already have an id (``Kryo.register(Class, int)`` keeps an existing
registration and the id is not used up). Ids 10..72 are Scala classes when Flink's Scala
Kryo instantiator is on the class path, which statectl does not model.

**Kryo 2 and Kryo 5.** Flink 1.x writes with Kryo 2.24, Flink 2.x with Kryo 5; the snapshot
(``KryoSerializerSnapshot`` version 2, same registrations) does not say which: the caller says
(``kryo_major``, from the checkpoint's Flink version; default 5). Kryo 2.24 writes fixed-width
numbers big-endian (Kryo 5 little-endian), keeps references for enums, writes collections and
maps as a plain count, has no ``java.time`` serializers (its ``FieldSerializer`` writes the JDK's
private fields, sorted by name: ported here for the java.time classes) and Flink 1.x's
registrar uses chill's serializers for ids 73..84.

**Python values.** A value of a class whose statectl type is known (:data:`TYPED_SPECS`) is that
type's value; any other is JSON-compatible (spec ``json``): ``None``/bool/int/float/str, lists,
dicts with string keys, a map with other keys a list of ``{"key": .., "value": ..}``, an enum
``{"enum": class, "ordinal": n}`` (Kryo writes the ordinal, not the name), ``java.time`` values
as their ``toString()`` text (a ``ZonedDateTime``'s offset, which Kryo 5 does not write,
from the zone's rules at that local time), ``java.util.Date`` as the ISO instant of its
milliseconds, ``BigDecimal``, ``UUID`` and ``Currency`` as text, arrays as lists. The values
statectl makes are instances of
:class:`JavaStr`, :class:`JavaInt`, :class:`JavaFloat`, :class:`JavaList` and :class:`JavaDict`,
subclasses of the JSON types that remember the Java class (and each distinct Java object is a
distinct Python object), so that :func:`kryo_encoder` writes a decoded value back byte for byte;
plain Python values are written with default classes (``Integer``/``Long``/``BigInteger``,
``Double``, ``String``, ``ArrayList``, ``HashMap``).

A class only Kryo's ``FieldSerializer`` knows (a user class: its fields are not in the snapshot),
a class with a user-registered serializer, and a class statectl has no port for raise
:class:`~statecore.errors.UnsupportedFormatError`.
"""

from __future__ import annotations

from formats.flink.types.kryo.read import KRYO_CLASSES, READERS2, READERS5, kryo_codec
from formats.flink.types.kryo.registrations import (
    FLINK_REGISTRAR,
    MAX_KRYO_NESTING,
    KryoRegistrations,
    kryo_registrations,
)
from formats.flink.types.kryo.typed import TYPED_SPECS
from formats.flink.types.kryo.values import JavaDict, JavaFloat, JavaInt, JavaList, JavaStr
from formats.flink.types.kryo.write import WRITERS2, WRITERS5, kryo_encoder

__all__ = ["FLINK_REGISTRAR", "JavaDict", "JavaFloat", "JavaInt", "JavaList", "JavaStr",
           "KRYO_CLASSES", "MAX_KRYO_NESTING", "TYPED_SPECS", "KryoRegistrations",
           "kryo_codec", "kryo_encoder", "kryo_registrations"]


def _check_tables() -> None:
    """Every class statectl reads it can write (a test pins this too)."""
    for readers, writers in ((READERS5, WRITERS5), (READERS2, WRITERS2)):
        missing = set(readers) - set(writers)
        if missing:
            raise AssertionError(f"Kryo classes read but not written: {sorted(missing)}")


_check_tables()
