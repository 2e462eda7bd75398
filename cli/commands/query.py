"""``statectl query``: SQL over any snapshot, several at once (DuckDB)."""

from __future__ import annotations

import re

import click

from cli.output import Output
from cli.params import allow_pickle, hold, operator_names, plan_option, reading
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.catalog import databases
from formats.ops.query import QueryError, needs_decoding, run_query, write_result
from statecore.errors import InvalidArgumentError

__all__ = ["query_command"]

#: Exit code of a query DuckDB refuses: a usage error, as click's own.
EXIT_SQL = 2
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _named(value: str) -> tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not _NAME.fullmatch(name) or not path:
        raise click.BadParameter(f"{value!r}: give NAME=PATH, NAME a plain SQL name "
                                 "(letters, digits, _)", param_hint="--as")
    return name, path


@click.command("query")
@click.argument("args", nargs=-1, required=True, metavar="[PATH...] SQL")
@click.option("--as", "named", multiple=True, metavar="NAME=PATH",
              help="A snapshot under a name of its own (repeatable): its tables are "
                   "NAME.\"<operator>\".\"<state>\", so that a join compares snapshots.")
@click.option("--out", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the result to FILE instead: Parquet, CSV or JSON Lines by its "
                   "extension (.parquet, .csv, .jsonl).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="Show at most N rows (default: every row; on a terminal, what fits "
                   "it); the row count is always given.")
@plan_option
@click.pass_obj
def query_command(output: Output, args: tuple[str, ...], named: tuple[str, ...],
                  out: str | None, limit: int | None) -> None:
    """Run SQL over the state of snapshots: every state is a table.

    Tables: "<operator>"."<state>" for every state of every operator (the operator's uid,
    else its name), with export's columns (operator, state, subtask, key_group, key,
    namespace, value, ttl_timestamp); statectl.operators, statectl.states, statectl.subtasks
    and statectl.key_groups hold the metadata. Only the tables the query names are read; a
    WHERE key = ... or key IN (...) reads only those keys' key groups. PATH (or the first
    --as) is the database unqualified names refer to. Directories holding snapshots (a Flink
    job's checkpoint directory, a state directory, savepoints), or several PATHs: every
    snapshot found is a database (chk_<id>, savepoint_<id>), the newest the default, the table
    snapshots lists them, and all_snapshots."<operator>"."<state>" holds every snapshot's rows
    of a state. See docs/query.md.
    """
    *paths, sql = args
    snapshots = dict(_named(value) for value in named)
    if not paths and not snapshots:
        raise click.UsageError("give a snapshot: PATH, or --as NAME=PATH")
    if out is not None and not out.endswith((".parquet", ".csv", ".jsonl")):
        raise click.BadParameter("FILE must end in .parquet, .csv or .jsonl", param_hint="--out")
    ctx = click.get_current_context()
    try:
        decode = needs_decoding(sql)
    except QueryError as exc:
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(EXIT_SQL)
    hold(*paths, *snapshots.values())
    pickles, names = allow_pickle(), operator_names()  # unpickling decodes all at opening

    def opener(location: str) -> Checkpoint:  # on worker threads: no click context there
        return open_checkpoint(location, allow_pickle=pickles, names=names, partial=True,
                               decode=decode or pickles)

    try:
        found = databases(paths, snapshots, opener=opener)
    except InvalidArgumentError as exc:
        raise click.UsageError(str(exc)) from exc
    for checkpoint in found.snapshots.values():
        reading(checkpoint)
    try:
        result = run_query(found.snapshots, sql, default=found.default, extra=found.extra)
    except QueryError as exc:
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(EXIT_SQL)
    if out is not None:
        write_result(result, out)
    output.query(result, out, limit)
