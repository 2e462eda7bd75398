"""Real Flink 2.3 checkpoints and savepoints, read by statectl, against the fixtures' ground truth.

The heap fixtures (``$STATECTL_FLINK_FIXTURES``), the RocksDB ones
(``$STATECTL_FLINK_ROCKSDB_FIXTURES``: incremental checkpoints and native savepoints, whose
keyed state is RocksDB's SST files) and those of the types real jobs keep
(``$STATECTL_FLINK_TYPES_FIXTURES``: POJOs, enums, java.time, Kryo, TTL, tuple keys, windows).
For every snapshot every fixture set's ``expected.json`` lists: operators, parallelism, max
parallelism, state names and kinds and every key's value, in its canonical JSON form
(:func:`formats.ops.export.jsonable`, docs/flink-types.md), equal ``expected.json``; the
``_metadata`` reader agrees with ``metadata-dump.json`` (what Flink's own
``Checkpoints.loadCheckpointMetadata`` reported); ``verify`` is clean; ``export`` writes typed
Parquet. Rescale oracle: ``rescale --plan`` of each p2 snapshot to the parallelism of a
``p3-restored`` snapshot predicts what Flink restored there (key-group ranges, the keys of each
subtask, split and union operator state).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata
from formats.model.arrow_types import arrow_type, from_arrow
from formats.model.columns import operator_schema, value_spec
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.export import export_checkpoint, jsonable
from formats.ops.rescale import plan_checkpoint
from formats.ops.state_scan import lookup
from formats.ops.verify import verify_checkpoint
from statecore.checkpoint import CheckpointKind
from statecore.rescale_plan import intersect_handle
from statecore.ttl import TtlValue
from tests.flink_fixtures import (
    backend,
    expected,
    plain,
    plain_key,
    require_fixtures,
    snapshot_ids,
    snapshots,
)

ROOTS = ("heap", "rocksdb", "types")
SNAPSHOTS = snapshots(*ROOTS)
IDS = snapshot_ids(*ROOTS)

#: expected.json key type names -> statectl type specs of the decoded keys
KEY_TYPES = {"String": "string", "Long": "int64", "Integer": "int32",
             "Row(String)": "tuple<string>", "Row(Long)": "tuple<int64>",
             "RowData(VARCHAR)": "tuple<string>", "RowData(INT)": "tuple<int32>",
             "Tuple2(String,Integer)": "tuple<string,int32>"}


@pytest.mark.parametrize("root", ROOTS)
def test_fixture_sets_exist(root: str) -> None:
    assert require_fixtures(root)


def _open(fixture_set: Path, snap: dict[str, Any]) -> FlinkCheckpoint:
    checkpoint = open_checkpoint(str(fixture_set / snap["path"]))
    assert isinstance(checkpoint, FlinkCheckpoint)
    return checkpoint


def _canonical(value: Any) -> Any:
    """A decoded value in its canonical JSON form (a TTL value: its value)."""
    if isinstance(value, TtlValue):
        return _canonical(value.user_value)
    if isinstance(value, list) and value and isinstance(value[0], TtlValue):
        return [_canonical(v) for v in value]
    if isinstance(value, dict) and any(isinstance(v, TtlValue) for v in value.values()):
        return jsonable({k: v.user_value for k, v in value.items()})
    return jsonable(value)


def _keyed(checkpoint: FlinkCheckpoint, uid: str, state: str, raw: bool = False
           ) -> dict[Any, Any]:
    """Every key's value, in its canonical JSON form (``raw``: as decoded)."""
    out: dict[Any, Any] = {}
    for _kg, key, _ns, value in checkpoint.keyed_entries(uid, state):
        k = plain_key(key)
        assert k not in out, f"{uid}/{state}: key {k!r} twice"
        out[k] = value if raw else _canonical(value)
    return out


def _windowed(checkpoint: FlinkCheckpoint, uid: str, state: str) -> set[Any]:
    """``(key, namespace, value)`` of a state with a namespace, canonical and hashable."""
    return {(plain_key(key), plain_key(jsonable(ns)), plain_key(_canonical(value)))
            for _kg, key, ns, value in checkpoint.keyed_entries(uid, state)}


