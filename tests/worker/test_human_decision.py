"""Human decisions and ``checkpoint(run=)`` through the engine and the queue (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows.protocol.definitions.requests import AnswerRefused
from pi_workflows.supervisor.host.deadlines import Deadlines
from pi_workflows.worker import waiting

from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

IMPORTS = ("from pi_workflows import human_decision, human_decision_edge, choice,"
           " text_input\n")
SHIP = IMPORTS + """
workflow = define_workflow(
    start_at="prep",
    nodes=[
        compute("prep", lambda ctx: {"version": "1.2"}),
        human_decision("ship", question=lambda ctx: f"Ship {ctx.outputs['prep']['version']}?",
                       audience="release managers",
                       choices=[choice("approve", input={"go": True}, description="ship it"),
                                choice("reject"),
                                text_input("other", "say what to change", min_length=3,
                                           max_length=20)],
                       on_timeout="reject", timeout=TIMEOUT),
        compute("shipped", lambda ctx: {"answer": ctx.outputs["ship"]}),
        compute("dropped", lambda ctx: {"answer": ctx.outputs["ship"]}),
        compute("revised", lambda ctx: {"text": ctx.outputs["ship"]["text"]}),
    ],
    edges=[edge("prep", "ship"),
           human_decision_edge("ship", {"approve": "shipped", "reject": "dropped",
                                        "other": "revised"})],
)
"""


def _waiting(h: Harness, timeout: float = 3600) -> str:
    h.write("ship", SHIP.replace("TIMEOUT", repr(timeout)))
    run = h.launch("ship", {})
    assert h.execute(run).outcome == "waiting"
    return run


def test_the_waiting_state_carries_the_typed_request(h: Harness) -> None:
    run = _waiting(h)
    output = h.state(run)["waitingOutput"]
    request = output["request"]
    assert request["question"] == "Ship 1.2?"
    assert request["audience"] == "release managers"
    assert request["choices"] == [
        {"label": "approve", "description": "ship it", "input": {"go": True}},
        {"label": "reject", "description": None},
        {"label": "other", "text": {"prompt": "say what to change", "minLength": 3,
                                    "maxLength": 20}}]
    assert request["onTimeout"] == "reject"
    created = h.row(run).created_at
    assert request["dueAt"] >= created + 3_600_000


@pytest.mark.parametrize(("given", "node", "output"), [
    ("approve", "shipped", {"answer": {"choice": "approve", "input": {"go": True},
                                       "by": "person"}}),
    ("Reject", "dropped", {"answer": {"choice": "reject", "by": "person"}}),
    ("other: make it 1.3", "revised", {"text": "make it 1.3"}),
    ({"choice": "other", "text": "fix it"}, "revised", {"text": "fix it"}),
])
def test_a_valid_answer_routes_on_its_label(h: Harness, given: Any, node: str,
                                            output: Any) -> None:
    run = _waiting(h)
    child = h.answer(run, given)
    assert h.execute(child).outcome == "completed"
    state = h.state(child)
    assert state["lastNode"] == node
    assert state["finalOutput"] == output


@pytest.mark.parametrize("given", [
    "maybe", "approve and more words", "other", "other ab", "other " + "x" * 21,
    {"choice": "approve", "by": "timeout"}, 42, ["approve"],
])
def test_an_invalid_answer_is_refused_and_nothing_is_queued(h: Harness, given: Any) -> None:
    run = _waiting(h)
    before = len(h.store.list_runs())
    with pytest.raises(AnswerRefused) as err:
        h.answer(run, given)
    message = err.value.message
    assert "\n" not in message
    assert message.endswith(f"run {run} takes one of: approve, reject,"
                            " other TEXT (3-20 characters)")
    assert err.value.exit_code == 2
    assert len(h.store.list_runs()) == before
    assert h.store.continuation_of(run) is None


def test_the_refusal_never_repeats_the_text_given(h: Harness) -> None:
    run = _waiting(h)
    with pytest.raises(AnswerRefused) as err:
        h.answer(run, "other " + "secret-" * 10)
    assert "secret" not in err.value.message
    assert "must be 3-20 characters (it has 70)" in err.value.message


def test_a_plain_checkpoint_still_takes_any_answer(h: Harness) -> None:
    h.write("plain", """
