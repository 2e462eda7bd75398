"""The `statectl` CLI through click's CliRunner: options, exit codes, both output modes."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from oracle import REPO_ROOT

import cli.commands.trace as trace_module
from cli import demo
from cli.main import statectl
from cli.output import JsonOutput, Output, TextOutput
from cli.walkthroughs import walkthroughs

WALKTHROUGHS = ["seed000-copy-on-write", "seed000-incremental-rehash", "seed001-chain-copy"]

SMALL_SCRIPT = """\
# two keys in one bucket
capacity 4
hash-mode identity
hash 9 1
put 1 [1]
put 9 x w
snapshot
get 1  # copies 9 and 1
"""

SMALL_SCRIPT_TEXT = """\
# two keys in one bucket
trace: capacity 4, hash mode identity, min transfer 4, pinned hashes 9=1

line 5: put 1 [1]
  state_map_version=0 highest_required_snapshot_version=0 snapshots=none rehash_index=0 size=1
  primary table: 4 buckets
    1: K:1 S:[1] (e0 s0)

line 6: put 9 x w
  state_map_version=0 highest_required_snapshot_version=0 snapshots=none rehash_index=0 size=2
  primary table: 4 buckets
    1: K:9@w S:x (e0 s0) -> K:1 S:[1] (e0 s0)

line 7: snapshot => 1
  state_map_version=1 highest_required_snapshot_version=1 snapshots=S1 rehash_index=0 size=2
  primary table: 4 buckets
    1: K:9@w S:x (e0 s0) [S1] -> K:1 S:[1] (e0 s0) [S1]
  snapshot 1: 4 buckets, 2 entries
    1: K:9@w S:x (e0 s0) -> K:1 S:[1] (e0 s0)

# copies 9 and 1
line 8: get 1 => [1]
  state_map_version=1 highest_required_snapshot_version=1 snapshots=S1 rehash_index=0 size=2
  primary table: 4 buckets
    1: K:9@w S:x (e1 s0) copied -> K:1 S:[1] (e1 s1) copied
  snapshot 1: 4 buckets, 2 entries
    1: K:9@w S:x (e0 s0) [S1 only] -> K:1 S:[1] (e0 s0) [S1 only]
