"""The heap keyed state backend against plain-Python baselines, every ratio measured side by side.

One benchmark, ``backend`` (``bench/run.py`` runs it with the others and prints the table):

* value-state update throughput: ``backend.set_current_key(k); state.update(v)`` over
  pre-generated random string keys (all already present), for the copy-on-write backend and the
  NestedStateMap backend, against ``d[k] = v`` on a plain dict; repetitions interleaved. No bar:
  the ratios are information.
* snapshot sync time of a backend of 1M string keys in 128 key groups (max parallelism 128, one
  int64 value state): ``backend.snapshot()`` of the copy-on-write backend, absolute and against
  two deep copies of the same state: the NestedStateMap backend's ``snapshot()`` (the issue's
  baseline: the same API, a per-entry copy of every key group's map) and ``copy.deepcopy`` of a
  plain ``{key: value}`` dict. Also: the time to fill each backend, and ``close()``.

Sizes follow the map benchmarks' :class:`Config` (``--quick`` makes them small):
``throughput_ops`` keys and updates, ``throughput_reps`` repetitions of the update loops,
``snapshot_entries`` keys and ``snapshot_reps`` repetitions of the snapshots.
"""

from __future__ import annotations

import copy
import functools
import gc
import random
import time
from dataclasses import dataclass

from bench_state_maps import (
    NANOS,
    SEED,
    Config,
    Row,
    Section,
    gc_paused,
    median,
    progress,
    ratio_label,
    timed_ns,
)

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.keyed_backend import HeapKeyedStateBackend, KeyedStateSnapshot, MapKind
from statecore.keyed_state import ValueState, value_state

SNAPSHOT_KEY_GROUPS = 128  # = max parallelism: one key group per max-parallelism slot
UPDATE_MAX_PARALLELISM = 128
MAP_KINDS: tuple[MapKind, ...] = ("copy_on_write", "nested")
STATE = value_state("value", "int64")


@dataclass(frozen=True)
class BackendSizes:
    update_keys: int
    update_ops: int
    update_reps: int
    snapshot_keys: int
    snapshot_reps: int

    @classmethod
    def of(cls, cfg: Config) -> BackendSizes:
        return cls(update_keys=cfg.throughput_ops, update_ops=cfg.throughput_ops,
                   update_reps=cfg.throughput_reps, snapshot_keys=cfg.snapshot_entries,
                   snapshot_reps=cfg.snapshot_reps)


