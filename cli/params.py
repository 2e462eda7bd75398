"""Option types shared by commands."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import click

__all__ = ["TIMESTAMP", "Timestamp"]


class Timestamp(click.ParamType[int]):
    """A point in time, converted to epoch milliseconds.

    Accepts ``1767225600000``, ``2026-01-01T00:00:00`` (ISO 8601, UTC unless it has an offset)
    or ``now``.
    """

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text == "now":
            return int(time.time() * 1000)
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is not a time: give epoch milliseconds (1767225600000), an "
                      "ISO 8601 time (2026-01-01T00:00:00, UTC unless it has an offset) or "
                      "'now'", param, ctx)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)


TIMESTAMP = Timestamp()
