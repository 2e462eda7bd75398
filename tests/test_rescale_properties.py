"""Rescale execution (``formats.ops.rescale``), property-based, on small generated checkpoints.

Hypothesis draws a keyed operator (string or int64 keys, max parallelism ``M``, parallelism
``p``; value, list and map state with TTL timestamps, a windowed value state) whose subtasks
also hold operator state (two split list states, a union list state, a broadcast state
reported by some subtasks), fills backends through the state API and writes them with
``write_checkpoint``. Every element and broadcast copy is unique, so where it lands tells where
it came from. Checked, for ``p -> q -> p`` (metadata and compact) and ``M -> M' -> M``:

* ``diff`` against the source is empty and ``verify`` is clean, after each hop;
* split list state is partitioned: no element lost or duplicated, each new subtask a contiguous
  run of the old subtasks' lists in order, shares within one of each other (parallelism
  changed) or each old subtask's list kept as it is (unchanged, Flink never rebalances);
* union state: every new subtask restores the source's union elements, each exactly once;
* broadcast: new subtask ``i`` gets copy ``i % n`` of the ``n`` reporting old subtasks (all of
  them report: ``i % old_p``), at the same parallelism its own copy too (reference §3);
* keyed rows lie in exactly the new subtask whose key-group range holds their key group, and
  that key group is the key's Java hash modulo the (new) max parallelism;
* a metadata-only rescale rewrites no data file (every file is the source's inode), and no
  rescale ever changes the source directory;
* ``drop_expired`` drops exactly the entries (list and map elements one by one) with
  ``ts + ttl <= now`` and keeps the others with their timestamps.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, assume, event, given, settings

from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.rescale import RescaleResult, plan_checkpoint, rescale_checkpoint
from formats.ops.verify import verify_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import list_state, map_state, value_state
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import ManualClock, TtlConfig, TtlValue

UID = "op"
REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_checkpoints" / "v1"
PROPERTY_SETTINGS = settings(max_examples=30, deadline=None, report_multiple_bugs=False,
                             suppress_health_check=[HealthCheck.too_slow,
                                                    HealthCheck.data_too_large])
SPLIT_NAMES = ("offsets", "partitions")
UNION_NAME = "watermarks"
BROADCAST_NAME = "rules"


# -- generated checkpoints ----------------------------------------------------------------------


@dataclass(frozen=True)
class KeyWrites:
    """What one key writes (``None``: that state is not touched for the key)."""

    key: Any
    count: int | None
    seen: list[tuple[int, str]] | None  # (clock advance before, element)
    prices: list[tuple[int, dict[str, int]]] | None
    windows: dict[int, int] | None


@dataclass(frozen=True)
class OperatorWrites:
    """One old subtask's operator state (``None``: that state is not registered)."""

    split: dict[str, list[int]]
    union: list[int] | None
    broadcast: dict[str, str] | None


@dataclass(frozen=True)
class Scenario:
    key_type: str
    max_parallelism: int
    parallelism: int
    ttl: int
    start: int
    keys: list[KeyWrites]
    operator: list[OperatorWrites | None]  # per old subtask; None: no operator backend
    identical_broadcast: bool  # False: copies differ, diff may see one dropped (see below)


KEYS = {"string": st.text("abcxyzAB", max_size=5),
        "int64": st.integers(-(1 << 63), (1 << 63) - 1)}


@st.composite
def key_writes(draw: st.DrawFn, key: Any) -> KeyWrites:
    def maybe(strategy: st.SearchStrategy[Any]) -> Any:
        return draw(strategy) if draw(st.integers(0, 3)) else None

    return KeyWrites(
        key,
        maybe(st.integers(-5, 1000)),
        maybe(st.lists(st.tuples(st.integers(0, 40), st.text("pqr", max_size=3)),
                       min_size=1, max_size=3)),
        maybe(st.lists(st.tuples(st.integers(0, 40), st.dictionaries(
            st.sampled_from(["a", "b", "c", "d"]), st.integers(-9, 9), min_size=1,
            max_size=3)), min_size=1, max_size=2)),
        maybe(st.dictionaries(st.integers(0, 3).map(lambda w: w * 60_000), st.integers(0, 9),
                              min_size=1, max_size=2)))


