"""How ``statectl convert`` says what it wrote: one line of rich text, or its JSON document.

The line names the savepoint written, its format, the state it came from and how much it holds;
a second, for a Flink savepoint, the release it is for.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from cli.values import format_size
from formats.ops.convert import ConvertResult
from statecore.wording import counted

__all__ = ["convert_json", "draw_convert"]


def draw_convert(console: Console, result: ConvertResult) -> None:
    """What the conversion wrote, and the Flink release it is for (if any)."""
    console.print(
        f"wrote {escape(result.location)}: a {result.format.capitalize()} canonical savepoint "
        f"of {result.source_format}'s state, {counted(result.entries, 'keyed entry')} in "
        f"{result.files} files ({format_size(result.bytes)}) in {result.seconds:.2f} s")
    if result.release_text:
        console.print(f"a savepoint {escape(result.release_text)}")


def convert_json(result: ConvertResult) -> dict[str, Any]:
    """The ``convert`` document: where, the format, the source's format and the totals."""
    return {"location": result.location, "format": result.format,
            "source_format": result.source_format, "files": result.files,
            "bytes": result.bytes, "entries": result.entries,
            "seconds": result.seconds, "flink_release": result.release}
