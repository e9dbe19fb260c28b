"""Small builders shared by the definition and CLI tests.

Owns ``make_ctx`` (a ``NodeContext``), ``write`` (a dedented file) and
``simple_source`` (a valid two-node workflow file's text) and
``approve_flow`` (draft, a checkpoint, build). Imports
``pi_workflows.protocol.definitions`` only: never pytest, a conftest or a
test module.
"""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path
from typing import Any

from pi_workflows.protocol.definitions.graph import NodeContext


def make_ctx(**overrides: Any) -> NodeContext:
    fields: dict[str, Any] = {
        "run_id": "run-1", "node_id": "a", "attempt_id": "a-1", "input": {"n": 1},
        "outputs": {}, "results": {}, "cancel": threading.Event(),
        "project_dir": Path("/tmp"),
    }
    fields.update(overrides)
    return NodeContext(**fields)


def write(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body).lstrip())
    return path


SIMPLE = """
from pi_workflows import compute, define_workflow, edge, notify

workflow = define_workflow(
    {name}start_at="a",
    description={description!r},
    nodes=[compute("a", lambda ctx: {{"n": 1}}), notify("b", "done", kind="final")],
    edges=[edge("a", "b")],
)
"""


def simple_source(name: str | None = None, description: str = "a test workflow") -> str:
    return SIMPLE.format(name=f"name={name!r}, " if name else "", description=description)


def approve_flow(question: str = "approve the plan") -> str:
    """A workflow file's text: ``draft``, a checkpoint ``approve`` asking ``question``,
    then ``build`` from its answer."""
    return f"""
workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {{"plan": "p"}}),
        checkpoint("approve", summary=lambda ctx: {question!r}),
        compute("build", lambda ctx: {{"built": ctx.outputs["approve"]}}),
    ],
    edges=[edge("draft", "approve"), edge("approve", "build")],
)
"""
