"""Forks (``pi-workflows fork``): the node chosen, what carries, what is refused.

Driven through the real store, real bundles and ``execute_claim``, as a
runner does (``tests.helpers.engine.Harness``).
"""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows.protocol.errors import UsageError
from pi_workflows.protocol.store import QueueRow
from pi_workflows.supervisor.session.fork import carry, fork_run
from pi_workflows.supervisor.views.nextcmd import failed_node

from tests.helpers.engine import Harness, assert_well_formed, bundle_bytes, file_lines, types_of

pytestmark = pytest.mark.timeout(60)

# fetch -> build -> ship; build fails while the file `broken` exists. Every
# node appends a line to <node>.count, so a test can tell what ran again.
PIPE = """
def counted(name, body):
    def fn(ctx):
        with open(ctx.project_dir / f"{name}.count", "a") as fh:
            fh.write(ctx.attempt_id + "\\n")
        return body(ctx)
    return fn

def build(ctx):
    if (ctx.project_dir / "broken").exists():
        raise RuntimeError("the build is broken")
    return {"built": ctx.outputs["fetch"]["data"][:3]}

workflow = define_workflow(
    start_at="fetch",
    nodes=[
        compute("fetch", counted("fetch", lambda ctx: {"data": "d" * ctx.input["size"]})),
        compute("build", counted("build", build)),
        compute("ship", counted("ship", lambda ctx: {"shipped": ctx.outputs["build"],
                                                     "seen": sorted(ctx.outputs)})),
    ],
    edges=[edge("fetch", "build"), edge("build", "ship")],
)
"""


def _failed_at_build(h: Harness, size: int = 5000) -> str:
    h.write("pipe", PIPE)
    (h.project / "broken").write_text("yes\n")
    run_id = h.launch("pipe", {"size": size})  # 5000 bytes: an output held in an artifact
    assert h.execute(run_id).outcome == "failed"
    return run_id


def _fork(h: Harness, run_id: str, node: str | None = None, **kwargs: Any) -> str:
    _, row = fork_run(h.store, h.runs, h.row(run_id), node, fsync="never", **kwargs)
    return row.run_id


def _nothing_written(h: Harness, before: tuple[list[str], list[QueueRow]]) -> bool:
    return (sorted(p.name for p in h.runs.iterdir()), h.store.list_runs()) == before


def _snapshot(h: Harness) -> tuple[list[str], list[QueueRow]]:
    return sorted(p.name for p in h.runs.iterdir()), h.store.list_runs()


def test_a_fork_of_a_failed_run_starts_at_the_failed_node_with_what_came_before(
        h: Harness) -> None:
    original = _failed_at_build(h)
    before = bundle_bytes(h.bundle(original))
    (h.project / "broken").unlink()  # the cause, fixed

    fork = _fork(h, original, notify_session="s1")
    row = h.row(fork)
    assert (row.state, row.forked_from, row.fork_node) == ("queued", original, "build")
    assert row.notify_session == "s1" and row.origin_session is None
    assert not row.has_private_input  # the fork's bundle holds the input
    assert h.store.forks_of([original, fork]) == {original: [fork]}
    laid = h.state(fork)
    assert laid["outputs"] == {"fetch": {"data": "d" * 5000}}
    assert (laid["currentNode"], laid["steps"], laid["forkedFrom"]) == ("build", 1, original)

    assert h.execute(fork).outcome == "completed"
    state = h.state(fork)
    assert state["finalOutput"] == {"shipped": {"built": "ddd"}, "seen": ["build", "fetch"]}
    assert state["input"] == {"size": 5000} and state["steps"] == 3
    assert len(file_lines(h.project / "fetch.count")) == 1  # never run again
    assert len(file_lines(h.project / "build.count")) == 2  # once failing, once in the fork
    events = assert_well_formed(h.bundle(fork))
    assert types_of(events)[:3] == ["run_started", "run_resumed", "node_started"]
    started = events[0]["payload"]
    assert started["forkedFrom"] == original and started["forkNode"] == "build"
    assert started["carriedNodes"] == ["fetch"] and started["carriedSteps"] == 1
    assert started["sourceMismatch"] is None and started["forced"] is False
    assert events[2]["nodeId"] == "build" and events[2]["payload"] == {"step": 2, "rerun": False}
    manifest = h.bundle(fork).manifest()
    assert (manifest["forkedFrom"], manifest["forkNode"]) == (original, "build")
    assert bundle_bytes(h.bundle(original)) == before  # the original is only read


