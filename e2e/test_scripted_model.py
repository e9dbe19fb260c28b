"""The scripted model (e2e.scripted_model) driving the real, pinned Pi in RPC mode.

Each test starts the server and one isolated ``pi --mode rpc`` child
(e2e.pi_env), talks to it over stdin/stdout and checks both what Pi reported
and what the model was sent: a plain answer, a built-in tool call, a tool
from a test extension (schema error, then ``details`` and ``terminate``), an
HTTP 500 without retries, an abort of a stalled stream, and a connection
reset mid-stream. Pi missing is a failure (``pi_binary`` raises), not a skip.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .pi_env import PiEnv, PiRpc, make_pi_env, pi_binary
from .scripted_model import (
    Close,
    HttpError,
    Reply,
    ScriptedModel,
    Stall,
    Text,
    ToolCalls,
    call,
)

pytestmark = pytest.mark.slow  # real processes: an e2e drill

# A deadline for one Pi step (start, a reply, a tool): ~1 s when the machine is
# idle, but other suites may be running on the two cores at the same time.
STEP_S = 30.0

EXTENSION = """
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "submit",
    label: "Submit",
    description: "Submit the final answer",
    parameters: Type.Object({ answer: Type.String() }),
    async execute(_toolCallId, params) {
      return {
        content: [{ type: "text", text: `submitted ${params.answer}` }],
        details: { answer: params.answer },
        terminate: true,
      };
    },
  });
}
"""


@pytest.fixture
def start_pi(tmp_path: Path) -> Iterator[Callable[..., tuple[PiEnv, PiRpc]]]:
    """Start an isolated Pi against a model; every Pi started is shut down afterwards."""
    binary = pi_binary()  # fails the test, with the fix, if Pi is not installed
    started: list[PiRpc] = []

    def start(model: ScriptedModel, *extra: str) -> tuple[PiEnv, PiRpc]:
        env = make_pi_env(tmp_path / f"pi{len(started)}", model.base_url,
                          model_id=model.model_id)
        pi = PiRpc(env, *extra, binary=binary)
        started.append(pi)
        return env, pi

    yield start
    for pi in started:
        pi.close()


def final_message(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The last message of the ``agent_end`` that closes ``events``."""
    assert events[-1]["type"] == "agent_end", events[-1]
    return dict(events[-1]["messages"][-1])


def text_of(message: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in message.get("content", [])
                   if part.get("type") == "text")


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == kind]


@pytest.mark.timeout(90)
def test_pi_answers_a_prompt_with_the_scripted_text(start_pi, record_property) -> None:
    with ScriptedModel([Text("Hello", " from", " the script")]) as model:
        _, pi = start_pi(model)
        cold_start = pi.wait_ready(STEP_S)
        record_property("pi_cold_start_s", round(cold_start, 3))
        assert pi.request({"type": "prompt", "message": "hi"}, STEP_S)["success"]
        events = pi.read_until("agent_end", STEP_S)

        answer = final_message(events)
        assert answer["role"] == "assistant" and answer["stopReason"] == "stop"
        assert text_of(answer) == "Hello from the script"
        assert answer["provider"] == "scripted" and answer["model"] == "scripted-model"
        deltas = [e["assistantMessageEvent"]["delta"] for e in of_type(events, "message_update")
                  if e["assistantMessageEvent"].get("type") == "text_delta"]
        assert deltas == ["Hello", " from", " the script"]  # streamed as sent, not in one go

        (request,) = model.completions
        assert request.texts("user") == ["hi"]
        assert request.messages[0]["role"] == "system"  # Pi's system prompt, no developer role
        assert request.body["model"] == "scripted-model"
        assert {"read", "bash", "edit", "write"} <= set(request.tool_names)
        assert "authorization" not in request.headers  # sent, but never logged
        model.check()


@pytest.mark.timeout(90)
def test_a_scripted_builtin_tool_call_runs_and_its_result_reaches_the_model(start_pi) -> None:
    script: list[Reply] = [ToolCalls(call("read", {"path": "notes.txt"}, id="call_read_1")),
                           Text("The notes say hello.")]
    with ScriptedModel(script) as model:
        env, pi = start_pi(model)
        (env.cwd / "notes.txt").write_text("hello from the notes file\n")
        pi.request({"type": "prompt", "message": "read my notes"}, STEP_S)
        events = pi.read_until("agent_end", STEP_S)

        (start,) = of_type(events, "tool_execution_start")
        (end,) = of_type(events, "tool_execution_end")
        assert (start["toolName"], start["toolCallId"]) == ("read", "call_read_1")
        assert start["args"] == {"path": "notes.txt"}
        assert end["toolCallId"] == "call_read_1" and end["isError"] is False
        assert "hello from the notes file" in text_of(end["result"])
        assert text_of(final_message(events)) == "The notes say hello."

        first, second = model.completions
        # The second request carries the whole first conversation, then the call and result.
        assert second.messages[:len(first.messages)] == first.messages
        assistant, result = second.messages[len(first.messages):]
        assert assistant["role"] == "assistant"
        assert assistant["tool_calls"][0]["id"] == "call_read_1"
        assert assistant["tool_calls"][0]["function"]["name"] == "read"
        assert result["role"] == "tool" and result["tool_call_id"] == "call_read_1"
        assert "hello from the notes file" in str(result["content"])
        model.check()


