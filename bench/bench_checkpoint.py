"""Checkpoints: the format-v1 writer and asynchronous checkpoints against their baselines.

One benchmark, ``checkpoint`` (``bench/run.py`` runs it with the others and prints the table),
on one copy-on-write backend of string keys with one int64 value state at max parallelism 128:

* write throughput: rows/s of ``formats.statectl.writer.write_checkpoint`` (the writer the
  asynchronous path runs in its child process or thread, called synchronously to measure it)
  against the writer's floor on the same backend: the same snapshot walked into Python
  lists, ``pa.array`` per column and one ``pyarrow.parquet.write_table`` (the bar: a writer
  cannot do less with Python objects); for information also against ``write_table`` of a
  ready table and against building that table from ready lists plus ``write_table``.
* processing under a checkpoint: records/s of ``set_current_key(k); state.update(v)`` over a
  fixed window of pre-generated records, while an asynchronous checkpoint (snapshot taken at
  the window start) is in flight with the default writer (a forked process: the checkpoint
  goes to the local disk), against the same window with no checkpoint; for information also
  with the snapshot held and no writer, and with the thread writer (with the default and a
  smaller switch interval): the GIL's share. Each window also records this process's page
  faults and system time: after a fork, what processing pays is the kernel copying each page
  it writes to.
* stall: the longest gap between two processed records from a checkpoint's trigger until it
  completes and its writer's after-work (the process writer's heap collapse) is done,
  asynchronous (snapshot + ``write_checkpoint_async``, default writer) against
  synchronous (snapshot + ``write_checkpoint`` inline), with the collector on (after collect
  and freeze) and off; the thread writer's for information.
* inspect: bytes ``open_checkpoint`` + ``summarize`` (what ``statectl inspect`` runs) read,
  counted by a ``pyarrow.fs.PyFileSystem`` over the local filesystem, against the total size
  of the checkpoint's files.

Sizes follow the map benchmarks' :class:`Config` (``--quick`` makes them small): half of
``snapshot_entries`` keys (500k, quick 25k), ``latency_reps`` repetitions of the writes and
``2 * latency_reps - 1`` (5, quick 1) of the processing windows, after one untimed pass.
"""

from __future__ import annotations

import gc
import itertools
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from bench_backend import fill, new_backend, random_string_keys
from bench_state_maps import NANOS, SEED, Bar, Config, Row, Section, median, progress, ratio_label

from formats.open import open_checkpoint
from formats.ops.inspect import summarize
from formats.statectl.async_writer import write_checkpoint_async
from formats.statectl.publish import METADATA_FILE
from formats.statectl.writer import write_checkpoint
from formats.storage.io_stats import CountingHandler
from statecore.checkpoint import CheckpointMetadata, OperatorSnapshot, SubtaskSnapshot
from statecore.errors import CheckpointCancelledError
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import ValueState

MAX_PARALLELISM = 128
#: The switch interval tried against the default (``sys.getswitchinterval()``, 5 ms).
SMALL_SWITCH_INTERVAL = 0.0005
#: Row.unit for byte counts (run.py formats it; bench_state_maps' Row declares ops/s and ns).
BYTES = cast(Any, "bytes")
Records = list[tuple[str, int]]