def test_a_completed_run_needs_from_and_forks_from_any_node(h: Harness) -> None:
    h.write("pipe", PIPE)
    run_id = h.launch("pipe", {"size": 3})
    assert h.execute(run_id).outcome == "completed"
    before = _snapshot(h)
    with pytest.raises(UsageError) as info:
        _fork(h, run_id)
    assert info.value.code == "node_required" and "--from" in info.value.message
    assert "fetch, build, ship" in info.value.message and _nothing_written(h, before)

    from_ship = _fork(h, run_id, "ship")
    assert h.state(from_ship)["outputs"] == {"fetch": {"data": "ddd"}, "build": {"built": "ddd"}}
    from_start = _fork(h, run_id, "fetch")
    assert (h.state(from_start)["outputs"], h.state(from_start)["steps"]) == ({}, 0)
    assert h.execute(from_ship).outcome == "completed"
    assert len(file_lines(h.project / "build.count")) == 1
    assert len(file_lines(h.project / "ship.count")) == 2
    assert h.store.forks_of([run_id]) == {run_id: [from_ship, from_start]}


def test_unknown_node_unsettled_and_waiting_runs_are_refused_and_nothing_is_written(
        h: Harness) -> None:
    original = _failed_at_build(h)
    h.write("wait", 'workflow = define_workflow(start_at="ask", nodes=[checkpoint("ask")])')
    waiting = h.launch("wait")
    assert h.execute(waiting).outcome == "waiting"
    queued = h.launch("pipe", {"size": 1})
    before = _snapshot(h)
    cases = [(original, "deploy", "node_unknown", "its nodes are: fetch, build, ship"),
             (queued, None, "not_settled", "is queued"),
             (waiting, None, "run_waiting", "pi-workflows answer"),
             (waiting, "ask", "run_waiting", "not forked")]
    for run_id, node, code, text in cases:
        with pytest.raises(UsageError) as info:
            _fork(h, run_id, node)
        assert info.value.code == code and text in info.value.message, info.value.message
    assert _nothing_written(h, before)
    h.store.close_wait(waiting)  # `cancel` of the waiting run: now it is over
    assert h.state(_fork(h, waiting, "ask"))["currentNode"] == "ask"


def test_a_changed_workflow_file_needs_force_and_is_recorded(h: Harness) -> None:
    original = _failed_at_build(h)
    path = h.workflows / "pipe.workflow.py"
    path.write_text(path.read_text().replace('raise RuntimeError("the build is broken")',
                                             'pass'))
    before = _snapshot(h)
    with pytest.raises(UsageError) as info:
        _fork(h, original)
    assert info.value.code == "source_changed" and "--force" in info.value.message
    assert _nothing_written(h, before)

    fork = _fork(h, original, force=True)
    started = h.bundle(fork).scan().events[0]["payload"]
    pinned = h.bundle(original).manifest()
    mismatch = started["sourceMismatch"]
    assert started["forced"] is True
    assert mismatch["expectedSha256"] == pinned["source"]["sha256"] != mismatch["actualSha256"]
    # The digest names callables, not their code: only the file's hash tells this change.
    assert mismatch["expectedDigest"] == pinned["digest"] == mismatch["actualDigest"]
    assert h.bundle(fork).manifest()["source"]["sha256"] == mismatch["actualSha256"]
    assert h.row(fork).source_sha256 == mismatch["actualSha256"]
    assert h.execute(fork).outcome == "completed"  # the broken file stays: the new code runs


