"""How ``statectl snapshot`` and ``build`` show their results: rich text and JSON.

``snapshot list`` is a table (id, kind, time, size and the whole location); ``snapshot take``
the same for the savepoint just taken, after what it processed first (``--input``) if it did;
``snapshot release`` and ``prune`` say what they released, kept and removed. ``build`` says
what it processed and wrote: records, states, checkpoints, bad records left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from cli.values import format_size
from cli.views.tables import print_table
from formats.ops.build import BuildSummary
from formats.statectl.storage import PruneResult, SnapshotInfo
from statecore.wording import counted

__all__ = ["build_json", "draw_build", "draw_pruned", "draw_released", "draw_savepoint",
           "draw_snapshots", "pruned_json", "released_json", "savepoint_json", "snapshot_json",
           "snapshots_json"]


def draw_snapshots(console: Console, snapshots: Sequence[SnapshotInfo]) -> None:
    """A table of checkpoints and savepoints; locations whole, even when piped."""
    table = Table()
    for column in ("id", "kind", "created (UTC)", "size"):
        table.add_column(column, justify="right" if column in ("id", "size") else "left",
                         no_wrap=True)
    table.add_column("location", overflow="fold")  # whole, wrapped: never cut
    for s in snapshots:
        created = datetime.fromtimestamp(s.created_ms / 1000, tz=UTC)
        table.add_row(str(s.checkpoint_id),
                      s.kind if s.complete else f"{s.kind} (incomplete)",
                      created.strftime("%Y-%m-%d %H:%M:%S"), format_size(s.bytes),
                      s.location)
    print_table(console, table)


def draw_savepoint(console: Console, savepoint: SnapshotInfo, built: BuildSummary | None) -> None:
    """What a build processed first (``built``), if it did, then the savepoint taken."""
    if built is not None:
        draw_build(console, built)
    draw_snapshots(console, [savepoint])


def draw_released(console: Console, checkpoint_ids: Sequence[int]) -> None:
    """One line: the checkpoints or savepoints released, or ``nothing``."""
    console.print("released: " + (", ".join(map(str, checkpoint_ids)) or "nothing"))


def draw_pruned(console: Console, result: PruneResult) -> None:
    """What prune released, kept (being read) and which leftovers it removed."""
    draw_released(console, result.released)
    if result.kept:
        console.print("kept, being read by another process: "
                      + ", ".join(map(str, result.kept)))
    for leftover in result.removed:
        by = f" (written by {leftover.owner.describe()})" if leftover.owner else ""
        console.print(f"removed {leftover.what} {leftover.location}{by}",
                      markup=False, highlight=False)


def draw_build(console: Console, summary: BuildSummary) -> None:
    """What a build processed and wrote, and the bad records it left out."""
    resumed = ("" if summary.restored_from is None
               else f" (resumed from checkpoint {summary.restored_from})")
    console.print(f"processed {summary.records:,} of {summary.total_records:,} "
                  f"records{resumed}")
    console.print(f"states: {', '.join(summary.states)}; parallelism "
                  f"{summary.parallelism}, max parallelism {summary.max_parallelism}")
    if summary.checkpoints:
        console.print(f"checkpoints completed on the way: "
                      f"{', '.join(map(str, summary.checkpoints))}")
    for checkpoint_id, reason in sorted(summary.failed_checkpoints.items()):
        console.print(f"checkpoint {checkpoint_id} failed: {reason}",
                      style="bold red")
    console.print(f"final state: checkpoint {summary.final_checkpoint} at "
                  f"{summary.final_location}")
    if summary.skipped:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in summary.skipped.items())
        console.print(f"left out {counted(sum(summary.skipped.values()), 'bad record')} "
                      f"(--on-bad-record skip): {reasons}", markup=False,
                      highlight=False)
        for bad in summary.skipped_examples:
            console.print(f"  {bad.where()}: {bad.detail}", markup=False,
                          highlight=False)


def snapshot_json(s: SnapshotInfo) -> dict[str, Any]:
    """One checkpoint or savepoint of the ``snapshots`` list."""
    return {"checkpoint_id": s.checkpoint_id, "kind": s.kind, "created_ms": s.created_ms,
            "bytes": s.bytes, "location": s.location, "complete": s.complete}


def snapshots_json(snapshots: Sequence[SnapshotInfo]) -> dict[str, Any]:
    """The ``snapshot list`` document."""
    return {"snapshots": [snapshot_json(s) for s in snapshots]}


def savepoint_json(savepoint: SnapshotInfo, built: BuildSummary | None) -> dict[str, Any]:
    """The ``snapshot take`` document: the savepoint, and the build first run if any."""
    document: dict[str, Any] = {"snapshots": [snapshot_json(savepoint)]}
    if built is not None:
        document["build"] = build_json(built)
    return document


def released_json(checkpoint_ids: Sequence[int]) -> dict[str, Any]:
    """The ``snapshot release`` document."""
    return {"released": list(checkpoint_ids)}


def pruned_json(result: PruneResult) -> dict[str, Any]:
    """The ``snapshot prune`` document: released, kept and the leftovers removed."""
    return {"released": list(result.released), "kept": list(result.kept),
            "leftovers": [{"location": leftover.location, "what": leftover.what}
                          for leftover in result.removed]}


def build_json(summary: BuildSummary) -> dict[str, Any]:
    """The ``build`` document: what was processed and written, and how long it took."""
    return {
        "records": summary.records, "total_records": summary.total_records,
        "restored_from": summary.restored_from, "checkpoints": list(summary.checkpoints),
        "failed_checkpoints": {str(k): v for k, v in summary.failed_checkpoints.items()},
        "final_checkpoint": summary.final_checkpoint, "location": summary.final_location,
        "states": list(summary.states), "parallelism": summary.parallelism,
        "max_parallelism": summary.max_parallelism, "folded": summary.folded,
        "seconds": None if summary.seconds is None else round(summary.seconds.total, 6),
        "phases": None if summary.seconds is None else {
            "setup": round(summary.seconds.setup, 6),
            "processing": round(summary.seconds.processing, 6),
            "final_checkpoint": (None if summary.seconds.final_checkpoint is None
                                 else round(summary.seconds.final_checkpoint, 6))},
        "on_bad_record": summary.on_bad_record, "skipped": dict(summary.skipped),
        "skipped_examples": [
            {"input": bad.file, "row": bad.row, "line": bad.line, "column": bad.column,
             "reason": bad.reason, "detail": bad.detail} for bad in summary.skipped_examples],
    }
