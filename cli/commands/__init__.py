"""The ``statectl`` subcommands, one module each; :data:`COMMANDS` is what the group registers."""

from __future__ import annotations

import click

from cli.commands.build import build_command
from cli.commands.inspect import inspect_command
from cli.commands.snapshot import snapshot_command
from cli.commands.trace import trace_command

__all__ = ["COMMANDS", "build_command", "inspect_command", "snapshot_command", "trace_command"]

#: Every subcommand, registered by :mod:`cli.main` under its own name.
COMMANDS: tuple[click.Command, ...] = (build_command, inspect_command, snapshot_command,
                                       trace_command)
