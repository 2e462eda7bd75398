"""``statectl convert``: a checkpoint as a Flink savepoint (bootstrap, backend switch)."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import Location, allow_pickle, hold, operator_names, reading
from formats.engines import Engine
from formats.ops.convert import FORMATS, convert_checkpoint

__all__ = ["convert_command"]


@click.command("convert")
@click.argument("source")
@click.option("--to", "to", type=click.Choice(list(FORMATS)), default="flink",
              show_default=True, help="The format to write: flink, a canonical savepoint.")
@click.option("--out", required=True, type=Location(),
              help="The savepoint directory to write (must not exist).")
@click.option("--compress", is_flag=True,
              help="Snappy-compress the keyed state, as Flink does with "
                   "execution.checkpointing.snapshot-compression.")
@click.option("--flink-version", metavar="X.Y",
              help="The Flink release (1.15 to 2.3) the savepoint is written for (default: a "
                   "Flink source's own, the newest for a statectl checkpoint).")
@click.pass_obj
def convert_command(output: Output, source: str, to: str, out: str, compress: bool,
                    flink_version: str | None) -> None:
    """Write a checkpoint as a Flink canonical savepoint that Flink restores.

    A statectl checkpoint becomes the initial state of a Flink job (a bootstrap): operators
    keep their uids, and so the OperatorIDs Flink derives from them; types map onto Flink's
    built-in serializers, TTL onto Flink's TTL serializer. A Flink snapshot (a RocksDB
    incremental checkpoint, a native savepoint) becomes a canonical savepoint, which restores
    into any state backend. Every operator keeps its parallelism and max parallelism (an
    operator Flink's SQL planner pinned to 1 among others at 2 too; statectl rescale changes
    them). SOURCE is never modified. The savepoint's _metadata is the one the chosen Flink
    release reads (--flink-version).
    """
    hold(source)
    checkpoint = reading(Engine().open_checkpoint(source, allow_pickle=allow_pickle(),
                                                  names=operator_names(), partial=True,
                                                  rewrite=True))
    with output.progress("converting"):
        result = convert_checkpoint(checkpoint, out, to, compress=compress,
                                    flink_version=flink_version)
    output.convert(result)
