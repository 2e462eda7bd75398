"""Flink's schema compatibility of two serializer snapshots, without the job's classes.

On restore Flink asks the new serializer's snapshot whether it reads what the old one wrote
(``TypeSerializerSnapshot.resolveSchemaCompatibility``; Flink 1.19 turned the call around,
FLIP-263, with the same answers). :func:`resolve` ports each snapshot class's rule, comparing
the two parsed snapshots (:mod:`formats.flink.types.snapshots`) where Flink compares a snapshot
with the new serializer. Where a rule needs what only the classes know (whether a class still
loads), statectl assumes the classes of the new job are on its classpath, as a restore needs.

* any snapshot: another snapshot class (another serializer) -- ``incompatible``
  (every ``resolveSchemaCompatibility`` begins with this test);
* ``SimpleTypeSerializerSnapshot`` and the other snapshots without a configuration -- as is;
* ``PojoSerializerSnapshot``: another POJO class -- incompatible; the fields both have are
  resolved in turn (one incompatible: incompatible); fields added or removed, or a field that
  needs migration -- after migration; registered subclasses not a prefix of the new ones', a
  field reconfigured, or cached subclasses in the old snapshot -- reconfigured;
* ``EnumSerializerSnapshot``: another enum -- incompatible; an old constant gone -- Flink fails
  reading the snapshot ("Probably because an enum value was removed"): incompatible; the same
  constants -- as is; else (appended, reordered) -- reconfigured;
* ``KryoSerializerSnapshot``: another type class, or values Kryo 2 wrote (Flink 1.x) restored by
  Kryo 5 (Flink 2.x) -- incompatible; the old registrations an
  ordered prefix of the new ones -- as is; else reconfigured (``mergeRightIntoLeft``);
* ``ValueSerializerSnapshot``: another ``Value`` class -- incompatible;
* ``CompositeTypeSerializerSnapshot`` (lists, maps, tuples, rows, nullable, TTL, ...): the outer
  snapshot (``resolveOuterSchemaCompatibility``: a tuple class, an array's component class, a
  case class -- incompatible if another; a null padding, a row's legacy mode, a linked list's
  null mask, CEP's previous-timestamp flag -- after migration if another), then the nested
  snapshots pairwise (``CompositeTypeSerializerUtil.constructIntermediateCompatibilityResult``:
  another count -- incompatible, else the worst);
* Flink SQL's: ``TimestampDataSerializerSnapshot`` (precision), ``DecimalSerializerSnapshot``
  (precision and scale), ``BinaryRowDataSerializerSnapshot`` (arity), ``RowDataSerializerSnapshot``,
  ``ArrayDataSerializerSnapshot``, ``MapDataSerializerSnapshot`` (the logical types) --
  incompatible if another, else as the nested snapshots.

A snapshot statectl could not parse gives :attr:`~formats.model.compatibility.Verdict.UNKNOWN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats.flink.types.snapshots import SerializerSnapshot
from formats.model.compatibility import Verdict, worst

__all__ = ["WIDENING", "Resolution", "resolve", "worst_resolution"]


@dataclass(frozen=True)
class Resolution:
    """A verdict, where it was decided (``Event.amount``), why, and the Flink class that says."""

    verdict: Verdict
    where: str = ""
    why: str = ""
    cited: str = ""
    #: an incompatible serializer whose values ``statectl migrate`` converts (value by value,
    #: checked as it writes): Kryo 2 to Kryo 5, a Kryo type to Flink's own serializer, a
    #: widening number (:data:`WIDENING`)
    migratable: bool = False

    @property
    def detail(self) -> str:
        """``where: why`` (``""`` as is)."""
        if not self.why:
            return ""
        return f"{self.where}: {self.why}" if self.where else self.why


AS_IS = Resolution(Verdict.AS_IS)

#: outer snapshot fields whose difference Flink migrates (``COMPATIBLE_AFTER_MIGRATION``)
_MIGRATED_OUTER = {"padding": "NullableSerializerSnapshot",
                   "legacy_mode": "RowSerializerSnapshot",
                   "null_mask": "LinkedListSerializerSnapshot",
                   "previous_timestamp": "NFAStateSerializerSnapshot"}
#: outer snapshot fields whose difference Flink refuses
_REFUSED_OUTER = {"tuple_class": "TupleSerializerSnapshot",
                  "class": "CompositeTypeSerializerSnapshot",
                  "cbf": "TraversableSerializerSnapshot",
                  "precision": "TimestampDataSerializerSnapshot / DecimalSerializerSnapshot",
                  "scale": "DecimalSerializerSnapshot",
                  "arity": "BinaryRowDataSerializerSnapshot", "internal": "ExternalSerializer"}


def _base(snapshot: SerializerSnapshot) -> str:
    return snapshot.short_name.split("$")[0]


def resolve(old: SerializerSnapshot, new: SerializerSnapshot, where: str = "",
            kryo: tuple[int, int] = (5, 5)) -> Resolution:
    """What Flink answers when the serializer of ``new`` restores what ``old``'s wrote.

    ``kryo``: the Kryo major of the Flink that wrote ``old`` and of the one restoring it (2 for
    Flink 1.x, 5 for 2.x): Kryo 5 does not read what Kryo 2 wrote, whatever the snapshots say.
    """
    if old.outer.get("unparsed") or new.outer.get("unparsed"):
        return Resolution(Verdict.UNKNOWN, where, f"statectl cannot read the serializer snapshot "
                          f"{(old if old.outer.get('unparsed') else new).short_name}")
    if old.class_name != new.class_name:
        return Resolution(Verdict.INCOMPATIBLE, where,
                          f"{old.describe()} -> {new.describe()}", "TypeSerializerSnapshot",
                          migratable=_convertible(old, new))
    name = _base(old)
    if name == "PojoSerializerSnapshot":
        return _pojo(old, new, where, kryo)
    if name == "EnumSerializer":
        return _enum(old, new, where)
    if name == "KryoSerializerSnapshot":
        return _kryo(old, new, where, kryo)
    if old.java_objects != new.java_objects and name in _TYPED:
        return Resolution(Verdict.INCOMPATIBLE, where, "its SQL logical types changed: "
                          f"{_types(old)} -> {_types(new)}", _TYPED[name])
    outer = _outer(old, new, where)
    if outer.verdict == Verdict.INCOMPATIBLE:
        return outer
    return worst_resolution(outer, _nested(old.nested, new.nested, where, _child_names(old), kryo))


_TYPED = {"RowDataSerializer": "RowDataSerializerSnapshot",
          "ArrayDataSerializer": "ArrayDataSerializerSnapshot",
          "MapDataSerializer": "MapDataSerializerSnapshot"}


def _types(snapshot: SerializerSnapshot) -> str:
    return ", ".join(str(t) for t in snapshot.java_objects)[:200] or "none"


#: number serializers whose every value the next one holds: what migrate widens
WIDENING = ("ByteSerializer", "ShortSerializer", "IntSerializer", "LongSerializer")
#: Flink's own serializers of what Flink 1.x handed to Kryo (2.x's POJO collection fields)
_FROM_KRYO = ("ListSerializerSnapshot", "MapSerializerSnapshot", "SetSerializerSnapshot",
              "NullableSerializer", "InstantSerializer", "LocalDateSerializer",
              "LocalDateTimeSerializer", "LocalTimeSerializer")


def _convertible(old: SerializerSnapshot, new: SerializerSnapshot) -> bool:
    """Whether migrate converts values of ``old``'s serializer to ``new``'s (see Resolution)."""
    before, after = _base(old), _base(new)
    if before == "KryoSerializerSnapshot":
        return after in _FROM_KRYO
    if before in WIDENING and after in WIDENING:
        return WIDENING.index(before) < WIDENING.index(after)
    return before == "FloatSerializer" and after == "DoubleSerializer"


def worst_resolution(*resolutions: Resolution) -> Resolution:
    """The worst; an incompatible one migratable only if every incompatible one is."""
    verdict = worst(*(r.verdict for r in resolutions))
    chosen = next((r for r in resolutions if r.verdict == verdict), AS_IS)
    if verdict == Verdict.INCOMPATIBLE and chosen.migratable:
        blocking = [r for r in resolutions if r.verdict == verdict and not r.migratable]
        return blocking[0] if blocking else chosen
    return chosen


def _outer(old: SerializerSnapshot, new: SerializerSnapshot, where: str) -> Resolution:
    keys = (set(old.outer) | set(new.outer)) - {"version", "registered_snapshots",
                                                "subclass_snapshots"}
    for key in sorted(keys):
        before, after = old.outer.get(key), new.outer.get(key)
        if before == after:
            continue
        if key == "padding" and bool(before) == bool(after):
            continue  # only whether nulls are padded counts (``isPaddingNullValue``)
        if key in _MIGRATED_OUTER:
            return Resolution(Verdict.MIGRATION, where, f"{key} {before!r} -> {after!r}",
                              _MIGRATED_OUTER[key])
        return Resolution(Verdict.INCOMPATIBLE, where, f"{key} {_short(before)} -> "
                          f"{_short(after)}", _REFUSED_OUTER.get(key, old.short_name))
    return AS_IS


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _child_names(snapshot: SerializerSnapshot) -> list[str]:
    fields = snapshot.outer.get("fields")
    if fields:
        return list(fields)
    return [f"{_base(snapshot)}[{i}]" for i in range(len(snapshot.nested))]


def _nested(old: tuple[SerializerSnapshot, ...], new: tuple[SerializerSnapshot, ...],
            where: str, names: list[str], kryo: tuple[int, int]) -> Resolution:
    if len(old) != len(new):
        return Resolution(Verdict.INCOMPATIBLE, where, f"{len(old)} nested serializers -> "
                          f"{len(new)}", "CompositeTypeSerializerUtil")
    return worst_resolution(AS_IS, *(resolve(a, b, _join(where, n), kryo)
                           for a, b, n in zip(old, new, names, strict=False)))


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _pojo(old: SerializerSnapshot, new: SerializerSnapshot, where: str,
          kryo: tuple[int, int]) -> Resolution:
    """``PojoSerializerSnapshot.resolveSchemaCompatibility`` (see the module doc)."""
    cited = "PojoSerializerSnapshot"
    pojo = old.outer.get("class")
    if pojo != new.outer.get("class"):
        return Resolution(Verdict.INCOMPATIBLE, where,
                          f"POJO class {pojo} -> {new.outer.get('class')}", cited)
    here = where or str(pojo).rsplit(".", 1)[-1]
    old_fields = dict(zip(old.outer.get("fields", ()), old.nested, strict=False))
    new_fields = dict(zip(new.outer.get("fields", ()), new.nested, strict=False))
    common = [f for f in old_fields if f in new_fields]
    fields = worst_resolution(AS_IS, *(resolve(old_fields[f], new_fields[f], _join(here, f), kryo)
                             for f in common))
    if fields.verdict >= Verdict.INCOMPATIBLE:
        return fields
    old_subs = tuple(old.outer.get("registered_subclasses", ()))
    new_subs = tuple(new.outer.get("registered_subclasses", ()))
    subclasses = dict(zip(old_subs, old.outer.get("registered_snapshots", ()), strict=False))
    new_subclasses = dict(zip(new_subs, new.outer.get("registered_snapshots", ()), strict=False))
    registered = worst_resolution(AS_IS, *(
        resolve(s, new_subclasses[c], _join(here, c.rsplit(".", 1)[-1]), kryo)
        for c, s in subclasses.items() if c in new_subclasses))
    if registered.verdict >= Verdict.INCOMPATIBLE:
        return registered
    added = [f for f in new_fields if f not in old_fields]
    removed = [f for f in old_fields if f not in new_fields]
    if added or removed:
        what = "; ".join(part for part in (
            f"field{'s' if len(added) > 1 else ''} added: {', '.join(added)}" if added else "",
            f"field{'s' if len(removed) > 1 else ''} removed: {', '.join(removed)}"
            if removed else "") if part)
        return Resolution(Verdict.MIGRATION, here, what, cited)
    if Verdict.MIGRATION in (fields.verdict, registered.verdict):
        return worst_resolution(fields, registered)
    if new_subs[:len(old_subs)] != old_subs:
        return Resolution(Verdict.RECONFIGURED, here, "registered subclasses in another order",
                          cited)
    if old.outer.get("subclasses"):
        return Resolution(Verdict.RECONFIGURED, here, "the old serializer cached non-registered "
                          "subclasses", cited)
    return worst_resolution(fields, registered)


def _enum(old: SerializerSnapshot, new: SerializerSnapshot, where: str) -> Resolution:
    """``EnumSerializer.EnumSerializerSnapshot`` (see the module doc)."""
    cited = "EnumSerializer.EnumSerializerSnapshot"
    if old.outer.get("class") != new.outer.get("class"):
        return Resolution(Verdict.INCOMPATIBLE, where, f"enum {old.outer.get('class')} -> "
                          f"{new.outer.get('class')}", cited)
    before = tuple(old.outer.get("constants", ()))
    after = tuple(new.outer.get("constants", ()))
    gone = [c for c in before if c not in after]
    if gone:
        plural = "s" if len(gone) > 1 else ""
        return Resolution(Verdict.INCOMPATIBLE, where,
                          f"enum constant{plural} removed: {', '.join(gone)}", cited)
    if before == after:
        return AS_IS
    return Resolution(Verdict.RECONFIGURED, where, "enum constants "
                      + ("appended" if after[:len(before)] == before else "reordered"), cited)


def _kryo(old: SerializerSnapshot, new: SerializerSnapshot, where: str,
          kryo: tuple[int, int]) -> Resolution:
    """``KryoSerializerSnapshot`` (see the module doc), and Kryo's major across Flink's."""
    cited = "KryoSerializerSnapshot"
    if kryo[0] != kryo[1]:
        return Resolution(Verdict.INCOMPATIBLE, where, f"{old.outer.get('class')} was written by "
                          f"Kryo {kryo[0]}, and Kryo {kryo[1]} does not read it (Flink 2.0 "
                          "moved from Kryo 2 to 5)", "KryoSerializer (Flink 2.0 release notes)",
                          migratable=old.outer.get("class") == new.outer.get("class"))
    if old.outer.get("class") != new.outer.get("class"):
        return Resolution(Verdict.INCOMPATIBLE, where, f"Kryo type {old.outer.get('class')} -> "
                          f"{new.outer.get('class')}", cited)
    for key in ("registrations", "default_serializers"):
        before, after = tuple(old.outer.get(key, ())), tuple(new.outer.get(key, ()))
        if after[:len(before)] != before:
            return Resolution(Verdict.RECONFIGURED, where,
                              f"Kryo {key.replace('_', ' ')} in another order or fewer", cited)
    return AS_IS
