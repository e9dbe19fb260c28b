"""``views.status.node_states``: one entry per node of the run's workflow, in
definition order, with its state (what ``status --nodes`` and the Pi extension's
widget show)."""

from __future__ import annotations

import pytest
from pi_workflows.supervisor.views.status import node_states

from tests.helpers.definitions import approve_flow
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

FAILING = """
def boom(ctx):
    raise RuntimeError("no luck")

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: 1), compute("b", boom), compute("c", lambda ctx: 3)],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""


def test_a_waiting_run_has_its_nodes_done_waiting_and_pending_in_definition_order(
        h: Harness) -> None:
    h.write("check", approve_flow())
    run = h.launch("check", {})
    assert h.execute(run).outcome == "waiting"
    assert node_states(h.runs, run) == [{"id": "draft", "state": "done"},
                                        {"id": "approve", "state": "waiting"},
                                        {"id": "build", "state": "pending"}]
    child = h.answer(run, "yes")
    assert h.execute(child).outcome == "completed"
    assert [n["state"] for n in node_states(h.runs, child)] == ["done", "done", "done"]


def test_a_failed_node_is_failed_and_a_run_without_a_bundle_has_no_nodes(h: Harness) -> None:
    h.write("failing", FAILING)
    run = h.launch("failing", {})
    assert h.execute(run).outcome == "failed"
    assert node_states(h.runs, run) == [{"id": "a", "state": "done"},
                                        {"id": "b", "state": "failed"},
                                        {"id": "c", "state": "pending"}]
    assert node_states(h.runs, "20261201T000000Z-none-00000000") == []
