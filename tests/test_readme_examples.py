"""A new user following the README and the reference pages: every command example runs as
written, outputs as shown.

The pages are ``README.md`` and every ``docs/*.md`` (:func:`pages`). Each page is
self-contained: its examples run in a scratch directory of their own, laid out like a fresh
clone (``docs/``, ``sample_checkpoints/`` and the virtualenv as ``.venv``, with ``../shared``
beside it), so a page may use what its own earlier examples wrote (the README's ``tour/``) but
never what another page wrote. Within a page, every ```console block's ``$ `` lines (with ``\\``
continuations) run in order with bash, and every ```sh block runs as one script. ``statectl``
and ``python`` are the virtualenv's, importing this checkout's code (``PYTHONPATH``). Each
command must exit 0, or the code its line declares with a trailing ``# exit N``. The lines shown
under a command are an excerpt of its output: each must appear in it, compared with digits and
runs of spaces collapsed (sizes, times and ids vary between runs); lines with ``…`` and table
borders are not compared.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from oracle import REPO_ROOT

from cli.main import statectl

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
_BORDER = re.compile(r"^[\s┏┳┓┡╇┩└┴┘━─╭╮╰╯]*$")


def pages() -> list[Path]:
    """The documentation: the README first, then every reference page in ``docs/`` by name."""
    return [README, *sorted(DOCS.glob("*.md"))]


def page_id(page: Path) -> str:
    return page.relative_to(REPO_ROOT).as_posix()


def documentation() -> str:
    """The text of every page, where commands and options must be documented."""
    return "\n".join(page.read_text() for page in pages())


@dataclass
class Example:
    command: str
    excerpt: list[str]
    exit_code: int
    script: bool = False


def examples(text: str) -> list[Example]:
    """A page's runnable examples, in order."""
    found: list[Example] = []
    for kind, body in re.findall(r"```(console|sh)\n(.*?)```", text, flags=re.DOTALL):
        if kind == "sh":
            found.append(Example(body, [], 0, script=True))
            continue
        lines = body.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            assert line.startswith("$ "), f"console block line outside a command: {line!r}"
            command = line[2:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            i += 1
            excerpt = []
            while i < len(lines) and not lines[i].startswith("$ "):
                excerpt.append(lines[i])
                i += 1
            declared = re.search(r"#\s*exit (\d+)\s*$", command)
            found.append(Example(command, excerpt, int(declared.group(1)) if declared else 0))
    return found


def normalize(line: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "0", line)).strip()


def compared(excerpt: list[str]) -> list[str]:
    return [line for line in excerpt
            if line.strip() and "…" not in line and not _BORDER.match(line)]


def fresh_clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch checkout (and the environment to run in it), with ``../shared`` beside it."""
    # ``../shared`` beside the checkout, as in CI: the Flink examples read its fixtures
    (tmp_path / "shared").symlink_to(REPO_ROOT.parent / "shared")
    checkout = tmp_path / "statectl"
    checkout.mkdir()
    for name in ("docs", "sample_checkpoints"):
        (checkout / name).symlink_to(REPO_ROOT / name)
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # this checkout's code, whatever the virtualenv has installed (an editable install may
    # point at another worktree)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return checkout, env


def run_example(example: Example, cwd: Path, env: dict[str, str], page: str) -> None:
    result = subprocess.run(["bash", "-c", example.command], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    shown = f"$ {example.command}\n{result.stdout}{result.stderr}"
    assert result.returncode == example.exit_code, f"{page}:\n{shown}"
    output = {normalize(line) for line in (result.stdout + result.stderr).splitlines()}
    joined = "\n".join(output)
    for line in compared(example.excerpt):
        assert normalize(line) in output or normalize(line) in joined, (
            f"{page} shows {line!r}, not in the output of\n{shown}")


def test_every_command_has_a_runnable_example() -> None:
    commands = " ".join(e.command for page in pages() for e in examples(page.read_text()))
    for name in statectl.commands:
        assert re.search(rf"statectl (\S+ )*{name}\b", commands), f"no runnable {name} example"


def test_there_are_at_least_30_examples() -> None:
    assert sum(len(examples(page.read_text())) for page in pages()) >= 30


def test_the_readme_links_every_reference_page() -> None:
    text = README.read_text()
    for page in pages()[1:]:
        assert f"](docs/{page.name})" in text, f"the README does not link docs/{page.name}"


def test_excerpts_are_checked_loosely_but_not_vacuously() -> None:
    assert normalize("│  7 │ 36.9 KiB │") == normalize("│ 12 │  1.5 KiB │")
    assert normalize("clean: no problems") != normalize("1 problems")
    parsed = examples("```console\n$ a \\\n  b  # exit 1\nout 1\n…\n┏━━┓\n$ c\n```\n")
    assert [(e.command, compared(e.excerpt), e.exit_code) for e in parsed] == [
        ("a  b  # exit 1", ["out 1"], 1), ("c", [], 0)]


@pytest.mark.parametrize("page", [p for p in pages() if examples(p.read_text())], ids=page_id)
def test_every_example_runs_as_written(page: Path, tmp_path: Path) -> None:
    checkout, env = fresh_clone(tmp_path)
    for example in examples(page.read_text()):
        run_example(example, checkout, env, page_id(page))


def all_commands(group: click.Group = statectl, prefix: str = "") -> list[tuple[str,
                                                                             click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        out.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            out += all_commands(command, f"{prefix}{name} ")
    return out


@pytest.mark.parametrize(("name", "command"), all_commands())
def test_every_command_and_option_has_help_and_is_documented(
        name: str, command: click.Command) -> None:
    text = documentation()
    assert command.help and len(command.help) > 30, f"{name} has no help"
    assert f"statectl {name}" in text or name.split()[-1] in text, name
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{name} {param.opts} has no help"
            longest = max(param.opts, key=len)
            assert longest in text, f"{name} {longest} is not in the README or docs/"


def test_global_options_have_help_and_are_documented() -> None:
    text = documentation()
    for param in statectl.params:
        if isinstance(param, click.Option) and "--help" not in param.opts:
            assert param.help or "--version" in param.opts, param.opts
            assert max(param.opts, key=len) in text, param.opts
