"""The ``statectl`` command group: global options, subcommands, and errors at the boundary.

Exit codes (documented in the README): 0 ok, 1 findings (verify problems, diff differences),
2 usage (click), 3 domain error. A :class:`~statecore.errors.StatectlError` becomes one line
``Error: <message>`` on stderr and exit code 3, with its traceback only under ``--verbose``;
any other exception is a bug and keeps its traceback.

Starting is cheap (issue 45): importing this module, ``--version`` and ``--help`` load click
and nothing of statectl's (no rich, pyarrow or formats; ``tests/test_startup.py`` pins it).
A subcommand's module is imported when it is used (:class:`LazyCommands`), the group's help
lists the commands from :data:`COMMANDS`, and what the global options need (the output, the
uids) is imported once a subcommand runs.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TextIO

import click

from cli import interrupt
from cli.meta import ALLOW_PICKLE, OPENED, OPERATOR_NAMES, PARTIAL

if TYPE_CHECKING:
    from cli.output import Output

__all__ = ["COMMANDS", "EXIT_DOMAIN_ERROR", "LazyCommands", "main", "statectl"]

#: Exit code of a :class:`StatectlError` (bad, corrupt or unsupported input).
EXIT_DOMAIN_ERROR = 3

#: Every subcommand: its name, where it is (``module:attribute``) and its short help, as
#: ``statectl --help`` lists it (the command's ``get_short_help_str``: the first sentence of its
#: docstring; ``tests/test_startup.py`` checks that they agree and that every module of
#: :mod:`cli.commands` is here).
COMMANDS: dict[str, tuple[str, str]] = {
    "browse": ("cli.commands.browse:browse_command",
               "Browse a snapshot in the terminal: operators, states, entries, one key, key "
               "groups."),
    "build": ("cli.commands.build:build_command",
              "Aggregate INPUTS (Parquet, CSV or JSON Lines) into keyed state, with "
              "checkpoints."),
    "compat": ("cli.commands.compat:compat_command",
               "Tell whether the job that wrote NEW restores OLD, without the job or a JVM."),
    "convert": ("cli.commands.convert:convert_command",
                "Write a checkpoint as a Flink canonical savepoint that Flink restores."),
    "diff": ("cli.commands.diff:diff_command",
             "Compare two checkpoints' state; exit 0 when equal, 1 when they differ."),
    "export": ("cli.commands.export:export_command",
               "Write each state of a checkpoint as one flat table."),
    "history": ("cli.commands.history:history_command",
                "Show the state of key K in every snapshot, oldest first, each change marked."),
    "inspect": ("cli.commands.inspect:inspect_command",
                "Show a checkpoint: operators, their states with entries and bytes, and "
                "subtasks."),
    "migrate": ("cli.commands.migrate:migrate_command",
                "Rewrite OLD as a savepoint that the job which wrote NEW restores."),
    "query": ("cli.commands.query:query_command",
              "Run SQL over the state of snapshots: every state is a table."),
    "rescale": ("cli.commands.rescale:rescale_command",
                "Redistribute a checkpoint's state to a new parallelism, as Flink would on "
                "restore."),
    "snapshot": ("cli.commands.snapshot:snapshot_command",
                 "Take savepoints of a state directory, list, release and prune its "
                 "checkpoints."),
    "trace": ("cli.commands.trace:trace_command",
              "Run a script of map operations and draw the buckets, chains and versions after "
              "each step."),
    "verify": ("cli.commands.verify:verify_command",
               "Check a checkpoint thoroughly; exit 0 when clean, 1 when problems are found."),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported from its module the first time it is used.

    The names are known without importing anything (iterating, ``in``, ``len``); getting a
    command imports its module. Commands added (``add_command``) are kept as given.
    """

    def __init__(self, table: Mapping[str, tuple[str, str]]) -> None:
        self._where = {name: where for name, (where, _summary) in table.items()}
        self._loaded: dict[str, click.Command] = {}

    def loaded(self, name: str) -> click.Command | None:
        """The command ``name`` if it is imported already (``None``: not yet, or unknown)."""
        return self._loaded.get(name)

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            module, _, attribute = self._where[name].partition(":")  # KeyError: unknown
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self._where[name]} is not a click command")
            self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._where), **dict.fromkeys(self._loaded)})

    def __len__(self) -> int:
        return len(self._where.keys() | self._loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._where or name in self._loaded


class OneLineUsageError(click.UsageError):
    """A usage error shown as one line ``Error: ...`` (exit code 2), as every other error.

    Click prints the usage and a ``Try ... --help`` hint before the message; a script reading
    stderr gets one line per error from statectl, whatever went wrong.
    """

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=True)