@dataclass(frozen=True)
class CheckpointSizes:
    keys: int
    write_reps: int
    window_records: int
    window_reps: int
    lead_records: int
    pass_records: int

    @classmethod
    def of(cls, cfg: Config) -> CheckpointSizes:
        keys = cfg.snapshot_entries // 2
        return cls(keys=keys, write_reps=cfg.latency_reps,
                   # ~30% of the keys: the checkpoint outlasts the window (checked)
                   # 5 at the default 3: one pair of windows swings by 15% on a busy VM
                   window_records=keys * 3 // 10, window_reps=max(1, 2 * cfg.latency_reps - 1),
                   lead_records=keys // 50, pass_records=keys // 25)


@dataclass
class Bench:
    """The backend under test, its records and the directory checkpoints go to."""

    sizes: CheckpointSizes
    backend: HeapKeyedStateBackend[str]
    state: ValueState
    records: Records
    directory: Path
    #: the same number of records, keys drawn with Zipf-like weights (1/rank, as the peers)
    skewed: Records = field(default_factory=list)
    next_id: int = 1
    raw: dict[str, Any] = field(default_factory=dict)

    def new_checkpoint(self) -> tuple[str, int]:
        """A fresh location and checkpoint id."""
        checkpoint_id, self.next_id = self.next_id, self.next_id + 1
        return str(self.directory / f"chk-{checkpoint_id:07d}"), checkpoint_id

    def operators(self) -> list[OperatorSnapshot]:
        """The synchronous half: one operator, one subtask, the backend's snapshot now."""
        return [OperatorSnapshot("bench", "bench", 1, MAX_PARALLELISM,
                                 [SubtaskSnapshot(0, keyed=self.backend.snapshot())])]

    def check(self, metadata: CheckpointMetadata) -> None:
        rows = sum(r.row_count for op in metadata.operators for st in op.subtasks
                   for h in st.keyed for r in h.rows)
        if rows != self.sizes.keys:
            raise AssertionError(f"checkpoint {metadata.checkpoint_id}: {rows} rows, "
                                 f"expected {self.sizes.keys}")


def settle() -> None:
    """Before a timed part: collect the unfrozen objects, then freeze them too (cheap)."""
    gc.collect()
    gc.freeze()


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The section runs with its backend frozen; GC state and the permanent generation
    are restored afterwards."""
    was_enabled = gc.isenabled()
    settle()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


@contextmanager
def gc_mode(enabled: bool) -> Iterator[None]:
    was_enabled = gc.isenabled()
    settle()
    if enabled:
        gc.enable()
    else:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


@contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


class CollectionLog:
    """``gc.callbacks`` entry: the duration of every collection, by generation."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, int]] = []
        self._start = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.pauses.append((info["generation"], time.perf_counter_ns() - self._start))

    def summary(self) -> dict[str, Any]:
        longest = max(self.pauses, key=lambda p: p[1], default=(-1, 0))
        return {"collections_by_generation": [sum(g == i for g, _ in self.pauses)
                                              for i in range(3)],
                "longest_ns": longest[1], "longest_generation": longest[0]}


@contextmanager
def logging_collections() -> Iterator[CollectionLog]:
    log = CollectionLog()
    gc.callbacks.append(log)
    try:
        yield log
    finally:
        gc.callbacks.remove(log)


def discard(location: str) -> None:
    shutil.rmtree(location, ignore_errors=True)


# -- 1. write throughput ------------------------------------------------------------------------


def snapshot_columns(bench: Bench, snapshot: Any = None) -> dict[str, list[Any]]:
    """The rows a checkpoint of the backend holds, as Python lists, in key group order.

    ``snapshot``: the backend's snapshot to walk (default: one taken now). Column-wise, as
    fast as Python walks the copy-on-write map's snapshot: the floor's first part.
    """
    columns: dict[str, list[Any]] = {"key_group": [], "key": [], "value": []}
    groups, keys, values = columns["key_group"], columns["key"], columns["value"]
    for block in bench.backend.snapshot() if snapshot is None else snapshot:
        entries = block.entries
        groups.extend([block.key_group] * len(entries))
        keys.extend([e.key for e in entries])
        values.extend([e.state for e in entries])
    return columns


BASELINE_SCHEMA = pa.schema([pa.field("key_group", pa.int32(), nullable=False),
                             pa.field("key", pa.string(), nullable=False),
                             pa.field("value", pa.int64())])


def build_table(columns: dict[str, list[Any]]) -> Any:
    return pa.table({f.name: pa.array(columns[f.name], type=f.type) for f in BASELINE_SCHEMA},
                    schema=BASELINE_SCHEMA)


def bench_write(bench: Bench, section: Section) -> str:
    """Write throughput, interleaved; returns the location of a kept checkpoint (for inspect)."""
    n = bench.sizes.keys
    columns = snapshot_columns(bench)
    table = build_table(columns)
    baseline_path = str(bench.directory / "baseline.parquet")
    times: dict[str, list[int]] = {"write_checkpoint": [], "write_table": [],
                                   "pa.table + write_table": [], "snapshot": [], "floor": []}
    kept = ""
    for rep in range(bench.sizes.write_reps):  # interleaved: statecore, baseline, baseline+build
        progress(f"checkpoint write rep {rep + 1}/{bench.sizes.write_reps}")
        location, checkpoint_id = bench.new_checkpoint()
        settle()
        start = time.perf_counter_ns()
        operators = bench.operators()
        taken = time.perf_counter_ns()
        metadata = write_checkpoint(location, checkpoint_id, operators)
        times["write_checkpoint"].append(time.perf_counter_ns() - taken)
        times["snapshot"].append(taken - start)
        bench.check(metadata)
        if kept:
            discard(kept)
        kept = location
        settle()
        start = time.perf_counter_ns()
        pq.write_table(table, baseline_path)
        times["write_table"].append(time.perf_counter_ns() - start)
        os.remove(baseline_path)
        settle()
        start = time.perf_counter_ns()
        pq.write_table(build_table(columns), baseline_path)
        times["pa.table + write_table"].append(time.perf_counter_ns() - start)
        if pq.ParquetFile(baseline_path).metadata.num_rows != n:
            raise AssertionError("baseline file lost rows")
        os.remove(baseline_path)
        # the floor: the same snapshot walked into columns, pa.array, write_table
        snapshot = bench.operators()[0].subtasks[0].keyed
        settle()
        start = time.perf_counter_ns()
        pq.write_table(build_table(snapshot_columns(bench, snapshot)), baseline_path)
        times["floor"].append(time.perf_counter_ns() - start)
        snapshot.close()
        if pq.ParquetFile(baseline_path).metadata.num_rows != n:
            raise AssertionError("the floor's file lost rows")
        os.remove(baseline_path)
    del table, columns

    def rows_per_s(name: str) -> float:
        return n * NANOS / median(times[name])

    label = ratio_label(n)
    section.rows += [
        Row(f"checkpoint write vs its floor ({label} rows)", rows_per_s("write_checkpoint"),
            rows_per_s("floor"), "ops/s", Bar(">=", 0.67, ">= 0.67")),
        Row(f"checkpoint write vs write_table ({label})", rows_per_s("write_checkpoint"),
            rows_per_s("write_table"), "ops/s"),
        Row(f"write vs pa.table()+write_table ({label})", rows_per_s("write_checkpoint"),
            rows_per_s("pa.table + write_table"), "ops/s"),
    ]
    size = os.path.getsize(Path(kept) / METADATA_FILE) + sum(
        f.stat().st_size for f in Path(kept).rglob("*.parquet"))
    bench.raw["write"] = {"rows": n, "times_ns": times, "checkpoint_bytes": size}
    section.notes += [
        f"write: {n:,} random 16-hex-digit string keys, one int64 value state, max parallelism "
        f"{MAX_PARALLELISM} (one subtask, {MAX_PARALLELISM} key groups); the bar's baseline "
        f"is the writer's floor on the same backend: the same snapshot (taken untimed) walked "
        f"into three Python lists (key group, key, value), pa.array per column and one "
        f"pq.write_table, nothing else; statecore = "
        f"write_checkpoint(location, id, [snapshot]) called synchronously (the writer the "
        f"async path runs in its child process or thread): rows/s ('ops' = rows); baseline = "
        f"pyarrow.parquet.write_table of a ready pa.Table with the same columns (key_group "
        f"int32, key string, value int64) and rows, key group order, default options; second "
        f"row's baseline also builds that table from Python lists (pa.array per column)",
        f"write: median of {bench.sizes.write_reps} interleaved reps into a temporary "
        f"directory under {tempfile.gettempdir()}; the snapshot is taken untimed just "
        f"before (median {median(times['snapshot']) / 1e6:.2f} ms); write_checkpoint also "
        f"fsyncs, re-reads each file for its SHA-256, writes _metadata.json and renames the "
        f"directory, which write_table does not; checkpoint: {size / 1e6:.1f} MB, every "
        f"write checked for {n:,} rows",
    ]
    return kept


# -- 2. processing while a checkpoint is in flight ---------------------------------------------


def process(bench: Bench, records: Records | None = None) -> None:
    set_key, update = bench.backend.set_current_key, bench.state.update
    for k, v in bench.records if records is None else records:
        set_key(k)
        update(v)


@dataclass(frozen=True)
class Window:
    """One processing window: its duration and this process's page faults and system time
    over it (every thread's: the writer's waiting thread is blocked meanwhile)."""

    took_ns: int
    faults: int
    system_ns: int
    in_flight: bool = False


class WindowClock:
    """Started where a window starts; :meth:`stop` where it ends."""

    def __init__(self) -> None:
        self.usage = resource.getrusage(resource.RUSAGE_SELF)
        self.start = time.perf_counter_ns()

    def stop(self) -> Window:
        took = time.perf_counter_ns() - self.start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return Window(took, usage.ru_minflt - self.usage.ru_minflt,
                      round((usage.ru_stime - self.usage.ru_stime) * NANOS))


def window_no_checkpoint(bench: Bench, records: Records | None = None) -> Window:
    clock = WindowClock()
    process(bench, records)
    return clock.stop()


def window_snapshot_held(bench: Bench) -> Window:
    """The window starts with the snapshot, which stays open (nothing consumes it)."""
    clock = WindowClock()
    operators = bench.operators()
    process(bench)
    window = clock.stop()
    for subtask in operators[0].subtasks:
        assert subtask.keyed is not None
        subtask.keyed.close()
    return window


def window_async(bench: Bench, writer: str | None = None,
                 records: Records | None = None) -> Window:
    """The window starts with the snapshot and the writer's start; then cancel the writer.

    ``writer``: None for the default (a forked process on the local disk), or "thread".
    """
    location, checkpoint_id = bench.new_checkpoint()
    clock = WindowClock()
    pending = write_checkpoint_async(location, checkpoint_id, bench.operators(), writer=writer)
    process(bench, records)
    window = clock.stop()
    in_flight = not pending.done()
    pending.cancel()  # the window is over: the writer stops at its next key group, cleans up
    try:
        bench.check(pending.result())
    except CheckpointCancelledError:
        pass
    pending.join()  # its heap collapse must not run into the next window
    discard(location)
    return replace(window, in_flight=in_flight)


def window_thread(bench: Bench) -> Window:
    return window_async(bench, "thread")


def window_thread_small_interval(bench: Bench) -> Window:
    with switch_interval(SMALL_SWITCH_INTERVAL):
        return window_async(bench, "thread")


WINDOWS: dict[str, Callable[[Bench], Window]] = {
    "no checkpoint": window_no_checkpoint,
    "snapshot held": window_snapshot_held,
    "async checkpoint": window_async,
    "async, thread writer": window_thread,
    "async, thread writer, small switch interval": window_thread_small_interval,
    "no checkpoint, skewed": lambda bench: window_no_checkpoint(bench, bench.skewed),
    "async checkpoint, skewed": lambda bench: window_async(bench, records=bench.skewed),
}


def bench_processing(bench: Bench, section: Section) -> None:
    w = len(bench.records)
    rates: dict[str, list[float]] = {name: [] for name in WINDOWS}
    in_flight: dict[str, list[bool]] = {name: [] for name in WINDOWS}
    faults: dict[str, list[int]] = {name: [] for name in WINDOWS}
    system_ns: dict[str, list[int]] = {name: [] for name in WINDOWS}
    # Warm-up: the first pass frees the ints the fill stored and stores the records' own, a
    # cost later passes do not have; unwarmed, it slowed the first "no checkpoint" window by
    # 10% and flattered the first rep's ratios.
    with gc_mode(enabled=True):
        process(bench)
        process(bench, bench.skewed)
    for rep in range(bench.sizes.window_reps):  # interleaved, in WINDOWS order
        for name, window in WINDOWS.items():
            progress(f"checkpoint processing rep {rep + 1}/{bench.sizes.window_reps}: {name}")
            with gc_mode(enabled=True):
                measured = window(bench)
            rates[name].append(w * NANOS / measured.took_ns)
            in_flight[name].append(measured.in_flight)
            faults[name].append(measured.faults)
            system_ns[name].append(measured.system_ns)
    none = median(rates["no checkpoint"])
    held = median(rates["snapshot held"])
    asynchronous = median(rates["async checkpoint"])
    thread = median(rates["async, thread writer"])
    small = median(rates["async, thread writer, small switch interval"])
    label = ratio_label(w)
    section.rows += [
        Row(f"records/s, async checkpoint ({label} rec)", asynchronous, none, "ops/s",
            Bar(">=", 0.9, ">= 0.9")),
        Row("records/s, snapshot held, no writer", held, none, "ops/s"),
        Row("records/s, async, thread writer", thread, none, "ops/s"),
        Row(f"records/s, thread writer, switch {SMALL_SWITCH_INTERVAL * 1e3:g} ms", small, none,
            "ops/s"),
        Row("records/s, async, Zipf-like keys",
            median(rates["async checkpoint, skewed"]), median(rates["no checkpoint, skewed"]),
            "ops/s"),
    ]
    asyncs = [name for name in WINDOWS if name.startswith("async")]
    still_flying = sum(sum(in_flight[name]) for name in asyncs)
    runs = len(asyncs) * bench.sizes.window_reps
    bench.raw["processing"] = {"window_records": w, "records_per_s": rates,
                               "page_faults": faults, "system_ns": system_ns,
                               "checkpoint_in_flight_at_window_end": in_flight,
                               "default_switch_interval_s": sys.getswitchinterval(),
                               "small_switch_interval_s": SMALL_SWITCH_INTERVAL}
    section.notes += [
        f"processing: a window of {w:,} pre-generated (key, random int) records, keys drawn "
        f"from all {bench.sizes.keys:,} (present), backend.set_current_key(k); "
        f"state.update(v); statecore = records/s ('ops' = records) with an async checkpoint "
        f"in flight: the window starts with backend.snapshot() + write_checkpoint_async() "
        f"(default writer: a forked process, as on the local disk); baseline = the same "
        f"window with no checkpoint; median of {bench.sizes.window_reps} interleaved reps "
        f"(none, snapshot held, async, async with the thread writer, the same with a "
        f"{SMALL_SWITCH_INTERVAL * 1e3:g} ms switch interval, then none and async over as many "
        f"records with Zipf-like keys, weights 1/rank, for information) after one untimed "
        f"pass over each list",
        f"processing: the checkpoint was still in flight at the end of {still_flying} of {runs} "
        f"async windows (then cancelled: only the window is measured); GC on with default "
        f"thresholds after gc.collect(); gc.freeze() before each window",
        f"GIL: the process writer never holds the parent's GIL and the parent releases its map "
        f"snapshots right after the fork (the kernel copies a page only when the parent "
        f"writes to it): {asynchronous / none:.2f} of the no-checkpoint rate. A snapshot held "
        f"with no writer costs the copy-on-write copies on first write: {held / none:.2f}. "
        f"The thread writer (other filesystems) brings it to {thread / none:.2f}: it builds "
        f"every row in Python and pa.array()s batches with the GIL held (only Parquet "
        f"encoding, SHA-256 and fsync release it), and its allocations trigger collections "
        f"that pause both threads",
        where_the_time_goes(w, rates, faults, system_ns, ""),
        where_the_time_goes(w, rates, faults, system_ns, ", skewed"),
        f"GIL: sys.setswitchinterval({SMALL_SWITCH_INTERVAL:g}) instead of the default "
        f"{sys.getswitchinterval():g} s, thread writer: {small / none:.2f} of the "
        f"no-checkpoint rate (the interval decides how often the threads alternate, not how "
        f"much work the writer does with the GIL held)",
    ]


def where_the_time_goes(w: int, rates: dict[str, list[float]], faults: dict[str, list[int]],
                        system_ns: dict[str, list[int]], variant: str) -> str:
    """The async window against the no-checkpoint window (``variant``: "" or ", skewed"):
    what the page faults cost."""
    none, forked = f"no checkpoint{variant}", f"async checkpoint{variant}"
    none_ms, async_ms = w * 1e3 / median(rates[none]), w * 1e3 / median(rates[forked])
    n_faults, a_faults = median(faults[none]), median(faults[forked])
    n_sys, a_sys = median(system_ns[none]) / 1e6, median(system_ns[forked]) / 1e6
    per_fault = (a_sys - n_sys) * 1e3 / (a_faults - n_faults) if a_faults > n_faults else 0.0
    keys = ("keys drawn with Zipf-like weights, 1/rank" if variant
            else "keys drawn uniformly")
    return (f"processing, where the async window's time goes ({keys}; medians): "
            f"{async_ms:.0f} ms against {none_ms:.0f} ms with no checkpoint, "
            f"{median(rates[forked]) / median(rates[none]):.2f}; this process took "
            f"{a_faults:,.0f} page faults and {a_sys:.0f} ms of system time in it, against "
            f"{n_faults:,.0f} and {n_sys:.0f} ms: after the fork each page the processing "
            f"thread writes to (CPython writes the reference count of every object it reads: "
            f"the entry, its key, the old value) is copied on its first write, "
            f"{per_fault:.1f} us a fault here; the fork itself is in the window too")


# -- 3. longest stall between two records -------------------------------------------------------


def stamped(bench: Bench, records: Records, stamps: list[int]) -> None:
    """Process ``records``, appending ``perf_counter_ns()`` before each."""
    set_key, update = bench.backend.set_current_key, bench.state.update
    append, clock = stamps.append, time.perf_counter_ns
    for k, v in records:
        append(clock())
        set_key(k)
        update(v)


@dataclass(frozen=True)
class StallRun:
    longest_ns: int
    p999_ns: int
    over_1ms: int
    records: int
    checkpoint_ns: int
    collections: dict[str, Any]
    start_call_ns: int  # snapshot + write_checkpoint_async() (the fork, for the process writer)
    trigger_ns: int = 0  # the first gap: the trigger (snapshot + start of the write)
    longest_at_ns: int = 0  # when the longest gap began, after the trigger (0: the trigger)
    huge_kb: int = 0  # AnonHugePages (kB) at the trigger: the heap in huge pages
    collapsed: dict[str, Any] | None = None  # the process writer's collapse after its child


def stall_run(bench: Bench, asynchronous: bool, writer: str | None = None) -> StallRun:
    """Lead-in records, the checkpoint's trigger, then records until it is complete.

    Asynchronous: until the writer's thread has also finished its after-work (the process
    writer collapses the heap after its child), which runs beside processing too.

    ``writer`` (asynchronous only): None for the default writer, or "thread".
    """
    lead = bench.records[:bench.sizes.lead_records]
    passes = bench.records[:bench.sizes.pass_records]
    location, checkpoint_id = bench.new_checkpoint()
    stamps: list[int] = []
    huge_kb = anon_huge_kb()
    with logging_collections() as log:
        stamped(bench, lead, stamps)
        trigger = len(stamps)
        stamps.append(time.perf_counter_ns())  # the trigger: a gap like any record's
        if asynchronous:
            called = time.perf_counter_ns()
            pending = write_checkpoint_async(location, checkpoint_id, bench.operators(),
                                             writer=writer)
            start_call_ns = time.perf_counter_ns() - called
            completed = 0
            while True:  # until complete, and its writer's after-work (the heap collapse) done
                stamped(bench, passes, stamps)
                if not completed and pending.done():
                    completed = time.perf_counter_ns()
                if completed and pending.join(0):
                    break
            metadata = pending.result()
            collapsed = None if pending.huge_pages is None else vars(pending.huge_pages)
        else:
            start_call_ns, collapsed = 0, None
            metadata = write_checkpoint(location, checkpoint_id, bench.operators())
            completed = time.perf_counter_ns()
            stamped(bench, passes, stamps)
        stamps.append(time.perf_counter_ns())
    bench.check(metadata)
    discard(location)
    timed = [(b - a, a) for a, b in zip(stamps[trigger:], stamps[trigger + 1:], strict=False)]
    longest, longest_from = max(timed)
    gaps = sorted(g for g, _ in timed)
    return StallRun(longest_ns=gaps[-1], trigger_ns=timed[0][0],
                    longest_at_ns=longest_from - stamps[trigger],
                    p999_ns=gaps[max(0, -(-999 * len(gaps) // 1000) - 1)],
                    over_1ms=sum(g > 1_000_000 for g in gaps), records=len(stamps) - trigger - 2,
                    checkpoint_ns=completed - stamps[trigger], collections=log.summary(),
                    start_call_ns=start_call_ns, huge_kb=huge_kb, collapsed=collapsed)


def anon_huge_kb() -> int:
    """This process's anonymous memory in transparent huge pages, kB (0 off Linux)."""
    try:
        with open("/proc/self/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def bench_stall(bench: Bench, section: Section) -> None:
    runs: dict[str, dict[str, StallRun]] = {}
    for mode, enabled in (("GC on", True), ("GC off", False)):
        runs[mode] = {}
        for variant in ("sync", "async", "thread"):  # sync first: a fresh snapshot each
            progress(f"checkpoint stall, {mode}: {variant}")
            with gc_mode(enabled):
                runs[mode][variant] = stall_run(bench, variant != "sync",
                                                "thread" if variant == "thread" else None)
    label = ratio_label(bench.sizes.keys)
    for mode, by_variant in runs.items():
        bar = Bar("<=", 0.01, "<= 1/100") if mode == "GC on" else None
        section.rows.append(Row(f"longest stall async/sync ({label}), {mode}",
                                by_variant["async"].longest_ns, by_variant["sync"].longest_ns,
                                "ns", bar))
        section.rows.append(Row(f"longest stall thread writer/sync, {mode}",
                                by_variant["thread"].longest_ns, by_variant["sync"].longest_ns,
                                "ns"))
    bench.raw["stall"] = {mode: {v: vars(r) for v, r in by.items()} for mode, by in runs.items()}
    on, off = runs["GC on"]["thread"], runs["GC off"]["thread"]
    forked = runs["GC on"]["async"]
    full_collections = (": a full collection traverses every entry and bucket page (a list "
                        "of 1024 slots) copied since the snapshot, all young objects, and "
                        "both threads wait for it"
                        if on.collections["longest_generation"] == 2 else "")
    section.notes += [
        f"stall: {bench.sizes.lead_records:,} records, then the trigger, then passes of "
        f"{bench.sizes.pass_records:,} records until the checkpoint is complete and its "
        f"writer's thread has finished (the process writer's heap collapse included; "
        f"synchronous: one pass after it); perf_counter_ns() before every record; statecore "
        f"= the longest gap from the trigger on with backend.snapshot() + "
        f"write_checkpoint_async(), baseline = the same with backend.snapshot() + "
        f"write_checkpoint() inline (the loop waits for it); one run each",
        "stall GC: gc.collect(); gc.freeze() before each run (the backend's objects are "
        "frozen); 'GC on': then default thresholds (the bar row), 'GC off': gc.disable() too",
        f"stall, async (process writer), GC on: {forked.records:,} records during a "
        f"{forked.checkpoint_ns / 1e9:.2f} s checkpoint, p99.9 gap {forked.p999_ns / 1e3:.0f} "
        f"µs, {forked.over_1ms} gaps over 1 ms; the longest gap "
        + ("is the trigger" if forked.longest_at_ns == 0 else
           f"began {forked.longest_at_ns / 1e6:.0f} ms after the trigger (the trigger's gap: "
           f"{forked.trigger_ns / 1e6:.1f} ms)")
        + f"; snapshot + fork took {forked.start_call_ns / 1e6:.1f} ms (the kernel copies the "
        f"page tables: "
        f"{forked.huge_kb / 1024:.0f} MiB of the heap were in transparent huge pages at the "
        f"trigger, one entry per 2 MiB, collapsed by the previous checkpoints' writers; this "
        f"one's collapse after its child: {forked.collapsed}); "
        f"collections by generation {forked.collections['collections_by_generation']}",
        f"stall, thread writer, GC on: {on.records:,} records during a "
        f"{on.checkpoint_ns / 1e9:.2f} s "
        f"checkpoint, p99.9 gap {on.p999_ns / 1e3:.0f} µs, {on.over_1ms} gaps over 1 ms; "
        f"longest collection {on.collections['longest_ns'] / 1e6:.1f} ms (generation "
        f"{on.collections['longest_generation']}; collections by generation "
        f"{on.collections['collections_by_generation']}){full_collections}",
        f"stall, thread writer, GC off: {off.records:,} records during "
        f"{off.checkpoint_ns / 1e9:.2f} s, p99.9 gap {off.p999_ns / 1e3:.0f} µs, "
        f"{off.over_1ms} gaps over 1 ms: what "
        f"remains is the writer holding the GIL (switch interval "
        f"{sys.getswitchinterval() * 1e3:g} ms, or longer inside one pa.array() call)",
    ]


# -- 4. inspect reads only the metadata ----------------------------------------------------------


def bench_inspect(location: str, section: Section, bench: Bench) -> None:
    progress("checkpoint inspect: counting bytes read")
    local = pafs.LocalFileSystem()
    files = {info.path: info.size for info in local.get_file_info(
        pafs.FileSelector(location, recursive=True)) if info.type == pafs.FileType.File}
    total = sum(files.values())
    handler = CountingHandler()
    summary = summarize(open_checkpoint(location, filesystem=pafs.PyFileSystem(handler)),
                        location)
    read = sum(handler.counts.values())
    opened = sorted(os.path.relpath(p, location) for p in handler.counts)
    entries = sum(s.entries for op in summary.operators for s in op.states)
    footers = CountingHandler()  # what reading every Parquet footer would cost, for comparison
    footer_fs = pafs.PyFileSystem(footers)
    for path in files:
        if path.endswith(".parquet"):
            with footer_fs.open_input_file(path) as f:
                pq.ParquetFile(f).metadata  # noqa: B018 (reads the footer)
    footer_bytes = sum(footers.counts.values())
    section.rows.append(Row("inspect: bytes read / checkpoint bytes", read, total, BYTES))
    bench.raw["inspect"] = {"bytes_read": read, "files_opened": opened, "total_bytes": total,
                            "files": len(files), "entries_reported": entries,
                            "parquet_footer_bytes": footer_bytes}
    section.notes += [
        f"inspect: open_checkpoint(path, filesystem=PyFileSystem(counting handler over "
        f"LocalFileSystem)) + formats.ops.inspect.summarize() (what `statectl inspect` runs) on "
        f"the {total / 1e6:.1f} MB checkpoint written above ({len(files)} files); statecore = "
        f"bytes read from files opened for input ({', '.join(opened)}), baseline = total "
        f"bytes of the checkpoint's files; lower is better; the summary reports "
        f"{entries:,} entries",
        f"inspect: for comparison, reading every Parquet footer (pq.ParquetFile(f).metadata) "
        f"reads {footer_bytes:,} bytes: inspect reads none of them",
    ]
    if entries != bench.sizes.keys:
        raise AssertionError(f"inspect reported {entries} entries, expected {bench.sizes.keys}")


# -- the section ---------------------------------------------------------------------------


def bench_checkpoint(cfg: Config) -> Section:
    sizes = CheckpointSizes.of(cfg)
    section = Section("checkpoint")
    rng = random.Random(SEED + 20)
    keys = random_string_keys(rng, sizes.keys)
    backend, state = new_backend("copy_on_write", MAX_PARALLELISM)
    progress(f"checkpoint: filling a backend with {sizes.keys:,} keys")
    fill(backend, state, keys)
    records = [(k, rng.getrandbits(62)) for k in rng.choices(keys, k=sizes.window_records)]
    ranks = list(itertools.accumulate(1 / rank for rank in range(1, len(keys) + 1)))
    skewed = [(k, rng.getrandbits(62))
              for k in rng.choices(keys, cum_weights=ranks, k=sizes.window_records)]
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory, frozen_heap():
        bench = Bench(sizes, backend, state, records, Path(directory), skewed=skewed)
        kept = bench_write(bench, section)
        bench_processing(bench, section)
        bench_stall(bench, section)
        bench_inspect(kept, section, bench)
    section.raw = bench.raw
    return section
