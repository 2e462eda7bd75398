"""The README's and the reference pages' python examples run as written; the README opens with
the two set-up commands and has an example of every command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
DOCS = README.parent / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)


def test_readme_has_a_python_example() -> None:
    assert python_blocks(README), "the README has no python example"


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)],
                         ids=lambda p: p.relative_to(README.parent).as_posix())
def test_python_examples_run(page: Path) -> None:
    for block in python_blocks(page):
        exec(compile(block, str(page), "exec"), {})


def test_readme_opens_with_the_two_setup_commands() -> None:
    head = README.read_text().split("\n## ", 1)[0]
    assert "make demo" in head and "make test" in head


def test_every_command_has_a_readme_example() -> None:
    from cli.main import statectl

    text = README.read_text()
    for name in statectl.commands:
        assert re.search(rf"statectl (--output json )?{name}\b", text), name
