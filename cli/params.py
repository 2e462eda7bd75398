"""Option types shared by commands."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from cli.meta import ALLOW_PICKLE, OPENED, OPERATOR_NAMES, PARTIAL, SQL_PLAN, SQL_PLAN_NAMES
from formats.engines import ENGINES, Engine
from formats.model.checkpoint import Checkpoint
from formats.model.operator_names import OperatorNames
from formats.open import pinned
from formats.ops.ttl_given import apply_ttls, resolve_ttls
from statecore.errors import CheckpointError, InvalidArgumentError
from statecore.undecodable import describe_damage, summarize_parts

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["TIMESTAMP", "Location", "StateTtl", "Timestamp", "engine_options", "given_ttls", "hold",
           "on_bad_record_option", "parse_duration", "ttl_option"]


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

    A local path is checked like ``click.Path`` (``file_okay``, ``dir_okay``); with
    ``exists`` a path that does not exist is a domain error (exit code 3, as for every
    command's input: docs/cli.md), naming ``what`` the path should be. A URI is passed on as
    given: its filesystem is resolved, and a missing object reported, by the command
    (:func:`formats.storage.filesystems.resolve_filesystem`).
    """

    name = "PATH|URI"

    def __init__(self, exists: bool = False, file_okay: bool = True,
                 dir_okay: bool = True, what: str = "") -> None:
        self._exists, self._what = exists, what
        self._path = click.Path(file_okay=file_okay, dir_okay=dir_okay)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value)
        if "://" in text:
            return text
        if self._exists and not os.path.lexists(text):
            raise missing_input(text, self._what)
        return str(self._path.convert(text, param, ctx))


def missing_input(path: str, what: str = "") -> CheckpointError:
    """The error of an input path that does not exist (exit code 3, docs/cli.md)."""
    return CheckpointError(f"{path} does not exist" + (f"; give {what}" if what else ""))


class Timestamp(click.ParamType[int]):
    """A point in time, converted to epoch milliseconds.

    Accepts ``1767225600000``, ``2026-01-01T00:00:00`` (ISO 8601, UTC unless it has an offset)
    or ``now``.
    """

    name = "TIME"
    #: The times shown as dates: years 1 to 9999 (Python's ``datetime``), in epoch ms.
    LOWEST, HIGHEST = -62_135_596_800_000, 253_402_300_799_999

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return self._bounded(value, str(value), param, ctx)
        text = str(value).strip()
        if text == "now":
            return int(time.time() * 1000)
        if text.lstrip("-").isdigit():
            return self._bounded(int(text), text, param, ctx)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is not a time: give epoch milliseconds (1767225600000), an "
                      "ISO 8601 time (2026-01-01T00:00:00, UTC unless it has an offset) or "
                      "'now'", param, ctx)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            return self._bounded(int(moment.timestamp() * 1000), text, param, ctx)
        except OverflowError:
            self.fail(f"{text!r} is outside the years 1 to 9999", param, ctx)

    def _bounded(self, millis: int, text: str, param: click.Parameter | None,
                 ctx: click.Context | None) -> int:
        if not self.LOWEST <= millis <= self.HIGHEST:
            self.fail(f"{text} is outside the years 1 to 9999 ({self.LOWEST} to {self.HIGHEST} "
                      f"epoch ms)", param, ctx)
        return millis


