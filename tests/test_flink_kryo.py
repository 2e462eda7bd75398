"""Kryo's bytes as Flink's ``KryoSerializer`` writes them (:mod:`formats.flink.types.kryo`).

Ground truth: ``tests/flink_jobs/KryoVectors.java`` serializes values with Flink's own
``KryoSerializer`` on Flink 2.3 (Kryo 5, the Flink venv's jars) and on Flink 1.20 (Kryo 2.24,
``tests/flink_versions.py``) and prints each value's snapshot, bytes and expected JSON form.
Every value decodes to that JSON form (``read`` stops at the value's end before trailing junk,
``read_all`` uses exactly its bytes) and encodes back to Flink's bytes. Hostile bytes raise
statectl errors. The ``uuid`` state of the types fixtures decodes to its UUIDs.
"""

from __future__ import annotations

import datetime
import decimal
import fcntl
import hashlib
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.java.input import DataReader
from formats.flink.types.codecs import codec_for
from formats.flink.types.kryo import (
    KRYO_CLASSES,
    MAX_KRYO_NESTING,
    JavaStr,
    kryo_codec,
    kryo_encoder,
)
from formats.flink.types.snapshots import read_versioned_snapshot
from statecore.errors import CorruptCheckpointError, StatectlError, UnsupportedFormatError
from statecore.values import Instant, LocalDateTime, LocalTime

SOURCE = Path(__file__).resolve().parent / "flink_jobs" / "KryoVectors.java"
FIXTURES = Path("/work/shared/flink-fixtures-types")

Vector = tuple[str, bytes, bytes, Any]
#: Per vector name, the value's Java ``hashCode()`` (from the same run).
HASHES: dict[str, int] = {}

#: Values Flink 1.x hands to serializers statectl does not port: undecodable there.
KRYO2_UNDECODABLE: tuple[str, ...] = ()