@st.composite
def operator_writes(draw: st.DrawFn, index: int, broadcast_everywhere: bool,
                    broadcast: dict[str, str] | None) -> OperatorWrites | None:
    """``broadcast``: every reporting subtask's copy (Flink's contract: identical copies);
    ``None``: each copy its own, marked with its subtask (to see which copy goes where)."""
    if draw(st.integers(0, 7)) == 0:
        return None
    split = {}
    for n, name in enumerate(SPLIT_NAMES):
        if draw(st.integers(0, 5)):
            base = (n + 1) * 1_000_000 + index * 1000
            split[name] = [base + j for j in range(draw(st.integers(0, 6)))]
    union = None
    if draw(st.integers(0, 3)):
        union = [5_000_000 + index * 1000 + j for j in range(draw(st.integers(0, 3)))]
    copy = None
    if broadcast_everywhere or draw(st.booleans()):
        copy = broadcast if broadcast is not None else {
            f"r{k}": f"v{k}@{index}" for k in range(draw(st.integers(1, 3)))}
    return OperatorWrites(split, union, copy)


@st.composite
def scenarios(draw: st.DrawFn, ttl: st.SearchStrategy[int] | None = None,
              max_keys: int = 12) -> Scenario:
    """``ttl``: the TTL of the TTL states (default: 10^9 ms, nothing expires)."""
    key_type = draw(st.sampled_from(sorted(KEYS)))
    max_parallelism = draw(st.integers(1, 40))
    parallelism = draw(st.integers(1, min(max_parallelism, 4)))
    keys = draw(st.lists(KEYS[key_type], max_size=max_keys, unique=True))
    everywhere = draw(st.integers(0, 2)) > 0
    identical = draw(st.integers(0, 2)) == 0
    copy = ({f"r{k}": f"v{k}" for k in range(draw(st.integers(0, 3)))} if identical
            else None)
    return Scenario(
        key_type, max_parallelism, parallelism, 10**9 if ttl is None else draw(ttl),
        draw(st.integers(1, 10**6)),
        [draw(key_writes(k)) for k in keys],
        [draw(operator_writes(i, everywhere, copy)) for i in range(parallelism)], identical)


def write_scenario(scenario: Scenario, location: str) -> None:
    m, p = scenario.max_parallelism, scenario.parallelism
    clock = ManualClock(scenario.start)
    ttl = TtlConfig(scenario.ttl)
    count = value_state("count", "int64")
    seen = list_state("seen", "string", ttl=ttl)
    prices = map_state("prices", "string", "int64", ttl=ttl)
    windows = value_state("per-window", "int64", namespace_type="int64")
    backends: list[HeapKeyedStateBackend[Any]] = []
    for i in range(p):
        backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
            scenario.key_type, m, compute_key_group_range_for_operator_index(m, p, i),
            clock=clock)
        for descriptor in (count, seen, prices, windows):
            backend.get_state(descriptor)
        backends.append(backend)
    for w in scenario.keys:
        group = assign_to_key_group(w.key, m, scenario.key_type)
        backend = backends[compute_operator_index_for_key_group(m, p, group)]
        backend.set_current_key(w.key)
        if w.count is not None:
            backend.get_value_state(count).update(w.count)
        for advance, element in w.seen or ():
            clock.advance(advance)
            backend.get_list_state(seen).add(element)
        for advance, entries in w.prices or ():
            clock.advance(advance)
            backend.get_map_state(prices).put_all(entries)
        for window, value in (w.windows or {}).items():
            state = backend.get_value_state(windows)
            state.set_current_namespace(window)
            state.update(value)
    subtasks = []
    for i, (backend, ops) in enumerate(zip(backends, scenario.operator, strict=True)):
        operator = None
        if ops is not None:
            ob = OperatorStateBackend()
            for name, elements in ops.split.items():
                ob.get_list_state(OperatorListStateDescriptor(name, "int64")).add_all(elements)
            if ops.union is not None:
                ob.get_union_list_state(
                    OperatorListStateDescriptor(UNION_NAME, "int64")).add_all(ops.union)
            if ops.broadcast is not None:
                ob.get_broadcast_state(BroadcastStateDescriptor(
                    BROADCAST_NAME, "string", "string")).put_all(ops.broadcast)
            operator = ob.snapshot()
        subtasks.append(SubtaskSnapshot(i, backend.snapshot(), operator))
    write_checkpoint(location, 1, [OperatorSnapshot(UID, "the operator", p, m, subtasks)])


# -- files on disk --------------------------------------------------------------------------------


