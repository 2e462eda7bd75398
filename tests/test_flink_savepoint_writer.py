"""The Flink canonical savepoint writer, against what Flink itself wrote.

Byte for byte where Flink's output is deterministic: the ``CheckpointProperties`` of every
savepoint, the serializer snapshots and state meta infos statectl writes for its own types, the
keyed streams of canonical savepoints whose pairs come in key order (RocksDB's), POJOs, enums,
instants, dates, Kryo values, TTL values, tuple keys and windows included. Then every fixture
snapshot (heap, RocksDB and the types sets; checkpoints, native and canonical savepoints)
rewritten at another parallelism and max parallelism, read back: the same state (``diff``),
clean (``verify``), every key, namespace and value encoded as it was decoded. Real Flink
restoring what statectl writes is ``tests/test_flink_restore.py``; the encoders of types the
fixtures do not hold are ``tests/test_flink_encoders.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED, OPERATOR, run, run_json
from flink_fixtures import expected, snapshot_ids, snapshots

import formats.flink.write.savepoint_writer as savepoint_writer
from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.java.input import DataReader
from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata
from formats.flink.types.encoders import encoder_for
from formats.flink.write.metadata_out import savepoint_properties
from formats.flink.write.snapshot_out import serializer_for_spec, state_meta_info
from formats.open import open_checkpoint
from formats.ops.convert import convert_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.verify import verify_checkpoint
from statecore.errors import StatectlError, UnknownKeyHashError

ROOTS = ("heap", "rocksdb", "types")
SNAPSHOTS = snapshots(*ROOTS)
IDS = snapshot_ids(*ROOTS)
REPO = Path(__file__).resolve().parent.parent


def _open(path: Path) -> FlinkCheckpoint:
    checkpoint = open_checkpoint(str(path))
    assert isinstance(checkpoint, FlinkCheckpoint)
    return checkpoint


# -- byte for byte ------------------------------------------------------------------------------


@pytest.mark.parametrize(("fixture", "snap"), SNAPSHOTS, ids=IDS)
def test_checkpoint_properties_are_flinks_bytes(fixture: Path, snap: dict[str, Any]) -> None:
    data = (fixture / snap["path"] / "_metadata").read_bytes()
    meta = parse_metadata(data)
    if meta.savepoint_format is None:
        return  # a checkpoint's properties are a CheckpointType's; statectl writes savepoints
    assert data[meta.properties_offset:] == savepoint_properties(meta.savepoint_format)


#: Flink serializer classes whose snapshots statectl writes, and the spec that names them.
_SPECS = {"LongSerializer": "int64", "IntSerializer": "int32", "StringSerializer": "string",
          "BytePrimitiveArraySerializer": "bytes", "VoidNamespaceSerializer": "void"}


def _spec(snapshot: Any) -> str | None:
    name = snapshot.short_name.split("$")[0]
    if name in _SPECS:
        return _SPECS[name]
    inner = [_spec(n) for n in snapshot.nested]
    if None in inner:
        return None
    if name == "ListSerializerSnapshot":
        return f"list<{inner[0]}>"
    if name == "MapSerializerSnapshot":
        return f"map<{inner[0]},{inner[1]}>"
    return None


def test_serializer_snapshots_and_meta_infos_are_flinks_bytes() -> None:
    """For every state of every fixture whose serializers are statectl types: the meta info
    statectl writes from the types equals what Flink wrote."""
    compared = 0
    for fixture, snap in SNAPSHOTS:
        checkpoint = _open(fixture / snap["path"])
        for op in checkpoint.metadata.operators:
            header = checkpoint.keyed_header(op.uid)
            if header is None:
                continue
            key_spec = _spec(header.key_snapshot)
            if key_spec is not None:
                assert serializer_for_spec(key_spec, "key").with_proxy == header.key_snapshot_raw
            for info in header.states:
                specs = {k: _spec(v) for k, v in info.serializers.items()}
                if info.backend_type != "KEY_VALUE" or None in specs.values():
                    continue
                written = state_meta_info(info.name, 0, dict(info.options), {
                    k: serializer_for_spec(v, info.name) for k, v in specs.items()
                    if v is not None})
                assert written == info.raw, (fixture.name, info.name)
                compared += 1
    assert compared > 10


@pytest.mark.parametrize(("fixture", "snap"), SNAPSHOTS, ids=IDS)
def test_every_value_encodes_to_what_decodes_to_it(fixture: Path, snap: dict[str, Any]) -> None:
    """Keys, namespaces and values (lists and maps whole): encoded, then decoded, equal."""
    checkpoint = _open(fixture / snap["path"])
    encoded = 0
    for op in checkpoint.metadata.operators:
        header = checkpoint.keyed_header(op.uid)
        if header is None:
            continue
        key_encoder = encoder_for(header.key_snapshot)
        assert header.key is not None and key_encoder is not None
        for info in header.states:
            if info.kind == "timers":
                continue
            value = info.serializers.get("VALUE_SERIALIZER")
            namespace = info.serializers.get("NAMESPACE_SERIALIZER")
            codec, encoder = info.value, None if value is None else encoder_for(value)
            ns_encoder = None if namespace is None else encoder_for(namespace)
            assert info.namespace is not None and ns_encoder is not None
            checks = [(header.key, key_encoder, 1), (info.namespace, ns_encoder, 2)]
            if codec is not None and encoder is not None:
                checks.append((codec, encoder, 3))
            for st in op.subtasks:
                for handle in (h for h in st.keyed if h.state == info.name):
                    for row in checkpoint.decoded_rows(handle.file):
                        for part_codec, part_encoder, at in checks:
                            out = bytearray()
                            part_encoder(out, row[at])
                            reader = DataReader(bytes(out), "x")
                            assert part_codec.read_delimited(reader) == row[at]
                            assert reader.at_end()
                        encoded += 1
    assert encoded


def _written_by_rocksdb(fixture: Path) -> bool:
    """A set whose native snapshots hold RocksDB's incremental handles."""
    for snap in expected(fixture)["snapshots"]:
        if snap["format"] == "native":
            meta = parse_metadata((fixture / snap["path"] / "_metadata").read_bytes())
            return any(isinstance(h, FlinkIncrementalHandle) for op in meta.operators
                       for st in op.subtasks for h in st.managed_keyed)
    return False


