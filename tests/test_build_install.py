"""What ``make demo`` installs, and the package metadata (issue 41, item 6).

The demo needs neither Spark nor the test tools: its venv step installs ``.`` alone, while
``make test`` installs ``.[spark,dev]``. ``pyproject.toml`` names its license with an SPDX
expression (PEP 639), which setuptools >= 77 takes without the deprecation warnings the TOML
table printed at every install.
"""

from __future__ import annotations

import re
import tomllib

from oracle import REPO_ROOT


def targets() -> dict[str, tuple[list[str], list[str]]]:
    """Makefile rules: target -> (prerequisites, recipe lines), variables expanded."""
    text = (REPO_ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+)\s*[:?]?=\s*(.*?)\s*$", text, flags=re.MULTILINE))

    def expand(value: str) -> str:
        for _ in range(5):
            value = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m[1], m[0]), value)
        return value

    rules: dict[str, tuple[list[str], list[str]]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t") and current is not None:
            current.append(expand(line.strip()))
            continue
        found = re.match(r"^([^\s:=#][^:=]*):(?!=)\s*(.*)$", line)
        if found and not line.startswith(".PHONY"):
            current = []
            rules[expand(found[1].strip())] = (expand(found[2]).split(), current)
        elif not line.startswith("\t"):
            current = None
    return rules


def installs(rules: dict[str, tuple[list[str], list[str]]], target: str) -> list[str]:
    """Every ``pip install`` of ``target``'s recipe and of its prerequisites', recursively."""
    prerequisites, recipe = rules.get(target, ([], []))
    found = [line for line in recipe if "pip install" in line and "--upgrade pip" not in line]
    for prerequisite in prerequisites:
        found += installs(rules, prerequisite)
    return found


def test_make_demo_installs_statectl_alone_and_make_test_everything() -> None:
    rules = targets()
    demo = installs(rules, "demo")
    assert demo and all(line.rstrip().endswith("-e .") for line in demo), demo
    test = installs(rules, "test")
    assert any("'.[spark,dev]'" in line for line in test), test


def test_the_license_is_an_spdx_expression_setuptools_takes() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    requires = project["build-system"]["requires"]
    assert any(re.fullmatch(r"setuptools>=(\d+).*", r) and int(
        re.fullmatch(r"setuptools>=(\d+).*", r)[1]) >= 77 for r in requires), requires  # type: ignore[index]
    assert not any(c.startswith("License ::") for c in project["project"].get("classifiers", []))
