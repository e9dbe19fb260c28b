"""Node behaviour at run time: timeouts, max_steps, routing, notify, checkpoint."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import pytest
from pi_workflows.worker.agent import ScriptedExecutor
from pi_workflows.worker.control import Control
from pi_workflows.worker.engine import Engine

from tests.helpers.engine import (
    GATES,
    Crash,
    Harness,
    assert_well_formed,
    crash_on,
    types_of,
)
from tests.helpers.processes import alive
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

STUBBORN = """
def stubborn(ctx):
    h.GATES["entered"].set()
    # Ignores ctx.cancel: only the test can let it go.
    while not h.GATES["release"].wait(0.01):
        pass
    h.GATES["exited"].set()
    return {{"never": "used"}}

workflow = define_workflow(
    start_at="slow",
    nodes=[compute("slow", stubborn, timeout=0.2){extra}],
    edges=[{edges}],
)
"""


def _stubborn_gates() -> None:
    for name in ("entered", "release", "exited"):
        GATES[name] = threading.Event()


def _short_grace(engine: Engine) -> None:
    engine.stop_grace_s = 0.2


def test_a_callable_that_ignores_cancel_is_abandoned_and_the_run_times_out(
        h: Harness) -> None:
    _stubborn_gates()
    h.write("slow", STUBBORN.format(edges="", extra=""))
    run_id = h.launch("slow")
    out = h.execute(run_id, engine_hook=_short_grace)
    # The engine moved on while the callable still runs: it was abandoned.
    assert GATES["entered"].is_set() and not GATES["exited"].is_set()
    assert (out.outcome, out.error_code) == ("timed_out", "node_timed_out")
    state = h.state(run_id)
    assert state["status"] == "timed_out"
    assert state["results"]["slow"]["outcome"] == "timed_out"
    assert state["error"]["code"] == "node_timed_out"
    assert "slow" not in state["outputs"]
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("failed", "node_timed_out")
    events = assert_well_formed(h.bundle(run_id))
    assert types_of(events)[-2:] == ["node_failed", "run_timed_out"]
    GATES["release"].set()
    assert GATES["exited"].wait(10)


def test_a_timed_out_node_routes_by_result_outcome(h: Harness) -> None:
    _stubborn_gates()
    h.write("slow", STUBBORN.format(
        edges='switch("slow", "$result.outcome", {"timed_out": "recover"})',
        extra=', compute("recover", lambda ctx: {"r": 1})'))
    run_id = h.launch("slow")
    out = h.execute(run_id, engine_hook=_short_grace)
    assert out.outcome == "completed"
    state = h.state(run_id)
    assert state["results"]["slow"]["outcome"] == "timed_out"
    assert state["finalOutput"] == {"r": 1}
    assert h.row(run_id).state == "done"


COOPERATIVE = """
def polite(ctx):
    saw = ctx.cancel.wait(30)
    h.GATES["saw_cancel"].set() if saw else None
    return {"saw": saw}

def patient(ctx):
    return {"cancelled": ctx.cancel.wait(0.4)}

workflow = define_workflow(
    start_at="first",
    timeout=0.1,
    nodes=[
        compute("first", patient, timeout=None),
        compute("second", polite),
        compute("after", lambda ctx: {"seen": ctx.results["second"]["outcome"]}),
    ],
    edges=[edge("first", "second"),
           switch("second", "$result.outcome", {"timed_out": "after"})],
)
"""


def test_cooperative_timeout_and_timeout_none(h: Harness) -> None:
    GATES["saw_cancel"] = threading.Event()
    h.write("coop", COOPERATIVE)
    run_id = h.launch("coop")
    out = h.execute(run_id)
    assert out.outcome == "completed"
    # The callable saw ctx.cancel and returned before the engine moved on.
    assert GATES["saw_cancel"].is_set()
    state = h.state(run_id)
    # timeout=None: no limit, although the workflow default (0.1 s) is shorter.
    assert state["outputs"]["first"] == {"cancelled": False}
    assert state["results"]["second"]["errorCode"] == "node_timed_out"
    assert "second" not in state["outputs"]  # a timed-out attempt has no output
    assert state["finalOutput"] == {"seen": "timed_out"}


CALLABLE_TIMEOUT = """
def limit(ctx):
    return ctx.input["t"]