"""


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(statectl, list(args), input=stdin)


def all_commands() -> list[tuple[str, click.Command]]:
    return sorted(statectl.commands.items())


# -- the group ------------------------------------------------------------------------------------


def test_version() -> None:
    """The version, and how Flink's state is decoded here (the compiled decoder, or why not:
    tests/test_speedups.py checks which)."""
    result = run("--version")
    assert result.exit_code == 0
    assert re.fullmatch(rf"statectl, version {re.escape(version('statectl'))} "
                        r"\((compiled decoder|pure Python: [a-zA-Z_ =]+)\)\n", result.stdout), \
        result.stdout


def test_group_help_lists_every_command() -> None:
    result = run("--help")
    assert result.exit_code == 0
    assert "--output [text|json]" in result.stdout
    assert "--verbose" in result.stdout
    for name, _ in all_commands():
        assert name in result.stdout


@pytest.mark.parametrize(("name", "command"), all_commands())
def test_every_command_has_help(name: str, command: click.Command) -> None:
    assert command.help and len(command.help) > 40, f"{name} has no help text"
    assert command.callback is not None
    assert command.callback.__name__.endswith("_command")  # nothing shadows a builtin
    result = run(name, "--help")
    assert result.exit_code == 0
    assert f"Usage: statectl {name}" in result.stdout
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{name} {param.opts} has no help"


def test_unknown_option_is_a_usage_error() -> None:
    result = run("--output", "yaml", "trace", "--list-examples")
    assert result.exit_code == 2
    assert "Invalid value for '--output'" in result.stderr


# -- Output: both implementations complete --------------------------------------------------------


def public_methods(cls: type) -> set[str]:
    return {name for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_output_implementations_are_complete() -> None:
    methods = public_methods(Output)
    assert {"trace", "walkthroughs"} <= methods
    assert methods == set(Output.__abstractmethods__)
    for implementation in (TextOutput, JsonOutput):
        for method in methods:
            assert getattr(implementation, method) is not getattr(Output, method), (
                f"{implementation.__name__} does not implement {method}")
        assert not inspect.isabstract(implementation)
        implementation()


# -- trace: inputs --------------------------------------------------------------------------------


def test_trace_reads_stdin() -> None:
    result = run("trace", "-", stdin="put 1 2\nget 1\n")
    assert result.exit_code == 0, result.output
    assert "line 2: get 1 => 2" in result.stdout
    assert result.stderr == ""


def test_trace_reads_a_file(tmp_path: Path) -> None:
    script = tmp_path / "s.trace"
    script.write_text(SMALL_SCRIPT, encoding="utf-8")
    result = run("trace", str(script))
    assert result.exit_code == 0, result.output
    assert result.stdout == SMALL_SCRIPT_TEXT


def test_text_output_is_exact_and_plain() -> None:
    result = run("trace", "-", stdin=SMALL_SCRIPT)
    assert result.exit_code == 0, result.output
    assert result.stdout == SMALL_SCRIPT_TEXT
    assert "\x1b" not in result.stdout  # no ANSI codes when not a terminal


def test_text_output_draws_the_seed_pictures() -> None:
    result = run("trace", "--example", "seed000-copy-on-write")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b" not in out
    assert "    0: K:42 S:7 (e1 s0) copied -> K:23 S:3 (e1 s1) copied\n" in out
    assert "    0: K:42 S:7 (e0 s0) [S1 only] -> K:23 S:3 (e0 s0) [S1 only]\n" in out
    assert "    0: K:42 S:7 (e0 s0) [S1] -> K:23 S:3 (e0 s0) [S1]\n" in out
    assert "    0: K:42 S:7 (e2 s1) copied\n" in out
    assert ("  state_map_version=1 highest_required_snapshot_version=1 snapshots=S1"
            " rehash_index=0 size=3\n") in out
    # The narration of the walkthrough comes along.
    assert "# get(23): state_version 0 < 1, rule 2" in out


def test_text_output_draws_both_tables_while_rehashing() -> None:
    result = run("trace", "--example", "seed000-incremental-rehash")
    assert result.exit_code == 0, result.output
    step = result.stdout.split(": remove 1\n", 1)[1].split("\n\n", 1)[0]
    assert step == (
        "  state_map_version=0 highest_required_snapshot_version=0 snapshots=none"
        " rehash_index=2 size=4\n"
        "  primary table (old): 4 buckets, buckets 0-1 moved\n"
        "    2: K:6 S:4 (e0 s0)\n"
        "    3: K:3 S:5 (e0 s0)\n"
        "  rehash table (new): 8 buckets\n"
        "    0: K:0 S:2 (e0 s0)\n"
        "    5: K:5 S:7 (e0 s0)")


def test_json_output_is_one_document() -> None:
    result = run("--output", "json", "trace", "-", stdin=SMALL_SCRIPT)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # fails on anything but exactly one document
    assert document["settings"] == {"capacity": 4, "hash_mode": "identity", "min_transfer": 4,
                                    "hash_overrides": [{"key": 9, "hash": 1}]}
    assert document["preamble"] == ["two keys in one bucket"]
    assert [s["source"] for s in document["steps"]] == ["put 1 [1]", "put 9 x w", "snapshot",
                                                        "get 1"]
    last = document["steps"][-1]
    assert last["notes"] == ["copies 9 and 1"]
    assert last["copied"] == [{"key": 9, "namespace": "w"}, {"key": 1, "namespace": None}]
    assert set(last["layout"]) == {
        "size", "primary_table_length", "incremental_rehash_table_length", "rehashing",
        "rehash_index", "state_map_version", "highest_required_snapshot_version",
        "snapshot_versions", "primary_table_size", "incremental_rehash_table_size",
        "threshold", "primary_chains", "incremental_rehash_chains", "snapshots"}
    (chain,) = last["layout"]["primary_chains"]
    assert chain["bucket"] == 1
    assert set(chain["entries"][0]) == {"key", "namespace", "state", "hash", "entry_version",
                                        "state_version", "shared_with", "live"}
    assert chain["entries"][0]["namespace"] == "w"


@pytest.mark.parametrize("name", WALKTHROUGHS)
def test_every_walkthrough_runs_in_both_modes(name: str) -> None:
    text = run("trace", "--example", name)
    assert text.exit_code == 0, text.output
    assert "K:" in text.stdout
    as_json = run("--output", "json", "trace", "--example", name)
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["steps"]


def test_options_override_the_script() -> None:
    result = run("--output", "json", "trace", "--capacity", "16", "--hash-mode", "flink",
                 "--min-transfer", "2", "-", stdin=SMALL_SCRIPT)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["settings"]["capacity"] == 16
    assert document["settings"]["hash_mode"] == "flink"
    assert document["settings"]["min_transfer"] == 2
    assert document["steps"][0]["layout"]["primary_table_length"] == 16


def test_list_examples() -> None:
    result = run("trace", "--list-examples")
    assert result.exit_code == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == WALKTHROUGHS
    assert "Seed 000, part 1" in result.stdout
    as_json = json.loads(run("--output", "json", "trace", "--list-examples").stdout)
    assert [w["name"] for w in as_json["walkthroughs"]] == WALKTHROUGHS
    assert all(w["title"] for w in as_json["walkthroughs"])
    assert [w.name for w in walkthroughs()] == WALKTHROUGHS


# -- trace: errors and exit codes -----------------------------------------------------------------


def test_malformed_script_is_one_error_line_and_exit_3() -> None:
    result = run("trace", "-", stdin="put 1 2\nfrobnicate 3\n")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.startswith("Error: line 2: unknown command 'frobnicate'")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ("put 1\n", "Error: line 1: put takes 2 or 3 arguments, got 1 (usage: put K V [NS])\n"),
        ("release 1\n", "Error: line 1: no snapshot has version 1 (taken so far: none)\n"),
        ("snapshot\nrelease 1\nread 1\n", "Error: line 3: snapshot 1 is already released\n"),
        ("put 1 2\ncapacity 4\n",
         "Error: line 2: directive 'capacity' must come before the first operation\n"),
        ("hash-mode identity\nput a 1\n",
         "Error: line 2: hash mode 'identity' needs int keys, got 'a'\n"),
        ("put [1 2\n", "Error: line 1: bad value '[1 2': Expecting ',' delimiter at column 8\n"),
    ],
)
def test_script_errors_exactly(script: str, error: str) -> None:
    result = run("trace", "-", stdin=script)
    assert (result.exit_code, result.stderr) == (3, error)


def test_verbose_shows_the_traceback_of_a_domain_error() -> None:
    result = run("--verbose", "trace", "-", stdin="frobnicate\n")
    assert result.exit_code == 3
    assert "Traceback" in result.stderr
    assert "TraceScriptError" in result.stderr
    assert result.stderr.endswith("Error: line 1: unknown command 'frobnicate' (known: put, get,"
                                  " get_append, contains, remove, put_and_get_old,"
                                  " remove_and_get_old, transform, snapshot, release, read,"
                                  " capacity, hash-mode, min-transfer, hash)\n")


def test_not_utf8_is_a_domain_error() -> None:
    result = CliRunner().invoke(statectl, ["trace", "-"], input=b"\xff\xfe put")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: <stdin> is not UTF-8 text")


def test_missing_file_is_a_domain_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.trace"
    result = run("trace", str(missing))
    assert result.exit_code == 3  # a missing input path, as in every command (docs/cli.md)
    assert result.stderr == f"Error: {missing} does not exist; give a script file (- reads " \
        f"stdin) or --example NAME\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["trace"], "give a SCRIPT (a path, or - for stdin), --example NAME or --list-examples"),
        (["trace", "-", "--example", "seed001-chain-copy"], "give either SCRIPT or --example"),
        (["trace", "--example", "nope"], "'nope' is not one of"),
        (["trace", "--capacity", "-1", "-"], "Invalid value for '--capacity'"),
        (["trace", "--hash-mode", "md5", "-"], "Invalid value for '--hash-mode'"),
        (["trace", "--min-transfer", "0", "-"], "Invalid value for '--min-transfer'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = run(*args, stdin="")
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(trace_module, "run_script", broken)
    result = run("trace", "-", stdin="put 1 2\n")
    assert isinstance(result.exception, RuntimeError)  # not turned into "Error: ..."
    assert "Error:" not in result.stderr


def test_entry_point_in_a_real_process() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "cli.main", "trace", "-"], input="put 1\n", cwd=REPO_ROOT,
        capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 3
    assert completed.stderr == ("Error: line 1: put takes 2 or 3 arguments, got 1"
                                " (usage: put K V [NS])\n")
    assert completed.stdout == ""


# -- demo -----------------------------------------------------------------------------------------


def test_demo_runs_every_walkthrough(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo writes demo/ in the working directory
    assert demo.main() == 0
    out = capsys.readouterr().out
    for name in WALKTHROUGHS:
        assert f"statectl trace --example {name}" in out
    assert "processed 10,000 of 10,000 records" in out  # day 1
    assert "processed 10,000 of 20,000 records (resumed from checkpoint 6)" in out  # day 2
    assert "statectl inspect" in out and "window_count_ts" in out
    assert "traced 3 walkthroughs" in out
