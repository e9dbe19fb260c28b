"""A run's title (resolved once at start), node status details, ``ctx.state`` and
``ctx.answer``, through the queue and the engine as a runner runs them (issue 23,
items 2, 5 and 8)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pi_workflows.protocol.definitions.graph import MAX_TITLE_CHARS

from tests.helpers.engine import GATES, Crash, Harness, assert_well_formed, crash_on

pytestmark = pytest.mark.timeout(60)

TITLED = """
def title(value):
    h.GATES.setdefault("titles", []).append(value)
    gate = h.GATES.get("slow")
    if gate is not None:
        gate.wait(20)
    if h.GATES.get("raise"):
        raise RuntimeError("secret " + value["who"])
    return h.GATES.get("returns", "Greet " + value["who"])

def seen(ctx):
    hold = h.GATES.get("hold")
    if hold is not None:
        h.GATES["inside"].set()
        hold.wait(20)
    info = ctx.state
    return {"title": info.title, "steps": info.steps, "run": info.run_id,
            "started": info.started_at, "answer": ctx.answer}

workflow = define_workflow(
    input=lambda raw: {"who": str(raw.get("task") or raw.get("who") or "nobody").upper()},
    title=title,
    start_at="first",
    nodes=[compute("first", seen, status_detail="warming up"),
           compute("second", seen, status_detail=lambda ctx: f"after {ctx.state.steps - 1}")],
    edges=[edge("first", "second")],
)
"""


def _started(h: Harness, run_id: str) -> dict[str, Any]:
    events = assert_well_formed(h.bundle(run_id))
    return dict(events[0]["payload"])


def test_a_title_function_of_the_parsed_input_is_resolved_once_and_recorded(
        h: Harness) -> None:
    h.write("greet", TITLED)
    run_id = h.launch("greet", {"who": "ada"})
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["title"] == "Greet ADA"  # the function saw the parsed input
    assert GATES["titles"] == [{"who": "ADA"}]
    assert _started(h, run_id)["title"] == "Greet ADA"
    first, second = state["outputs"]["first"], state["outputs"]["second"]
    assert first["title"] == second["title"] == "Greet ADA"
    assert (first["steps"], second["steps"]) == (1, 2)
    assert first["run"] == run_id and first["answer"] is None
    assert first["started"] == state["startedAt"] and first["started"].endswith("Z")


def test_a_resume_never_resolves_the_title_again(h: Harness) -> None:
    h.write("greet", TITLED)
    run_id = h.launch("greet", {"who": "ada"})
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "node_finished", node_id="second"))
    GATES["returns"] = "another title"  # were it asked again, it would say so
    assert h.after_crash(run_id).outcome == "completed"
    assert len(GATES["titles"]) == 1
    assert h.state(run_id)["title"] == "Greet ADA"
    assert h.state(run_id)["outputs"]["second"]["title"] == "Greet ADA"


def test_a_slow_title_function_leaves_the_run_untitled_and_the_run_goes_on(
        h: Harness) -> None:
    h.write("greet", TITLED)
    GATES["slow"] = threading.Event()
    run_id = h.launch("greet", {"who": "ada"})

    def short(engine: Any) -> None:
        engine.title_timeout_s = 0.2

    assert h.execute(run_id, engine_hook=short).outcome == "completed"
    state = h.state(run_id)
    assert "title" not in state and state["outputs"]["first"]["title"] is None
    started = _started(h, run_id)
    assert started["titleError"] == "node_timed_out" and "title" not in started


def test_a_raising_title_function_is_noted_by_its_code_only(h: Harness) -> None:
    h.write("greet", TITLED)
    GATES["raise"] = True
    run_id = h.launch("greet", {"who": "ada"})
    assert h.execute(run_id).outcome == "completed"
    started = _started(h, run_id)
    assert started["titleError"] == "node_error"
    assert "secret" not in h.bundle(run_id).trace_path.read_text()


@pytest.mark.parametrize(("returns", "title", "error"), [
    ("a\n  two-line   title ", "a two-line title", None),
    ("x" * (MAX_TITLE_CHARS + 50), "x" * (MAX_TITLE_CHARS - 1) + "…", None),
    (42, None, "not_text: it returned int, not text"),
    (None, None, None),
])
def test_a_title_is_one_line_within_its_bound(h: Harness, returns: object, title: str | None,
                                              error: str | None) -> None:
    h.write("greet", TITLED)
    GATES["returns"] = returns
    run_id = h.launch("greet", {"who": "ada"})
    assert h.execute(run_id).outcome == "completed"
    assert h.state(run_id).get("title") == title
    assert _started(h, run_id).get("titleError") == error


def test_a_status_detail_is_recorded_on_node_started_and_only_while_the_node_runs(
        h: Harness) -> None:
    h.write("greet", TITLED)
    GATES.update(hold=threading.Event(), inside=threading.Event())
    run_id = h.launch("greet", {"who": "ada"})
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("out", h.execute(run_id)))
    worker.start()
    assert GATES["inside"].wait(20)
    assert h.bundle(run_id).raw_state()["statusDetail"] == "warming up"
    GATES["hold"].set()
    worker.join(30)
    assert box["out"].outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    details = [e["payload"].get("statusDetail") for e in events if e["type"] == "node_started"]
    assert details == ["warming up", "after 1"]  # fn(ctx): it saw ctx.state
    assert h.state(run_id).get("statusDetail") is None  # the run is over: nothing runs


def test_a_failing_status_detail_is_noted_and_the_node_runs_anyway(h: Harness) -> None:
    h.write("detail", """
        def broken(ctx):
            raise ValueError("private " + ctx.input["who"])

        workflow = define_workflow(
            start_at="a",
            nodes=[compute("a", lambda ctx: 1, status_detail=broken),
                   compute("b", lambda ctx: 2, status_detail=lambda ctx: 7)],
            edges=[edge("a", "b")],
        )
    """)
    run_id = h.launch("detail", {"who": "ada"})
    assert h.execute(run_id).outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    started = [e["payload"] for e in events if e["type"] == "node_started"]
    assert started[0]["statusDetailError"] == "node_error"
    assert started[1]["statusDetailError"].startswith("not_text")
    assert "statusDetail" not in started[0] and "private" not in str(events)


ASKED = """
def seen(ctx):
    return {"answer": ctx.answer, "title": ctx.state.title, "started": ctx.state.started_at,
            "steps": ctx.state.steps}

