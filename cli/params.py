"""Option types shared by commands."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from formats.engines import ENGINES
from formats.open import pinned

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["TIMESTAMP", "Location", "Timestamp", "engine_options", "hold"]


def hold(*locations: str) -> None:
    """Pin the checkpoints the current command reads until it ends.

    Another process's retention or ``snapshot release`` leaves them alone meanwhile
    (:func:`formats.open.pinned`).
    """
    context = click.get_current_context()
    for location in locations:
        context.with_resource(pinned(location))


class Location(click.ParamType[str]):
    """A local path or a URI (``s3://bucket/path?...``): where state or data is.

    A local path is checked like ``click.Path`` (``exists``, ``file_okay``, ``dir_okay``);
    a URI is passed on as given: its filesystem is resolved, and a missing object reported,
    by the command (:func:`formats.filesystems.resolve_filesystem`).
    """

    name = "PATH|URI"

    def __init__(self, exists: bool = False, file_okay: bool = True,
                 dir_okay: bool = True) -> None:
        self._path = click.Path(exists=exists, file_okay=file_okay, dir_okay=dir_okay)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value)
        if "://" in text:
            return text
        return str(self._path.convert(text, param, ctx))


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


def engine_options(command: F) -> F:
    """``--engine``, ``--spark-master`` and ``--spark-conf`` (see :mod:`formats.engines`)."""
    for option in reversed([
        click.option("--engine", type=click.Choice(ENGINES), default="local",
                     show_default=True,
                     help="Where the data work runs: this process, or Spark (pip install "
                          "'statectl[spark]'; an embedded local[*] Spark unless told "
                          "otherwise)."),
        click.option("--spark-master", metavar="URL",
                     help="Spark master, e.g. spark://host:7077 or local[4] (default: the "
                          "active session under spark-submit, $STATECTL_SPARK_MASTER, or "
                          "local[*])."),
        click.option("--spark-conf", multiple=True, metavar="KEY=VALUE",
                     help="A Spark setting (repeatable), e.g. spark.executor.memory=4g."),
    ]):
        command = option(command)
    return command


#: ``ctx.meta`` key of the global ``--allow-pickle`` flag.
ALLOW_PICKLE = "statectl.allow_pickle"


def allow_pickle() -> bool:
    """Whether the user passed the global ``--allow-pickle`` (unsafe: it runs snapshot code)."""
    return bool(click.get_current_context().meta.get(ALLOW_PICKLE, False))
