"""``statectl history``: one key's state across every checkpoint and savepoint, oldest first."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import Location, allow_pickle, operator_names, reading
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint, pinned
from formats.ops.history import find_snapshots, key_history

__all__ = ["history_command"]


@click.command("history")
@click.argument("directories", nargs=-1, required=True, type=Location(
    exists=True, what="a state directory, a Flink job's checkpoint directory or a snapshot"),
                metavar="DIR...")
@click.option("--key", required=True, metavar="K",
              help="The key (typed as the operator's key type, as inspect --key takes it).")
@click.option("--state", "states", multiple=True, metavar="NAME",
              help="Only this state (repeatable).")
@click.option("--namespace", metavar="NS", help="Only the entry in this namespace.")
@click.option("--all", "everything", is_flag=True,
              help="Also the values that did not change (text; JSON always has them).")
@click.pass_obj
def history_command(output: Output, directories: tuple[str, ...], key: str,
                    states: tuple[str, ...], namespace: str | None, everything: bool) -> None:
    """Show the state of key K in every snapshot, oldest first, each change marked.

    DIR is a statectl state directory, a Flink job's checkpoint directory (chk-*, also below
    its job-ID directory), a directory of savepoints, any mix (found as query DIR finds its
    databases), or a snapshot; give several to merge them (a job's checkpoints and its
    savepoints). Snapshots are ordered by checkpoint id.
    Each is read as inspect --key reads it: statectl's format only the key's key group.
    """
    locations = find_snapshots(directories)
    ctx = click.get_current_context()

    def open_snapshot(location: str) -> Checkpoint:
        ctx.with_resource(pinned(location))
        # as inspect --key: a Flink snapshot decodes only the key's key group
        pickles = allow_pickle()
        return reading(open_checkpoint(location, allow_pickle=pickles,
                                       names=operator_names(), partial=True,
                                       decode=pickles))

    with output.progress("reading snapshots") as progress:
        history = key_history(locations, key, open_snapshot, states=states or None,
                              namespace=namespace, progress=progress)
    output.history(history, everything)
