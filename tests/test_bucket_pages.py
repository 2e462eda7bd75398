"""Copy-on-write of bucket pages, on maps large enough to span many pages.

The model test stays below one page (1024 slots); here maps grow through several pages and
doublings while snapshots are held, and two invariants are checked at every step: every open
snapshot still iterates its dict copy, and every page a snapshot holds is unchanged (same
chain heads), i.e. the map copied each shared page before writing to it.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from statecore.bucket_table import EMPTY_PAGE, PAGE_SIZE
from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.serializers import VOID_NAMESPACE, parse_type


def _page_images(snapshot: Any) -> list[tuple[int, ...]]:
    arrays = snapshot._arrays
    pages = list(arrays.primary_pages) + list(arrays.incremental_pages or ())
    return [tuple(id(head) for head in page) for page in pages]


@pytest.mark.parametrize(("capacity", "hash_mode", "step"),
                         [(4, "fast", 4), (1024, "flink", 4), (4096, "fast", 3), (2, "flink", 1)])
def test_shared_pages_are_never_written(capacity: int, hash_mode: str, step: int) -> None:
    rng = random.Random(capacity * 7 + step)
    m: CopyOnWriteStateMap[int, Any, list[int]] = CopyOnWriteStateMap(
        capacity, parse_type("list<int32>"), hash_mode=hash_mode,  # type: ignore[arg-type]
        min_transferred_per_incremental_rehash=step)
    model: dict[int, list[int]] = {}
    open_snapshots: list[tuple[Any, dict[int, list[int]], list[tuple[int, ...]]]] = []
    largest = 0
    for i in range(6000):
        key = rng.randrange(5000)
        roll = rng.random()
        if roll < 0.55:
            m.put(key, VOID_NAMESPACE, [i])
            model[key] = [i]
        elif roll < 0.8:
            state = m.get(key, VOID_NAMESPACE)
            if state is not None:
                state.append(i)
                model[key].append(i)
        elif roll < 0.95:
            assert m.remove_and_get_old(key, VOID_NAMESPACE) == model.pop(key, None)
        elif roll < 0.98 or not open_snapshots:
            snap = m.snapshot()
            open_snapshots.append((snap, copy.deepcopy(model), _page_images(snap)))
        else:
            open_snapshots.pop(rng.randrange(len(open_snapshots)))[0].release()
        largest = max(largest, m.capacity)
        if i % 500 == 0:
            for snap, expected, images in open_snapshots:
                assert _page_images(snap) == images
                assert {e.key: e.state for e in snap} == expected
    assert m.to_dict() == {(k, VOID_NAMESPACE): v for k, v in model.items()}
    assert largest >= 4 * PAGE_SIZE  # the run really spanned several pages
    for snap, expected, images in open_snapshots:
        assert _page_images(snap) == images
        assert {e.key: e.state for e in snap} == expected
        snap.release()
    assert m.snapshot_versions == ()
    assert EMPTY_PAGE == (None,) * PAGE_SIZE
