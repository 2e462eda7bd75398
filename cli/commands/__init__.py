"""The ``statectl`` subcommands, one module each; :data:`COMMANDS` is what the group registers."""

from __future__ import annotations

import click

from cli.commands.browse import browse_command
from cli.commands.build import build_command
from cli.commands.compat import compat_command
from cli.commands.convert import convert_command
from cli.commands.diff import diff_command
from cli.commands.export import export_command
from cli.commands.history import history_command
from cli.commands.inspect import inspect_command
from cli.commands.migrate import migrate_command
from cli.commands.query import query_command
from cli.commands.rescale import rescale_command
from cli.commands.snapshot import snapshot_command
from cli.commands.trace import trace_command
from cli.commands.verify import verify_command

__all__ = [
    "COMMANDS",
    "browse_command",
    "build_command",
    "compat_command",
    "convert_command",
    "diff_command",
    "export_command",
    "history_command",
    "inspect_command",
    "migrate_command",
    "query_command",
    "rescale_command",
    "snapshot_command",
    "trace_command",
    "verify_command",
]

#: Every subcommand, registered by :mod:`cli.main` under its own name.
COMMANDS: tuple[click.Command, ...] = (build_command, inspect_command, snapshot_command,
                                       rescale_command, convert_command, verify_command,
                                       diff_command, export_command, query_command,
                                       history_command, browse_command, trace_command,
                                       compat_command, migrate_command)
