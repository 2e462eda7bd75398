"""``statectl verify``: check a checkpoint's files, offsets, ranges and key placement."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import allow_pickle, hold, operator_names
from formats.ops.verify import verify_checkpoint

__all__ = ["EXIT_PROBLEMS", "verify_command"]

#: Exit code when verify finds problems.
EXIT_PROBLEMS = 1


@click.command("verify")
@click.argument("path")
@click.pass_context
def verify_command(ctx: click.Context, path: str) -> None:
    """Check a checkpoint thoroughly; exit 0 when clean, 1 when problems are found.

    Checks every file's size and SHA-256 checksum, path safety, that the subtasks' key-group
    ranges cover [0, max parallelism) exactly once, that handles stay in their subtask's
    range and no key group is stored twice, the per-key-group row offsets, element ranges,
    that every key is stored in the key group its Java hash gives, and that no key appears
    twice in a state. Reads every file.
    """
    output: Output = ctx.obj
    hold(path)
    with output.progress("verifying") as progress:
        report = verify_checkpoint(path, progress, allow_pickle=allow_pickle(),
                                   names=operator_names())
    output.verify(report)
    if not report.clean:
        ctx.exit(EXIT_PROBLEMS)
