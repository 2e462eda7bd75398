"""How ``statectl inspect`` draws its report (rich text) and writes it (JSON).

:class:`cli.output.TextOutput` and :class:`cli.output.JsonOutput` call :func:`draw_inspect` and
:func:`inspect_json`; everything here is presentation of an
:class:`formats.ops.inspect.InspectReport`, which the library computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from cli.values import (
    format_duration,
    format_epoch_ms,
    format_size,
    format_value,
    shown_value,
    to_json_value,
)
from formats.model.sources import SourceSplit
from formats.ops.inspect import (
    CheckpointSummary,
    InspectReport,
    NotRead,
    OperatorSummary,
    StateSummary,
)
from formats.ops.key_group_stats import KeyGroupHistogram
from formats.ops.state_scan import Entry, ExpiredShare, KeyLookup, StateEntries
from statecore.serializers import VOID_NAMESPACE
from statecore.wording import counted

__all__ = ["CHART_COLUMNS", "CHART_ROWS", "chart_lines", "draw_inspect", "draw_key_groups",
           "inspect_json", "ttl_time"]

#: Columns and rows of the key-group chart (each row has 8 levels: ▁▂▃▄▅▆▇█).
CHART_COLUMNS = 64
CHART_ROWS = 8
_BLOCKS = " ▁▂▃▄▅▆▇█"
_SUBTASK_STYLES = ("cyan", "magenta")
#: Namespaces of one key's state drawn by ``--key`` before "N more".
LOOKUP_NAMESPACES = 10
#: Longest value drawn in a table cell before it is cut with "…".
CELL_WIDTH = 48
#: Characters of names on the summary's line of operators without state (one line).
STATELESS_WIDTH = 60


def _cell(value: Any, width: int = CELL_WIDTH) -> str:
    if value is VOID_NAMESPACE:
        return "-"
    text = format_value(value)  # data: escaped, so "[b'..']" is not taken for rich markup
    return escape(text if len(text) <= width else text[:width - 1] + "…")


# -- text -----------------------------------------------------------------------------------


def _title(summary: CheckpointSummary) -> str:
    """``checkpoint 17``, or ``Flink savepoint 3`` for a snapshot statectl did not write."""
    prefix = "" if summary.format == "statectl" else f"{summary.format.capitalize()} "
    return f"{prefix}{summary.kind} {summary.checkpoint_id}"


def _operator_label(op: OperatorSummary) -> str:
    """The uid (bold), else the name with the start of the OperatorID."""
    if op.identity.uid is not None:
        name = f" ({escape(op.name)})" if op.name and op.name != op.identity.uid else ""
        return f"[bold]{escape(op.identity.uid)}[/]{name}"
    return f"[bold]{escape(op.name or op.identity.id)}[/] [dim]({op.identity.id[:8]})[/]"


def _spread(op: OperatorSummary) -> str:
    """The subtasks' entries and bytes as ranges, and the skew of bytes (max/mean)."""
    entries = [st.entries for st in op.subtasks if st.entries is not None]
    sizes = [st.bytes for st in op.subtasks]
    mean = sum(sizes) / len(sizes) if sizes else 0
    low, high = min(entries, default=0), max(entries, default=0)
    counts = f"{low:,}" if low == high else f"{low:,}-{high:,}"
    if len(entries) < len(op.subtasks):
        counts = ""  # keyed state not counted (a Flink snapshot's summary)
    small, large = format_size(min(sizes, default=0)), format_size(max(sizes, default=0))
    if small == large:
        size = small
    elif small.split()[1] == large.split()[1]:  # one unit: "2.6-3.1 KiB"
        size = f"{small.split()[0]}-{large}"
    else:
        size = f"{small}-{large}"
    skew = f", skew {max(sizes) / mean:.2f}" if mean else ""
    return f"{counts + ' entries, ' if counts else ''}{size} per subtask{skew}"


