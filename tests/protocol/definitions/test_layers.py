"""The definition modules import each other in one direction only, and never lazily.

``[tool.importlinter]`` holds the layers of ``protocol.definitions``; this
test holds the exact imports of each module of the chain (the definitions
and the leaves of ``protocol`` under them), and that none hides inside a
function, which is how a cycle was dodged before.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[3] / "protocol"

# Each module (dotted, under protocol) and the protocol modules it may import.
LAYERS: dict[str, set[str]] = {
    "jsonenc": set(),
    "states": {"errors"},
    "commands": {"record"},
    "definitions.progress": set(),
    "definitions.graph": {"errors", "jsonenc", "definitions.progress"},
    "definitions.verdicts": set(),
    "definitions.routing": {"definitions.graph", "errors", "states"},
    "definitions.values": {"definitions.graph", "errors"},
    "definitions.requests": {"errors"},
    "definitions.decisions": {"definitions.graph", "definitions.requests"},
    "definitions.decisions_agent": {"definitions.graph"},
    "definitions.shown": {"definitions.graph"},
    "definitions.compose": {"definitions.graph"},
    "definitions.validation": {"commands", "definitions.compose", "definitions.graph",
                               "definitions.routing", "definitions.decisions_agent",
                               "definitions.shown", "definitions.progress",
                               "definitions.decisions"},
    "definitions.resolve": {"definitions.discovery", "definitions.graph"},
    "definitions.define": {"definitions.compose", "definitions.graph", "definitions.resolve",
                           "definitions.validation", "definitions.decisions_agent"},
}


def _imports(module: str, *, top_level_only: bool) -> set[str]:
    """The ``protocol`` modules ``module`` imports (at module level, or anywhere)."""
    path = PROTOCOL.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text())
    package = module.split(".")[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0:
            assert not (node.module or "").startswith("pi_workflows"), (module, node.module)
            continue
        base = package[: len(package) - (node.level - 1)]
        if node.module is None:
            found.update(".".join([*base, alias.name]) for alias in node.names)
        else:
            found.add(".".join([*base, node.module]))
    return found


def test_each_definition_module_imports_only_the_layers_below_it() -> None:
    for module, allowed in LAYERS.items():
        assert _imports(module, top_level_only=False) == allowed, module


def test_no_import_hides_inside_a_function() -> None:
    for module in LAYERS:
        assert _imports(module, top_level_only=True) == _imports(module,
                                                                 top_level_only=False), module