workflow = define_workflow(
    start_at="wait",
    nodes=[compute("wait", lambda ctx: {"cancelled": ctx.cancel.wait(0.5)}, timeout=limit)],
)
"""


@pytest.mark.parametrize(("limit", "status", "code"), [
    (0.05, "timed_out", "node_timed_out"),
    (None, "completed", None),
    (30, "completed", None),
    (-1, "failed", "timeout_invalid"),
    ("soon", "failed", "timeout_invalid"),
])
def test_a_callable_timeout_is_resolved_per_attempt(h: Harness, limit: object, status: str,
                                                    code: str | None) -> None:
    h.write("ct", CALLABLE_TIMEOUT)
    run_id = h.launch("ct", {"t": limit})
    out = h.execute(run_id)
    state = h.state(run_id)
    assert (state["status"], out.error_code) == (status, code)
    if status == "completed":
        assert state["finalOutput"] == {"cancelled": False}
    else:
        assert state["results"]["wait"]["errorCode"] == code


LOOP = """
def count(ctx):
    i = (ctx.outputs.get("count") or {}).get("i", 0) + 1
    return {"i": i, "done": i >= ctx.input["n"]}

workflow = define_workflow(
    start_at="count",
    max_steps=5,
    nodes=[compute("count", count), compute("end", lambda ctx: ctx.outputs["count"])],
    edges=[switch("count", "$output.done", {True: "end", False: "count"})],
)
"""


def test_a_loop_within_max_steps_completes(h: Harness) -> None:
    h.write("loop", LOOP)
    run_id = h.launch("loop", {"n": 4})
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["steps"] == 5  # count x4 + end: exactly at the limit
    assert state["finalOutput"] == {"i": 4, "done": True}
    started = [e["nodeId"] for e in assert_well_formed(h.bundle(run_id))
               if e["type"] == "node_started"]
    assert started == ["count"] * 4 + ["end"]


def test_a_loop_past_max_steps_fails_the_run(h: Harness) -> None:
    h.write("loop", LOOP)
    run_id = h.launch("loop", {"n": 100})
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "max_steps_exceeded")
    state = h.state(run_id)
    assert state["steps"] == 5
    assert state["outputs"]["count"] == {"i": 5, "done": False}
    events = assert_well_formed(h.bundle(run_id))
    assert types_of(events).count("node_started") == 5
    assert events[-1]["type"] == "run_failed"
    assert events[-1]["payload"]["error"]["code"] == "max_steps_exceeded"
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("failed", "max_steps_exceeded")


ROUTER = """
def boom(ctx):
    raise RuntimeError("no luck")

def shell_fail(ctx):
    raise ValueError("bad")

