"""Start at once (issue 45, item 3): ``statectl --version`` and ``--help`` load click, not statectl.

Importing :mod:`cli.main`, ``--version``, ``--help`` (and ``statectl`` alone) load none of the
heavy packages (pyarrow, numpy, DuckDB, Textual, pyspark, rich) nor ``formats``, ``statecore``,
the output or any command: each is imported where a command needs it. ``statectl inspect``
loads only the reading side: of a statectl checkpoint nothing of Flink's codec, of a Flink
savepoint not its writer nor its restore comparisons, and neither the operations that write
(build, export, migrate) nor DuckDB or Textual; its summary converts no values, so neither
``pyarrow.compute``, ``pyarrow.parquet`` nor pandas (which ``pa.array`` of Python lists imports
where it is installed), nor the state backend, RocksDB's reader or the S3 client. Checked in a
fresh interpreter, by the modules loaded. The group's help lists the commands from the table in
:mod:`cli.main`, checked here against each command's own short help, so it cannot drift.
Timings are the benchmark's (``bench/bench_startup.py``), not asserted here.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from oracle import REPO_ROOT

import cli.commands
from cli import interrupt
from cli.main import COMMANDS, LazyCommands, StatectlGroup, statectl

#: Top-level packages a start must not load.
HEAVY = ("pyarrow", "numpy", "pandas", "duckdb", "textual", "pyspark", "rich", "formats",
         "statecore")
#: statectl's own modules a start must not load.
LATE = ("cli.output", "cli.params", "cli.views", "cli.commands.", "cli.browse", "cli.values")

#: Runs ``statectl`` with the arguments given (none: only imports cli.main), then writes the
#: modules loaded as JSON to stderr's last line.
START = """
import json, sys
arguments = sys.argv[1:]
import cli.main
code = None
if arguments:
    sys.argv = ["statectl", *arguments]
    try:
        cli.main.main()
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def start(*arguments: str) -> tuple[int | None, str, list[str]]:
    """``statectl ARGUMENTS`` in a fresh interpreter: exit code, stdout and modules loaded."""
    done = subprocess.run([sys.executable, "-c", START, *arguments], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stderr.strip(), done
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], done.stdout, report["modules"]


def loaded_too_early(modules: list[str]) -> list[str]:
    return [m for m in modules
            if m.partition(".")[0] in HEAVY or m.startswith(LATE) or m == "cli.views"]


@pytest.mark.parametrize("arguments", [(), ("--version",), ("--help",), ("-h",), ("--output",
                                       "json", "--help")], ids=str)
def test_a_start_loads_none_of_what_commands_need(arguments: tuple[str, ...]) -> None:
    code, out, modules = start(*arguments)
    assert loaded_too_early(modules) == []
    assert code in (None, 0)
    if "--version" in arguments:
        assert out.startswith("statectl, version ")
    elif arguments:
        assert "Commands:" in out and "inspect" in out


def test_a_missing_command_is_a_usage_error_without_loading_commands() -> None:
    code, _out, modules = start("--quiet")
    assert loaded_too_early(modules) == []
    assert code == 2


def test_a_command_loads_its_own_module_only() -> None:
    code, out, modules = start("inspect", "--help")
    assert code == 0
    assert out.startswith("Usage: statectl inspect [OPTIONS] PATH")
    commands = sorted(m for m in modules if m.startswith("cli.commands."))
    assert commands == ["cli.commands.inspect"]
    assert not any(m.partition(".")[0] in ("duckdb", "textual", "pyspark") for m in modules)


