"""How ``statectl migrate`` says what it wrote: a few lines of rich text, or its JSON document.

The first line names the savepoint and its totals, the second the Flink release it is for; then
one line per state converted or dropped, and per operator of OLD left out.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from cli.values import format_size
from formats.ops.migrate import MigrateResult
from statecore.wording import counted

__all__ = ["draw_migrate", "migrate_json"]


def draw_migrate(console: Console, result: MigrateResult) -> None:
    """The savepoint, its release, what was converted, dropped and left out."""
    console.print(f"wrote {escape(result.location)}: {counted(len(result.operators), 'operator')}"
                  f" for the new job, {counted(result.entries, 'keyed entry')} in "
                  f"{result.files} files ({format_size(result.bytes)}) in "
                  f"{result.seconds:.2f} s")
    if result.release_text:
        console.print(f"a savepoint {escape(result.release_text)}")
    for op in result.operators:
        moved = f" (now {escape(op.new)})" if op.moved else ""
        for old, new, why in op.converted:
            target = "" if old == new else f" as {escape(new)}"
            console.print(f"  {escape(op.old)}{moved} / {escape(old)}: converted{target} -- "
                          f"{escape(why)}")
        for state in op.dropped:
            console.print(f"  {escape(op.old)} / {escape(state)}: dropped")
        if moved and not op.converted and not op.dropped:
            console.print(f"  {escape(op.old)}: written as {escape(op.new)}")
    for name, why in result.left_out:
        console.print(f"  {escape(name)}: left out ({escape(why)})")


def migrate_json(result: MigrateResult) -> dict[str, Any]:
    """The ``migrate`` document: where, the totals, the release and every operator written."""
    return {"location": result.location, "files": result.files, "bytes": result.bytes,
            "entries": result.entries, "seconds": result.seconds,
            "flink_release": result.release,
            "operators": [{"old": op.old, "new": op.new,
                           "converted": [{"state": o, "as": n, "why": w}
                                         for o, n, w in op.converted],
                           "dropped": list(op.dropped), "moved": op.moved}
                          for op in result.operators],
            "left_out": [{"operator": n, "why": w} for n, w in result.left_out]}
