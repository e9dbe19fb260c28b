"""The drill's in-session runs without a Pi: what the drill's model answers in a session
of its own (start, submit the contract's attempt, cancel, never resubmit an old step),
and the phases of a step as a Pi's stdout shows them (``pi_session_kill9`` waits on
them)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pi_workflows.supervisor.drill.insession import PiSession, start_prompt
from pi_workflows.supervisor.drill.pienv import drill_reply
from pi_workflows.supervisor.model.scripted import Request, Text, ToolCalls
from pi_workflows.worker.agent import with_contract

pytestmark = pytest.mark.timeout(30)


def request(*messages: dict[str, Any]) -> Request:
    return Request(0, "POST", "/v1/chat/completions", {}, {"messages": list(messages)}, 0.0)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def step(attempt: str, interrupted: str | None = None) -> dict[str, Any]:
    return user(with_contract("Say ok for the drill", None, workflow="think", step="plan",
                              attempt=attempt, interrupted=interrupted))


def arguments(reply: Any) -> dict[str, Any]:
    assert isinstance(reply, ToolCalls), reply
    [call] = reply.calls
    assert call.name == "workflow"
    return dict(json.loads(call.arguments_json))


def test_a_session_of_the_drills_own_starts_the_workflow_then_submits_its_step() -> None:
    prompt = user(start_prompt("think"))
    assert arguments(drill_reply(request(prompt))) == {"action": "start", "workflow": "think"}
    tool = {"role": "tool", "content": "Queued run R."}
    assert isinstance(drill_reply(request(prompt, tool)), Text)
    # A retry's note names the interrupted attempt after the contract: the contract counts.
    retry = step("plan-2-bbbbbb", interrupted="plan-2-aaaaaa")
    assert arguments(drill_reply(request(prompt, tool, retry))) == {
        "action": "submit", "step": "plan", "attempt": "plan-2-bbbbbb",
        "output": {"ok": True, "route": "go"}}
    # A later turn (a report) is answered with text: no submit of an old step.
    report = user("pi-workflows: run R (think) completed.")
    assert isinstance(drill_reply(request(prompt, tool, retry, tool, report)), Text)


def test_a_session_told_to_cancel_cancels_at_its_step() -> None:
    prompt = user(start_prompt("think", cancel=True))
    tool = {"role": "tool", "content": "Queued run R."}
    assert arguments(drill_reply(request(prompt, tool, step("plan-2-aaaaaa")))) == {
        "action": "cancel"}


def test_a_headless_step_submits_the_contracts_attempt_of_a_retry() -> None:
    retry = step("plan-2-bbbbbb", interrupted="plan-2-aaaaaa")
    assert arguments(drill_reply(request(retry)))["attempt"] == "plan-2-bbbbbb"
    assert isinstance(drill_reply(request(user("hello"))), Text)


class Alive:
    pid = 1

    def poll(self) -> None:
        return None


def test_the_phases_of_a_step_as_the_pis_stdout_shows_them() -> None:
    pi = PiSession(Alive(), reopened=False)  # type: ignore[arg-type]
    assert pi.phase() == "opening" and pi.run_id() is None

    def shows(event: dict[str, Any]) -> None:
        pi._take(json.dumps(event).encode())

    shows({"type": "message_update", "assistantMessageEvent": {"delta": "x"}})  # dropped
    shows({"type": "tool_execution_end", "toolName": "workflow",
           "result": {"details": {"action": "start", "runId": "R1"}}})
    assert (pi.phase(), pi.run_id()) == ("launched", "R1")
    shows({"type": "message_start", "message": {
        "role": "custom", "customType": "pi-workflows",
        "details": {"kind": "step", "runId": "R1", "step": "plan", "attempt": "plan-2-a"}}})
    assert pi.phase() == "step"
    shows({"type": "tool_execution_start", "toolName": "workflow",
           "args": {"action": "submit", "step": "plan", "attempt": "plan-2-a"}})
    assert pi.phase() == "submitted"
    shows({"type": "message_start", "message": {
        "role": "custom", "customType": "pi-workflows",
        "details": {"intentId": "ti-1", "runId": "R1", "kind": "follow_up"}}})
    assert pi.phase() == "turn"
    assert pi.wait(lambda: pi.moment("turn"), 1.0) is not None
    assert len(pi.events) == 4
