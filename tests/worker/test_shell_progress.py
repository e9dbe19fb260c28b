"""Structured progress through a real run: a shell node's ``parse`` and its
``parse_line`` updates, ``ctx.publish_update`` in an action and a compute, a
model's structured ``update``; each across a crash and resume (the recorded
effect result is parsed again, the command is not rerun; updates already
recorded stay, a resumed attempt's append)."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows.worker.agent import AgentRequest, ScriptedExecutor
from pi_workflows.worker.submission import Submission

from tests.helpers.engine import Crash, Harness, assert_well_formed, crash_on, file_lines

COUNT = """
from pi_workflows import parse_line

def line(text):
    if text.startswith("item "):
        done, total = text[5:].split("/")
        return {"progress": {"done": int(done), "total": int(total), "unit": "items"}}
    return None

def parse(result, ctx):
    with open(ctx.project_dir / "parse.log", "a") as fh:
        fh.write(ctx.attempt_id + "\\n")
    return {"items": result["stdout"].count("item "), "exit": result["exitCode"]}

workflow = define_workflow(
    start_at="count",
    nodes=[shell("count", "echo ran >> effect.log; for i in 1 2 3; do echo item $i/3;"
                 " sleep 0.25; done; echo done", parse=parse, updates=parse_line(line)),
           compute("after", lambda ctx: ctx.outputs["count"])],
    edges=[edge("count", "after")],
)
"""


def updates_of(events: list[dict[str, Any]], node: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "update_published"
            and (node is None or e.get("nodeId") == node)]


def test_parse_shapes_the_output_and_lines_become_updates_before_the_effect_settles(
        h: Harness) -> None:
    h.write("count", COUNT)
    run_id = h.launch("count")
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["outputs"]["count"] == {"items": 3, "exit": 0}
    assert state["results"]["count"]["exitCode"] == 0  # the record still has the exit code
    effect = h.store.get_effect(run_id, "count", "step-1")
    assert effect is not None and effect.result["output"]["stdout"].startswith("item 1/3")
    events = assert_well_formed(h.bundle(run_id))
    done = [e["payload"]["data"]["progress"]["done"] for e in updates_of(events)]
    # A line every 0.25 s: each is written (on a busy machine two may come closer than
    # the rate limit allows, and the later is kept); the first and the last always are.
    assert done[0] == 1 and done[-1] == 3 and done == sorted(set(done))
    kinds = [(e["type"], e["payload"].get("effect")) for e in events
             if e.get("nodeId") == "count"]
    assert kinds.index(("effect_recorded", "applied")) > kinds.index(("update_published", None))


def test_a_raising_parse_fails_the_node_with_parse_failed_and_keeps_the_raw_result(
        h: Harness) -> None:
    h.write("bad", """
        def parse(result, ctx):
            return {"n": int(result["stdout"])}

        workflow = define_workflow(
            start_at="say",
            nodes=[shell("say", "echo not-a-number", parse=parse)],
        )
    """)
    run_id = h.launch("bad")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "parse_failed")
    events = assert_well_formed(h.bundle(run_id))
    failed, = [e for e in events if e["type"] == "node_failed"]
    assert failed["payload"]["result"]["error"] == (
        "parse of shell node 'say' raised ValueError: invalid literal for int() with base 10:"
        " 'not-a-number\\n'")
    assert failed["payload"]["output"]["stdout"] == "not-a-number\n"  # evidence for `logs`
    assert failed["payload"]["traceback"]["exception"].startswith("ValueError")


def test_a_crash_after_the_effect_resumes_by_parsing_the_recorded_result_again(
        h: Harness) -> None:
    h.write("count", COUNT)
    run_id = h.launch("count")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "effect_recorded", after=True,
                                                         effect="applied"))
    before = updates_of(assert_well_formed(h.bundle(run_id)))
    assert before and before[-1]["payload"]["data"]["progress"]["done"] == 3
    assert h.after_crash(run_id).outcome == "completed"
    # The command ran once; parse once, by the resumed attempt, on the recorded result
    # (the crash came before the first attempt parsed).
    assert file_lines(h.project / "effect.log") == ["ran"]
    assert len(file_lines(h.project / "parse.log")) == 1
    assert h.state(run_id)["finalOutput"] == {"items": 3, "exit": 0}
    events = assert_well_formed(h.bundle(run_id))
    assert updates_of(events) == before  # recorded updates stay; no new ones (no rerun)
    assert [e["payload"]["effect"] for e in events if e["type"] == "effect_recorded"] == [
        "pending", "applied", "replayed"]


def test_a_crash_before_the_node_settled_parses_again_on_resume(h: Harness) -> None:
    h.write("count", COUNT)
    run_id = h.launch("count")
    with pytest.raises(Crash):  # parse ran, the node's end was never written
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "node_finished", node_id="count"))
    assert len(file_lines(h.project / "parse.log")) == 1
    assert h.after_crash(run_id).outcome == "completed"
    assert file_lines(h.project / "effect.log") == ["ran"]
    first, second = file_lines(h.project / "parse.log")
    assert first != second  # parsed again by the resumed attempt
    assert h.state(run_id)["outputs"]["count"] == {"items": 3, "exit": 0}


PUBLISH = """
def work(ctx):
    for done in range(1, 4):
        ctx.publish_update({"progress": {"done": done, "total": 3}, "message": "copying"})
    with open(ctx.project_dir / "effect.log", "a") as fh:
        fh.write(ctx.attempt_id + "\\n")
    return {"copied": 3}