def _timers(checkpoint: FlinkCheckpoint, uid: str, state: str) -> dict[Any, list[int]]:
    """Every key's timer timestamps, over all its namespaces, sorted."""
    out: dict[Any, list[int]] = {}
    for _kg, key, namespace, stamps in checkpoint.keyed_entries(uid, state):
        if isinstance(namespace, tuple) and len(namespace) == 2:  # a TimeWindow's timers
            assert stamps == [namespace[1] - 1], (uid, state, key, namespace, stamps)
        out.setdefault(plain_key(key), []).extend(stamps)
    return {k: sorted(v) for k, v in out.items()}


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list | tuple):
        return [i for v in value for i in _ints(v)]
    if isinstance(value, dict):
        return [i for v in value.values() for i in _ints(v)]
    return []


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_snapshot_identity(fixture_set: Path, snap: dict[str, Any]) -> None:
    checkpoint = _open(fixture_set, snap)
    document = expected(fixture_set)
    kind = CheckpointKind.SAVEPOINT if snap["kind"] == "savepoint" else CheckpointKind.CHECKPOINT
    assert checkpoint.metadata.kind is kind
    handle_kinds = {h.kind for op in checkpoint.flink.operators for st in op.subtasks
                    for h in st.managed_keyed}
    native = "incremental" if backend(fixture_set) == "rocksdb" else "heap"
    assert handle_kinds == ({"canonical"} if snap["format"] == "canonical" else {native})
    if snap["kind"] == "savepoint":
        assert checkpoint.flink.savepoint_format == snap["format"].upper()
    for op in checkpoint.metadata.operators:
        assert op.parallelism == snap["parallelism"]
        assert op.max_parallelism == document["max_parallelism"]


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_keyed_and_broadcast_state_equal_expected(fixture_set: Path, snap: dict[str, Any]
                                                  ) -> None:
    checkpoint = _open(fixture_set, snap)
    for uid, spec in expected(fixture_set)["operators"].items():
        if uid == "sql-aggregates":
            _check_sql(checkpoint, spec)
            continue
        op = checkpoint.operator(uid)
        assert op.has_uid and op.uid == uid
        states = {s.name: s for s in op.states}
        if "key_type" in spec:
            assert op.key_type == KEY_TYPES[spec["key_type"]]
        for name, state_spec in spec.get("keyed_states", {}).items():
            state = states[name]
            assert state.scope == "keyed"
            if "namespace" in state_spec:  # [key, namespace, value] per entry (windows)
                assert state.kind == state_spec["kind"].lower()
                assert state.namespace_type != "void"
                assert _windowed(checkpoint, uid, name) == {
                    (plain_key(k), plain_key(ns), plain_key(v))
                    for k, ns, v in state_spec["entries"]}
                continue
            values = _keyed(checkpoint, uid, name, raw=state_spec.get("values") == "opaque")
            if state_spec.get("values") == "opaque":
                # PyFlink's Python state: the keys are known, the values are bytes its coders
                # wrote. A Python ValueState is a Java ListState holding one element. Kryo
                # state: the keys are known, the values Kryo's bytes (typed kryo<class>).
                assert set(values) == {plain_key(k) for k in state_spec["keys"]}
                if state_spec["kind"] == "VALUE" and name.startswith("python-state-"):
                    assert state.kind == "list"
                    assert all(len(v) == 1 and isinstance(v[0], bytes) for v in values.values())
                else:
                    assert state.kind == state_spec["kind"].lower()
                    if state.value_type.startswith("kryo<"):
                        assert all(isinstance(v, bytes) for v in values.values())
                continue
            assert state.kind == state_spec["kind"].lower()
            assert values == {plain_key(k): jsonable(v) for k, v in state_spec["entries"]}
        for name, timer_spec in spec.get("timers", {}).items():
            assert states[name].kind == "list" and states[name].value_type == "int64"
            assert _timers(checkpoint, uid, name) == {plain_key(k): v
                                                      for k, v in timer_spec["entries"]}
        for name, bc_spec in spec.get("broadcast_states", {}).items():
            assert states[name].kind == "broadcast"
            copies = []
            for st in op.subtasks:
                entries = [e for e in checkpoint.operator_entries(uid, st.index)
                           if e.name == name]
                assert len(entries) == 1
                copies.append(dict(entries[0].entries))
            assert len(copies) == snap["parallelism"]
            assert all(c == copies[0] for c in copies) and copies[0]
            if bc_spec["entries"] != "opaque":
                assert copies[0] == bc_spec["entries"]


