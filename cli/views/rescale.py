"""How ``statectl rescale`` shows a plan and what it wrote: rich text and JSON.

The text plan fits a screen (a table per operator with state when they fit, else one row per
operator); operators that keep their parallelism and max parallelism are named on a line of
their own. The JSON plan is ``docs/schema/rescale.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.values import format_size
from formats.ops.rescale import RescaleResult
from statecore.rescale_plan import KEPT, OPERATOR_PARALLELISM, OperatorPlan, RescalePlan
from statecore.wording import counted

__all__ = ["PLAN_LINES", "PLAN_ROWS", "draw_plan", "draw_rescale", "kept_apart",
           "parallelism_text", "plan_json", "rescale_json", "rescale_result_json"]


#: Lines the default plan may take (a 40-line terminal, with the command and its other output).
PLAN_LINES = 34
#: Rows of the one-table plan before the rest are counted on one line.
PLAN_ROWS = 20
#: Operators named on the line of those kept at their parallelism (the rest counted).
KEPT_SHOWN = 10


def _has_state(op: OperatorPlan) -> bool:
    return any(st.entries or st.bytes or st.states for st in op.subtasks)


def _detail_lines(op: OperatorPlan) -> int:
    """Lines of an operator's per-subtask table: title, borders, header, rows, summary."""
    return 6 + len(op.subtasks)


def draw_rescale(console: Console, plan: RescalePlan, run: Callable[[], RescaleResult] | None,
                 show_all: bool = False) -> None:
    """The plan (:func:`draw_plan`), then (``run`` given) carry it out and say what was written."""
    draw_plan(console, plan, show_all)
    if run is None:
        return
    result = run()
    console.print(
        f"wrote {result.location} ({result.mode}): {result.files_linked} files linked, "
        + (f"{result.files_copied} copied, " if result.files_copied else "")
        + f"{result.files_written} written, {result.entries_written:,} entries rewritten"
        + (f", {result.entries_dropped:,} expired entries dropped"
           if result.entries_dropped else "") + f" in {result.seconds:.2f} s")
    if result.release_text:
        console.print(f"a savepoint {escape(result.release_text)}")


def rescale_json(plan: RescalePlan, run: Callable[[], RescaleResult] | None) -> dict[str, Any]:
    """The ``rescale`` document: the plan, then (``run`` given) carry it out and add the result."""
    document: dict[str, Any] = {"plan": plan_json(plan)}
    if run is not None:
        document["result"] = rescale_result_json(run())
    return document


def draw_plan(console: Console, plan: RescalePlan, show_all: bool = False) -> None:
    """A rescale plan that fits a screen.

    Operators with state get a per-subtask table each when those fit in :data:`PLAN_LINES`,
    else one row each in one table (the :data:`PLAN_ROWS` largest by bytes; the rest counted);
    operators without state are counted on one line. ``show_all``: every operator's
    per-subtask table, stateless ones included.
    """
    with_state = [op for op in plan.operators if show_all or _has_state(op)]
    stateless = [op for op in plan.operators if op not in with_state]
    if show_all or sum(map(_detail_lines, with_state)) + 2 <= PLAN_LINES:
        for op in with_state:
            console.print(_plan_table(op))
            console.print(
                f"bytes moved {format_size(op.bytes_moved)} of {format_size(op.bytes)}, skew "
                f"{op.skew:.2f} (max/mean bytes), union state {op.union_elements:,} elements "
                f"x {op.new_parallelism} subtasks = {op.union_blowup:,} restored",
                markup=False, highlight=False)
    else:
        _plan_summary(console, with_state)
    if stateless:
        console.print(_named_on_one_line(f"{counted(len(stateless), 'operator')} without "
                                         f"state: ", [op.uid for op in stateless],
                                         console.width),
                      markup=False, highlight=False)
    kept = kept_apart(plan)
    if kept:
        names = [op.identity.label for op in kept]
        shown = ", ".join(names[:KEPT_SHOWN]) + (
            f" and {len(names) - KEPT_SHOWN} more" if len(names) > KEPT_SHOWN else "")
        console.print(
            f"kept at their parallelism and max parallelism: {shown} (their max parallelism, "
            f"lower than the other operators', was set on them, as Flink's SQL planner sets 1 "
            f"on a sink's writer or committer and a global aggregate; Flink restores them "
            f"where the job sets their parallelism; --operator-parallelism OP=N sets one's)",
            markup=False, highlight=False)