def tree(root: str) -> dict[str, bytes]:
    """Every regular file under ``root`` (relative path -> bytes)."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


def check_linked(result: RescaleResult, source: str) -> None:
    """Metadata mode: nothing written, every data file the source file's inode."""
    assert result.mode == "metadata"
    assert result.files_written == 0 and result.entries_written == 0
    assert result.files_linked == len(result.metadata.files)
    on_disk = set(tree(result.location)) - {"_metadata.json"}
    assert on_disk == {f.path for f in result.metadata.files}
    for info in result.metadata.files:
        assert os.stat(os.path.join(result.location, info.path)).st_ino == \
            os.stat(os.path.join(source, info.path)).st_ino, info.path


def rescale(source: str, target: str, parallelism: int, max_parallelism: int | None = None,
            **options: Any) -> tuple[Checkpoint, RescaleResult]:
    checkpoint = open_checkpoint(source)
    plan = plan_checkpoint(checkpoint, parallelism, max_parallelism)
    result = rescale_checkpoint(checkpoint, target, plan, **options)
    return open_checkpoint(target), result


def check_equal_and_clean(source: Checkpoint, other: Checkpoint,
                          identical_broadcast: bool = True) -> None:
    """``diff`` finds nothing and ``verify`` nothing wrong.

    Diff compares broadcast state as the copies merged, which assumes Flink's contract that
    every copy is the same; with deliberately different copies a redistribution that keeps
    copy ``i % n`` only may lose another copy's entries, so those differences are allowed
    there (where each copy goes is checked by :func:`check_operator_distribution`).
    """
    report = diff_checkpoints(source, other)
    differences = [d for d in report.differences
                   if identical_broadcast or d.state != BROADCAST_NAME]
    if identical_broadcast:
        assert report.equal, report.differences[:5]
    assert not differences, differences[:5]
    verified = verify_checkpoint(other.root)
    assert verified.clean, verified.problems[:5]


# -- where state lands ---------------------------------------------------------------------------


def operator_state(checkpoint: Checkpoint, uid: str = UID) -> list[dict[str, list[Any]]]:
    """Per subtask ``{state: [entry, ...]}``; an entry is a tuple of elements or a dict."""
    op = checkpoint.operator(uid)
    out = []
    for index in range(op.parallelism):
        states: dict[str, list[Any]] = {}
        for entry in checkpoint.operator_entries(uid, index):
            value = (dict(entry.entries) if entry.key_type_spec is not None
                     else tuple(entry.elements))
            states.setdefault(entry.name, []).append(value)
        out.append(states)
    return out


def elements(states: dict[str, list[Any]], name: str) -> list[Any]:
    return [e for entry in states.get(name, []) for e in entry]


def check_operator_distribution(before: Checkpoint, after: Checkpoint,
                                union_content: Counter[Any], uid: str = UID) -> None:
    """Split, union and broadcast state of ``after`` as Flink redistributes ``before``'s.

    ``union_content``: the union elements of the original source (each restored once).
    """
    old, new = operator_state(before, uid), operator_state(after, uid)
    old_p, new_p = len(old), len(new)
    kinds = {s.name: s.kind for s in before.operator(uid).states if s.scope == "operator"}
    assert kinds == {s.name: s.kind for s in after.operator(uid).states
                     if s.scope == "operator"}
    for name, kind in kinds.items():
        if kind == "split":
            concatenated = [e for states in old for e in elements(states, name)]
            chunks = [elements(states, name) for states in new]
            assert sorted(e for c in chunks for e in c) == sorted(concatenated), name
            if new_p == old_p:  # never rebalanced at the same parallelism
                assert chunks == [elements(states, name) for states in old], name
                continue
            sizes = [len(c) for c in chunks]
            assert max(sizes) - min(sizes) <= 1, (name, sizes)
            position = {e: i for i, e in enumerate(concatenated)}
            for chunk in chunks:  # a contiguous run of the old lists, in order
                at = [position[e] for e in chunk]
                if at:
                    assert at == list(range(at[0], at[0] + len(at))), (name, at)
        elif kind == "union":
            for i, states in enumerate(new):
                assert Counter(elements(states, name)) == union_content, (name, i)
        elif kind == "broadcast":
            reporters = [j for j, states in enumerate(old) if name in states]
            n = len(reporters)
            for i, states in enumerate(new):
                if new_p != old_p:
                    sources = {reporters[i % n]}
                else:
                    sources = ({i} if i in reporters else set()) | (
                        {reporters[i % n]} if n < old_p else set())
                expected = sorted(sorted(copy.items()) for j in sorted(sources)
                                  for copy in old[j][name])
                got = sorted(sorted(copy.items()) for copy in states.get(name, []))
                assert got == expected, (name, i, sources)
        else:
            raise AssertionError(kind)