def one_line(exc: click.UsageError) -> click.UsageError:
    """``exc`` as a :class:`OneLineUsageError` (``statectl`` alone still shows its help)."""
    if isinstance(exc, OneLineUsageError | click.exceptions.NoArgsIsHelpError):
        return exc
    return OneLineUsageError(exc.format_message(), exc.ctx)


def _domain_error(exc: Exception) -> str | None:
    """The ``Error:`` line's message if ``exc`` is statectl's or the environment's, else ``None``.

    A :class:`~statecore.errors.StatectlError` says what went wrong itself; so does memory
    running out (a ``MemoryError``, under a limit; the OOM killer gives no chance); an
    ``OSError`` that reached here unexplained is told with the store's error code
    (:func:`formats.storage.filesystems.explain`). Imported here, when it happens.
    """
    from statecore.errors import StatectlError

    if isinstance(exc, StatectlError):
        return str(exc)
    if isinstance(exc, MemoryError):  # pyarrow's ArrowMemoryError is one too
        return (f"out of memory ({exc or 'no detail'}): the command needs more memory than "
                "this process may take (docs/cli.md, \"Memory\": most commands hold a few runs "
                "of key groups at a time; rescale --max-parallelism a Flink snapshot decoded "
                "whole, query the states it reads as tables); "
                "raise the limit, or run the command with --engine spark")
    if isinstance(exc, OSError):
        from formats.storage.filesystems import explain

        return explain(exc)
    return None


class StatectlGroup(click.Group):
    """A click group that turns :class:`StatectlError` into ``Error: ...`` and exit code 3.

    An ``OSError`` that reached here unexplained (a disk or object store failing where no
    layer below said what it was doing) is the environment, not a bug: it becomes the same one
    line, with the store's error code (:func:`formats.storage.filesystems.explain`). Usage errors
    (exit code 2) are one line too (:class:`OneLineUsageError`).

    Its commands are :class:`LazyCommands` (click's lazy group: ``list_commands`` names them,
    ``get_command`` imports one); its help lists them with their short help from
    :data:`COMMANDS`, importing none.
    """

    commands: LazyCommands

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(COMMANDS)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, as click lists them, without importing any."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.loaded(name)
            if command is None:  # as click shortens it: a command of the summary as its help
                command = click.Command(name, help=COMMANDS[name][1])
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in rows])

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise one_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                result = super().invoke(ctx)
            except click.exceptions.Exit:
                _report_undecodable(ctx)  # findings (exit 1): reported too, damage wins
                raise
            _report_undecodable(ctx)
            return result
        except click.UsageError as exc:
            raise one_line(exc) from exc
        except (KeyboardInterrupt, click.exceptions.Abort):
            # what the command kept, if it says (build: its latest complete checkpoint)
            interrupt.report(lambda line: click.echo(line, err=True))
            ctx.exit(interrupt.EXIT_INTERRUPTED)
        except Exception as exc:
            message = _domain_error(exc)
            if message is None:
                raise
            if ctx.params.get("verbose"):
                traceback.print_exception(exc, file=sys.stderr)
            click.echo(f"Error: {message}", err=True)
            ctx.exit(EXIT_DOMAIN_ERROR)


def _output(output_format: str, quiet: bool) -> Output:
    """The output of ``--output`` (rich text, or JSON), imported when a command runs."""
    from cli.output import JsonOutput, TextOutput

    return JsonOutput() if output_format == "json" else TextOutput(quiet=quiet)


def _decoder() -> str:
    """How Flink's keyed state is decoded here, as ``--version`` says.

    ``compiled decoder`` where ``formats/flink/read/cdecoder.c`` was built (``setup.py``) and
    not switched off (``STATECTL_PURE_PYTHON=1``), else ``pure Python``. Found by its file,
    beside this package, so that ``--version`` imports nothing of ``formats`` (issue 45).
    """
    import os
    from importlib.machinery import EXTENSION_SUFFIXES

    if os.environ.get("STATECTL_PURE_PYTHON", "") not in ("", "0"):
        return "pure Python: STATECTL_PURE_PYTHON is set"
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "formats", "flink", "read")
    built = any(os.path.exists(os.path.join(folder, "cdecoder" + suffix))
                for suffix in EXTENSION_SUFFIXES)
    return "compiled decoder" if built else "pure Python: the compiled decoder is not built"


@click.group(cls=StatectlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--output", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: drawings for people; json: one JSON document on stdout for scripts.")
@click.option("--verbose", is_flag=True, help="Show the traceback of errors too.")
@click.option("--quiet", "-q", is_flag=True,
              help="Print nothing but errors (no progress, no text results): the exit code "
                   "says how it went. JSON mode still prints its document.")