def _summary(console: Console, summary: CheckpointSummary, everything: bool) -> None:
    """The tree of operators and states, fit for a screen unless ``everything``.

    By default operators without state are summed up in one line, states without entries are
    counted on their operator's line, a keyed operator's subtasks are summed up as ranges, and a
    parallelism all operators share is said once; with ``everything`` the tree lists every
    operator and state and one table every subtask.
    """
    shared = {(op.parallelism, op.max_parallelism) for op in summary.operators}
    common = next(iter(shared)) if len(shared) == 1 and not everything else None
    title = _title(summary)
    if common is not None:
        title += f" [dim](parallelism {common[0]}, max parallelism {common[1]})[/]"
    tree = Tree(f"{title}  {escape(summary.location)}")
    stateless = [op for op in summary.operators if not op.states and not op.not_read]
    for op in summary.operators:
        if op in stateless and not everything:
            continue
        shown = [s for s in op.states
                 if everything or s.entries is None or s.entries or s.not_read]
        empty = len(op.states) - len(shown)
        parts = [f"key {op.key_type}"] if op.key_type else []
        if common is None:
            parts.append(f"parallelism {op.parallelism}, max parallelism {op.max_parallelism}")
        if op.key_type and not everything:
            parts.append(_spread(op))
        head = "  ".join([_operator_label(op), *(["; ".join(parts)] if parts else [])])
        if empty:
            head += f" [dim](+{empty} empty)[/]"
        branch = tree.add(head)
        if op.plan is not None:
            branch.add(f"[dim]plan {escape(op.plan)}[/]")
        for state in shown:
            shown_count = ("" if state.entries is None or state.bytes is None
                           else f"  {counted(state.entries, 'entry')}, "
                                f"{format_size(state.bytes)}")
            branch.add(f"{escape(state.name)}  [dim]{state.scope} {state.kind}[/]{shown_count}"
                       + _not_read_text(state.not_read, state.entries, everything))
        for part in op.not_read:
            branch.add(f"[dim]{escape(part.what)}[/]" + _not_read_text(part, 0, everything))
    if stateless and not everything:
        names = [op.identity.uid or op.name or op.identity.id for op in stateless]
        listed = names[:1] + [n for i, n in enumerate(names[1:], 1)
                              if len(", ".join(names[:i + 1])) <= STATELESS_WIDTH]
        more = f", {len(names) - len(listed)} more" if len(listed) < len(names) else ""
        tree.add(f"[dim]{len(names)} operator{'s' if len(names) > 1 else ''} without state: "
                 f"{escape(', '.join(listed))}{more} (--all lists them)[/]")
    console.print(tree, soft_wrap=False)  # a long label wraps instead of being cut
    unnamed = sum(1 for op in summary.operators
                  if op.identity.uid is None and op.identity.name is None)
    if unnamed:  # a Flink 1.x snapshot stores no uids nor names: only OperatorIDs (once)
        console.print(f"[dim]{unnamed} operator{'s' if unnamed > 1 else ''} known only by "
                      f"OperatorID (a Flink 1.x snapshot stores no uids): --uid UID names "
                      f"them (docs/flink.md)[/]")
    if any(s.entries is None for op in summary.operators for s in op.states):
        console.print("[dim]keyed entries not counted: the summary reads only _metadata and "
                      "the state headers (--all counts them)[/]")
    if summary.sources:
        _sources(console, summary, everything)
    if not everything:
        return
    table = Table(title="subtasks", title_justify="left")
    for column in ("operator", "subtask", "key groups", "entries", "bytes"):
        table.add_column(column, justify="left" if column in ("operator", "key groups")
                         else "right")
    for op in summary.operators:
        for st in op.subtasks:
            groups = "-" if st.key_group_range is None else \
                f"{st.key_group_range[0]}-{st.key_group_range[1]}"
            entries = "-" if st.entries is None else f"{st.entries:,}"
            table.add_row(escape(op.identity.label), str(st.index), groups, entries,
                          format_size(st.bytes))
    console.print(table)


#: Characters of a reason shown on a state's line by the summary that fits a screen.
REASON_WIDTH = 100


