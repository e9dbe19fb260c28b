"""``examples/batch.workflow.py`` runs: its checks as one batch, reported in their order."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from pi_workflows.protocol.definitions.discovery import load_workflow_file

from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "batch.workflow.py"


def test_the_batch_example_loads_with_an_idempotent_action() -> None:
    loaded = load_workflow_file(EXAMPLE)
    assert loaded.name == "batch" and loaded.workflow.description
    node = loaded.workflow.nodes["checks"]
    assert node.kind == "action" and node.idempotent  # type: ignore[union-attr]


def test_the_batch_example_runs_its_checks(h: Harness) -> None:
    shutil.copy(EXAMPLE, h.workflows / EXAMPLE.name)
    (h.project / "a.py").write_text("# TODO: one\n")
    (h.project / "b.py").write_text("print('b')\n")
    run_id = h.launch("batch")
    assert h.execute(run_id).outcome == "completed", h.state(run_id)
    state = h.state(run_id)
    assert state["outputs"]["checks"] == [
        {"check": "python", "status": "succeeded", "output": f"Python {sys.version.split()[0]}"},
        {"check": "files", "status": "succeeded", "output": "2"},
        {"check": "todo", "status": "succeeded", "output": "1"}]
    assert state["outputs"]["report"]["message"].splitlines() == [
        f"python: Python {sys.version.split()[0]}", "files: 2", "todo: 1"]
