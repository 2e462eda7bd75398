"""``statectl export``: every state of a checkpoint as a flat table (Parquet, JSONL or CSV)."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import (
    Location,
    allow_pickle,
    engine_options,
    hold,
    operator_names,
    plan_option,
    planned,
    reading,
)
from formats.engines import open_engine
from formats.ops.export import FORMATS, export_checkpoint

__all__ = ["export_command"]


@click.command("export")
@click.argument("path")
@click.option("--out", required=True, type=Location(),
              help="The directory to write (must not exist): one file per state and an "
                   "_export.json manifest.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="parquet",
              show_default=True, help="parquet keeps the Arrow types; jsonl and csv are text.")
@click.option("--state", "states", multiple=True, metavar="NAME",
              help="Only this state (repeatable; default: every state).")
@engine_options
@plan_option
@click.pass_obj
def export_command(output: Output, path: str, out: str, fmt: str, states: tuple[str, ...],
                   engine: str, spark_master: str | None, spark_conf: tuple[str, ...]) -> None:
    """Write each state of a checkpoint as one flat table.

    Columns: operator, state, subtask, key_group, key, namespace, value, ttl_timestamp. Rows
    are what a restoring job sees (union state once, broadcast state from one copy). The
    table files are written in a staging directory and published whole; PATH is never
    modified. With --engine spark each state is a directory of part files, one per stored
    piece (of a Flink snapshot: per range of key groups), written by Spark tasks.
    """
    if engine != "local" and planned():
        raise click.UsageError("--plan names state with the local engine only: Spark's tasks "
                               "read the snapshot afresh")
    runner = open_engine(engine, spark_master, spark_conf)
    hold(path)
    checkpoint = reading(runner.open_checkpoint(path, allow_pickle=allow_pickle(),
                                                names=operator_names(), count=False,
                                                partial=True))
    with output.progress("exporting") as progress:
        result = export_checkpoint(checkpoint, out, fmt, states or None, progress,
                                   runner.state_writer(checkpoint))
    output.export(result)