def check_keyed_placement(after: Checkpoint, source: Checkpoint, uid: str = UID) -> None:
    """Every keyed row is in the subtask owning its key group, the key's hash's group, once;
    together the rows are the source's entries."""
    op = after.operator(uid)
    assert op.key_type is not None
    m, p = op.max_parallelism, op.parallelism
    for state in (s for s in op.states if s.scope == "keyed"):
        seen: dict[tuple[Any, Any], int] = {}
        for sub in op.subtasks:
            kg = compute_key_group_range_for_operator_index(m, p, sub.index)
            assert sub.key_group_range == kg
            for handle in (h for h in sub.keyed if h.state == state.name):
                assert kg.start <= handle.key_group_range.start
                assert handle.key_group_range.end <= kg.end
                for row in after.keyed_table(uid, handle).to_pylist():
                    group = row["key_group"]
                    assert kg.start <= group <= kg.end
                    assert assign_to_key_group(row["key"], m, op.key_type) == group
                    composite = (row["key"], row.get("namespace"))
                    assert composite not in seen, (state.name, composite)
                    seen[composite] = sub.index
        expected = {(key, None if ns is VOID_NAMESPACE else ns)
                    for _, key, ns, _ in source.keyed_entries(uid, state.name)}
        assert set(seen) == expected, state.name


def union_of(scenario: Scenario) -> Counter[Any]:
    return Counter(e for ops in scenario.operator if ops is not None for e in ops.union or ())


@contextmanager
def workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


# -- p -> q -> p ----------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(scenario=scenarios(), data=st.data())
def test_p_to_q_to_p_metadata_only(scenario: Scenario, data: st.DataObject) -> None:
    q = data.draw(st.integers(1, min(scenario.max_parallelism, 5)), label="q")
    with workspace() as tmp:
        src = str(tmp / "src")
        write_scenario(scenario, src)
        before = tree(src)
        source = open_checkpoint(src)
        mid, first = rescale(src, str(tmp / "mid"), q)
        back, second = rescale(str(tmp / "mid"), str(tmp / "back"), scenario.parallelism)
        assert tree(src) == before
        for result in (first, second):
            check_linked(result, src)  # also "back": its links are the source's inodes
        same = q == scenario.parallelism
        event(f"{scenario.parallelism} -> {q}: {'same' if same else 'changed'}")
        for hop_before, hop_after in ((source, mid), (mid, back)):
            check_equal_and_clean(source, hop_after, scenario.identical_broadcast)
            check_keyed_placement(hop_after, source)
            check_operator_distribution(hop_before, hop_after, union_of(scenario))


@PROPERTY_SETTINGS
@given(scenario=scenarios(), data=st.data())
def test_p_to_q_to_p_compact(scenario: Scenario, data: st.DataObject) -> None:
    q = data.draw(st.integers(1, min(scenario.max_parallelism, 5)), label="q")
    with workspace() as tmp:
        src = str(tmp / "src")
        write_scenario(scenario, src)
        before = tree(src)
        source = open_checkpoint(src)
        mid, first = rescale(src, str(tmp / "mid"), q, compact=True)
        back, second = rescale(str(tmp / "mid"), str(tmp / "back"), scenario.parallelism,
                               compact=True)
        assert tree(src) == before
        assert (first.mode, second.mode) == ("compact", "compact")
        assert first.files_linked == 0 and first.files_written > 0
        for hop_before, hop_after in ((source, mid), (mid, back)):
            check_equal_and_clean(source, hop_after, scenario.identical_broadcast)
            check_keyed_placement(hop_after, source)
            check_operator_distribution(hop_before, hop_after, union_of(scenario))