def _check_sql(checkpoint: FlinkCheckpoint, spec: dict[str, Any]) -> None:
    aggregates = [op for op in checkpoint.metadata.operators
                  if op.name.startswith(spec["by_operator_name_prefix"])]
    assert len(aggregates) == spec["count"]
    assert sorted(op.operator_id for op in aggregates) == sorted(spec["operator_ids"])
    for part in ("string_key", "int_key"):
        want = spec[part]
        op = checkpoint.operator(want["operator_id"])
        assert op.name == want["operator_name"] and not op.has_uid
        assert op.key_type == KEY_TYPES[want["key_type"]]
        for name, state_spec in want["keyed_states"].items():
            state = next(s for s in op.states if s.name == name)
            assert state.kind == state_spec["kind"].lower()
            values = _keyed(checkpoint, op.uid, name, raw=True)
            if "entries_contain_ints" in state_spec:
                assert set(values) == {plain_key(k) for k, _ in state_spec["entries_contain_ints"]}
                for key, ints in state_spec["entries_contain_ints"]:
                    have = Counter(_ints(values[plain_key(key)]))
                    assert not Counter(ints) - have, (key, ints, values[plain_key(key)])
            if "map_keys" in state_spec:
                assert {k: set(v) for k, v in values.items()} == {
                    plain_key(k): set(v) for k, v in state_spec["map_keys"]}


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_operator_state_equals_expected(fixture_set: Path, snap: dict[str, Any]) -> None:
    checkpoint = _open(fixture_set, snap)
    for uid, states in snap.get("operator_states", {}).items():
        op = checkpoint.operator(uid)
        for name, spec in states.items():
            kind = {"SPLIT_DISTRIBUTE": "split", "UNION": "union"}[spec["mode"]]
            assert next(s for s in op.states if s.name == name).kind == kind
            per_subtask = []
            for index in range(snap["parallelism"]):
                entries = [e for e in checkpoint.operator_entries(uid, index) if e.name == name]
                per_subtask.append([x for e in entries for x in e.elements])
            assert per_subtask == spec["per_subtask"]


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_verify_is_clean(fixture_set: Path, snap: dict[str, Any]) -> None:
    report = verify_checkpoint(str(fixture_set / snap["path"]))
    assert report.clean, report.problems[:5]
    assert report.entries > 0


def _dump_handle(handle: Any) -> dict[str, Any]:
    return {"kind": handle.stream.kind, "size": handle.stream.size}


