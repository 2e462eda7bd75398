"""``statectl browse``: an interactive inspector in the terminal."""

from __future__ import annotations

import sys

import click

from cli.output import Output
from cli.params import allow_pickle, hold, operator_names, reading
from formats.model import Checkpoint
from formats.open import open_checkpoint

__all__ = ["browse_command"]


@click.command("browse")
@click.argument("path")
@click.option("--against", metavar="B",
              help="Mark each state's rows against snapshot B: + added, - removed, ~ changed "
                   "(operators matched by OperatorID, as diff does).")
@click.pass_obj
def browse_command(output: Output, path: str, against: str | None) -> None:
    """Browse a snapshot in the terminal: operators, states, entries, one key, key groups.

    Keyboard only (? shows the keys); works over SSH in 80x24. Opening reads the metadata
    alone; a state's page reads only its key groups (a Flink snapshot is decoded whole the
    first time a state is opened). See docs/browse.md.
    """
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise click.UsageError("browse needs a terminal (for scripts: inspect, query)")
    from cli.browse import BrowseApp  # Textual is loaded only for this command

    hold(path, *([against] if against else []))
    pickles, names = allow_pickle(), operator_names()
    context = click.get_current_context()

    def opened(location: str, decode: bool = True) -> Checkpoint:
        with context:  # also on the app's worker thread (a Flink snapshot decoded later)
            return reading(open_checkpoint(location, allow_pickle=pickles, names=names,
                                           partial=True, decode=decode))

    checkpoint = opened(path, decode=False)
    other = None if against is None else opened(against)
    BrowseApp(checkpoint, path, decoded=None if checkpoint.format_name == "statectl"
              else lambda: opened(path), against=other).run()
