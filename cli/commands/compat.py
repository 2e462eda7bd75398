"""``statectl compat``: will the job that wrote NEW restore OLD? (exit 0 / 1 / 3)."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import hold, open_sides
from formats.ops.compat import check_compat

__all__ = ["compat_command"]


@click.command("compat")
@click.argument("old")
@click.argument("new")
@click.option("--map", "maps", multiple=True, metavar="OLD=NEW",
              help="Pair an operator of OLD with one of NEW (a renamed uid; each by uid, name "
                   "or OperatorID): judged as statectl migrate --map would write it. Repeatable.")
@click.pass_context
def compat_command(ctx: click.Context, old: str, new: str, maps: tuple[str, ...]) -> None:
    """Tell whether the job that wrote NEW restores OLD, without the job or a JVM.

    NEW is any snapshot of the new job version (a savepoint right after it starts will do):
    its serializer snapshots are what the new job registers. Operators are matched by
    OperatorID, each state's serializers compared as Flink's restore compares them.

    Exit 0: Flink restores OLD (as is, or after its own migration); 1: only with
    allowNonRestoredState (state of OLD dropped), or statectl cannot tell; 3: Flink refuses.
    """
    output: Output = ctx.obj
    hold(old, new)
    opened = open_sides([("OLD", old, False), ("NEW", new, False)])
    report = check_compat(opened[0], opened[1], maps)
    output.compat(report)
    if report.exit_code:
        ctx.exit(report.exit_code)