#: What ``statectl inspect`` of any snapshot must not load (issue 45): writing and querying,
#: and, for its summary, what converts or filters values, the state backend, RocksDB's reader
#: (the savepoints here are canonical) and the S3 client.
NOT_FOR_INSPECT = ("formats.flink.write", "formats.flink.compat", "formats.ops.build",
                   "formats.ops.export", "formats.ops.migrate", "formats.inputs", "duckdb",
                   "textual", "rich.progress", "pyspark",
                   "pandas", "pyarrow.compute", "pyarrow.parquet", "formats.model.key_hash",
                   "formats.ops.row_sizes", "formats.ops.rescale", "statecore.keyed_backend",
                   "statecore.copy_on_write_state_map", "statecore.rescale_plan",
                   "formats.flink.read.rocksdb", "http.client")


def loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``prefixes`` or inside one."""
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_inspect_of_a_statectl_checkpoint_loads_nothing_of_flink() -> None:
    code, out, modules = start("inspect", "sample_checkpoints/v1/keyed-all-kinds-p2")
    assert code in (None, 0), out
    assert "keyed-all-kinds-p2" in out
    assert loaded(modules, NOT_FOR_INSPECT) == []
    assert [m for m in modules if m.startswith("formats.flink.")] == []  # the package: a name
    assert "formats.open" in modules and "formats.statectl.reader" in modules


def test_inspect_of_a_flink_savepoint_loads_its_reader_only(flink_fixtures_dir: Path) -> None:
    found = sorted((flink_fixtures_dir / "java-mp128" / "savepoints" / "p2" / "canonical")
                   .glob("savepoint-*"))
    assert found, flink_fixtures_dir
    code, out, modules = start("inspect", str(found[0]))
    assert code in (None, 0), out
    assert loaded(modules, NOT_FOR_INSPECT) == []
    assert "formats.flink.checkpoint" in modules


def test_trace_runs_without_formats() -> None:
    code, out, modules = start("trace", "--list-examples")
    assert code in (None, 0), out
    assert not [m for m in modules if m.partition(".")[0] in ("formats", "pyarrow", "numpy")]


def test_every_module_of_cli_commands_is_registered() -> None:
    found = {info.name for info in pkgutil.iter_modules(cli.commands.__path__)}
    registered = {where.partition(":")[0] for where, _ in COMMANDS.values()}
    assert registered == {f"cli.commands.{name}" for name in found}
    assert sorted(statectl.commands) == sorted(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_is_each_commands_own_short_help(name: str) -> None:
    where, summary = COMMANDS[name]
    module, _, attribute = where.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command)
    assert command.name == name
    assert statectl.commands[name] is command
    assert not command.hidden and not command.deprecated
    assert summary == command.get_short_help_str(limit=10**6)


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_the_help_lists_the_commands_as_click_would(width: int) -> None:
    """The lazy listing equals click's own, which imports every command (at any width)."""
    lazy = StatectlGroup(name="statectl")
    assert lazy.commands.loaded("inspect") is None
    ctx = click.Context(lazy, info_name="statectl")
    listed, expected = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
    lazy.format_commands(ctx, listed)
    click.Group.format_commands(statectl, click.Context(statectl, info_name="statectl"),
                                expected)
    assert listed.getvalue() == expected.getvalue()
    assert listed.getvalue().count("\n") == len(COMMANDS) + 1


def test_lazy_commands_behave_as_a_mapping() -> None:
    commands = LazyCommands({"trace": ("cli.commands.trace:trace_command", "Run.")})
    assert list(commands) == ["trace"] and len(commands) == 1 and "trace" in commands
    assert commands.loaded("trace") is None
    assert commands["trace"].name == "trace" and commands.loaded("trace") is not None
    extra = click.Command("extra")
    commands["extra"] = extra
    assert list(commands) == ["trace", "extra"] and commands.get("extra") is extra
    del commands["trace"]
    assert list(commands) == ["extra"] and commands.get("trace") is None
    with pytest.raises(KeyError):
        commands["nothing"]


def test_the_interrupt_stops_the_writers_of_the_module_it_names() -> None:
    """Ctrl-C kills the checkpoint writers of a module it does not import (interrupt.WRITERS)."""
    writers = importlib.import_module(interrupt.WRITERS)
    assert callable(writers.kill_writers)