def think(ctx):
    ctx.publish_update("thinking")
    return 1

workflow = define_workflow(
    start_at="copy",
    nodes=[action("copy", work, idempotent=True), compute("think", think)],
    edges=[edge("copy", "think")],
)
"""


def crash_at_last_progress(engine: Any) -> None:
    """Die at the write of the action's last update (flushed once its work was over)."""
    append = engine.writer.append

    def dying(etype: str, payload: dict[str, Any], state: Any, **kw: Any) -> int:
        if etype == "update_published" and payload["data"].get("progress", {}).get("done") == 3:
            raise Crash("before the last update")
        return int(append(etype, payload, state, **kw))

    engine.writer.append = dying


def test_publish_update_in_an_action_survives_a_crash_and_the_rerun_appends(
        h: Harness) -> None:
    h.write("copy", PUBLISH)
    run_id = h.launch("copy")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=crash_at_last_progress)
    first = updates_of(assert_well_formed(h.bundle(run_id)))
    # Three in a burst: the first at once, the latest once the work was over (which the
    # crash took); a slow machine may have had time to write the second too.
    assert first[0]["payload"]["data"] == {"progress": {"done": 1, "total": 3},
                                           "message": "copying"}
    assert [e["payload"]["data"]["progress"]["done"] for e in first] in ([1], [1, 2])
    assert h.after_crash(run_id).outcome == "completed"  # idempotent: run again
    events = assert_well_formed(h.bundle(run_id))
    copies = updates_of(events, "copy")
    assert copies[:len(first)] == first  # what was recorded before the crash stays
    rerun = copies[len(first):]
    assert len({e["attemptId"] for e in rerun}) == 1
    assert rerun[0]["attemptId"] != first[0]["attemptId"]
    dones = [e["payload"]["data"]["progress"]["done"] for e in rerun]
    assert dones[0] == 1 and dones[-1] == 3  # the rerun's own, appended
    assert [e["payload"]["message"] for e in updates_of(events, "think")] == ["thinking"]


def test_publish_update_refuses_a_malformed_update_in_the_action(h: Harness) -> None:
    h.write("odd", """
        workflow = define_workflow(
            start_at="go",
            nodes=[action("go", lambda ctx: ctx.publish_update({"progress": {"done": "x"}}))],
        )
    """)
    run_id = h.launch("odd")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "node_error")
    assert "UpdateError: progress.done must be a number of at least 0, got 'x'" in \
        h.state(run_id)["error"]["message"]


AGENT = """
workflow = define_workflow(start_at="write", nodes=[agent("write", "Write it")])
"""


def test_a_model_update_may_be_text_or_structured(h: Harness) -> None:
    h.write("writer", AGENT)
    run_id = h.launch("writer")
    structured = {"progress": {"done": 2, "total": 5, "unit": "sections"}, "message": "drafting"}
    out = h.execute(run_id, agent=ScriptedExecutor({"write": [
        ("update", "reading"), ("update", structured), {"title": "Done"}]}))
    assert out.outcome == "completed"
    payloads = [e["payload"] for e in updates_of(assert_well_formed(h.bundle(run_id)))]
    assert payloads == [{"data": {"message": "reading"}, "message": "reading"},
                        {"data": structured, "message": "drafting"}]


class Hooks:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    def prompt_sent(self, prompt: str, via: str = "headless") -> None:
        pass

    def update(self, message: Any) -> str | None:
        from pi_workflows.protocol.updates import UpdateError, normalize_update
        try:
            self.updates.append(normalize_update(message))
        except UpdateError as exc:
            return str(exc)
        return None

    def check(self, submission: Any) -> str | None:
        return None


def test_the_tool_takes_an_update_as_text_json_text_or_an_object_and_refuses_a_bad_one() -> None:
    hooks = Hooks()
    step = Submission(AgentRequest("r", "write", "write-1-abcdef", "p", None, None), hooks)
    base = {"action": "update", "step": "write", "attempt": "write-1-abcdef"}
    progress = {"progress": {"done": 1, "total": 4}}
    assert step.verdict({**base, "update": "reading"})[0]
    assert step.verdict({**base, "update": progress})[0]
    assert step.verdict({**base, "update": '{"progress": {"done": 2, "total": 4}}'})[0]
    assert step.verdict({**base, "update": "{not json"})[0]  # text that looks like JSON
    ok, why = step.verdict({**base, "update": {"progress": {"done": 1, "total": -4}}})
    assert not ok and why.startswith("Update refused: progress.total must be a number above 0")
    ok, why = step.verdict({**base})
    assert not ok and "an update is empty" in why
    assert hooks.updates == [{"message": "reading"}, progress,
                             {"progress": {"done": 2, "total": 4}}, {"message": "{not json"}]


