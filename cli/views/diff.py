"""How ``statectl diff`` shows the differences of two checkpoints: rich text and JSON.

The text is one line when both hold the same state, else a table of the differences found
(change, operator, state, key, each side's value with its last access under TTL) and, on
stderr, a note when ``--limit`` cut it. The JSON document holds the counts and every difference
found, values in their canonical JSON forms.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.values import format_value, to_json_value
from cli.views import STYLE_NOTE, format_composite_key
from cli.views.inspect import ttl_time
from formats.ops.diff import Difference, DiffReport
from statecore.serializers import VOID_NAMESPACE

__all__ = ["diff_json", "draw_diff"]


def draw_diff(console: Console, notes: Console, report: DiffReport) -> None:
    """The differences as a table on ``console``; what ``--limit`` left out on ``notes``."""
    if report.equal:
        console.print(f"{report.left} and {report.right} hold the same state "
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
    console.print(table)
    shown = len(report.differences)
    if shown < report.found:
        notes.print(f"(first {shown} of {report.found} shown; --limit N shows more)",
                    style=STYLE_NOTE)


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
    return format_composite_key(d.key, VOID_NAMESPACE if d.namespace is None else d.namespace)


def diff_json(report: DiffReport) -> dict[str, Any]:
    """The ``diff`` document: the counts and every difference found (the first ``limit``)."""
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
