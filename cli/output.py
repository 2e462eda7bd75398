"""What commands print: one :class:`Output` interface, a rich text and a JSON implementation.

Commands hand library results (dataclasses) to an ``Output``; nothing else in the CLI formats.
Both implementations are complete (a test enumerates the methods). ``TextOutput`` draws for
people with rich (no ANSI codes when stdout is not a terminal); ``JsonOutput`` prints exactly
one JSON document on stdout, a contract for scripts: fields are added, never renamed. Values
JSON cannot hold natively are rendered with ``repr``; the void namespace is ``null``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from cli.inspect_view import draw_inspect, inspect_json, ttl_time
from cli.query_view import draw_query, query_json
from cli.rescale_view import draw_plan, plan_json, rescale_result_json
from cli.tables import print_table
from cli.values import format_epoch_ms, format_size, format_value, to_json_value
from cli.verify_view import draw_verify, verify_json
from formats.model.json_contract import SCHEMA_VERSION
from formats.ops.build import BuildSummary
from formats.ops.convert import ConvertResult
from formats.ops.diff import Difference, DiffReport
from formats.ops.export import ExportResult
from formats.ops.history import KeyHistory, namespace_text
from formats.ops.inspect import InspectReport
from formats.ops.query import QueryResult
from formats.ops.rescale import RescaleResult
from formats.ops.verify import VerifyReport
from formats.statectl.storage import PruneResult, SnapshotInfo
from statecore.map_trace import TraceResult, TraceSettings, TraceStep
from statecore.rescale_plan import RescalePlan
from statecore.serializers import VOID_NAMESPACE
from statecore.state_map import StateEntry
from statecore.state_map_layout import Chains, EntryView, MapLayout, SnapshotLayout
from statecore.wording import counted

if TYPE_CHECKING:
    from cli.walkthroughs import Walkthrough

__all__ = ["JsonOutput", "Output", "TextOutput"]

class Output(ABC):
    """Where a command's result goes; one method per kind of result."""

    @abstractmethod
    def trace(self, result: TraceResult) -> None:
        """Show a trace: the settings, then every step with the map after it."""

    @abstractmethod
    def walkthroughs(self, walkthroughs: Sequence[Walkthrough]) -> None:
        """List the walkthrough scripts shipped with statectl."""

    @abstractmethod
    def screenshot(self, path: str, columns: int, rows: int, keys: int) -> None:
        """Say where ``browse --svg`` wrote its screen: ``columns`` x ``rows``, after ``keys``."""

    @abstractmethod
    def progress(self, description: str) -> AbstractContextManager[Callable[[int, int], None]]:
        """A progress reporter ``(done, total)`` for long work (stderr; may show nothing)."""

    @abstractmethod
    def build(self, summary: BuildSummary) -> None:
        """Show what a build processed and wrote."""

    @abstractmethod
    def inspect(self, report: InspectReport, width: int | None = 0) -> None:
        """Show a checkpoint: its summary, or the views asked for (key groups, top...).

        ``width``: where text cuts one key's long values (``0``: the terminal's width;
        ``None``: never).
        """

    @abstractmethod
    def snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        """List checkpoints and savepoints (id, kind, time, size, location)."""

    @abstractmethod
    def savepoint(self, savepoint: SnapshotInfo, built: BuildSummary | None) -> None:
        """Show a savepoint just taken, and the input processed first (``built``) if any."""

    @abstractmethod
    def released(self, checkpoint_ids: Sequence[int]) -> None:
        """Say which checkpoints or savepoints were released."""

    @abstractmethod
    def pruned(self, result: PruneResult) -> None:
        """Say what prune released, kept (being read) and which leftovers it removed."""

    @abstractmethod
    def rescale(self, plan: RescalePlan, run: Callable[[], RescaleResult] | None,
                show_all: bool = False) -> None:
        """Show a rescale plan, then (``run`` given) carry it out and show what was written.

        ``show_all``: every operator's per-subtask table (text; by default the plan fits a
        screen).
        """

    @abstractmethod
    def convert(self, result: ConvertResult) -> None:
        """Say what a conversion wrote."""

    @abstractmethod
    def verify(self, report: VerifyReport) -> None:
        """Show what verify checked and every problem it found."""

    @abstractmethod
    def export(self, result: ExportResult) -> None:
        """Say what export wrote: one table per state with its rows."""

    @abstractmethod
    def diff(self, report: DiffReport) -> None:
        """Show the differences of two checkpoints (the first ``limit``) and their counts."""

    @abstractmethod
    def history(self, history: KeyHistory, everything: bool) -> None:
        """Show one key's values in each snapshot (text: the changes; ``everything``: all)."""

    @abstractmethod
    def query(self, result: QueryResult, out: str | None, limit: int | None) -> None:
        """Show a query's result (the rows that fit, or ``limit``), or where ``out`` has it."""


