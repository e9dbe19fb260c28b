"""Running a composed graph: the child's own view, exits, mount step counts, the trace,
and a crash inside a mount resumed without rerunning anything that finished."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import (
    Workflow,
    checkpoint,
    compute,
    define_workflow,
    edge,
    include,
    included_result,
    switch,
)
from pi_workflows.protocol.store import Store

from tests.helpers.engine import Crash, Direct, assert_well_formed, crash_on, file_lines

_ids = itertools.count(1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "s.sqlite3", lease_ms=3_600_000) as s:
        yield s


def direct(store: Store, tmp_path: Path, wf: Workflow) -> Direct:
    d = Direct(store, tmp_path / "runs", f"20260101T000000Z-c-{next(_ids):08x}", wf, tmp_path)
    d.enqueue()
    return d


def logged(name: str, value: Any = None) -> Any:
    """A compute fn that appends its attempt to ``<project>/<name>.log`` (reruns show)."""
    def fn(ctx: Any) -> Any:
        with open(ctx.project_dir / f"{name}.log", "a") as fh:
            fh.write(f"{ctx.attempt_id}\n")
        return value(ctx) if callable(value) else value
    return fn


def review(max_steps: int = 100) -> Workflow:
    return define_workflow(
        name="review", start_at="score", input=lambda raw: {"n": raw["n"] * 10},
        nodes=[
            compute("score", logged("score", lambda c: {
                "score": c.input["n"], "me": c.node_id, "mount": c.mount,
                "seen": sorted(c.outputs)})),
            compute("ok", logged("ok", lambda c: {"score": c.outputs["score"]["score"],
                                                  "seen": sorted(c.outputs)})),
            compute("bad", logged("bad", {"why": "low"})),
        ],
        edges=[switch("score", "$.score", {10: "ok"}, default="bad")],
        exits={"approved": "ok", "rejected": "bad"}, max_steps=max_steps)


def composed(child: Workflow | None = None, **kw: Any) -> Workflow:
    return define_workflow(
        name="p", start_at="a", nodes=[
            compute("a", logged("a", lambda c: {"n": c.input["n"]})),
            include(child or review(), input=lambda c: c.outputs["a"], as_="review"),
            compute("ship", logged("ship", lambda c: included_result(
                child or review(), c.outputs["review.approved"]))),
            compute("fix", logged("fix", lambda c: c.outputs["review.rejected"])),
        ],
        edges=[edge("a", "review"),
               switch("review.approved", "$.output.score", {10: "ship"}),
               edge("review.rejected", "fix")], **kw)


def test_the_child_sees_its_own_world_and_the_parent_routes_on_its_exit(
        store: Store, tmp_path: Path) -> None:
    d = direct(store, tmp_path, composed())
    engine = d.start({"n": 1})
    assert engine.run() == "completed"
    state = engine.writer.bundle.state()
    out = state["outputs"]
    assert out["review"] == {"n": 10}  # the child's input, through its own input function
    assert out["review/score"] == {"score": 10, "me": "score", "mount": "review", "seen": []}
    assert out["review/ok"] == {"score": 10, "seen": ["score"]}  # local ids, its own only
    assert out["review.approved"] == {"exit": "approved", "output": out["review/ok"]}
    assert state["finalOutput"] == out["review.approved"]
    assert state["steps"] == 4  # a, review/score, review/ok, ship: entry and exit are no steps
    events = assert_well_formed(engine.writer.bundle)
    mounts = [(e["type"], e["nodeId"], e["payload"]) for e in events
              if e["type"].startswith("include_")]
    assert mounts == [
        ("include_entered", "review", {"mount": "review", "workflow": "review",
                                       "next": "review/score"}),
        ("include_exited", "review.approved", {"mount": "review", "exit": "approved",
                                               "next": "ship"}),
    ]
    started = [e["nodeId"] for e in events if e["type"] == "node_started"]
    assert started == ["a", "review/score", "review/ok", "ship"]


def test_the_other_exit_takes_the_other_route(store: Store, tmp_path: Path) -> None:
    d = direct(store, tmp_path, composed())
    engine = d.start({"n": 2})
    assert engine.run() == "completed"
    state = engine.writer.bundle.state()
    assert state["finalOutput"] == {"exit": "rejected", "output": {"why": "low"}}
    assert "ship" not in state["outputs"] and not file_lines(tmp_path / "ship.log")


def test_each_mount_counts_its_own_steps_per_invocation(store: Store, tmp_path: Path) -> None:
    # The child takes 2 steps per invocation; its max_steps=2 holds each time the
    # parent loops back into it.
    wf = define_workflow(
        name="loop", start_at="review", nodes=[
            include(review(max_steps=2), input={"n": 1}, as_="review"),
            compute("count", lambda c: {"again": len(file_lines(c.project_dir / "ok.log")) < 3}),
            compute("bad", lambda c: 0)],
        edges=[edge("review.approved", "count"), edge("review.rejected", "bad"),
               switch("count", "$.again", {True: "review"}, default="bad")])
    engine = direct(store, tmp_path, wf).start({})
    assert engine.run() == "completed"
    assert len(file_lines(tmp_path / "ok.log")) == 3
    state = engine.writer.bundle.state()
    assert state["steps"] == 10 and state.get("mountSteps") == {}
    entered = [e for e in assert_well_formed(engine.writer.bundle)
               if e["type"] == "include_entered"]
    assert len(entered) == 3


def test_a_mount_over_its_max_steps_fails_the_run(store: Store, tmp_path: Path) -> None:
    engine = direct(store, tmp_path, composed(review(max_steps=1))).start({"n": 1})
    assert engine.run() == "failed"
    error = engine.writer.bundle.state()["error"]
    assert error == {"code": "max_steps_exceeded", "message":
                     "include 'review' reached its max_steps=1 before node 'review/ok'"}


def test_the_parent_max_steps_still_bounds_the_whole_run(store: Store, tmp_path: Path) -> None:
    engine = direct(store, tmp_path, composed(max_steps=2)).start({"n": 1})
    assert engine.run() == "failed"
    error = engine.writer.bundle.state()["error"]
    assert error["message"] == "the run reached max_steps=2 before node 'review/ok'"


def test_nested_mounts_scope_each_level(store: Store, tmp_path: Path) -> None:
    middle = define_workflow(
        name="middle", start_at="prep",
        nodes=[compute("prep", lambda c: {"n": c.input["k"]}),
               include(review(), input=lambda c: c.outputs["prep"], as_="inner"),
               compute("end", lambda c: {"got": c.outputs["inner.approved"]["output"],
                                         "mount": c.mount, "seen": sorted(c.outputs)})],
        edges=[edge("prep", "inner"), edge("inner.approved", "end"),
               edge("inner.rejected", "end")],
        exits={"done": "end"})
    wf = define_workflow(name="o", start_at="outer", nodes=[
        include(middle, input={"k": 1}, as_="outer"),
        compute("last", lambda c: c.outputs["outer.done"])], edges=[edge("outer.done", "last")])
    engine = direct(store, tmp_path, wf).start({})
    assert engine.run() == "completed"
    out = engine.writer.bundle.state()["outputs"]
    assert out["outer/inner/score"]["mount"] == "outer/inner"
    assert out["outer/end"]["mount"] == "outer"
    assert out["outer/end"]["seen"] == ["inner", "inner.approved", "inner/ok", "inner/score",
                                        "prep"]
    assert out["last"] == {"exit": "done", "output": out["outer/end"]}


def test_an_include_input_that_fails_fails_the_run(store: Store, tmp_path: Path) -> None:
    def boom(ctx: Any) -> Any:
        raise RuntimeError("no input today")
    wf = define_workflow(name="p", start_at="review", nodes=[
        include(review(), input=boom, as_="review"), compute("x", lambda c: 0)],
        edges=[edge("review.approved", "x"), edge("review.rejected", "x")])
    engine = direct(store, tmp_path, wf).start({})
    assert engine.run() == "failed"
    error = engine.writer.bundle.state()["error"]
    assert error["code"] == "node_error"
    assert error["message"] == "node 'review': RuntimeError: no input today"
    refused = define_workflow(name="p", start_at="review", nodes=[
        include(review(), input={"m": 1}, as_="review"), compute("x", lambda c: 0)],
        edges=[edge("review.approved", "x"), edge("review.rejected", "x")])
    engine = direct(store, tmp_path, refused).start({})
    assert engine.run() == "failed"
    assert engine.writer.bundle.state()["error"]["message"] == (
        "node 'review': ValueError: the input function of 'review' refused the include's"
        " input: KeyError: 'n'")


def test_included_result_refuses_a_wrong_shape_at_run_time(store: Store,
                                                           tmp_path: Path) -> None:
    wf = define_workflow(name="p", start_at="a", nodes=[
        compute("a", lambda c: {"exit": "nope", "output": 1}),
        compute("b", lambda c: included_result(review(), c.outputs["a"]))],
        edges=[edge("a", "b")])
    engine = direct(store, tmp_path, wf).start({})
    assert engine.run() == "failed"
    assert "exit 'nope' is not one of its exits (approved, rejected)" in \
        engine.writer.bundle.state()["error"]["message"]


# --- kill -9 and resume inside a mount ---------------------------------------------


@pytest.mark.parametrize(("event", "node", "after"), [
    ("node_started", "review/ok", True),  # killed while review/ok runs
    ("node_finished", "review/score", True),
    ("include_entered", "review", True),
    ("include_entered", "review", False),
    ("include_exited", "review.approved", False),
    ("include_exited", "review.approved", True),
])
def test_a_run_killed_inside_a_mount_resumes_inside_it(
        store: Store, tmp_path: Path, event: str, node: str, after: bool) -> None:
    d = direct(store, tmp_path, composed())
    engine = d.start({"n": 1})
    crash_on(engine, event, node_id=node, after=after)
    with pytest.raises(Crash):
        engine.run()
    before = engine.writer.bundle.state()
    done = {e["nodeId"] for e in assert_well_formed(engine.writer.bundle)
            if e["type"] == "node_finished"}
    resumed = d.resume()
    assert resumed.run() == "completed"
    events = assert_well_formed(resumed.writer.bundle)
    boundary = next(i for i, e in enumerate(events) if e["type"] == "run_resumed")
    assert events[boundary]["payload"]["resumePoint"] == before["currentNode"]
    again = [e for e in events[boundary:] if e["type"] == "node_started"]
    assert not {e["nodeId"] for e in again} & done  # nothing that finished reruns
    if before.get("currentAttempt"):  # killed while a node of the mount ran
        first = again[0]
        assert (first["nodeId"], first["payload"]["rerun"]) == (node, True)
        # The same step, and the same count for the mount: the rerun is not a new step.
        assert first["payload"]["step"] == before["steps"]
    state = resumed.writer.bundle.state()
    assert state["steps"] == 4 and state["finalOutput"]["exit"] == "approved"
    for name in ("a", "score", "ship"):
        assert len(file_lines(tmp_path / f"{name}.log")) == 1, name
    assert [e["type"] for e in events].count("include_entered") == 1
    assert [e["type"] for e in events].count("include_exited") == 1


def test_the_mount_count_survives_a_crash_exactly(store: Store, tmp_path: Path) -> None:
    d = direct(store, tmp_path, composed(review(max_steps=2)))
    engine = d.start({"n": 1})
    crash_on(engine, "node_started", node_id="review/ok", after=True)
    with pytest.raises(Crash):
        engine.run()
    assert engine.writer.bundle.state()["mountSteps"] == {"review": 2}
    resumed = d.resume()
    # The interrupted attempt is redone inside the limit: a rerun is not a new step.
    assert resumed.run() == "completed"


def test_a_checkpoint_inside_a_mount_waits_and_its_count_carries(
        store: Store, tmp_path: Path) -> None:
    child = define_workflow(
        name="ask", start_at="q", nodes=[checkpoint("q", summary=lambda c: f"n={c.input}"),
                                         compute("use", lambda c: {"answer": c.outputs["q"]})],
        edges=[edge("q", "use")], exits={"done": "use"})
    wf = define_workflow(name="p", start_at="ask", nodes=[
        include(child, input=5, as_="ask"), compute("end", lambda c: c.outputs["ask.done"])],
        edges=[edge("ask.done", "end")])
    engine = direct(store, tmp_path, wf).start({})
    assert engine.run() == "waiting"
    state = engine.writer.bundle.state()
    assert state["waitingNode"] == "ask/q" and state["waitingOutput"] == {"summary": "n=5"}
    assert state["mountSteps"] == {"ask": 1}


ASKING = """
from pi_workflows import include

