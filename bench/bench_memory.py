"""Memory: the copy-on-write map and ``statectl build`` against a dict of the same entries, and
the forked checkpoint writer's private pages (``bench/run.py --only memory``).

Every figure comes from a fresh interpreter (``python bench/bench_memory.py --child ...``) that
reads its own ``/proc/self/status`` (``VmRSS``, ``VmHWM``) and reports JSON, so no measurement
inherits another's freed memory or high-water mark. Not ``getrusage(RUSAGE_CHILDREN)``: it
keeps the largest child's figure, and a child started with vfork + exec (as ``subprocess``
starts it) inherits its parent's high-water mark in ``ru_maxrss``.

* ``map``: ``n`` int64 keys (distinct random 62-bit ints) and states (the entry's index) are
  made first, held in a preallocated list; then put into a :class:`CopyOnWriteStateMap` (hash
  mode ``fast``, capacity 128, as the keyed backend makes them) or a dict, in another process
  each. Bytes per entry: the growth of ``VmRSS`` with the key and value objects, and without
  them (the structure only).
* ``build``: ``statectl build input.csv --key key --agg sum:v`` (the click command, in process)
  over ``n`` records of ``n`` distinct string keys: peak RSS (``VmHWM``) minus the same
  process's after its imports; against a dict of the same entries (the same key strings and
  int sums) built in a fresh process, measured the same way. An information row reads the
  input alone, as the build does (``FileSource``: schema, count, every record), to show what
  of the build's bytes are its input's.
* ``fork``: a keyed backend with ``n`` string keys (value state, int values) is checkpointed
  with ``write_checkpoint_async`` and its default writer (a forked child on the local disk);
  while the child writes, the parent reads ``/proc/<child>/smaps_rollup`` every
  :data:`SAMPLE_SECONDS` and keeps the largest ``Private_Dirty``: the pages that the fork made
  private copies of (written by the child, or by the parent, whose old copy then belongs to the
  child alone). Against the parent's ``VmRSS`` at the fork. Information rows: the same with
  :data:`FIXED_KEYS` keys (what running the writer costs at all), and with a full collection
  in the parent during the write, without and with ``gc.freeze()`` before the fork.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bench_state_maps import Bar, Config, Row, Section, progress, ratio_label

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
#: Row.unit for byte counts (run.py formats it; bench_state_maps' Row declares ops/s and ns).
BYTES = cast(Any, "bytes")
SEED = 20240611
MAX_PARALLELISM = 128
#: How often the parent reads the writer child's smaps_rollup.
SAMPLE_SECONDS = 0.05
#: Bars: a structure or a build at most twice a dict of the same entries; the fork's private
#: copies below the parent's resident memory, so a checkpoint does not double it (issue 22).
TWICE_THE_DICT = Bar("<=", 2.0, "<= 2x")
NOT_DOUBLE = Bar("<=", 0.99, "< 1x")
#: Fork runs beside the plain one (first size only): the parent runs a full collection while
#: the child writes, without and with ``gc.freeze()`` before the fork.
FORK_GC_MODES = ("collect", "freeze+collect")
#: A state so small that the fork's private pages are those of running the writer at all.
FIXED_KEYS = 1000


@dataclass(frozen=True)
class MemorySizes:
    entries: tuple[int, ...]

    @classmethod
    def of(cls, cfg: Config) -> MemorySizes:
        n = cfg.snapshot_entries  # 1M in a full run, 50k with --quick
        return cls(entries=(n, 5 * n))


# -- /proc -------------------------------------------------------------------------------------


def status(pid: int | str = "self") -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of a process, in bytes."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0]) * 1024
    return found


def private_dirty(pid: int) -> int | None:
    """``Private_Dirty`` of ``/proc/<pid>/smaps_rollup`` in bytes; ``None`` once it has exited."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Private_Dirty:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def child_pids() -> set[int]:
    pids: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with open(path) as f:
            pids.update(int(p) for p in f.read().split())
    return pids


# -- the measuring children ---------------------------------------------------------------------


def build_key(i: int) -> str:
    return f"user-{i:010d}"


def build_value(i: int) -> int:
    return (i * 2654435761) % 1_000_000_007