TIMESTAMP = Timestamp()

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_SHORT = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h|d)", re.IGNORECASE)
_ISO = re.compile(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?"
                  r"(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def parse_duration(text: str) -> int | None:
    """A duration in milliseconds, ``None`` if ``text`` is none.

    ``500ms``, ``15s``, ``30m`` (or ``30min``), ``1h``, ``2d`` and sums of them (``1h30m``);
    ISO 8601 ``PT1H``, ``P1DT12H``, ``PT0.5S`` (days, hours, minutes, seconds: Java's
    ``Duration.parse``); a bare number is milliseconds (as ``build --ttl`` takes them).
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    iso = _ISO.fullmatch(text)
    if iso and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        return round(sum(float(part or 0) * size for part, size in zip(
            iso.groups(), (86_400_000, 3_600_000, 60_000, 1000), strict=True)))
    parts = list(_SHORT.finditer(text))
    if parts and "".join(p[0] for p in parts).replace(" ", "") == text.replace(" ", ""):
        return round(sum(float(p[1]) * _UNITS[p[2].lower()] for p in parts))
    return None


class StateTtl(click.ParamType[tuple[str, int]]):
    """``STATE=DURATION`` of ``--ttl``: a state (``NAME`` or ``OP/NAME``) and its TTL in ms."""

    name = "STATE=DURATION"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        state, sep, duration = str(value).rpartition("=")
        ttl = parse_duration(duration) if sep else None
        if not state.strip() or ttl is None or ttl <= 0:
            self.fail(f"{value!r}: give STATE=DURATION, STATE a state's name (OP/NAME where "
                      f"several operators have one of that name) and DURATION its TTL, e.g. "
                      f"1h, 30m, 15s, 500ms, 2d or PT1H", param, ctx)
        return state.strip(), ttl


def ttl_option(what: str) -> Callable[[F], F]:
    """``--ttl STATE=DURATION`` (repeatable), for ``what`` (the option it serves)."""
    return click.option(
        "--ttl", "ttls", multiple=True, type=StateTtl(),
        help=f"The TTL of a state (repeatable) for {what}: a Flink snapshot stores each "
             "value's last access but not the TTL (it is in the job's StateTtlConfig), so "
             "what expired is known only with it. STATE is a state's name, or OP/NAME (OP "
             "its operator's uid, name or OperatorID) where several operators have one of "
             "that name; DURATION e.g. 1h, 30m, 15s, 500ms, 2d or PT1H. Given for a "
             "statectl checkpoint, it replaces the stored TTL.")


def given_ttls(checkpoint: Checkpoint, ttls: tuple[tuple[str, int], ...]) -> None:
    """Declare the ``--ttl`` TTLs in ``checkpoint`` (a name that matches none: exit 2)."""
    try:
        apply_ttls(checkpoint, resolve_ttls(checkpoint, ttls))
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc), param_hint="--ttl") from exc


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


def on_bad_record_option(command: F) -> F:
    """``--on-bad-record`` of the commands that read build inputs (``build``, ``snapshot take``).

    Its choices are :mod:`formats.inputs.bad_records`', imported by those commands only.
    """
    from formats.inputs.bad_records import ON_BAD_RECORD, REFUSE
    return click.option(
        "--on-bad-record", type=click.Choice(ON_BAD_RECORD), default=REFUSE, show_default=True,
        help="What a bad input record does (text not UTF-8; a null, empty or missing key; a value "
             "of another type than its column's). refuse: the build is refused before anything is "
             "written, naming file, row and column. skip: it is left out (the other records keep "
             "their types and key groups) and counted per reason in the summary and in every "
             "checkpoint. fail: the records before it are processed and checkpointed, then the "
             "build stops naming it (exit 3); --resume goes on once it is fixed. skip and fail: "
             "local engine only.")(command)


def allow_pickle() -> bool:
    """Whether the user passed the global ``--allow-pickle`` (unsafe: it runs snapshot code)."""
    return bool(click.get_current_context().meta.get(ALLOW_PICKLE, False))


def operator_names() -> OperatorNames | None:
    """The uids the user gave for operators a Flink 1.x snapshot does not name, if any."""
    names = click.get_current_context().meta.get(OPERATOR_NAMES)
    return names if names else None


def names_report(meta: dict[str, Any]) -> str | None:
    """Which operators the command's checkpoints named from the user's uids (one line)."""
    names: OperatorNames | None = meta.get(OPERATOR_NAMES)
    if not names:
        return None
    named: list[str] = []
    unmatched: set[str] = set()
    opened = meta.get(OPENED, [])
    for checkpoint in opened:
        for op in checkpoint.metadata.operators:
            if op.has_uid and op.uid_from != "snapshot" and op.uid not in named:
                named.append(op.uid)
        unmatched.update(getattr(checkpoint, "unmatched_names", ()))
    if opened:  # a uid unmatched in one checkpoint may name an operator of another
        unmatched -= set(named)
    parts = [f"{len(named)} operator{'s' if len(named) != 1 else ''} named by the uids given "
             f"(the snapshot stores none)" + (f": {', '.join(named)}" if named else "")]
    if unmatched:
        parts.append(f"no operator has the OperatorID of {', '.join(sorted(unmatched))}")
    return "; ".join(parts)


_C = TypeVar("_C", bound=Checkpoint)


def reading(checkpoint: _C) -> _C:
    """``checkpoint``, opened by a reading command (returned as it is).

    What it could not decode is reported when the command ends (:func:`undecodable_report`).
    Given ``--plan``, its SQL operators are named by the job's plan here, before the command
    reads anything (:func:`formats.flink.sql_plan.named_by_plan`; :func:`plan_report`).
    """
    meta = click.get_current_context().meta
    plan = meta.get(SQL_PLAN)
    if plan is not None:
        from formats.flink.sql_plan import named_by_plan

        checkpoint.metadata, names = named_by_plan(checkpoint.metadata, plan)
        meta.setdefault(SQL_PLAN_NAMES, []).append(names)
    meta.setdefault(OPENED, []).append(checkpoint)
    return checkpoint


def _load_plan(ctx: click.Context, _: click.Parameter, path: str | None) -> str | None:
    if path is not None:
        from formats.flink.sql_plan import load_plan

        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgumentError(f"--plan {path}: cannot read it ({exc})") from exc
        ctx.meta[SQL_PLAN] = load_plan(text, path)
    return path


def plan_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--plan FILE``: the SQL job's plan, naming its operators' state (docs/flink-sql.md)."""
    return click.option(
        "--plan", "plan_file", metavar="FILE", callback=_load_plan, expose_value=False,
        help="the Flink SQL job's plan (the JSON of COMPILE PLAN): names each SQL operator by "
             "its plan node and the table it feeds, and the fields of its keys, accumulators "
             "and records by the plan's columns and aggregate calls (docs/flink-sql.md)"
    )(command)


def planned() -> bool:
    """Whether the command was given ``--plan``."""
    return click.get_current_context().meta.get(SQL_PLAN) is not None


def plan_report(meta: dict[str, Any]) -> str | None:
    """What ``--plan`` named in the checkpoints read, and what it left unnamed (one line)."""
    named = meta.get(SQL_PLAN_NAMES)
    if not named:
        return None
    matched = sum(len(n.matched) for n in named)
    unnamed = [u for n in named for u in n.unnamed]
    line = f"{matched} SQL operator{'s' if matched != 1 else ''} named by the plan"
    if unnamed:
        line += f"; not named: {'; '.join(unnamed[:8])}" + (
            f" and {len(unnamed) - 8} more" if len(unnamed) > 8 else "")
    return line


def open_sides(sides: Sequence[tuple[str, str, bool]], *, pickles: bool = False,
               engine: Engine | None = None) -> list[Checkpoint]:
    """The snapshots a two-sided command reads (diff, compat, migrate).

    ``(which, path, decode)`` each, opened as :func:`reading` records them; an error is named
    by its side (``the OLD snapshot (PATH): ...``). ``engine``: the sides to decode are the
    ones it rewrites (:meth:`~formats.engines.Engine.open_rewritten`).
    """
    from formats.open import open_checkpoint
    from formats.ops.diff import side_errors

    opened = []
    for which, path, decode in sides:
        with side_errors(which, path):
            opened.append(reading(
                engine.open_rewritten(path, allow_pickle=pickles, names=operator_names(),
                                      partial=True) if engine is not None and decode else
                open_checkpoint(path, allow_pickle=pickles, names=operator_names(),
                                partial=True, decode=decode)))
    return opened


#: States the stderr line says how many values of were not decoded, and why; it names the
#: others (:func:`undecodable_report`).
SHOWN_STATES = 5


def undecodable_report(meta: dict[str, Any]) -> tuple[str, str] | None:
    """What the checkpoints a command read could not decode: ``(line, damage)``.

    ``line`` says per state how many values were not decoded and why (one line, for stderr;
    beyond the first :data:`SHOWN_STATES`, the states' names per operator);
    ``damage`` is the error message when any part is damaged and ``--partial`` was not given
    (exit code 3), else empty. ``None`` when everything was decoded.
    """
    parts = [part for checkpoint in meta.get(OPENED, ())
             for part in checkpoint.undecodable_parts()]
    if not parts:
        return None
    shown: list[str] = []
    more: dict[str, list[str]] = {}  # beyond the first few: the states' names per operator
    for group in summarize_parts(parts):
        if len(shown) == SHOWN_STATES:
            names = more.setdefault(group.label, [])
            if group.state not in names:
                names.append(group.state)
            continue
        values = group.values
        count = "values" if values < 0 else f"{values:,} value{'s' if values != 1 else ''}"
        groups = f" in {group.key_groups} key group{'s' if group.key_groups != 1 else ''}" if (
            group.key_groups) else ""
        why = (group.reason if group.damaged or group.class_name.rsplit(".", 1)[-1]
               in group.reason else f"{group.class_name}: {group.reason}")
        shown.append(f"{group.label}/{group.state}: {count}{groups} ({why})")
    damaged_parts = [p for p in parts if p.damaged]
    kind = "damaged" if damaged_parts else "not decodable by statectl"
    hidden = sum(map(len, more.values()))
    line = (f"not decoded ({kind}): " + "; ".join(shown)
            + (f"; and {hidden} more state{'s' if hidden != 1 else ''} ("
               + "; ".join(f"{label}: {', '.join(names)}" for label, names in more.items())
               + ")" if more else "")
            + " -- `statectl verify` lists every part")
    damage = ""
    if damaged_parts and not meta.get(PARTIAL):
        damage = (f"damaged: {describe_damage(damaged_parts)} -- everything intact was read; "
                  f"--partial accepts partial results")
    return line, damage
