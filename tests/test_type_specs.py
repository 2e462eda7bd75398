"""The type specs of the values Flink jobs keep (issue 20), in statecore and in Arrow.

* Java ``hashCode`` of the JDK value types against the JDK itself (``data/jdk_hash_codes.json``,
  written by ``data/JdkHashCodes.java`` on OpenJDK 17): ``Instant``, ``LocalDate``,
  ``LocalTime``, ``LocalDateTime``, ``BigInteger``, ``BigDecimal``, ``java.util.Date`` and
  ``java.sql.Timestamp`` -- by the spec and by Flink's serializers' codecs.
* Specs parse with their names' case kept and normalise their keywords; malformed or oversized
  ones are refused.
* Property: every value of a random spec (new types nested in lists, maps, tuples and structs)
  survives ``to_arrow`` -> Arrow -> ``pylist`` -> ``from_arrow``, and every key value its
  canonical JSON form read back by ``value_from_text``.
* Keys whose ``hashCode`` is user code (a POJO's): a backend refuses them, ``verify`` warns
  (``key-hash-unknown``) and stays clean, a max-parallelism change refuses them naming the
  operator and key type, ``inspect --key`` still finds them (every key group is searched).
"""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run, run_json
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.types.codecs import codec_for
from formats.flink.types.snapshots import SerializerSnapshot
from formats.model.arrow_types import arrow_type, from_arrow, pylist, to_arrow, value_from_text
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.export import export_checkpoint, jsonable
from formats.ops.rescale import plan_checkpoint
from formats.ops.verify import verify_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.errors import InvalidArgumentError, UnknownKeyHashError
from statecore.hashing import java_int_hash, java_string_hash, java_tuple_hash
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state
from statecore.serializers import TypeSerializer, decimal_parts, parse_type
from statecore.values import NANOS_PER_DAY, Instant, LocalDateTime, LocalTime

VECTORS = json.loads((Path(__file__).parent / "data" / "jdk_hash_codes.json").read_text())
BASE = "org.apache.flink.api.common.typeutils.base."


def _codec(name: str) -> Any:
    codec = codec_for(SerializerSnapshot(f"{BASE}{name}${name}Snapshot", 3))
    assert codec is not None and codec.java_hash is not None
    return codec


