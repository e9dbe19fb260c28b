"""Continuation runs: an answered checkpoint carries a waiting run forward."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ConflictError, UsageError
from pi_workflows.supervisor.session.launch import prepare_continuation
from pi_workflows.worker.control import Control

from tests.helpers.engine import Harness, assert_well_formed, bundle_bytes, types_of

pytestmark = pytest.mark.timeout(60)

PLAN = """
workflow = define_workflow(
    start_at="draft",
    max_steps={max_steps},
    nodes=[
        compute("draft", lambda ctx: {{"plan": "x" * ctx.input["size"]}}),
        checkpoint("approve", summary=lambda ctx: f"plan of {{ctx.input['size']}}"),
        compute("build", lambda ctx: {{"answer": ctx.outputs["approve"],
                                       "plan": ctx.outputs["draft"]["plan"],
                                       "steps_seen": sorted(ctx.outputs)}}),
    ],
    edges=[edge("draft", "approve"), edge("approve", "build")],
)
"""


def _waiting_parent(h: Harness, *, max_steps: int = 10, size: int = 5000) -> str:
    h.write("plan", PLAN.format(max_steps=max_steps))
    parent = h.launch("plan", {"size": size})
    assert h.execute(parent).outcome == "waiting"
    return parent


def test_a_continuation_carries_outputs_and_leaves_the_parent_untouched(h: Harness) -> None:
    parent = _waiting_parent(h)  # a 5000-byte output: carried through artifacts too
    parent_bytes = bundle_bytes(h.bundle(parent))
    parent_state = h.state(parent)

    child = h.answer(parent, {"approved": True})
    assert h.row(child).parent_run_id == parent
    out = h.execute(child)
    assert out.outcome == "completed"

    state = h.state(child)
    assert state["parentRunId"] == parent
    assert state["input"] == parent_state["input"]
    assert state["outputs"]["draft"] == parent_state["outputs"]["draft"]
    assert state["outputs"]["approve"] == {"approved": True}
    assert state["finalOutput"] == {"answer": {"approved": True}, "plan": "x" * 5000,
                                    "steps_seen": ["approve", "draft"]}
    assert state["steps"] == parent_state["steps"] + 1 == 3
    events = assert_well_formed(h.bundle(child))
    started = events[0]
    assert started["payload"]["parentRunId"] == parent
    assert started["payload"]["carriedSteps"] == 2
    assert started["payload"]["startAt"] == "approve"
    assert h.bundle(child).manifest()["parentRunId"] == parent
    # The checkpoint finishes with the answer; only the rest of the graph runs.
    assert [e["nodeId"] for e in events if e["type"] == "node_started"] == ["approve", "build"]
    assert types_of(events)[-1] == "run_completed"
    assert h.row(child).state == "done"
    assert bundle_bytes(h.bundle(parent)) == parent_bytes
    assert h.row(parent).state == "done"


def test_a_second_answer_to_the_same_parent_is_refused_by_the_store(h: Harness) -> None:
    parent = _waiting_parent(h, size=3)
    first = h.answer(parent, "yes")
    # Preflight alone cannot tell (the parent still waits); the store's constraint does.
    second = prepare_continuation(h.runs, parent, "no")
    with pytest.raises(ConflictError) as err:
        h.store.enqueue_detached(second.run_id, second.source, second.input,
                                 parent_run_id=parent)
    assert err.value.code == "continuation_exists"
    assert h.store.get(second.run_id) is None
    assert h.execute(first).outcome == "completed"
    assert h.state(first)["outputs"]["approve"] == "yes"


def test_answering_a_run_that_is_not_waiting_is_refused(h: Harness) -> None:
    parent = _waiting_parent(h, size=3)
    child = h.answer(parent, "yes")
    assert h.execute(child).outcome == "completed"
    with pytest.raises(UsageError) as err:
        prepare_continuation(h.runs, child, "again")
    assert err.value.code == "not_waiting"
    # A parked (interrupted) run is not waiting either.
    h.write("other", PLAN.format(max_steps=10))
    parked = h.launch("other", {"size": 1})
    control = Control()
    control.request_park()
    assert h.execute(parked, control=control).outcome == "parked"
    with pytest.raises(UsageError) as err:
        prepare_continuation(h.runs, parked, "yes")
    assert err.value.code == "not_waiting"


def test_carried_steps_count_toward_max_steps(h: Harness) -> None:
    parent = _waiting_parent(h, max_steps=2, size=3)
    assert h.state(parent)["steps"] == 2
    child = h.answer(parent, "go")
    out = h.execute(child)
    assert (out.outcome, out.error_code) == ("failed", "max_steps_exceeded")
    assert "build" not in h.state(child)["results"]
    assert h.state(child)["outputs"]["approve"] == "go"


def test_a_continuation_of_an_edited_workflow_needs_force(h: Harness) -> None:
    parent = _waiting_parent(h, size=3)
    path = h.workflows / "plan.workflow.py"
    path.write_text(path.read_text().replace('"build"', '"build2"'))
    with pytest.raises(UsageError) as err:
        prepare_continuation(h.runs, parent, "yes")
    assert err.value.code == "source_changed"
    child = h.answer(parent, "yes", force=True)
    assert h.execute(child).outcome == "completed"
    assert "build2" in h.state(child)["outputs"]


CHILD = """
workflow = define_workflow(
    start_at="ask", nodes=[checkpoint("ask", summary="ok?"), compute("done", lambda ctx: 1)],
    edges=[edge("ask", "done")], exits={"done": "done"},
)
"""
PARENT = """
from pi_workflows import include
workflow = define_workflow(
    start_at="gate", nodes=[include("child", as_="gate"), compute("after", lambda ctx: 1)],
    edges=[edge("gate.done", "after")],
)
"""


def test_answering_after_an_included_file_changed_names_that_file(h: Harness) -> None:
    child = h.write("child", CHILD)
    h.write("parent", PARENT)
    run_id = h.launch("parent", {})
    assert h.execute(run_id).outcome == "waiting"
    child.write_text(child.read_text().replace('summary="ok?"', 'summary="ok now?"'))
    with pytest.raises(UsageError) as err:
        h.answer(run_id, "yes")
    assert err.value.code == "source_changed"
    assert err.value.message == (
        f"the included workflow file {child.resolve()} of run {run_id} changed since it"
        " started; answer with --force to continue on the new definition")
    assert h.execute(h.answer(run_id, "yes", force=True)).outcome == "completed"