# -- text -----------------------------------------------------------------------------------------

STYLE_COPIED = "bold yellow"
STYLE_SHARED = "cyan"
STYLE_SNAPSHOT_ONLY = "red"
STYLE_NOTE = "italic dim"
STYLE_SOURCE = "bold"


def _format_composite_key(key: Any, namespace: Any) -> str:
    if namespace is VOID_NAMESPACE:
        return format_value(key)
    return f"{format_value(key)}@{format_value(namespace)}"


def _snapshot_labels(versions: Sequence[int]) -> str:
    return ",".join(f"S{v}" for v in versions)


#: Width of text output when stdout is not a terminal (rich's default is 80) and no COLUMNS.
PIPED_WIDTH = 120


class TextOutput(Output):
    """Rich drawings for a terminal (plain text when piped)."""

    def __init__(self, *, quiet: bool = False) -> None:
        # soft_wrap: a chain stays on one line, however long; highlight off: only our styles.
        # quiet: nothing at all is printed (errors still are, by the command group).
        self.quiet = quiet
        self.console = Console(highlight=False, soft_wrap=True, quiet=quiet)
        if not self.console.is_terminal and "COLUMNS" not in os.environ:
            self.console.width = PIPED_WIDTH
        #: diagnostics (notes about the result) go to stderr, results to stdout
        self.notes = Console(stderr=True, highlight=False, soft_wrap=True, quiet=quiet)

    @contextmanager
    def progress(self, description: str) -> Iterator[Callable[[int, int], None]]:
        err = Console(stderr=True)
        if self.quiet or not err.is_terminal:
            yield lambda done, total: None
            return
        with Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as bar:
            task = bar.add_task(description, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)

    def snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
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
        print_table(self.console, table)

    def savepoint(self, savepoint: SnapshotInfo, built: BuildSummary | None) -> None:
        if built is not None:
            self.build(built)
        self.snapshots([savepoint])

    def released(self, checkpoint_ids: Sequence[int]) -> None:
        self.console.print("released: " + (", ".join(map(str, checkpoint_ids)) or "nothing"))

    def pruned(self, result: PruneResult) -> None:
        self.released(result.released)
        if result.kept:
            self.console.print("kept, being read by another process: "
                               + ", ".join(map(str, result.kept)))
        for leftover in result.removed:
            by = f" (written by {leftover.owner.describe()})" if leftover.owner else ""
            self.console.print(f"removed {leftover.what} {leftover.location}{by}",
                               markup=False, highlight=False)

    def inspect(self, report: InspectReport, width: int | None = 0) -> None:
        draw_inspect(self.console, report, width)

    def build(self, summary: BuildSummary) -> None:
        resumed = ("" if summary.restored_from is None
                   else f" (resumed from checkpoint {summary.restored_from})")
        self.console.print(f"processed {summary.records:,} of {summary.total_records:,} "
                           f"records{resumed}")
        self.console.print(f"states: {', '.join(summary.states)}; parallelism "
                           f"{summary.parallelism}, max parallelism {summary.max_parallelism}")
        if summary.checkpoints:
            self.console.print(f"checkpoints completed on the way: "
                               f"{', '.join(map(str, summary.checkpoints))}")
        for checkpoint_id, reason in sorted(summary.failed_checkpoints.items()):
            self.console.print(f"checkpoint {checkpoint_id} failed: {reason}",
                               style="bold red")
        self.console.print(f"final state: checkpoint {summary.final_checkpoint} at "
                           f"{summary.final_location}")
        if summary.skipped:
            reasons = ", ".join(f"{reason} {count:,}" for reason, count in summary.skipped.items())
            self.console.print(f"left out {counted(sum(summary.skipped.values()), 'bad record')} "
                               f"(--on-bad-record skip): {reasons}", markup=False,
                               highlight=False)
            for bad in summary.skipped_examples:
                self.console.print(f"  {bad.where()}: {bad.detail}", markup=False,
                                   highlight=False)

    def rescale(self, plan: RescalePlan, run: Callable[[], RescaleResult] | None,
                show_all: bool = False) -> None:
        draw_plan(self.console, plan, show_all)
        if run is None:
            return
        result = run()
        self.console.print(
            f"wrote {result.location} ({result.mode}): {result.files_linked} files linked, "
            + (f"{result.files_copied} copied, " if result.files_copied else "")
            + f"{result.files_written} written, {result.entries_written:,} entries rewritten"
            + (f", {result.entries_dropped:,} expired entries dropped"
               if result.entries_dropped else "") + f" in {result.seconds:.2f} s")
        if result.release_text:
            self.console.print(f"a savepoint {escape(result.release_text)}")

    def convert(self, result: ConvertResult) -> None:
        self.console.print(
            f"wrote {escape(result.location)}: a {result.format.capitalize()} canonical savepoint "
            f"of {result.source_format}'s state, {counted(result.entries, 'keyed entry')} in "
            f"{result.files} files ({format_size(result.bytes)}) in {result.seconds:.2f} s")
        if result.release_text:
            self.console.print(f"a savepoint {escape(result.release_text)}")

    def verify(self, report: VerifyReport) -> None:
        draw_verify(self.console, report)

    def diff(self, report: DiffReport) -> None:
        if report.equal:
            self.console.print(f"{report.left} and {report.right} hold the same state "
                               f"({report.compared:,} entries and elements compared)",
                               style="bold green")
            return
        table = Table(title=f"{escape(report.left)} -> {escape(report.right)}: " + ", ".join(
            f"{n:,} {change}" for change, n in sorted(report.counts.items())),
            title_justify="left")
        for column in ("change", "operator", "state", "key", "A", "B"):
            table.add_column(column)
        for d in report.differences:
            table.add_row(d.change, escape(d.operator.label), escape(d.state or ""),
                          escape(_difference_key(d)),
                          _difference_side(d.left, d.left_ttl_timestamp),
                          _difference_side(d.right, d.right_ttl_timestamp))
        self.console.print(table)
        shown = len(report.differences)
        if shown < report.found:
            self.notes.print(f"(first {shown} of {report.found} shown; --limit N shows more)",
                               style=STYLE_NOTE)

    def history(self, history: KeyHistory, everything: bool) -> None:
        changed = sum(1 for s in history.snapshots if s.changed)
        snapshots = counted(len(history.snapshots), "snapshot")
        table = Table(title=f"key {escape(history.key)}: {snapshots}, oldest first; {changed} "
                            "with changes", title_justify="left")
        for column in ("snapshot", "written", "state", "value", "change"):
            table.add_column(column, overflow="fold")
        for snapshot in history.snapshots:
            label = f"{snapshot.kind} {snapshot.checkpoint_id}"
            written = format_epoch_ms(snapshot.created_ms)
            shown = [v for v in snapshot.values if everything or v.change != "same"]
            if not shown:
                table.add_row(label, written, "", "[dim]no change[/dim]", "")
            for n, v in enumerate(shown):
                name = f"{v.operator.label}/{v.state}"
                if v.namespace is not VOID_NAMESPACE:
                    name += f" @{format_value(v.namespace)}"
                value = escape(format_value(v.value))
                if v.ttl_timestamp is not None:
                    value += f"\n[dim](last access {escape(ttl_time(v.ttl_timestamp))})[/dim]"
                table.add_row(label if n == 0 else "", written if n == 0 else "",
                              escape(name), value,
                              v.change if v.change != "same" else "[dim]same[/dim]")
        self.console.print(table)
        if any(s.format != "statectl" for s in history.snapshots):
            self.notes.print("written: a Flink snapshot records no time; shown is its "
                             "_metadata's modification time (a copy changes it)",
                             style=STYLE_NOTE)

    def query(self, result: QueryResult, out: str | None, limit: int | None) -> None:
        draw_query(self.console, self.notes, result, out, limit, STYLE_NOTE)

    def export(self, result: ExportResult) -> None:
        table = Table(title=f"exported to {escape(result.location)} ({result.format}): "
                            f"{result.rows:,} rows in {result.seconds:.2f} s",
                      title_justify="left")
        for column in ("operator", "state", "kind", "rows"):
            table.add_column(column, justify="right" if column == "rows" else "left",
                             overflow="fold" if column == "state" else "ellipsis")
        table.add_column("file", overflow="fold")  # the whole path, wrapped: never cut
        for t in result.tables:
            table.add_row(escape(t.operator.label), escape(t.state), f"{t.scope} {t.kind}",
                          f"{t.rows:,}", escape(t.path))
        self.console.print(table)

    def trace(self, result: TraceResult) -> None:
        for note in result.preamble:
            self.console.print(Text(f"# {note}".rstrip(), style=STYLE_NOTE))
        self.console.print(Text(_settings_line(result.settings)))
        for step in result.steps:
            self.console.print()
            for line in _step_lines(step):
                self.console.print(line)

    def screenshot(self, path: str, columns: int, rows: int, keys: int) -> None:
        self.console.print(escape(f"wrote {path} ({columns}x{rows}, after {keys} keys)"),
                           soft_wrap=True)

    def walkthroughs(self, walkthroughs: Sequence[Walkthrough]) -> None:
        width = max((len(w.name) for w in walkthroughs), default=0)
        for walkthrough in walkthroughs:
            line = Text(walkthrough.name.ljust(width), style=STYLE_SOURCE)
            line.append(f"  {walkthrough.title}")
            self.console.print(line)


