"""`statecore.map_trace`: the script language, and the seed walkthroughs step by step.

The walkthrough tests assert, after every operation, the versions and chains the seed articles
draw (seeds 000 and 001 in ../shared/seeds): they are ported examples, not snapshots of our
output. One test reads the same facts back from `statectl --output json trace --example`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import statectl
from cli.walkthroughs import walkthrough_script
from statecore.errors import TraceScriptError
from statecore.map_trace import (
    TraceResult,
    TraceStep,
    parse_script,
    run_script,
    run_trace,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.state_map import StateEntry
from statecore.state_map_layout import EntryView, MapLayout

V = VOID_NAMESPACE


# -- helpers --------------------------------------------------------------------------------------


def walkthrough(name: str) -> TraceResult:
    return run_script(walkthrough_script(name))


def steps_by_source(result: TraceResult) -> dict[str, TraceStep]:
    """Steps by source line; a repeated line (``release 1`` twice) keeps the last one."""
    return {step.source: step for step in result.steps}


def step_at(result: TraceResult, source: str, occurrence: int = 0) -> TraceStep:
    matches = [step for step in result.steps if step.source == source]
    assert len(matches) > occurrence, f"no step {source!r} #{occurrence}"
    return matches[occurrence]


def live_chain(layout: MapLayout, key: Any) -> tuple[EntryView, ...]:
    """The chain (primary or rehash table) holding ``key``."""
    for _, chain in (*layout.primary_chains, *layout.incremental_rehash_chains):
        if any(e.key == key for e in chain):
            return chain
    raise AssertionError(f"{key!r} is not in the map")


def snapshot_chain(layout: MapLayout, version: int, key: Any) -> tuple[EntryView, ...]:
    (snapshot,) = [s for s in layout.snapshots if s.version == version]
    for _, chain in snapshot.chains:
        if any(e.key == key for e in chain):
            return chain
    raise AssertionError(f"{key!r} is not in snapshot {version}")


def keys(chain: tuple[EntryView, ...]) -> list[Any]:
    return [e.key for e in chain]


def versions(chain: tuple[EntryView, ...]) -> list[tuple[Any, int, int]]:
    """``(key, entry_version, state_version)`` head to tail."""
    return [(e.key, e.entry_version, e.state_version) for e in chain]


def copied_keys(step: TraceStep) -> set[Any]:
    return {key for key, _ in step.copied}


def table(chains: tuple[tuple[int, tuple[EntryView, ...]], ...]) -> dict[int, list[Any]]:
    return {bucket: keys(chain) for bucket, chain in chains}


def counters(layout: MapLayout) -> tuple[int, int, tuple[int, ...]]:
    return (layout.state_map_version, layout.highest_required_snapshot_version,
            layout.snapshot_versions)


# -- seed 000: copy-on-write ----------------------------------------------------------------------


def test_seed000_copy_on_write_walkthrough() -> None:
    result = walkthrough("seed000-copy-on-write")
    assert result.settings.capacity == 4
    assert result.settings.hash_overrides == ((42, 0), (23, 0))
    assert [s.source for s in result.steps] == [
        "put 23 3", "put 42 7", "snapshot", "put 13 2", "get 23", "get 42", "release 1",
        "snapshot", "remove 23", "release 2"]

    # Initial state: one chain K:42 (S:7) -> K:23 (S:3), versions 0.
    initial = step_at(result, "put 42 7").layout
    assert versions(live_chain(initial, 42)) == [(42, 0, 0), (23, 0, 0)]
    assert [e.state for e in live_chain(initial, 42)] == [7, 3]
    assert counters(initial) == (0, 0, ())

    # snapshot(): version 1, everything shared with it.
    snap = step_at(result, "snapshot")
    assert snap.result == 1
    assert counters(snap.layout) == (1, 1, (1,))
    assert all(e.shared_with == (1,) for e in live_chain(snap.layout, 42))
    assert snap.copied == ()

    # put(13, 2): a new entry with versions 1, nothing copied.
    put13 = step_at(result, "put 13 2")
    assert versions(live_chain(put13.layout, 13)) == [(13, 1, 1)]
    assert live_chain(put13.layout, 13)[0].shared_with == ()
    assert versions(live_chain(put13.layout, 42)) == [(42, 0, 0), (23, 0, 0)]
    assert put13.copied == ()

    # get(23): 23 copied (1/1), 42 copied too (entry 1, state still 0); the snapshot keeps the
    # original objects, which the map no longer reaches.
    get23 = step_at(result, "get 23")
    assert get23.result == 3
    assert versions(live_chain(get23.layout, 42)) == [(42, 1, 0), (23, 1, 1)]
    assert all(e.shared_with == () and e.live for e in live_chain(get23.layout, 42))
    assert copied_keys(get23) == {42, 23}
    assert get23.copied == ((42, V), (23, V))
    old = snapshot_chain(get23.layout, 1, 42)
    assert versions(old) == [(42, 0, 0), (23, 0, 0)]
    assert [e.live for e in old] == [False, False]
    assert [e.shared_with for e in old] == [(1,), (1,)]
    assert counters(get23.layout) == (1, 1, (1,))

    # get(42): entry_version 1 == highest required: not copied again; its state is (s1).
    get42 = step_at(result, "get 42")
    assert get42.result == 7
    assert versions(live_chain(get42.layout, 42)) == [(42, 1, 1), (23, 1, 1)]
    assert get42.copied == ()

    # release(1): highest required back to 0, no snapshot left in the layout.
    release1 = step_at(result, "release 1")
    assert counters(release1.layout) == (1, 0, ())
    assert release1.layout.snapshots == ()

    # snapshot(): version 2.
    snap2 = step_at(result, "snapshot", 1)
    assert snap2.result == 2
    assert counters(snap2.layout) == (2, 2, (2,))

    # remove(23): predecessor 42 copied with entry_version 2, state_version unchanged (1).
    remove23 = step_at(result, "remove 23")
    assert versions(live_chain(remove23.layout, 42)) == [(42, 2, 1)]
    assert copied_keys(remove23) == {42}
    old2 = snapshot_chain(remove23.layout, 2, 42)
    assert versions(old2) == [(42, 1, 1), (23, 1, 1)]
    assert [e.live for e in old2] == [False, False]
    # K:13 is untouched and still shared with snapshot 2.
    assert live_chain(remove23.layout, 13)[0].shared_with == (2,)

    release2 = step_at(result, "release 2")
    assert counters(release2.layout) == (2, 0, ())
    assert release2.layout.size == 2


# -- seed 000: incremental rehash -----------------------------------------------------------------


def test_seed000_incremental_rehash_walkthrough() -> None:
    result = walkthrough("seed000-incremental-rehash")
    assert (result.settings.capacity, result.settings.hash_mode,
            result.settings.min_transfer) == (4, "identity", 1)
    by_source = steps_by_source(result)

    before = by_source["put 6 4"].layout
    assert not before.rehashing
    assert table(before.primary_chains) == {0: [0], 1: [5, 1], 2: [6]}
    assert before.threshold == 3

    # put(3, 5): size 4 > threshold 3 -> the rehash table (8) exists, nothing moved yet, K:3 in
    # the OLD table's bucket 3.
    put3 = by_source["put 3 5"].layout
    assert put3.rehashing
    assert (put3.primary_table_length, put3.incremental_rehash_table_length) == (4, 8)
    assert put3.rehash_index == 0
    assert table(put3.primary_chains) == {0: [0], 1: [5, 1], 2: [6], 3: [3]}
    assert table(put3.incremental_rehash_chains) == {}

    # get(0): bucket 0 moved, K:0 found in the new table.
    get0 = by_source["get 0"]
    assert get0.result == 2
    assert get0.layout.rehash_index == 1
    assert table(get0.layout.primary_chains) == {1: [5, 1], 2: [6], 3: [3]}
    assert table(get0.layout.incremental_rehash_chains) == {0: [0]}

    # remove(1): bucket 1 (K:1, K:5) moved, then K:1 removed from the new table.
    remove1 = by_source["remove 1"].layout
    assert remove1.rehash_index == 2
    assert table(remove1.primary_chains) == {2: [6], 3: [3]}
    assert table(remove1.incremental_rehash_chains) == {0: [0], 5: [5]}
    assert (remove1.size, remove1.primary_table_size, remove1.incremental_rehash_table_size) \
        == (4, 2, 2)

    # get(5): bucket 2 (K:6) moved, K:5 found in the new table.
    get5 = by_source["get 5"]
    assert get5.result == 7
    assert get5.layout.rehash_index == 3
    assert table(get5.layout.primary_chains) == {3: [3]}
    assert table(get5.layout.incremental_rehash_chains) == {0: [0], 5: [5], 6: [6]}

    # get(6): bucket 3 (K:3) moved: rehash finished, the 8-bucket table is primary.
    get6 = by_source["get 6"]
    assert get6.result == 4
    done = get6.layout
    assert not done.rehashing
    assert (done.primary_table_length, done.incremental_rehash_table_length) == (8, 2)
    assert done.rehash_index == 0
    assert table(done.primary_chains) == {0: [0], 3: [3], 5: [5], 6: [6]}
    assert table(done.incremental_rehash_chains) == {}
    # No snapshot was open: moving entries never copies them.
    assert all(step.copied == () for step in result.steps)


# -- seed 001: which entries of a chain are copied ------------------------------------------------


def test_seed001_chain_copy_walkthrough() -> None:
    result = walkthrough("seed001-chain-copy")

    base = step_at(result, 'put a ["data1"]').layout
    assert keys(live_chain(base, "a")) == ["a", "b", "c"]

    # §5.2.1 modify the head: only a copied; b and c shared with snapshot 1.
    head = step_at(result, 'put a ["data2"]')
    assert copied_keys(head) == {"a"}
    chain = live_chain(head.layout, "a")
    assert versions(chain) == [("a", 1, 1), ("b", 0, 0), ("c", 0, 0)]
    assert [e.shared_with for e in chain] == [(), (1,), (1,)]
    assert [e.live for e in snapshot_chain(head.layout, 1, "a")] == [False, True, True]
    assert [e.state for e in snapshot_chain(head.layout, 1, "a")] == [["data1"]] * 3

    # §5.2.2 modify the middle: a and b copied, c shared.
    middle = step_at(result, 'put b ["data2"]')
    assert copied_keys(middle) == {"a", "b"}
    chain = live_chain(middle.layout, "a")
    assert versions(chain) == [("a", 2, 1), ("b", 2, 2), ("c", 0, 0)]
    assert [e.shared_with for e in chain] == [(), (), (2,)]
    assert [e.live for e in snapshot_chain(middle.layout, 2, "a")] == [False, False, True]

    # §5.2.3 insert d: head insertion, nothing copied, the snapshot does not see d.
    insert = step_at(result, 'put d ["data1"]')
    assert insert.copied == ()
    chain = live_chain(insert.layout, "d")
    assert versions(chain)[0] == ("d", 3, 3)
    assert keys(chain) == ["d", "a", "b", "c"]
    assert [e.shared_with for e in chain] == [(), (3,), (3,), (3,)]
    assert keys(snapshot_chain(insert.layout, 3, "a")) == ["a", "b", "c"]

    # §5.2.4 new head d, then modify b: a and b copied, d not (it is newer than snapshot 3).
    after_d = step_at(result, 'put b ["data3"]')
    assert copied_keys(after_d) == {"a", "b"}
    chain = live_chain(after_d.layout, "d")
    assert versions(chain) == [("d", 3, 3), ("a", 3, 1), ("b", 3, 3), ("c", 0, 0)]
    assert [e.shared_with for e in chain] == [(), (), (), (3,)]

    # Back to a -> b -> c without copying (no snapshot open).
    assert step_at(result, "remove d").copied == ()

    # §5.2.5 get of a middle entry copies like a write; the caller's mutation stays in the map.
    get_b = step_at(result, "get_append b appended")
    assert get_b.result == ["data3", "appended"]
    assert copied_keys(get_b) == {"a", "b"}
    chain = live_chain(get_b.layout, "a")
    assert versions(chain) == [("a", 4, 1), ("b", 4, 4), ("c", 0, 0)]
    assert chain[1].state == ["data3", "appended"]
    old = snapshot_chain(get_b.layout, 4, "a")
    assert [e.state for e in old] == [["data2"], ["data3"], ["data1"]]
    assert [e.live for e in old] == [False, False, True]
    # ... then get a: the entry is already a copy, only its state is copied.
    get_a = step_at(result, "get a")
    assert get_a.copied == ()
    assert versions(live_chain(get_a.layout, "a"))[0] == ("a", 4, 4)

    # §5.2.6 case 1, remove the head: the bucket points to the next entry, nothing copied.
    remove_head = step_at(result, "remove a")
    assert remove_head.copied == ()
    assert versions(live_chain(remove_head.layout, "b")) == [("b", 4, 4), ("c", 0, 0)]
    assert [e.live for e in snapshot_chain(remove_head.layout, 5, "a")] == [False, True, True]

    # §5.2.6 case 2, remove a non-head: its predecessor is copied.
    remove_b = step_at(result, "remove b")
    assert copied_keys(remove_b) == {"a"}
    assert versions(live_chain(remove_b.layout, "a")) == [("a", 6, 5), ("c", 0, 0)]
    old = snapshot_chain(remove_b.layout, 6, "a")
    assert keys(old) == ["a", "b", "c"]
    assert [e.live for e in old] == [False, False, True]
    read = step_at(result, "read 6")
    assert read.result == (StateEntry("a", V, ["data4"]),
                           StateEntry("b", V, ["data3", "appended"]),
                           StateEntry("c", V, ["data1"]))

    final = result.steps[-1]
    assert final.source == "release 6"
    assert counters(final.layout) == (6, 0, ())


def test_seed000_json_output_matches_the_seed() -> None:
    runner = CliRunner()
    completed = runner.invoke(statectl, ["--output", "json", "trace", "--example",
                                         "seed000-copy-on-write"])
    assert completed.exit_code == 0, completed.output
    document = json.loads(completed.stdout)
    steps: dict[str, Any] = {}
    for step in document["steps"]:
        steps.setdefault(step["source"], step)  # the first of repeated lines
    get23 = steps["get 23"]
    assert get23["line"] > 0
    assert get23["op"] == "get"
    assert get23["args"] == [23]
    assert get23["result"] == 3
    assert sorted(c["key"] for c in get23["copied"]) == [23, 42]
    assert all(c["namespace"] is None for c in get23["copied"])
    layout = get23["layout"]
    assert layout["state_map_version"] == 1
    assert layout["highest_required_snapshot_version"] == 1
    assert layout["snapshot_versions"] == [1]
    assert layout["rehashing"] is False
    assert layout["incremental_rehash_chains"] == []
    (chain,) = [c for c in layout["primary_chains"] if c["bucket"] == 0]
    assert [(e["key"], e["entry_version"], e["state_version"], e["live"], e["shared_with"])
            for e in chain["entries"]] == [(42, 1, 0, True, []), (23, 1, 1, True, [])]
    assert chain["entries"][0]["namespace"] is None
    assert chain["entries"][0]["state"] == 7
    assert chain["entries"][0]["hash"] == 0
    (snapshot,) = layout["snapshots"]
    assert snapshot["version"] == 1
    assert snapshot["array_length"] == 4
    assert [(e["key"], e["entry_version"], e["live"], e["shared_with"])
            for e in snapshot["chains"][0]["entries"]] == [(42, 0, False, [1]), (23, 0, False, [1])]
    assert steps["snapshot"]["result"] == 1
    assert [c["key"] for c in steps["remove 23"]["copied"]] == [42]
    assert document["settings"]["hash_overrides"] == [{"key": 42, "hash": 0},
                                                      {"key": 23, "hash": 0}]


# -- the script language --------------------------------------------------------------------------


def test_values_are_json_literals_or_bare_words() -> None:
    commands = parse_script(
        'put 7 -1\n'
        'put word 2.5 ns\n'
        'put "a b" [1, 2]   # list with a blank\n'
        'put x "# not a comment"\n'
        'put t true\n'
        'put n null\n'
        'put o {"k": [1]}\n')
    assert [c.args for c in commands] == [
        (7, -1), ("word", 2.5, "ns"), ("a b", [1, 2]), ("x", "# not a comment"),
        ("t", True), ("n", None), ("o", {"k": [1]})]
    assert commands[2].notes == ("list with a blank",)
    assert commands[2].source == 'put "a b" [1, 2]'


def test_comments_become_notes_of_the_next_command() -> None:
    commands = parse_script("# title\n\ncapacity 8\n# first\n# second\nput 1 2 # inline\n"
                            "get 1\n# trailing, attached to nothing\n")
    assert [(c.op, c.notes) for c in commands] == [
        ("capacity", ("title",)), ("put", ("first", "second", "inline")), ("get", ())]
    assert [c.line_number for c in commands] == [3, 6, 7]
    result = run_trace(commands)
    assert result.preamble == ("title",)
    assert result.steps[0].notes == ("first", "second", "inline")


@pytest.mark.parametrize(
    ("script", "line", "message"),
    [
        ("put 1 2\nfrobnicate 3\n", 2, "unknown command 'frobnicate'"),
        ('"put" 1 2\n', 1, "unknown command"),
        ("put 1\n", 1, "put takes 2 or 3 arguments, got 1"),
        ("get 1 ns extra\n", 1, "get takes 1 or 2 arguments, got 3"),
        ("snapshot 1\n", 1, "snapshot takes no arguments, got 1"),
        ("release\n", 1, "release takes 1 argument, got 0"),
        ("release one\n", 1, "expected an integer"),
        ("release 0\n", 1, "snapshot versions start at 1"),
        ("put [1 2\n", 1, "bad value '[1 2'"),
        ('put "open 1\n', 1, "bad value"),
        ("put [1]x 2\n", 1, "unexpected text after the JSON value"),
        ("put 1 NaN\n", 1, "not a finite number"),
        ("put 1 [Infinity]\n", 1, "Infinity is not allowed"),
        ("put [1] 2\n", 1, "a key must be a string or a number"),
        ("put true 2\n", 1, "a key must be a string or a number"),
        ("put 1 2 [3]\n", 1, "a namespace must be a string or a number"),
        ("\n\nput 1 2\ncapacity 4\n", 4, "directive 'capacity' must come before"),
        ("capacity 4\ncapacity 8\n", 2, "'capacity' is set twice"),
        ("hash 1 2\nhash 1 3\n", 2, "hash of 1 is set twice"),
        ("capacity -1\n", 1, "capacity must be non-negative"),
        ("min-transfer 0\n", 1, "min-transfer must be at least 1"),
        ("hash-mode speedy\n", 1, "unknown hash mode speedy"),
        ("hash a b\n", 1, "expected an integer"),
    ],
)
def test_parse_errors_name_the_line(script: str, line: int, message: str) -> None:
    with pytest.raises(TraceScriptError) as info:
        parse_script(script)
    assert info.value.line_number == line
    assert str(info.value).startswith(f"line {line}: ")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("script", "line", "message"),
    [
        ("release 1\n", 1, "no snapshot has version 1 (taken so far: none)"),
        ("snapshot\nrelease 2\n", 2, "no snapshot has version 2 (taken so far: 1)"),
        ("snapshot\nrelease 1\nrelease 1\n", 3, "snapshot 1 is already released"),
        ("snapshot\nrelease 1\nread 1\n", 3, "snapshot 1 is already released"),
        ("read 3\n", 1, "no snapshot has version 3"),
        ("hash-mode identity\nput 1 2\nput a 2\n", 3, "needs int keys"),
        ("put a 2\nget_append a 3\n", 2, "get_append needs a list state"),
        ("get_append a 3\n", 1, "get_append needs a list state"),
        ('put a "x"\ntransform a 3\n', 2, "cannot transform state"),
        ("put a 1\ntransform a [1]\n", 2, "cannot transform state"),
    ],
)
def test_run_errors_name_the_line(script: str, line: int, message: str) -> None:
    with pytest.raises(TraceScriptError) as info:
        run_script(script)
    assert info.value.line_number == line
    assert message in str(info.value)


def test_options_override_directives() -> None:
    commands = parse_script("capacity 4\nhash-mode identity\nmin-transfer 1\nput 1 1\n")
    from_script = run_trace(commands)
    assert (from_script.settings.capacity, from_script.settings.hash_mode,
            from_script.settings.min_transfer) == (4, "identity", 1)
    assert from_script.steps[0].layout.primary_table_length == 4
    overridden = run_trace(commands, capacity=16, hash_mode="flink", min_transfer=2)
    assert (overridden.settings.capacity, overridden.settings.hash_mode,
            overridden.settings.min_transfer) == (16, "flink", 2)
    assert overridden.steps[0].layout.primary_table_length == 16
    defaults = run_script("put 1 1\n")
    assert (defaults.settings.capacity, defaults.settings.hash_mode,
            defaults.settings.min_transfer) == (128, "flink", 4)
    with pytest.raises(TraceScriptError, match="capacity must be non-negative"):
        run_trace(commands, capacity=-1)
    with pytest.raises(TraceScriptError, match="unknown hash mode"):
        run_trace(commands, hash_mode="speedy")  # type: ignore[arg-type]


def test_operations_and_their_results() -> None:
    result = run_script(
        "put a 1 w1\nget a\nget a w1\ncontains a w1\ncontains a\n"
        "put_and_get_old a 5 w1\nremove_and_get_old a w1\nremove_and_get_old a w1\n"
        "transform x 1\ntransform x 2.5\ntransform y z\ntransform y [3]\n"
        "snapshot\nread 1\nrelease 1\n")
    assert [(s.op, s.result) for s in result.steps] == [
        ("put", None), ("get", None), ("get", 1), ("contains", True), ("contains", False),
        ("put_and_get_old", 1), ("remove_and_get_old", 5), ("remove_and_get_old", None),
        ("transform", None), ("transform", None), ("transform", None), ("transform", None),
        ("snapshot", 1),
        ("read", (StateEntry("y", V, ["z", [3]]), StateEntry("x", V, 3.5))),
        ("release", None)]
    assert [s.has_result for s in result.steps[:2]] == [False, True]
    # The namespace is part of the composite key; VOID when omitted.
    first = result.steps[0].layout
    assert [(e.key, e.namespace) for e in live_chain(first, "a")] == [("a", "w1")]


def test_steps_are_frozen_in_time() -> None:
    # get_append mutates the live state after it was recorded by earlier steps.
    script = "put a [1]\nget a\nget_append a 2\nget_append a 3\n"
    commands = parse_script(script)
    result = run_trace(commands)
    assert [s.result for s in result.steps] == [None, [1], [1, 2], [1, 2, 3]]
    assert [live_chain(s.layout, "a")[0].state for s in result.steps] == [
        [1], [1], [1, 2], [1, 2, 3]]
    # The parsed commands were not mutated: running them again gives the same trace.
    assert run_trace(commands) == result
    assert commands[0].args == ("a", [1])


def test_get_append_with_a_snapshot_open_shows_the_defensive_copy() -> None:
    result = run_script("put a [1]\nsnapshot\nget_append a 2\nread 1\n")
    step = result.steps[2]
    assert step.result == [1, 2]
    assert copied_keys(step) == {"a"}
    assert [e.state for e in snapshot_chain(step.layout, 1, "a")] == [[1]]
    assert result.steps[3].result == (StateEntry("a", V, [1]),)


def test_copies_made_by_the_incremental_rehash_are_reported() -> None:
    # A snapshot taken before the rehash holds every old entry: moving them copies them
    # (contains copies nothing by itself).
    script = ("capacity 4\nhash-mode identity\nmin-transfer 1\n"
              "put 0 0\nput 1 1\nput 2 2\nput 3 3\nsnapshot\nput 4 4\ncontains 1\n")
    result = run_script(script)
    grow, move = result.steps[-2], result.steps[-1]
    assert grow.layout.rehashing and grow.copied == ()
    assert move.layout.rehash_index == 1
    assert copied_keys(move) == {0}
    (moved,) = live_chain(move.layout, 0)
    assert (moved.entry_version, moved.shared_with) == (1, ())


# -- a model check: snapshots read what the map held, and `copied` is exactly the COW -------------

_KEYS = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
_OPS = st.one_of(
    st.tuples(st.just("put"), _KEYS, st.integers(-3, 3)),
    st.tuples(st.just("get"), _KEYS),
    st.tuples(st.just("get_append"), _KEYS, st.integers(0, 3)),
    st.tuples(st.just("remove"), _KEYS),
    st.tuples(st.just("transform"), _KEYS, st.integers(0, 3)),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("release")),
)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(_OPS, max_size=40), pins=st.booleans())
def test_random_scripts_against_a_dict_model(ops: list[tuple[Any, ...]], pins: bool) -> None:
    lines = ["capacity 4", "min-transfer 1", "hash-mode identity"]
    if pins:  # everything in one chain: the most copying
        lines += [f"hash {k} 0" for k in range(10)]
    model: dict[int, Any] = {}
    snapshots: dict[int, dict[int, Any]] = {}
    open_versions: list[int] = []
    expected_reads: list[tuple[int, dict[int, Any]]] = []
    version = 0
    for op in ops:
        name = op[0]
        if name == "put":
            lines.append(f"put {op[1]} {op[2]}")
            model[op[1]] = op[2]
        elif name == "get":
            lines.append(f"get {op[1]}")
        elif name == "get_append":
            if not isinstance(model.get(op[1]), list):
                continue
            lines.append(f"get_append {op[1]} {op[2]}")
            model[op[1]] = [*model[op[1]], op[2]]
        elif name == "remove":
            lines.append(f"remove {op[1]}")
            model.pop(op[1], None)
        elif name == "transform":
            current = model.get(op[1])
            if current is not None and not isinstance(current, list):
                continue  # a number cannot take a list
            lines.append(f"transform {op[1]} [{op[2]}]")
            model[op[1]] = [[op[2]]] if current is None else [*current, [op[2]]]
        elif name == "snapshot":
            version += 1
            lines.append("snapshot")
            snapshots[version] = {k: json.loads(json.dumps(v)) for k, v in model.items()}
            open_versions.append(version)
        elif name == "release" and open_versions:
            oldest = open_versions.pop(0)
            lines.append(f"read {oldest}")
            expected_reads.append((oldest, snapshots[oldest]))
            lines.append(f"release {oldest}")
    for still_open in open_versions:
        lines.append(f"read {still_open}")
        expected_reads.append((still_open, snapshots[still_open]))

    result = run_script("\n".join(lines))
    reads = [s for s in result.steps if s.op == "read"]
    assert [(s.args[0], {e.key: e.state for e in s.result}) for s in reads] == expected_reads
    final = result.steps[-1].layout if result.steps else result.initial_layout
    assert {e.key: e.state for _, c in (*final.primary_chains, *final.incremental_rehash_chains)
            for e in c} == model

    previous = result.initial_layout
    for step in result.steps:
        before = {e.key: e for _, c in (*previous.primary_chains,
                                        *previous.incremental_rehash_chains) for e in c}
        for key, namespace in step.copied:
            assert namespace is V
            # Only an entry a snapshot may still need is ever copied ...
            assert before[key].entry_version < previous.highest_required_snapshot_version
            assert before[key].shared_with
            # ... and the copy is never shared.
            (copy,) = [e for e in live_chain(step.layout, key) if e.key == key]
            assert copy.shared_with == ()
            assert copy.entry_version == step.layout.state_map_version
        # Entries only snapshots reach are marked as such.
        for snapshot in step.layout.snapshots:
            for _, chain in snapshot.chains:
                for entry in chain:
                    assert snapshot.version in entry.shared_with
        previous = step.layout


@pytest.mark.parametrize(("script", "message"), [
    ('put "\\ud800" 1\n', "lone surrogate"),
    ("put a " + "[" * 900 + "]" * 900 + "\n", "nested"),
    ("put a " + "[" * 100_000 + "\n", "nested"),
    ("put a " + "9" * 4301 + "\n", "64-bit"),
    ("put a " + str(2**63) + "\n", "64 bits"),
    ("put a [1e400]\n", "finite"),
    ("put a 9223372036854775807\ntransform a 1\n", "overflows"),
    ("put a 1e308\ntransform a 1e308\n", "overflows"),
    ("capacity 65537\nput a 1\n", "at most 65536"),
])
def test_values_a_java_state_cannot_hold_are_refused(script: str, message: str) -> None:
    with pytest.raises(TraceScriptError, match=message):
        run_script(script)


def test_byte_order_mark_and_form_feeds_do_not_shift_lines() -> None:
    result = run_script("\ufeffput a 1\n\fget a\nget b \u2028\n")
    assert [step.line_number for step in result.steps] == [1, 2, 3]
    with pytest.raises(TraceScriptError, match="line 2"):
        run_script("put a 1\n\fbogus\n")