def _not_read_text(part: NotRead | None, entries: int | None, everything: bool) -> str:
    """What of a state (or an operator's streams) was not read, and why: ``""`` if all was.

    ``entries``: the state's entries (``None``: not counted; nothing was decoded). Unless
    ``everything``, a long reason is cut (``--all`` and ``verify`` give it whole).
    """
    if part is None:
        return ""
    if part.entries is not None:
        what = f"{counted(part.entries, 'entry')} not decoded"
    elif part.damaged:
        what = "damaged"
    elif entries is None:
        what = "not decodable"
    else:
        what = "not read completely" if entries else "not read"
    reason = part.reason
    if not everything and len(reason) > REASON_WIDTH:
        reason = reason[:REASON_WIDTH - 1] + "…"
    return f"  [{'red' if part.damaged else 'yellow'}]{what}: {escape(reason)}[/]"


#: Paths and splits of one source listed before "N more" (``--all`` lists every one).
SOURCE_LINES = 5


def _split_text(split: SourceSplit) -> str:
    """A split for people: what it reads, its range, and where its reader resumes."""
    text = escape(split.resource)
    if split.start is not None and split.length is not None:
        text += f" bytes {split.start:,}-{split.start + split.length:,}"
    if split.position is not None:
        text += f", resumes at byte {split.position:,}"
    if split.records_to_skip:
        text += f" after {split.records_to_skip:,} records"
    return text


def _sources(console: Console, summary: CheckpointSummary, everything: bool) -> None:
    """"What this job has read": each source's finished paths, pending and in-flight splits."""
    identities = {op.uid: op.identity for op in summary.operators}
    console.print("[bold]what this job has read[/]")
    limit = None if everything else SOURCE_LINES
    for source in summary.sources or ():
        identity = identities.get(source.uid)
        label = escape(identity.label if identity is not None else source.uid)
        kind = {"file": "FileSource"}.get(source.connector or "", "source")
        in_flight = [(subtask, split) for subtask, splits in source.readers for split in splits]
        paths = f"{len(source.processed):,} file{'s' if len(source.processed) != 1 else ''}"
        if source.connector is None:
            state = "not decoded"
        elif not source.pending and not in_flight:
            state = f"{paths} read completely (no split pending or in progress)"
        else:
            state = (f"{paths} enumerated, {len(source.pending):,} split"
                     f"{'s' if len(source.pending) != 1 else ''} pending, "
                     f"{len(in_flight):,} in progress in its readers")
        console.print(f"  [bold]{label}[/] [dim]({kind})[/]: {state}")
        for path in source.processed[:limit]:
            console.print(f"    {escape(path)}")
        for split in source.pending[:limit]:
            console.print(f"    pending: {_split_text(split)}")
        for subtask, split in in_flight[:limit]:
            console.print(f"    subtask {subtask} reading: {_split_text(split)}")
        hidden = sum(max(0, n - SOURCE_LINES) for n in (
            len(source.processed), len(source.pending), len(in_flight))) if limit else 0
        if hidden:
            console.print(f"    [dim]{hidden:,} more (--all lists them)[/]")
        for note in source.notes:
            console.print(f"    [dim]{escape(note)}[/]")


def chart_lines(values: Sequence[int], owners: Sequence[int], *, columns: int = CHART_COLUMNS,
                rows: int = CHART_ROWS) -> tuple[list[Text], int]:
    """A bar chart of ``values`` (one per key group), ``rows`` high, at most ``columns`` wide.

    Each column is the largest of ``ceil(len / columns)`` consecutive key groups (hot spots
    stay visible); its colour alternates with the owning subtask (``owners``). Returns the
    lines, top first, and the key groups per column.
    """
    per = max(1, math.ceil(len(values) / columns))
    tallest = [max(values[i:i + per]) for i in range(0, len(values), per)]
    owner = [owners[i] for i in range(0, len(values), per)]
    peak = max(tallest, default=0)
    levels = [0 if peak == 0 else math.ceil(v * rows * 8 / peak) for v in tallest]
    lines = []
    for row in range(rows - 1, -1, -1):
        line = Text()
        for level, subtask in zip(levels, owner, strict=True):
            fill = min(8, max(0, level - row * 8))
            line.append(_BLOCKS[fill], style=_SUBTASK_STYLES[subtask % 2])
        lines.append(line)
    return lines, per