def _settings_line(settings: TraceSettings) -> str:
    parts = [f"capacity {settings.capacity}", f"hash mode {settings.hash_mode}",
             f"min transfer {settings.min_transfer}"]
    if settings.hash_overrides:
        pinned = " ".join(f"{format_value(k)}={h}" for k, h in settings.hash_overrides)
        parts.append(f"pinned hashes {pinned}")
    return "trace: " + ", ".join(parts)


def _step_lines(step: TraceStep) -> list[Text]:
    lines = [Text(f"# {note}".rstrip(), style=STYLE_NOTE) for note in step.notes]
    title = Text(f"line {step.line_number}: ")
    title.append(step.source, style=STYLE_SOURCE)
    if step.has_result:
        title.append(f" => {_format_result(step.result)}")
    lines.append(title)
    layout = step.layout
    snapshots = _snapshot_labels(layout.snapshot_versions) or "none"
    lines.append(Text(
        f"  state_map_version={layout.state_map_version}"
        f" highest_required_snapshot_version={layout.highest_required_snapshot_version}"
        f" snapshots={snapshots} rehash_index={layout.rehash_index} size={layout.size}"))
    copied = set(step.copied)
    if layout.rehashing:
        moved = (f"buckets 0-{layout.rehash_index - 1} moved" if layout.rehash_index
                 else "nothing moved yet")
        lines.append(Text(f"  primary table (old): {layout.primary_table_length} buckets,"
                          f" {moved}"))
        lines.extend(_chain_lines(layout.primary_chains, copied, live=True))
        lines.append(Text(f"  rehash table (new): {layout.incremental_rehash_table_length}"
                          f" buckets"))
        lines.extend(_chain_lines(layout.incremental_rehash_chains, copied, live=True))
    else:
        lines.append(Text(f"  primary table: {layout.primary_table_length} buckets"))
        lines.extend(_chain_lines(layout.primary_chains, copied, live=True))
    for snapshot in layout.snapshots:
        lines.append(Text(_snapshot_heading(snapshot)))
        lines.extend(_chain_lines(snapshot.chains, set(), live=False))
    return lines


