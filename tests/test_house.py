"""The house (issue 42): rooms that say what they hold, imports that point one way, a true map.

* Every module of ``statecore``, ``formats`` and ``cli`` belongs to a room (the longest package
  prefix named in :data:`MAY_IMPORT`) and imports only the rooms its room may: statecore <-
  formats' model and storage <- the codecs' readers and writers <- ``formats.open`` <- the
  operations <- the Spark engine and the engine choice <- cli. Nothing imports ``cli`` but
  ``cli``. (No circle among modules: ``test_import_graph.py``.)
* No module is over 800 lines (DESIGN.md, "one concern per module").
* The README's "Where things are" map names every package, and every path it names exists.
"""

from __future__ import annotations

import re

import pytest
from import_graph import imports, modules
from oracle import REPO_ROOT

STATECORE = {"statecore"}
MODEL_STORAGE = {*STATECORE, "formats.model", "formats.storage"}
FLINK_READ = {*MODEL_STORAGE, "formats.flink.java", "formats.flink.types", "formats.flink.read"}
FLINK = {*FLINK_READ, "formats.flink.write", "formats.flink"}
CODECS = {*FLINK, "formats.statectl", "formats.inputs"}
#: What each room may import (besides itself): the layers of the issue, bottom up.
MAY_IMPORT: dict[str, set[str]] = {
    "statecore": set(),
    "formats": set(),  # the package's docstring only
    "formats.model": STATECORE,
    "formats.storage": STATECORE,
    "formats.flink.java": STATECORE,
    "formats.flink.types": {*STATECORE, "formats.model", "formats.flink.java"},
    "formats.flink.read": FLINK_READ,
    "formats.flink.write": {*FLINK_READ, "formats.flink.write"},
    "formats.flink": FLINK,  # checkpoint.py: the codec's front, reading and writing rescaled
    "formats.statectl": MODEL_STORAGE,
    "formats.inputs": MODEL_STORAGE,
    "formats.open": {*CODECS, "formats.open"},
    # operations: the model, storage, the codecs' public writers and formats.open, never a
    # Flink reader's internals (test_import_graph.py names the one Flink entry point allowed)
    "formats.ops": {*MODEL_STORAGE, "formats.statectl", "formats.inputs", "formats.open",
                    "formats.flink.write"},
    "formats.spark": {*CODECS, "formats.open", "formats.ops"},
    "formats.engines": {*CODECS, "formats.open", "formats.ops", "formats.spark"},
    "cli": {*CODECS, "formats.open", "formats.ops", "formats.spark", "formats.engines", "cli"},
}
MAX_LINES = 800


def room_of(module: str) -> str:
    """The room of ``module``: the longest room name that is the module or a package of it."""
    rooms = [r for r in MAY_IMPORT if module == r or module.startswith(r + ".")]
    assert rooms, f"{module} is in no room: add its package to MAY_IMPORT and the README's map"
    return max(rooms, key=len)


def test_room_of_takes_the_innermost_room() -> None:
    assert room_of("formats.flink.read.rocksdb.sst") == "formats.flink.read"
    assert room_of("formats.flink.checkpoint") == "formats.flink"
    assert room_of("formats.ops.rescale") == "formats.ops"
    assert room_of("statecore.hashing") == "statecore"


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import in ``graph`` (module -> modules it imports) its room may not make."""
    wrong = []
    for name, targets in sorted(graph.items()):
        room = room_of(name)
        allowed = MAY_IMPORT[room] | {room}
        wrong += [f"{name} ({room}) imports {target} ({room_of(target)})"
                  for target in sorted(targets) if room_of(target) not in allowed]
    return wrong


def test_imports_point_down_the_layers() -> None:
    found = modules()
    assert len(found) > 100, "the module walk found too few modules"
    graph = {name: imports(path, found) for name, path in found.items()}
    assert graph["formats.ops.export"] >= {"formats.model.columns", "formats.storage.commit"}
    assert layer_violations(graph) == []


def test_the_layer_check_catches_an_upward_import() -> None:
    assert layer_violations({"formats.ops.export": {"formats.model.columns"}}) == []
    assert layer_violations({"formats.model.columns": {"formats.ops.export"}}) != []
    assert layer_violations({"formats.flink.read.keyed": {"formats.flink.write.rewrite"}}) != []
    assert layer_violations({"formats.ops.diff": {"formats.flink.read.keyed"}}) != []
    assert layer_violations({"formats.storage.commit": {"formats.model.checkpoint"}}) != []


def test_nothing_imports_cli_but_cli() -> None:
    found = modules()
    users = {name for name, path in found.items() if not name.startswith("cli")
             and any(t.startswith("cli") for t in imports(path, found))}
    assert users == set()


def test_no_module_is_over_800_lines() -> None:
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _packages() -> list[str]:
    return sorted(str(p.parent.relative_to(REPO_ROOT)) + "/"
                  for top in ("statecore", "formats", "cli")
                  for p in (REPO_ROOT / top).rglob("__init__.py"))


def _map() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    found = re.search(r"^## Where things are\n(.*?)(?=^## )", readme, re.S | re.M)
    assert found, "README.md has no '## Where things are' section"
    return found.group(1)


@pytest.mark.parametrize("package", _packages())
def test_the_readme_map_names_every_package(package: str) -> None:
    assert f"`{package}`" in _map(), f"README's 'Where things are' does not name {package}"


def test_every_path_the_readme_map_names_exists() -> None:
    named = re.findall(r"`((?:statecore|formats|cli|tests|bench|docs)/[\w./-]*)`", _map())
    assert len(named) > 20
    missing = [p for p in named if not (REPO_ROOT / p).exists()]
    assert missing == []