def draw_key_groups(console: Console, histogram: KeyGroupHistogram, measure: str) -> None:
    """One operator's key-group chart (``inspect --key-groups``): min, mean, max, skew, owners."""
    values = [k.bytes if measure == "bytes" else k.entries for k in histogram.key_groups]
    owners = [k.subtask for k in histogram.key_groups]
    lines, per = chart_lines(values, owners)
    low, mean, high, skew = (histogram.bytes_stats if measure == "bytes"
                             else histogram.entries_stats)
    show = format_size if measure == "bytes" else (lambda n: f"{n:,}")
    console.print(Text(f"{histogram.uid}: {measure} per key group, {histogram.max_parallelism} "
                       f"key groups" + (f" ({per} per column, the largest drawn)"
                                        if per > 1 else ""), style="bold"))
    width = max(len(show(high)), len(show(0)))
    for i, line in enumerate(lines):
        label = show(high) if i == 0 else show(0) if i == len(lines) - 1 else ""
        console.print(Text(f"{label.rjust(width)} │").append_text(line))
    marks = [" "] * len(lines[0])
    for sub in histogram.subtasks:
        at = sub.key_group_range[0] // per
        text = f"^{sub.index}"
        if all(c == " " for c in marks[at:at + len(text) + 1]):
            marks[at:at + len(text)] = text
    console.print(" " * width + " └" + "".join(marks).rstrip() + "  (^N: subtask N starts)")
    console.print(f"min {show(low)}, mean {show(round(mean))}, max {show(high)}, skew "
                  f"{skew:.2f} (max/mean)")
    table = Table(title=f"{escape(histogram.uid)}: subtasks' share", title_justify="left")
    for column in ("subtask", "key groups", "entries", "bytes", "share"):
        table.add_column(column, justify="left" if column == "key groups" else "right")
    for sub in histogram.subtasks:
        table.add_row(str(sub.index), f"{sub.key_group_range[0]}-{sub.key_group_range[1]}",
                      f"{sub.entries:,}", format_size(sub.bytes), f"{sub.share:.1%}")
    console.print(table)


def _entries_table(title: str, state: StateEntries, *, rank: bool = False) -> Table:
    table = Table(title=title, title_justify="left")
    keyed = state.scope == "keyed"
    columns = (["#"] if rank else []) + ["subtask"] + (["key group"] if keyed else []) + \
        ["key", "namespace", "value", "last access (TTL)", "bytes"]
    for column in columns:
        table.add_column(column, justify="right" if column in ("#", "subtask", "key group",
                                                              "bytes") else "left")
    for i, e in enumerate(state.entries, 1):
        cells = ([str(i)] if rank else []) + [str(e.subtask)] + (
            [str(e.key_group)] if keyed else []) + [
            "-" if e.key is None else _cell(e.key), _cell(e.namespace),
            _cell(shown_value(state.state, e.value)),
            "-" if e.ttl_timestamp is None else ttl_time(e.ttl_timestamp), format_size(e.bytes)]
        table.add_row(*cells)
    return table


