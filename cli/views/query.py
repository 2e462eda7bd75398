"""How ``statectl query`` shows its result: a table for people, a JSON document for scripts.

Values are statectl's values (:meth:`formats.ops.query.QueryResult.values`), shown as every
command shows them: :func:`cli.values.format_value` in text, :func:`cli.values.to_json_value`
in JSON (the canonical forms of docs/json.md, non-finite floats as strings).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.values import format_value, to_json_value
from formats.ops.query import QueryResult
from statecore.wording import counted

__all__ = ["SCREEN_MARGIN", "draw_query", "query_json", "rows_shown"]

#: Lines of a terminal the table leaves for its header, borders and the prompt.
SCREEN_MARGIN = 8


def rows_shown(rows: int, limit: int | None, terminal_height: int | None) -> int:
    """How many rows text shows: at most ``limit``, else a screenful or every row.

    Only a terminal (``terminal_height`` given) gets the cut to its screen (at least 5 rows);
    output that is not one (a file, a pipe) holds every row.
    """
    if limit is not None:
        return min(rows, limit)
    if terminal_height is None:
        return rows
    return min(rows, max(5, terminal_height - SCREEN_MARGIN))


def draw_query(console: Console, notes: Console, result: QueryResult, out: str | None,
               limit: int | None, style: str) -> None:
    """The result's rows as a table on ``console``, the row count on ``notes`` (stderr).

    ``out``: the rows went to that file; only say so.
    """
    rows = result.table.num_rows
    if out is not None:
        console.print(f"wrote {counted(rows, 'row')} to {escape(out)}")
        return
    shown = rows_shown(rows, limit, (console.height or 24) if console.is_terminal else None)
    table = Table(title_justify="left")
    for name in result.table.column_names:
        table.add_column(escape(name), overflow="fold")
    for row in result.values(shown):
        table.add_row(*(escape(format_value(v)) if v is not None else "[dim]null[/dim]"
                        for v in row.values()))
    console.print(table)
    more = f" (first {shown} shown; --limit N or --out FILE for more)" if rows > shown else ""
    notes.print(f"{counted(rows, 'row')}{more}", style=style)


def query_json(result: QueryResult, out: str | None, limit: int | None) -> dict[str, Any]:
    """The ``query`` document (docs/schema/query.json): every row, or the first ``limit``."""
    table = result.table
    return {
        "columns": [{"name": f.name, "type": str(f.type)} for f in table.schema],
        "row_count": table.num_rows, "location": out,
        "rows": [] if out is not None else [
            {name: to_json_value(value) for name, value in row.items()}
            for row in result.values(limit)],
        "read": [{"database": database, "schema": operator, "table": state,
                  "key_groups": None if groups is None else list(groups)}
                 for database, operator, state, groups in result.read]}
