"""What commands print: one :class:`Output` interface, a rich text and a JSON implementation.

Commands hand library results (dataclasses) to an ``Output``; nothing else in the CLI formats.
Both implementations are complete (a test enumerates the methods) and delegate to the views of
each command family (:mod:`cli.views`). ``TextOutput`` draws for people with rich (no ANSI
codes when stdout is not a terminal); ``JsonOutput`` prints exactly one JSON document on stdout,
a contract for scripts: fields are added, never renamed. Values JSON cannot hold natively are
rendered with ``repr``; the void namespace is ``null``.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import click

if TYPE_CHECKING:
    from cli.walkthroughs import Walkthrough
    from formats.ops.build import BuildSummary
    from formats.ops.compat import CompatReport
    from formats.ops.convert import ConvertResult
    from formats.ops.diff import DiffReport
    from formats.ops.export import ExportResult
    from formats.ops.history import KeyHistory
    from formats.ops.inspect import InspectReport
    from formats.ops.migrate import MigrateResult
    from formats.ops.query import QueryResult
    from formats.ops.rescale import RescaleResult
    from formats.ops.verify import VerifyReport
    from formats.statectl.storage import PruneResult, SnapshotInfo
    from statecore.map_trace import TraceResult
    from statecore.rescale_plan import RescalePlan

__all__ = ["JsonOutput", "Output", "Reporter", "TextOutput"]

#: What a progress line shows of ``what`` is in work, at most (a SQL operator's name is long).
SHOWN_WORK = 40


class Reporter(Protocol):
    """Reports progress: ``done`` of ``total``; ``what``, if given, is in work now."""

    def __call__(self, done: int, total: int, what: str = "") -> None: ...

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
    def progress(self, description: str) -> AbstractContextManager[Reporter]:
        """A progress reporter ``(done, total[, what])`` for long work (stderr).

        It may show nothing; else ``description``, followed by ``what`` is in work when given.
        """

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
    def migrate(self, result: MigrateResult) -> None:
        """Say what a migration wrote: the savepoint, what was converted, dropped, left out."""

    @abstractmethod
    def compat(self, report: CompatReport) -> None:
        """Show whether the new job restores the snapshot: the outcome, state by state."""

    @abstractmethod
    def history(self, history: KeyHistory, everything: bool) -> None:
        """Show one key's values in each snapshot (text: the changes; ``everything``: all)."""

    @abstractmethod
    def query(self, result: QueryResult, out: str | None, limit: int | None) -> None:
        """Show a query's result (the rows that fit, or ``limit``), or where ``out`` has it."""


# -- text -----------------------------------------------------------------------------------------

#: Width of text output when stdout is not a terminal (rich's default is 80) and no COLUMNS.
PIPED_WIDTH = 120


class TextOutput(Output):
    """Rich drawings for a terminal (plain text when piped)."""

    def __init__(self, *, quiet: bool = False) -> None:
        from rich.console import Console

        # soft_wrap: a chain stays on one line, however long; highlight off: only our styles.
        # quiet: nothing at all is printed (errors still are, by the command group).
        self.quiet = quiet
        self.console = Console(highlight=False, soft_wrap=True, quiet=quiet)
        if not self.console.is_terminal and "COLUMNS" not in os.environ:
            self.console.width = PIPED_WIDTH
        #: diagnostics (notes about the result) go to stderr, results to stdout
        self.notes = Console(stderr=True, highlight=False, soft_wrap=True, quiet=quiet)

    @contextmanager
    def progress(self, description: str) -> Iterator[Reporter]:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        err = Console(stderr=True)
        if self.quiet or not err.is_terminal:
            yield lambda done, total, what="": None
            return
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as bar:
            task = bar.add_task(escape(description), total=None)

            def report(done: int, total: int, what: str = "") -> None:
                if len(what) > SHOWN_WORK:
                    what = what[:SHOWN_WORK - 1] + "…"
                shown = f"{description} {what}" if what else description
                bar.update(task, completed=done, total=total, description=escape(shown))

            yield report

    def snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        from cli.views.snapshots import draw_snapshots

        draw_snapshots(self.console, snapshots)

    def savepoint(self, savepoint: SnapshotInfo, built: BuildSummary | None) -> None:
        from cli.views.snapshots import draw_savepoint

        draw_savepoint(self.console, savepoint, built)

    def released(self, checkpoint_ids: Sequence[int]) -> None:
        from cli.views.snapshots import draw_released

        draw_released(self.console, checkpoint_ids)

    def pruned(self, result: PruneResult) -> None:
        from cli.views.snapshots import draw_pruned

        draw_pruned(self.console, result)

    def inspect(self, report: InspectReport, width: int | None = 0) -> None:
        from cli.views.inspect import draw_inspect

        draw_inspect(self.console, report, width)

    def build(self, summary: BuildSummary) -> None:
        from cli.views.snapshots import draw_build

        draw_build(self.console, summary)

    def rescale(self, plan: RescalePlan, run: Callable[[], RescaleResult] | None,
                show_all: bool = False) -> None:
        from cli.views.rescale import draw_rescale

        draw_rescale(self.console, plan, run, show_all)

    def convert(self, result: ConvertResult) -> None:
        from cli.views.convert import draw_convert

        draw_convert(self.console, result)

    def verify(self, report: VerifyReport) -> None:
        from cli.views.verify import draw_verify

        draw_verify(self.console, report)

    def diff(self, report: DiffReport) -> None:
        from cli.views.diff import draw_diff

        draw_diff(self.console, self.notes, report)

    def compat(self, report: CompatReport) -> None:
        from cli.views.compat import draw_compat

        draw_compat(self.console, report)

    def migrate(self, result: MigrateResult) -> None:
        from cli.views.migrate import draw_migrate

        draw_migrate(self.console, result)

    def history(self, history: KeyHistory, everything: bool) -> None:
        from cli.views.history import draw_history

        draw_history(self.console, self.notes, history, everything)

    def query(self, result: QueryResult, out: str | None, limit: int | None) -> None:
        from cli.views import STYLE_NOTE
        from cli.views.query import draw_query

        draw_query(self.console, self.notes, result, out, limit, STYLE_NOTE)

    def export(self, result: ExportResult) -> None:
        from cli.views.export import draw_export

        draw_export(self.console, result)

    def trace(self, result: TraceResult) -> None:
        from cli.views.trace import draw_trace

        draw_trace(self.console, result)

    def screenshot(self, path: str, columns: int, rows: int, keys: int) -> None:
        from rich.markup import escape

        self.console.print(escape(f"wrote {path} ({columns}x{rows}, after {keys} keys)"),
                           soft_wrap=True)

    def walkthroughs(self, walkthroughs: Sequence[Walkthrough]) -> None:
        from cli.views.trace import draw_walkthroughs

        draw_walkthroughs(self.console, walkthroughs)