def _expired(console: Console, report: InspectReport, now: int,
             shares: Sequence[ExpiredShare]) -> None:
    when = datetime.fromtimestamp(now / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    unknown = [f"{report.operator(uid).uid or report.operator(uid).label}/{state}"
               for uid, state, _ in report.ttl_unknown]
    if unknown:  # never "no state with TTL" for states whose TTL only the job knows
        named = ", ".join(unknown)
        console.print(escape(
            f"TTL unknown for {named}: the snapshot stores each value's last access but not "
            f"the TTL (the job's StateTtlConfig has it); give --ttl {unknown[0]}=DURATION "
            f"(e.g. 7d) for each"), soft_wrap=True)
    if not shares:
        if not unknown:
            console.print(f"TTL-expired at {now} ({when} UTC): no state with TTL")
        return
    table = Table(title=f"TTL-expired at {now} ({when} UTC)", title_justify="left")
    for column in ("operator", "state", "kind", "ttl", "entries", "elements", "bytes",
                   "share"):
        table.add_column(column, justify="left" if column in ("operator", "state", "kind")
                         else "right")
    for s in shares:
        table.add_row(escape(report.operator(s.uid).label), escape(s.state), s.kind,
                      format_duration(s.ttl),
                      f"{s.entries_expired:,} of {s.entries:,}",
                      f"{s.elements_expired:,} of {s.elements:,}",
                      f"{format_size(s.bytes_expired)} of {format_size(s.bytes)}",
                      f"{s.share:.1%}")
    console.print(table)


def ttl_time(timestamp: Any) -> str:
    """A TTL timestamp (Flink's last access: a write, or a read that refreshed it) as ISO.

    A list's or map's (one per element or entry): the oldest and the newest.
    """
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        return format_epoch_ms(timestamp)
    values = list(timestamp.values()) if isinstance(timestamp, dict) else timestamp
    if isinstance(values, list | tuple) and values and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values):
        oldest, newest = min(values), max(values)
        if oldest == newest:
            return format_epoch_ms(oldest)
        return f"{format_epoch_ms(oldest)} to {format_epoch_ms(newest)}"
    return _cell(timestamp)


def _lookup(console: Console, report: InspectReport, found: KeyLookup, width: int | None
            ) -> None:
    """One key's state, grouped by operator: its key group, then each state's entries.

    Values longer than ``width`` characters are cut, saying how much is left (``None``: the
    whole value, on one line). A state without an entry for the key that statectl could not
    read completely says so (the key may be among what was not read).
    """
    by_operator: dict[str, list[StateEntries]] = {}
    for state in found.states:
        by_operator.setdefault(state.uid, []).append(state)
    for uid, key, key_group, subtask in found.locations:
        label = escape(report.operator(uid).label)
        if key_group is None:
            console.print(f"{label}: key {_cell(key)} is in no key group of this snapshot",
                          style="bold")
        else:
            console.print(f"{label}: key {_cell(key)} is in key group {key_group}, "
                          f"subtask {subtask}", style="bold")
        empty = [state for state in by_operator.get(uid, ()) if not state.entries]
        unread = [state for state in empty if _view_not_read(report, state)]
        for state in by_operator.pop(uid, ()):
            _lookup_state(console, state, width)
        if len(unread) < len(empty):
            console.print(f"  {escape(', '.join(s.state for s in empty if s not in unread))}: "
                          f"no entry", soft_wrap=True)
        for state in unread:
            console.print(f"  {escape(state.state)}: no entry read"
                          f"{_view_not_read(report, state)}", soft_wrap=True)
    for states in by_operator.values():  # (states of an operator without a location)
        for state in states:
            _lookup_state(console, state, width)


def _lookup_state(console: Console, state: StateEntries, width: int | None) -> None:
    for e in state.entries[:LOOKUP_NAMESPACES]:
        where = "" if e.namespace is VOID_NAMESPACE else f" @ {_cell(e.namespace)}"
        ttl = "" if e.ttl_timestamp is None else f"(last access {ttl_time(e.ttl_timestamp)})"
        prefix = f"  {state.state}{where}: "
        text = format_value(shown_value(state.state, e.value))
        if width is not None:
            room = max(width - len(prefix), 20)
            if len(text) > room:
                kept = max(room - len(f"… (+{len(text):,} characters; --full shows all)"), 10)
                text = (f"{text[:kept]}… (+{len(text) - kept:,} characters; --full shows "
                        f"all)")
        line = f"  {escape(state.state)}{where}: {escape(text)}"
        if ttl and (width is None or len(prefix) + len(text) + 2 + len(ttl) <= width):
            line += f"  {ttl}"
            ttl = ""
        console.print(line, soft_wrap=width is None)
        if ttl:  # on a line of its own rather than wrapped
            console.print(f"    {ttl}", soft_wrap=True)
    if len(state.entries) > LOOKUP_NAMESPACES:
        console.print(f"  {escape(state.state)}: {len(state.entries) - LOOKUP_NAMESPACES:,} more "
                      "namespaces (--namespace NS shows one; --output json lists all)",
                      style="italic dim")


