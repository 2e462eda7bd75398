"""``statectl diff``: the logical difference of two checkpoints."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import allow_pickle, hold, open_sides
from formats.ops.diff import diff_checkpoints

__all__ = ["diff_command"]


@click.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0),
              help="Show at most this many differences (all are counted).")
@click.pass_context
def diff_command(ctx: click.Context, a: str, b: str, limit: int) -> None:
    """Compare two checkpoints' state; exit 0 when equal, 1 when they differ.

    Compares per operator (uid), state, key and namespace: values and TTL timestamps of keyed
    entries, split list elements as a multiset, union list elements once per distinct range,
    broadcast maps. Parallelism, max parallelism and file layout do not matter, so a
    checkpoint and its rescaled copy are equal.
    """
    output: Output = ctx.obj
    hold(a, b)
    left, right = open_sides([("first", a, False), ("second", b, False)], pickles=allow_pickle())
    report = diff_checkpoints(left, right, left=a, right=b, limit=limit)
    output.diff(report)
    if not report.equal:
        ctx.exit(1)
