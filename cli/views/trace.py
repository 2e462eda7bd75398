"""How ``statectl trace`` draws a trace (rich text) and writes it (JSON), and lists walkthroughs.

The text is the settings line, then every step: its notes, the operation and its result, and
the state map after it (primary and rehash tables, then each snapshot), one bucket's chain a
line; entries copied on write, shared with snapshots or only reachable from one are marked.
The JSON document holds every field of the map's layout (``statectl --output json trace``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from cli.values import format_value, to_json_value
from cli.views import STYLE_NOTE, format_composite_key
from statecore.map_trace import TraceResult, TraceSettings, TraceStep
from statecore.state_map import StateEntry
from statecore.state_map_layout import Chains, EntryView, MapLayout, SnapshotLayout
from statecore.wording import counted

if TYPE_CHECKING:
    from cli.walkthroughs import Walkthrough

__all__ = ["draw_trace", "draw_walkthroughs", "trace_json", "walkthroughs_json"]

STYLE_COPIED = "bold yellow"
STYLE_SHARED = "cyan"
STYLE_SNAPSHOT_ONLY = "red"
STYLE_SOURCE = "bold"


def _snapshot_labels(versions: Sequence[int]) -> str:
    return ",".join(f"S{v}" for v in versions)


def draw_trace(console: Console, result: TraceResult) -> None:
    """The settings, then every step with the map after it."""
    for note in result.preamble:
        console.print(Text(f"# {note}".rstrip(), style=STYLE_NOTE))
    console.print(Text(_settings_line(result.settings)))
    for step in result.steps:
        console.print()
        for line in _step_lines(step):
            console.print(line)


def draw_walkthroughs(console: Console, walkthroughs: Sequence[Walkthrough]) -> None:
    """One line per walkthrough script: its name, then its title."""
    width = max((len(w.name) for w in walkthroughs), default=0)
    for walkthrough in walkthroughs:
        line = Text(walkthrough.name.ljust(width), style=STYLE_SOURCE)
        line.append(f"  {walkthrough.title}")
        console.print(line)


def _settings_line(settings: TraceSettings) -> str:
    parts = [f"capacity {settings.capacity}", f"hash mode {settings.hash_mode}",
             f"min transfer {settings.min_transfer}"]
    if settings.hash_overrides:
        pinned = " ".join(f"{format_value(k)}={h}" for k, h in settings.hash_overrides)
        parts.append(f"pinned hashes {pinned}")
    return "trace: " + ", ".join(parts)


def _step_lines(step: TraceStep) -> list[Text]:
    lines = [Text(f"# {note}".rstrip(), style=STYLE_NOTE) for note in step.notes]
    title = Text(f"line {step.line_number}: ")
    title.append(step.source, style=STYLE_SOURCE)
    if step.has_result:
        title.append(f" => {_format_result(step.result)}")
    lines.append(title)
    layout = step.layout
    snapshots = _snapshot_labels(layout.snapshot_versions) or "none"
    lines.append(Text(
        f"  state_map_version={layout.state_map_version}"
        f" highest_required_snapshot_version={layout.highest_required_snapshot_version}"
        f" snapshots={snapshots} rehash_index={layout.rehash_index} size={layout.size}"))
    copied = set(step.copied)
    if layout.rehashing:
        moved = (f"buckets 0-{layout.rehash_index - 1} moved" if layout.rehash_index
                 else "nothing moved yet")
        lines.append(Text(f"  primary table (old): {layout.primary_table_length} buckets,"
                          f" {moved}"))
        lines.extend(_chain_lines(layout.primary_chains, copied, live=True))
        lines.append(Text(f"  rehash table (new): {layout.incremental_rehash_table_length}"
                          f" buckets"))
        lines.extend(_chain_lines(layout.incremental_rehash_chains, copied, live=True))
    else:
        lines.append(Text(f"  primary table: {layout.primary_table_length} buckets"))
        lines.extend(_chain_lines(layout.primary_chains, copied, live=True))
    for snapshot in layout.snapshots:
        lines.append(Text(_snapshot_heading(snapshot)))
        lines.extend(_chain_lines(snapshot.chains, set(), live=False))
    return lines


def _snapshot_heading(snapshot: SnapshotLayout) -> str:
    during = ", taken while rehashing" if snapshot.taken_during_rehash else ""
    return (f"  snapshot {snapshot.version}: {snapshot.array_length} buckets,"
            f" {counted(snapshot.number_of_entries, 'entry')}{during}")


def _chain_lines(chains: Chains, copied: set[tuple[Any, Any]], *, live: bool) -> list[Text]:
    if not chains:
        return [Text("    (empty)")]
    width = len(str(chains[-1][0]))
    lines = []
    for bucket, entries in chains:
        line = Text(f"    {str(bucket).rjust(width)}: ")
        for position, entry in enumerate(entries):
            if position:
                line.append(" -> ")
            line.append_text(_entry_text(entry, copied, live=live))
        lines.append(line)
    return lines


def _entry_text(entry: EntryView, copied: set[tuple[Any, Any]], *, live: bool) -> Text:
    text = Text(f"K:{format_composite_key(entry.key, entry.namespace)}"
                f" S:{format_value(entry.state)}"
                f" (e{entry.entry_version} s{entry.state_version})")
    if live:
        if (entry.key, entry.namespace) in copied:
            text.append(" copied", style=STYLE_COPIED)
        if entry.shared_with:
            text.append(f" [{_snapshot_labels(entry.shared_with)}]", style=STYLE_SHARED)
    elif not entry.live:
        # Superseded in the map: only the snapshot(s) still reach this entry object.
        text.append(f" [{_snapshot_labels(entry.shared_with)} only]", style=STYLE_SNAPSHOT_ONLY)
    return text


def _format_result(result: Any) -> str:
    if isinstance(result, tuple) and all(isinstance(e, StateEntry) for e in result):
        inner = ", ".join(f"{format_composite_key(e.key, e.namespace)}: {format_value(e.state)}"
                          for e in result)
        return "{" + inner + "}"
    if result is None:
        return "null"
    return format_value(result)


def trace_json(result: TraceResult) -> dict[str, Any]:
    """Build the JSON document of a trace (the ``statectl --output json trace`` contract)."""
    settings = result.settings
    return {
        "settings": {
            "capacity": settings.capacity,
            "hash_mode": settings.hash_mode,
            "min_transfer": settings.min_transfer,
            "hash_overrides": [{"key": to_json_value(k), "hash": h}
                               for k, h in settings.hash_overrides],
        },
        "preamble": list(result.preamble),
        "steps": [
            {
                "line": step.line_number,
                "source": step.source,
                "op": step.op,
                "args": [to_json_value(a) for a in step.args],
                "result": to_json_value(step.result),
                "copied": [{"key": to_json_value(k), "namespace": to_json_value(n)}
                           for k, n in step.copied],
                "notes": list(step.notes),
                "layout": _with_chains_json(step.layout),
            }
            for step in result.steps
        ],
    }


def _entry_json(entry: EntryView) -> dict[str, Any]:
    return {
        "key": to_json_value(entry.key),
        "namespace": to_json_value(entry.namespace),
        "state": to_json_value(entry.state),
        "hash": entry.hash,
        "entry_version": entry.entry_version,
        "state_version": entry.state_version,
        "shared_with": list(entry.shared_with),
        "live": entry.live,
    }


def _chains_json(chains: Chains) -> list[dict[str, Any]]:
    return [{"bucket": bucket, "entries": [_entry_json(e) for e in entries]}
            for bucket, entries in chains]


def _with_chains_json(layout: MapLayout | SnapshotLayout) -> dict[str, Any]:
    """Every field of a layout dataclass; chains as ``[{"bucket", "entries"}]``."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(layout):
        value = getattr(layout, field.name)
        if field.name.endswith("chains"):
            out[field.name] = _chains_json(value)
        elif field.name == "snapshots":
            out[field.name] = [_with_chains_json(s) for s in value]
        elif isinstance(value, tuple | list):  # structure (versions...), not a state value
            out[field.name] = [to_json_value(v) for v in value]
        else:
            out[field.name] = to_json_value(value)
    return out


def walkthroughs_json(walkthroughs: Sequence[Walkthrough]) -> dict[str, Any]:
    """The ``trace --list-examples`` document: each walkthrough's name and title."""
    return {"walkthroughs": [{"name": w.name, "title": w.title} for w in walkthroughs]}