workflow = define_workflow(start_at="ask", nodes=[checkpoint("ask", summary="anything?")])
""")
    run = h.launch("plain", {})
    assert h.execute(run).outcome == "waiting"
    child = h.answer(run, ["whatever", 1])
    assert h.execute(child).outcome == "completed"
    assert h.state(child)["finalOutput"] == ["whatever", 1]


RUN = """
def gather(ctx):
    return h.GATES["value"](ctx)

workflow = define_workflow(start_at="ask", nodes=[
    checkpoint("ask", summary="look", run=gather),
    compute("after", lambda ctx: ctx.outputs["ask"]),
], edges=[edge("ask", "after")])
"""


def test_checkpoint_run_records_its_data_beside_the_summary(h: Harness) -> None:
    from tests.helpers import engine
    engine.GATES["value"] = lambda ctx: {"files": 3, "run": ctx.run_id}
    h.write("look", RUN)
    run = h.launch("look", {})
    assert h.execute(run).outcome == "waiting"
    assert h.state(run)["waitingOutput"] == {"summary": "look",
                                             "data": {"files": 3, "run": run}}


def _fails(ctx: Any) -> Any:
    raise RuntimeError("no data")


def test_a_failing_checkpoint_run_fails_the_node(h: Harness) -> None:
    from tests.helpers import engine
    engine.GATES["value"] = _fails
    h.write("look", RUN)
    run = h.launch("look", {})
    assert h.execute(run).outcome == "failed"
    state = h.state(run)
    assert state["results"]["ask"]["errorCode"] == "node_error"
    assert "RuntimeError: no data" in state["results"]["ask"]["error"]
    assert state.get("waitingNode") is None


def test_a_checkpoint_run_that_overruns_its_bound_times_out(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from tests.helpers import engine
    never = threading.Event()
    engine.GATES["value"] = lambda ctx: never.wait(30)
    monkeypatch.setattr(waiting, "CHECKPOINT_RUN_TIMEOUT_S", 0.2)
    h.write("look", RUN)
    run = h.launch("look", {})
    assert h.execute(run).outcome == "timed_out"
    assert h.state(run)["results"]["ask"]["errorCode"] == "node_timed_out"
    never.set()


def test_a_non_json_checkpoint_run_value_fails_the_node(h: Harness) -> None:
    from tests.helpers import engine
    engine.GATES["value"] = lambda ctx: {"bad": object()}
    h.write("look", RUN)
    run = h.launch("look", {})
    assert h.execute(run).outcome == "failed"
    assert h.state(run)["results"]["ask"]["errorCode"] == "output_invalid"


# ---- on_timeout, as the host's step does it ----------------------------------


class Wall:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def test_on_timeout_answers_once_when_due_even_from_a_second_host(h: Harness) -> None:
    run = _waiting(h, timeout=60)
    due = h.state(run)["waitingOutput"]["request"]["dueAt"]
    wall = Wall(due - 1)
    first = Deadlines(h.store, h.runs, wall_ms=wall)
    first.start()
    assert first.step() == []  # not yet
    assert first.next_due_s() == pytest.approx(0.001)
    wall.ms = due
    assert first.step() == [run]
    child = h.store.continuation_of(run)
    assert child is not None
    # A host that starts again (the first killed after its insert) answers nothing.
    second = Deadlines(h.store, h.runs, wall_ms=Wall(due + 10_000))
    second.start()
    assert second.step() == []
    assert h.execute(child.run_id).outcome == "completed"
    state = h.state(child.run_id)
    assert state["lastNode"] == "dropped"
    assert state["outputs"]["ship"] == {"choice": "reject", "by": "timeout"}
    # Even once the continuation has ended, the same answer is never queued again.
    third = Deadlines(h.store, h.runs, wall_ms=Wall(due + 20_000))
    third.start()
    assert third.step() == []
    assert [r.run_id for r in h.store.list_runs() if r.parent_run_id == run] == [child.run_id]


def test_on_timeout_learns_of_new_waiting_runs_from_the_feed(h: Harness) -> None:
    deadlines = Deadlines(h.store, h.runs, wall_ms=Wall(0))
    deadlines.start()  # before the run waits
    run = _waiting(h, timeout=60)
    assert deadlines.step() == []
    due = h.state(run)["waitingOutput"]["request"]["dueAt"]
    assert deadlines.next_due_s() is not None
    deadlines.wall_ms = Wall(due)
    assert deadlines.step() == [run]


def test_a_person_who_answers_first_wins_over_the_timeout(h: Harness) -> None:
    run = _waiting(h, timeout=60)
    due = h.state(run)["waitingOutput"]["request"]["dueAt"]
    deadlines = Deadlines(h.store, h.runs, wall_ms=Wall(due))
    deadlines.start()
    child = h.answer(run, "approve")
    assert deadlines.step() == []
    found = h.store.continuation_of(run)
    assert found is not None and found.run_id == child


def test_a_wait_cancelled_before_its_deadline_is_not_answered(h: Harness) -> None:
    run = _waiting(h, timeout=60)
    due = h.state(run)["waitingOutput"]["request"]["dueAt"]
    deadlines = Deadlines(h.store, h.runs, wall_ms=Wall(due))
    deadlines.start()
    h.store.close_wait(run)
    assert deadlines.step() == []
    assert h.store.continuation_of(run) is None


# ---- kill -9 of the worker around the wait -------------------------------------


def test_a_crash_before_the_wait_is_recorded_asks_again_on_resume(h: Harness) -> None:
    from tests.helpers.engine import Crash, assert_well_formed, crash_on

    h.write("ship", SHIP.replace("TIMEOUT", "60"))
    run = h.launch("ship", {})
    with pytest.raises(Crash):
        h.execute(run, engine_hook=lambda e: crash_on(e, "run_waiting"))
    assert h.state(run).get("waitingOutput") is None
    assert h.after_crash(run).outcome == "waiting"
    events = assert_well_formed(h.bundle(run))
    assert [e["type"] for e in events].count("run_waiting") == 1
    request = h.state(run)["waitingOutput"]["request"]
    assert request["onTimeout"] == "reject" and isinstance(request["dueAt"], int)
    child = h.answer(run, "approve")
    assert h.execute(child).outcome == "completed"
    assert h.state(child)["lastNode"] == "shipped"


def test_a_crash_right_after_the_wait_is_recorded_keeps_the_request(h: Harness) -> None:
    from tests.helpers.engine import Crash, crash_on

    h.write("ship", SHIP.replace("TIMEOUT", "60"))
    run = h.launch("ship", {})
    with pytest.raises(Crash):
        h.execute(run, engine_hook=lambda e: crash_on(e, "run_waiting", after=True))
    recorded = h.state(run)["waitingOutput"]
    assert h.after_crash(run).outcome == "waiting"
    assert h.state(run)["waitingOutput"] == recorded  # the same deadline, not a new one


def test_a_timeout_answer_whose_continuation_was_cancelled_is_not_given_again(
        h: Harness) -> None:
    run = _waiting(h, timeout=60)
    due = h.state(run)["waitingOutput"]["request"]["dueAt"]
    first = Deadlines(h.store, h.runs, wall_ms=Wall(due))
    first.start()
    assert first.step() == [run]
    child = h.store.continuation_of(run)
    assert child is not None
    h.store.cancel(child.run_id)  # the wait opens again: a person may answer it
    assert [r.run_id for r in h.store.waiting_runs()] == [run]
    again = Deadlines(h.store, h.runs, wall_ms=Wall(due + 60_000))
    again.start()
    assert again.step() == []  # the timeout answered once; it does not answer twice
    assert h.store.continuation_of(run) is None
    person = h.answer(run, "approve")
    assert h.execute(person).outcome == "completed"


def test_a_timeout_answer_to_a_changed_file_fails_its_launch_and_the_run_waits_again(
        h: Harness) -> None:
    run = _waiting(h, timeout=60)
    due = h.state(run)["waitingOutput"]["request"]["dueAt"]
    h.write("ship", SHIP.replace("TIMEOUT", "61"))  # changed since the run started waiting
    deadlines = Deadlines(h.store, h.runs, wall_ms=Wall(due))
    deadlines.start()
    assert deadlines.step() == [run]
    child = h.store.continuation_of(run)
    assert child is not None
    outcome = h.execute(child.run_id)
    assert h.row(child.run_id).state == "failed", outcome
    assert h.row(child.run_id).error_code == "source_changed"
    assert [r.run_id for r in h.store.waiting_runs()] == [run]  # a person may answer it