def _key_ordered_canonical() -> list[tuple[Path, dict[str, Any]]]:
    """Canonical savepoints whose pairs Flink wrote in key order (RocksDB's: its iterator)."""
    return [(f, s) for f, s in SNAPSHOTS if s["format"] == "canonical"
            and _written_by_rocksdb(f)]


KEY_ORDERED = _key_ordered_canonical()


@pytest.mark.parametrize(("fixture", "snap"), KEY_ORDERED,
                         ids=[f"{f.name}:{s['path']}" for f, s in KEY_ORDERED])
def test_a_rewrite_at_the_same_parallelism_is_flinks_bytes(fixture: Path, snap: dict[str, Any],
                                                           tmp_path: Path) -> None:
    source = fixture / snap["path"]
    checkpoint = _open(source)
    rescale_checkpoint(checkpoint, str(tmp_path / "out"),
                       plan_checkpoint(checkpoint, snap["parallelism"]))
    theirs, ours = (parse_metadata((p / "_metadata").read_bytes())
                    for p in (source, tmp_path / "out"))
    pairs = 0
    for a, b in zip(theirs.operators, ours.operators, strict=True):
        keyed = {st.index: st.managed_keyed for st in b.subtasks if st.managed_keyed}
        assert keyed.keys() == {st.index for st in a.subtasks if st.managed_keyed}
        for sa in a.subtasks:
            for ha, hb in zip(sa.managed_keyed, keyed.get(sa.index, ()), strict=True):
                assert not isinstance(ha, FlinkIncrementalHandle)
                assert not isinstance(hb, FlinkIncrementalHandle)
                assert ha.offsets == hb.offsets
                their_bytes = (ha.stream.data if ha.stream.kind == "inline"
                               else (source / ha.stream.path).read_bytes())
                assert their_bytes == (tmp_path / "out" / hb.stream.path).read_bytes()
                pairs += 1
    assert pairs


# -- every snapshot rewritten ---------------------------------------------------------------------