@pytest.mark.parametrize("compact", [False, True])
def test_union_state_is_restored_once_after_two_rescales(tmp_path: Path, compact: bool) -> None:
    """The smallest case the properties above shrink to: one union element, 1 -> 2 -> 1.

    After ``1 -> 2`` both subtasks reference the same union range (restored once each, as
    diff and ``union_elements`` count it); ``2 -> 1`` must give that element once, not once per
    old subtask that shared the range, and a compact rewrite must not write it twice.
    """
    ob = OperatorStateBackend()
    ob.get_union_list_state(OperatorListStateDescriptor(UNION_NAME, "int64")).add_all([7, 8])
    src = str(tmp_path / "src")
    write_checkpoint(src, 1, [OperatorSnapshot(UID, "op", 1, 128, [
        SubtaskSnapshot(0, None, ob.snapshot())])])
    source = open_checkpoint(src)
    mid, _ = rescale(src, str(tmp_path / "mid"), 2, compact=compact)
    back, _ = rescale(str(tmp_path / "mid"), str(tmp_path / "back"), 1, compact=compact)
    assert [elements(s, UNION_NAME) for s in operator_state(mid)] == [[7, 8], [7, 8]]
    assert [elements(s, UNION_NAME) for s in operator_state(back)] == [[7, 8]]
    assert diff_checkpoints(source, back).equal
    (plan,) = plan_checkpoint(mid, 1).operators
    assert plan.union_elements == 2 and plan.subtasks[0].states[0].entries == 2


# -- M -> M' -> M ---------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(scenario=scenarios(), data=st.data())
def test_max_parallelism_change_and_back(scenario: Scenario, data: st.DataObject) -> None:
    m = scenario.max_parallelism
    m2 = data.draw(st.integers(1, 64), label="M'")
    assume(m2 != m)
    q = data.draw(st.integers(1, min(m2, 5)), label="q")
    compact = data.draw(st.booleans(), label="compact")
    with workspace() as tmp:
        src = str(tmp / "src")
        write_scenario(scenario, src)
        before = tree(src)
        source = open_checkpoint(src)
        mid, first = rescale(src, str(tmp / "mid"), q, m2, compact=compact)
        back, second = rescale(str(tmp / "mid"), str(tmp / "back"), scenario.parallelism, m,
                               compact=compact)
        assert tree(src) == before
        assert (first.mode, second.mode) == ("rehash", "rehash")
        assert mid.operator(UID).max_parallelism == m2
        assert back.operator(UID).max_parallelism == m
        for hop_before, hop_after in ((source, mid), (mid, back)):
            check_equal_and_clean(source, hop_after, scenario.identical_broadcast)
            check_keyed_placement(hop_after, source)
            check_operator_distribution(hop_before, hop_after, union_of(scenario))


# -- the committed samples -------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ["keyed-all-kinds-p2", "operator-split-union-broadcast-p3",
                                    "empty"])
