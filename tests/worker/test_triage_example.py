"""``examples/triage.workflow.py`` runs as its docstring says: a title from the input, a
decision that refuses anything but its choices, a decision_edge to each choice's node, and
status details on node_started (issue 23, items 2 and 3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.worker.agent import ScriptedExecutor

from tests.helpers.engine import Harness, assert_well_formed

pytestmark = pytest.mark.timeout(60)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "triage.workflow.py"


def test_the_example_loads_with_its_decision_edge_bound() -> None:
    loaded = load_workflow_file(EXAMPLE)
    assert loaded.name == "triage" and loaded.workflow.description
    [decision_edge] = [e for e in loaded.workflow.edges if e.source == "classify"]
    assert decision_edge.on == "$.route"  # type: ignore[union-attr]


@pytest.mark.parametrize("choice", ["bug", "feature", "question"])
def test_each_choice_routes_to_its_node(h: Harness, choice: str) -> None:
    shutil.copy(EXAMPLE, h.workflows / "triage.workflow.py")
    run_id = h.launch("triage", {"task": "Dark mode please\nmy eyes hurt"})
    executor = ScriptedExecutor({"classify": [{"route": "nonsense"},
                                              {"route": choice, "reason": "it says so"}]})
    assert h.execute(run_id, agent=executor).outcome == "completed"
    assert [reason for _, reason in executor.rejections] == [
        "output.route must be one of ['bug', 'feature', 'question']"]
    state = h.state(run_id)
    assert state["title"] == "Triage: Dark mode please"
    assert state["outputs"][choice] == {"label": choice, "reason": "it says so", "run": run_id}
    assert state["finalOutput"]["message"] == (
        f"Triage: Dark mode please is a {choice}: it says so")
    events = assert_well_formed(h.bundle(run_id))
    ran = [e["nodeId"] for e in events if e["type"] == "node_started"]
    assert ran == ["classify", choice, "report"]
    details = [e["payload"].get("statusDetail") for e in events if e["type"] == "node_started"]
    assert details == ["29 characters to read", None, "telling the session"]
    assert "- bug\n- feature\n- question" in executor.prompts[0][1]