def child_map(structure: str, n: int) -> dict[str, Any]:
    from statecore.copy_on_write_state_map import CopyOnWriteStateMap
    from statecore.serializers import VOID_NAMESPACE

    gc.disable()  # nothing here becomes garbage; collections would only take time
    start = status()
    objects: list[Any] = [None] * (2 * n)
    held = status()
    rng = random.Random(SEED)
    for i in range(n):
        objects[2 * i] = rng.getrandbits(62)
        objects[2 * i + 1] = i
    filled = status()
    layout: dict[str, Any] = {}
    if structure == "dict":
        d: dict[int, int] = {}
        for i in range(0, 2 * n, 2):
            d[objects[i]] = objects[i + 1]
        entries = len(d)
    else:
        m: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap()
        put, ns = m.put, VOID_NAMESPACE
        for i in range(0, 2 * n, 2):
            put(objects[i], ns, objects[i + 1])
        entries = len(m)
        layout = {"capacity": m.capacity, "rehashing": m.is_rehashing}
    built = status()
    if entries != n:
        raise AssertionError(f"{structure}: {entries} entries, expected {n} (duplicate keys)")
    return {"entries": entries, "list_bytes": held["VmRSS"] - start["VmRSS"],
            "keys_values_bytes": filled["VmRSS"] - held["VmRSS"],
            "structure_bytes": built["VmRSS"] - filled["VmRSS"],
            "peak_over_filled_bytes": built["VmHWM"] - filled["VmRSS"], **layout}


def child_input(n: int, path: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.table({"key": pa.array([build_key(i) for i in range(n)], pa.string()),
                      "v": pa.array([build_value(i) for i in range(n)], pa.int64())})
    pacsv.write_csv(table, path)
    return {"rows": n, "bytes": os.path.getsize(path)}


def _build_imports() -> None:
    """What a build imports, so that the baseline includes it (imports are not state)."""
    import pyarrow.csv  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import cli.main  # noqa: F401
    import formats.open  # noqa: F401
    import formats.ops.build  # noqa: F401
    import formats.statectl.async_writer  # noqa: F401
    import formats.statectl.storage  # noqa: F401


def child_build(path: str, directory: str) -> dict[str, Any]:
    _build_imports()
    from cli.main import statectl

    gc.collect()
    base = status()
    statectl(["build", path, "--key", "key", "--agg", "sum:v", "--checkpoint-dir", directory],
             prog_name="statectl", standalone_mode=False)
    end = status()
    from formats.open import open_checkpoint
    from formats.statectl.storage import DirectoryCheckpointStorage

    final = DirectoryCheckpointStorage(directory).completed()[-1].location
    metadata = open_checkpoint(final).metadata
    rows = sum(r.row_count for op in metadata.operators for st in op.subtasks
               for h in st.keyed for r in h.rows)
    return {"baseline_hwm": base["VmHWM"], "peak": end["VmHWM"], "rss_end": end["VmRSS"],
            "rows": rows}


def child_read_input(path: str) -> dict[str, Any]:
    _build_imports()
    from formats.inputs import FileSource

    gc.collect()
    base = status()
    source = FileSource([path])  # what build_state does with its input, without the state
    total = source.count()
    records = sum(1 for _ in source.read(path, 0))
    end = status()
    if records != total:
        raise AssertionError(f"read {records} of {total} records")
    return {"baseline_hwm": base["VmHWM"], "peak": end["VmHWM"], "records": records}


def child_dict_of_build(n: int) -> dict[str, Any]:
    gc.collect()
    base = status()
    d = {build_key(i): build_value(i) for i in range(n)}
    end = status()
    return {"baseline_hwm": base["VmHWM"], "peak": end["VmHWM"], "entries": len(d)}


def child_fork(n: int, mode: str) -> dict[str, Any]:
    from bench_backend import fill, new_backend, random_string_keys

    from formats.statectl.async_writer import write_checkpoint_async
    from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot

    gc.collect()
    base = status()
    backend, state = new_backend("copy_on_write", MAX_PARALLELISM)
    keys = random_string_keys(random.Random(SEED + 3), n)
    fill(backend, state, keys)
    del keys
    gc.collect()
    if mode == "freeze+collect":
        gc.freeze()
    parent = status()
    samples: list[int] = []
    collected_at = None
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory:
        before = child_pids()
        start = time.perf_counter()
        operators = [OperatorSnapshot("bench", "bench", 1, MAX_PARALLELISM,
                                      [SubtaskSnapshot(0, keyed=backend.snapshot())])]
        pending = write_checkpoint_async(f"{directory}/chk-1", 1, operators)
        forked = child_pids() - before
        if pending.writer != "process" or len(forked) != 1:
            raise AssertionError(f"expected one forked writer, got {pending.writer}, {forked}")
        (pid,) = forked
        while not pending.done():
            value = private_dirty(pid)
            if value is not None:
                samples.append(value)
                if mode != "plain" and collected_at is None:
                    gc.collect()  # a full collection, as a long-running parent runs one
                    collected_at = len(samples)
            time.sleep(SAMPLE_SECONDS)
        metadata = pending.result()
        seconds = time.perf_counter() - start
    rows = sum(r.row_count for op in metadata.operators for st in op.subtasks
               for h in st.keyed for r in h.rows)
    if rows != n or not samples:
        raise AssertionError(f"fork: {rows} rows of {n}, {len(samples)} samples")
    return {"base_rss": base["VmRSS"], "parent_rss": parent["VmRSS"],
            "max_private_dirty": max(samples), "first_private_dirty": samples[0],
            "samples": len(samples), "write_seconds": seconds, "rows": rows}


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "map": lambda structure, n: child_map(structure, int(n)),
    "input": lambda n, path: child_input(int(n), path),
    "build": child_build,
    "read-input": child_read_input,
    "dict-of-build": lambda n: child_dict_of_build(int(n)),
    "fork": lambda n, mode: child_fork(int(n), mode),
}


