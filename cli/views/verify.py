"""``statectl verify`` for people (rich text) and for scripts (its JSON document).

The text says what was checked, what could not be read (states not read completely, entries
not decoded), then every problem and warning in a table; the JSON document is the contract of
``docs/schema/verify.json``.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.values import format_size
from formats.ops.verify import Problem, VerifyReport
from statecore.wording import counted

__all__ = ["draw_verify", "verify_json"]


def draw_verify(console: Console, report: VerifyReport) -> None:
    """What verify checked and read, then its problems and warnings."""
    console.print(f"checked {report.location}: {counted(report.files, 'file')}, "
                  f"{format_size(report.bytes)}, "
                  f"{counted(report.entries, 'keyed entry')}")
    not_read = report.not_read
    if not_read:
        parts = []
        if not_read.states:
            entries = ("" if not not_read.entries else
                       f", {counted(not_read.entries, 'entry')} not decoded")
            if not_read.entries is None:
                entries = ", entries not counted"
            parts.append(f"{counted(not_read.states, 'state')}{entries}")
        if not_read.streams:
            parts.append(counted(not_read.streams, "other part"))
        console.print(f"not read: {'; '.join(parts)} (the problems below say which and why)",
                      style="bold yellow")
    if report.clean:
        console.print("clean: no problems found", style="bold green")
    else:
        console.print(_table(counted(sum(report.counts.values()), "problem"), "problem",
                             report.problems))
    if report.warnings:
        count = len(report.warnings)
        console.print(_table(f"{count} warning{'s' if count > 1 else ''} (not checked)",
                             "warning", report.warnings))


def _table(title: str, heading: str, rows: list[Problem]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("kind", "where", heading):
        table.add_column(column)
    for row in rows:
        table.add_row(row.kind, escape(row.where), escape(row.message))
    return table


def verify_json(report: VerifyReport) -> dict[str, Any]:
    """The ``verify --output json`` contract (``docs/schema/verify.json``)."""
    def problem(p: Problem) -> dict[str, Any]:
        return {"kind": p.kind, "where": p.where, "message": p.message,
                "operator": None if p.operator is None else p.operator.to_json()}
    not_read = report.not_read
    return {"location": report.location, "clean": report.clean, "files": report.files,
            "bytes": report.bytes, "entries": report.entries,
            "counts": dict(sorted(report.counts.items())),
            "problems": [problem(p) for p in report.problems],
            "warnings": [problem(w) for w in report.warnings],
            "not_read": {"states": not_read.states, "entries": not_read.entries,
                         "streams": not_read.streams}}
