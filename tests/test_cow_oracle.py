"""Differential test: CopyOnWriteStateMap in `flink` hashing mode against Flink 2.3's own traces.

Every `cow_traces*.json` in the oracle directory (schema: shared/oracle/README.md §4) is replayed
op by op; every return value and every bookkeeping field after every op must match.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from oracle import oracle_files

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.serializers import VOID_NAMESPACE, parse_type

FIELDS = ["size", "primary_table_length", "incremental_rehash_table_length", "rehash_index",
          "state_map_version", "highest_required_snapshot_version", "snapshot_versions",
          "primary_table_size", "incremental_rehash_table_size", "threshold"]


def _counters(m: CopyOnWriteStateMap[Any, Any, Any]) -> list[Any]:
    lay = m.layout(chains=False)
    return [lay.size, lay.primary_table_length, lay.incremental_rehash_table_length,
            lay.rehash_index, lay.state_map_version, lay.highest_required_snapshot_version,
            list(lay.snapshot_versions), lay.primary_table_size,
            lay.incremental_rehash_table_size, lay.threshold]


def _ns(value: Any) -> Any:
    return VOID_NAMESPACE if value is None else value


def _sort_key(row: list[Any]) -> tuple[Any, ...]:
    key, ns = row[0], row[1]
    return (key, ns is not None, -1 if ns is None else ns)


def _plain(state: Any) -> Any:
    return list(state) if isinstance(state, list) else state


def replay(trace: dict[str, Any]) -> list[str]:
    """Replay one trace; return human-readable mismatches (empty when identical)."""
    is_list = trace["state_type"].startswith("List")
    serializer = parse_type("list<int32>" if is_list else "int32")
    m: CopyOnWriteStateMap[int, Any, Any] = CopyOnWriteStateMap(
        state_serializer=serializer, hash_mode="flink")

    def transform(old: Any, value: int) -> Any:
        if is_list:
            target = [] if old is None else old
            target.append(value)
            return target
        return (0 if old is None else old) + value

    problems: list[str] = []
    if _counters(m) != trace["initial"]:
        problems.append(f"initial: {_counters(m)} != {trace['initial']}")
    snapshots: list[Any] = []
    for step, (op, args, expected_result, *expected_fields) in enumerate(trace["ops"]):
        result: Any
        if op == "put":
            result = m.put(args[0], _ns(args[1]), args[2])
        elif op == "get":
            result = _plain(m.get(args[0], _ns(args[1])))
        elif op == "get_append":
            state = m.get(args[0], _ns(args[1]))
            result = copy.deepcopy(state)
            if state is not None:
                state.append(args[2])  # in place, on the object the map handed out
        elif op == "containsKey":
            result = m.contains(args[0], _ns(args[1]))
        elif op == "remove":
            result = m.remove(args[0], _ns(args[1]))
        elif op == "putAndGetOld":
            result = _plain(m.put_and_get_old(args[0], _ns(args[1]), args[2]))
        elif op == "removeAndGetOld":
            result = _plain(m.remove_and_get_old(args[0], _ns(args[1])))
        elif op == "transform":
            result = m.transform(args[0], _ns(args[1]), args[2], transform)
        elif op == "snapshot":
            snap = m.snapshot()
            snapshots.append(snap)
            result = [len(snapshots) - 1, snap.snapshot_version, snap.array_length,
                      snap.number_of_entries, snap.taken_during_rehash]
        elif op == "release":
            result = snapshots[args[0]].release()
        elif op == "read_snapshot":
            rows = [[e.key, None if e.namespace is VOID_NAMESPACE else e.namespace,
                     _plain(e.state)] for e in snapshots[args[0]]]
            result = sorted(rows, key=_sort_key)
        else:
            raise AssertionError(f"unknown op {op!r} in trace {trace['id']}: extend the replay")
        if result != expected_result:
            problems.append(f"op {step} {op}{args}: result {result!r} != {expected_result!r}")
        got = _counters(m)
        if got != expected_fields:
            pairs = zip(FIELDS, got, expected_fields, strict=True)
            diffs = {f: (g, e) for f, g, e in pairs if g != e}
            problems.append(f"op {step} {op}{args}: fields (ours, flink) {diffs}")
        if len(problems) > 10:
            break
    final = sorted(([e.key, None if e.namespace is VOID_NAMESPACE else e.namespace,
                     _plain(e.state)] for e in m), key=_sort_key)
    if not problems and final != trace["final_contents"]:
        problems.append("final contents differ")
    return problems


def _traces(path: Path) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{path.name}:{trace['id']}", trace)
            for trace in json.loads(path.read_text())["traces"]]


def test_every_trace_matches_flink(cow_traces_file: Path) -> None:
    """Parametrized by conftest with every cow_traces*.json of the oracle directory."""
    traces = _traces(cow_traces_file)
    assert traces, f"no traces in {cow_traces_file}"
    failures = {name: problems for name, trace in traces if (problems := replay(trace))}
    assert not failures, json.dumps(failures, indent=1, default=str)[:4000]


def test_trace_replay_detects_a_wrong_map(
    oracle_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay is able to fail: with rehash steps of 3 instead of 4 entries, traces diverge."""
    import statecore.copy_on_write_state_map as cow

    traces = [t for path in oracle_files(oracle_dir, "cow_traces*.json") for t in _traces(path)]
    name, trace = next((n, t) for n, t in traces if t["summary"]["doublings_started"])
    original = cow.CopyOnWriteStateMap.__init__

    def patched(self: Any, *a: Any, **kw: Any) -> None:
        kw["min_transferred_per_incremental_rehash"] = 3
        original(self, *a, **kw)

    monkeypatch.setattr(cow.CopyOnWriteStateMap, "__init__", patched)
    assert replay(trace), f"{name}: a rehash step of 3 entries went unnoticed"
