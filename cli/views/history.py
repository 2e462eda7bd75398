"""How ``statectl history`` shows one key through a state's snapshots: rich text and JSON.

The text is a table, oldest snapshot first: when each was written, then the key's values that
changed (``--all``: every value), with their last access under TTL; a note on stderr says where
a Flink snapshot's time comes from. The JSON document holds every value of every snapshot.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.values import format_epoch_ms, format_value, to_json_value
from cli.views import STYLE_NOTE
from cli.views.inspect import ttl_time
from formats.ops.history import KeyHistory, namespace_text
from statecore.serializers import VOID_NAMESPACE
from statecore.wording import counted

__all__ = ["draw_history", "history_json"]


def draw_history(console: Console, notes: Console, history: KeyHistory, everything: bool) -> None:
    """The key's changes (``everything``: all its values) per snapshot, as a table."""
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
    console.print(table)
    if any(s.format != "statectl" for s in history.snapshots):
        notes.print("written: a Flink snapshot records no time; shown is its "
                    "_metadata's modification time (a copy changes it)",
                    style=STYLE_NOTE)


def history_json(history: KeyHistory) -> dict[str, Any]:
    """The ``history`` document: every value of the key in every snapshot, oldest first."""
    return {"key": history.key, "snapshots": [{
        "checkpoint_id": s.checkpoint_id, "kind": s.kind, "format": s.format,
        "location": s.location, "created_ms": s.created_ms,
        "created_from": "checkpoint" if s.format == "statectl" else "file-time",
        "values": [{"operator": v.operator.to_json(), "state": v.state,
                    "namespace": to_json_value(namespace_text(v.namespace)),
                    "value": to_json_value(v.value),
                    "ttl_timestamp": to_json_value(v.ttl_timestamp), "change": v.change}
                   for v in s.values]} for s in history.snapshots]}
