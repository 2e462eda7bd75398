"""The import graph of statecore, formats and cli has no circles, and no private imports.

Every ``import`` and ``from ... import`` in a module counts, wherever it is (module level,
inside a function, under ``TYPE_CHECKING``): a lazy import still ties two modules together.
``from package import name`` is an edge to ``package.name`` when that is a module, else to the
package. A module may import another's public names only: a name starting with ``_`` is that
module's own business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from oracle import REPO_ROOT

PACKAGES = ("statecore", "formats", "cli")
CHECKED_FOR_PRIVATE_IMPORTS = (*PACKAGES, "tests", "bench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES
            for p in sorted((REPO_ROOT / package).rglob("*.py"))}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports (see the module docstring)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    out.add(f"{base}.{alias.name}")
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    modules = _modules()
    assert len(modules) > 50, "the module walk found too few modules"
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    assert graph["formats.open"] >= {"formats.model.checkpoint", "formats.statectl.reader",
                                     "formats.flink.checkpoint"}, "the import walk misses edges"
    assert _cycles(graph) == []


@pytest.mark.parametrize("folder", CHECKED_FOR_PRIVATE_IMPORTS)
def test_no_module_imports_a_private_name_of_another(folder: str) -> None:
    offenders = []
    for path in sorted((REPO_ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
                offenders += [f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {a.name}"
                              for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []


#: The Flink codec's entry points an operation may use: its writer of savepoints from the model.
FLINK_ENTRY_POINTS = {"formats.flink.write.bootstrap"}


def test_operations_use_the_model_not_a_codec() -> None:
    """The operations (``formats/ops/``, and ``formats.engines``) read checkpoints through the model.

    They may use a codec's public writer (rescale and build write statectl checkpoints, convert
    writes a Flink savepoint), never the Flink reader's modules, the format's internals.
    """
    modules = _modules()
    operations = [n for n in modules if n.startswith("formats.ops.") or n == "formats.engines"]
    assert len(operations) > 10, operations
    leaking = {n: sorted(m for m in _imports(modules[n], modules)
                         if m.startswith("formats.flink") and m not in FLINK_ENTRY_POINTS)
               for n in operations}
    assert {n: m for n, m in leaking.items() if m} == {}
