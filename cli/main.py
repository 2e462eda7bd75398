"""The ``statectl`` command group: global options, subcommands, and errors at the boundary.

Exit codes (documented in the README): 0 ok, 1 findings (verify problems, diff differences),
2 usage (click), 3 domain error. A :class:`~statecore.errors.StatectlError` becomes one line
``Error: <message>`` on stderr and exit code 3, with its traceback only under ``--verbose``;
any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any, TextIO

import click

from cli import interrupt
from cli.commands import COMMANDS
from cli.output import JsonOutput, Output, TextOutput
from cli.params import (
    ALLOW_PICKLE,
    OPERATOR_NAMES,
    PARTIAL,
    names_report,
    undecodable_report,
)
from formats.model.operator_names import OperatorNames
from formats.storage.filesystems import explain
from statecore.errors import CorruptCheckpointError, StatectlError

__all__ = ["EXIT_DOMAIN_ERROR", "main", "statectl"]

#: Exit code of a :class:`StatectlError` (bad, corrupt or unsupported input).
EXIT_DOMAIN_ERROR = 3


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


class StatectlGroup(click.Group):
    """A click group that turns :class:`StatectlError` into ``Error: ...`` and exit code 3.

    An ``OSError`` that reached here unexplained (a disk or object store failing where no
    layer below said what it was doing) is the environment, not a bug: it becomes the same one
    line, with the store's error code (:func:`formats.storage.filesystems.explain`). Usage errors
    (exit code 2) are one line too (:class:`OneLineUsageError`).
    """

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
        except (StatectlError, OSError) as exc:
            if ctx.params.get("verbose"):
                traceback.print_exception(exc, file=sys.stderr)
            message = str(exc) if isinstance(exc, StatectlError) else explain(exc)
            click.echo(f"Error: {message}", err=True)
            ctx.exit(EXIT_DOMAIN_ERROR)


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
@click.version_option(package_name="statectl", prog_name="statectl")
@click.pass_context
def statectl(ctx: click.Context, output_format: str, verbose: bool, quiet: bool,
             allow_pickle: bool, partial: bool, uids: tuple[str, ...],
             uid_hashes: tuple[str, ...], uid_file: TextIO | None) -> None:
    """See the state of stream processors, built on Flink's heap state backend.

    Exit codes: 0 ok, 1 findings (verify problems, diff differences), 2 usage error,
    3 bad or unsupported input, 130 interrupted (Ctrl-C).
    """
    output: Output = JsonOutput() if output_format == "json" else TextOutput(quiet=quiet)
    ctx.obj = output
    ctx.meta[ALLOW_PICKLE] = allow_pickle
    ctx.meta[PARTIAL] = partial
    ctx.meta[OPERATOR_NAMES] = OperatorNames.parse(
        uids, uid_hashes, uid_file.read().splitlines() if uid_file is not None else ())


def _report_undecodable(ctx: click.Context) -> None:
    """One line on stderr for what the command's checkpoints could not decode.

    Damaged parts (not a missing decoder) end the command with exit code 3 and that line as
    its ``Error:`` unless ``--partial``; unsupported serializers leave the exit code as it is.
    """
    names = names_report(ctx.meta)
    if names is not None:
        click.echo(f"statectl: {names}", err=True)
    report = undecodable_report(ctx.meta)
    if report is None:
        return
    line, damage = report
    if damage:  # one line, as every error: the damage first, then what was not decoded
        raise CorruptCheckpointError(f"{damage}; {line}")
    click.echo(f"statectl: {line}", err=True)


for _command in COMMANDS:
    statectl.add_command(_command)


def main() -> None:
    """Entry point of the ``statectl`` script (``pyproject.toml``)."""
    interrupt.install_watchdog()
    statectl(prog_name="statectl")


if __name__ == "__main__":
    main()