@pytest.mark.parametrize(("fixture_set", "snap"), SNAPSHOTS, ids=IDS)
def test_metadata_agrees_with_flinks_own_reader(fixture_set: Path, snap: dict[str, Any]) -> None:
    """Every field Flink's own reading reports (the dumps of the fixture roots differ in how
    much they report: a field a dump lacks is not compared)."""
    dump = json.loads((fixture_set / "metadata-dump.json").read_text())[snap["path"]]
    data = (fixture_set / snap["path"] / "_metadata").read_bytes()
    if "metadataFileSize" in dump:
        assert len(data) == dump["metadataFileSize"]
    meta = parse_metadata(data)
    if "metadataVersion" in dump:
        assert meta.version == dump["metadataVersion"]
    assert meta.checkpoint_id == dump["checkpointId"]
    assert len(meta.master_states) == dump["masterStateCount"]
    properties = dump.get("checkpointProperties") or {"isSavepoint": dump["isSavepoint"]}
    assert meta.is_savepoint == properties["isSavepoint"]
    if "savepointFormatType" in properties:
        assert meta.savepoint_format == properties["savepointFormatType"]
    assert len(meta.operators) == dump.get("operatorCount", len(dump["operators"]))
    for op, d in zip(meta.operators, dump["operators"], strict=True):
        assert (op.name, op.uid, op.operator_id) == (d["operatorName"] or None,
                                                     d["operatorUid"] or None, d["operatorId"])
        assert (op.parallelism, op.max_parallelism) == (d["parallelism"], d["maxParallelism"])
        assert op.fully_finished == d["fullyFinished"]
        assert (op.coordinator_state is not None) == d["hasCoordinatorState"]
        if op.coordinator_state is not None and "coordinatorStateSize" in d:
            assert op.coordinator_state.size == d["coordinatorStateSize"]
        assert [s.index for s in op.subtasks] == d.get("subtaskIndices",
                                                       [s["subtask"] for s in d["subtasks"]])
        total = 0
        for st, ds in zip(op.subtasks, d["subtasks"], strict=True):
            assert st.index == ds["subtask"] and st.finished == ds["finished"]
            for ours, theirs in ((st.managed_keyed, "managedKeyedState"),
                                 (st.raw_keyed, "rawKeyedState"),
                                 (st.managed_operator, "managedOperatorState"),
                                 (st.raw_operator, "rawOperatorState")):
                assert len(ours) == ds.get(f"{theirs}Count", len(ds[theirs]))
            if "inputChannelStateCount" in ds:
                assert st.channel_state_handles == (ds["inputChannelStateCount"]
                                                    + ds["resultSubpartitionStateCount"])
            size = 0
            for h, dh in zip(st.managed_keyed, ds["managedKeyedState"], strict=True):
                if isinstance(h, FlinkIncrementalHandle):
                    size += _check_incremental(h, dh)
                    continue
                assert dh["class"] == ("KeyGroupsSavepointStateHandle" if h.kind == "canonical"
                                       else "KeyGroupsStateHandle")
                assert [h.first_key_group, h.last_key_group] == dh["keyGroupRange"]
                assert [[h.first_key_group + i, o] for i, o in enumerate(h.offsets)] == \
                    dh["keyGroupOffsets"]
                if "stateHandleId" in dh:
                    assert h.handle_id == dh["stateHandleId"]
                assert h.stream.size == dh["stateSize"] == dh["delegate"]["stateSize"]
                _check_stream(h.stream, dh["delegate"])
                size += h.stream.size
            for h, dh in zip(st.managed_operator, ds["managedOperatorState"], strict=True):
                assert {k: [m, list(o)] for k, (m, o) in h.states.items()} == {
                    k: [v["mode"], v["offsets"]] for k, v in dh["states"].items()}
                assert h.stream.size == dh["stateSize"]
                _check_stream(h.stream, dh["delegate"])
                size += h.stream.size
            assert size == ds["stateSize"]
            total += size
        coordinator = op.coordinator_state.size if op.coordinator_state is not None else 0
        assert total + coordinator == d["stateSize"]


def _check_incremental(h: FlinkIncrementalHandle, dh: dict[str, Any]) -> int:
    """An incremental handle against Flink's reading of it; its state size."""
    assert dh["class"] == "IncrementalRemoteKeyedStateHandle"
    assert [h.first_key_group, h.last_key_group] == dh["keyGroupRange"]
    assert (h.checkpoint_id, h.backend_id) == (dh["checkpointId"], dh["backendIdentifier"])
    assert h.meta.size == dh["metaStateHandle"]["stateSize"]
    _check_stream(h.meta, dh["metaStateHandle"])
    for files, dumped in ((h.shared, dh["sharedState"]), (h.private, dh["privateState"])):
        assert [local for local, _ in files] == [d["localPath"] for d in dumped]
        for (_, stream), d in zip(files, dumped, strict=True):
            assert stream.size == d["handle"]["stateSize"]
            _check_stream(stream, d["handle"])
    size = h.meta.size + sum(stream.size for _, stream in h.files)
    assert size == dh["stateSize"]
    return size


