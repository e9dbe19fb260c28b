"""No module but ``protocol/states.py`` spells a state where it decides something.

A comparison against a literal state word (``row.state == "done"``,
``status in ("failed", "timed_out")``) is how a state vocabulary drifts: a
renamed or added state is missed by every such line. They use the names and
sets of ``protocol.states`` instead; this test reads every product module.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pi_workflows.protocol.states import Outcome, QueueState, RunStatus

REPO = Path(__file__).resolve().parents[2]
WORDS = {str(s) for s in (*QueueState, *RunStatus, *Outcome)} - {"ok"}


def _literals(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def spelled_states(source: str) -> list[tuple[int, str]]:
    """(line, word) of each state word compared against in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, w) for w in _literals(side) if w in WORDS]
    return found


def test_the_scan_finds_a_spelled_state() -> None:
    assert spelled_states('if row.state == "done":\n    pass\n') == [(1, "done")]
    assert spelled_states('x = kind in ("failed", "nope")\n') == [(1, "failed")]
    assert spelled_states("if row.state == Q.DONE:\n    pass\n") == []


def test_no_product_module_compares_against_a_state_word() -> None:
    offenders = []
    for folder in ("authoring", "protocol", "worker", "supervisor"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path == REPO / "protocol" / "states.py":
                continue
            offenders += [f"{path.relative_to(REPO)}:{line}: {word!r}"
                          for line, word in spelled_states(path.read_text())]
    assert offenders == []
