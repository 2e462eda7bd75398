"""``statectl build``: aggregate Parquet, CSV or JSON Lines files into keyed state."""

from __future__ import annotations

import click

from cli import interrupt
from cli.output import Output
from cli.params import Location, engine_options, on_bad_record_option
from formats.engines import open_engine
from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.checkpoint import CheckpointKind
from statecore.errors import StatectlError

__all__ = ["build_command"]


def _resume(value: str | None) -> int | str | None:
    if value is None or value == "latest":
        return value
    if not value.isdigit():
        raise click.BadParameter("give a checkpoint id or 'latest'", param_hint="--resume")
    return int(value)


@click.command("build")
@click.argument("inputs", nargs=-1, required=True, type=Location(
    exists=True, dir_okay=False, what="an input file (Parquet, CSV or JSON Lines)"))
@click.option("--key", required=True, help="The column whose values are the keys.")
@click.option("--key-type", help="Java type of the key (default: the column's type), e.g. "
                                 "string, int32, int64: it decides the key groups. Keys are "
                                 "converted to it as they are read (string: the text as "
                                 "written, a JSON number's included); a key that does not "
                                 "convert is a bad record.")
@click.option("--agg", "aggregations", multiple=True, required=True,
              help="An aggregation, repeatable: count, sum:COL, min:COL, max:COL, last:COL, "
                   "list:COL, map:KEYCOL=VALCOL, window-count:COL:SIZE.")
@click.option("--checkpoint-dir", required=True, type=Location(file_okay=False),
              help="Where checkpoints go (chk-<id>/, savepoint-<id>/).")
@click.option("--parallelism", default=1, show_default=True, type=click.IntRange(1, 32768),
              help="Subtasks of the keyed operator; subtask i owns key-group range i.")
@click.option("--max-parallelism", type=click.IntRange(1, 32768),
              help="Default: Flink's rule (at least 128).")
@click.option("--uid", default="build", show_default=True, help="The operator's uid.")
@click.option("--ttl", type=click.IntRange(min=1), help="State time-to-live in ms.")
@click.option("--checkpoint-every", type=click.IntRange(min=1),
              help="Take a checkpoint every N records (asynchronously).")
@click.option("--keep", default=3, show_default=True, type=click.IntRange(min=1),
              help="Completed checkpoints to retain.")
@click.option("--resume", is_flag=False, flag_value="latest", default=None,
              help="Resume from the latest checkpoint, or from the given id.")
@on_bad_record_option
@engine_options
@click.pass_obj
def build_command(output: Output, inputs: tuple[str, ...], key: str, key_type: str | None,
                  aggregations: tuple[str, ...], checkpoint_dir: str, parallelism: int,
                  max_parallelism: int | None, uid: str, ttl: int | None,
                  checkpoint_every: int | None, keep: int, resume: str | None,
                  on_bad_record: str, engine: str, spark_master: str | None,
                  spark_conf: tuple[str, ...]) -> None:
    """Aggregate INPUTS (Parquet, CSV or JSON Lines) into keyed state, with checkpoints.

    With --engine spark, Spark tasks read the inputs and run the subtasks; the checkpoint is
    the one a local build writes (one pass: no --checkpoint-every, no --resume).
    """
    runner = open_engine(engine, spark_master, spark_conf)
    # what an interrupted build kept, asked (by cli.interrupt) once its writers were stopped
    interrupt.keep_note(lambda: _kept(checkpoint_dir))
    with output.progress("building") as progress:
        summary = runner.build(
            inputs, key=key, key_type=key_type, aggregations=aggregations,
            checkpoint_dir=checkpoint_dir, parallelism=parallelism,
            max_parallelism=max_parallelism, uid=uid, ttl=ttl,
            checkpoint_every=checkpoint_every, keep=keep, resume=_resume(resume),
            progress=progress, on_bad_record=on_bad_record)
    interrupt.keep_note(None)
    output.build(summary)


def _kept(checkpoint_dir: str) -> str:
    """Which checkpoint an interrupted build can be resumed from (one phrase)."""
    try:
        completed = [c for c in DirectoryCheckpointStorage(checkpoint_dir, create=False)
                     .completed() if c.kind is CheckpointKind.CHECKPOINT]
    except StatectlError:
        completed = []
    if not completed:
        return f"no checkpoint of this build was completed in {checkpoint_dir}"
    latest = completed[-1]
    return (f"the latest complete checkpoint is {latest.checkpoint_id} ({latest.location}): "
            f"--resume continues from it")