@pytest.mark.parametrize(("fixture", "snap"), SNAPSHOTS, ids=IDS)
def test_every_snapshot_rewritten_holds_the_same_state(fixture: Path, snap: dict[str, Any],
                                                       tmp_path: Path) -> None:
    """At another parallelism, and at a higher and a lower max parallelism (keys re-hashed with
    the key serializer's Java hash): read back equal, verify clean, every key in the key group
    Flink would give it at the new max parallelism."""
    source = _open(fixture / snap["path"])
    max_p = source.metadata.operators[0].max_parallelism
    for parallelism, new_max in ((snap["parallelism"] + 1, None), (2, max_p * 2),
                                 (1, max(1, max_p // 4))):
        out = tmp_path / f"p{parallelism}-m{new_max}"
        plan = plan_checkpoint(source, parallelism, new_max)
        result = rescale_checkpoint(source, str(out), plan)
        assert result.mode == ("rehash" if new_max else "compact")
        written = _open(out)
        assert written.metadata.kind.value == "savepoint"
        assert {op.parallelism for op in written.metadata.operators} == {parallelism}
        assert {op.max_parallelism for op in written.metadata.operators} == {new_max or max_p}
        report = diff_checkpoints(source, written)
        assert report.equal, report.differences[:3]
        check = verify_checkpoint(str(out))
        assert check.clean, check.problems[:3]


def test_the_cli_writes_a_savepoint_from_a_flink_source(tmp_path: Path) -> None:
    fixture, snap = SNAPSHOTS[0]
    out = tmp_path / "out"
    document = run_json("rescale", str(fixture / snap["path"]), "-p", "3", "--out", str(out))
    assert document["result"]["mode"] == "compact"
    assert (out / "_metadata").is_file()
    assert run_json("diff", str(fixture / snap["path"]), str(out))["equal"] is True
    code, _, err = run("rescale", str(fixture / snap["path"]), "-p", "3", "--out", str(out))
    assert code == 3 and "already exists" in err


def test_drop_expired_of_a_flink_source_without_ttl_states_drops_nothing(tmp_path: Path
                                                                        ) -> None:
    """A Flink snapshot stores no TTL: ``--drop-expired`` takes it from ``--ttl`` for the states
    with TTL (issue 41; tests/test_ttl_given.py), and where no state has TTL drops nothing.
    (It used to refuse every Flink source.)"""
    fixture, snap = SNAPSHOTS[0]
    source = str(fixture / snap["path"])
    inspected = run_json("inspect", source, "--all")
    assert not any(s.get("ttl") for op in inspected["operators"] for s in op["states"])
    result = run_json("rescale", source, "-p", "2", "--drop-expired",
                      "--out", str(tmp_path / "out"))
    assert result["result"]["entries_dropped"] == 0, result
    assert run_json("diff", source, str(tmp_path / "out"))["equal"] is True


def test_a_failed_write_leaves_nothing_that_looks_like_a_savepoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixture, snap = SNAPSHOTS[0]
    source = _open(fixture / snap["path"])
    real = savepoint_writer.write_state_file
    calls = []

    def failing(*args: Any) -> str:
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(*args)

    monkeypatch.setattr(savepoint_writer, "write_state_file", failing)
    with pytest.raises(StatectlError, match="disk full"):
        rescale_checkpoint(source, str(tmp_path / "out"), plan_checkpoint(source, 3))
    assert list(tmp_path.iterdir()) == []  # neither the savepoint nor its staging directory


def _types_canonical() -> tuple[Path, dict[str, Any]]:
    return next((f, s) for f, s in snapshots("types") if s["format"] == "canonical")


def test_a_key_whose_hash_is_unknown_is_not_rehashed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator keyed by a POJO (``hashCode`` is user code): its max parallelism cannot
    change, and nothing is written; a new parallelism is a plain rewrite."""
    fixture, snap = _types_canonical()
    source = _open(fixture / snap["path"])
    pojo, keyed = next((info.value, op) for op in source.metadata.operators
                       if (header := source.keyed_header(op.uid)) is not None
                       for info in header.states
                       if info.value is not None and info.value.spec.startswith("struct<"))
    monkeypatch.setitem(source.key_codecs, keyed.uid, pojo)
    with pytest.raises(UnknownKeyHashError, match=f"{keyed.uid!r} cannot change its max "
                                                  f"parallelism to 256.*POJO"):
        rescale_checkpoint(source, str(tmp_path / "out"), plan_checkpoint(source, 2, 256))
    with pytest.raises(UnknownKeyHashError, match=f"{keyed.uid!r} cannot change"):
        source.new_key_groups(keyed, keyed.subtasks[0].keyed[0], 256)  # the rewrite's own rehash
    assert not (tmp_path / "out").exists()


def _java_string_hash(text: str) -> int:
    """``String.hashCode``: ``31 * h + c`` over the UTF-16 code units (unsigned 32 bits)."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _flink_key_group(java_hash: int, max_parallelism: int) -> int:
    """``KeyGroupRangeAssignment.computeKeyGroupForKeyHash``: murmur of the hash, mod M."""
    k = (java_hash * 0xCC9E2D51) & 0xFFFFFFFF
    k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
    h = (k * 0x1B873593) & 0xFFFFFFFF
    h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
    h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return (h & 0x7FFFFFFF if h < 1 << 31 else (-(h - (1 << 32))) & 0x7FFFFFFF) % max_parallelism


def test_tuple_keys_are_rehashed_with_flinks_hash(tmp_path: Path) -> None:
    """``Tuple2<String, Integer>`` keys: ``Tuple2.hashCode`` is ``31 * f0.hashCode() +
    f1.hashCode()`` (computed here from Java's rules, not statectl's); Flink placed every key
    by it at the fixture's max parallelism, and the rewrite at another places it by the same."""
    fixture, snap = _types_canonical()
    source = _open(fixture / snap["path"])
    tuple_ops = [op for op in source.metadata.operators
                 if op.key_type is not None and op.key_type.startswith("tuple<string,int32")]
    assert tuple_ops
    new_max = source.metadata.operators[0].max_parallelism * 2
    out = tmp_path / "out"
    rescale_checkpoint(source, str(out), plan_checkpoint(source, 3, new_max))
    written = _open(out)
    for op in tuple_ops:
        for checkpoint, max_p in ((source, op.max_parallelism), (written, new_max)):
            (state,) = [s for s in op.states if s.scope == "keyed" and not s.name.startswith(
                "_timer_state")]
            rows = list(checkpoint.keyed_entries(op.uid, state.name))
            assert rows
            for key_group, (f0, f1), _ns, _value in rows:
                java = (31 * _java_string_hash(f0) + (f1 & 0xFFFFFFFF)) & 0xFFFFFFFF
                assert key_group == _flink_key_group(java, max_p), (f0, f1)


# -- statectl -> Flink (bootstrap) ----------------------------------------------------------------


@pytest.mark.parametrize("sample", [OPERATOR], ids=lambda p: Path(p).name)
def test_a_statectl_checkpoint_converts_to_the_same_state(sample: str, tmp_path: Path) -> None:
    out = tmp_path / "flink"
    document = run_json("convert", sample, "--out", str(out))
    assert document["format"] == "flink" and document["source_format"] == "statectl"
    written = _open(out)
    assert [op.identity for op in written.metadata.operators] == [
        op.identity for op in open_checkpoint(sample).metadata.operators]
    assert run_json("diff", sample, str(out))["equal"] is True
    assert run_json("verify", str(out))["clean"] is True


def test_a_build_converts_to_the_same_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_json("build", str(REPO / "docs" / "examples" / "events.csv"), "--key", "user",
             "--agg", "count", "--agg", "sum:amount", "--agg", "list:page",
             "--agg", "map:channel=amount", "--agg", "last:amount", "--checkpoint-dir",
             str(state), "--parallelism", "2")
    (checkpoint,) = sorted(state.glob("chk-*"))
    out = tmp_path / "flink"
    result = convert_checkpoint(open_checkpoint(str(checkpoint)), str(out), compress=True)
    assert result.entries > 0
    assert diff_checkpoints(open_checkpoint(str(checkpoint)), _open(out)).equal


def test_what_flink_cannot_hold_is_refused_naming_the_state(tmp_path: Path) -> None:
    code, _, err = run("convert", KEYED, "--out", str(tmp_path / "out"))
    assert code == 3 and "clicks_per_minute" in err and "namespace" in err
    assert not (tmp_path / "out").exists()
