"""The scripted model server (e2e.scripted_model) on its own, spoken to with urllib and
http.client: SSE framing, tool-call deltas, errors, stalls, resets and the request log.

The same server drives a real Pi in e2e/test_scripted_model.py; these tests pin the
wire format it promises without starting Node.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.scripted_model import (
    Close,
    HttpError,
    Request,
    ScriptedModel,
    Stall,
    Text,
    ToolCalls,
    call,
)

# urllib would route even 127.0.0.1 through a *_proxy variable set in the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
BODY = {"model": "scripted-model", "stream": True,
        "messages": [{"role": "system", "content": "be brief"},
                     {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}]}

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


def post(model: ScriptedModel, body: Any = BODY, path: str = "/chat/completions",
         headers: dict[str, str] | None = None) -> Any:
    data = json.dumps(body).encode()
    req = urllib.request.Request(model.base_url + path, data=data, method="POST", headers={
        "Content-Type": "application/json", "Authorization": "Bearer sk-secret",
        **(headers or {})})
    return OPENER.open(req, timeout=10)


def sse(raw: bytes) -> list[Any]:
    """The SSE events of a complete body, each ``data:`` payload parsed ("[DONE]" kept)."""
    text = raw.decode()
    assert text.endswith("\n\n"), "an SSE body ends with a blank line"
    events = []
    for block in text[:-2].split("\n\n"):
        assert block.startswith("data: ") and "\n" not in block, block
        payload = block[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def choices(events: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0] for e in events if isinstance(e, dict) and e["choices"]]


def test_text_streams_as_chat_completion_chunks_then_usage_then_done(model) -> None:
    model.add(Text("Hel", "lo", " there"))
    with post(model) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/event-stream"
        events = sse(resp.read())
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    chunks = choices(events)
    assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])
    assert len({e["id"] for e in events[:-1]}) == 1  # one completion id throughout
    assert chunks[0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["delta"]["content"] for c in chunks[1:-1]] == ["Hel", "lo", " there"]
    assert chunks[-1] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    assert all(c["finish_reason"] is None for c in chunks[:-1])


def test_tool_calls_stream_name_and_id_first_then_argument_pieces(model) -> None:
    args = {"path": "notes/a.txt", "limit": 20}
    model.add(ToolCalls(call("read", args, pieces=4), call("bash", {"command": "ls"}, id="c9"),
                        text="Let me look."))
    with post(model) as resp:
        chunks = choices(sse(resp.read()))
    assert chunks[1]["delta"] == {"content": "Let me look."}
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for delta in chunk["delta"].get("tool_calls", []):
            entry = calls.setdefault(delta["index"], {"arguments": "", "deltas": 0})
            if "id" in delta:
                assert "id" not in entry, "the id comes once, in the call's first delta"
                entry.update(id=delta["id"], name=delta["function"]["name"])
            entry["arguments"] += delta["function"]["arguments"]
            entry["deltas"] += 1
    assert calls[0]["name"] == "read" and json.loads(calls[0]["arguments"]) == args
    assert calls[0]["deltas"] == 5  # the opening delta and four argument pieces
    assert calls[1] == {"id": "c9", "name": "bash", "arguments": '{"command": "ls"}',
                        "deltas": 4}
    assert calls[0]["id"].startswith("call_")
    assert chunks[-1]["finish_reason"] == "tool_calls"


def test_http_error_is_sent_as_is_and_is_not_a_problem(model) -> None:
    model.add(HttpError(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "0"}))
    with pytest.raises(urllib.error.HTTPError) as caught:
        post(model)
    assert caught.value.code == 503
    assert caught.value.headers["Retry-After"] == "0"
    assert json.loads(caught.value.read()) == {"error": {"message": "overloaded"}}
    assert model.completions[0].reply == "HttpError(503)"
    model.check()


def test_an_exhausted_script_answers_500_naming_the_problem_and_records_it(model) -> None:
    model.add(Text("one"))
    post(model).read()
    with pytest.raises(urllib.error.HTTPError) as caught:
        post(model)
    assert caught.value.code == 500
    message = json.loads(caught.value.read())["error"]["message"]
    assert "script exhausted: request #1" in message
    assert len(model.problems) == 1 and "script exhausted" in model.problems[0]
    with pytest.raises(AssertionError, match="script exhausted"):
        model.check()


def test_the_log_keeps_path_headers_without_credentials_and_the_parsed_body(model) -> None:
    model.add(Text("ok"))
    post(model, headers={"X-Trace": "t1", "X-Api-Key": "k"}).read()
    with OPENER.open(model.base_url + "/models", timeout=10) as resp:
        listed = json.loads(resp.read())
    assert listed["data"][0]["id"] == "scripted-model"
    first, second = model.requests
    assert (first.method, first.path, first.index) == ("POST", "/v1/chat/completions", 0)
    assert first.headers["x-trace"] == "t1"
    assert "authorization" not in first.headers and "x-api-key" not in first.headers
    assert first.body == BODY
    assert first.tool_names == ["read"]
    assert first.texts("user") == ["hi"] and first.texts("system") == ["be brief"]
    assert (first.reply, model.wait_answered(first, 10)) == ("Text", "complete")
    assert (second.method, second.path, second.body) == ("GET", "/v1/models", None)
    assert model.completions == [first]
    model.check()


def test_a_function_script_sees_the_logged_request(model) -> None:
    seen: list[Request] = []

    def script(request: Request) -> Text | None:
        seen.append(request)
        return Text(f"you said {request.texts('user')[-1]}") if len(seen) < 2 else None

    with ScriptedModel(script) as scripted:
        events = sse(post(scripted).read())
        assert choices(events)[1]["delta"]["content"] == "you said hi"
        with pytest.raises(urllib.error.HTTPError):
            post(scripted)
        assert seen == scripted.completions
        assert "script exhausted" in scripted.problems[0]


def test_requests_that_are_not_streaming_completions_are_refused_as_problems(model) -> None:
    model.add(Text("unused"))
    with pytest.raises(urllib.error.HTTPError) as not_streaming:
        post(model, {**BODY, "stream": False})
    with pytest.raises(urllib.error.HTTPError) as wrong_path:
        post(model, path="/completions")
    assert (not_streaming.value.code, wrong_path.value.code) == (400, 404)
    assert len(model.problems) == 2 and model.remaining == 1


def test_a_delay_holds_back_the_whole_response(model) -> None:
    model.add(Text("late", delay=0.3))
    begin = time.monotonic()
    with post(model) as resp:
        resp.read()
    assert time.monotonic() - begin >= 0.3


def stream_conn(model: ScriptedModel) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps(BODY),
                 {"Content-Type": "application/json"})
    return conn.getresponse()


def test_a_stall_blocks_mid_stream_until_released_then_finishes(model) -> None:
    stall = Stall("Hel", after=("lo",))
    model.add(stall)
    resp = stream_conn(model)
    stall.wait_reached(5)
    first = [resp.readline() for _ in range(4)]  # role chunk and "Hel", each + blank line
    assert json.loads(first[2][len(b"data: "):])["choices"][0]["delta"] == {"content": "Hel"}
    assert not stall.released and stall.outcome is None
    threading.Timer(0.1, stall.release).start()
    events = sse(b"".join(first) + resp.read())
    assert "".join(c["delta"].get("content", "") for c in choices(events)) == "Hello"
    assert events[-1] == "[DONE]"
    assert stall.wait_done(5) == "released"
    assert model.completions[0].outcome == "released"
    model.check()


def test_a_stall_ends_when_the_client_disconnects(model) -> None:
    stall = Stall("Hel")
    model.add(stall)
    resp = stream_conn(model)
    stall.wait_reached(5)
    resp.close()  # what an aborting client does
    assert stall.wait_done(5) == "disconnected"
    assert not stall.released
    model.wait_for_requests(1, 5)
    model.check()


def test_stop_ends_a_stall_nobody_released_and_says_so() -> None:
    stall = Stall("Hel")
    with ScriptedModel([stall]) as scripted:
        resp = stream_conn(scripted)
        stall.wait_reached(5)
        begin = time.monotonic()
        scripted.stop()
        assert time.monotonic() - begin < 2
    assert stall.wait_done(0) == "stopped"
    assert any("stall ended by stopped" in p for p in scripted.problems)
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        resp.read()


def test_close_resets_the_connection_mid_stream(model) -> None:
    model.add(Close("partial"), Close(headers=False))
    resp = stream_conn(model)
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        resp.read()
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        stream_conn(model)
    assert [(r.reply, r.outcome) for r in model.completions] == [("Close", "reset")] * 2
    model.check()
