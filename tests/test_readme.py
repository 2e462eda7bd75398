"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_opens_with_the_two_setup_commands() -> None:
    head = README.read_text().split("\n## ", 1)[0]
    assert "make demo" in head and "make test" in head


def test_every_command_has_a_readme_example() -> None:
    from cli.main import statectl

    text = README.read_text()
    for name in statectl.commands:
        assert re.search(rf"statectl (--output json )?{name}\b", text), name