def measure(kind: str, *args: object) -> dict[str, Any]:
    """Run one child in a fresh interpreter and return its report."""
    with tempfile.TemporaryDirectory(prefix="statectl-bench-mem-") as directory:
        out = Path(directory) / "report.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        done = subprocess.run(
            [sys.executable, __file__, "--child", kind, "--out", str(out), *map(str, args)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"memory child {kind} {args} failed:\n{done.stderr}")
        report: dict[str, Any] = json.loads(out.read_text())
        return report


# -- the section --------------------------------------------------------------------------------


def per_entry(report: dict[str, Any], with_objects: bool) -> float:
    """A map child's bytes per entry, with or without its key and value objects."""
    total = int(report["structure_bytes"]) + (
        int(report["keys_values_bytes"]) if with_objects else 0)
    return total / int(report["entries"])


def peak_per_entry(report: dict[str, Any], n: int) -> float:
    """A build-like child's peak RSS over its baseline, per entry."""
    return (int(report["peak"]) - int(report["baseline_hwm"])) / n


def bench_map(sizes: MemorySizes, section: Section) -> None:
    for n in sizes.entries:
        label = ratio_label(n)
        reports = {}
        for structure in ("cow", "dict"):
            progress(f"memory: {structure} with {n:,} int64 entries")
            reports[structure] = measure("map", structure, n)
        cow, plain = reports["cow"], reports["dict"]

        section.rows += [
            Row(f"cow map B/entry, with keys+values ({label})", per_entry(cow, True),
                per_entry(plain, True), BYTES, TWICE_THE_DICT),
            Row(f"cow map B/entry, structure only ({label})", per_entry(cow, False),
                per_entry(plain, False), BYTES),
        ]
        section.raw[f"map_{n}"] = reports
        section.notes.append(
            f"map {label}: keys+values {per_entry(cow, True) - per_entry(cow, False):.0f} "
            f"B/entry; cow table {cow['capacity']:,} buckets "
            f"(rehashing: {cow['rehashing']}); peak over the filled list: cow "
            f"{cow['peak_over_filled_bytes'] / n:.0f}, dict "
            f"{plain['peak_over_filled_bytes'] / n:.0f} B/entry")


def bench_build(sizes: MemorySizes, section: Section) -> None:
    for n in sizes.entries:
        label = ratio_label(n)
        with tempfile.TemporaryDirectory(prefix="statectl-bench-mem-") as directory:
            path = f"{directory}/input.csv"
            progress(f"memory: writing a {n:,}-record input")
            written = measure("input", n, path)
            progress(f"memory: statectl build of {n:,} keys")
            build = measure("build", path, f"{directory}/checkpoints")
            progress("memory: reading the input alone")
            read = measure("read-input", path)
        progress(f"memory: a dict of the same {n:,} entries")
        plain = measure("dict-of-build", n)
        if build["rows"] != n or plain["entries"] != n:
            raise AssertionError(f"build wrote {build['rows']} rows, dict has "
                                 f"{plain['entries']}, expected {n}")
        section.rows += [
            Row(f"build peak RSS B/entry ({label} keys)", peak_per_entry(build, n),
                peak_per_entry(plain, n), BYTES, TWICE_THE_DICT),
            Row(f"build: reading the input alone ({label})", peak_per_entry(read, n),
                peak_per_entry(plain, n), BYTES),
        ]
        section.raw[f"build_{n}"] = {"input": written, "build": build, "read_input": read,
                                     "dict": plain}


