"""How ``statectl compat`` shows a restore's verdict: a screen of rich text, or its JSON document.

The text opens with the outcome and the releases, then one line per operator and state that is
not restored as is (what several operators share, once; as-is states are counted, not listed),
then the totals. Lines are never cut or folded: a pipe gets each whole.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from cli.values import format_size
from formats.model.compatibility import StateCheck, Verdict
from formats.ops.compat import CompatReport, OperatorCompat
from statecore.wording import counted

__all__ = ["compat_json", "draw_compat"]

_OUTCOME = {
    "restores": "[green]restores[/green] (as is, or after Flink's own migration)",
    "restores-dropping-state": "[yellow]restores only with allowNonRestoredState[/yellow]: "
                               "state of OLD is dropped",
    "restores-after-migrate": "[yellow]restores only after statectl migrate[/yellow] (statectl "
                              "migrate OLD --like NEW --out DIR converts what Flink refuses)",
    "unknown": "[yellow]statectl cannot tell[/yellow] for some state",
    "cannot": "[red]Flink refuses it[/red]",
}
_STYLE = {Verdict.AS_IS: "green", Verdict.RECONFIGURED: "green", Verdict.MIGRATION: "cyan",
          Verdict.UNKNOWN: "yellow", Verdict.INCOMPATIBLE: "red"}


def draw_compat(console: Console, report: CompatReport) -> None:
    """The outcome, the rows worth reading, the totals."""
    console.print(f"{escape(report.old)} restored by the job of {escape(report.new)}: "
                  f"{_OUTCOME[report.outcome]}")
    if report.old_release or report.new_release:
        console.print(f"OLD written by {report.old_release or 'an unknown release'}; NEW by "
                      f"{report.new_release or 'an unknown release'}")
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for op in report.operators:  # one line for what several operators share (a max parallelism)
        for name, *rest in _rows(op):
            grouped.setdefault((rest[0], rest[1], rest[2]), []).append(name)
    for (state, verdict, why), names in grouped.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        where = shown if state == "(operator)" else f"{shown} / {state}"
        console.print(f"  {where}: {verdict} -- {why}")
    console.print(_totals(report))


def _verdict(verdict: Verdict) -> str:
    return f"[{_STYLE[verdict]}]{verdict.label}[/{_STYLE[verdict]}]"


def _rows(op: OperatorCompat) -> list[tuple[str, str, str, str]]:
    name = escape(op.label)
    if op.status == "dropped":
        lost = (format_size(op.bytes) if op.entries is None
                else f"{counted(op.entries, 'entry')}, {format_size(op.bytes)}")
        return [(name, "(all)", "[yellow]dropped[/yellow]",
                 f"not in NEW: {lost} of state lost; Flink restores only with "
                 "allowNonRestoredState"),
                *((name, "(operator)", "[yellow]note[/yellow]", escape(n)) for n in op.notes)]
    rows = [(name, "(operator)", _verdict(Verdict.INCOMPATIBLE), escape(p)) for p in op.problems]
    rows += [(name, "(operator)", _verdict(Verdict.AS_IS), escape(n)) for n in op.notes]
    for check in op.checks:
        if check.verdict != Verdict.AS_IS:
            cited = f" ({check.cited})" if check.cited else ""
            verdict = _verdict(check.verdict) + (" (statectl migrate converts it)"
                                                 if check.migratable else "")
            rows.append((name, escape(check.state), verdict, escape(check.detail + cited)))
    return rows


def _totals(report: CompatReport) -> str:
    restored = [o for o in report.operators if o.status == "restored"]
    states = [c for o in restored for c in o.checks if c.scope != "key"]
    by_verdict = {v: sum(c.verdict == v for c in states) for v in Verdict}
    parts = [f"{counted(len(restored), 'operator')} matched ({counted(len(states), 'state')}: "
             + ", ".join(f"{n} {v.label}" for v, n in by_verdict.items() if n) + ")"
             if states else f"{counted(len(restored), 'operator')} matched"]
    dropped = [o for o in report.operators if o.status == "dropped"]
    if dropped:
        parts.append(f"{len(dropped)} only in OLD with state")
    skipped = sum(o.status == "skipped" for o in report.operators)
    if skipped:
        parts.append(f"{skipped} only in OLD without state (skipped)")
    new = sum(o.status == "new" for o in report.operators)
    if new:
        parts.append(f"{new} only in NEW (start empty)")
    return "; ".join(parts)


def _check_json(check: StateCheck) -> dict[str, Any]:
    return {"name": check.state, "scope": check.scope, "verdict": check.verdict.label,
            "detail": check.detail, "cited": check.cited, "old": check.old, "new": check.new,
            "migratable": check.migratable}


def compat_json(report: CompatReport) -> dict[str, Any]:
    """The ``compat`` document: outcome, exit code, releases and every operator's states."""
    return {
        "outcome": report.outcome, "exit_code": report.exit_code,
        "old": {"location": report.old, "releases": report.old_release},
        "new": {"location": report.new, "releases": report.new_release},
        "operators": [{
            "status": op.status,
            "old": None if op.old is None else op.old.to_json(),
            "new": None if op.new is None else op.new.to_json(),
            "verdict": op.verdict.label, "problems": list(op.problems), "notes": list(op.notes),
            "entries": op.entries, "bytes": op.bytes,
            "max_parallelism": {"old": op.max_parallelism[0], "new": op.max_parallelism[1]},
            "states": [_check_json(c) for c in op.checks],
        } for op in report.operators],
    }
