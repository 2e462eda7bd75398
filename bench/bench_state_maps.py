"""CopyOnWriteStateMap against its baselines, every figure a ratio measured side by side.

Three benchmarks (``bench/run.py`` runs them and prints the table):

* ``throughput``: ops/s of CopyOnWriteStateMap ("fast" hash mode, no snapshot open) and of
  NestedStateMap on the same pre-generated random operations, repetitions interleaved.
* ``snapshot``: ``snapshot()`` of 1M entries whose states are small mutable lists: the
  copy-on-write snapshot (bucket arrays + a version) against NestedStateMap's synchronous deep
  copy; plus ``release()`` and copy-on-write ``get()`` after a snapshot.
* ``latency``: per-put latency while growing to 1M entries: the map as is (incremental rehash)
  against the same map with a stop-the-world doubling (:class:`StopTheWorldRehashStateMap`).
"""

from __future__ import annotations

import bisect
import gc
import random
import statistics
import sys
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from statecore.bucket_table import BucketTable
from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.nested_state_map import NestedStateMap
from statecore.serializers import VOID_NAMESPACE, TypeSerializer, parse_type
from statecore.state_map import StateMap
from statecore.state_map_entry import StateMapEntry

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")

NS = VOID_NAMESPACE
NANOS = 1_000_000_000
SEED = 20240601

# Operation codes of the mixed workload.
GET, PUT, REMOVE = 0, 1, 2
MIXED_WEIGHTS = {GET: 60, PUT: 30, REMOVE: 10}


# -- configuration and results ------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    throughput_sizes: tuple[int, ...]
    throughput_ops: int
    throughput_reps: int
    snapshot_entries: int
    snapshot_reps: int
    mutate_after_snapshot: int
    latency_entries: int
    latency_reps: int


FULL = Config(throughput_sizes=(16_384, 1_000_000), throughput_ops=200_000, throughput_reps=5,
              snapshot_entries=1_000_000, snapshot_reps=5, mutate_after_snapshot=10_000,
              latency_entries=1_000_000, latency_reps=3)
QUICK = Config(throughput_sizes=(2_048, 50_000), throughput_ops=20_000, throughput_reps=3,
               snapshot_entries=50_000, snapshot_reps=3, mutate_after_snapshot=1_000,
               latency_entries=50_000, latency_reps=1)


@dataclass(frozen=True)
class Bar:
    """An acceptance bar on a ratio: ``ratio >= threshold`` or ``ratio <= threshold``."""

    op: Literal[">=", "<="]
    threshold: float
    label: str

    def met(self, ratio: float) -> bool:
        return ratio >= self.threshold if self.op == ">=" else ratio <= self.threshold


@dataclass(frozen=True)
class Row:
    """One table row: statecore's figure, the baseline's, their ratio and the bar (if any)."""

    name: str
    statecore: float
    baseline: float
    unit: Literal["ops/s", "ns", "bytes", "B/s"]
    bar: Bar | None = None

    @property
    def ratio(self) -> float:
        return self.statecore / self.baseline

    @property
    def result(self) -> str:
        if self.bar is None:
            return "info"
        return "PASS" if self.bar.met(self.ratio) else "MISS"


@dataclass
class Section:
    """One benchmark's rows, the notes printed under the table and raw data for the JSON."""

    name: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- shared helpers ---------------------------------------------------------------------------


def distinct_random_keys(rng: random.Random, n: int) -> list[int]:
    """``n`` distinct random 62-bit ints (int64 keys), in generation order."""
    keys = dict.fromkeys(rng.getrandbits(62) for _ in range(n))
    while len(keys) < n:
        keys[rng.getrandbits(62)] = None
    return list(keys)


@contextmanager
def gc_paused() -> Iterator[None]:
    """``gc.collect(); gc.freeze(); gc.disable()`` for the block, then GC as before."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.unfreeze()


@contextmanager
def gc_on_after_collect() -> Iterator[None]:
    """``gc.collect(); gc.freeze(); gc.enable()`` for the block (default thresholds)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.enable()
    try:
        yield
    finally:
        if not was_enabled:
            gc.disable()
        gc.unfreeze()


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio_label(size: int) -> str:
    return f"{size // 1000}k" if size < 1_000_000 else f"{size / 1_000_000:g}M"