def _snapshot_heading(snapshot: SnapshotLayout) -> str:
    during = ", taken while rehashing" if snapshot.taken_during_rehash else ""
    return (f"  snapshot {snapshot.version}: {snapshot.array_length} buckets,"
            f" {counted(snapshot.number_of_entries, 'entry')}{during}")


def _chain_lines(chains: Chains, copied: set[tuple[Any, Any]], *, live: bool) -> list[Text]:
    if not chains:
        return [Text("    (empty)")]
    width = len(str(chains[-1][0]))
    lines = []
    for bucket, entries in chains:
        line = Text(f"    {str(bucket).rjust(width)}: ")
        for position, entry in enumerate(entries):
            if position:
                line.append(" -> ")
            line.append_text(_entry_text(entry, copied, live=live))
        lines.append(line)
    return lines


def _entry_text(entry: EntryView, copied: set[tuple[Any, Any]], *, live: bool) -> Text:
    text = Text(f"K:{_format_composite_key(entry.key, entry.namespace)}"
                f" S:{format_value(entry.state)}"
                f" (e{entry.entry_version} s{entry.state_version})")
    if live:
        if (entry.key, entry.namespace) in copied:
            text.append(" copied", style=STYLE_COPIED)
        if entry.shared_with:
            text.append(f" [{_snapshot_labels(entry.shared_with)}]", style=STYLE_SHARED)
    elif not entry.live:
        # Superseded in the map: only the snapshot(s) still reach this entry object.
        text.append(f" [{_snapshot_labels(entry.shared_with)} only]", style=STYLE_SNAPSHOT_ONLY)
    return text


