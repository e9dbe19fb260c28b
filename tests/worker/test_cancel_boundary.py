"""A cancel asked for while a node runs wins at the next node boundary, not at a renewal."""

from __future__ import annotations

import pytest

from tests.helpers.engine import GATES, Harness, assert_well_formed, types_of

pytestmark = pytest.mark.timeout(60)

FLOW = """
def ask_cancel(ctx):
    h.GATES["store"].request_cancel(ctx.run_id)  # `pi-workflows cancel RUN` meanwhile
    return {"worked": True}

workflow = define_workflow(
    start_at="work",
    nodes=[compute("work", ask_cancel), checkpoint("ask", summary="go on?"),
           compute("never", lambda ctx: {"never": True})],
    edges=[edge("work", "ask"), edge("ask", "never")],
)
"""


def test_a_cancel_requested_during_a_node_ends_the_run_before_the_checkpoint(
        h: Harness) -> None:
    h.write("flow", FLOW)
    run_id = h.launch("flow")
    GATES["store"] = h.store
    out = h.execute(run_id)
    assert out.outcome == "cancelled"
    events = types_of(assert_well_formed(h.bundle(run_id)))
    assert "run_waiting" not in events and events[-1] == "run_cancelled"
    started = [e["nodeId"] for e in h.bundle(run_id).events() if e["type"] == "node_started"]
    assert started == ["work"]  # no node started after the request
    assert h.row(run_id).state == "cancelled"


LAST = """
def ask_cancel(ctx):
    h.GATES["store"].request_cancel(ctx.run_id)
    if ctx.input == "fail":
        raise RuntimeError("and then it failed")
    return {"worked": True}

workflow = define_workflow(
    start_at="last", nodes=[compute("last", ask_cancel)], edges=[],
)
"""


@pytest.mark.parametrize("task", ["ok", "fail"])
def test_a_cancel_requested_during_the_last_node_wins_over_completed_and_failed(
        h: Harness, task: str) -> None:
    h.write("flow", LAST)
    run_id = h.launch("flow", task)
    GATES["store"] = h.store
    out = h.execute(run_id)
    assert out.outcome == "cancelled"
    events = types_of(assert_well_formed(h.bundle(run_id)))
    assert events[-1] == "run_cancelled"
    assert "run_completed" not in events and "run_failed" not in events
    if task == "ok":  # the node's own result is still recorded
        assert h.bundle(run_id).state()["outputs"]["last"] == {"worked": True}
    assert h.row(run_id).state == "cancelled"
