"""``statectl query`` at scale: what a point query reads, and a top-10 against doing it by hand.

Two sections, ``query`` (the first two) and ``query-across`` (the third; ``bench/run.py`` runs
them with the others):

* **bytes read by a point query** (``WHERE key = 'K'``) of the 1 GB checkpoint of the
  ``inspect`` benchmark (:func:`bench_inspect.make_checkpoint`: 256k string keys, 4 KiB values,
  parallelism 4, max parallelism 128; quick: 4k keys), counted through
  ``formats.storage.io_stats.CountingHandler``, against the checkpoint's bytes: bar <= 2%.
* **a top-10 over one state of the big Flink snapshot** (``bench/flink_big.py``'s canonical
  savepoint: 1M keys per keyed operator), ``statectl query`` (open, then the query) against
  what a user does without it: ``export --state`` to Parquet, then DuckDB over the file. Run
  alternately, median of three each: bar <= 1.2x the time. Quick: the Flink fixtures' java
  savepoint (no bar: too small to time).
* **one key across 20 retained checkpoints** (issue 44): a state directory that ``build
  --keep 20`` left (1M events of 100k keys, parallelism 4, a checkpoint every 50k events;
  quick: 40k of 4k keys), ``statectl query DIR "SELECT snapshot, value FROM
  all_snapshots.build.count WHERE key = 'K'"`` against ``statectl history DIR --key K --state
  count`` (the same values, checked), both as the commands run (in this process: no
  interpreter start-up in either), alternately, median of five each: bar <= 1.2x history's
  time.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import duckdb
import pyarrow.fs as pafs
from bench_inspect import make_checkpoint
from bench_state_maps import SEED, Bar, Config, Row, Section, median, progress

from formats.open import open_checkpoint
from formats.ops.export import export_checkpoint
from formats.ops.query import run_query
from formats.storage.io_stats import CountingHandler

REPS = 3
BYTES = cast(Any, "bytes")
OPERATOR, STATE = "str-keyed", "count"
TOP = (f'SELECT key, value FROM "{OPERATOR}"."{STATE}" '
       "ORDER BY value DESC, key LIMIT 10")


def _point_query(section: Section, cfg: Config) -> None:
    keys = cfg.snapshot_entries // 4 if cfg.snapshot_entries >= 1_000_000 else 4_096
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory:
        location = str(Path(directory) / "chk")
        progress(f"query: writing a checkpoint of {keys:,} keys")
        names = make_checkpoint(location, keys, SEED + 40)
        total = sum(os.path.getsize(os.path.join(root, f))
                    for root, _, files in os.walk(location) for f in files)
        key = names[len(names) // 2]
        handler = CountingHandler()
        started = time.perf_counter()
        checkpoint = open_checkpoint(location, filesystem=pafs.PyFileSystem(handler))
        result = run_query({"snapshot": checkpoint},
                           f"SELECT key, octet_length(value) FROM bench.payload "
                           f"WHERE key = '{key}'")
        seconds = time.perf_counter() - started
        if result.table.num_rows != 1:
            raise AssertionError(f"the point query found {result.table.num_rows} rows")
        read = sum(handler.counts.values())
    section.rows.append(Row("query: point query (key = K), bytes read / total", read, total,
                            BYTES, Bar("<=", 0.02, "<= 2%")))
    section.raw["point_query"] = {"bytes_read": read, "total_bytes": total,
                                  "seconds": seconds, "keys": keys}
    section.notes.append(f"query: a point query read {read:,} of {total:,} bytes "
                         f"({read / total:.3%}) of a {total / 1e9:.2f} GB checkpoint in "
                         f"{seconds:.2f} s")


def _by_query(location: str) -> tuple[float, list[Any]]:
    gc.collect()
    started = time.perf_counter()
    # as the command opens it: the state is decoded when the query reads it
    checkpoint = open_checkpoint(location, decode=False, partial=True)
    rows = run_query({"snapshot": checkpoint}, TOP).table.to_pylist()
    return time.perf_counter() - started, rows


def _by_hand(location: str, directory: str) -> tuple[float, list[Any]]:
    gc.collect()
    out = str(Path(directory) / f"export-{time.monotonic_ns()}")
    started = time.perf_counter()
    result = export_checkpoint(open_checkpoint(location), out, "parquet", [STATE])
    table = next(t for t in result.tables if t.operator.uid == OPERATOR)
    rows = duckdb.sql(f"SELECT key, value FROM read_parquet('{out}/{table.path}') "
                      "ORDER BY value DESC, key LIMIT 10").to_arrow_table().to_pylist()
    return time.perf_counter() - started, rows


def _top_ten(section: Section, cfg: Config) -> None:
    if cfg.snapshot_entries >= 1_000_000:
        from flink_big import snapshots
        folder, manifest = snapshots()
        location = str(folder / manifest["snapshots"]["canonical-savepoint"]["path"])
        label, bar = "flink big canonical savepoint", Bar("<=", 1.2, "<= 1.2x")
    else:
        from flink_fixtures import fixture_sets
        from flink_fixtures import snapshots as fixture_snapshots
        sets = [s for s in fixture_sets("heap") if s.name == "java-mp128"]
        if not sets:
            return
        location = str(sets[0] / next(snap["path"] for fixture, snap in fixture_snapshots()
                                      if fixture == sets[0] and "canonical" in snap["path"]))
        label, bar = "flink fixture savepoint (small: no bar)", None
    took: dict[str, list[float]] = {"query": [], "hand": []}
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory:
        for rep in range(REPS):
            progress(f"query: top-10 of {label}, run {rep + 1} of {REPS}")
            seconds, by_query = _by_query(location)
            took["query"].append(seconds)
            seconds, by_hand = _by_hand(location, directory)
            took["hand"].append(seconds)
            if by_query != by_hand:
                raise AssertionError(f"query and export + DuckDB differ: {by_query[:3]} vs "
                                     f"{by_hand[:3]}")
    query, hand = median(took["query"]), median(took["hand"])
    section.rows.append(Row(f"query top-10 vs export + DuckDB, {label} (time)", query * 1e9,
                            hand * 1e9, "ns", bar))
    section.raw["top_ten"] = {"location": location, "query_seconds": took["query"],
                              "export_duckdb_seconds": took["hand"]}
    section.notes.append(f"query: top-10 of {OPERATOR}/{STATE} of the {label}: statectl query "
                         f"{query:.2f} s, export --state {STATE} + DuckDB over the Parquet "
                         f"{hand:.2f} s (medians of {REPS}, run alternately)")


ACROSS_REPS = 5


def _invoke(args: list[str]) -> tuple[float, Any]:
    """``statectl --output json ARGS`` in this process: seconds, the JSON document."""
    import json

    from click.testing import CliRunner

    from cli.main import statectl

    gc.collect()
    started = time.perf_counter()
    result = CliRunner().invoke(statectl, ["--output", "json", *args])
    seconds = time.perf_counter() - started
    if result.exit_code != 0:
        raise AssertionError(f"statectl {' '.join(args)}: exit {result.exit_code}: "
                             f"{result.stderr or result.output}")
    return seconds, json.loads(result.stdout)


def _across_checkpoints(section: Section, cfg: Config) -> None:
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    full = cfg.snapshot_entries >= 1_000_000
    events, keys = (1_000_000, 100_000) if full else (40_000, 4_000)
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory:
        source, state = Path(directory) / "events.parquet", str(Path(directory) / "state")
        rng = random.Random(SEED + 44)
        users = [f"user-{rng.randrange(keys):06d}" for _ in range(events)]
        pq.write_table(pa.table({
            "user": users,
            "amount": [rng.randint(1, 100) for _ in range(events)]}), source,
            row_group_size=events // 20)
        progress(f"query: building 20 retained checkpoints of {keys:,} keys")
        _invoke(["build", str(source), "--key", "user", "--agg", "count", "--agg",
                 "sum:amount", "--parallelism", "4", "--checkpoint-dir", state,
                 "--checkpoint-every", str(events // 20), "--keep", "20"])
        retained = len(_invoke(["snapshot", "list", state])[1]["snapshots"])
        key = users[0]  # in every checkpoint
        query = ["query", state, "SELECT snapshot, value FROM all_snapshots.build.count "
                 f"WHERE key = '{key}' ORDER BY snapshot"]
        history = ["history", state, "--key", key, "--state", "count", "--all"]
        took: dict[str, list[float]] = {"query": [], "history": []}
        for rep in range(ACROSS_REPS + 1):  # the first of each: imports, caches (not timed)
            progress(f"query: one key across {retained} checkpoints, run {rep + 1} of "
                     f"{ACROSS_REPS + 1}")
            query_seconds, by_query = _invoke(query)
            history_seconds, by_history = _invoke(history)
            if rep:
                took["query"].append(query_seconds)
                took["history"].append(history_seconds)
        values = {f"chk_{s['checkpoint_id']}": v["value"] for s in by_history["snapshots"]
                  for v in s["values"]}
        if {r["snapshot"]: r["value"] for r in by_query["rows"]} != values or len(
                values) != retained:
            raise AssertionError(f"query and history differ: {by_query['rows'][:3]} vs "
                                 f"{list(values.items())[:3]}")
    query_s, history_s = median(took["query"]), median(took["history"])
    section.rows.append(Row(f"query one key across {retained} checkpoints vs history (time)",
                            query_s * 1e9, history_s * 1e9, "ns", Bar("<=", 1.2, "<= 1.2x")))
    section.raw["across_checkpoints"] = {"checkpoints": retained, "keys": keys,
                                         "events": events, "query_seconds": took["query"],
                                         "history_seconds": took["history"]}
    section.notes.append(f"query: one key ({key}) across the {retained} retained checkpoints "
                         f"of a state directory ({keys:,} keys): statectl query over "
                         f"all_snapshots {query_s:.3f} s, statectl history --state count "
                         f"{history_s:.3f} s (medians of {ACROSS_REPS}, run alternately, in "
                         f"this process)")


def bench_query(cfg: Config) -> Section:
    section = Section("query")
    _point_query(section, cfg)
    _top_ten(section, cfg)
    return section


def bench_query_across(cfg: Config) -> Section:
    """The ``query-across`` section: one key across 20 retained checkpoints, query vs history
    (a section of its own: it needs neither the 1 GB checkpoint nor the big Flink snapshot)."""
    section = Section("query-across")
    _across_checkpoints(section, cfg)
    return section
