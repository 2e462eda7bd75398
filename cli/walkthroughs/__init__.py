"""The walkthroughs shipped with ``statectl trace --example NAME``: the seed articles' pictures.

Each ``*.trace`` file beside this module is a script; its first comment line is its title.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

__all__ = ["Walkthrough", "walkthrough_script", "walkthroughs"]


@dataclass(frozen=True, slots=True)
class Walkthrough:
    """A trace script shipped with statectl: ``--example NAME``."""

    name: str
    title: str


_SUFFIX = ".trace"


def _directory() -> Traversable:
    return files(__name__)


def walkthroughs() -> list[Walkthrough]:
    """Every shipped walkthrough, sorted by name."""
    found = []
    for resource in _directory().iterdir():
        if resource.name.endswith(_SUFFIX):
            name = resource.name[: -len(_SUFFIX)]
            found.append(Walkthrough(name, _title(resource.read_text(encoding="utf-8"))))
    return sorted(found, key=lambda w: w.name)


def walkthrough_script(name: str) -> str:
    """Read the text of the shipped walkthrough ``name``."""
    return _directory().joinpath(name + _SUFFIX).read_text(encoding="utf-8")


def _title(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip()
        if stripped:
            break
    return ""
