"""The definition modules import each other in one direction only (no cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol"

# Each module and the package modules it may import, lowest layer first.
LAYERS: dict[str, set[str]] = {
    "jsonenc": set(),
    "states": {"errors"},
    "definition": {"errors", "jsonenc"},
    "routing": {"definition", "errors", "states"},
    "values": {"definition", "errors"},
    "commands": set(),
    "validation": {"commands", "definition", "routing"},
    "define": {"definition", "validation"},
}


def package_imports(module: str) -> set[str]:
    """Every ``protocol`` module ``module`` imports, at any depth of its code."""
    tree = ast.parse((PROTOCOL / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                found.update(alias.name for alias in node.names)
            else:
                found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            assert not node.module.startswith("pi_workflows"), (module, node.module)
    return found


def top_level_imports(module: str) -> set[str]:
    tree = ast.parse((PROTOCOL / f"{module}.py").read_text())
    return {node.module.split(".")[0] for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_each_definition_module_imports_only_the_layers_below_it() -> None:
    for module, allowed in LAYERS.items():
        assert package_imports(module) == allowed, module


def test_no_import_hides_inside_a_function() -> None:
    # A lazy import is how a cycle was dodged before; every import is at module level.
    for module in LAYERS:
        assert top_level_imports(module) == package_imports(module), module
