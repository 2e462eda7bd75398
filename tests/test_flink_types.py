"""The types real Flink jobs keep (issue 20): serializer snapshots, value layouts, errors, sources.

* Every keyed state's serializer snapshots, as statectl parses them from every snapshot of the
  ``$STATECTL_FLINK_TYPES_FIXTURES`` sets, equal what Flink's own reader reported
  (``state-meta-dump.json``: class names, POJO classes and field names, nesting).
* The byte layouts of the fixture README (a POJO, a string, an enum, a ``LocalDate``, a tuple
  key, a window timer, a Kryo UUID) decode to the README's values; the other serializers
  (``java.time``, ``java.sql``, big numbers, arrays, ``GlobalWindow``) from bytes written as
  Flink's serializers write them, null markers included.
* Hostile snapshots (field counts, nesting, name lengths, frames) are refused with a
  :class:`StatectlError`; a value that cannot be decoded names its state and serializer.
* ``export`` writes a POJO as a Parquet struct with the POJO's field names and types, and the
  canonical JSON forms (docs/flink-types.md) in JSON Lines and CSV; ``inspect`` shows instants
  readably and, for a Flink snapshot, what its sources have read.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run, run_json

from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.java.input import DataReader
from formats.flink.read.keyed import StateInfo, read_keyed_header
from formats.flink.read.metadata import FlinkIncrementalHandle, StreamHandle, parse_metadata
from formats.flink.read.sources import decode_enumerator, decode_reader_split, source_progress
from formats.flink.types.codecs import codec_for
from formats.flink.types.snapshots import OPTIONAL_MAP_MAGIC, SerializerSnapshot, read_snapshot
from formats.model.arrow_types import arrow_type
from formats.open import open_checkpoint
from formats.ops.export import export_checkpoint, jsonable
from statecore.errors import StatectlError, UnsupportedFormatError
from statecore.serializers import parse_type
from statecore.values import Instant, LocalDateTime, LocalTime
from tests.flink_fixtures import expected, require_fixtures, snapshot_ids, snapshots

TYPES = snapshots("types")
IDS = snapshot_ids("types")
BASE = "org.apache.flink.api.common.typeutils.base."
RUNTIME = "org.apache.flink.api.java.typeutils.runtime."


def test_there_are_type_fixtures() -> None:
    assert require_fixtures("types")


def _stream(root: Path, stream: StreamHandle) -> bytes:
    if stream.kind == "inline":
        assert stream.data is not None
        return stream.data
    name = stream.path.rsplit("/", 1)[-1]
    for candidate in (root / name, root.parent / "shared" / name):
        if candidate.is_file():
            return candidate.read_bytes()
    raise AssertionError(f"{name} not found")


def _headers(root: Path) -> dict[str, list[Any]]:
    """Every keyed handle's parsed header, per operator uid (or name)."""
    out: dict[str, list[Any]] = {}
    for op in parse_metadata((root / "_metadata").read_bytes()).operators:
        for st in op.subtasks:
            for handle in st.managed_keyed:
                stream = handle.meta if isinstance(handle, FlinkIncrementalHandle) \
                    else handle.stream
                data = _stream(root, stream)
                out.setdefault(op.uid or op.name or "", []).append(
                    read_keyed_header(DataReader(data, str(root))))
    return out


def _tree(snapshot: SerializerSnapshot) -> dict[str, Any]:
    """A parsed snapshot in the shape of ``state-meta-dump.json`` (without restored classes)."""
    out: dict[str, Any] = {"snapshot": snapshot.class_name}
    if snapshot.short_name == "PojoSerializerSnapshot":
        out["pojoClass"] = snapshot.outer["class"]
        out["fields"] = [{"name": name, "serializer": _tree(field)}
                         for name, field in zip(snapshot.outer["fields"], snapshot.nested,
                                                strict=True)]
    elif snapshot.nested:
        out["nested"] = [_tree(n) for n in snapshot.nested]
    return out


def _theirs(dumped: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"snapshot": dumped["snapshot"]}
    if "pojoClass" in dumped:
        out["pojoClass"] = dumped["pojoClass"]
        out["fields"] = [{"name": f["name"], "serializer": _theirs(f["serializer"])}
                         for f in dumped["fields"]]
    elif dumped.get("nested"):
        out["nested"] = [_theirs(n) for n in dumped["nested"]]
    return out