def _check_stream(stream: Any, delegate: dict[str, Any]) -> None:
    kinds = {"inline": "ByteStreamStateHandle", "relative": "RelativeFileStateHandle",
             "file": "FileStateHandle"}
    assert kinds[stream.kind] == delegate["type"]
    if stream.kind == "relative":
        assert stream.path == delegate["relativePath"]
    if stream.kind == "inline":  # the dumps give the name, or the path it would have had
        assert stream.file_name == delegate["name"].rsplit("/", 1)[-1]


# -- one logical state in every snapshot of a set -----------------------------------------------


def _same_state_pairs() -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """Every other snapshot of a set against its canonical savepoint of the same parallelism."""
    out = []
    for fixture_set, snap in SNAPSHOTS:
        if snap["format"] == "canonical":
            continue
        canonical = next((s for f, s in SNAPSHOTS if f == fixture_set
                          and s["format"] == "canonical"
                          and s["parallelism"] == snap["parallelism"]), None)
        if canonical is not None:
            out.append((fixture_set, snap, canonical))
    return out


SAME = _same_state_pairs()


def test_every_native_snapshot_has_a_canonical_twin() -> None:
    assert SAME and {f for f, _, _ in SAME} == {f for f, s in SNAPSHOTS}


@pytest.mark.parametrize(("fixture_set", "snap", "canonical"), SAME,
                         ids=[f"{f.name}:{s['path']}" for f, s, _ in SAME])
def test_diff_with_the_canonical_savepoint_is_equal(fixture_set: Path, snap: dict[str, Any],
                                                    canonical: dict[str, Any]) -> None:
    """A checkpoint (heap full or RocksDB incremental) and the canonical savepoint of the same
    run hold the same logical state: ``diff`` finds no difference."""
    report = diff_checkpoints(_open(fixture_set, snap), _open(fixture_set, canonical))
    assert report.equal, report.differences[:5]
    assert report.compared > 0


# -- the rescale oracle -----------------------------------------------------------------------


def _restored_pairs() -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """(set, p2 snapshot, rescaled snapshot): every snapshot of the original parallelism,
    against every snapshot Flink rescaled (all p2 snapshots hold the same logical state)."""
    out = []
    for fixture_set, snap in SNAPSHOTS:
        if "rescaled_from" not in snap:
            continue
        source = next(s for f, s in SNAPSHOTS
                      if f == fixture_set and s["path"] == snap["rescaled_from"])
        for _, other in ((f, s) for f, s in SNAPSHOTS if f == fixture_set):
            if "rescaled_from" not in other and other["parallelism"] == source["parallelism"]:
                out.append((fixture_set, other, snap))
    return out


PAIRS = _restored_pairs()


def test_there_are_rescale_oracles() -> None:
    assert PAIRS


@pytest.mark.parametrize(("fixture_set", "source", "restored"), PAIRS,
                         ids=[f"{f.name}:{s['path']}->{r['path']}" for f, s, r in PAIRS])
def test_rescale_plan_predicts_flinks_restore(fixture_set: Path, source: dict[str, Any],
                                              restored: dict[str, Any]) -> None:
    old = _open(fixture_set, source)
    new = _open(fixture_set, restored)
    plan = plan_checkpoint(old, restored["parallelism"])
    for op_plan in plan.operators:
        old_op = old.operator(op_plan.uid)
        new_op = new.operator(old_op.operator_id or old_op.uid)
        assert len(op_plan.subtasks) == new_op.parallelism
        for sub_plan, new_sub in zip(op_plan.subtasks, new_op.subtasks, strict=True):
            assert sub_plan.index == new_sub.index
            if old_op.key_type is not None:
                read_key = from_arrow(old_op.key_type)
                assert sub_plan.key_group_range == new_sub.key_group_range
                for state in (s for s in old_op.states if s.scope == "keyed"):
                    planned: set[Any] = set()
                    for h in (h for h in sub_plan.keyed if h.state == state.name):
                        table = old.keyed_table(old_op.uid, h, ["key"])
                        planned |= {plain_key(read_key(k)) for k in table.column("key").to_pylist()}
                    held: set[Any] = set()
                    for h in (h for h in new_sub.keyed if h.state == state.name):
                        assert intersect_handle(h, new_sub.key_group_range) is not None or \
                            not h.rows
                        table = new.keyed_table(new_op.uid, h, ["key"])
                        held |= {plain_key(read_key(k)) for k in table.column("key").to_pylist()}
                    assert planned == held, (op_plan.uid, state.name, sub_plan.index)
        _check_operator_state(old, op_plan, restored)


