"""Scripts of state-map operations, run step by step on a :class:`CopyOnWriteStateMap`.

The library half of ``statectl trace``: :func:`parse_script` turns a script into
:class:`TraceCommand` s, :func:`run_trace` applies them to a fresh map and records, after every
operation, the map's :class:`~statecore.state_map_layout.MapLayout` (the pictures the seed
articles draw). Only data is returned; drawing is the CLI's job.

Script language, one command per line; ``#`` starts a comment (outside a quoted string), blank
lines are ignored. Comment lines are kept as *notes* of the next command (walkthroughs narrate
with them).

Directives, all before the first operation, each at most once (``hash`` once per key)::

    capacity N               initial capacity (0, or clamped to 4..2**30 and rounded up to a
                             power of two, as the map does); default 128
    hash-mode MODE           fast | flink | identity; default flink (reproducible everywhere)
    min-transfer N           entries moved per incremental-rehash step, N >= 1; default 4
    hash KEY H               pin the bucket hash of KEY to the int H (keys then share chains)

Operations (``NS`` omitted means :data:`~statecore.serializers.VOID_NAMESPACE`)::

    put K V [NS]             get K [NS]              contains K [NS]          remove K [NS]
    put_and_get_old K V [NS]                          remove_and_get_old K [NS]
    get_append K V [NS]      get, then append V in place to the returned list (the caller's
                             mutation a defensive copy protects the snapshot from)
    transform K V [NS]       numbers add; a list gets V appended; absent: V if V is a number,
                             else [V]
    snapshot                 result: the snapshot's version (1, 2, ... as the seeds number them)
    release V                release the snapshot of version V
    read V                   result: the contents of the open snapshot of version V

Values are JSON literals (``7``, ``-1``, ``2.5``, ``"a b"``, ``[1, 2]``, ``true``, ``null``) or a
bare word, which is a string. Keys and namespaces are strings or numbers. Every problem, found
while parsing or while running, raises :class:`~statecore.errors.TraceScriptError` naming the
line.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from statecore.copy_on_write_snapshot import CopyOnWriteStateMapSnapshot
from statecore.copy_on_write_state_map import (
    DEFAULT_CAPACITY,
    HASH_MODES,
    MIN_TRANSFERRED_PER_INCREMENTAL_REHASH,
    CopyOnWriteStateMap,
    HashMode,
)
from statecore.errors import StatectlError, TraceScriptError
from statecore.serializers import VOID_NAMESPACE
from statecore.state_map_layout import EntryView, MapLayout

__all__ = [
    "DEFAULT_TRACE_HASH_MODE",
    "DIRECTIVES",
    "HASH_MODES",
    "MAX_TRACE_CAPACITY",
    "OPERATIONS",
    "RESULT_OPERATIONS",
    "TraceCommand",
    "TraceResult",
    "TraceSettings",
    "TraceStep",
    "parse_script",
    "run_script",
    "run_trace",
]

#: ``flink`` hashing places keys the same way in every process (``fast`` uses the salted
#: builtin ``hash`` of strings), so a trace is reproducible.
DEFAULT_TRACE_HASH_MODE: Final[HashMode] = "flink"
#: A trace lays out every bucket after every step: larger tables are for the library.
MAX_TRACE_CAPACITY: Final = 1 << 16

# Argument kinds: "key" and "namespace" are str or number, "value" any JSON value, "count" an
# int, "version" a positive int, "mode" a hash mode.
_Signature = tuple[tuple[str, ...], bool]  # (required argument kinds, optional trailing NS)

#: Operation name -> (required argument kinds, whether a namespace may follow).
OPERATIONS: Final[dict[str, _Signature]] = {
    "put": (("key", "value"), True),
    "get": (("key",), True),
    "get_append": (("key", "value"), True),
    "contains": (("key",), True),
    "remove": (("key",), True),
    "put_and_get_old": (("key", "value"), True),
    "remove_and_get_old": (("key",), True),
    "transform": (("key", "value"), True),
    "snapshot": ((), False),
    "release": (("version",), False),
    "read": (("version",), False),
}

#: Directive name -> argument kinds.
DIRECTIVES: Final[dict[str, tuple[str, ...]]] = {
    "capacity": ("count",),
    "hash-mode": ("mode",),
    "min-transfer": ("count",),
    "hash": ("key", "count"),
}

#: Operations whose step carries a result (others record ``None``).
RESULT_OPERATIONS: Final[frozenset[str]] = frozenset(
    {"get", "get_append", "contains", "put_and_get_old", "remove_and_get_old", "snapshot",
     "read"})


@dataclass(frozen=True, slots=True)
class TraceCommand:
    """One directive or operation of a script, with its values parsed.

    ``source`` is the line without its comment; ``args`` are as written (an omitted namespace
    is not filled in); ``notes`` are the comment lines since the previous command, then the
    command line's own trailing comment.
    """

    line_number: int
    source: str
    op: str
    args: tuple[Any, ...]
    notes: tuple[str, ...] = ()

    @property
    def is_directive(self) -> bool:
        return self.op in DIRECTIVES


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """How the traced map was built: directives, overridden by the caller's options."""

    capacity: int
    hash_mode: HashMode
    min_transfer: int
    #: ``(key, pinned hash)`` in script order
    hash_overrides: tuple[tuple[Any, int], ...]


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One operation and the map right after it.

    ``result`` is what the operation returned (see :data:`RESULT_OPERATIONS`; ``read`` gives a
    tuple of :class:`~statecore.state_map.StateEntry`), a deep copy taken at that moment, as are
    the states in ``layout``: later steps never change an earlier one. ``copied`` lists the
    ``(key, namespace)`` of live entries that copy-on-write replaced by a copy during this step
    (same composite key as before, new entry object, so a new ``entry_version``), in table
    order.
    """

    line_number: int
    source: str
    op: str
    args: tuple[Any, ...]
    result: Any
    copied: tuple[tuple[Any, Any], ...]
    layout: MapLayout
    notes: tuple[str, ...] = ()

    @property
    def has_result(self) -> bool:
        return self.op in RESULT_OPERATIONS


@dataclass(frozen=True, slots=True)
class TraceResult:
    """A whole trace: the settings, the empty map's layout, then one step per operation.

    ``preamble`` holds the notes written before or between the directives.
    """

    settings: TraceSettings
    initial_layout: MapLayout
    steps: tuple[TraceStep, ...]
    preamble: tuple[str, ...] = ()


# -- parsing ----------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MAX_DEPTH = 32
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")


def _check_value(value: Any, text: str, line_number: int, depth: int = 0) -> Any:
    """Keep values to what a Java state could hold: int64, finite doubles, encodable strings."""
    if depth > _MAX_DEPTH:
        raise TraceScriptError(f"bad value {text[:40]!r}: nested deeper than {_MAX_DEPTH}",
                               line_number)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
        raise TraceScriptError(f"bad value {text[:40]!r}: integers must fit in 64 bits",
                               line_number)
    if isinstance(value, float) and not math.isfinite(value):
        raise TraceScriptError(f"bad value {text[:40]!r}: not a finite number", line_number)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise TraceScriptError(f"bad value {text[:40]!r}: a lone surrogate is not text",
                                   line_number) from None
    if isinstance(value, list):
        for item in value:
            _check_value(item, text, line_number, depth + 1)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, text, line_number, depth + 1)
            _check_value(item, text, line_number, depth + 1)
    return value


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    value: Any
    bare: bool  # an unquoted word (an operation name must be one)


def _tokenize(line: str, line_number: int) -> tuple[list[_Token], int]:
    """Split one line into tokens; also return where its comment starts (or its length)."""
    tokens: list[_Token] = []
    pos, end_of_line = 0, len(line)
    while pos < end_of_line:
        char = line[pos]
        if char.isspace():
            pos += 1
            continue
        if char == "#":
            return tokens, pos
        if char in '"[{':
            # A JSON string, list or object may contain blanks: let the decoder find its end.
            try:
                value, end = _DECODER.raw_decode(line, pos)
            except RecursionError:
                raise TraceScriptError(f"bad value {line[pos:pos + 40]!r}: nested too deeply",
                                       line_number) from None
            except ValueError as exc:
                detail = (f"{exc.msg} at column {exc.colno}"
                          if isinstance(exc, json.JSONDecodeError) else str(exc))
                raise TraceScriptError(f"bad value {line[pos:].strip()!r}: {detail}",
                                       line_number) from exc
            if end < end_of_line and not line[end].isspace() and line[end] != "#":
                raise TraceScriptError(
                    f"bad value {line[pos:].split()[0]!r}: unexpected text after the JSON value",
                    line_number)
            tokens.append(_Token(line[pos:end], _check_value(value, line[pos:end], line_number),
                                 False))
            pos = end
            continue
        end = pos
        while end < end_of_line and not line[end].isspace() and line[end] != "#":
            end += 1
        word = line[pos:end]
        tokens.append(_Token(word, _bare_value(word, line_number), True))
        pos = end
    return tokens, end_of_line


def _bare_value(word: str, line_number: int) -> Any:
    """Read a bare word: a JSON number, ``true``, ``false``, ``null``, else a string."""
    try:
        value = _DECODER.decode(word)
    except ValueError as exc:
        if word.lstrip("-") in ("NaN", "Infinity"):
            raise TraceScriptError(f"bad value {word!r}: not a finite number", line_number) \
                from exc
        if _NUMBER.fullmatch(word):
            raise TraceScriptError(f"bad value {word[:40]!r}: not a 64-bit integer or a finite "
                                   "double", line_number) from exc
        return _check_value(word, word, line_number)
    return _check_value(value, word, line_number)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_argument(kind: str, token: _Token, command: str, line_number: int) -> Any:
    value = token.value
    if kind in ("key", "namespace"):
        if not (isinstance(value, str) or _is_number(value)):
            raise TraceScriptError(
                f"{command}: a {kind} must be a string or a number, got {token.text}",
                line_number)
    elif kind in ("count", "version"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TraceScriptError(f"{command}: expected an integer, got {token.text}",
                                   line_number)
        if kind == "version" and value < 1:
            raise TraceScriptError(f"{command}: snapshot versions start at 1, got {value}",
                                   line_number)
    elif kind == "mode":
        if value not in HASH_MODES:
            raise TraceScriptError(
                f"{command}: unknown hash mode {token.text} (known: {', '.join(HASH_MODES)})",
                line_number)
    return value


def _usage(op: str) -> str:
    if op in DIRECTIVES:
        return " ".join([op, *(kind.upper() for kind in DIRECTIVES[op])])
    kinds, namespace = OPERATIONS[op]
    names = {"key": "K", "value": "V", "version": "VERSION"}
    return " ".join([op, *(names[kind] for kind in kinds), *(["[NS]"] if namespace else [])])


def parse_script(text: str) -> list[TraceCommand]:
    """Parse a whole script (see the module docstring for the language).

    Checks the syntax only: names, argument counts and types, directive placement and
    repetition. Whether a snapshot version exists is found out by :func:`run_trace`.
    """
    commands: list[TraceCommand] = []
    notes: list[str] = []
    seen_operation = False
    seen_directives: set[tuple[str, Any]] = set()
    # Only "\n" ends a line (str.splitlines would also split on form feeds and U+2028, so line
    # numbers would differ from an editor's); a byte-order mark is not part of the script.
    for line_number, raw in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        tokens, comment_start = _tokenize(line, line_number)
        comment = line[comment_start + 1:].strip() if comment_start < len(line) else None
        source = line[:comment_start].rstrip()
        if not tokens:
            if comment is not None:
                notes.append(comment)
            continue
        head, arguments = tokens[0], tokens[1:]
        op = head.text
        if not head.bare or (op not in OPERATIONS and op not in DIRECTIVES):
            known = ", ".join([*OPERATIONS, *DIRECTIVES])
            raise TraceScriptError(f"unknown command {op!r} (known: {known})", line_number)
        if op in DIRECTIVES:
            if seen_operation:
                raise TraceScriptError(
                    f"directive {op!r} must come before the first operation", line_number)
            kinds = DIRECTIVES[op]
        else:
            seen_operation = True
            kinds, namespace = OPERATIONS[op]
            if namespace and len(arguments) == len(kinds) + 1:
                kinds = (*kinds, "namespace")
        if len(arguments) != len(kinds):
            raise TraceScriptError(
                f"{op} takes {_argument_count(op)}, got {len(arguments)} (usage: {_usage(op)})",
                line_number)
        args = tuple(_check_argument(kind, token, op, line_number)
                     for kind, token in zip(kinds, arguments, strict=True))
        if op in DIRECTIVES:
            identity = (op, args[0]) if op == "hash" else (op, None)
            if identity in seen_directives:
                what = f"hash of {arguments[0].text}" if op == "hash" else repr(op)
                raise TraceScriptError(f"{what} is set twice", line_number)
            seen_directives.add(identity)
            if op == "min-transfer" and args[0] < 1:
                raise TraceScriptError(f"min-transfer must be at least 1, got {args[0]}",
                                       line_number)
            if op == "capacity" and args[0] < 0:
                raise TraceScriptError(f"capacity must be non-negative, got {args[0]}",
                                       line_number)
        if comment is not None:
            notes.append(comment)
        commands.append(TraceCommand(line_number, source, op, args, tuple(notes)))
        notes = []
    return commands


def _argument_count(op: str) -> str:
    if op in DIRECTIVES:
        count = len(DIRECTIVES[op])
        return f"{count} argument{'s' if count != 1 else ''}"
    kinds, namespace = OPERATIONS[op]
    if not kinds:
        return "no arguments"
    count = len(kinds)
    if namespace:
        return f"{count} or {count + 1} arguments"
    return f"{count} argument{'s' if count != 1 else ''}"


# -- running ------------------------------------------------------------------------------------


def _settings(
    commands: Sequence[TraceCommand],
    capacity: int | None,
    hash_mode: HashMode | None,
    min_transfer: int | None,
) -> TraceSettings:
    from_script: dict[str, Any] = {}
    overrides: list[tuple[Any, int]] = []
    for command in commands:
        if command.op == "hash":
            overrides.append((command.args[0], command.args[1]))
        elif command.is_directive:
            from_script[command.op] = command.args[0]
    settings = TraceSettings(
        capacity=from_script.get("capacity", DEFAULT_CAPACITY) if capacity is None else capacity,
        hash_mode=(from_script.get("hash-mode", DEFAULT_TRACE_HASH_MODE)
                   if hash_mode is None else hash_mode),
        min_transfer=(from_script.get("min-transfer", MIN_TRANSFERRED_PER_INCREMENTAL_REHASH)
                      if min_transfer is None else min_transfer),
        hash_overrides=tuple(overrides),
    )
    if settings.capacity < 0:
        raise TraceScriptError(f"capacity must be non-negative, got {settings.capacity}")
    if settings.capacity > MAX_TRACE_CAPACITY:
        raise TraceScriptError(
            f"capacity must be at most {MAX_TRACE_CAPACITY} (a trace draws every bucket), "
            f"got {settings.capacity}")
    if settings.hash_mode not in HASH_MODES:
        raise TraceScriptError(
            f"unknown hash mode {settings.hash_mode!r} (known: {', '.join(HASH_MODES)})")
    if settings.min_transfer < 1:
        raise TraceScriptError(f"min-transfer must be at least 1, got {settings.min_transfer}")
    return settings


def _transform(current: Any, value: Any) -> Any:
    """Numbers add, a list gets ``value`` appended; absent: ``value`` if a number, else a list."""
    if current is None:
        return value if _is_number(value) else [value]
    if isinstance(current, list):
        return [*current, value]
    if _is_number(current) and _is_number(value):
        result = current + value
        if isinstance(result, float) and not math.isfinite(result) or isinstance(
                result, int) and not _INT64_MIN <= result <= _INT64_MAX:
            raise ValueError(f"{_show(current)} + {_show(value)} overflows a 64-bit value")
        return result
    raise ValueError(f"cannot transform state {_show(current)} with {_show(value)} "
                     f"(numbers add, lists append)")


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


class _Runner:
    """Apply operations to one map; keep its snapshots alive (the map holds them weakly)."""

    def __init__(self, state_map: CopyOnWriteStateMap[Any, Any, Any]) -> None:
        self.map = state_map
        self.snapshots: dict[int, CopyOnWriteStateMapSnapshot[Any, Any, Any]] = {}

    def apply(self, command: TraceCommand) -> Any:
        op, args = command.op, command.args
        m = self.map
        if op == "snapshot":
            snapshot = m.snapshot()
            self.snapshots[snapshot.snapshot_version] = snapshot
            return snapshot.snapshot_version
        if op in ("release", "read"):
            snapshot = self._snapshot(args[0], command.line_number)
            if op == "release":
                m.release_snapshot(snapshot)
                return None
            return tuple(snapshot)
        kinds, _ = OPERATIONS[op]
        key = args[0]
        # Values are copied: the map may keep (and a later get_append mutate) what it is given,
        # and the parsed commands may be run again.
        value = copy.deepcopy(args[1]) if len(kinds) > 1 else None
        namespace = args[len(kinds)] if len(args) > len(kinds) else VOID_NAMESPACE
        if op == "put":
            m.put(key, namespace, value)
            return None
        if op == "get":
            return m.get(key, namespace)
        if op == "get_append":
            state = m.get(key, namespace)
            if not isinstance(state, list):
                raise TraceScriptError(
                    f"get_append needs a list state; the state of {_show(key)} is "
                    f"{_show(state)}", command.line_number)
            state.append(value)
            return state
        if op == "contains":
            return m.contains(key, namespace)
        if op == "remove":
            m.remove(key, namespace)
            return None
        if op == "put_and_get_old":
            return m.put_and_get_old(key, namespace, value)
        if op == "remove_and_get_old":
            return m.remove_and_get_old(key, namespace)
        if op == "transform":
            try:
                m.transform(key, namespace, value, _transform)
            except ValueError as exc:
                raise TraceScriptError(str(exc), command.line_number) from exc
            return None
        raise AssertionError(f"operation {op!r} has no implementation")  # pragma: no cover

    def _snapshot(
        self, version: int, line_number: int
    ) -> CopyOnWriteStateMapSnapshot[Any, Any, Any]:
        snapshot = self.snapshots.get(version)
        if snapshot is None:
            taken = ", ".join(map(str, self.snapshots)) or "none"
            raise TraceScriptError(
                f"no snapshot has version {version} (taken so far: {taken})", line_number)
        if snapshot.released:
            raise TraceScriptError(f"snapshot {version} is already released", line_number)
        return snapshot


def _live_entries(layout: MapLayout) -> Iterable[EntryView]:
    for _, chain in (*layout.primary_chains, *layout.incremental_rehash_chains):
        yield from chain


def _copied(before: MapLayout, after: MapLayout) -> tuple[tuple[Any, Any], ...]:
    # A copy always gets the current state_map_version, which is newer than the version of the
    # entry it replaces (that one was older than the highest required snapshot version), and
    # an entry's version never changes in place: a live composite key whose entry_version
    # changed is exactly a copy-on-write replacement.
    versions = {(e.key, e.namespace): e.entry_version for e in _live_entries(before)}
    return tuple(
        (e.key, e.namespace)
        for e in _live_entries(after)
        if versions.get((e.key, e.namespace), e.entry_version) != e.entry_version
    )


def run_trace(
    commands: Sequence[TraceCommand],
    *,
    capacity: int | None = None,
    hash_mode: HashMode | None = None,
    min_transfer: int | None = None,
) -> TraceResult:
    """Apply ``commands`` to a fresh map; record the layout after every operation.

    ``capacity``, ``hash_mode`` and ``min_transfer`` override the script's directives when
    given. Raises :class:`TraceScriptError` for the first operation that cannot be applied
    (an unknown or released snapshot version, a ``get_append`` on a non-list state, a map
    precondition such as non-int keys in ``identity`` mode); nothing is returned then.
    """
    settings = _settings(commands, capacity, hash_mode, min_transfer)
    state_map: CopyOnWriteStateMap[Any, Any, Any] = CopyOnWriteStateMap(
        settings.capacity,
        hash_mode=settings.hash_mode,
        hash_overrides=dict(settings.hash_overrides),
        min_transferred_per_incremental_rehash=settings.min_transfer,
    )
    runner = _Runner(state_map)
    previous = state_map.layout()
    initial = copy.deepcopy(previous)
    preamble: list[str] = []
    steps: list[TraceStep] = []
    for command in commands:
        if command.is_directive:
            preamble.extend(command.notes)
            continue
        try:
            result = runner.apply(command)
        except TraceScriptError:
            raise
        except StatectlError as exc:
            raise TraceScriptError(str(exc), command.line_number) from exc
        layout = state_map.layout()
        steps.append(TraceStep(
            line_number=command.line_number,
            source=command.source,
            op=command.op,
            args=command.args,
            result=copy.deepcopy(result),
            copied=_copied(previous, layout),
            layout=copy.deepcopy(layout),
            notes=command.notes,
        ))
        previous = layout
    return TraceResult(settings, initial, tuple(steps), tuple(preamble))



def run_script(
    text: str,
    *,
    capacity: int | None = None,
    hash_mode: HashMode | None = None,
    min_transfer: int | None = None,
) -> TraceResult:
    """Parse and run a whole script: :func:`parse_script`, then :func:`run_trace`."""
    return run_trace(parse_script(text), capacity=capacity, hash_mode=hash_mode,
                     min_transfer=min_transfer)