def _format_result(result: Any) -> str:
    if isinstance(result, tuple) and all(isinstance(e, StateEntry) for e in result):
        inner = ", ".join(f"{_format_composite_key(e.key, e.namespace)}: {format_value(e.state)}"
                          for e in result)
        return "{" + inner + "}"
    if result is None:
        return "null"
    return format_value(result)


# -- JSON -----------------------------------------------------------------------------------------


def _entry_json(entry: EntryView) -> dict[str, Any]:
    return {
        "key": to_json_value(entry.key),
        "namespace": to_json_value(entry.namespace),
        "state": to_json_value(entry.state),
        "hash": entry.hash,
        "entry_version": entry.entry_version,
        "state_version": entry.state_version,
        "shared_with": list(entry.shared_with),
        "live": entry.live,
    }


def _chains_json(chains: Chains) -> list[dict[str, Any]]:
    return [{"bucket": bucket, "entries": [_entry_json(e) for e in entries]}
            for bucket, entries in chains]


def _with_chains_json(layout: MapLayout | SnapshotLayout) -> dict[str, Any]:
    """Every field of a layout dataclass; chains as ``[{"bucket", "entries"}]``."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(layout):
        value = getattr(layout, field.name)
        if field.name.endswith("chains"):
            out[field.name] = _chains_json(value)
        elif field.name == "snapshots":
            out[field.name] = [_with_chains_json(s) for s in value]
        elif isinstance(value, tuple | list):  # structure (versions...), not a state value
            out[field.name] = [to_json_value(v) for v in value]
        else:
            out[field.name] = to_json_value(value)
    return out


def _difference_side(value: Any, ttl_timestamp: Any) -> str:
    """One side of a difference: the value, and with TTL its last access (as ``inspect``)."""
    if value is None:
        return ""
    text = escape(format_value(value))
    if ttl_timestamp is None:
        return text
    return f"{text}\n[dim](last access {escape(ttl_time(ttl_timestamp))})[/dim]"


def _difference_key(d: Difference) -> str:
    if d.scope in ("operator", "state"):
        return f"({d.scope})"
    if d.scope == "element":
        return f"(element x{d.count})" if d.count > 1 else "(element)"
    return _format_composite_key(d.key, VOID_NAMESPACE if d.namespace is None else d.namespace)


def snapshot_json(s: SnapshotInfo) -> dict[str, Any]:
    return {"checkpoint_id": s.checkpoint_id, "kind": s.kind, "created_ms": s.created_ms,
            "bytes": s.bytes, "location": s.location, "complete": s.complete}


def build_json(summary: BuildSummary) -> dict[str, Any]:
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


def trace_json(result: TraceResult) -> dict[str, Any]:
    """Build the JSON document of a trace (the ``statectl --output json trace`` contract)."""
    settings = result.settings
    return {
        "settings": {
            "capacity": settings.capacity,
            "hash_mode": settings.hash_mode,
            "min_transfer": settings.min_transfer,
            "hash_overrides": [{"key": to_json_value(k), "hash": h}
                               for k, h in settings.hash_overrides],
        },
        "preamble": list(result.preamble),
        "steps": [
            {
                "line": step.line_number,
                "source": step.source,
                "op": step.op,
                "args": [to_json_value(a) for a in step.args],
                "result": to_json_value(step.result),
                "copied": [{"key": to_json_value(k), "namespace": to_json_value(n)}
                           for k, n in step.copied],
                "notes": list(step.notes),
                "layout": _with_chains_json(step.layout),
            }
            for step in result.steps
        ],
    }


def diff_json(report: DiffReport) -> dict[str, Any]:
    return {"left": {"location": report.left}, "right": {"location": report.right},
            "equal": report.equal,
            "compared": report.compared, "counts": dict(sorted(report.counts.items())),
            "total": report.total, "limit": report.limit,
            "differences": [{"change": d.change, "scope": d.scope,
                             "operator": d.operator.to_json(),
                             "state": d.state, "key": to_json_value(d.key),
                             "namespace": to_json_value(d.namespace),
                             "left": to_json_value(d.left), "right": to_json_value(d.right),
                             "left_ttl_timestamp": to_json_value(d.left_ttl_timestamp),
                             "right_ttl_timestamp": to_json_value(d.right_ttl_timestamp),
                             "count": d.count} for d in report.differences]}


class JsonOutput(Output):
    """One JSON document per command on stdout."""

    def _emit(self, document: dict[str, Any]) -> None:
        document = {"schema_version": SCHEMA_VERSION, **document}
        click.echo(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False))

    @contextmanager
    def progress(self, description: str) -> Iterator[Callable[[int, int], None]]:
        yield lambda done, total: None  # JSON mode never draws

    def build(self, summary: BuildSummary) -> None:
        self._emit(build_json(summary))

    def inspect(self, report: InspectReport, width: int | None = 0) -> None:
        self._emit(inspect_json(report))

    def snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        self._emit({"snapshots": [snapshot_json(s) for s in snapshots]})

    def savepoint(self, savepoint: SnapshotInfo, built: BuildSummary | None) -> None:
        document: dict[str, Any] = {"snapshots": [snapshot_json(savepoint)]}
        if built is not None:
            document["build"] = build_json(built)
        self._emit(document)

    def released(self, checkpoint_ids: Sequence[int]) -> None:
        self._emit({"released": list(checkpoint_ids)})

    def pruned(self, result: PruneResult) -> None:
        self._emit({"released": list(result.released), "kept": list(result.kept),
                    "leftovers": [{"location": leftover.location, "what": leftover.what}
                                  for leftover in result.removed]})

    def trace(self, result: TraceResult) -> None:
        self._emit(trace_json(result))

    def rescale(self, plan: RescalePlan, run: Callable[[], RescaleResult] | None,
                show_all: bool = False) -> None:
        document: dict[str, Any] = {"plan": plan_json(plan)}
        if run is not None:
            document["result"] = rescale_result_json(run())
        self._emit(document)

    def convert(self, result: ConvertResult) -> None:
        self._emit({"location": result.location, "format": result.format,
                    "source_format": result.source_format, "files": result.files,
                    "bytes": result.bytes, "entries": result.entries,
                    "seconds": result.seconds, "flink_release": result.release})

    def verify(self, report: VerifyReport) -> None:
        self._emit(verify_json(report))

    def diff(self, report: DiffReport) -> None:
        self._emit(diff_json(report))

    def export(self, result: ExportResult) -> None:
        self._emit({"location": result.location, "format": result.format,
                    "rows": result.rows, "seconds": result.seconds,
                    "tables": [t.to_json() for t in result.tables]})

    def screenshot(self, path: str, columns: int, rows: int, keys: int) -> None:
        self._emit({"svg": path, "columns": columns, "rows": rows, "keys": keys})

    def walkthroughs(self, walkthroughs: Sequence[Walkthrough]) -> None:
        self._emit({"walkthroughs": [{"name": w.name, "title": w.title}
                                     for w in walkthroughs]})

    def history(self, history: KeyHistory, everything: bool) -> None:
        self._emit({"key": history.key, "snapshots": [{
            "checkpoint_id": s.checkpoint_id, "kind": s.kind, "format": s.format,
            "location": s.location, "created_ms": s.created_ms,
            "created_from": "checkpoint" if s.format == "statectl" else "file-time",
            "values": [{"operator": v.operator.to_json(), "state": v.state,
                        "namespace": to_json_value(namespace_text(v.namespace)),
                        "value": to_json_value(v.value),
                        "ttl_timestamp": to_json_value(v.ttl_timestamp), "change": v.change}
                       for v in s.values]} for s in history.snapshots]})

    def query(self, result: QueryResult, out: str | None, limit: int | None) -> None:
        self._emit(query_json(result, out, limit))