def _planned_elements(checkpoint: FlinkCheckpoint, op_plan: Any, index: int, name: str
                      ) -> list[Any]:
    op = checkpoint.operator(op_plan.uid)
    state = next(s for s in op.states if s.name == name)
    out: list[Any] = []
    for h in (h for h in op_plan.subtasks[index].operator if h.state == name):
        table = checkpoint.rows_table(h.file, operator_schema(state), h.first_element,
                                      h.element_count)
        out.extend(table.column("value").to_pylist())
    return out


def _check_operator_state(old: FlinkCheckpoint, op_plan: Any, restored: dict[str, Any]) -> None:
    """What Flink restored, read from what the job stored right after (README "java-*"): a
    split ``op-count`` subtask stores the sum it received (no new input); every union
    subtask received the whole old list."""
    states = restored.get("operator_states", {}).get(op_plan.uid, {})
    for name, spec in states.items():
        if spec["mode"] == "SPLIT_DISTRIBUTE":
            for index, stored in enumerate(spec["per_subtask"]):
                assert sum(_planned_elements(old, op_plan, index, name)) == sum(stored)
        else:
            whole = sorted(x for i in range(op_plan.old_parallelism)
                           for e in old.operator_entries(op_plan.uid, i) if e.name == name
                           for x in e.elements)
            for index in range(op_plan.new_parallelism):
                assert sorted(_planned_elements(old, op_plan, index, name)) == whole
    op = old.operator(op_plan.uid)
    for state in (s for s in op.states if s.kind == "broadcast"):  # copy i % old_p
        for index in range(op_plan.new_parallelism):
            source = index % op_plan.old_parallelism
            got = [h for h in op_plan.subtasks[index].operator if h.state == state.name]
            want = [h for h in op.subtasks[source].operator if h.state == state.name]
            assert got == want


@pytest.mark.parametrize(("fixture_set", "source", "restored"), PAIRS,
                         ids=[f"{f.name}:{s['path']}->{r['path']}" for f, s, r in PAIRS])
def test_rescale_plan_downloads_incremental_handles_whole(
        fixture_set: Path, source: dict[str, Any], restored: dict[str, Any]) -> None:
    """Flink's rule for RocksDB incremental handles: a new subtask downloads every file of every
    old handle whose key groups intersect its own (the meta data too). Computed here from the
    ``_metadata`` alone, against the plan."""
    old = _open(fixture_set, source)
    plan = plan_checkpoint(old, restored["parallelism"])
    meta = parse_metadata((fixture_set / source["path"] / "_metadata").read_bytes())
    found = 0
    for op_plan in plan.operators:
        flink_op = next(o for o in meta.operators if o.operator_id == op_plan.identity.id)
        handles = [h for st in flink_op.subtasks for h in st.managed_keyed
                   if isinstance(h, FlinkIncrementalHandle)]
        for sub in op_plan.subtasks:
            got = plan.downloads.get((op_plan.uid, sub.index), ())
            kg = sub.key_group_range
            want = [h for h in handles if kg is not None and h.first_key_group <= kg.end
                    and kg.start <= h.last_key_group]
            assert sum(size for _, size in got) == sum(
                h.meta.size + sum(f.size for _, f in h.files) for h in want)
            assert len(got) == sum(1 + len(h.files) for h in want)
            found += len(want)
    assert (found > 0) == (backend(fixture_set) == "rocksdb" and source["format"] != "canonical")


# -- export -----------------------------------------------------------------------------------