def kept_apart(plan: RescalePlan) -> list[OperatorPlan]:
    """The operators kept at a parallelism or max parallelism other than the plan's."""
    return [op for op in plan.operators if op.kept and (
        op.new_parallelism != plan.parallelism or (
            plan.max_parallelism is not None
            and op.new_max_parallelism != plan.max_parallelism))]


def parallelism_text(op: OperatorPlan) -> str:
    """``2 -> 3``; ``1 (kept)``; ``2 -> 1 (--operator-parallelism)``."""
    if op.parallelism_from == KEPT:
        return f"{op.old_parallelism} (kept)"
    change = f"{op.old_parallelism} -> {op.new_parallelism}"
    return change + (" (--operator-parallelism)"
                     if op.parallelism_from == OPERATOR_PARALLELISM else "")


def _named_on_one_line(prefix: str, names: list[str], width: int) -> str:
    """``prefix`` and as many of ``names`` as fit ``width`` (at least one), the rest counted."""
    for shown in range(len(names), 0, -1):
        rest = len(names) - shown
        line = prefix + ", ".join(names[:shown]) + (f" and {rest} more" if rest else "")
        if len(line) <= width or shown == 1:
            return line
    return prefix.rstrip(": ")


def _plan_summary(console: Console, ops: list[OperatorPlan]) -> None:
    """One row per operator (the largest first), totals below; ``--all`` for every subtask.

    Parallelisms shared by every operator go in the title (columns otherwise), the union
    elements restored (each new subtask gets them all) only when there is union state: the
    table fits 80 columns.
    """
    shared = {(op.old_parallelism, op.new_parallelism, op.old_max_parallelism,
               op.new_max_parallelism) for op in ops}
    if len(shared) == 1:
        old_p, new_p, old_m, new_m = next(iter(shared))
        console.print(f"parallelism {old_p} -> {new_p}, max parallelism {old_m}"
                      + (f" -> {new_m} (keys re-hashed)" if old_m != new_m else ""),
                      markup=False, highlight=False)
    table = Table(title=f"{counted(len(ops), 'operator')} with state (--all: every subtask)",
                  title_justify="left")
    union = any(op.union_elements for op in ops)
    columns = ["operator", *(("parallelism", "max parallelism") if len(shared) > 1 else ()),
               "entries", "elements", "bytes", "moved", "skew", *(("union",) if union else ())]
    for column in columns:
        table.add_column(column, justify="left" if column in (
            "operator", "parallelism", "max parallelism") else "right")
    largest = sorted(ops, key=lambda op: -op.bytes)
    for op in largest[:PLAN_ROWS]:
        elements = sum(s.entries for st in op.subtasks for s in st.states
                       if s.scope == "operator")
        max_parallelism = (f"{op.old_max_parallelism} -> {op.new_max_parallelism}" if op.rehash
                           else str(op.old_max_parallelism))
        table.add_row(escape(op.uid), *((escape(parallelism_text(op)),
                                         max_parallelism) if len(shared) > 1 else ()),
                      f"{sum(st.entries for st in op.subtasks):,}", f"{elements:,}",
                      format_size(op.bytes), format_size(op.bytes_moved), f"{op.skew:.2f}",
                      *((f"{op.union_blowup:,}",) if union else ()))
    console.print(table)
    rest = largest[PLAN_ROWS:]
    if rest:
        console.print(f"and {counted(len(rest), 'more operator')} with state: "
                      f"{format_size(sum(op.bytes for op in rest))}, "
                      f"{format_size(sum(op.bytes_moved for op in rest))} moved",
                      markup=False, highlight=False)
    console.print(f"bytes moved {format_size(sum(op.bytes_moved for op in ops))} of "
                  f"{format_size(sum(op.bytes for op in ops))}",
                  markup=False, highlight=False)


