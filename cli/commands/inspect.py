"""``statectl inspect``: what is in a checkpoint, at a glance or in depth."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import (
    TIMESTAMP,
    allow_pickle,
    engine_options,
    given_ttls,
    hold,
    operator_names,
    plan_option,
    reading,
    ttl_option,
)
from formats.engines import open_engine
from formats.ops.inspect import inspect_checkpoint

__all__ = ["inspect_command"]


@click.command("inspect")
@click.argument("path")
@click.option("--key-groups", "key_groups", is_flag=True,
              help="Chart bytes (or --by entries) per key group with min, mean, max, skew and "
                   "each subtask's share; reads only metadata and Parquet footers.")
@click.option("--by", "measure", type=click.Choice(["bytes", "entries"]), default="bytes",
              show_default=True, help="What --key-groups charts.")
@click.option("--top", type=click.IntRange(min=1), metavar="N",
              help="The N largest entries (key and namespace) of each keyed and broadcast "
                   "state, by data bytes.")
@click.option("--now", type=TIMESTAMP,
              help="Show the share of TTL-expired entries and bytes per state at this time "
                   "(epoch ms, ISO 8601, or 'now').")
@ttl_option("--now")
@click.option("--state", "states", multiple=True, metavar="NAME",
              help="Only this state in --top, --now, --key and --entries (repeatable).")
@click.option("--key", metavar="K",
              help="Show the entries of key K (typed as the operator's key type; tuples, "
                   "lists and POJOs as JSON, instants as ISO 8601 or epoch ms), reading only "
                   "its key group (every one for a key whose hash is not computable).")
@click.option("--namespace", metavar="NS",
              help="With --key: only the entry in this namespace (e.g. a window start).")
@click.option("--entries", "show_entries", is_flag=True,
              help="Show a sample of entries of each state (the first --limit).")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many entries --entries shows per state.")
@click.option("--all", "everything", is_flag=True,
              help="List every operator (also those without state), every state (also empty "
                   "ones) and a table of every subtask, instead of a summary that fits a "
                   "screen.")
@click.option("--width", type=click.IntRange(min=40), metavar="N",
              help="With --key: cut each value's line at N characters (default: the "
                   "terminal's width), saying how much is left.")
@click.option("--full", is_flag=True,
              help="With --key: every value whole, on one line each.")
@engine_options
@plan_option
@click.pass_obj
def inspect_command(output: Output, path: str, key_groups: bool, measure: str, top: int | None,
                    now: int | None, ttls: tuple[tuple[str, int], ...],
                    states: tuple[str, ...], key: str | None,
                    namespace: str | None, show_entries: bool, limit: int, everything: bool,
                    width: int | None, full: bool, engine: str, spark_master: str | None,
                    spark_conf: tuple[str, ...]) -> None:
    """Show a checkpoint: operators, their states with entries and bytes, and subtasks.

    PATH is a checkpoint or savepoint directory (one with _metadata.json, or a Flink snapshot's
    _metadata), or a URI pyarrow supports. Without options only the metadata is read (of a
    Flink snapshot: _metadata and the keyed state's headers, so its keyed entries are not
    counted), and the summary fits a screen; --all lists everything, with every count; the
    options add views. With --engine spark, --key-groups reads the footers in Spark tasks.
    """
    if namespace is not None and key is None:
        raise click.UsageError("--namespace needs --key")
    if (width is not None or full) and key is None:
        raise click.UsageError("--width and --full apply to --key")
    if width is not None and full:
        raise click.UsageError("give --width N or --full, not both")
    if states and not (top or now is not None or key is not None or show_entries):
        raise click.UsageError("--state selects states for --top, --now, --key or --entries; "
                               "give one of them")
    if ttls and now is None:
        raise click.UsageError("--ttl gives TTLs for --now; give --now too")
    if engine != "local" and not key_groups:
        raise click.UsageError("--engine spark applies to --key-groups (the other views read "
                               "little or run locally)")
    runner = open_engine(engine, spark_master, spark_conf)
    hold(path)
    # a summary of a Flink snapshot reads _metadata and the keyed streams' headers only, and
    # --key (alone) only the key's key group besides
    pickles = allow_pickle()  # unpickling decodes every value at opening
    decode = bool(key_groups or top or now is not None or show_entries or everything or pickles)
    # --key-groups alone: counted piece by piece, never held decoded (issue 45)
    counted = key_groups and not (top or now is not None or show_entries or everything
                                  or pickles or key is not None)
    checkpoint = reading(runner.open_checkpoint(path, allow_pickle=pickles,
                                                names=operator_names(), partial=True,
                                                decode=decode, rewrite=counted))
    given_ttls(checkpoint, ttls)
    output.inspect(inspect_checkpoint(
        checkpoint, path, key_groups=key_groups, measure=measure, top=top, now=now,
        states=states or None, key=key, namespace=namespace,
        limit=limit if show_entries else None,
        footers=runner.footers(checkpoint) if key_groups else None, everything=everything),
        width=None if full else 0 if width is None else width)