def random_string_keys(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct random 16-hex-digit strings (an id-like string key), generation order."""
    keys = dict.fromkeys(f"{rng.getrandbits(64):016x}" for _ in range(n))
    while len(keys) < n:
        keys[f"{rng.getrandbits(64):016x}"] = None
    return list(keys)


def new_backend(map_kind: MapKind, max_parallelism: int
                ) -> tuple[HeapKeyedStateBackend[str], ValueState]:
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend(
        "string", max_parallelism, map_kind=map_kind)
    return backend, backend.get_value_state(STATE)


def time_backend_updates(backend: HeapKeyedStateBackend[str], state: ValueState,
                         ops: list[tuple[str, int]]) -> int:
    set_key, update = backend.set_current_key, state.update
    start = time.perf_counter_ns()
    for k, v in ops:
        set_key(k)
        update(v)
    return time.perf_counter_ns() - start


def time_set_key_only(backend: HeapKeyedStateBackend[str], ops: list[tuple[str, int]]) -> int:
    set_key = backend.set_current_key
    start = time.perf_counter_ns()
    for k, _ in ops:
        set_key(k)
    return time.perf_counter_ns() - start


def time_dict_updates(d: dict[str, int], ops: list[tuple[str, int]]) -> int:
    start = time.perf_counter_ns()
    for k, v in ops:
        d[k] = v
    return time.perf_counter_ns() - start


def fill(backend: HeapKeyedStateBackend[str], state: ValueState, keys: list[str]) -> None:
    set_key, update = backend.set_current_key, state.update
    for i, k in enumerate(keys):
        set_key(k)
        update(i)


# -- 1. value-state update throughput -----------------------------------------------------------


def bench_updates(sizes: BackendSizes, section: Section) -> None:
    rng = random.Random(SEED + 10)
    keys = random_string_keys(rng, sizes.update_keys)
    ops = [(k, rng.getrandbits(62)) for k in rng.choices(keys, k=sizes.update_ops)]
    progress(f"backend updates: prefilling {len(keys):,} keys in each store")
    stores = {kind: new_backend(kind, UPDATE_MAX_PARALLELISM) for kind in MAP_KINDS}
    for backend, state in stores.values():
        fill(backend, state, keys)
    plain = dict(zip(keys, range(len(keys)), strict=True))
    samples: dict[str, list[float]] = {name: [] for name in (*MAP_KINDS, "dict", "set_key")}
    for rep in range(sizes.update_reps):  # interleaved: cow, nested, dict, set_key, cow, ...
        progress(f"backend updates, rep {rep + 1}/{sizes.update_reps}")
        for kind, (backend, state) in stores.items():
            gc.collect()
            samples[kind].append(len(ops) * NANOS / time_backend_updates(backend, state, ops))
        gc.collect()
        samples["dict"].append(len(ops) * NANOS / time_dict_updates(plain, ops))
        gc.collect()
        samples["set_key"].append(
            len(ops) * NANOS / time_set_key_only(stores["copy_on_write"][0], ops))
    for kind, (backend, state) in stores.items():  # both saw the same updates
        for k in rng.sample(keys, min(1000, len(keys))):
            backend.set_current_key(k)
            if state.value() != plain[k]:
                raise AssertionError(f"{kind} backend: {k!r} holds {state.value()}, "
                                     f"dict {plain[k]}")
    label = ratio_label(sizes.update_keys)
    section.rows += [
        Row(f"value update: set_key+update ({label} keys)", median(samples["copy_on_write"]),
            median(samples["dict"]), "ops/s"),
        Row(f"value update, nested backend ({label} keys)", median(samples["nested"]),
            median(samples["dict"]), "ops/s"),
    ]
    set_key_share = median(samples["copy_on_write"]) / median(samples["set_key"])
    section.raw["updates"] = {"keys": len(keys), "ops_per_rep": len(ops),
                              "max_parallelism": UPDATE_MAX_PARALLELISM, "ops_per_s": samples}
    section.notes += [
        f"value update: {len(ops):,} (key, random int) pairs drawn from {len(keys):,} random "
        f"16-hex-digit string keys, all present beforehand (untimed prefill); statecore = "
        f"backend.set_current_key(k); state.update(v) (bound methods, max parallelism "
        f"{UPDATE_MAX_PARALLELISM}, int64 value state, no TTL), baseline = d[k] = v on a "
        f"plain dict; median of {sizes.update_reps} interleaved reps (copy-on-write backend, "
        f"nested backend, dict, ...)",
        f"set_current_key alone (same keys): {median(samples['set_key']) / 1e6:.2f}M ops/s, "
        f"i.e. {set_key_share:.0%} of the copy-on-write loop's time",
        "value update GC: enabled with default thresholds (as an application runs); "
        "gc.collect() before each timed loop",
    ]


# -- 2. snapshot sync time ---------------------------------------------------------------------


def verify_snapshot(snapshot: KeyedStateSnapshot, n: int) -> bool:
    """Consume ``snapshot`` fully (untimed): every key once, state = its fill index."""
    seen = 0
    total = 0
    groups = set()
    for block in snapshot:
        groups.add(block.key_group)
        seen += len(block.entries)
        total += sum(e.state for e in block.entries)
    return (seen == n and total == n * (n - 1) // 2 and len(groups) == SNAPSHOT_KEY_GROUPS
            and snapshot.released)


def bench_snapshots(sizes: BackendSizes, section: Section) -> None:
    n = sizes.snapshot_keys
    keys = random_string_keys(random.Random(SEED + 11), n)
    stores = {kind: new_backend(kind, SNAPSHOT_KEY_GROUPS) for kind in MAP_KINDS}
    times: dict[str, list[int]] = {name: [] for name in (
        "copy_on_write fill", "nested fill", "copy_on_write snapshot", "nested snapshot",
        "dict deepcopy", "copy_on_write close", "nested close")}
    with gc_paused():
        for kind, (backend, state) in stores.items():
            progress(f"backend snapshot: filling the {kind} backend with {n:,} keys")
            took, _ = timed_ns(functools.partial(fill, backend, state, keys))
            times[f"{kind} fill"].append(took)
        plain = dict(zip(keys, range(n), strict=True))
        for rep in range(sizes.snapshot_reps):  # interleaved: cow, nested, deepcopy, cow, ...
            progress(f"backend snapshot rep {rep + 1}/{sizes.snapshot_reps}")
            for kind, (backend, _) in stores.items():
                took, snapshot = timed_ns(backend.snapshot)
                times[f"{kind} snapshot"].append(took)
                times[f"{kind} close"].append(timed_ns(snapshot.close)[0])
                del snapshot
            took, copied = timed_ns(lambda: copy.deepcopy(plain))
            times["dict deepcopy"].append(took)
            del copied
        progress("backend snapshot: consuming one copy-on-write snapshot (untimed check)")
        cow_backend = stores["copy_on_write"][0]
        verified = verify_snapshot(cow_backend.snapshot(), n)
    maps = [m for _, m in cow_backend.table(STATE.name).items_by_key_group()]
    per_group = [len(m) for m in maps]
    rehashing = sum(isinstance(m, CopyOnWriteStateMap) and m.is_rehashing for m in maps)
    pinned = sum(isinstance(m, CopyOnWriteStateMap) and bool(m.snapshot_versions) for m in maps)
    label = ratio_label(n)
    where = f"{label} keys, {SNAPSHOT_KEY_GROUPS} kg"
    section.rows += [
        Row(f"backend fill ({where})", median(times["copy_on_write fill"]),
            median(times["nested fill"]), "ns"),
        Row(f"backend snapshot() ({where})", median(times["copy_on_write snapshot"]),
            median(times["nested snapshot"]), "ns"),
        Row(f"snapshot() vs deepcopy of a dict ({label})",
            median(times["copy_on_write snapshot"]), median(times["dict deepcopy"]), "ns"),
        Row(f"backend snapshot close() ({label})", median(times["copy_on_write close"]),
            median(times["nested close"]), "ns"),
    ]
    section.raw["snapshot"] = {
        "keys": n, "key_groups": SNAPSHOT_KEY_GROUPS, "state": "value state, int64 = fill index",
        "times_ns": times, "keys_per_group": {"min": min(per_group), "max": max(per_group)},
        "cow_maps_rehashing": rehashing, "verified": verified, "pinned_after": pinned}
    section.notes += [
        f"snapshot: {n:,} random 16-hex-digit string keys, max parallelism "
        f"{SNAPSHOT_KEY_GROUPS} = {SNAPSHOT_KEY_GROUPS} key groups ({min(per_group):,} to "
        f"{max(per_group):,} keys each), one int64 value state; statecore = "
        f"backend.snapshot() of the copy-on-write backend; baselines: the NestedStateMap "
        f"backend's snapshot() (a copy of every entry, the issue's deep-copy baseline) and "
        f"copy.deepcopy of a plain {{key: value}} dict of the same {n:,} entries",
        f"median of {sizes.snapshot_reps} interleaved reps; each snapshot closed before the "
        f"next; fill = set_current_key + update of every key once into an empty backend "
        f"(one run each, copy-on-write vs nested)",
        f"copy-on-write maps rehashing at snapshot time: {rehashing} of {len(maps)}",
        "snapshot GC: gc.collect(); gc.freeze(); gc.disable() around the fills and the timed "
        "part (a deep copy would otherwise also pay for collections: disabling GC only helps "
        "the baselines)",
        f"one copy-on-write snapshot consumed afterwards (untimed): {n:,} entries in "
        f"{SNAPSHOT_KEY_GROUPS} key groups, values as filled, released at the end "
        f"({'verified' if verified and not pinned else 'FAILED'})",
    ]


def bench_backend(cfg: Config) -> Section:
    sizes = BackendSizes.of(cfg)
    section = Section("backend")
    bench_updates(sizes, section)
    bench_snapshots(sizes, section)
    return section