@pytest.mark.timeout(90)
def test_an_extension_tool_gets_schema_errors_back_then_returns_details_and_ends(
        start_pi, tmp_path: Path) -> None:
    extension = tmp_path / "submit_ext.ts"
    extension.write_text(EXTENSION)
    # No third reply: `terminate: true` must end the run without another model call
    # (one would find the script exhausted and be recorded as a problem).
    script = [ToolCalls(call("submit", {"wrong": 1})),
              ToolCalls(call("submit", {"answer": "42"}))]
    with ScriptedModel(script) as model:
        _, pi = start_pi(model, "-e", str(extension))
        pi.request({"type": "prompt", "message": "answer"}, STEP_S)
        events = pi.read_until("agent_end", STEP_S)

        bad, good = of_type(events, "tool_execution_end")
        assert bad["toolName"] == "submit" and bad["isError"] is True
        assert good["isError"] is False
        assert good["result"]["details"] == {"answer": "42"}
        assert "submit" in model.completions[0].tool_names
        # The model saw the schema error as the first call's result.
        tool_result = model.completions[1].messages[-1]
        assert tool_result["role"] == "tool" and "answer" in str(tool_result["content"])
        assert len(model.completions) == 2
        model.check()


@pytest.mark.timeout(90)
def test_an_http_500_is_an_error_message_at_once_without_retries(start_pi) -> None:
    with ScriptedModel([HttpError(500, {"error": {"message": "scripted outage"}})]) as model:
        _, pi = start_pi(model)
        pi.wait_ready(STEP_S)
        begin = time.monotonic()
        pi.request({"type": "prompt", "message": "hi"}, STEP_S)
        events = pi.read_until("agent_end", STEP_S)
        elapsed = time.monotonic() - begin

        answer = final_message(events)
        assert answer["stopReason"] == "error"
        assert "scripted outage" in answer["errorMessage"]
        # With retries on, the SDK would ask twice more (x-stainless-retry-count) and Pi
        # would announce auto_retry_start after this agent_end: a barrier command later
        # neither has happened.
        assert pi.request({"type": "get_state"}, STEP_S)["data"]["isStreaming"] is False
        assert not of_type(pi.events, "auto_retry_start")
        (request,) = model.completions
        assert request.headers.get("x-stainless-retry-count") == "0"
        assert elapsed < 5, f"an unretried 500 took {elapsed:.1f} s"
        model.check()


@pytest.mark.timeout(90)
def test_abort_ends_a_stalled_stream_as_aborted_and_drops_the_connection(start_pi) -> None:
    stall = Stall("Hel", "lo")
    with ScriptedModel([stall]) as model:
        _, pi = start_pi(model)
        pi.request({"type": "prompt", "message": "hi"}, STEP_S)
        pi.read_until(lambda e: e.get("type") == "message_update"
                      and e["assistantMessageEvent"].get("delta") == "lo", STEP_S)
        stall.wait_reached(STEP_S)
        assert pi.request({"type": "abort"}, STEP_S)["success"]
        events = pi.read_until("agent_end", STEP_S)

        answer = final_message(events)
        assert answer["stopReason"] == "aborted"
        assert text_of(answer) == "Hello"  # what had arrived before the stall is kept
        # Pi closed the stream: the server saw the client go, nobody released the stall.
        assert stall.wait_done(STEP_S) == "disconnected"
        assert not stall.released
        model.check()


@pytest.mark.timeout(90)
def test_a_connection_reset_mid_stream_is_an_error_keeping_the_partial_text(start_pi) -> None:
    with ScriptedModel([Close("partial ", "text")]) as model:
        _, pi = start_pi(model)
        pi.request({"type": "prompt", "message": "hi"}, STEP_S)
        answer = final_message(pi.read_until("agent_end", STEP_S))
        assert answer["stopReason"] == "error" and answer["errorMessage"]
        assert text_of(answer) == "partial text"
        assert [r.outcome for r in model.completions] == ["reset"]
        model.check()
