"""The import graph of statecore, formats and cli has no circles, and no private imports.

Every ``import`` and ``from ... import`` in a module counts, wherever it is (module level,
inside a function, under ``TYPE_CHECKING``): a lazy import still ties two modules together.
``from package import name`` is an edge to ``package.name`` when that is a module, else to the
package. A module may import another's public names only: a name starting with ``_`` is that
module's own business.
"""

from __future__ import annotations

import ast

import pytest
from import_graph import PACKAGES, cycles, imports, modules
from oracle import REPO_ROOT

CHECKED_FOR_PRIVATE_IMPORTS = (*PACKAGES, "tests", "bench")


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    found = modules()
    assert len(found) > 50, "the module walk found too few modules"
    graph = {name: imports(path, found) for name, path in found.items()}
    assert graph["formats.open"] >= {"formats.model.checkpoint", "formats.statectl.reader",
                                     "formats.flink.checkpoint"}, "the import walk misses edges"
    assert cycles(graph) == []


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
    """The operations (``formats/ops/``, ``formats.engines``) read checkpoints through the model.

    They may use a codec's public writer (rescale and build write statectl checkpoints, convert
    writes a Flink savepoint), never the Flink reader's modules, the format's internals.
    """
    found = modules()
    operations = [n for n in found if n.startswith("formats.ops.") or n == "formats.engines"]
    assert len(operations) > 10, operations
    leaking = {n: sorted(m for m in imports(found[n], found)
                         if m.startswith("formats.flink") and m not in FLINK_ENTRY_POINTS)
               for n in operations}
    assert {n: m for n, m in leaking.items() if m} == {}
