"""What each command shows: one module per command family, its text drawing and its JSON document.

A family's module draws its library result (a dataclass) with rich for people
(``draw_...(console, ...)``) and builds the dict of its JSON document for scripts
(``..._json(...)``); :class:`cli.output.TextOutput` and :class:`cli.output.JsonOutput` only
delegate to them. A view may import formats, statecore, rich, :mod:`cli.values`, the other
views (this package holds what several share) and, for its type only, :mod:`cli.walkthroughs`;
never :mod:`cli.commands`, :mod:`cli.main` or :mod:`cli.output`, which stand on the views.
"""

from __future__ import annotations

from typing import Any

from cli.values import format_value
from statecore.serializers import VOID_NAMESPACE

__all__ = ["STYLE_NOTE", "format_composite_key"]

#: Style of notes about a result (printed on stderr, or as ``#`` lines of a trace).
STYLE_NOTE = "italic dim"


def format_composite_key(key: Any, namespace: Any) -> str:
    """A key as text, with ``@namespace`` unless the namespace is the void one."""
    if namespace is VOID_NAMESPACE:
        return format_value(key)
    return f"{format_value(key)}@{format_value(namespace)}"