def _micro(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with its nanosecond timestamps in microseconds."""
    if pa.types.is_timestamp(data_type) and data_type.unit == "ns":
        return pa.timestamp("us", tz=data_type.tz)
    if pa.types.is_struct(data_type):
        return pa.struct([data_type.field(i).with_type(_micro(data_type.field(i).type))
                          for i in range(data_type.num_fields)])
    if pa.types.is_list(data_type):
        return pa.list_(_micro(data_type.value_type))
    return data_type


@pytest.mark.parametrize(("fixture_set", "snap"), [
    (f, s) for f, s in SNAPSHOTS if s["kind"] == "savepoint" and s["format"] == "canonical"],
    ids=[i for (f, s), i in zip(SNAPSHOTS, IDS, strict=True)
         if s["kind"] == "savepoint" and s["format"] == "canonical"])
def test_export_of_a_savepoint_is_typed_parquet(fixture_set: Path, snap: dict[str, Any],
                                                tmp_path: Path) -> None:
    checkpoint = _open(fixture_set, snap)
    out = tmp_path / "export"
    result = export_checkpoint(checkpoint, str(out))
    assert result.tables
    known = 0
    for exported in result.tables:
        table = pq.read_table(out / exported.path)
        op = next(o for o in checkpoint.metadata.operators
                  if o.identity == exported.operator)
        state = next(s for s in op.states if s.name == exported.state)
        assert table.num_rows == exported.rows
        if state.scope == "keyed":  # typed as the serializers say: a Flink String key is string
            assert op.key_type is not None
            assert table.schema.field("key").type == arrow_type(op.key_type)
            value = table.schema.field("value")
            assert value.metadata[b"statectl.type"].decode() == value_spec(state)
            # instants in microseconds when no value has a finer digit (Spark reads those)
            declared = arrow_type(value_spec(state))
            assert value.type == declared or value.type == _micro(declared)
            if not state.name.startswith("_timer_state/"):
                known += "bytes" not in value_spec(state)
    expect_typed = expected(fixture_set)["job"] != "pyds"  # PyFlink state values are bytes
    assert (known > 0) == expect_typed


@pytest.mark.parametrize("fixture_set", sorted({s for s, _ in SNAPSHOTS}), ids=lambda p: p.name)
def test_key_lookup_finds_every_key_where_flink_put_it(fixture_set: Path) -> None:
    """``inspect --key``: the key group comes from the key serializer's own hash (a ``Row`` of
    PyFlink hashes unlike a tuple; a SQL ``RowData`` key, whose hash needs its binary form, is
    searched in every key group), so every stored key is found, in its stored key group."""
    snap = next(s for s in expected(fixture_set)["snapshots"] if s["format"] == "canonical")
    checkpoint = _open(fixture_set, snap)
    looked_up = 0
    for op in checkpoint.metadata.operators:
        keyed = [s for s in op.states if s.scope == "keyed" and not s.name.startswith("_timer")]
        if op.key_type is None or not keyed:
            continue
        stored: dict[Any, dict[str, list[Any]]] = {}  # key -> {state: [(kg, ns, value)]}
        for state in keyed:
            for key_group, key, ns, value in checkpoint.keyed_entries(op.uid, state.name):
                stored.setdefault(key, {}).setdefault(state.name, []).append(
                    (key_group, ns, value))
        for key in sorted(stored, key=repr)[:12]:
            text = key if isinstance(key, str) else json.dumps(plain(key))
            found = lookup(checkpoint, text, [s.name for s in keyed])
            location = next(loc for loc in found.locations if loc[0] == op.uid)
            groups = {kg for entries in stored[key].values() for kg, _, _ in entries}
            assert len(groups) == 1 and location[2] in groups, (op.uid, key, location)
            for state in (s for s in found.states if s.uid == op.uid):
                entries = sorted(((e.key_group, e.namespace, e.value if e.ttl_timestamp is None
                                   else TtlValue(e.value, e.ttl_timestamp))
                                  for e in state.entries), key=repr)
                want = sorted(stored[key].get(state.state, []), key=repr)
                assert entries == want, (op.uid, key, state.state)
            looked_up += 1
    assert looked_up