def test_a_torn_update_line_is_cut_by_the_resume_and_the_drill_accepts_the_trace(
        h: Harness) -> None:
    """A kill -9 in the middle of appending an update: the resume drops the torn line
    (its projection never saw it), keeps the updates before it, and the drill's trace
    check finds nothing wrong with the new event shape, torn or repaired."""
    from pi_workflows.supervisor.drill.checker import check_trace
    from pi_workflows.supervisor.drill.durable import RunFacts

    h.write("copy", PUBLISH)
    run_id = h.launch("copy")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=crash_at_last_progress)
    bundle = h.bundle(run_id)
    kept = updates_of(assert_well_formed(bundle))
    seq = kept[-1]["seq"] + 2  # the next line after the effect's note
    attempt = kept[-1]["attemptId"]
    torn = (f'{{"seq":{seq},"at":1,"attemptId":"{attempt}","nodeId":"copy",'
            '"payload":{"data":{"progress":{"done":3,"tot')
    with open(bundle.trace_path, "a") as fh:
        fh.write(torn)
    found: list[Any] = []
    check_trace(RunFacts(run_id, trace=bundle.trace_path.read_bytes(),
                         state=bundle.raw_state()), False, found)
    assert found == []  # a torn last line of a running bundle is what a crash leaves
    assert h.after_crash(run_id).outcome == "completed"
    events = assert_well_formed(bundle)
    assert updates_of(events, "copy")[:len(kept)] == kept
    check_trace(RunFacts(run_id, trace=bundle.trace_path.read_bytes(),
                         state=bundle.raw_state()), True, found)
    assert found == []
    resumed = next(e for e in events if e["type"] == "run_resumed")
    assert resumed["payload"]["droppedTraceLines"] >= 1


def test_an_update_after_the_claim_was_taken_over_is_fenced_out(h: Harness) -> None:
    """Updates are fenced like every write: once another runner owns the run, the old
    owner's update is refused by the fence (and costs the action nothing)."""
    import threading

    from pi_workflows.protocol.store import Store

    from tests.helpers.clocks import FakeClock, LaterClock
    from tests.helpers.engine import GATES

    GATES.update(inside=threading.Event(), go=threading.Event(), returned=[])
    h.write("slow", """
        def work(ctx):
            ctx.publish_update("before")
            h.GATES["inside"].set()
            h.GATES["go"].wait(30)
            ctx.publish_update("after the take-over")
            h.GATES["returned"].append(True)
            return 1

        workflow = define_workflow(start_at="go", nodes=[action("go", work)])
    """)
    run_id = h.launch("slow")
    failures: list[BaseException] = []

    def owner() -> None:
        try:
            h.execute(run_id)
        except BaseException as exc:  # the old owner may learn it lost the claim
            failures.append(exc)

    thread = threading.Thread(target=owner, daemon=True)
    thread.start()
    assert GATES["inside"].wait(30)
    mono = FakeClock(0.0)
    with Store(h.store_path, lease_ms=h.lease_ms, clock=LaterClock(h.lease_ms + 1),
               monotonic=mono) as later:
        later.watch_claims()
        mono.advance(h.lease_ms / 1000)
        later.claim_by_id(run_id, "runner-2")
        GATES["go"].set()
        thread.join(30)
    assert not thread.is_alive() and GATES["returned"] == [True]
    messages = [e["payload"]["message"] for e in updates_of(assert_well_formed(h.bundle(run_id)))]
    assert messages == ["before"]


HUGE = """
from pi_workflows import parse_line

def line(text):
    done, total = text.split("/")
    return {"progress": {"done": int(done), "total": int(total)}}

workflow = define_workflow(
    start_at="count",
    nodes=[shell("count", ["sh", "-c", "echo 1/3; echo 1ZEROS/3; echo 2/3; echo 3/1ZEROS"],
                 updates=parse_line(line))],
)
""".replace("ZEROS", "0" * 400)


def test_a_number_too_large_for_a_float_in_a_line_is_refused_not_a_crash(h: Harness) -> None:
    # The command's output is not the author's to vouch for: a 401-digit count is an
    # update refused and counted, and the lines after it still become updates.
    h.write("huge", HUGE)
    run_id = h.launch("huge")
    assert h.execute(run_id).outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    done = [e["payload"]["data"]["progress"]["done"] for e in updates_of(events)]
    assert done[0] == 1 and done[-1] == 2
    [dropped] = [e["payload"] for e in events if e["type"] == "updates_dropped"]
    assert dropped["refused"] == 2 and "progress.done must be a number" in dropped["error"]
    ok, why = Submission(AgentRequest("r", "s", "a", "p", None, None), Hooks()).verdict(
        {"step": "s", "attempt": "a", "action": "update",
         "update": '{"progress": {"done": 1' + "0" * 400 + '}}'})  # a model's JSON text
    assert not ok and why.startswith("Update refused: progress.done must be a number")