@pytest.mark.parametrize("row", VECTORS, ids=lambda r: f"{r['type']}-{r['hash']}")
def test_java_hash_codes_equal_the_jdks(row: dict[str, Any]) -> None:
    kind = row["type"]
    if kind == "Instant":
        value = Instant.of_epoch_second(row["epoch_second"], row["nano"])
        assert parse_type("timestamp[ns]").java_hash(value) == row["hash"]
        assert _codec("InstantSerializer").java_hash(value) == row["hash"]
    elif kind == "LocalDate":
        if 1 <= row["year"] <= 9999:
            date = datetime.date(row["year"], row["month"], row["day"])
            assert parse_type("date32").java_hash(date) == row["hash"]
            assert _codec("LocalDateSerializer").java_hash(date) == row["hash"]
        else:  # beyond Python's dates: the hash function itself
            from statecore.hashing import java_local_date_hash
            assert java_local_date_hash(row["year"], row["month"], row["day"]) == row["hash"]
    elif kind == "LocalTime":
        assert parse_type("local_time").java_hash(LocalTime(row["nano_of_day"])) == row["hash"]
    elif kind == "LocalDateTime":
        days = (datetime.date(row["year"], row["month"], row["day"])
                - datetime.date(1970, 1, 1)).days
        value = LocalDateTime(days * NANOS_PER_DAY + row["nano_of_day"])
        assert parse_type("local_datetime").java_hash(value) == row["hash"]
        assert _codec("LocalDateTimeSerializer").java_hash(value) == row["hash"]
    elif kind == "BigInteger":
        assert parse_type("bigint").java_hash(int(row["value"])) == row["hash"]
        assert _codec("BigIntSerializer").java_hash(int(row["value"])) == row["hash"]
    elif kind == "BigDecimal":
        value = decimal.Decimal(row["value"])
        assert decimal_parts(value) == (int(row["unscaled"]), row["scale"])
        assert parse_type("decimal").java_hash(value) == row["hash"]
        assert _codec("BigDecSerializer").java_hash(value) == row["hash"]
    elif kind == "Date":
        assert _codec("DateSerializer").java_hash(Instant.of_epoch_milli(row["millis"])) == \
            row["hash"]
    elif kind == "Timestamp":
        millis = row["millis"]
        value = Instant.of_epoch_second(millis // 1000, row["nanos"])
        assert _codec("SqlTimestampSerializer").java_hash(value) == row["hash"]
    else:
        raise AssertionError(kind)


# -- specs ------------------------------------------------------------------------------------


def test_specs_keep_names_and_normalise_keywords() -> None:
    assert parse_type("STRUCT<zipCode:Int, Status:ENUM<Active,On_Hold>, at:Timestamp[MS]>").spec \
        == "struct<zipCode:int32,Status:enum<Active,On_Hold>,at:timestamp[ms]>"
    assert parse_type("Kryo<java.util.UUID>").spec == "kryo<java.util.UUID>"
    assert parse_type("instant").spec == "timestamp[ns]"
    assert parse_type("map<enum<A,B>,list<struct<$x:decimal>>>").spec == \
        "map<enum<A,B>,list<struct<$x:decimal>>>"
    assert not parse_type("struct<a:int32>").hashable
    assert not parse_type("tuple<string,enum<A>>").hashable  # a tuple of an unhashable field
    assert parse_type("tuple<string,timestamp[ms]>").hashable


@pytest.mark.parametrize("spec", [
    "struct<a>", "struct<a:int32,a:int64>", "struct<>", "enum<A,A>", "enum<A B>",
    "kryo<a,b>", "timestamp[s]", "struct<a b:int32>", "x" * 70_000,
    "list<" * 40 + "int32" + ">" * 40,
])
def test_malformed_specs_are_refused(spec: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_type(spec)


def test_unhashable_types_say_why() -> None:
    with pytest.raises(UnknownKeyHashError, match="POJO's hashCode is user code"):
        parse_type("struct<a:int32>").java_hash({"a": 1})
    with pytest.raises(UnknownKeyHashError, match="Object.hashCode"):
        parse_type("enum<A,B>").java_hash("A")
    with pytest.raises(InvalidArgumentError):  # the type check first
        parse_type("enum<A,B>").java_hash("C")


_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
LEAVES: dict[str, st.SearchStrategy[Any]] = {
    "timestamp[ms]": _INT64.map(lambda v: Instant(v * 1_000_000)),
    "timestamp[us]": _INT64.map(lambda v: Instant(v * 1_000)),
    "timestamp[ns]": _INT64.map(Instant),
    "date32": st.dates(),
    "local_time": st.integers(0, NANOS_PER_DAY - 1).map(LocalTime),
    "local_datetime": _INT64.map(LocalDateTime),
    "bigint": st.integers(-(10 ** 60), 10 ** 60),
    "decimal": st.decimals(allow_nan=False, allow_infinity=False),
    "enum<ACTIVE,SUSPENDED,CLOSED>": st.sampled_from(["ACTIVE", "SUSPENDED", "CLOSED"]),
    "kryo<java.util.UUID>": st.binary(max_size=20),
    "global_window": st.just("GlobalWindow"),
    "string": st.text(max_size=5),
    "int32": st.integers(-(1 << 31), (1 << 31) - 1),
}


@st.composite
def typed(draw: st.DrawFn, depth: int = 2) -> tuple[str, st.SearchStrategy[Any]]:
    shape = draw(st.sampled_from(["leaf"] * 3 + (["list", "map", "tuple", "struct"]
                                                 if depth else [])))
    if shape == "leaf":
        spec = draw(st.sampled_from(sorted(LEAVES)))
        return spec, LEAVES[spec]
    if shape == "list":
        spec, values = draw(typed(depth - 1))
        return f"list<{spec}>", st.lists(st.none() | values, max_size=3)
    if shape == "map":
        key = draw(st.sampled_from(sorted(LEAVES)))
        spec, values = draw(typed(depth - 1))
        return f"map<{key},{spec}>", st.dictionaries(LEAVES[key], st.none() | values,
                                                     max_size=3)
    if shape == "tuple":
        (a, va), (b, vb) = draw(typed(depth - 1)), draw(typed(depth - 1))
        return f"tuple<{a},{b}>", st.tuples(va, st.none() | vb)
    names = draw(st.lists(st.sampled_from(["a", "B", "zip_2", "$x"]), min_size=1, max_size=3,
                          unique=True))
    fields = [(n, draw(typed(depth - 1))) for n in names]
    return ("struct<" + ",".join(f"{n}:{s}" for n, (s, _) in fields) + ">",
            st.fixed_dictionaries({n: st.none() | v for n, (_, v) in fields}))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_values_round_trip_through_arrow(data: st.DataObject) -> None:
    spec, values = data.draw(typed())
    items = data.draw(st.lists(values, max_size=4))
    array = pa.array([to_arrow(spec)(v) for v in items], type=arrow_type(spec))
    assert [from_arrow(spec)(v) for v in pylist(array)] == items


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_keys_read_back_from_their_json_forms(data: st.DataObject) -> None:
    """``inspect --key`` takes a key in the form ``--output json`` shows it."""
    spec = data.draw(st.sampled_from(sorted(LEAVES) + ["tuple<string,timestamp[ms]>"]))
    values = (LEAVES[spec] if spec in LEAVES
              else st.tuples(LEAVES["string"], LEAVES["timestamp[ms]"]))
    value = data.draw(values)
    shown = jsonable(value)
    text = shown if isinstance(shown, str) and not spec.startswith(("kryo", "tuple")) \
        else value.hex() if spec.startswith("kryo") else json.dumps(shown)
    back = value_from_text(text, spec)
    if spec in ("timestamp[us]", "timestamp[ns]"):  # the JSON form is milliseconds
        assert back == Instant.of_epoch_milli(value.epoch_milli)
    elif spec == "decimal":
        assert decimal_parts(back) == decimal_parts(value)
    else:
        assert back == value


def test_instants_read_from_iso_text() -> None:
    assert value_from_text("2023-11-14T22:13:20Z", "timestamp[ms]") == \
        Instant.of_epoch_milli(1_700_000_000_000)
    assert value_from_text("2023-11-14T22:13:20.123456789Z", "timestamp[ns]") == \
        Instant(1_700_000_000_123_456_789)
    assert value_from_text("1700000000000", "timestamp[ns]") == \
        Instant.of_epoch_milli(1_700_000_000_000)
    assert value_from_text('{"a": 1700000000000, "d": "2023-11-15"}',
                           "struct<a:timestamp[ms],d:date32>") == {
        "a": Instant.of_epoch_milli(1_700_000_000_000), "d": datetime.date(2023, 11, 15)}
    with pytest.raises(InvalidArgumentError):
        value_from_text("2023-13-01T00:00Z", "timestamp[ms]")
    with pytest.raises(InvalidArgumentError):
        value_from_text('{"a": 1}', "struct<a:int32,b:int32>")


# -- keys without a computable key group ---------------------------------------------------------


KEY = "struct<id:int32,name:string>"


class Key(dict):  # type: ignore[type-arg]
    """A struct key a backend's map can hold (struct values are dicts: not hashable)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


#: A key serializer for the test only: statectl has no hash for a POJO, this one pretends.
PRETEND = TypeSerializer(KEY, lambda k: java_tuple_hash([java_int_hash(k["id"]),
                                                         java_string_hash(k["name"])]),
                         check=lambda v: isinstance(v, dict))


def test_a_backend_refuses_keys_without_a_hash() -> None:
    with pytest.raises(UnknownKeyHashError, match="key groups are not computable"):
        HeapKeyedStateBackend(KEY, 16)


@pytest.fixture(scope="module")
def pojo_keyed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A statectl checkpoint keyed by a struct (placed by the pretend hash), POJO values."""
    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(PRETEND, 16)
    state = backend.get_value_state(value_state(
        "last", "struct<at:timestamp[ms],status:enum<ON,OFF>,amount:decimal>"))
    for i in range(20):
        backend.set_current_key(Key(id=i, name=f"n{i}"))
        state.update({"at": Instant.of_epoch_milli(1_700_000_000_000 + i), "status": "ON",
                      "amount": decimal.Decimal(f"{i}.50")})
    root = str(tmp_path_factory.mktemp("pojo") / "chk")
    write_checkpoint(root, 1, [OperatorSnapshot("pojos", "pojo keyed", 1, 16,
                                                [SubtaskSnapshot(0, backend.snapshot())])])
    return root


def test_verify_warns_about_pojo_keys_and_stays_clean(pojo_keyed: str) -> None:
    report = verify_checkpoint(pojo_keyed)
    assert report.clean and report.entries == 20
    assert [(w.kind, w.where) for w in report.warnings] == [
        ("key-hash-unknown", "operator pojos")]
    assert "user code" in report.warnings[0].message
    document = run_json("verify", pojo_keyed)  # exit 0
    assert document["clean"] and document["warnings"][0]["kind"] == "key-hash-unknown"
    assert document["warnings"][0]["operator"]["uid"] == "pojos"
    code, out, _ = run("verify", pojo_keyed)
    assert code == 0 and "clean" in out and "key-hash-unknown" in out


def test_a_max_parallelism_change_refuses_pojo_keys(pojo_keyed: str, tmp_path: Path) -> None:
    checkpoint = open_checkpoint(pojo_keyed)
    with pytest.raises(UnknownKeyHashError, match=r"operator 'pojos'.*struct<id:int32"):
        plan_checkpoint(checkpoint, 2, 32)
    plan_checkpoint(checkpoint, 2)  # the same max parallelism: key groups move as they are
    code, _, err = run("rescale", pojo_keyed, "-p", "2", "--max-parallelism", "32", "--out",
                       str(tmp_path / "out"))
    assert code == 3 and "operator 'pojos'" in err and "user code" in err
    assert not (tmp_path / "out").exists()
    code, _, err = run("rescale", pojo_keyed, "-p", "2", "--out", str(tmp_path / "same"))
    assert code == 0, err


def test_inspect_key_finds_a_pojo_key_in_every_key_group(pojo_keyed: str) -> None:
    document = run_json("inspect", pojo_keyed, "--key", '{"id": 7, "name": "n7"}')
    (location,) = document["lookup"]["locations"]
    assert location["key"] == {"id": 7, "name": "n7"}
    assert location["key_group"] is not None  # where it was found: its hash is not computable
    (state,) = document["lookup"]["states"]
    assert [e["value"] for e in state["entries"]] == [
        {"at": 1_700_000_000_007, "status": "ON", "amount": "7.50"}]
    code, out, _ = run("inspect", pojo_keyed, "--key", '{"id": 7, "name": "n7"}')
    assert code == 0 and "2023-11-14T22:13:20.007Z" in out


def test_diff_compares_pojo_values(pojo_keyed: str, tmp_path: Path) -> None:
    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(PRETEND, 16)
    state = backend.get_value_state(value_state(
        "last", "struct<at:timestamp[ms],status:enum<ON,OFF>,amount:decimal>"))
    for i in range(20):
        backend.set_current_key(Key(id=i, name=f"n{i}"))
        state.update({"at": Instant.of_epoch_milli(1_700_000_000_000 + i),
                      "status": "OFF" if i == 3 else "ON",
                      "amount": decimal.Decimal(f"{i}.5" if i == 4 else f"{i}.50")})
    other = str(tmp_path / "other")
    write_checkpoint(other, 1, [OperatorSnapshot("pojos", "pojo keyed", 1, 16,
                                                 [SubtaskSnapshot(0, backend.snapshot())])])
    report = diff_checkpoints(open_checkpoint(pojo_keyed), open_checkpoint(other))
    changed = sorted((d.key["id"], d.right["status"], str(d.right["amount"]))
                     for d in report.differences)
    assert changed == [(3, "OFF", "3.50"), (4, "ON", "4.5")]  # 4.50 is not 4.5 (scale)
    document = run_json("diff", pojo_keyed, other, code=1)
    assert {json.dumps(d["right"], sort_keys=True) for d in document["differences"]} == {
        json.dumps({"at": 1_700_000_000_003, "status": "OFF", "amount": "3.50"}, sort_keys=True),
        json.dumps({"at": 1_700_000_000_004, "status": "ON", "amount": "4.5"}, sort_keys=True)}


@pytest.mark.parametrize(("nanos", "unit"), [(123_456_000, "us"), (123_456_789, "ns")])
def test_export_writes_instants_as_precisely_as_needed(tmp_path: Path, nanos: int,
                                                       unit: str) -> None:
    """Microseconds where no value has a finer digit (Spark reads no TIMESTAMP(NANOS)), else
    nanoseconds: never a digit lost."""
    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend("string", 8)
    state = backend.get_value_state(value_state("at", "struct<at:timestamp[ns]>"))
    backend.set_current_key("k")
    value = Instant(1_700_000_000 * 10**9 + nanos)
    state.update({"at": value})
    root = str(tmp_path / "chk")
    write_checkpoint(root, 1, [OperatorSnapshot("op", "op", 1, 8,
                                                [SubtaskSnapshot(0, backend.snapshot())])])
    result = export_checkpoint(open_checkpoint(root), str(tmp_path / "out"))
    table = pq.read_table(tmp_path / "out" / result.tables[0].path)
    assert table.schema.field("value").type.field(0).type == pa.timestamp(unit, tz="UTC")
    assert from_arrow("struct<at:timestamp[ns]>")(pylist(table.column("value").cast(
        pa.struct([("at", pa.timestamp("ns", tz="UTC"))])))[0]) == {"at": value}


# -- json: values whose shape is known only when read (Kryo collections, maps, enums...) -------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(_JSON, max_size=4))
def test_json_values_round_trip_through_arrow(values: list[Any]) -> None:
    """A ``json`` column is an Arrow string of the JSON text; lists of them too."""
    assert arrow_type("json") == pa.string()
    column = pa.array([to_arrow("json")(v) for v in values], arrow_type("json"))
    assert [from_arrow("json")(v) for v in pylist(column)] == values
    nested = pa.array([to_arrow("list<json>")(values)], arrow_type("list<json>"))
    assert [from_arrow("list<json>")(v) for v in pylist(nested)] == [values]


def test_json_spec_checks_values_and_has_no_java_hash() -> None:
    serializer = parse_type("JSON")
    assert serializer.spec == "json" and not serializer.hashable
    serializer.check({"a": [1, 2.5, None, True, "x"]})
    for bad in ({1: "a"}, [object()], b"bytes", ("tuple",)):
        with pytest.raises(InvalidArgumentError):
            serializer.check(bad)
    with pytest.raises(UnknownKeyHashError):
        serializer.java_hash({"a": 1})
    value = {"a": [1]}
    copied = serializer.copy(value)
    assert copied == value and copied["a"] is not value["a"]
    assert value_from_text('{"a": [1, null]}', "json") == {"a": [1, None]}
    assert value_from_text('[{"enum": "java.time.DayOfWeek", "ordinal": 4}]', "json") == [
        {"enum": "java.time.DayOfWeek", "ordinal": 4}]
    with pytest.raises(InvalidArgumentError):
        value_from_text("{not json", "json")
    assert jsonable({"k": [1, "x"]}) == {"k": [1, "x"]}
