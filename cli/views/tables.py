"""Printing a rich table so that a pipe or a file gets every cell whole.

For tables whose cells are identifiers people grep or copy (a snapshot's location). Rich sizes
output that is not a terminal to 80 columns (or ``$COLUMNS``) and folds cells to fit:
``statectl snapshot list DIR | grep chk-28`` then misses a location folded across two lines. On
a terminal such a table fits the window as before; elsewhere it is as wide as its widest row
needs. Tables of values (diff, query) keep the 80 columns: their long cells read better wrapped.
"""

from __future__ import annotations

from rich.console import Console, RenderableType


def print_table(console: Console, table: RenderableType) -> None:
    """Print ``table`` on ``console``: fitted to a terminal, at its natural width elsewhere."""
    if console.is_terminal:
        console.print(table)
        return
    natural = console.measure(table, options=console.options.update_width(1 << 16)).maximum
    width = console.width  # print(width=...) is capped at the console's width: widen it instead
    console.width = max(width, natural)
    try:
        console.print(table)
    finally:
        console.width = width