def _state(state: StateInfo) -> dict[str, Any]:
    return {"name": state.name, "backendStateType": state.backend_type,
            "options": state.options,
            "serializers": {k: _tree(v) for k, v in state.serializers.items()}}


@pytest.mark.parametrize(("fixture_set", "snap"), TYPES, ids=IDS)
def test_serializer_snapshots_equal_flinks_own_reading(fixture_set: Path, snap: dict[str, Any]
                                                       ) -> None:
    dump = json.loads((fixture_set / "state-meta-dump.json").read_text())[snap["path"]]
    headers = _headers(fixture_set / snap["path"])
    compared = 0
    for uid, operator in dump.items():
        keyed = operator.get("managedKeyedState")
        if not keyed:
            continue
        for header in headers[uid]:
            assert _tree(header.key_snapshot) == _theirs(keyed["keySerializer"])
            assert {s.name: _state(s) for s in header.states} == {
                s["name"]: {"name": s["name"], "backendStateType": s["backendStateType"],
                            "options": s["options"],
                            "serializers": {k: _theirs(v) for k, v in s["serializers"].items()}}
                for s in keyed["states"]}
            compared += 1
    assert compared


# -- the README's byte layouts ----------------------------------------------------------------


def _codec_of(fixture_set: Path, uid: str, state: str) -> Any:
    snap = next(s for s in expected(fixture_set)["snapshots"] if s["format"] == "canonical")
    header = _headers(fixture_set / snap["path"])[uid][0]
    return next(s for s in header.states if s.name == state)


def _types_set() -> Path:
    return require_fixtures("types")[0]


def test_the_readme_pojo_bytes_decode_to_the_readme_value() -> None:
    info = _codec_of(_types_set(), "pojo-keyed", "last-event")
    data = bytes.fromhex("02" "00" "02" "00" "074b72616bf30177" "00" "0000274b"
                         "00" "0000000000000002" "01" "0001" "00" "3fe0000000000000"
                         "00" "00000000" "00" "0000000065540bf4" "00000000" "00" "036b31")
    r = DataReader(data, "test")
    value = info.value.read(r)
    assert r.at_end()
    assert value["ts"] == Instant.of_epoch_milli(1700006900000)
    assert jsonable(value) == {"user": "k1", "amount": 2, "status": "ACTIVE",
                               "ts": 1700006900000, "address": {"city": "Kraków", "zip": 10059},
                               "score": 0.5, "flag": True, "bonus": None}
    assert info.value.spec == ("struct<address:struct<city:string,zip:int32>,amount:int64,"
                               "bonus:int32,flag:bool,score:float64,"
                               "status:enum<ACTIVE,SUSPENDED,CLOSED>,ts:timestamp[ns],"
                               "user:string>")
    assert info.value.java_hash is None  # a POJO's hashCode is user code
    assert info.value.read(DataReader(b"\x01", "null")) is None  # flags 1: a null POJO


def test_the_readme_enum_date_tuple_timer_and_kryo_bytes() -> None:
    fixture_set = _types_set()
    status = _codec_of(fixture_set, "pojo-keyed", "status").value
    assert status.read(DataReader(bytes.fromhex("00000002"), "t")) == "CLOSED"
    with pytest.raises(StatectlError, match="enum ordinal 3 is none of the 3 constants"):
        status.read(DataReader(bytes.fromhex("00000003"), "t"))
    day = _codec_of(fixture_set, "pojo-keyed", "day").value
    assert day.read(DataReader(bytes.fromhex("000007e70b0f"), "t")) == datetime.date(2023, 11, 15)
    snap = next(s for s in expected(fixture_set)["snapshots"] if s["format"] == "canonical")
    tuple_key = _headers(fixture_set / snap["path"])["tuple-keyed"][0].key
    assert tuple_key.read(DataReader(bytes.fromhex("036b3100000001"), "t")) == ("k1", 1)
    assert tuple_key.java_hash is not None  # Flink's Tuple2.hashCode
    timers = _codec_of(fixture_set, "window-agg", "_timer_state/event_window-timers").value
    timer = bytes.fromhex("8000018bd0470fff036b310000018bd01021800000018bd0471000")
    assert timers.read(DataReader(timer, "t")) == (
        0x18BD0470FFF, "k1", (0x18BD0102180, 0x18BD0471000))
    uuid = _codec_of(fixture_set, "pojo-keyed", "uuid")
    assert uuid.value.spec == "string"  # decoded by formats.flink.types.kryo
    kryo = bytes.fromhex("5401d83e8af07ab137b6da15e9cdcc180c85")
    r = DataReader(kryo + b"\x00\x03k2", "heap")  # the heap format: the next entry follows
    assert uuid.value.read(r) == "b637b17a-f08a-3ed8-850c-18cccde915da" and r.pos == 18
    # Kryo's UUIDSerializer: the two longs, little-endian (README: b637b17a-f08a-3ed8-...)
    assert kryo[2:10][::-1].hex() + kryo[10:][::-1].hex() == "b637b17af08a3ed8850c18cccde915da"
    ttl = _codec_of(fixture_set, "pojo-keyed", "ttl-count").value
    assert ttl.ttl and ttl.spec == "int64"
    assert tuple(ttl.read(DataReader(bytes.fromhex("0000019b00000000" "0000000000000002"),
                                     "t"))) == (2, 0x19B00000000)


