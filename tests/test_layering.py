"""Layers point one way: statecore (stdlib only) <- formats (+ pyarrow) <- cli (+ click, rich).

pyspark is an optional extra: only ``formats.spark*`` may use it, and only inside functions, so
every module imports without it. Checked twice: by importing every module in a subprocess whose
imports of the forbidden packages fail, and statically over the source, so modules added later
are covered automatically.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from oracle import REPO_ROOT

#: Imports every submodule of ``PACKAGE`` while the top-level packages in ``BLOCKED`` raise
#: ImportError; prints the imported module names as JSON. ``PACKAGE`` and ``BLOCKED`` are
#: prepended as assignments.
IMPORT_ALL_SOURCE = """
import importlib
import importlib.abc
import json
import pkgutil
import sys


class BlockImports(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked by test_layering")
        return None


for loaded in [m for m in sys.modules if m.partition(".")[0] in BLOCKED]:
    del sys.modules[loaded]
sys.meta_path.insert(0, BlockImports())
for blocked in BLOCKED:  # the blocker itself works
    try:
        importlib.import_module(blocked)
    except ImportError:
        pass
    else:
        raise SystemExit(f"blocking {blocked} failed")


def fail(name):
    raise ImportError(f"cannot import {name}")


package = importlib.import_module(PACKAGE)
names = [PACKAGE] + [
    info.name for info in pkgutil.walk_packages(package.__path__, PACKAGE + ".", onerror=fail)
]
for name in names:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
if leaked:
    raise SystemExit(f"blocked modules were imported anyway: {leaked}")
print(json.dumps(names))
"""


def _import_all(package: str, blocked: list[str]) -> list[str]:
    source = f"PACKAGE = {package!r}\nBLOCKED = {blocked!r}\n" + IMPORT_ALL_SOURCE
    completed = subprocess.run(
        [sys.executable, "-c", source],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, (
        f"importing {package} and its submodules without {blocked} failed:\n{completed.stderr}"
    )
    names: list[str] = json.loads(completed.stdout)
    return names


def test_statecore_imports_without_third_party_packages() -> None:
    names = _import_all("statecore", ["pyarrow", "click", "rich", "pyspark", "numpy"])
    assert {"statecore", "statecore.hashing", "statecore.key_groups"} <= set(names)


def test_formats_imports_without_cli_packages_or_pyspark() -> None:
    # formats.spark* included: pyspark may only be imported inside its functions.
    names = _import_all("formats", ["click", "rich", "pyspark"])
    assert names[0] == "formats"


# --- static check over the source ------------------------------------------------------------


@dataclass(frozen=True)
class ImportSite:
    module: str  # top-level package imported, e.g. "pyarrow"
    line: int
    in_function: bool
    type_checking_only: bool


def _is_type_checking_test(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "TYPE_CHECKING") or (
        isinstance(node, ast.Attribute) and node.attr == "TYPE_CHECKING"
    )


def _dynamic_import_target(node: ast.Call) -> str | None:
    """``pyspark`` for ``importlib.import_module("pyspark.sql")`` or ``__import__("pyspark")``."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    is_import_call = name == "import_module" or (
        isinstance(func, ast.Name) and name == "__import__"
    )
    if is_import_call and node.args:
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def import_sites(source: str) -> Iterator[ImportSite]:
    """Every absolute import in ``source``, static or ``import_module("literal")``."""

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[ImportSite]:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module]
        elif isinstance(node, ast.Call) and (target := _dynamic_import_target(node)):
            targets = [target]
        for target in targets:
            yield ImportSite(target.partition(".")[0], node.lineno, in_function, type_checking)

        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            in_function = True
        if isinstance(node, ast.If) and _is_type_checking_test(node.test):
            for child in node.body:
                yield from visit(child, in_function, True)
            for child in node.orelse:
                yield from visit(child, in_function, type_checking)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, in_function, type_checking)

    yield from visit(ast.parse(source), False, False)


def python_files(package: str) -> list[Path]:
    files = sorted((REPO_ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    return files


def _is_spark_module(path: Path) -> bool:
    """``formats/spark.py``, ``formats/spark_*.py`` or anything under ``formats/spark*/``."""
    relative = path.relative_to(REPO_ROOT).parts
    return relative[0] == "formats" and len(relative) > 1 and relative[1].startswith("spark")


def _sites(path: Path) -> list[ImportSite]:
    return list(import_sites(path.read_text(encoding="utf-8")))


def test_statecore_imports_only_stdlib_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | {"statecore"}
    broken = [
        f"{path.relative_to(REPO_ROOT)}:{site.line} imports {site.module}"
        for path in python_files("statecore")
        for site in _sites(path)
        if site.module not in allowed
    ]
    assert not broken, "statecore must use only the standard library:\n  " + "\n  ".join(broken)


def test_formats_never_imports_click_or_rich() -> None:
    broken = [
        f"{path.relative_to(REPO_ROOT)}:{site.line} imports {site.module}"
        for path in python_files("formats")
        for site in _sites(path)
        if site.module in ("click", "rich", "cli")
    ]
    assert not broken, "formats must not depend on the CLI layer:\n  " + "\n  ".join(broken)


@pytest.mark.parametrize("package", ["statecore", "formats", "cli"])
def test_pyspark_only_inside_functions_of_formats_spark(package: str) -> None:
    broken = []
    for path in python_files(package):
        spark_module = _is_spark_module(path)
        for site in _sites(path):
            if site.module != "pyspark":
                continue
            if not spark_module:
                broken.append(f"{path.relative_to(REPO_ROOT)}:{site.line}: outside formats.spark*")
            elif not (site.in_function or site.type_checking_only):
                broken.append(f"{path.relative_to(REPO_ROOT)}:{site.line}: at module level")
    assert not broken, (
        "pyspark is optional: only formats.spark* may import it, inside functions "
        "(or under `if TYPE_CHECKING:`):\n  " + "\n  ".join(broken)
    )


def test_import_sites_finds_every_kind_of_import() -> None:
    """The static checks above can only fail if this scanner sees the imports."""
    source = """
import os.path, pyarrow as pa
from pyspark.sql import SparkSession
from . import sibling
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import rich
def load():
    import pyspark
    return importlib.import_module("click.testing")
class Reader:
    async def read(self):
        from numpy import array
"""
    sites = {(s.module, s.in_function, s.type_checking_only) for s in import_sites(source)}
    assert sites == {
        ("os", False, False),
        ("pyarrow", False, False),
        ("pyspark", False, False),
        ("typing", False, False),
        ("rich", False, True),
        ("pyspark", True, False),
        ("click", True, False),
        ("numpy", True, False),
    }
