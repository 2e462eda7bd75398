"""``statectl migrate``: a snapshot rewritten so that the new version of its job restores it."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import Location, engine_options, hold, open_sides
from formats.engines import open_engine
from formats.ops.migrate import migrate_checkpoint

__all__ = ["migrate_command"]


@click.command("migrate")
@click.argument("old")
@click.option("--like", "like", required=True, metavar="NEW",
              help="A snapshot of the new job version (a savepoint right after it starts will "
                   "do): the job, serializers and Flink release to write for.")
@click.option("--out", required=True, type=Location(),
              help="The savepoint directory to write (must not exist).")
@click.option("--map", "maps", multiple=True, metavar="OLD=NEW",
              help="Pair an operator of OLD with one of NEW (a renamed uid): each by uid, name "
                   "or OperatorID. Repeatable.")
@click.option("--drop", "drops", multiple=True, metavar="OP[/STATE]",
              help="Leave an operator of OLD, or one of its states, out. Repeatable.")
@click.option("--rename-state", "renames", multiple=True, metavar="OP/OLD=NEW",
              help="Write a state of OLD as the new job's state of another name. Repeatable.")
@click.option("--compress", is_flag=True,
              help="Snappy-compress the keyed state, as Flink does with "
                   "execution.checkpointing.snapshot-compression.")
@engine_options
@click.pass_obj
def migrate_command(output: Output, old: str, like: str, out: str, maps: tuple[str, ...],
                    drops: tuple[str, ...], renames: tuple[str, ...], compress: bool,
                    engine: str, spark_master: str | None, spark_conf: tuple[str, ...]
                    ) -> None:
    """Rewrite OLD as a savepoint that the job which wrote NEW restores.

    Where statectl compat says Flink would refuse: operators are written under the new job's
    identity (--map pairs renamed ones), states Flink would refuse (Kryo 2 values for Flink 2.x,
    a Kryo type the new job keeps under Flink's own serializer, int turned long, ...) with the
    new job's serializers, every value converted and checked -- or nothing is written, the first
    value that does not convert named. States Flink restores itself are kept as they are. The
    savepoint is for NEW's Flink release and needs no allowNonRestoredState. OLD is never
    modified. With --engine spark, Spark tasks decode, convert and write the keyed state:
    the same savepoint, byte for byte.
    """
    runner = open_engine(engine, spark_master, spark_conf)
    hold(old, like)
    opened = open_sides([("OLD", old, True), ("NEW", like, False)], engine=runner)
    with output.progress("migrating") as progress:
        result = migrate_checkpoint(opened[0], opened[1], out, maps=maps, drops=drops,
                                    renames=renames, compress=compress, progress=progress)
    output.migrate(result)
