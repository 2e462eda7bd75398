"""``statectl snapshot``: savepoints, listing, release and retention of a state directory."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import Location, on_bad_record_option
from formats.ops.build import continue_build
from formats.ops.snapshot_list import list_snapshots
from formats.statectl.storage import DirectoryCheckpointStorage

__all__ = ["snapshot_command"]

_DIR = click.argument("directory", type=Location(
    exists=True, file_okay=False, what="a state directory (what build --checkpoint-dir writes)"))


@click.group("snapshot")
def snapshot_command() -> None:
    """Take savepoints of a state directory, list, release and prune its checkpoints.

    A state directory is what `statectl build --checkpoint-dir` writes: chk-<id>/ and
    savepoint-<id>/ subdirectories, each complete once its _metadata.json exists. It may be
    a local path or a URI such as s3://bucket/state.
    """


@snapshot_command.command("take")
@_DIR
@click.option("--from", "from_checkpoint", type=int,
              help="The checkpoint to take it from (default: the latest).")
@click.option("--input", "inputs", multiple=True, type=Location(
    exists=True, dir_okay=False, what="an input file (Parquet, CSV or JSON Lines)"),
              help="Process more input first (repeatable): the build resumes from its latest "
                   "checkpoint with the settings it was started with, then the savepoint is "
                   "taken of its final state.")
@on_bad_record_option
@click.pass_obj
def take_command(output: Output, directory: str, from_checkpoint: int | None,
                 inputs: tuple[str, ...], on_bad_record: str) -> None:
    """Take a savepoint: the state of a completed checkpoint, kept until released by hand."""
    if inputs and from_checkpoint is not None:
        raise click.UsageError("--from and --input exclude each other: --input continues "
                               "from the latest checkpoint")
    built = None
    if inputs:
        with output.progress("processing") as progress:
            built = continue_build(inputs, directory, progress, on_bad_record)
        from_checkpoint = built.final_checkpoint
    output.savepoint(DirectoryCheckpointStorage(directory, create=False).take_savepoint(
        from_checkpoint), built)


@snapshot_command.command("list")
@click.argument("directories", nargs=-1, required=True, metavar="DIRECTORY...", type=Location(
    exists=True, what="a state directory, a Flink job's checkpoint directory or a savepoint"))
@click.pass_obj
def list_command(output: Output, directories: tuple[str, ...]) -> None:
    """List checkpoints and savepoints with their ids, kinds, times and sizes.

    DIRECTORY is a state directory (build --checkpoint-dir: its complete checkpoints and
    savepoints), or a Flink job's checkpoint directory (the one holding chk-N/ and shared/,
    or the job folder above it: every chk-N, complete or not), a folder of Flink savepoints
    or a savepoint; several are listed together, by id. A Flink snapshot's size is its own
    directory's files (not the job's shared/ files).
    """
    output.snapshots(list_snapshots(directories))


@snapshot_command.command("release")
@_DIR
@click.argument("checkpoint_id", type=int)
@click.option("--force", is_flag=True,
              help="Release even the latest checkpoint (which a resume would need).")
@click.pass_obj
def release_command(output: Output, directory: str, checkpoint_id: int, force: bool) -> None:
    """Delete a checkpoint or savepoint (refuses the latest checkpoint without --force)."""
    released = DirectoryCheckpointStorage(directory, create=False).release(checkpoint_id,
                                                                           force=force)
    output.released([released.checkpoint_id])


@snapshot_command.command("prune")
@_DIR
@click.option("--keep", required=True, type=click.IntRange(min=1),
              help="How many of the newest checkpoints to keep (savepoints are never pruned).")
@click.pass_obj
def prune_command(output: Output, directory: str, keep: int) -> None:
    """Release all but the newest --keep checkpoints; savepoints stay; remove leftovers.

    Leftovers are what writers that crashed left: incomplete checkpoint directories (no
    _metadata.json), and claims of processes that are gone. What a running process is
    writing or reading is never touched.
    """
    output.pruned(DirectoryCheckpointStorage(directory, create=False).prune(keep))
