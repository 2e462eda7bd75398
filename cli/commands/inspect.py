"""``statectl inspect``: what is in a checkpoint, from its metadata."""

from __future__ import annotations

import click

from cli.output import Output
from formats.checkpoint_v1 import open_checkpoint
from formats.inspect import summarize

__all__ = ["inspect_command"]


@click.command("inspect")
@click.argument("path")
@click.pass_obj
def inspect_command(output: Output, path: str) -> None:
    """Show a checkpoint: operators, their states with entries and bytes, and subtasks.

    PATH is a checkpoint or savepoint directory (one with _metadata.json), or a URI pyarrow
    supports. Only the metadata is read.
    """
    output.inspect(summarize(open_checkpoint(path), path))