workflow = define_workflow(
    start_at="pick",
    nodes=[
        compute("pick", lambda ctx: {"kind": ctx.input["kind"]}),
        compute("deep", lambda ctx: {"next": {"hop": [None, 2]}}),
        compute("boom", boom),
        compute("by_output", lambda ctx: {"via": "output"}),
        compute("by_outcome", lambda ctx: {"via": ctx.results["boom"]["outcome"]}),
        compute("by_code", lambda ctx: {"via": ctx.results["boom"]["errorCode"]}),
        compute("other", lambda ctx: {"via": "default"}),
    ],
    edges=[
        switch("pick", "$.kind", {"deep": "deep", "boom": "boom", "code": "boom",
                                  "none": "other"}),
        switch("deep", "$output.next.hop.1", {2: "by_output"}),
        switch("boom", "$result." + h.GATES.get("boom_field", "outcome"),
               {"failed": "by_outcome", "node_error": "by_code"}),
    ],
)
"""


@pytest.mark.parametrize(("kind", "field", "final", "path"), [
    ("deep", "outcome", {"via": "output"}, ["pick", "deep", "by_output"]),
    ("boom", "outcome", {"via": "failed"}, ["pick", "boom", "by_outcome"]),
    ("code", "errorCode", {"via": "node_error"}, ["pick", "boom", "by_code"]),
    ("none", "outcome", {"via": "default"}, ["pick", "other"]),
])
def test_routing_on_all_three_switch_forms(h: Harness, kind: str, field: str,
                                           final: dict[str, str], path: list[str]) -> None:
    GATES["boom_field"] = field
    h.write("router", ROUTER)
    run_id = h.launch("router", {"kind": kind})
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["finalOutput"] == final
    events = assert_well_formed(h.bundle(run_id))
    assert [e["nodeId"] for e in events if e["type"] == "node_started"] == path
    if kind in ("boom", "code"):
        failed = [e for e in events if e["type"] == "node_failed"]
        assert failed[0]["payload"]["result"]["errorCode"] == "node_error"
        assert failed[0]["payload"]["next"] == path[-1]
        assert h.row(run_id).state == "done"


@pytest.mark.parametrize("kind", ["unknown", 7])
def test_a_switch_without_a_matching_case_fails_the_run(h: Harness, kind: object) -> None:
    h.write("router", ROUTER)
    run_id = h.launch("router", {"kind": kind})
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "routing_failed")
    state = h.state(run_id)
    assert state["error"]["code"] == "routing_failed"
    assert state["outputs"]["pick"] == {"kind": kind}  # the node itself succeeded
    events = assert_well_formed(h.bundle(run_id))
    assert types_of(events)[-2:] == ["node_finished", "run_failed"]
    assert (h.row(run_id).state, h.row(run_id).error_code) == ("failed", "routing_failed")


def test_a_switch_path_with_no_value_fails_the_run(h: Harness) -> None:
    h.write("holes", """
        workflow = define_workflow(
            start_at="a",
            nodes=[compute("a", lambda ctx: {"x": 1}), compute("b", lambda ctx: 1)],
            edges=[switch("a", "$output.missing.key", {1: "b"}, default="b")],
        )
    """)
    run_id = h.launch("holes")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "routing_failed")
    assert "missing" in h.state(run_id)["error"]["message"]


def test_an_unrouted_failure_fails_the_run_with_the_node_error(h: Harness) -> None:
    h.write("plain", """
        def boom(ctx):
            raise RuntimeError("no luck")

        workflow = define_workflow(
            start_at="a",
            nodes=[compute("a", boom), compute("b", lambda ctx: 1)],
            edges=[edge("a", "b")],
        )
    """)
    run_id = h.launch("plain")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "node_error")
    assert "no luck" in h.state(run_id)["error"]["message"]
    assert "b" not in h.state(run_id)["results"]


NOTIFY = """
workflow = define_workflow(
    start_at="hello",
    nodes=[notify("hello", lambda ctx: "hello " + ctx.input["who"]),
           notify("bye", "all done", kind="final")],
    edges=[edge("hello", "bye")],
)
"""


def _notifications(h: Harness) -> list[tuple[str, str, str, int, str, str]]:
    conn = sqlite3.connect(f"file:{h.store_path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT session_id, run_id, node_id, idx, kind, payload"
                            " FROM workflow_notifications ORDER BY id").fetchall()
    finally:
        conn.close()


def test_notify_outputs_and_a_notification_for_the_origin_session(h: Harness) -> None:
    h.write("greet", NOTIFY)
    run_id = h.launch("greet", {"who": "bob"}, session="sess-1")
    assert h.execute(run_id, session="sess-1").outcome == "completed"
    state = h.state(run_id)
    assert state["outputs"]["hello"] == {"message": "hello bob", "kind": "progress"}
    assert state["finalOutput"] == {"message": "all done", "kind": "final"}
    _token, rows = h.store.claim_notifications("sess-1")
    assert [(r.run_id, r.node_id, r.idx, r.kind, r.payload["message"]) for r in rows] == [
        (run_id, "hello", 1, "progress", "hello bob"), (run_id, "bye", 2, "final", "all done")]
    assert all(r.payload["workflow"] == "greet" for r in rows)


def test_notify_without_an_origin_session_records_no_notification(h: Harness) -> None:
    h.write("greet", NOTIFY)
    run_id = h.launch("greet", {"who": "ann"})
    assert h.execute(run_id).outcome == "completed"
    assert h.state(run_id)["outputs"]["hello"]["message"] == "hello ann"
    assert _notifications(h) == []


def test_a_checkpoint_ends_the_run_waiting(h: Harness) -> None:
    h.write("ask", """
        workflow = define_workflow(
            start_at="plan",
            nodes=[
                compute("plan", lambda ctx: {"steps": 3}),
                checkpoint("approve", summary=lambda ctx: f"{ctx.outputs['plan']['steps']} steps"),
                compute("build", lambda ctx: {"built": ctx.outputs["approve"]}),
            ],
            edges=[edge("plan", "approve"), edge("approve", "build")],
        )
    """)
    run_id = h.launch("ask")
    out = h.execute(run_id)
    assert out.outcome == "waiting"
    state = h.state(run_id)
    assert state["status"] == "waiting"
    assert state["waitingNode"] == "approve"
    assert state["waitingOutput"] == {"summary": "3 steps"}
    assert "build" not in state["results"]
    assert h.bundle(run_id).manifest()["status"] == "waiting"
    events = assert_well_formed(h.bundle(run_id))
    assert events[-1]["type"] == "run_waiting"
    assert events[-1]["payload"] == {"waitingNode": "approve", "output": {"summary": "3 steps"}}
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("done", None)


WAITER = """
def wait(ctx):
    h.GATES["in_node"].set()
    return {"stopped": ctx.cancel.wait(30)}