# -- JSON -----------------------------------------------------------------------------------------


class JsonOutput(Output):
    """One JSON document per command on stdout."""

    def _emit(self, document: dict[str, Any]) -> None:
        from formats.model.json_contract import SCHEMA_VERSION

        document = {"schema_version": SCHEMA_VERSION, **document}
        click.echo(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False))

    @contextmanager
    def progress(self, description: str) -> Iterator[Reporter]:
        yield lambda done, total, what="": None  # JSON mode never draws

    def build(self, summary: BuildSummary) -> None:
        from cli.views.snapshots import build_json

        self._emit(build_json(summary))

    def inspect(self, report: InspectReport, width: int | None = 0) -> None:
        from cli.views.inspect import inspect_json

        self._emit(inspect_json(report))

    def snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        from cli.views.snapshots import snapshots_json

        self._emit(snapshots_json(snapshots))

    def savepoint(self, savepoint: SnapshotInfo, built: BuildSummary | None) -> None:
        from cli.views.snapshots import savepoint_json

        self._emit(savepoint_json(savepoint, built))

    def released(self, checkpoint_ids: Sequence[int]) -> None:
        from cli.views.snapshots import released_json

        self._emit(released_json(checkpoint_ids))

    def pruned(self, result: PruneResult) -> None:
        from cli.views.snapshots import pruned_json

        self._emit(pruned_json(result))

    def trace(self, result: TraceResult) -> None:
        from cli.views.trace import trace_json

        self._emit(trace_json(result))

    def rescale(self, plan: RescalePlan, run: Callable[[], RescaleResult] | None,
                show_all: bool = False) -> None:
        from cli.views.rescale import rescale_json

        self._emit(rescale_json(plan, run))

    def convert(self, result: ConvertResult) -> None:
        from cli.views.convert import convert_json

        self._emit(convert_json(result))

    def verify(self, report: VerifyReport) -> None:
        from cli.views.verify import verify_json

        self._emit(verify_json(report))

    def diff(self, report: DiffReport) -> None:
        from cli.views.diff import diff_json

        self._emit(diff_json(report))

    def export(self, result: ExportResult) -> None:
        from cli.views.export import export_json

        self._emit(export_json(result))

    def screenshot(self, path: str, columns: int, rows: int, keys: int) -> None:
        self._emit({"svg": path, "columns": columns, "rows": rows, "keys": keys})

    def walkthroughs(self, walkthroughs: Sequence[Walkthrough]) -> None:
        from cli.views.trace import walkthroughs_json

        self._emit(walkthroughs_json(walkthroughs))

    def compat(self, report: CompatReport) -> None:
        from cli.views.compat import compat_json

        self._emit(compat_json(report))

    def migrate(self, result: MigrateResult) -> None:
        from cli.views.migrate import migrate_json

        self._emit(migrate_json(result))

    def history(self, history: KeyHistory, everything: bool) -> None:
        from cli.views.history import history_json

        self._emit(history_json(history))

    def query(self, result: QueryResult, out: str | None, limit: int | None) -> None:
        from cli.views.query import query_json

        self._emit(query_json(result, out, limit))