def child():
    return define_workflow(
        name="ask", start_at="q",
        nodes=[checkpoint("q", summary=lambda c: "n=" + str(c.input["n"])),
               compute("use", lambda c: {"answer": c.outputs["q"], "n": c.input["n"]})],
        edges=[edge("q", "use")], exits={"done": "use"}, max_steps=MAX)

workflow = define_workflow(
    start_at="ask",
    nodes=[include(child(), input={"n": 5}, as_="ask"),
           compute("end", lambda c: c.outputs["ask.done"])],
    edges=[edge("ask.done", "end")])
"""


def test_an_answer_continues_inside_the_mount(h: Any) -> None:
    h.write("asking", "MAX = 2\n" + ASKING)
    parent = h.launch("asking")
    assert h.execute(parent).outcome == "waiting"
    assert h.state(parent)["waitingNode"] == "ask/q"
    child = h.answer(parent, "yes")
    assert h.execute(child).outcome == "completed"
    state = h.state(child)
    assert state["finalOutput"] == {"exit": "done", "output": {"answer": "yes", "n": 5}}
    # The continuation carried the mount's count: q (1) in the parent, use (2) here,
    # within the child's max_steps=2.
    assert state["steps"] == 3 and state["mountSteps"] == {}


def test_the_mount_count_carries_into_the_continuation(h: Any) -> None:
    h.write("asking", "MAX = 1\n" + ASKING)  # q used the one step; use may not start
    parent = h.launch("asking")
    assert h.execute(parent).outcome == "waiting"
    child = h.answer(parent, "yes")
    assert h.execute(child).outcome == "failed"
    assert h.state(child)["error"]["message"] == (
        "include 'ask' reached its max_steps=1 before node 'ask/use'")


def test_every_event_of_a_node_inside_a_mount_names_it_by_its_mount_path(
        store: Store, tmp_path: Path) -> None:
    # An action's effect records and an agent's notes (prompt sent, output replaced)
    # name the node as the trace, ``logs`` and the views know it: ``m/work``, not
    # the child's own id, which the parent's graph may not have, or have for another.
    from pi_workflows import Replace, action, agent
    from pi_workflows.worker.agent import ScriptedExecutor

    child = define_workflow(
        name="child", start_at="work", nodes=[
            action("work", lambda c: {"done": True}, idempotent=True),
            agent("pick", "pick one", validate=lambda out, c: Replace({"picked": out})),
        ],
        edges=[edge("work", "pick")], exits={"done": "pick"})
    wf = define_workflow(name="p", start_at="m", nodes=[
        include(child, input={}, as_="m"), compute("end", lambda c: c.outputs["m.done"])],
        edges=[edge("m.done", "end")])
    engine = direct(store, tmp_path, wf).start({})
    engine.agent = ScriptedExecutor({"m/pick": [("update", "half way"), {"x": 1}]})
    assert engine.run() == "completed"
    assert engine.writer.bundle.state()["outputs"]["m/pick"] == {"picked": {"x": 1}}
    events = assert_well_formed(engine.writer.bundle)
    named = {(e["type"], e["nodeId"]) for e in events if e["type"] in (
        "effect_recorded", "agent_prompt_sent", "agent_output_replaced", "update_published")}
    assert named == {("effect_recorded", "m/work"), ("agent_prompt_sent", "m/pick"),
                     ("agent_output_replaced", "m/pick"), ("update_published", "m/pick")}