def draw_inspect(console: Console, report: InspectReport, width: int | None = 0) -> None:
    """The text of ``inspect``: the summary, or (views asked for) a header and the views.

    ``width``: the line ``--key`` cuts a value's line at (``0``: the console's width,
    ``None``: never cut).
    """
    summary = report.summary
    if not report.views:
        _summary(console, summary, report.everything)
        return
    console.print(f"{_title(summary)}  {escape(summary.location)}")
    for histogram in report.key_groups or ():
        draw_key_groups(console, histogram, report.measure)
    for state in report.top or ():
        console.print(_entries_table(f"{_view_name(report, state)}: largest entries"
                                     f"{_view_not_read(report, state)}", state, rank=True))
    if report.expired is not None:
        assert report.now is not None
        _expired(console, report, report.now, report.expired)
    if report.lookup is not None:
        _lookup(console, report, report.lookup, console.width if width == 0 else width)
    for state in report.entries or ():
        title = f"{_view_name(report, state)} ({state.scope} {state.kind})"
        if not state.entries:  # one line, not an empty table
            console.print(f"{title}: no entries{_view_not_read(report, state)}",
                          soft_wrap=True)
            continue
        console.print(_entries_table(f"{title}: first {counted(len(state.entries), 'entry')}"
                                     f"{_view_not_read(report, state)}", state))


def _view_name(report: InspectReport, state: StateEntries) -> str:
    """``operator/state`` as the summary names the operator (markup escaped)."""
    return f"{escape(report.operator(state.uid).label)}/{escape(state.state)}"


def _summary_state(report: InspectReport, uid: str, name: str) -> StateSummary | None:
    for op in report.summary.operators:
        if op.uid == uid:
            return next((s for s in op.states if s.name == name), None)
    return None


def _view_not_read(report: InspectReport, state: StateEntries) -> str:
    """What of a view's state was not read (``""``: all of it), as the summary says."""
    found = _summary_state(report, state.uid, state.state)
    if found is None or found.not_read is None:
        return ""
    return _not_read_text(found.not_read, found.entries, False)


# -- JSON -----------------------------------------------------------------------------------


def _entry_json(e: Entry) -> dict[str, Any]:
    return {"subtask": e.subtask, "key_group": e.key_group, "key": to_json_value(e.key),
            "namespace": to_json_value(e.namespace), "value": to_json_value(e.value),
            "ttl_timestamp": to_json_value(e.ttl_timestamp), "bytes": e.bytes}


def _state_entries_json(report: InspectReport, states: Sequence[StateEntries]
                        ) -> list[dict[str, Any]]:
    return [{"operator": report.operator(s.uid).to_json(), "state": s.state, "scope": s.scope,
             "kind": s.kind, "entries": [_entry_json(e) for e in s.entries]} for s in states]


def _histogram_json(h: KeyGroupHistogram) -> dict[str, Any]:
    def stats(values: tuple[int, float, int, float]) -> dict[str, Any]:
        return {"min": values[0], "mean": values[1], "max": values[2], "skew": values[3]}
    return {"operator": h.identity.to_json(), "max_parallelism": h.max_parallelism,
            "bytes": stats(h.bytes_stats), "entries": stats(h.entries_stats),
            "subtasks": [{"subtask": s.index, "key_group_range": list(s.key_group_range),
                          "entries": s.entries, "bytes": s.bytes, "share": s.share}
                         for s in h.subtasks],
            "key_groups": [{"key_group": k.key_group, "subtask": k.subtask,
                            "entries": k.entries, "bytes": k.bytes} for k in h.key_groups]}


def _split_json(split: SourceSplit) -> dict[str, Any]:
    return {"id": split.split_id, "resource": split.resource, "start": split.start,
            "length": split.length, "position": split.position,
            "records_to_skip": split.records_to_skip, "details": split.details}