def _plan_table(op: OperatorPlan) -> Table:
    title = escape(f"{op.uid}: parallelism {parallelism_text(op)}, max parallelism "
                   f"{op.old_max_parallelism}"
                   + (f" -> {op.new_max_parallelism} (keys re-hashed)" if op.rehash
                      else " (kept)" if op.kept else ""))
    table = Table(title=title, title_justify="left")
    for column in ("subtask", "key groups", "entries", "elements", "bytes", "bytes moved"):
        table.add_column(column, justify="left" if column == "key groups" else "right")
    for st in op.subtasks:
        kg = st.key_group_range
        elements = sum(s.entries for s in st.states if s.scope == "operator")
        table.add_row(str(st.index), "-" if kg is None else f"{kg.start}-{kg.end}",
                      f"{st.entries:,}", f"{elements:,}", format_size(st.bytes),
                      format_size(st.bytes_moved))
    return table



def plan_json(plan: RescalePlan) -> dict[str, Any]:
    return {
        "parallelism": plan.parallelism, "max_parallelism": plan.max_parallelism,
        "rehash": plan.rehash, "bytes_moved": plan.bytes_moved, "skew": plan.skew,
        "operators": [{
            "operator": op.identity.to_json(), "old_parallelism": op.old_parallelism,
            "new_parallelism": op.new_parallelism,
            "old_max_parallelism": op.old_max_parallelism,
            "new_max_parallelism": op.new_max_parallelism, "rehash": op.rehash,
            "parallelism_from": op.parallelism_from,
            "bytes": op.bytes, "bytes_moved": op.bytes_moved, "skew": op.skew,
            "union_elements": op.union_elements, "union_blowup": op.union_blowup,
            "subtasks": [{
                "subtask": st.index,
                "key_group_range": (None if st.key_group_range is None
                                    else [st.key_group_range.start, st.key_group_range.end]),
                "entries": st.entries, "bytes": st.bytes, "bytes_moved": st.bytes_moved,
                "downloads": [{"file": name, "bytes": size}
                              for name, size in plan.downloads.get((op.uid, st.index), ())],
                "states": [{"state": s.state, "scope": s.scope, "entries": s.entries,
                            "bytes": s.bytes} for s in st.states],
                "keyed_handles": [{"state": h.state, "file": ", ".join(plan.stored(h.file)),
                                   "files": list(plan.stored(h.file)),
                                   "key_group_range": [h.key_group_range.start,
                                                       h.key_group_range.end]}
                                  for h in st.keyed],
                "operator_handles": [{"state": h.state, "mode": h.mode.name,
                                      "file": ", ".join(plan.stored(h.file)),
                                      "files": list(plan.stored(h.file)),
                                      "first_element": h.first_element,
                                      "element_count": h.element_count} for h in st.operator],
            } for st in op.subtasks],
        } for op in plan.operators],
    }


def rescale_result_json(result: RescaleResult) -> dict[str, Any]:
    return {"location": result.location, "mode": result.mode,
            "checkpoint_id": result.metadata.checkpoint_id,
            "kind": result.metadata.kind.value, "files_linked": result.files_linked,
            "files_copied": result.files_copied, "files_written": result.files_written,
            "entries_written": result.entries_written,
            "entries_dropped": result.entries_dropped, "seconds": result.seconds,
            "flink_release": result.release,
            "operators": [{"operator": op.identity.to_json(), "parallelism": op.parallelism,
                           "max_parallelism": op.max_parallelism}
                          for op in result.metadata.operators]}
