"""``statectl compat`` (issue 43): Flink's schema compatibility, ported, and the restore's verdict.

* Each rule of :mod:`formats.flink.types.compatibility` on hand-made snapshot pairs (the
  classes' own rules: POJO fields added, removed, retyped; enum constants; Kryo types and
  majors; composite outer snapshots and nested counts), and ``resolve(s, s)`` as is for every
  serializer snapshot of every Flink fixture.
* The command on the fixtures: every snapshot restores its own job (exit 0, every state as is);
  the same job written by Flink 1.18, 1.20 and 2.0 restores across them; another job's snapshot
  drops OLD's state (exit 1) with the entries and bytes lost; the JSON document against its
  schema; a statectl checkpoint is refused with a clear error.

Whether Flink itself agrees, for every kind of job change, is ``test_compat_flink.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import KEYED, run, run_json
from flink_fixtures import expected, fixture_sets, release_fixtures, require_fixtures
from test_json_contract import check

from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.types.compatibility import resolve
from formats.flink.types.snapshots import SerializerSnapshot
from formats.model.compatibility import Verdict, worst
from formats.open import open_checkpoint

BASE = "org.apache.flink.api.common.typeutils.base."
INT = SerializerSnapshot(BASE + "IntSerializer$IntSerializerSnapshot", 3)
LONG = SerializerSnapshot(BASE + "LongSerializer$LongSerializerSnapshot", 3)
STRING = SerializerSnapshot(BASE + "StringSerializer$StringSerializerSnapshot", 3)
POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
ENUM = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
LIST = "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot"
TUPLE = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"
NULLABLE = ("org.apache.flink.api.java.typeutils.runtime.NullableSerializer"
            "$NullableSerializerSnapshot")


def pojo(fields: dict[str, SerializerSnapshot], cls: str = "com.example.Event",
         subclasses: tuple[str, ...] = ()) -> SerializerSnapshot:
    return SerializerSnapshot(POJO, 2, tuple(fields.values()), outer={
        "class": cls, "fields": tuple(fields), "registered_subclasses": (),
        "subclasses": subclasses, "registered_snapshots": (), "subclass_snapshots": ()})


def enum(*constants: str, cls: str = "com.example.Color") -> SerializerSnapshot:
    return SerializerSnapshot(ENUM, 3, outer={"class": cls, "constants": constants})


def kryo(cls: str = "java.time.Instant", registrations: tuple[str, ...] = ()
         ) -> SerializerSnapshot:
    return SerializerSnapshot(KRYO, 2, outer={"class": cls, "registrations": registrations,
                                              "registration_serializers": {},
                                              "default_serializers": ()})


def test_the_same_serializer_restores_as_is() -> None:
    assert resolve(INT, INT).verdict == Verdict.AS_IS
    assert resolve(pojo({"a": INT}), pojo({"a": INT})).verdict == Verdict.AS_IS


def test_another_serializer_is_incompatible_and_named() -> None:
    found = resolve(INT, LONG)
    assert found.verdict == Verdict.INCOMPATIBLE
    assert "IntSerializer" in found.detail and "LongSerializer" in found.detail


def test_pojo_fields_added_or_removed_need_migration() -> None:
    old = pojo({"a": INT, "b": STRING})
    added = resolve(old, pojo({"a": INT, "b": STRING, "c": LONG}))
    assert added.verdict == Verdict.MIGRATION and "added: c" in added.detail
    removed = resolve(old, pojo({"a": INT}))
    assert removed.verdict == Verdict.MIGRATION and "removed: b" in removed.detail
    assert added.cited == "PojoSerializerSnapshot"


def test_a_pojo_field_of_another_type_is_incompatible_and_its_path_named() -> None:
    found = resolve(pojo({"a": INT, "amount": INT}), pojo({"a": INT, "amount": LONG, "z": INT}))
    assert found.verdict == Verdict.INCOMPATIBLE  # a field added does not hide it
    assert found.detail.startswith("Event.amount: ")


def test_another_pojo_class_is_incompatible() -> None:
    assert resolve(pojo({"a": INT}), pojo({"a": INT}, cls="com.example.Other")).verdict == \
        Verdict.INCOMPATIBLE


def test_cached_subclasses_reconfigure() -> None:
    found = resolve(pojo({"a": INT}, subclasses=("com.example.Sub",)), pojo({"a": INT}))
    assert found.verdict == Verdict.RECONFIGURED


def test_enum_constants() -> None:
    assert resolve(enum("RED", "GREEN"), enum("RED", "GREEN")).verdict == Verdict.AS_IS
    appended = resolve(enum("RED", "GREEN"), enum("RED", "GREEN", "BLUE"))
    assert appended.verdict == Verdict.RECONFIGURED and "appended" in appended.detail
    assert resolve(enum("RED", "GREEN"), enum("GREEN", "RED")).verdict == Verdict.RECONFIGURED
    removed = resolve(enum("RED", "GREEN"), enum("RED", "BLUE"))
    assert removed.verdict == Verdict.INCOMPATIBLE and "GREEN" in removed.detail
    assert resolve(enum("RED"), enum("RED", cls="com.example.Shade")).verdict == \
        Verdict.INCOMPATIBLE


def test_kryo_types_registrations_and_majors() -> None:
    assert resolve(kryo(), kryo()).verdict == Verdict.AS_IS
    assert resolve(kryo(), kryo("java.time.Duration")).verdict == Verdict.INCOMPATIBLE
    assert resolve(kryo(registrations=("a.B",)), kryo(registrations=("a.B", "a.C"))).verdict == \
        Verdict.AS_IS
    assert resolve(kryo(registrations=("a.B", "a.C")),
                   kryo(registrations=("a.C", "a.B"))).verdict == Verdict.RECONFIGURED
    across = resolve(kryo(), kryo(), kryo=(2, 5))
    assert across.verdict == Verdict.INCOMPATIBLE and "Kryo 2" in across.detail
    # a POJO field that 1.x wrote with Kryo 2: the POJO restores only as far as the field does
    field = resolve(pojo({"at": kryo()}), pojo({"at": kryo()}), kryo=(2, 5))
    assert field.verdict == Verdict.INCOMPATIBLE and field.detail.startswith("Event.at")


def test_composites_compare_their_outer_snapshot_and_nested_ones() -> None:
    assert resolve(SerializerSnapshot(LIST, 1, (INT,)),
                   SerializerSnapshot(LIST, 1, (LONG,))).verdict == Verdict.INCOMPATIBLE
    assert resolve(SerializerSnapshot(LIST, 1, (pojo({"a": INT}),)),
                   SerializerSnapshot(LIST, 1, (pojo({"a": INT, "b": INT}),))).verdict == \
        Verdict.MIGRATION
    tuple2 = {"tuple_class": "org.apache.flink.api.java.tuple.Tuple2", "version": 2}
    tuple3 = {"tuple_class": "org.apache.flink.api.java.tuple.Tuple3", "version": 2}
    assert resolve(SerializerSnapshot(TUPLE, 2, (INT, INT), outer=tuple2),
                   SerializerSnapshot(TUPLE, 2, (INT, INT, INT), outer=tuple3)).verdict == \
        Verdict.INCOMPATIBLE
    nested = resolve(SerializerSnapshot(TUPLE, 2, (INT, INT), outer=tuple2),
                     SerializerSnapshot(TUPLE, 2, (INT, INT, INT), outer=tuple2))
    assert nested.verdict == Verdict.INCOMPATIBLE and "nested" in nested.detail
    padded = resolve(SerializerSnapshot(NULLABLE, 3, (LONG,), outer={"padding": 8}),
                     SerializerSnapshot(NULLABLE, 3, (LONG,), outer={"padding": 0}))
    assert padded.verdict == Verdict.MIGRATION
    assert resolve(SerializerSnapshot(NULLABLE, 3, (LONG,), outer={"padding": 8}),
                   SerializerSnapshot(NULLABLE, 3, (LONG,), outer={"padding": 4})).verdict == \
        Verdict.AS_IS  # only whether nulls are padded counts


def test_an_unread_snapshot_is_unknown_and_a_known_refusal_outweighs_it() -> None:
    unread = SerializerSnapshot("com.example.CustomSnapshot", 1, outer={"unparsed": True})
    assert resolve(unread, unread).verdict == Verdict.UNKNOWN
    assert worst(Verdict.UNKNOWN, Verdict.INCOMPATIBLE) == Verdict.INCOMPATIBLE
    assert worst(Verdict.MIGRATION, Verdict.UNKNOWN) == Verdict.UNKNOWN


def _flink_snapshots() -> list[Path]:
    sets = [s for root in ("heap", "rocksdb", "types") for s in fixture_sets(root)]
    return [s / snap["path"] for s in sets or require_fixtures() for snap in
            expected(s)["snapshots"]]


@pytest.mark.parametrize("snapshot", _flink_snapshots(), ids=lambda p: "/".join(p.parts[-4:]))
def test_every_fixture_snapshot_restores_its_own_job(snapshot: Path) -> None:
    """OLD = NEW: every state, key and operator as is (exit 0); and every serializer snapshot of
    its headers resolves as is against itself."""
    opened = open_checkpoint(str(snapshot), decode=False, partial=True)
    assert isinstance(opened, FlinkCheckpoint)
    for op in opened.metadata.operators:
        header = opened.keyed_header(op.uid)
        for info in header.states if header else []:
            for serializer in info.serializers.values():
                assert resolve(serializer, serializer).verdict in (Verdict.AS_IS,
                                                                   Verdict.UNKNOWN)
    document = run_json("compat", str(snapshot), str(snapshot))
    check(document, "compat")
    assert document["outcome"] == "restores" and document["exit_code"] == 0
    states = [s for op in document["operators"] for s in op["states"]]
    assert states and all(s["verdict"] == "as is" for s in states), states
    assert {op["status"] for op in document["operators"]} == {"restored"}


def _release_pairs() -> list[tuple[Path, Path]]:
    """The same job's canonical savepoint as two releases wrote it (versions fixtures)."""
    pairs = []
    releases = release_fixtures()
    for job in ("java-heap", "java-rocksdb"):
        found = [next(iter(sorted((r / job / "savepoints").glob("*/canonical/*/_metadata"))),
                      None) for r in releases]
        present = [f.parent for f in found if f is not None]
        pairs += list(zip(present, present[1:], strict=False))
    return pairs


@pytest.mark.parametrize("old,new", _release_pairs(), ids=lambda p: p.parts[-6])
def test_a_newer_release_of_the_same_job_restores_it(old: Path, new: Path) -> None:
    document = run_json("compat", str(old), str(new))
    check(document, "compat")
    assert document["outcome"] == "restores", document
    assert document["old"]["releases"] and document["new"]["releases"]


def test_another_job_drops_the_old_state_and_says_how_much() -> None:
    sets = require_fixtures()
    old = sets[0] / expected(sets[0])["snapshots"][0]["path"]
    other = require_fixtures("types")[0]
    new = other / expected(other)["snapshots"][0]["path"]
    code, out, err = run("compat", str(old), str(new))
    assert code == 1, err
    assert "allowNonRestoredState" in out and "dropped" in out
    document = run_json("compat", str(old), str(new), code=1)
    dropped = [op for op in document["operators"] if op["status"] == "dropped"]
    assert dropped and all(op["bytes"] > 0 and op["new"] is None for op in dropped)
    assert document["outcome"] == "restores-dropping-state"


def test_a_statectl_checkpoint_is_refused_clearly() -> None:
    code, _, err = run("compat", KEYED, KEYED)
    assert code == 3 and "convert" in err and "Traceback" not in err