# ---- the choice of node and what carries, on traces written by hand ----------------


def _ev(kind: str, node: str | None = None, **payload: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": kind, "payload": payload}
    if node is not None:
        event["nodeId"] = node
    return event


def _ok(node: str, output: Any) -> dict[str, Any]:
    return _ev("node_finished", node, output=output, result={"outcome": "ok"})


def _failed(node: str) -> dict[str, Any]:
    return _ev("node_failed", node, result={"outcome": "failed", "errorCode": "node_error"})


def test_the_default_node_is_where_the_failure_ended_the_run() -> None:
    start = _ev("run_started")
    assert failed_node([start, _ev("node_started", "a", step=1), _failed("a")]) == "a"
    # Left open: the run failed while the node ran (a crash loop).
    assert failed_node([start, _ev("node_started", "a", step=1), _ok("a", 1),
                        _ev("node_started", "b", step=2)]) == "b"
    # Interrupted, resumed, then indeterminate: the node whose attempt failed.
    assert failed_node([start, _ev("node_started", "e", step=1), _ev("run_resumed"),
                        _ev("node_started", "e", step=1, rerun=True), _failed("e")]) == "e"
    # A failure a switch routed on, then a node that finished: between nodes.
    assert failed_node([start, _ev("node_started", "a", step=1), _failed("a"),
                        _ev("node_started", "b", step=2), _ok("b", 2)]) is None


def test_a_loop_carries_the_state_before_the_nodes_last_attempt() -> None:
    # a -> b -> c -> b -> c(failed): b and c ran twice.
    events = [_ev("run_started"),
              _ev("node_started", "a", step=1), _ok("a", "a1"),
              _ev("node_started", "b", step=2), _ok("b", "b1"),
              _ev("node_started", "c", step=3), _ok("c", "c1"),
              _ev("node_started", "b", step=4), _ok("b", "b2"),
              _ev("node_started", "c", step=5), _failed("c")]
    final: Any = {"outputs": {"a": "a1", "b": "b2", "c": "c1"}, "steps": 5,
                  "results": {"a": {"outcome": "ok"}, "b": {"outcome": "ok"},
                              "c": {"outcome": "failed"}}}
    at_c = carry(events, final, "c")
    assert (at_c.outputs, at_c.steps, at_c.last_node) == ({"a": "a1", "b": "b2", "c": "c1"}, 4,
                                                          "b")
    assert at_c.results["c"] == {"outcome": "ok"}  # its first attempt's, not the failure
    at_b = carry(events, final, "b")
    assert (at_b.outputs, at_b.steps, at_b.last_node) == ({"a": "a1", "b": "b1", "c": "c1"}, 3,
                                                          "c")
    never = carry(events, final, "d")  # a node the run never reached
    assert (never.outputs, never.steps) == (final["outputs"], 5)


CHAIN = """
def build(ctx):
    if (ctx.project_dir / "broken").exists():
        raise RuntimeError("the build is broken")
    return {"built": [ctx.outputs["draft"], ctx.outputs["approve"]]}

workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {"plan": "p" * 5000}),
        checkpoint("approve"),
        compute("build", build),
    ],
    edges=[edge("draft", "approve"), edge("approve", "build")],
)
"""


def test_a_chain_carries_by_its_whole_history(h: Harness) -> None:
    """Nodes that ran in a continuation's parent, or before a fork's node, count as earlier."""
    h.write("chain", CHAIN)
    (h.project / "broken").write_text("yes\n")
    parent = h.launch("chain")
    assert h.execute(parent).outcome == "waiting"
    child = h.answer(parent, "ok")
    assert h.execute(child).outcome == "failed"
    plan = {"plan": "p" * 5000}

    from_draft = h.state(_fork(h, child, "draft"))  # draft ran in the parent only
    assert (from_draft["outputs"], from_draft["steps"]) == ({}, 0)
    first = _fork(h, child)  # build, still broken
    assert h.state(first)["outputs"] == {"draft": plan, "approve": "ok"}
    assert h.execute(first).outcome == "failed"
    again = _fork(h, first, "approve")  # a fork of a fork: history through both
    state = h.state(again)
    assert (state["outputs"], state["steps"], state["forkedFrom"]) == ({"draft": plan}, 1, first)
    assert h.execute(again).outcome == "waiting"  # a fork from a checkpoint waits there again
    assert h.state(again)["waitingNode"] == "approve"


CHECK = """
workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {"plan": "p"}),
        checkpoint("approve", summary=lambda ctx: "approve the plan"),
        compute("build", lambda ctx: {"built": ctx.outputs["approve"]}),
    ],
    edges=[edge("draft", "approve"), edge("approve", "build")],
)
"""


def test_a_fork_of_an_answered_checkpoint_points_at_its_continuation_not_at_answer(
        h: Harness) -> None:
    h.write("check", CHECK)
    parent = h.launch("check", {})
    assert h.execute(parent).outcome == "waiting"
    child = h.answer(parent, "yes")
    before = _snapshot(h)
    with pytest.raises(UsageError) as caught:
        _fork(h, parent)
    message = caught.value.message
    assert caught.value.code == "run_answered" and f"goes on as run {child}" in message
    assert "answer" not in message.replace("was answered", "")  # no command that would fail
    assert f"`pi-workflows watch {child}`" in message  # the continuation has not run yet
    assert _nothing_written(h, before)
    assert h.execute(child).outcome == "completed"
    # A completed run forks only from a named node: the command says so.
    with pytest.raises(UsageError, match=f"`pi-workflows fork {child} --from NODE`") as ended:
        _fork(h, parent)
    assert "watch" not in ended.value.message  # it has ended: fork it now
    assert _fork(h, child, "build")  # and the command it names works


MOUNTED = """
from pi_workflows import include

def child():
    return define_workflow(
    name="child", start_at="s1", max_steps=2,
    nodes=[compute("s1", lambda ctx: 1), compute("s2", lambda ctx: 2),
           compute("s3", lambda ctx: 3)],
    edges=[edge("s1", "s2"), edge("s2", "s3")],
    exits={"done": "s3"})

def done(ctx):
    if (ctx.project_dir / "broken").exists():
        raise RuntimeError("broken")
    return ctx.outputs["m.done"]

workflow = define_workflow(
    start_at="m", nodes=[include(child(), input={}, as_="m"), compute("end", done)],
    edges=[edge("m.done", "end")],
)
"""


def test_a_fork_inside_an_include_keeps_its_step_count_and_none_of_its_later_exits(
        h: Harness) -> None:
    # The child's max_steps=2 holds for the invocation a fork takes up: s1 counted
    # before the fork's node, so s2 is the second step and s3 is refused again.
    h.write("mounted", MOUNTED)
    run_id = h.launch("mounted")
    assert h.execute(run_id).outcome == "failed"
    assert h.state(run_id)["error"]["message"] == (
        "include 'm' reached its max_steps=2 before node 'm/s3'")
    fork = _fork(h, run_id, "m/s2")
    assert h.state(fork).get("mountSteps") == {"m": 1}
    assert h.execute(fork).outcome == "failed"
    assert h.state(fork)["error"]["message"] == (
        "include 'm' reached its max_steps=2 before node 'm/s3'")


def test_a_fork_before_an_include_exit_does_not_carry_the_exit(h: Harness) -> None:
    h.write("mounted", MOUNTED.replace("max_steps=2", "max_steps=9"))
    (h.project / "broken").write_text("yes\n")
    run_id = h.launch("mounted")
    assert h.execute(run_id).outcome == "failed"  # at end, after the exit m.done
    assert "m.done" in h.state(run_id)["outputs"]
    state = h.state(_fork(h, run_id, "m/s3"))
    assert sorted(state["outputs"]) == ["m", "m/s1", "m/s2"]  # m.done was passed after m/s3
    assert sorted(state["results"]) == ["m", "m/s1", "m/s2"]
    assert state.get("mountSteps") == {"m": 2}


DEPLOY = """
def deploy(ctx):
    if (ctx.project_dir / "broken").exists():
        raise RuntimeError("the deploy is broken")
    return {"answer": ctx.answer, "approve": ctx.outputs["approve"]}

workflow = define_workflow(
    start_at="plan",
    nodes=[compute("plan", lambda ctx: {"service": "api"}),
           checkpoint("approve", summary="deploy?"),
           compute("deploy", deploy)],
    edges=[edge("plan", "approve"), edge("approve", "deploy")],
)
"""


def test_a_fork_after_an_answered_checkpoint_sees_the_answer_as_the_run_did(
        h: Harness) -> None:
    # The fork redoes deploy as the continuation ran it: ctx.answer is still "yes"
    # (the docs' deploy example reads it to decide); before the checkpoint, no answer.
    h.write("deploy", DEPLOY)
    (h.project / "broken").write_text("yes\n")
    parent = h.launch("deploy")
    assert h.execute(parent).outcome == "waiting"
    child = h.answer(parent, "yes")
    assert h.execute(child).outcome == "failed"
    (h.project / "broken").unlink()
    fork = _fork(h, child)  # at deploy
    assert h.execute(fork).outcome == "completed"
    assert h.state(fork)["outputs"]["deploy"] == {"answer": "yes", "approve": "yes"}
    again = _fork(h, fork, "approve")  # the answer came after: the fork waits again
    assert h.execute(again).outcome == "waiting"
    assert "answer" not in h.state(again)


def test_a_fork_from_an_include_starts_it_again_with_only_what_came_before(
        h: Harness) -> None:
    # `fork RUN --from m` redoes the whole include: its entry is where the cut is,
    # so nothing it (or anything after it) recorded is carried, nor counted as steps.
    h.write("mounted", MOUNTED.replace("max_steps=2", "max_steps=9"))
    (h.project / "broken").write_text("yes\n")
    run_id = h.launch("mounted")
    assert h.execute(run_id).outcome == "failed"
    state = h.state(_fork(h, run_id, "m"))
    assert (state["outputs"], state["results"], state["steps"]) == ({}, {}, 0)
    assert state.get("mountSteps") is None
    (h.project / "broken").unlink()
    run = _fork(h, run_id, "m")
    assert h.execute(run).outcome == "completed"
    assert h.state(run)["steps"] == 4


AGAIN = """
from pi_workflows import include

def child():
    return define_workflow(name="child", start_at="s1", nodes=[compute("s1", lambda ctx: 1)],
                           exits={"done": "s1"})

def child_input(ctx):
    if "m.done" in ctx.outputs and (ctx.project_dir / "broken").exists():
        raise RuntimeError("no input the second time")
    return {}

workflow = define_workflow(
    start_at="m",
    nodes=[include(child(), input=child_input, as_="m"), compute("count", lambda ctx: 1)],
    edges=[edge("m.done", "count"), edge("count", "m")],
)
"""


def test_a_fork_from_an_include_whose_entry_failed_starts_at_that_failed_pass(
        h: Harness) -> None:
    # The second entry of m failed (its input function raised): its last attempt is
    # that failure, so the fork carries the first pass and count, and starts m again
    # (not at its first pass, and not past the end of the run).
    h.write("again", AGAIN)
    (h.project / "broken").write_text("yes\n")
    run_id = h.launch("again")
    assert h.execute(run_id).outcome == "failed"
    state = h.state(_fork(h, run_id))  # the default node: m, where the run failed
    assert (state["forkNode"], state["steps"]) == ("m", 2)
    # m itself is passed again at once (its input worked out anew): not carried.
    assert sorted(state["outputs"]) == ["count", "m.done", "m/s1"]
    assert state["currentNode"] == "m" and "m" not in state["results"]
