"""How ``statectl export`` says what it wrote: rich text and JSON.

The text is a table with one row per state exported (operator, state, its kind, rows, and the
whole path of its file); the JSON document holds the same tables and the totals.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from formats.ops.export import ExportResult

__all__ = ["draw_export", "export_json"]


def draw_export(console: Console, result: ExportResult) -> None:
    """Where and how much was exported, then one row per state's table."""
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
    console.print(table)


def export_json(result: ExportResult) -> dict[str, Any]:
    """The ``export`` document: where, the format, the totals and every table written."""
    return {"location": result.location, "format": result.format,
            "rows": result.rows, "seconds": result.seconds,
            "tables": [t.to_json() for t in result.tables]}