def _compile_and_run(lib: Path, tag: str) -> list[Vector]:
    from flink_restore import JVM_OPTIONS, FlinkUnavailable, cache_root

    hasher = hashlib.sha256(SOURCE.read_bytes())
    for jar in sorted(lib.glob("*.jar")):
        hasher.update(f"{jar.name}:{jar.stat().st_size}".encode())
    root = cache_root() / f"kryo-vectors-{tag}-{hasher.hexdigest()[:16]}"
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".kryo-vectors.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "KryoVectors.class").is_file():
            root.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(["javac", "-nowarn", "-d", str(root), "-cp", f"{lib}/*",
                                   str(SOURCE)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise FlinkUnavailable(f"javac failed:\n{done.stdout}{done.stderr}")
    done = subprocess.run(["java", *JVM_OPTIONS, "--add-opens", "java.base/java.time=ALL-UNNAMED",
                           "-cp", f"{lib}/*:{root}", "KryoVectors"],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    vectors = []
    for line in done.stdout.splitlines():
        if line.startswith("VECTOR\t"):
            _, name, snapshot, value, expected, hashed = line.split("\t")
            if hashed:
                HASHES[name] = int(hashed)
            vectors.append((name, bytes.fromhex(snapshot), bytes.fromhex(value),
                            json.loads(expected)))
    return vectors


@pytest.fixture(scope="module")
def kryo5_vectors() -> list[Vector]:
    from flink_restore import FlinkUnavailable, build

    try:
        b = build()
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    return _compile_and_run(b.lib, "2.3")


@pytest.fixture(scope="module")
def kryo2_vectors() -> list[Vector]:
    from flink_restore import FlinkUnavailable
    from flink_versions import pyflink_lib

    try:
        lib = pyflink_lib()
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    return _compile_and_run(lib, "1.20")


def _undecodable(expected: Any) -> str | None:
    """The class of the first ``{"undecodable": class}`` in an expected value."""
    if isinstance(expected, dict):
        if set(expected) == {"undecodable"}:
            return str(expected["undecodable"])
        expected = list(expected.values())
    if isinstance(expected, list):
        for item in expected:
            found = _undecodable(item)
            if found:
                return found
    return None


def _codecs(snapshot_bytes: bytes, major: int) -> tuple[str, Any, Any, Any, Any]:
    snapshot = read_versioned_snapshot(DataReader(snapshot_bytes, "snapshot"))
    outer = snapshot.outer
    args = dict(registrations=outer["registrations"], kryo_major=major,
                serializers=outer["registration_serializers"],
                default_serializers=outer["default_serializers"])
    declared = outer["class"]
    as_json = dict(args)
    return (declared, kryo_codec(declared, **args), kryo_encoder(declared, **args),
            kryo_codec("java.lang.Object", **as_json), kryo_encoder("java.lang.Object", **as_json))


def _check(vectors: list[Vector], major: int, undecodable: tuple[str, ...] = ()) -> list[str]:
    wrong = []
    for name, snapshot_bytes, data, expected in vectors:
        declared, codec, encoder, json_codec, json_encoder = _codecs(snapshot_bytes, major)
        missing = _undecodable(expected) or (name if name.startswith(undecodable) else None)
        if missing:
            with pytest.raises(UnsupportedFormatError):
                json_codec.read(DataReader(data + b"\x07junk", name))
            if codec.spec.startswith("kryo<"):  # the reader keeps it as a marker with its bytes
                with pytest.raises(UnsupportedFormatError, match="FieldSerializer"):
                    codec.read_delimited(DataReader(data, name))
            continue
        # the JSON form: read stops at the value's end, read_all uses all bytes
        r = DataReader(data + b"\x07junk", name)
        value = json_codec.read(r)
        if r.pos != len(data):
            wrong.append(f"{name}: read stopped at {r.pos}, the value has {len(data)} bytes")
        shown = json.loads(json.dumps(value))
        if shown != expected:
            wrong.append(f"{name}: decoded {shown!r}, Flink says {expected!r}")
        out = bytearray()
        json_encoder(out, value)
        if bytes(out) != data:
            wrong.append(f"{name}: statectl wrote {bytes(out).hex()}, Flink {data.hex()}")
        # the declared class's own spec (a typed one where it has one)
        r = DataReader(data, name)
        typed = codec.read_delimited(r)
        assert r.at_end(), name
        out = bytearray()
        encoder(out, typed)
        if bytes(out) != data:
            wrong.append(f"{name} ({codec.spec}): statectl wrote {bytes(out).hex()}, "
                         f"Flink {data.hex()}")
        if codec.spec != "json" and typed is not None and not _same(typed, expected):
            wrong.append(f"{name}: {codec.spec} value {typed!r}, Flink says {expected!r}")
    return wrong


def _same(typed: Any, expected: Any) -> bool:
    """Whether a typed value is the one whose JSON form (Java's text) Flink printed."""
    if isinstance(typed, LocalTime | LocalDateTime | Instant):
        return bool(typed == type(typed).parse(expected))
    if isinstance(typed, decimal.Decimal | JavaStr):
        return str(typed) == expected
    if isinstance(typed, datetime.date):
        return typed.isoformat() == expected
    return bool(typed == expected)


def test_kryo5_vectors_of_flink_2_3_decode_and_encode_back(kryo5_vectors: list[Vector]
                                                           ) -> None:
    assert len(kryo5_vectors) > 100
    assert not (wrong := _check(kryo5_vectors, 5)), "\n".join(wrong)


def test_kryo2_vectors_of_flink_1_20_decode_and_encode_back(kryo2_vectors: list[Vector]
                                                            ) -> None:
    assert len(kryo2_vectors) > 100
    assert not (wrong := _check(kryo2_vectors, 2, KRYO2_UNDECODABLE)), "\n".join(wrong)


def test_specs_of_declared_classes(kryo5_vectors: list[Vector]) -> None:
    """A declared class with a statectl type gets it; others ``json``; a user class stays
    ``kryo<class>`` and its bytes are kept where Flink delimits them."""
    specs = {name: _codecs(s, 5)[1].spec for name, s, _d, _e in kryo5_vectors}
    assert specs["LocalDate"] == "date32"
    assert specs["LocalTime nanos"] == "local_time"
    assert specs["LocalDateTime"] == "local_datetime"
    assert specs["Instant"] == "timestamp[ns]"
    assert specs["Date"] == "timestamp[ms]"
    assert specs["sql.Timestamp"] == "timestamp[ns]"
    assert specs["UUID"] == "string"
    assert specs["BigDecimal"] == "decimal"
    assert specs["BigInteger"] == "bigint"
    assert specs["Integer min"] == "int32"
    assert specs["ZonedDateTime Kathmandu"] == "json"
    assert specs["HashMap"] == "json"
    assert specs["enum"] == "json"
    assert specs["user class"] == "kryo<KryoVectors$Point>"


def test_user_class_error_names_the_class(kryo5_vectors: list[Vector]) -> None:
    vectors = {name: (s, d) for name, s, d, _e in kryo5_vectors}
    snapshot, data = vectors["user class in a list"]
    with pytest.raises(UnsupportedFormatError, match=r"KryoVectors\$Point serialized by Kryo's "
                                                     r"FieldSerializer"):
        _codecs(snapshot, 5)[1].read(DataReader(data, "t"))


def test_typed_values(kryo5_vectors: list[Vector]) -> None:
    vectors = {name: (s, d) for name, s, d, _e in kryo5_vectors}

    def typed(name: str) -> Any:
        snapshot, data = vectors[name]
        return _codecs(snapshot, 5)[1].read(DataReader(data, name))

    assert typed("LocalDate") == datetime.date(2024, 2, 29)
    assert typed("LocalTime nanos") == LocalTime(86_399_999_999_999)
    assert typed("Instant before 1970") == Instant(-1)
    assert typed("sql.Timestamp") == Instant(1_700_000_000_123_456_789)
    assert typed("Date") == Instant.of_epoch_milli(1_700_000_000_123)
    assert typed("BigDecimal") == decimal.Decimal("-12.50")
    assert str(typed("BigDecimal exponent")) == "1.5E+4"
    assert typed("UUID") == "b637b17a-f08a-3ed8-850c-18cccde915da"
    assert typed("UUID null") is None
    assert typed("Long min") == -(1 << 63)


# -- the real fixture --------------------------------------------------------------------------


def test_uuid_state_of_the_types_fixture_decodes() -> None:
    """README: ``uuid`` of key ``k`` is ``UUID.nameUUIDFromBytes(k UTF-8 bytes)``; every
    snapshot of both sets (heap: values Kryo does not delimit; RocksDB, canonical)."""
    from formats.open import open_checkpoint

    sets = [FIXTURES / name for name in ("types-mp128", "types-mp128-rocksdb")]
    if not all(s.is_dir() for s in sets):
        pytest.fail(f"no types fixtures in {FIXTURES}", pytrace=False)
    for fixture_set in sets:
        expected = json.loads((fixture_set / "expected.json").read_text())
        for snap in expected["snapshots"]:
            checkpoint = open_checkpoint(str(fixture_set / snap["path"]))
            op = checkpoint.operator("pojo-keyed")
            state = next(s for s in op.states if s.name == "uuid")
            assert state.value_type == "string"
            found = 0
            for _kg, key, _ns, value in checkpoint.keyed_entries(  # type: ignore[attr-defined]
                    "pojo-keyed", "uuid"):
                assert value == _name_uuid(str(key)), (snap["path"], key, value)
                found += 1
            assert found == 100, snap["path"]


def _name_uuid(key: str) -> str:
    """``UUID.nameUUIDFromBytes``: MD5, version 3, IETF variant."""
    digest = bytearray(hashlib.md5(key.encode()).digest())
    digest[6] = digest[6] & 0x0F | 0x30
    digest[8] = digest[8] & 0x3F | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


# -- hostile bytes -----------------------------------------------------------------------------


def _object_codec() -> Any:
    return kryo_codec("java.lang.Object", ("java.lang.Object",))


def _list_codec() -> Any:
    return kryo_codec("java.util.ArrayList", ("java.util.ArrayList",))


@pytest.mark.parametrize("data", [
    b"", b"\x57", b"\x01", b"\x01\x05", b"\x01\x00", b"\x01\x00java.util.ArrayLis",
    bytes.fromhex("570183"), bytes.fromhex("5701ffffffff0f"), bytes.fromhex("0301ff"),
    bytes.fromhex("5701" + "ff" * 12), bytes.fromhex("03018d4b72"),
    bytes.fromhex("0a00"), bytes.fromhex("02ffffffffff01"), bytes.fromhex("5701ff"),
], ids=lambda d: d.hex() or "empty")
def test_truncated_and_bad_bytes_raise_statectl_errors(data: bytes) -> None:
    with pytest.raises(StatectlError):
        _object_codec().read_delimited(DataReader(data, "hostile"))


def test_bad_tags_and_references() -> None:
    codec = _list_codec()
    with pytest.raises(UnsupportedFormatError, match="class id"):
        codec.read(DataReader(bytes.fromhex("7f01"), "t"))  # id 125: no registration
    with pytest.raises(CorruptCheckpointError, match="reference"):
        codec.read(DataReader(bytes.fromhex("5701" "02" "5709"), "t"))  # ref 7 of 1
    with pytest.raises(UnsupportedFormatError, match="contains itself"):
        codec.read(DataReader(bytes.fromhex("5701" "02" "5702"), "t"))  # the list itself
    with pytest.raises(CorruptCheckpointError, match="name id"):
        codec.read(DataReader(bytes.fromhex("0105"), "t"))


def test_huge_counts_fail_fast() -> None:
    codec = _list_codec()
    started = time.monotonic()
    for data in ("5701ffffffff07", "5701bfffffff07", "01005bc901ffffffff0f",
                 "0301ffffffff0f"):
        with pytest.raises(StatectlError):
            codec.read(DataReader(bytes.fromhex(data), "t"))
    assert time.monotonic() - started < 1


def test_deep_nesting_is_bounded() -> None:
    # ArrayList of one ArrayList of one ... (Kryo 5: "same class" flag, size 1)
    data = bytes.fromhex("5701") + bytes.fromhex("82" "57" "00" "01") * 1000 + b"\x01"
    with pytest.raises(UnsupportedFormatError, match="nested deeper"):
        _list_codec().read(DataReader(data, "t"))
    assert MAX_KRYO_NESTING < 1000


def test_classes_per_kryo_version() -> None:
    """java.time in both (Kryo 5's serializers, Kryo 2's FieldSerializer of the JDK's fields);
    ``URI`` only in Kryo 5 (Flink 1.x registers chill's for it)."""
    assert "java.time.ZonedDateTime" in KRYO_CLASSES[5] & KRYO_CLASSES[2]
    assert "java.util.Arrays$ArrayList" in KRYO_CLASSES[5] & KRYO_CLASSES[2]
    assert "java.net.URI" in KRYO_CLASSES[5] - KRYO_CLASSES[2]


# -- round trips -------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70)
    | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_plain_json_values_round_trip(value: Any) -> None:
    """A plain JSON value is written with default classes and reads back equal."""
    for major in (5, 2):
        out = bytearray()
        kryo_encoder("java.lang.Object", kryo_major=major)(out, value)
        r = DataReader(bytes(out), "t")
        back = kryo_codec("java.lang.Object", kryo_major=major).read(r)
        assert r.at_end()
        assert back == value
        again = bytearray()
        kryo_encoder("java.lang.Object", kryo_major=major)(again, back)
        assert again == out


def test_codec_for_reads_the_snapshot(kryo5_vectors: list[Vector]) -> None:
    vectors = {name: (s, d) for name, s, d, _e in kryo5_vectors}
    snapshot, data = vectors["registered LocalDate in a list"]
    parsed = read_versioned_snapshot(DataReader(snapshot, "t"))
    assert parsed.outer["registrations"][:3] == ("java.util.ArrayList", "java.time.LocalDate",
                                                  "KryoVectors$Point")
    codec = codec_for(parsed)
    assert codec is not None and codec.spec == "json"
    assert codec.read(DataReader(data, "t")) == ["2024-01-02", "2024-01-03"]


def test_enums_the_caller_names() -> None:
    """Kryo writes a user enum as its ordinal: statectl decodes it where told it is an enum
    (e.g. from the job's EnumSerializer snapshots), and refuses it otherwise."""
    value = [{"enum": "com.example.Status", "ordinal": 2}, {"enum": "com.example.Status",
                                                             "ordinal": 0}]
    for major in (5, 2):
        out = bytearray()
        kryo_encoder("java.lang.Object", kryo_major=major)(out, value)
        told = kryo_codec("java.lang.Object", kryo_major=major, enums=("com.example.Status",))
        r = DataReader(bytes(out), "t")
        assert told.read(r) == value and r.at_end()
        with pytest.raises(UnsupportedFormatError, match="com.example.Status"):
            kryo_codec("java.lang.Object", kryo_major=major).read(DataReader(bytes(out), "t"))


def test_mutated_vectors_raise_only_statectl_errors(kryo5_vectors: list[Vector],
                                                    kryo2_vectors: list[Vector]) -> None:
    """Flink's bytes with random bytes changed, cut or added: a value or a statectl error,
    never another exception, quickly (seeded, reproducible)."""
    import random

    rng = random.Random(20261128)
    started = time.monotonic()
    for major, vectors in ((5, kryo5_vectors), (2, kryo2_vectors)):
        for name, snapshot_bytes, data, _expected in vectors:
            _declared, codec, _enc, json_codec, _jenc = _codecs(snapshot_bytes, major)
            for _ in range(40):
                mutated = bytearray(data)
                for _ in range(rng.randint(1, 3)):
                    at = rng.randrange(len(mutated) + 1)
                    kind = rng.random()
                    if kind < 0.5 and at < len(mutated):
                        mutated[at] = rng.randrange(256)
                    elif kind < 0.75:
                        del mutated[at:]
                    else:
                        mutated[at:at] = bytes([rng.randrange(256)])
                for c in (codec, json_codec):
                    try:
                        c.read_delimited(DataReader(bytes(mutated), name))
                        c.read(DataReader(bytes(mutated), name))
                    except StatectlError:
                        pass
    assert time.monotonic() - started < 60


def test_typed_values_outside_their_columns_are_refused() -> None:
    """A Kryo ``Instant``/``LocalDateTime``/``Date`` beyond 64-bit nanoseconds, a
    ``LocalDate`` beyond year 9999: refused naming the value, not wrapped."""
    for cls, value in (("java.time.Instant", "5701" "ffffffffffffff7f" "00"),
                       ("java.util.Date", "5701" "ffffffffffffff7f"),
                       ("java.time.LocalDate", "5701" "a09c01" "0101"),
                       ("java.time.LocalDateTime", "5701" "a09c01" "0101" "ff")):
        codec = kryo_codec(cls, (cls,))
        with pytest.raises(UnsupportedFormatError, match="outside"):
            codec.read(DataReader(bytes.fromhex(value), cls))


def test_key_hashes_of_typed_kryo_classes(kryo5_vectors: list[Vector]) -> None:
    """A Kryo key of a typed class hashes as Java's ``hashCode()`` (printed by KryoVectors):
    ``UUID``'s own, the others as their specs; classes without one have none."""
    checked = 0
    for name, snapshot_bytes, data, _expected in kryo5_vectors:
        _declared, codec, _enc, _j, _je = _codecs(snapshot_bytes, 5)
        if codec.java_hash is None or name not in HASHES:
            continue
        value = codec.read(DataReader(data, name))
        assert codec.java_hash(value) == HASHES[name], name
        checked += 1
    assert checked >= 20
    assert kryo_codec("java.util.Date", ("java.util.Date",)).java_hash is None
    assert kryo_codec("java.util.ArrayList", ("java.util.ArrayList",)).java_hash is None