def _sources_json(summary: CheckpointSummary) -> list[dict[str, Any]]:
    identities = {op.uid: op.identity for op in summary.operators}
    return [{"operator": identities[s.uid].to_json(), "connector": s.connector,
             "readers": [{"subtask": subtask, "splits": [_split_json(x) for x in splits]}
                         for subtask, splits in s.readers],
             "pending_splits": [_split_json(x) for x in s.pending],
             "processed_paths": list(s.processed), "notes": list(s.notes)}
            for s in summary.sources or ()]


def _summary_json(summary: CheckpointSummary) -> dict[str, Any]:
    document = _summary_fields(summary)
    if summary.sources is not None:
        document["sources"] = _sources_json(summary)
    return document


def _summary_fields(summary: CheckpointSummary) -> dict[str, Any]:
    return {
        "format": summary.format, "location": summary.location,
        "checkpoint_id": summary.checkpoint_id, "kind": summary.kind,
        "created_ms": summary.created_ms,
        # statectl records when it wrote a checkpoint; Flink records no time in a snapshot
        "created_from": "checkpoint" if summary.format == "statectl" else "file-time",
        "operators": [{
            "operator": op.identity.to_json(), "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism, "key_type": op.key_type,
            **({"plan": op.plan} if op.plan is not None else {}),
            "states": [_state_json(s) for s in op.states],
            **({"not_read": [_not_read_json(part) for part in op.not_read]}
               if op.not_read else {}),
            "subtasks": [{"subtask": st.index,
                          "key_group_range": None if st.key_group_range is None
                          else list(st.key_group_range),
                          "entries": st.entries, "bytes": st.bytes} for st in op.subtasks],
        } for op in summary.operators],
    }


def _state_json(state: StateSummary) -> dict[str, Any]:
    """A state of the summary; ``not_read`` only when something of it was not read."""
    document: dict[str, Any] = {"state": state.name, "scope": state.scope, "kind": state.kind,
                                "entries": state.entries, "bytes": state.bytes}
    if state.not_read is not None:
        document["not_read"] = _not_read_json(state.not_read)
    return document


def _not_read_json(part: NotRead) -> dict[str, Any]:
    document: dict[str, Any] = {"reason": part.reason, "entries": part.entries,
                                "damaged": part.damaged}
    if part.what:
        document["what"] = part.what
    return document


def inspect_json(report: InspectReport) -> dict[str, Any]:
    """The ``inspect --output json`` contract (``docs/schema/inspect.json``).

    The summary's fields always; ``key_groups``, ``top``, ``expired``, ``lookup`` and
    ``entries`` when those views were asked for.
    """
    document = _summary_json(report.summary)
    if report.key_groups is not None:
        document["key_groups"] = [_histogram_json(h) for h in report.key_groups]
    if report.top is not None:
        document["top"] = _state_entries_json(report, report.top)
    if report.expired is not None:
        document["expired"] = {"now": report.now, "states": [{
            "operator": report.operator(s.uid).to_json(), "state": s.state, "kind": s.kind,
            "ttl": s.ttl,
            "entries": s.entries, "entries_expired": s.entries_expired,
            "elements": s.elements, "elements_expired": s.elements_expired,
            "bytes": s.bytes, "bytes_expired": s.bytes_expired, "share": s.share}
            for s in report.expired],
            "ttl_unknown": [{"operator": report.operator(uid).to_json(), "state": state,
                             "kind": kind} for uid, state, kind in report.ttl_unknown]}
    if report.lookup is not None:
        document["lookup"] = {
            "key": report.lookup.key,
            "locations": [{"operator": report.operator(uid).to_json(), "key": to_json_value(key),
                           "key_group": kg, "subtask": st}
                          for uid, key, kg, st in report.lookup.locations],
            "states": _state_entries_json(report, report.lookup.states)}
    if report.entries is not None:
        document["entries"] = _state_entries_json(report, report.entries)
    return document