workflow = define_workflow(
    start_at="wait",
    nodes=[compute("wait", wait), compute("after", lambda ctx: 1)],
    edges=[edge("wait", "after")],
)
"""


def _with_control_when_running(h: Harness, run_id: str, act: Any) -> Any:
    control = Control()

    def helper() -> None:
        if GATES["in_node"].wait(30):
            act(control)

    thread = threading.Thread(target=helper)
    thread.start()
    try:
        return h.execute(run_id, control=control)
    finally:
        thread.join()


def test_cancel_mid_node_ends_the_run_cancelled(h: Harness) -> None:
    GATES["in_node"] = threading.Event()
    h.write("waiter", WAITER)
    run_id = h.launch("waiter")
    out = _with_control_when_running(h, run_id, lambda c: c.request_cancel())
    assert out.outcome == "cancelled"
    state = h.state(run_id)
    assert (state["status"], state["error"]["code"]) == ("cancelled", "cancelled")
    assert state["results"]["wait"]["outcome"] == "cancelled"
    assert "after" not in state["results"]
    events = assert_well_formed(h.bundle(run_id))
    assert events[-1]["type"] == "run_cancelled"
    assert (h.row(run_id).state, h.row(run_id).error_code) == ("cancelled", "cancelled")


def test_pause_between_nodes_holds_the_run_until_it_is_resumed(h: Harness) -> None:
    GATES.update(in_node=threading.Event(), go=threading.Event())
    h.write("waiter", WAITER.replace("ctx.cancel.wait(30)", 'h.GATES["go"].wait(30)'))
    run_id = h.launch("waiter")

    def pause(control: Control) -> None:
        control.request_pause()  # taken at the next node boundary
        GATES["go"].set()

    out = _with_control_when_running(h, run_id, pause)
    assert (out.outcome, out.error_code) == ("parked", "paused")
    events = assert_well_formed(h.bundle(run_id))
    kinds = types_of(events)
    assert kinds[-1] == "run_paused" and kinds.index("run_paused") == kinds.index(
        "node_finished") + 1
    assert events[-1]["payload"] == {"at": "after"}
    h.store.unpause(run_id)
    assert h.execute(run_id).outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    resumed = events[types_of(events).index("run_resumed")]
    assert resumed["payload"]["boundary"] is True and resumed["payload"]["resumePoint"] == "after"
    assert h.state(run_id)["paused"] is False


def test_a_shell_node_that_times_out_is_killed_and_its_effect_indeterminate(
        h: Harness) -> None:
    h.write("sleepy", """
        workflow = define_workflow(
            start_at="nap",
            nodes=[shell("nap", "echo $$ > nap.pid; exec sleep 60", timeout=0.3),
                   compute("after", lambda ctx: ctx.results["nap"])],
            edges=[switch("nap", "$result.outcome", {"timed_out": "after"})],
        )
    """)
    run_id = h.launch("sleepy")
    assert h.execute(run_id).outcome == "completed"
    final = h.state(run_id)["finalOutput"]
    assert (final["outcome"], final["errorCode"]) == ("timed_out", "node_timed_out")
    pid = int((h.project / "nap.pid").read_text())
    wait_for(lambda: not alive(pid), 20, what="the shell to be killed", interval=0.005)
    effect = h.store.get_effect(run_id, "nap", "step-1")
    assert effect is not None and effect.state == "indeterminate"


AGENT = """
workflow = define_workflow(
    start_at="write",
    nodes=[agent("write", lambda ctx: "write about " + ctx.input["topic"],
                 expected_output={"type": "object", "required": ["title"],
                                  "properties": {"title": {"type": "string"}}},
                 validate=lambda out, ctx: None if len(out["title"]) > 2 else "too short")],
)
"""


def test_an_agent_node_with_a_scripted_executor(h: Harness) -> None:
    h.write("writer", AGENT)
    run_id = h.launch("writer", {"topic": "secret plans"})
    executor = ScriptedExecutor({"write": [("update", "drafting"), {"name": "x"},
                                           {"title": "ab"}, {"title": "Done"}]})
    out = h.execute(run_id, agent=executor)
    assert out.outcome == "completed"
    assert h.state(run_id)["finalOutput"] == {"title": "Done"}
    assert [reason for _, reason in executor.rejections] == [
        "output is missing required field 'title'", "too short"]
    assert "write about secret plans" in executor.prompts[0][1]
    events = assert_well_formed(h.bundle(run_id))
    sent = [e for e in events if e["type"] == "agent_prompt_sent"]
    assert len(sent) == 1 and set(sent[0]["payload"]) == {"promptSha256", "chars", "via"}
    assert "secret plans" not in h.bundle(run_id).trace_path.read_text()
    updates = [e["payload"]["message"] for e in events if e["type"] == "update_published"]
    assert updates == ["drafting"]


def test_an_agent_that_never_submits_fails_the_node(h: Harness) -> None:
    h.write("writer", AGENT)
    run_id = h.launch("writer", {"topic": "x"})
    out = h.execute(run_id, agent=ScriptedExecutor({"write": [{"title": 1}]}))
    assert (out.outcome, out.error_code) == ("failed", "agent_no_submission")


def test_a_rerun_agent_step_tells_the_model_which_attempt_counts(h: Harness) -> None:
    h.write("writer", AGENT)
    run_id = h.launch("writer", {"topic": "x"})

    first = ScriptedExecutor({"write": [{"title": "First"}]})
    with pytest.raises(Crash):  # the worker dies before the accepted result is recorded
        h.execute(run_id, agent=first,
                  engine_hook=lambda e: crash_on(e, "node_finished", node_id="write"))
    (_, old_prompt), = first.prompts
    old = h.state(run_id)["currentAttempt"]
    assert "This is a retry" not in old_prompt  # a first attempt has no note
    again = ScriptedExecutor({"write": [{"title": "Done"}]})
    assert h.after_crash(run_id, agent=again).outcome == "completed"
    (_, prompt), = again.prompts
    started = [e for e in assert_well_formed(h.bundle(run_id)) if e["type"] == "node_started"]
    assert [e["payload"]["rerun"] for e in started] == [False, True]
    assert started[0]["attemptId"] == old
    new = started[1]["attemptId"]
    assert new != old
    assert f"attempt {old} of this step was interrupted" in prompt
    assert f'Only attempt {new} counts now' in prompt and f'attempt "{new}"' in prompt


def test_an_agent_note_that_does_not_fit_stops_the_run_instead_of_failing_the_node(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's own notes are written from inside the node: a full disk there must
    not turn into a failed node (issue 21 item 16); the worker exits to wait for space."""
    import errno

    from pi_workflows.protocol import bundlewriter

    h.write("writer", AGENT)
    run_id = h.launch("writer", {"topic": "x"})
    real = bundlewriter.append_line

    def full(path: Any, line: bytes, *, sync: bool) -> None:
        if b"agent_prompt_sent" in line:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, line, sync=sync)

    monkeypatch.setattr(bundlewriter, "append_line", full)
    with pytest.raises(OSError) as raised:
        h.execute(run_id, agent=ScriptedExecutor({"write": [{"title": "Done"}]}))
    assert raised.value.errno == errno.ENOSPC
    assert "node_failed" not in types_of(assert_well_formed(h.bundle(run_id)))
    monkeypatch.setattr(bundlewriter, "append_line", real)  # space is back
    again = h.after_crash(run_id, agent=ScriptedExecutor({"write": [{"title": "Done"}]}))
    assert again.outcome == "completed"


def test_an_agent_whose_machinery_meets_a_full_disk_waits_instead_of_failing(
        h: Harness) -> None:
    """Pi's own files live in the bundle (its session, its process record): ENOSPC out of
    the executor is the disk's, not the step's (found by the runs_disk_full drill)."""
    import errno

    class FullDisk:
        def run(self, request: Any, hooks: Any, stop: threading.Event) -> Any:
            raise OSError(errno.ENOSPC, "No space left on device")

    h.write("writer", AGENT)
    run_id = h.launch("writer", {"topic": "x"})
    with pytest.raises(OSError) as raised:
        h.execute(run_id, agent=FullDisk())  # type: ignore[arg-type]
    assert raised.value.errno == errno.ENOSPC
    assert "node_failed" not in types_of(assert_well_formed(h.bundle(run_id)))
    again = h.after_crash(run_id, agent=ScriptedExecutor({"write": [{"title": "Done"}]}))
    assert again.outcome == "completed"