@click.option("--allow-pickle", is_flag=True,
              help="UNSAFE: unpickle the pickled Python values of PyFlink state "
                   "(Types.PICKLED_BYTE_ARRAY) in Flink snapshots and show each as its "
                   "repr(). Unpickling runs code the snapshot carries: only for snapshots "
                   "you trust. Without it they are bytes.")
@click.option("--partial", is_flag=True,
              help="Accept partial results from a damaged snapshot: what is intact is shown "
                   "and the exit code is 0 (without it: 3). Values statectl has no decoder "
                   "for never change the exit code; both are reported on stderr.")
@click.option("--uid", "uids", multiple=True, metavar="UID",
              help="A uid of the job (repeatable). Flink 1.x snapshots store no uids, only "
                   "OperatorIDs, which Flink derives from the uids: the operator whose ID this "
                   "uid hashes to is shown, and written, with it.")
@click.option("--uid-hash", "uid_hashes", multiple=True, metavar="HEX=UID",
              help="Name the operator with this OperatorID (32 hex digits, as set with Flink's "
                   "setUidHash) UID (repeatable).")
@click.option("--uid-file", type=click.File("r", encoding="utf-8"),
              help="A file of uids and HEX=UID lines, one per line (# comments).")
@click.version_option(package_name="statectl", prog_name="statectl",
                      message=f"%(prog)s, version %(version)s ({_decoder()})")
@click.pass_context
def statectl(ctx: click.Context, output_format: str, verbose: bool, quiet: bool,
             allow_pickle: bool, partial: bool, uids: tuple[str, ...],
             uid_hashes: tuple[str, ...], uid_file: TextIO | None) -> None:
    """See the state of stream processors, built on Flink's heap state backend.

    Exit codes: 0 ok, 1 findings (verify problems, diff differences), 2 usage error,
    3 bad or unsupported input, 130 interrupted (Ctrl-C).
    """
    # Runs once the subcommand is known and its module imported (which imports cli.output),
    # never for --version or --help: the output built here costs no import more then.
    ctx.obj = _output(output_format, quiet)
    ctx.meta[ALLOW_PICKLE] = allow_pickle
    ctx.meta[PARTIAL] = partial
    if uids or uid_hashes or uid_file is not None:
        from formats.model.operator_names import OperatorNames

        ctx.meta[OPERATOR_NAMES] = OperatorNames.parse(
            uids, uid_hashes, uid_file.read().splitlines() if uid_file is not None else ())


def _report_undecodable(ctx: click.Context) -> None:
    """One line on stderr for what the command's checkpoints could not decode.

    Damaged parts (not a missing decoder) end the command with exit code 3 and that line as
    its ``Error:`` unless ``--partial``; unsupported serializers leave the exit code as it is.
    """
    if not (ctx.meta.get(OPERATOR_NAMES) or ctx.meta.get(OPENED)):
        return  # nothing named, nothing read (trace): cli.params and formats stay unloaded
    from cli.params import names_report, plan_report, undecodable_report

    names = names_report(ctx.meta)
    if names is not None:
        click.echo(f"statectl: {names}", err=True)
    planned = plan_report(ctx.meta)
    if planned is not None:
        click.echo(f"statectl: {planned}", err=True)
    report = undecodable_report(ctx.meta)
    if report is None:
        return
    line, damage = report
    if damage:  # one line, as every error: the damage first, then what was not decoded
        from statecore.errors import CorruptCheckpointError

        raise CorruptCheckpointError(f"{damage}; {line}")
    click.echo(f"statectl: {line}", err=True)


#: The cyclic garbage collector's thresholds while statectl runs (``gc.set_threshold``): a
#: young collection every 100,000 allocations instead of 700, an old one far more rarely.
#: Decoding a snapshot allocates millions of tuples, lists and dicts that live on (entries,
#: none in a cycle); with Python's defaults the collector walked them again and again: half
#: of an export's time (one process, 6M entries: 13.7 s -> 6.5 s compiled, 23.1 s -> 15.4 s
#: pure Python). Cycles are still collected, later; the command's memory is bounded as before.
GC_THRESHOLDS = (100_000, 50, 100)


def main() -> None:
    """Entry point of the ``statectl`` script (``pyproject.toml``)."""
    import gc

    gc.set_threshold(*GC_THRESHOLDS)
    interrupt.install_watchdog()
    statectl(prog_name="statectl")


if __name__ == "__main__":
    main()