def _simple(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(name, 3)


@pytest.mark.parametrize(("serializer", "data", "value"), [
    (BASE + "InstantSerializer$InstantSerializerSnapshot",
     struct.pack(">qi", -1, 999_999_999), Instant(-1)),
    (BASE + "InstantSerializer$InstantSerializerSnapshot",
     struct.pack(">qi", -(1 << 63), -(1 << 31)), None),
    (BASE + "LocalDateSerializer$LocalDateSerializerSnapshot",
     struct.pack(">ibb", 2000, 2, 29), datetime.date(2000, 2, 29)),
    (BASE + "LocalDateSerializer$LocalDateSerializerSnapshot",
     struct.pack(">ih", -(1 << 31), -(1 << 15)), None),
    (BASE + "LocalTimeSerializer$LocalTimeSerializerSnapshot",
     struct.pack(">bbbi", 1, 2, 3, 4), LocalTime(3723 * 10**9 + 4)),
    (BASE + "LocalTimeSerializer$LocalTimeSerializerSnapshot",
     struct.pack(">bhi", -128, -(1 << 15), -(1 << 31)), None),
    (BASE + "LocalDateTimeSerializer$LocalDateTimeSerializerSnapshot",
     struct.pack(">ibbbbbi", 1969, 12, 31, 23, 59, 59, 5), LocalDateTime(-10**9 + 5)),
    (BASE + "SqlTimestampSerializer$SqlTimestampSerializerSnapshot",
     struct.pack(">qi", -1500, 250), Instant(-2 * 10**9 + 250)),  # getTime -1500, nanos 250
    (BASE + "SqlTimestampSerializer$SqlTimestampSerializerSnapshot",
     struct.pack(">qi", -(1 << 63), 0), None),
    (BASE + "SqlDateSerializer$SqlDateSerializerSnapshot", struct.pack(">q", 86_400_000),
     Instant.of_epoch_milli(86_400_000)),
    (BASE + "DateSerializer$DateSerializerSnapshot", struct.pack(">q", -(1 << 63)), None),
    (BASE + "BigIntSerializer$BigIntSerializerSnapshot", struct.pack(">i", 2), 1),
    (BASE + "BigIntSerializer$BigIntSerializerSnapshot", struct.pack(">i", 0), None),
    (BASE + "BigIntSerializer$BigIntSerializerSnapshot",
     struct.pack(">i", 4 + 9) + (-(1 << 64)).to_bytes(9, "big", signed=True), -(1 << 64)),
    (BASE + "BigDecSerializer$BigDecSerializerSnapshot",
     struct.pack(">i", 5) + bytes([150]) + struct.pack(">i", 2), decimal.Decimal("-1.06")),
    (BASE + "BigDecSerializer$BigDecSerializerSnapshot",
     struct.pack(">ii", 4 + 1, 0x0F00_0000 | 0) [:5] + struct.pack(">i", -3),
     decimal.Decimal("15E+3")),
    (BASE + "array.IntPrimitiveArraySerializer$IntPrimitiveArraySerializerSnapshot",
     struct.pack(">iii", 2, 7, -7), [7, -7]),
    (BASE + "array.BooleanPrimitiveArraySerializer$BooleanPrimitiveArraySerializerSnapshot",
     struct.pack(">i??", 2, True, False), [True, False]),
    (BASE + "array.StringArraySerializer$StringArraySerializerSnapshot",
     struct.pack(">i", 2) + b"\x00\x02a", [None, "a"]),
    ("org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer"
     "$GlobalWindowSerializerSnapshot", b"\x00", "GlobalWindow"),
])
def test_values_of_flinks_serializers(serializer: str, data: bytes, value: Any) -> None:
    codec = codec_for(_simple(serializer))
    assert codec is not None
    r = DataReader(data, "test")
    assert codec.read(r) == value
    assert r.at_end()
    if codec.length >= 0 and serializer.rsplit("$", 1)[-1] != "GlobalWindowSerializerSnapshot":
        assert codec.length == len(data)  # Flink's getLength()


def test_a_generic_array_has_null_flags() -> None:
    snapshot = SerializerSnapshot(BASE + "GenericArraySerializerSnapshot", 1,
                                  (_simple(BASE + "LongSerializer$LongSerializerSnapshot"),),
                                  outer={"class": "java.lang.Long"})
    codec = codec_for(snapshot)
    assert codec is not None and codec.spec == "list<int64>" and codec.java_hash is None
    data = struct.pack(">i?q?", 2, True, 5, False)
    assert codec.read(DataReader(data, "t")) == [5, None]


def test_broken_temporal_values_are_refused() -> None:
    instant = codec_for(_simple(BASE + "InstantSerializer$InstantSerializerSnapshot"))
    date = codec_for(_simple(BASE + "LocalDateSerializer$LocalDateSerializerSnapshot"))
    assert instant is not None and date is not None
    with pytest.raises(StatectlError, match="nanoseconds"):
        instant.read(DataReader(struct.pack(">qi", 0, 10**9), "t"))
    with pytest.raises(UnsupportedFormatError, match="outside what a timestamp"):
        instant.read(DataReader(struct.pack(">qi", 10**12, 0), "t"))
    with pytest.raises(StatectlError, match="not a date"):
        date.read(DataReader(struct.pack(">ibb", 2023, 2, 30), "t"))
    with pytest.raises(UnsupportedFormatError, match="1..9999"):
        date.read(DataReader(struct.pack(">ibb", 10000, 1, 1), "t"))


# -- hostile snapshots ---------------------------------------------------------------------------


def _utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def _versioned(name: str, version: int, body: bytes = b"") -> bytes:
    return _utf(name) + struct.pack(">i", version) + body


def _optional_map(entries: list[tuple[str, bytes | None, bytes | None]]) -> bytes:
    out = struct.pack(">qi", OPTIONAL_MAP_MAGIC, len(entries))
    for name, key, value in entries:
        out += _utf(name)
        for part in (key, value):
            out += b"\x00" if part is None else b"\x01" + struct.pack(">i", len(part)) + part
    return out


def _pojo(cls: str, fields: list[tuple[str, bytes]]) -> bytes:
    body = _utf(cls) + _optional_map([(name, _utf(cls) + _utf(name), snap)
                                      for name, snap in fields])
    return _versioned(RUNTIME + "PojoSerializerSnapshot", 2,
                      body + _optional_map([]) + _optional_map([]))


LONG = _versioned(BASE + "LongSerializer$LongSerializerSnapshot", 3)


def _read(data: bytes) -> SerializerSnapshot:
    return read_snapshot(DataReader(struct.pack(">i", 2) + data, "hostile"))


def test_a_pojo_snapshot_built_here_decodes() -> None:
    snapshot = _read(_pojo("Foo", [("b", LONG), ("a", LONG)]))
    codec = codec_for(snapshot)
    assert codec is not None and codec.spec == "struct<b:int64,a:int64>"
    value = codec.read(DataReader(b"\x02\x00" + struct.pack(">q", 7) + b"\x01", "t"))
    assert value == {"b": 7, "a": None}
    with pytest.raises(UnsupportedFormatError, match="class Bar, a subclass of POJO Foo"):
        codec.read(DataReader(b"\x04" + _utf("Bar"), "t"))


@pytest.mark.parametrize(("data", "match"), [
    (_pojo("Foo", [(f"f{i}", LONG) for i in range(4097)]), "more than the 4096"),
    (_pojo("F" * 1025, [("a", LONG)]), "not a Java name"),
    (_pojo("Foo", [("a b", LONG)]), "cannot name"),
    (_pojo("Foo", [("a", LONG), ("a", LONG)]), "two fields of one name"),
    (_versioned(RUNTIME + "PojoSerializerSnapshot", 2, _utf("Foo") + struct.pack(">qi", 1, 0)),
     "bad POJO fields header"),
    (_versioned(RUNTIME + "PojoSerializerSnapshot", 1, _utf("Foo")), "version 1"),
    (_versioned(RUNTIME + "PojoSerializerSnapshot", 2, _utf("Foo") + struct.pack(
        ">qi", OPTIONAL_MAP_MAGIC, 1) + _utf("a") + b"\x01" + struct.pack(">i", 1 << 30)),
     "impossible frame"),
    (_versioned(BASE + "EnumSerializer$EnumSerializerSnapshot", 3,
                _utf("E") + struct.pack(">i", 1 << 30)), "impossible enum constants"),
    (_versioned(BASE + "EnumSerializer$EnumSerializerSnapshot", 3,
                _utf("E") + struct.pack(">i", 2) + _utf("A") + _utf("A")), "twice"),
    (_versioned(RUNTIME + "kryo.KryoSerializerSnapshot", 1, _utf("java.util.UUID")),
     "version 1"),
])
def test_hostile_snapshots_are_refused(data: bytes, match: str) -> None:
    with pytest.raises(StatectlError, match=match):
        _read(data)


def test_nesting_is_bounded() -> None:
    nested = LONG
    for i in range(40):
        nested = _pojo(f"P{i}", [("inner", nested)])
    with pytest.raises(StatectlError, match="nested too deeply"):
        _read(nested)


def test_an_undecodable_field_is_named() -> None:
    from formats.flink.types.codecs import opaque_spec, why_undecodable
    unknown = _versioned("com.example.MySerializer$Snapshot", 1, b"\x00\x01")
    snapshot = _read(_pojo("Foo", [("ok", LONG), ("odd", unknown)]))
    assert codec_for(snapshot) is None
    assert why_undecodable(snapshot) == ("field 'odd' of POJO Foo: serializer snapshot "
                                         "com.example.MySerializer$Snapshot (not readable)")
    assert opaque_spec(snapshot) == "opaque<Foo>"  # its values: bytes with their class
    assert opaque_spec(snapshot.nested[1]) == "opaque<com.example.MySerializer$Snapshot>"
    assert parse_type("opaque<Foo>").spec == "opaque<Foo>"
    assert arrow_type("opaque<Foo>") == pa.binary()


def test_a_kryo_value_of_a_class_without_known_layout() -> None:
    snapshot = _read(_versioned(RUNTIME + "kryo.KryoSerializerSnapshot", 2, _utf("com.Foo")
                                + _optional_map([("com.Foo", _utf("com.Foo"), b"")])
                                + _optional_map([]) + _optional_map([])))
    codec = codec_for(snapshot)
    assert codec is not None and codec.spec == "kryo<com.Foo>"
    # delimited or not, it is undecodable, naming the class (a reader keeps a delimited value's
    # bytes in its marker: tests/test_flink_undecodable.py)
    with pytest.raises(UnsupportedFormatError, match="com.Foo serialized by Kryo's Field"):
        codec.read_delimited(DataReader(b"\x55\x01abc", "canonical"))
    with pytest.raises(UnsupportedFormatError, match="com.Foo serialized by Kryo's Field"):
        codec.read(DataReader(b"\x57\x01abc", "heap"))  # id 85: the first registration


def test_a_value_that_cannot_be_decoded_names_its_state_and_serializer(tmp_path: Path) -> None:
    """An enum ordinal no constant has, in a copy of a canonical savepoint's state file."""
    fixture_set = _types_set()
    source, _ = _canonical_savepoint(fixture_set)
    status = expected(fixture_set)["operators"]["pojo-keyed"]["keyed_states"]["status"]
    key, constant = status["entries"][0]
    codec = _codec_of(fixture_set, "pojo-keyed", "status").value
    ordinal = codec.spec[len("enum<"):-1].split(",").index(constant)
    # the pair (key group, key, void namespace) -> 4-byte ordinal: only a value state has it
    key_bytes = bytes([len(key) + 1]) + key.encode() + b"\x00"
    pair = re.compile(re.escape(struct.pack(">i", len(key_bytes) + 1)) + b"[\\x00-\\xff]"
                      + re.escape(key_bytes + struct.pack(">ii", 4, ordinal)))
    root = tmp_path / "copy"
    shutil.copytree(source, root)
    hits = [p for p in root.iterdir() if pair.search(p.read_bytes())]
    assert len(hits) == 1, "the entry's bytes are in no (or more than one) state file"
    data = hits[0].read_bytes()
    at = pair.search(data).end() - 4  # type: ignore[union-attr]
    hits[0].write_bytes(data[:at] + struct.pack(">i", 77) + data[at + 4:])
    with pytest.raises(StatectlError) as caught:
        open_checkpoint(str(root))
    message = str(caught.value)
    assert "enum ordinal 77" in message and "state 'status'" in message
    assert "EnumSerializer" in message
    # the summary reads no value (only _metadata and headers); a view that reads the state
    # shows everything intact and exits 3 for the damaged value
    code, out, err = run("inspect", str(root), "--key", key, "--state", "status")
    assert code == 3 and "state 'status'" in err and "Traceback" not in err
    assert "damaged" in out and "status" in out


# -- export and inspect of the types fixtures ----------------------------------------------------


def _canonical_savepoint(fixture_set: Path) -> tuple[Path, dict[str, Any]]:
    snap = next(s for s in expected(fixture_set)["snapshots"] if s["format"] == "canonical")
    return fixture_set / snap["path"], snap


@pytest.mark.parametrize("fixture_set", require_fixtures("types") if TYPES else [],
                         ids=lambda p: p.name)
def test_export_keeps_the_types(fixture_set: Path, tmp_path: Path) -> None:
    """Parquet: a POJO is a struct of its fields (names from the snapshot), instants
    ``timestamp[us, UTC]`` (no value has finer digits), dates ``date32``, the specs in the field
    metadata; JSON Lines: the canonical forms of ``expected.json``."""
    root, _ = _canonical_savepoint(fixture_set)
    checkpoint = open_checkpoint(str(root))
    assert isinstance(checkpoint, FlinkCheckpoint)
    want = expected(fixture_set)["operators"]
    parquet = export_checkpoint(checkpoint, str(tmp_path / "parquet"))
    jsonl = export_checkpoint(checkpoint, str(tmp_path / "jsonl"), fmt="jsonl")
    csv = export_checkpoint(checkpoint, str(tmp_path / "csv"), fmt="csv")
    structs = 0
    for table_p, table_j, table_c in zip(parquet.tables, jsonl.tables, csv.tables, strict=True):
        uid, state = table_p.operator.uid, table_p.state
        spec = (want.get(uid or "", {}).get("keyed_states", {})).get(state)
        table = pq.read_table(tmp_path / "parquet" / table_p.path)
        value_field = table.schema.field("value")
        declared = value_field.metadata[b"statectl.type"].decode()
        if declared.startswith("struct<"):  # a POJO: its fields, names and types
            structs += 1
            assert pa.types.is_struct(value_field.type)
            names = [value_field.type.field(i).name for i in range(value_field.type.num_fields)]
            assert declared.startswith("struct<" + names[0] + ":")
            for i in range(value_field.type.num_fields):
                field = value_field.type.field(i)
                if declared.find(f",{field.name}:timestamp[ns]") >= 0:  # Spark reads us
                    assert field.type == pa.timestamp("us", tz="UTC")
        if declared == "date32":
            assert value_field.type == pa.date32()
        rows = [json.loads(line) for line in
                (tmp_path / "jsonl" / table_j.path).read_text().splitlines()]
        if spec is None or "entries" not in spec:
            continue
        if "namespace" in spec:
            got = {json.dumps([r["key"], r["namespace"], r["value"]]) for r in rows}
            assert got == {json.dumps(e) for e in spec["entries"]}
        else:
            assert {json.dumps(r["key"]): r["value"] for r in rows} == {
                json.dumps(k): v for k, v in spec["entries"]}
        csv_rows = (tmp_path / "csv" / table_c.path).read_text().splitlines()
        assert len(csv_rows) == len(rows) + 1
    assert structs


def test_inspect_shows_instants_readably_and_json_as_epoch_millis() -> None:
    fixture_set = _types_set()
    root, _ = _canonical_savepoint(fixture_set)
    entries = expected(fixture_set)["operators"]["pojo-keyed"]["keyed_states"]["last-event"][
        "entries"]
    key, value = entries[0]
    code, out, err = run("inspect", str(root), "--key", key, "--state", "last-event",
                         "--full")  # whole: long values are cut by default
    assert code == 0, err
    assert str(Instant.of_epoch_milli(value["ts"])) in out  # ISO-8601, not a repr
    assert "Instant(" not in out
    document = run_json("inspect", str(root), "--key", key, "--state", "last-event")
    found = [e for s in document["lookup"]["states"] for e in s["entries"]]
    assert [e["value"] for e in found] == [value]
    code, out, err = run("inspect", str(root), "--top", "2")
    assert code == 0 and "Instant(" not in out, err


def test_inspect_says_what_the_job_has_read() -> None:
    for fixture_set, snap in TYPES:
        document = run_json("inspect", str(fixture_set / snap["path"]))
        sources = document["sources"]
        assert sources and all(s["connector"] == "file" for s in sources)
        paths = [p for s in sources for p in s["processed_paths"]]
        assert paths and all(p.startswith("file:") for p in paths)
        assert [r["subtask"] for s in sources for r in s["readers"]] == list(
            range(snap["parallelism"])) * len(sources)
        code, out, _ = run("inspect", str(fixture_set / snap["path"]))
        assert code == 0 and "what this job has read" in out and paths[0] in out


# -- source state formats ---------------------------------------------------------------------


def _nullable(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    assert raw.isascii() and len(raw) < 127
    return b"\x01" + bytes([len(raw) + 1]) + raw


def _file_split(split_id: str, scheme: str, host: str | None, path: str, offset: int,
                length: int, position: tuple[int, int] | None) -> bytes:
    """``FileSourceSplitSerializer`` version 1 (see formats/flink/read/sources.py)."""
    out = _utf(split_id) + b"\x01" + _nullable(scheme) + _nullable(None) + _nullable(host)
    out += struct.pack(">i", -1 if host is None else 8020) + _nullable(path)
    out += _nullable(None) + _nullable(None)
    out += struct.pack(">qqqq", offset, length, 1_700_000_000_000, offset + length)
    out += struct.pack(">i", 1) + _utf("host-1")
    out += b"\x01" + struct.pack(">qq", *position) if position else b"\x00"
    return out


def test_file_source_splits_and_enumerator_state_decode() -> None:
    split = _file_split("0000000007", "hdfs", "nn", "/in/a.txt", 100, 900, (450, 3))
    element = struct.pack(">ii", 1, len(split)) + split
    connector, decoded = decode_reader_split(element, "t") or ("", None)
    assert connector == "file" and decoded is not None
    assert (decoded.split_id, decoded.resource, decoded.start, decoded.length,
            decoded.position, decoded.records_to_skip) == (
        "0000000007", "hdfs://nn:8020/in/a.txt", 100, 900, 450, 3)
    assert decoded.details == {"modification_time": 1_700_000_000_000, "file_size": 1000,
                               "hosts": ["host-1"]}
    pending = _file_split("8", "file", None, "/in/b.txt", 0, 10, None)
    paths = [b"file:/in/a.txt", b"file:/in/b.txt"]
    body = struct.pack("<IiII", 0xDEADBEEF, 1, 1, len(paths))
    body += struct.pack("<i", len(pending)) + pending
    body += b"".join(struct.pack("<i", len(p)) + p for p in paths)
    state = struct.pack(">iii", 1, 1, len(body)) + body
    name, splits, processed = decode_enumerator(state, "t") or ("", [], [])
    assert name == "file" and processed == ["file:/in/a.txt", "file:/in/b.txt"]
    assert [(s.resource, s.start, s.length, s.position) for s in splits] == [
        ("file:/in/b.txt", 0, 10, None)]
    progress = source_progress("src", state, [(0, [element]), (1, [b"\x00" * 9])], "t")
    assert progress.connector == "file" and progress.processed == tuple(processed)
    assert progress.readers[0][1] == (decoded,) and progress.readers[1][1] == ()
    assert progress.notes == ("subtask 1: 1 reader split in a format statectl does not decode",)
    # not the FileSource's: reported, not guessed
    assert decode_enumerator(state[:-1], "t") is None
    assert decode_enumerator(struct.pack(">iii", 0, 1, len(body)) + body, "t") is None
    kafka_like = _utf("topic") + struct.pack(">iqq", 3, 42, -1)
    assert decode_reader_split(struct.pack(">ii", 0, len(kafka_like)) + kafka_like, "t") is None
    unknown = source_progress("src", b"\x00\x00\x00\x01junk", [], "t")
    assert unknown.connector is None and "does not decode" in unknown.notes[0]
