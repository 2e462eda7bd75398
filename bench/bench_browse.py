"""``statectl browse`` at scale: time to the first screen and to one state's first page.

One benchmark, ``browse`` (``bench/run.py`` runs it with the others), on the big Flink
snapshot's canonical savepoint (``bench/flink_big.py``; quick: a Flink fixture) and on the
``inspect`` benchmark's 1 GB statectl checkpoint (:func:`bench_inspect.make_checkpoint`),
headless (Textual's ``run_test``, 80x24), each against the ``inspect`` view that reads as much:

* first screen (the tree of operators and states) vs ``inspect PATH`` (the summary: metadata
  and, of a Flink snapshot, the keyed streams' headers): bar <= 2 s for the big snapshot;
* the first page of a keyed state vs ``inspect --key K`` (one key group): the page reads its
  key groups only (statectl's format: their rows; a Flink snapshot: their bytes, decoded
  then), where ``inspect --key`` decodes a Flink snapshot whole (information).
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from bench_inspect import make_checkpoint
from bench_state_maps import SEED, Bar, Config, Row, Section, median, progress

from cli.browse import BrowseApp
from formats.open import open_checkpoint
from formats.ops.inspect import summarize
from formats.ops.state_scan import lookup

REPS = 3
NS = cast(Any, "ns")


def _browse(location: str, operator: str, state: str) -> tuple[float, float]:
    """Seconds to the first screen, and from there to the state's first page."""
    gc.collect()
    times: dict[str, float] = {}

    async def scenario() -> None:
        started = time.perf_counter()
        checkpoint = open_checkpoint(location, decode=False, partial=True)
        app = BrowseApp(checkpoint, location, decoded=None if checkpoint.format_name ==
                        "statectl" else (lambda: open_checkpoint(location, partial=True)))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            times["screen"] = time.perf_counter() - started
            opened = time.perf_counter()
            op = checkpoint.operator(operator)
            app.open_state(op, next(s for s in op.states if s.name == state))
            while app.page is None:
                await pilot.pause(0.01)
            times["page"] = time.perf_counter() - opened
    asyncio.run(scenario())
    return times["screen"], times["page"]


def _timed(view: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    view()
    return time.perf_counter() - started


def _case(section: Section, label: str, location: str, operator: str, state: str, key: str,
          screen_bar: Bar | None) -> None:
    screens, pages, summaries, keys = [], [], [], []
    for rep in range(REPS):
        progress(f"browse: {label}, run {rep + 1} of {REPS}")
        screen, page = _browse(location, operator, state)
        screens.append(screen)
        pages.append(page)
        summaries.append(_timed(lambda: summarize(
            open_checkpoint(location, decode=False, partial=True), location)))
        # as the command opens it: a Flink snapshot decodes the key's key group alone
        keys.append(_timed(lambda: lookup(open_checkpoint(location, decode=False,
                                                          partial=True), key, [state])))
    section.rows.append(Row(f"browse first screen vs inspect summary, {label} (time)",
                            median(screens) * 1e9, median(summaries) * 1e9, NS, None))
    if screen_bar is not None:
        section.rows.append(Row(f"browse first screen, {label}, vs 2 s", median(screens) * 1e9,
                                2e9, NS, screen_bar))
    section.rows.append(Row(f"browse first page of {state} vs inspect --key, {label} (time)",
                            median(pages) * 1e9, median(keys) * 1e9, NS, None))
    section.raw[label] = {"screen_seconds": screens, "page_seconds": pages,
                          "inspect_summary_seconds": summaries, "inspect_key_seconds": keys}
    section.notes.append(f"browse, {label}: first screen {median(screens):.2f} s (inspect "
                         f"summary {median(summaries):.2f} s), first page of {state} "
                         f"{median(pages):.2f} s (inspect --key {median(keys):.2f} s); medians "
                         f"of {REPS}")


def bench_browse(cfg: Config) -> Section:
    section = Section("browse")
    keys = cfg.snapshot_entries // 4 if cfg.snapshot_entries >= 1_000_000 else 4_096
    with tempfile.TemporaryDirectory(prefix="statectl-bench-") as directory:
        location = str(Path(directory) / "chk")
        progress(f"browse: writing a checkpoint of {keys:,} keys")
        names = make_checkpoint(location, keys, SEED + 40)
        total = sum(os.path.getsize(os.path.join(root, f))
                    for root, _, files in os.walk(location) for f in files)
        _case(section, f"statectl checkpoint {total / 1e9:.2f} GB", location, "bench",
              "payload", names[len(names) // 2], None)
    if cfg.snapshot_entries >= 1_000_000:
        from flink_big import snapshots
        folder, manifest = snapshots()
        big = str(folder / manifest["snapshots"]["canonical-savepoint"]["path"])
        _case(section, "flink big canonical savepoint", big, "str-keyed", "count", "k7",
              Bar("<=", 1.0, "<= 2 s"))
    return section
