"""Snapshots iterated and released on another thread while the owner keeps writing.

The owner mutates (puts, in-place appends after get, removes, growth through rehashes) and
takes snapshots; a reader thread iterates each snapshot, compares it with the dict copy taken at
snapshot time, and releases it. Many rounds: no divergence, no exception on either thread.
"""

from __future__ import annotations

import copy
import queue
import random
import sys
import threading
from typing import Any

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.serializers import VOID_NAMESPACE, parse_type

Snapshot = Any
_DONE = object()


def _run(hash_mode: str, seed: int, rounds: int, ops_per_round: int) -> tuple[int, list[str]]:
    rng = random.Random(seed)
    m: CopyOnWriteStateMap[int, Any, list[int]] = CopyOnWriteStateMap(
        8, parse_type("list<int64>"), hash_mode=hash_mode)  # type: ignore[arg-type]
    model: dict[tuple[int, Any], list[int]] = {}
    handoff: queue.Queue[Any] = queue.Queue(maxsize=4)
    errors: list[str] = []
    checked = 0

    def reader() -> None:
        nonlocal checked
        while (item := handoff.get()) is not _DONE:
            snap, expected = item
            try:
                seen = {}
                for i, entry in enumerate(snap):
                    seen[(entry.key, entry.namespace)] = list(entry.state)
                    if i % 64 == 0:
                        threading.Event().wait(0)  # yield to the writer mid-iteration
                if seen != expected:
                    errors.append(f"snapshot {snap.snapshot_version} diverged")
                checked += 1
            except Exception as exc:  # collected and asserted on the main thread
                errors.append(f"reader: {exc!r}")
            finally:
                snap.release()

    thread = threading.Thread(target=reader, name="snapshot-reader")
    thread.start()
    key_space = 4000
    try:
        for round_number in range(rounds):
            for _ in range(ops_per_round):
                key = rng.randrange(key_space)
                ns = VOID_NAMESPACE if key % 3 else key % 5
                roll = rng.random()
                if roll < 0.45:
                    m.put(key, ns, [round_number])
                    model[(key, ns)] = [round_number]
                elif roll < 0.85:
                    state = m.get(key, ns)
                    if state is not None:
                        state.append(round_number)  # in place, while snapshots are read
                        model[(key, ns)].append(round_number)
                else:
                    assert m.remove_and_get_old(key, ns) == model.pop((key, ns), None)
            handoff.put((m.snapshot(), copy.deepcopy(model)))
    finally:
        handoff.put(_DONE)
        thread.join(timeout=120)
    assert not thread.is_alive(), "reader thread hung"
    assert m.to_dict() == model
    assert m.snapshot_versions == ()  # every snapshot released, from the other thread
    assert m.highest_required_snapshot_version == 0
    return checked, errors


def test_snapshots_read_and_released_on_another_thread() -> None:
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, to interleave as much as possible
    try:
        for hash_mode, seed in (("fast", 1), ("flink", 2)):
            checked, errors = _run(hash_mode, seed, rounds=150, ops_per_round=200)
            assert not errors, errors[:5]
            assert checked == 150
    finally:
        sys.setswitchinterval(old_interval)