workflow = define_workflow(
    title=lambda value: "Plan " + value["name"],
    start_at="draft",
    nodes=[
        compute("draft", seen),
        checkpoint("approve"),
        compute("build", seen),
        checkpoint("confirm"),
        compute("ship", seen),
    ],
    edges=[edge("draft", "approve"), edge("approve", "build"), edge("build", "confirm"),
           edge("confirm", "ship")],
)
"""


def test_a_continuation_keeps_its_chain_title_and_every_node_sees_its_answer(
        h: Harness) -> None:
    h.write("plan", ASKED)
    parent = h.launch("plan", {"name": "x"})
    assert h.execute(parent).outcome == "waiting"
    assert h.state(parent)["outputs"]["draft"]["answer"] is None  # not a continuation
    child = h.answer(parent, {"ok": True})
    assert h.execute(child).outcome == "waiting"
    grandchild = h.answer(child, "ship it")
    assert h.execute(grandchild).outcome == "completed"
    first, second, third = (h.state(r) for r in (parent, child, grandchild))
    assert first["title"] == second["title"] == third["title"] == "Plan x"
    assert first["startedAt"] == second["startedAt"] == third["startedAt"]
    assert _started(h, child)["title"] == "Plan x"
    assert "titleError" not in _started(h, child)
    assert second["outputs"]["build"]["answer"] == {"ok": True}
    # A continuation of a continuation: its own answer, and the earlier one stays
    # the first checkpoint's output.
    assert third["outputs"]["ship"]["answer"] == "ship it"
    assert third["outputs"]["approve"] == {"ok": True}
    assert third["outputs"]["confirm"] == "ship it"
    assert third["outputs"]["ship"]["steps"] == 5



def test_a_crash_before_run_started_keeps_the_recorded_title(h: Harness) -> None:
    h.write("greet", TITLED)
    run_id = h.launch("greet", {"who": "ada"})
    with pytest.raises(Crash):  # the bundle is laid out, its first event never written
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "run_started"))
    assert h.bundle(run_id).raw_state()["title"] == "Greet ADA"
    GATES["returns"] = "another title"
    assert h.after_crash(run_id).outcome == "completed"
    assert _started(h, run_id)["title"] == "Greet ADA" and len(GATES["titles"]) == 1


def test_a_fork_keeps_its_original_title(h: Harness) -> None:
    from pi_workflows.supervisor.session.fork import fork_run

    h.write("greet", TITLED.replace('return {"title"', 'assert not h.GATES.get("fail")\n'
                                    '    return {"title"'))
    GATES["fail"] = True
    run_id = h.launch("greet", {"who": "ada"})
    assert h.execute(run_id).outcome == "failed"
    GATES.update(fail=False, returns="another title")
    _, row = fork_run(h.store, h.runs, h.row(run_id), None, fsync="never")
    assert _started(h, row.run_id)["title"] == "Greet ADA"
    assert h.execute(row.run_id).outcome == "completed"
    state = h.state(row.run_id)
    assert state["title"] == "Greet ADA" and state["outputs"]["first"]["title"] == "Greet ADA"
    assert len(GATES["titles"]) == 1