# -- 1. throughput -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Pre-generated random operations, identical for both maps."""

    prefill: list[int]
    #: keys of the get and put-update runs (existing keys, drawn with replacement)
    lookups: list[int]
    #: remove runs: batches of distinct existing keys; each batch is then re-inserted
    #: (new keys again at that point) in the order of the matching ``reinserts`` batch
    removals: list[list[int]]
    reinserts: list[list[int]]
    #: (operation code, key) over a key space twice the prefill size
    mixed: list[tuple[int, int]]

    @classmethod
    def generate(cls, rng: random.Random, size: int, ops: int) -> Workload:
        key_space = distinct_random_keys(rng, 2 * size)
        prefill = key_space[:size]
        batch = min(size // 4, ops)
        removals = [rng.sample(prefill, batch) for _ in range(ops // batch)]
        codes = rng.choices(list(MIXED_WEIGHTS), weights=list(MIXED_WEIGHTS.values()), k=ops)
        return cls(
            prefill=prefill,
            lookups=rng.choices(prefill, k=ops),
            removals=removals,
            reinserts=[rng.sample(b, len(b)) for b in removals],
            mixed=list(zip(codes, rng.choices(key_space, k=ops), strict=True)),
        )

    def mixed_profile(self) -> dict[str, float]:
        """What the mixed run does to the map (simulated with a set, untimed)."""
        present = set(self.prefill)
        puts = inserts = removes = misses = 0
        for code, key in self.mixed:
            if code == PUT:
                puts += 1
                inserts += key not in present
                present.add(key)
            elif code == REMOVE:
                removes += 1
                misses += key not in present
                present.discard(key)
        return {"puts_inserting": inserts / puts, "removes_missing": misses / removes,
                "size_before": len(self.prefill), "size_after": len(present)}


def time_gets(m: StateMap[int, Any, int], keys: list[int]) -> int:
    get, ns = m.get, NS
    start = time.perf_counter_ns()
    for k in keys:
        get(k, ns)
    return time.perf_counter_ns() - start


def time_puts(m: StateMap[int, Any, int], keys: list[int]) -> int:
    put, ns = m.put, NS
    start = time.perf_counter_ns()
    for k in keys:
        put(k, ns, k)
    return time.perf_counter_ns() - start


def time_removes(m: StateMap[int, Any, int], keys: list[int]) -> int:
    remove, ns = m.remove, NS
    start = time.perf_counter_ns()
    for k in keys:
        remove(k, ns)
    return time.perf_counter_ns() - start


def time_mixed(m: StateMap[int, Any, int], ops: list[tuple[int, int]]) -> int:
    get, put, remove, ns = m.get, m.put, m.remove, NS
    get_code, put_code = GET, PUT
    start = time.perf_counter_ns()
    for code, k in ops:
        if code == get_code:
            get(k, ns)
        elif code == put_code:
            put(k, ns, k)
        else:
            remove(k, ns)
    return time.perf_counter_ns() - start


THROUGHPUT_OPS = ("get", "put update", "put insert", "remove", "mixed 60/30/10")
MapFactory = Callable[[TypeSerializer[Any]], StateMap[int, Any, Any]]
IMPLEMENTATIONS: dict[str, MapFactory] = {
    "cow": lambda serializer: CopyOnWriteStateMap(state_serializer=serializer),
    "nested": lambda serializer: NestedStateMap(serializer),
}


def throughput_rep(m: StateMap[int, Any, int], w: Workload) -> dict[str, float]:
    """One repetition on a freshly prefilled map: ops/s per operation.

    ``gc.collect()`` before each timed phase; the remove / re-insert batches alternate within
    one phase, so collections triggered by their allocations are part of it.
    """
    gc.collect()
    remove_ns = insert_ns = 0
    for removal, reinsert in zip(w.removals, w.reinserts, strict=True):
        remove_ns += time_removes(m, removal)
        insert_ns += time_puts(m, reinsert)
    structural_ops = sum(map(len, w.removals))
    gc.collect()
    get_ns = time_gets(m, w.lookups)
    gc.collect()
    update_ns = time_puts(m, w.lookups)
    gc.collect()
    mixed_ns = time_mixed(m, w.mixed)
    return {
        "get": len(w.lookups) * NANOS / get_ns,
        "put update": len(w.lookups) * NANOS / update_ns,
        "put insert": structural_ops * NANOS / insert_ns,
        "remove": structural_ops * NANOS / remove_ns,
        "mixed 60/30/10": len(w.mixed) * NANOS / mixed_ns,
    }


def bench_throughput(cfg: Config) -> Section:
    section = Section("throughput")
    serializer = parse_type("int64")
    rng = random.Random(SEED)
    for size in cfg.throughput_sizes:
        workload = Workload.generate(rng, size, cfg.throughput_ops)
        samples: dict[str, dict[str, list[float]]] = {
            impl: {op: [] for op in THROUGHPUT_OPS} for impl in IMPLEMENTATIONS}
        for rep in range(cfg.throughput_reps):
            for impl, factory in IMPLEMENTATIONS.items():  # interleaved: cow, nested, cow, ...
                progress(f"throughput {size:,} keys, rep {rep + 1}/{cfg.throughput_reps}, {impl}")
                m = factory(serializer)
                for k in workload.prefill:
                    m.put(k, NS, k)
                for op, ops_per_s in throughput_rep(m, workload).items():
                    samples[impl][op].append(ops_per_s)
                del m
        label = ratio_label(size)
        for op in THROUGHPUT_OPS:
            bar = Bar(">=", 0.33, ">= 0.33") if op.startswith("mixed") else None
            section.rows.append(Row(f"throughput {op} ({label} keys)",
                                    median(samples["cow"][op]), median(samples["nested"][op]),
                                    "ops/s", bar))
        profile = workload.mixed_profile()
        section.raw[f"{size}_keys"] = {"ops_per_rep": cfg.throughput_ops,
                                       "structural_ops_per_rep": sum(map(len, workload.removals)),
                                       "ops_per_s": samples, "mixed_profile": profile}
        section.notes.append(
            f"{label} keys: mixed run: {profile['puts_inserting']:.0%} of puts insert, "
            f"{profile['removes_missing']:.0%} of removes miss, size {size:,} -> "
            f"{profile['size_after']:,}")
    section.notes[:0] = [
        f"ops/s = median of {cfg.throughput_reps} interleaved reps (cow, nested, cow, ...); each "
        f"rep prefills a fresh map; ratio = median cow / median nested",
        "GC: enabled with default thresholds (as an application runs); gc.collect() before "
        "each timed phase (remove+insert batches, get, put update, mixed)",
        f"get/put update: {cfg.throughput_ops:,} random existing keys; remove / put insert: "
        f"batches of distinct existing keys removed, then re-inserted (absent keys)",
    ]
    return section


# -- 2. synchronous snapshot -------------------------------------------------------------------


def list_state(i: int) -> list[int]:
    return [i, i + 1, i + 2]


def timed_ns(action: Callable[[], Any]) -> tuple[int, Any]:
    start = time.perf_counter_ns()
    result = action()
    return time.perf_counter_ns() - start, result


def bench_snapshot(cfg: Config) -> Section:
    n = cfg.snapshot_entries
    section = Section("snapshot")
    serializer = parse_type("list<int64>")
    keys = distinct_random_keys(random.Random(SEED + 1), n)
    cow: CopyOnWriteStateMap[int, Any, list[int]] = CopyOnWriteStateMap(
        state_serializer=serializer)
    nested: NestedStateMap[int, Any, list[int]] = NestedStateMap(serializer)
    progress(f"snapshot: filling both maps with {n:,} list states")
    for i, k in enumerate(keys):
        cow.put(k, NS, list_state(i))
        nested.put(k, NS, list_state(i))
    times: dict[str, list[int]] = {"cow snapshot": [], "cow release": [],
                                   "nested snapshot": [], "nested release": []}
    with gc_paused():
        for rep in range(cfg.snapshot_reps):
            progress(f"snapshot rep {rep + 1}/{cfg.snapshot_reps}")
            for name, m in (("cow", cow), ("nested", nested)):
                took, snap = timed_ns(m.snapshot)
                times[f"{name} snapshot"].append(took)
                times[f"{name} release"].append(timed_ns(snap.release)[0])
                del snap
        progress("snapshot: copy-on-write get() after a snapshot")
        isolation = check_isolation(cow, keys, cfg.mutate_after_snapshot)
    label = ratio_label(n)
    section.rows += [
        Row(f"snapshot() ({label} list states)", median(times["cow snapshot"]),
            median(times["nested snapshot"]), "ns", Bar("<=", 0.01, "<= 1/100")),
        Row(f"snapshot release() ({label})", median(times["cow release"]),
            median(times["nested release"]), "ns"),
    ]
    section.raw = {"entries": n, "state": "[i, i+1, i+2] as list<int64>", "times_ns": times,
                   "cow_table_length": cow.capacity, "cow_rehashing": cow.is_rehashing,
                   "get_after_snapshot": isolation}
    section.notes += [
        f"median of {cfg.snapshot_reps} interleaved reps; each snapshot released before the "
        f"next; nested snapshot = deep copy with parse_type('list<int64>').copy",
        f"cow map: bucket array of {cow.capacity:,}, rehashing: {cow.is_rehashing}",
        "GC: gc.collect(); gc.freeze(); gc.disable() for the timed part (a deep copy would "
        "otherwise also pay for collections: disabling GC only helps the baseline)",
        f"after a cow snapshot, get()+append on {isolation['keys']:,} keys: "
        f"{isolation['get_mutate_ns_per_op']:,.0f} ns/op (copies each list once) vs "
        f"{isolation['get_mutate_ns_per_op_no_snapshot']:,.0f} ns/op with no snapshot; "
        f"map sees the mutations, snapshot still holds the originals "
        f"({'verified' if isolation['verified'] else 'FAILED'}); release() afterwards "
        f"{isolation['release_ns'] / 1e6:.2f} ms",
    ]
    return section


def time_get_and_append(cow: CopyOnWriteStateMap[int, Any, list[int]], keys: list[int]) -> int:
    get, ns = cow.get, NS
    start = time.perf_counter_ns()
    for k in keys:
        state = get(k, ns)
        assert state is not None
        state.append(-1)
    return time.perf_counter_ns() - start


def check_isolation(
    cow: CopyOnWriteStateMap[int, Any, list[int]], keys: list[int], count: int
) -> dict[str, Any]:
    """Mutate ``count`` states via ``get()`` with and without an open snapshot; verify both views.

    Key ``keys[i]`` holds ``list_state(i)``; the keys used here have not been mutated before.
    """
    sample, control = keys[:count], keys[count:2 * count]
    snap = cow.snapshot()
    mutate_ns = time_get_and_append(cow, sample)
    live_ok = all(cow.get(k, NS) == list_state(i) + [-1] for i, k in enumerate(sample))
    index = {k: i for i, k in enumerate(sample)}
    seen = 0
    snapshot_ok = len(snap) == len(keys)
    for entry in snap:
        seen += 1
        i = index.get(entry.key)
        if i is not None and entry.state != list_state(i):
            snapshot_ok = False
    release_ns, _ = timed_ns(snap.release)
    control_ns = time_get_and_append(cow, control)
    return {"keys": count, "get_mutate_ns_per_op": mutate_ns / count,
            "get_mutate_ns_per_op_no_snapshot": control_ns / count, "release_ns": release_ns,
            "verified": live_ok and snapshot_ok and seen == len(keys)}


# -- 3. latency while growing --------------------------------------------------------------------


class StopTheWorldRehashStateMap(CopyOnWriteStateMap[K, N, S]):
    """The same map, except that a doubling moves every entry at once, inside the put.

    Overriding ``_double_capacity`` alone (start the rehash, then finish it) would lose the
    entry being inserted: the caller head-inserts it into the table it selected *before* the
    doubling, which a finished rehash has just emptied. So the growth check is done here, and
    the bucket is selected again in the new table.
    """

    def _add_new_entry(
        self, tab: BucketTable, idx: int, key: Any, namespace: Any, h: int, state: Any,
    ) -> StateMapEntry:
        if self._primary_size + self._incr_size > self._threshold:
            self._double_capacity()
            if self.is_rehashing:  # not at maximum capacity
                per_step = self._min_transferred
                self._min_transferred = sys.maxsize
                try:
                    self._incremental_rehash()
                finally:
                    self._min_transferred = per_step
                tab = self._primary
                idx = h & tab.mask
        return super()._add_new_entry(tab, idx, key, namespace, h, state)


def timed_inserts(m: StateMap[int, Any, int], keys: list[int]) -> array[int]:
    """Insert every key (state = its index), timing each put; latencies in ns."""
    latencies = array("q", bytes(8 * len(keys)))
    put, ns, clock = m.put, NS, time.perf_counter_ns
    for i, k in enumerate(keys):
        start = clock()
        put(k, ns, i)
        latencies[i] = clock() - start
    return latencies


@dataclass(frozen=True)
class GrowthStats:
    worst_ns: int
    p999_ns: int
    p99_ns: int
    median_ns: int
    total_ns: int
    over_1ms: int

    @classmethod
    def of(cls, latencies: array[int]) -> GrowthStats:
        ordered = sorted(latencies)
        n = len(ordered)

        def nearest_rank(per_mille: int) -> int:
            return ordered[max(0, -(-per_mille * n // 1000) - 1)]

        return cls(worst_ns=ordered[-1], p999_ns=nearest_rank(999), p99_ns=nearest_rank(990),
                   median_ns=nearest_rank(500), total_ns=sum(ordered),
                   over_1ms=n - bisect.bisect_right(ordered, 1_000_000))


def median_of(runs: list[GrowthStats], attr: str) -> float:
    return median([getattr(s, attr) for s in runs])


LATENCY_VARIANTS: dict[str, Callable[[], CopyOnWriteStateMap[int, Any, int]]] = {
    "incremental": CopyOnWriteStateMap,
    "stop-the-world": StopTheWorldRehashStateMap,
}
GC_MODES: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "GC off": gc_paused,
    "GC on": gc_on_after_collect,
}


def bench_latency(cfg: Config) -> Section:
    n = cfg.latency_entries
    section = Section("latency")
    keys = distinct_random_keys(random.Random(SEED + 2), n)
    stats: dict[str, dict[str, list[GrowthStats]]] = {
        mode: {variant: [] for variant in LATENCY_VARIANTS} for mode in GC_MODES}
    for mode, gc_mode in GC_MODES.items():
        for rep in range(cfg.latency_reps):
            for variant, factory in LATENCY_VARIANTS.items():  # interleaved
                progress(f"latency {mode}, rep {rep + 1}/{cfg.latency_reps}, {variant}")
                m = factory()
                with gc_mode():
                    latencies = timed_inserts(m, keys)
                if len(m) != n or not all(m.contains(k, NS) for k in keys):
                    raise AssertionError(f"{variant}: map lost entries while growing")
                stats[mode][variant].append(GrowthStats.of(latencies))
                del m, latencies
    label = ratio_label(n)
    for mode, by_variant in stats.items():
        for attr, title in (("worst_ns", "worst"), ("p999_ns", "p99.9"), ("total_ns", "total")):
            bar = Bar("<=", 0.01, "<= 1/100") if (attr, mode) == ("worst_ns", "GC off") else None
            section.rows.append(Row(f"grow to {label}: {title} put, {mode}",
                                    median_of(by_variant["incremental"], attr),
                                    median_of(by_variant["stop-the-world"], attr),
                                    "ns", bar))
    section.raw = {"entries": n, "reps": cfg.latency_reps,
                   "stats": {mode: {variant: [vars(s) for s in runs]
                                    for variant, runs in by_variant.items()}
                             for mode, by_variant in stats.items()}}
    over = {mode: {v: median_of(runs, "over_1ms") for v, runs in by.items()}
            for mode, by in stats.items()}
    section.notes += [
        f"{n:,} new random int64 keys put one by one, perf_counter_ns() around each put; "
        f"statecore = the map as is (incremental rehash), baseline = the same map with a "
        f"stop-the-world doubling (bench/bench_state_maps.py: StopTheWorldRehashStateMap)",
        f"median over {cfg.latency_reps} interleaved reps of each run's figure; 'total' = sum "
        f"of the put latencies (the cost of growing)",
        "GC off: gc.collect(); gc.freeze(); gc.disable() around the inserts. GC on: "
        "gc.collect(); gc.freeze(), then the collector runs with default thresholds",
        "puts over 1 ms (median per run): " + "; ".join(
            f"{mode}: incremental {o['incremental']:g}, stop-the-world {o['stop-the-world']:g}"
            for mode, o in over.items()),
        "every run checked afterwards: all keys present, len() == entries",
    ]
    return section


BENCHMARKS: dict[str, Callable[[Config], Section]] = {
    "throughput": bench_throughput,
    "snapshot": bench_snapshot,
    "latency": bench_latency,
}