def bench_fork(sizes: MemorySizes, section: Section) -> None:
    progress(f"memory: forked checkpoint writer, {FIXED_KEYS:,} keys (the fixed part)")
    fixed = measure("fork", FIXED_KEYS, "plain")
    section.raw[f"fork_{FIXED_KEYS}_plain"] = fixed
    section.rows.append(Row(f"fork writer private dirty ({FIXED_KEYS // 1000}k keys)",
                            fixed["max_private_dirty"], fixed["parent_rss"], BYTES))
    for i, n in enumerate(sizes.entries):
        label = ratio_label(n)
        modes = ("plain", *FORK_GC_MODES) if i == 0 else ("plain",)
        for mode in modes:
            progress(f"memory: forked checkpoint writer, {n:,} keys, {mode}")
            report = measure("fork", n, mode)
            section.raw[f"fork_{n}_{mode}"] = report
            name = (f"fork writer private dirty ({label} keys)" if mode == "plain"
                    else f"fork writer, parent {mode} ({label})")
            section.rows.append(Row(name, report["max_private_dirty"], report["parent_rss"],
                                    BYTES, NOT_DOUBLE if mode == "plain" else None))
        plain = section.raw[f"fork_{n}_plain"]
        state = plain["parent_rss"] - plain["base_rss"]
        beyond = plain["max_private_dirty"] - fixed["max_private_dirty"]
        section.notes.append(
            f"fork {label}: the parent's state (its RSS growth while filling the backend) "
            f"{state / 1e6:.0f} MB, {state / n:.0f} B/entry; the child's private pages "
            f"{plain['max_private_dirty'] / 1e6:.0f} MB: {fixed['max_private_dirty'] / 1e6:.0f} "
            f"MB as with {FIXED_KEYS:,} keys, and {beyond / 1e6:.0f} MB more = "
            f"{beyond / state:.2f} of the state; {plain['samples']} samples over a "
            f"{plain['write_seconds']:.1f} s write")


def bench_memory(cfg: Config) -> Section:
    sizes = MemorySizes.of(cfg)
    section = Section("memory")
    bench_map(sizes, section)
    bench_build(sizes, section)
    bench_fork(sizes, section)
    section.notes[:0] = [
        "every figure from a fresh interpreter reading its own /proc/self/status (VmRSS, "
        "VmHWM); bytes/entry = growth / entries; baseline = a plain dict of the same key and "
        "value objects, in its own process, measured the same way",
        "map: n distinct random int64 keys (62-bit ints) -> the entry's index; "
        "CopyOnWriteStateMap() as the keyed backend makes it (hash mode fast, capacity 128); "
        "'with keys+values' counts the key and value objects, 'structure only' does not",
        "build: statectl build input.csv --key key --agg sum:v (one record per key, string "
        "keys 'user-%010d', int sums), peak RSS (VmHWM) minus the same process after its "
        "imports; dict = {key: sum} of the same strings and ints, peak minus its own "
        "baseline. 'reading the input alone' = FileSource schema + count + every record, as "
        "build reads it",
        f"fork: write_checkpoint_async with the default writer (a forked child) of a keyed "
        f"backend (value state, 16-hex-digit string keys, int values, max parallelism "
        f"{MAX_PARALLELISM}); max of Private_Dirty in /proc/<child>/smaps_rollup, read every "
        f"{SAMPLE_SECONDS * 1e3:g} ms while it writes, against the parent's VmRSS at the fork; "
        f"the parent only samples (the 'parent collect' rows: it runs gc.collect() once "
        f"during the write, after gc.freeze() before the fork in 'freeze+collect')",
        "bar < 1x for the fork (issue 22: a checkpoint's fork must not double resident "
        "memory): parent RSS + the child's private copies stay under twice the parent's. "
        "The child copies most pages that hold state objects all the same: CPython writes the "
        "reference count of every object the writer reads (entries, keys, values), so each "
        "page holding one becomes private; only the map's bucket arrays stay shared. The library's "
        "thread writer (writer=\"thread\") copies nothing, at the price of sharing the GIL",
    ]
    return section


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="one memory measurement (bench_memory.py)")
    parser.add_argument("--child", choices=sorted(CHILDREN), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("args", nargs="*")
    args = parser.parse_args(argv)
    report = CHILDREN[args.child](*args.args)
    args.out.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
