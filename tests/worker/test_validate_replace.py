"""An agent node's ``validate`` may return ``Replace(value)``: the submission is accepted
and ``value`` is what the node outputs, in the headless judge, the in-session one and the
scripted executor alike; a ``str`` still refuses (issue 23, item 7)."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows import Replace, agent
from pi_workflows.protocol.states import Outcome
from pi_workflows.worker.agent import AgentRequest, ScriptedExecutor
from pi_workflows.worker.steps import _Hooks
from pi_workflows.worker.submission import Submission

from tests.helpers.definitions import make_ctx
from tests.helpers.engine import Harness, assert_well_formed
from tests.helpers.waiting import poll

from .test_conversation import REQUEST, call, session, start

pytestmark = pytest.mark.timeout(30)

WRITER = """
from pi_workflows import Replace

def tidy(out, ctx):
    if len(out["title"]) < 3:
        return "too short"
    if out["title"] == "set":
        return Replace({1, 2})  # not JSON: the node fails, it is not accepted as is
    return Replace({"title": out["title"].strip().title(), "checked": True})

workflow = define_workflow(
    start_at="write",
    nodes=[agent("write", "Write a title.", validate=tidy,
                 expected_output={"type": "object", "required": ["title"]})],
)
"""


def test_a_replacement_is_what_the_node_outputs_and_the_trace_says_so(h: Harness) -> None:
    h.write("writer", WRITER)
    run_id = h.launch("writer")
    executor = ScriptedExecutor({"write": [{"title": "ab"}, {"title": "  a fine title "}]})
    assert h.execute(run_id, agent=executor).outcome == "completed"
    assert [reason for _, reason in executor.rejections] == ["too short"]
    assert h.state(run_id)["finalOutput"] == {"title": "A Fine Title", "checked": True}
    events = assert_well_formed(h.bundle(run_id))
    [finished] = [e for e in events if e["type"] == "node_finished"]
    assert finished["payload"]["output"] == {"title": "A Fine Title", "checked": True}
    assert [e["type"] for e in events].count("agent_output_replaced") == 1


def test_a_replacement_that_is_not_json_fails_the_node(h: Harness) -> None:
    h.write("writer", WRITER)
    run_id = h.launch("writer")
    out = h.execute(run_id, agent=ScriptedExecutor({"write": [{"title": "set"}]}))
    assert (out.outcome, out.error_code) == ("failed", "output_invalid")


class _Host:
    """The engine's side of the hooks: what they note."""

    def __init__(self) -> None:
        self.noted: list[str] = []

    def note(self, event_type: str, payload: dict[str, Any], node_id: str,
             attempt_id: str) -> None:
        self.noted.append(event_type)


def _hooks(validate: Any) -> _Hooks:
    node = agent("ask", "Name a colour.", validate=validate,
                 expected_output={"type": "object", "required": ["answer"]})
    return _Hooks(_Host(), node,  # type: ignore[arg-type]
                  make_ctx(node_id="ask", attempt_id="ask-1-aaaaaa"))


def _replace(out: Any, ctx: Any) -> Any:
    return Replace({"answer": out["answer"].upper()}) if out["answer"] != "no" else "say a colour"


def test_the_headless_judge_keeps_the_replacement() -> None:
    step = Submission(AgentRequest("run-1", "ask", "ask-1-aaaaaa", "p", None, None),
                      _hooks(_replace))
    base = {"step": "ask", "attempt": "ask-1-aaaaaa", "action": "submit"}
    ok, message = step.verdict({**base, "output": {"answer": "no"}})
    assert not ok and "say a colour" in message and not step.accepted
    ok, _ = step.verdict({**base, "output": '{"answer": "teal"}'})
    assert ok and step.accepted and step.output == {"answer": "TEAL"}


def test_validate_returning_none_or_a_false_value_accepts_as_before() -> None:
    hooks = _hooks(lambda out, ctx: False)
    submission = {"answer": "teal"}
    assert hooks.check(submission) is None and hooks.output_for(submission) is submission
    assert _hooks(lambda out, ctx: ["not", "str"]).check(submission) == "['not', 'str']"


def test_the_in_session_judge_keeps_the_replacement() -> None:
    hooks = _hooks(_replace)
    with session() as (ext, executor, headless, _):
        box = start(executor, hooks)  # type: ignore[arg-type]
        poll(lambda: ext.of("step"), 5)
        refused = call(ext, "c1", action="submit", step="ask", attempt=REQUEST.attempt_id,
                       output={"answer": "no"})
        assert not refused["ok"] and "say a colour" in refused["message"]
        accepted = call(ext, "c2", action="submit", step="ask", attempt=REQUEST.attempt_id,
                        output={"answer": "teal"})
        assert accepted["ok"]
        result = poll(lambda: box.get("r"), 5)
        assert result.outcome == Outcome.OK and result.output == {"answer": "TEAL"}
        assert headless.ran == []