def test_sample_checkpoints_rescale_to_every_small_parallelism(tmp_path: Path,
                                                               sample: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(SAMPLES / sample, src)  # links need the same filesystem
    before = tree(str(src))
    source = open_checkpoint(str(src))
    (op,) = source.metadata.operators
    for q in range(1, 6):
        if q > op.max_parallelism:
            continue
        for compact in (False, True):
            target = tmp_path / f"p{q}-{compact}"
            after, result = rescale(str(src), str(target), q, compact=compact)
            if not compact:
                check_linked(result, str(src))
            check_equal_and_clean(source, after)
            if op.key_type is not None:
                check_keyed_placement(after, source, op.uid)
            # the source's union content: every old subtask's list
            union = Counter(e for i in range(op.parallelism)
                            for entry in source.operator_entries(op.uid, i)
                            if entry.mode.name == "UNION" for e in entry.elements)
            check_operator_distribution(source, after, union, op.uid)
    assert tree(str(src)) == before


# -- drop_expired ----------------------------------------------------------------------------------


def stored(checkpoint: Checkpoint, state: str) -> dict[tuple[Any, Any], Any]:
    return {(key, ns): value for _, key, ns, value in checkpoint.keyed_entries(UID, state)}


def alive(value: Any, ttl: int, now: int) -> Any:
    """``value`` without what expired at ``now`` (``ts + ttl <= now``); ``None``: row dropped."""
    if isinstance(value, TtlValue):
        return None if value.last_access_timestamp + ttl <= now else value
    if isinstance(value, list):
        kept = [v for v in value if v.last_access_timestamp + ttl > now]
        return kept or None
    if isinstance(value, dict):
        kept_map = {k: v for k, v in value.items() if v.last_access_timestamp + ttl > now}
        return kept_map or None
    return value  # a state without TTL


def check_drop_expired(source: Checkpoint, after: Checkpoint, result: RescaleResult, ttl: int,
                       now: int) -> tuple[int, int]:
    """Returns (rows dropped, elements dropped)."""
    rows_dropped = elements_dropped = 0
    for state in source.operator(UID).states:
        if state.scope != "keyed":
            continue
        expected = {}
        for composite, value in stored(source, state.name).items():
            kept = alive(value, ttl, now) if state.ttl else value
            if kept is None:
                rows_dropped += 1
            else:
                expected[composite] = kept
            if isinstance(value, list | dict):
                elements_dropped += len(value) - (0 if kept is None else len(kept))
        assert stored(after, state.name) == expected, state.name
    assert result.entries_dropped == rows_dropped
    return rows_dropped, elements_dropped


@PROPERTY_SETTINGS
@given(scenario=scenarios(ttl=st.integers(1, 120), max_keys=10), data=st.data())
def test_drop_expired_keeps_exactly_the_unexpired_entries(scenario: Scenario,
                                                          data: st.DataObject) -> None:
    q = data.draw(st.integers(1, min(scenario.max_parallelism, 4)), label="q")
    # a moment among the writes' timestamps (a key advances the clock by at most 200 ms)
    now = scenario.start + data.draw(st.integers(0, 200 * len(scenario.keys) + 200), label="now")
    with workspace() as tmp:
        src = str(tmp / "src")
        write_scenario(scenario, src)
        before = tree(src)
        source = open_checkpoint(src)
        after, result = rescale(src, str(tmp / "out"), q, drop_expired=True, now=now)
        assert tree(src) == before
        assert result.mode == "compact"
        rows, items = check_drop_expired(source, after, result, scenario.ttl, now)
        event(f"dropped rows: {min(rows, 3)}, elements: {min(items, 3)}")
        verified = verify_checkpoint(str(tmp / "out"))
        assert verified.clean, verified.problems[:5]
        check_keyed_placement(after, after)
        check_operator_distribution(source, after, union_of(scenario))


def test_drop_expired_at_the_boundary(tmp_path: Path) -> None:
    """ttl 100, now 1100: a timestamp of 1000 has expired (inclusive bound), 1001 has not."""
    ttl = TtlConfig(100)
    clock = ManualClock(1000)
    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
        "string", 4, compute_key_group_range_for_operator_index(4, 1, 0), clock=clock)
    value = backend.get_value_state(value_state("v", "int64", ttl=ttl))
    items = backend.get_list_state(list_state("l", "string", ttl=ttl))
    prices = backend.get_map_state(map_state("m", "string", "int64", ttl=ttl))
    plain = backend.get_value_state(value_state("plain", "int64"))
    for key in ("old", "mixed"):
        backend.set_current_key(key)
        value.update(1)
        items.add("at-1000")
        prices.put("at-1000", 1)
        plain.update(7)
    clock.advance(1)
    for key in ("mixed", "new"):
        backend.set_current_key(key)
        items.add("at-1001")
        prices.put("at-1001", 2)
        if key == "new":
            value.update(2)
    src = str(tmp_path / "src")
    write_checkpoint(src, 1, [OperatorSnapshot(UID, "op", 1, 4, [
        SubtaskSnapshot(0, backend.snapshot(), None)])])
    source = open_checkpoint(src)
    after, result = rescale(src, str(tmp_path / "out"), 2, drop_expired=True, now=1100)
    assert stored(after, "v") == {("new", VOID_NAMESPACE): TtlValue(2, 1001)}
    assert stored(after, "l") == {("mixed", VOID_NAMESPACE): [TtlValue("at-1001", 1001)],
                                  ("new", VOID_NAMESPACE): [TtlValue("at-1001", 1001)]}
    assert stored(after, "m") == {("mixed", VOID_NAMESPACE): {"at-1001": TtlValue(2, 1001)},
                                  ("new", VOID_NAMESPACE): {"at-1001": TtlValue(2, 1001)}}
    assert stored(after, "plain") == stored(source, "plain")  # no TTL: never dropped
    assert len(stored(after, "plain")) == 2
    assert result.entries_dropped == 2 + 1 + 1  # v: old, mixed; l: old; m: old
    assert check_drop_expired(source, after, result, 100, 1100) == (4, 4)
    # one millisecond earlier nothing has expired
    early, kept = rescale(src, str(tmp_path / "early"), 1, drop_expired=True, now=1099)
    assert kept.entries_dropped == 0
    assert diff_checkpoints(source, early).equal
