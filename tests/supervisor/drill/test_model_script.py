"""``model serve``'s script: the file format, its refusals, and the default reply built
from the step contract the worker really sends."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.supervisor.model.script import (
    REJECTED_TEXT,
    ScriptError,
    load_script,
    offline_output,
    serve_script,
)
from pi_workflows.supervisor.model.scripted import (
    HttpError,
    Request,
    ScriptedModel,
    Text,
    ToolCalls,
)
from pi_workflows.worker.agent import with_contract

pytestmark = pytest.mark.timeout(30)

SHAPE = {"type": "object", "required": ["summary", "bullets"],
         "properties": {"summary": {"type": "string"},
                        "bullets": {"type": "array", "items": {"type": "string"}}}}


def _request(*messages: dict[str, Any]) -> Request:
    return Request(0, "POST", "/v1/chat/completions", {},
                   {"stream": True, "messages": list(messages)}, 0.0)


def _step(schema: Any = SHAPE, attempt: str = "summarize-1-4f2a9c") -> dict[str, Any]:
    text = with_contract("Summarize this.", schema, workflow="summarize", step="summarize",
                         attempt=attempt)
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _submitted(reply: Any) -> tuple[str, dict[str, Any]]:
    assert isinstance(reply, ToolCalls)
    (tool,) = reply.calls
    return tool.name, json.loads(tool.arguments_json)


def test_the_default_submits_an_output_that_fits_the_steps_schema() -> None:
    name, args = _submitted(serve_script([])(_request(_step())))
    assert name == "workflow"
    assert args == {"action": "submit", "step": "summarize", "attempt": "summarize-1-4f2a9c",
                    "output": {"summary": "summary from the scripted model",
                               "bullets": ["one of the bullets from the scripted model"]}}


def test_the_default_without_a_schema_submits_ok() -> None:
    _, args = _submitted(serve_script([])(_request(_step(schema=None))))
    assert args["output"] == {"ok": True}


@pytest.mark.parametrize(("schema", "value"), [
    ({"type": "integer"}, 1), ({"type": "boolean"}, True), ({"enum": ["b", "c"]}, "b"),
    ({"type": "object", "required": ["n"], "properties": {"n": {"type": "number"}}}, {"n": 1}),
    ({"type": "array", "items": {"type": "null"}}, [None]), ({}, "result from the scripted model"),
])
def test_offline_output_fits_each_kind_of_schema(schema: dict[str, Any], value: Any) -> None:
    assert offline_output(schema) == value


def test_replies_are_played_in_order_then_the_default(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [
        {"tool": "read", "arguments": {"path": "a.txt"}},
        {"text": "thinking", "delay": 0.5},
        {"error": 503},
        {"submit": {"summary": "mine", "bullets": []}},
    ]}))
    reply = serve_script(load_script(script))
    step = _request(_step())
    name, args = _submitted(reply(step))
    assert (name, args) == ("read", {"path": "a.txt"})
    text = reply(step)
    assert isinstance(text, Text) and text.text == "thinking" and text.delay == 0.5
    error = reply(step)
    assert isinstance(error, HttpError) and error.status == 503
    assert _submitted(reply(step))[1]["output"] == {"summary": "mine", "bullets": []}
    assert _submitted(reply(step))[1]["output"]["summary"] == "summary from the scripted model"


def test_an_accepted_submission_is_answered_without_taking_a_reply() -> None:
    reply = serve_script([{"text": "kept for later"}])
    call = {"id": "c1", "type": "function", "function": {"name": "workflow", "arguments": "{}"}}
    accepted = _request(_step(), {"role": "assistant", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1",
                         "content": "Accepted: the step is complete."})
    answer = reply(accepted)
    assert isinstance(answer, Text) and answer.text == "Submitted."
    kept = reply(_request(_step()))
    assert isinstance(kept, Text) and kept.text == "kept for later"
    # A rejection is not submitted again by the default: the turn ends with a text.
    rejected = _request(_step(), {"role": "assistant", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1", "content": "output is wrong"})
    again = reply(rejected)
    assert isinstance(again, Text) and again.text == REJECTED_TEXT


@pytest.mark.parametrize(("content", "message"), [
    ("{", "not JSON"),
    ("[]", 'must be an object with a list of replies: {"replies": [{"submit": {...}}, ...]}'),
    ('{"replies": [], "extra": 1}', "unknown key(s) extra"),
    ('{"replies": ["hi"]}', 'reply 1 must be an object such as {"text": "hello"}'),
    ('{"replies": [{"text": "a", "submit": 1}]}',
     "reply 1 must have exactly one of text, submit, tool, error"),
    ('{"replies": [{}]}', "reply 1 must have exactly one of text, submit, tool, error"),
    ('{"replies": [{"text": 3}]}', "reply 1: text must be a string"),
    ('{"replies": [{"tool": ""}]}', "reply 1: tool must be a tool name"),
    ('{"replies": [{"tool": "read", "arguments": []}]}', "reply 1: arguments must be an object"),
    ('{"replies": [{"error": 200}]}', "reply 1: error must be an HTTP status from 400 to 599"),
    ('{"replies": [{"text": "a", "delay": -1}]}',
     "reply 1: delay must be 0 to 60 seconds, got -1"),
    ('{"replies": [{"text": "a", "colour": "red"}]}', "reply 1: unknown key(s) colour"),
])
def test_a_bad_script_is_one_sentence(tmp_path: Path, content: str, message: str) -> None:
    script = tmp_path / "s.json"
    script.write_text(content)
    with pytest.raises(ScriptError) as err:
        load_script(script)
    assert str(err.value).startswith(f"--script {script}: ")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_script_says_so(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read it"):
        load_script(tmp_path / "absent.json")


def test_a_long_lived_server_keeps_only_the_newest_requests() -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with ScriptedModel(serve_script([]), max_log=2) as model:
        for _ in range(3):
            with opener.open(f"{model.base_url}/models", timeout=10) as response:
                assert response.status == 200
            body = json.dumps({"stream": True, "messages": [_step()]}).encode()
            with opener.open(urllib.request.Request(
                    f"{model.base_url}/chat/completions", body,
                    {"Content-Type": "application/json"}), timeout=10) as response:
                assert b"[DONE]" in response.read()
        assert [r.index for r in model.requests] == [4, 5]
        assert model.completion_count == 3
        model.check()


def test_the_shipped_example_script_loads() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "summarize.model.json"
    replies = load_script(example)
    assert [next(iter(r)) for r in replies] == ["tool", "submit"]


def test_a_delay_too_large_for_a_float_is_one_sentence(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"replies": [{"text": "a", "delay": 1' + "0" * 400 + "}]}")
    with pytest.raises(ScriptError, match="reply 1: delay must be 0 to 60 seconds"):
        load_script(script)


def test_a_workflow_tool_reply_gets_the_step_and_attempt_in_progress() -> None:
    # A script cannot know the attempt id, so an update through the tool is filled in.
    update = {"tool": "workflow", "arguments": {"action": "update", "update": "half way"}}
    name, args = _submitted(serve_script([update])(_request(_step())))
    assert (name, args) == ("workflow", {"action": "update", "update": "half way",
                                         "step": "summarize",
                                         "attempt": "summarize-1-4f2a9c"})
    given = {"tool": "workflow", "arguments": {"action": "update", "step": "s",
                                               "attempt": "s-1-000000"}}
    _, args = _submitted(serve_script([given])(_request(_step())))
    assert args["attempt"] == "s-1-000000" and args["step"] == "s"  # given: kept
    _, args = _submitted(serve_script([{"tool": "read", "arguments": {"path": "x"}}])(
        _request(_step())))
    assert args == {"path": "x"}  # another tool: as written
