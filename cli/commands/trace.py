"""``statectl trace``: run a script of map operations and draw the map after each step.

The walkthroughs of the seed articles ship with it (:mod:`cli.walkthroughs`).
"""

from __future__ import annotations

import os
from typing import IO, Any

import click

from cli.output import Output
from cli.walkthroughs import walkthrough_script, walkthroughs
from statecore.copy_on_write_state_map import HashMode
from statecore.errors import TraceScriptError
from statecore.map_trace import HASH_MODES, run_script

__all__ = ["trace_command"]


class ScriptFile(click.File):
    """A script to read (``-``: stdin).

    A path that is not a readable file is a domain error (exit code 3, as every command's
    missing input: docs/cli.md).
    """

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value != "-":
            if not os.path.lexists(value):
                raise TraceScriptError(f"{value} does not exist; give a script file (- reads "
                                       f"stdin) or --example NAME")
            if os.path.isdir(value):
                raise TraceScriptError(f"{value} is a directory; give a script file")
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:  # unreadable: permissions, a broken link
            raise TraceScriptError(f"cannot read {value}: {exc.message}") from exc

def _script_text(script: IO[str] | None, example: str | None) -> str:
    if script is not None and example is not None:
        raise click.UsageError("give either SCRIPT or --example, not both")
    if example is not None:
        return walkthrough_script(example)
    if script is None:
        raise click.UsageError(
            "give a SCRIPT (a path, or - for stdin), --example NAME or --list-examples")
    try:
        return script.read()
    except UnicodeDecodeError as exc:
        raise TraceScriptError(f"{script.name} is not UTF-8 text: {exc}") from exc


# The help text lives here, not in the docstring: "\b" (keep the next block as is) is a
# backspace character for click.
_TRACE_HELP = """\
Run a script of map operations and draw the buckets, chains and versions after each step.

SCRIPT is a file of operations, one per line (`-` reads stdin), e.g.

\b
    capacity 4
    hash-mode identity
    put 23 3
    snapshot
    get 23
    release 1

Operations: put K V [NS], get K [NS], get_append K V [NS], contains K [NS], remove K [NS],
put_and_get_old K V [NS], remove_and_get_old K [NS], transform K V [NS], snapshot,
release VERSION, read VERSION. Directives before the first operation: capacity N,
hash-mode fast|flink|identity, min-transfer N, hash KEY H (pin a key's bucket hash).
Values are JSON literals or bare words (strings); `#` starts a comment.

Each step shows the primary table (and the rehash table while rehashing) as chains
`K:key S:state (eE sS)` with entry and state versions, entries copied by copy-on-write,
entries shared with open snapshots ([S1]), and each open snapshot's own array with the
entries only it still holds ([S1 only]).
"""


@click.command("trace", help=_TRACE_HELP)
@click.argument("script", type=ScriptFile("r", encoding="utf-8"), required=False)
@click.option("--example", type=click.Choice([w.name for w in walkthroughs()]),
              help="Run a shipped walkthrough instead of SCRIPT (see --list-examples).")
@click.option("--list-examples", is_flag=True,
              help="List the shipped walkthroughs and exit.")
@click.option("--capacity", type=click.IntRange(min=0),
              help="Initial capacity of the map (overrides the script's `capacity`).")
@click.option("--hash-mode", type=click.Choice(HASH_MODES),
              help="Bucket hashing (overrides the script's `hash-mode`; default flink).")
@click.option("--min-transfer", type=click.IntRange(min=1),
              help="Entries moved per incremental-rehash step (overrides `min-transfer`; "
                   "default 4).")
@click.pass_obj
def trace_command(
    output: Output,
    script: IO[str] | None,
    example: str | None,
    list_examples: bool,
    capacity: int | None,
    hash_mode: HashMode | None,
    min_transfer: int | None,
) -> None:
    """Run SCRIPT (or a shipped walkthrough) and hand the trace to the output."""
    if list_examples:
        output.walkthroughs(walkthroughs())
        return
    text = _script_text(script, example)
    result = run_script(text, capacity=capacity, hash_mode=hash_mode, min_transfer=min_transfer)
    output.trace(result)
