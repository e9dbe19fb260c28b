"""``pause``: a run asked to pause holds at the next node boundary, durably.

The node in progress finishes and its result is kept; the next node does not
start; the row is parked with the ``paused`` code, which no runner claims,
until ``unpause`` (``resume``) lifts it; then each node runs once.
"""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import TransitionRefused
from pi_workflows.worker.engine import Engine
from pi_workflows.worker.runner import execute_claim

from tests.helpers.engine import GATES, Crash, Harness, assert_well_formed, crash_on, types_of

pytestmark = pytest.mark.timeout(60)

FLOW = """
def first(ctx):
    h.GATES["store"].request_pause(ctx.run_id)  # `pi-workflows pause RUN` meanwhile
    h.GATES["ran"].append("a")
    return {"a": 1}

def second(ctx):
    h.GATES["ran"].append("b")
    return {"b": 2}

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", first), compute("b", second)],
    edges=[edge("a", "b")],
)
"""


def _started(h: Harness, run_id: str) -> list[str]:
    return [e["nodeId"] for e in h.bundle(run_id).events() if e["type"] == "node_started"]


def test_a_pause_asked_for_during_a_node_holds_the_run_before_the_next(h: Harness) -> None:
    h.write("flow", FLOW)
    run_id = h.launch("flow")
    GATES["store"], GATES["ran"] = h.store, []
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("parked", "paused")
    assert GATES["ran"] == ["a"]
    assert _started(h, run_id) == ["a"]
    events = types_of(assert_well_formed(h.bundle(run_id)))
    assert events[-1] == "run_paused"
    state = h.state(run_id)
    assert state["paused"] is True and state["outputs"]["a"] == {"a": 1}
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("parked", "paused")
    # No runner takes it: a host's pass, a session's pass, a claim by id.
    assert h.store.claim_next("host-1") is None
    with pytest.raises(TransitionRefused) as refused:
        h.store.claim_by_id(run_id, "host-1")
    assert refused.value.code == "run_paused"


def test_resume_continues_a_paused_run_and_runs_each_node_once(h: Harness) -> None:
    once = 'len(h.GATES["ran"]) or h.GATES["store"].request_pause(ctx.run_id)'
    h.write("flow", FLOW.replace('h.GATES["store"].request_pause(ctx.run_id)', once))
    run_id = h.launch("flow")
    GATES["store"], GATES["ran"] = h.store, []
    assert h.execute(run_id).error_code == "paused"
    h.store.unpause(run_id)
    claim = h.store.claim_next("host-1")
    assert claim is not None and claim.run_id == run_id
    out = execute_claim(h.store, claim, runs_dir=h.runs, project_dir=h.project, fsync="never")
    assert out.outcome == "completed"
    assert GATES["ran"] == ["a", "b"]
    assert _started(h, run_id) == ["a", "b"]
    events = types_of(assert_well_formed(h.bundle(run_id)))
    assert events.index("run_paused") < events.index("run_resumed") < events.index("run_completed")
    assert h.state(run_id)["paused"] is False
    assert h.row(run_id).error_code is None


def test_a_pause_asked_for_on_the_last_node_lets_the_run_complete(h: Harness) -> None:
    h.write("last", """
def only(ctx):
    h.GATES["store"].request_pause(ctx.run_id)
    return {"done": True}

workflow = define_workflow(start_at="only", nodes=[compute("only", only)], edges=[])
""")
    run_id = h.launch("last")
    GATES["store"] = h.store
    assert h.execute(run_id).outcome == "completed"
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("done", None)


def test_a_worker_killed_after_the_request_pauses_the_resumed_run_at_once(h: Harness) -> None:
    h.write("flow", FLOW.replace('h.GATES["store"].request_pause(ctx.run_id)', "None"))
    run_id = h.launch("flow")
    GATES["store"], GATES["ran"] = h.store, []
    h.store.claim_by_id(run_id, "runner-1")
    h.store.request_pause(run_id)  # then the owner dies before any boundary
    out = h.after_crash(run_id)
    assert (out.outcome, out.error_code) == ("parked", "paused")
    assert GATES["ran"] == [] and _started(h, run_id) == []
    assert (h.row(run_id).state, h.row(run_id).error_code) == ("parked", "paused")


def test_a_crash_right_after_run_paused_leaves_the_request_standing(h: Harness) -> None:
    h.write("flow", FLOW)
    run_id = h.launch("flow")
    GATES["store"], GATES["ran"] = h.store, []
    claim = h.store.claim_by_id(run_id, "runner-1")

    def hook(engine: Engine) -> None:
        crash_on(engine, "run_paused", after=True)

    with pytest.raises(Crash):
        execute_claim(h.store, claim, runs_dir=h.runs, project_dir=h.project, fsync="never",
                      engine_hook=hook)
    out = h.after_crash(run_id)
    assert (out.outcome, out.error_code) == ("parked", "paused")
    assert GATES["ran"] == ["a"] and _started(h, run_id) == ["a"]
