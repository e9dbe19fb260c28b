"""The in-session executor against a stand-in extension on a real UNIX socket: the step is
delivered, calls are judged as in headless steps (wrong step, stale attempt, rejection,
acceptance), a settled turn gets the reminders the setting allows, Escape holds the step,
a refused handshake falls back to headless, and a closed connection parks the run."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pi_workflows.protocol import conversation as wire
from pi_workflows.protocol.states import Outcome
from pi_workflows.worker.agent import AgentRequest, AgentResult
from pi_workflows.worker.conversation import SessionExecutor

from ..helpers.waiting import poll

pytestmark = pytest.mark.timeout(20)
REQUEST = AgentRequest("run-1", "ask", "ask-1-aaaaaa", "Name a colour.",
                       {"type": "object", "required": ["answer"]}, None)


class Hooks:
    def __init__(self) -> None:
        self.prompts: list[tuple[str, str]] = []
        self.updates: list[str] = []

    def prompt_sent(self, prompt: str, via: str = "headless") -> None:
        self.prompts.append((via, prompt))

    def update(self, message: str) -> None:
        self.updates.append(message)

    def check(self, submission: Any) -> str | None:
        if not isinstance(submission, dict) or "answer" not in submission:
            return "output is missing required field 'answer'"
        return None


class Extension:
    """The Pi side: accepts one worker, records what it sends, answers as told."""

    def __init__(self, path: str, *, version: int = wire.VERSION,
                 refuse: str | None = None) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(1)
        self.version, self.refuse = version, refuse
        self.got: list[dict[str, Any]] = []
        self.conn: socket.socket | None = None
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        self.conn = conn
        reader = wire.LineReader()
        while chunk := self._recv(conn):
            for message in reader.feed(chunk):
                assert not isinstance(message, wire.ProtocolError)
                self.got.append(message)
                if message["type"] == wire.HELLO:
                    if self.refuse:
                        self.send(wire.REFUSED, reason=self.refuse)
                    else:
                        self.send(wire.WELCOME, session="s1")

    @staticmethod
    def _recv(conn: socket.socket) -> bytes:
        try:
            return conn.recv(65536)
        except OSError:  # closed by the test itself
            return b""

    def send(self, kind: str, **fields: Any) -> None:
        assert self.conn is not None
        line = wire.encode(kind, **fields)
        if self.version != wire.VERSION:
            line = line.replace(b'"v":1', b'"v":%d' % self.version)
        self.conn.sendall(line)

    def raw(self, data: bytes) -> None:
        assert self.conn is not None
        self.conn.sendall(data)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in list(self.got) if m["type"] == kind]


class Headless:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, request: AgentRequest, hooks: Any, stop: threading.Event) -> AgentResult:
        self.ran.append(request.attempt_id)
        return AgentResult(Outcome.OK, output={"answer": "headless"})


@contextmanager
def session(reminders: int = 1, **ext: Any) -> Iterator[tuple[Extension, SessionExecutor,
                                                             Headless, list[str]]]:
    with tempfile.TemporaryDirectory(prefix="pwt-") as tmp:
        path = os.path.join(tmp, "c.sock")
        extension = Extension(path, **ext)
        headless = Headless()
        parks: list[str] = []
        executor = SessionExecutor(path, run_id="run-1", workflow="w", session="s1",
                                   reminders=reminders, headless=lambda: headless,
                                   park=lambda: parks.append("park"))
        try:
            yield extension, executor, headless, parks
        finally:
            executor.close()
            extension.server.close()


def start(executor: SessionExecutor, hooks: Hooks,
          stop: threading.Event | None = None) -> dict[str, AgentResult]:
    box: dict[str, AgentResult] = {}
    threading.Thread(target=lambda: box.setdefault(
        "r", executor.run(REQUEST, hooks, stop or threading.Event())), daemon=True).start()
    return box


def call(ext: Extension, call_id: str, **fields: Any) -> dict[str, Any]:
    ext.send(wire.CALL, callId=call_id, **fields)
    return poll(lambda: next((v for v in ext.of(wire.VERDICT) if v["callId"] == call_id), None),
                5)


def test_calls_are_judged_like_a_headless_step_and_the_accepted_one_ends_it() -> None:
    hooks = Hooks()
    with session() as (ext, executor, headless, _):
        box = start(executor, hooks)
        [step] = poll(lambda: ext.of(wire.STEP), 5)
        assert (step["runId"], step["step"], step["attempt"]) == ("run-1", "ask", "ask-1-aaaaaa")
        assert ext.of(wire.HELLO)[0]["session"] == "s1"
        wrong = call(ext, "c1", action="submit", step="other", attempt="ask-1-aaaaaa",
                     output={"answer": "x"})
        stale = call(ext, "c2", action="submit", step="ask", attempt="ask-0-zzzzzz",
                     output={"answer": "x"})
        rejected = call(ext, "c3", action="submit", step="ask", attempt="ask-1-aaaaaa",
                        output={"colour": "red"})
        assert not wrong["ok"] and not stale["ok"] and "ask-1-aaaaaa" in stale["message"]
        assert not rejected["ok"] and "missing required field 'answer'" in rejected["message"]
        progress = call(ext, "c4", action="update", step="ask", attempt="ask-1-aaaaaa",
                        update="thinking")
        assert progress["ok"] and hooks.updates == ["thinking"]
        assert "r" not in box  # nothing so far ended the step
        accepted = call(ext, "c5", action="submit", step="ask", attempt="ask-1-aaaaaa",
                        output='{"answer": "teal"}')
        assert accepted["ok"]
        result = poll(lambda: box.get("r"), 5)
        assert result.outcome == Outcome.OK and result.output == {"answer": "teal"}
        assert poll(lambda: ext.of(wire.STEP_DONE), 5)[0]["outcome"] == "accepted"
        assert hooks.prompts == [("session", REQUEST.prompt)] and headless.ran == []


def test_a_settled_turn_is_reminded_as_often_as_allowed_then_the_step_fails() -> None:
    hooks = Hooks()
    with session(reminders=1) as (ext, executor, _, _):
        box = start(executor, hooks)
        poll(lambda: ext.of(wire.STEP), 5)
        ext.send(wire.SETTLED, step="ask", attempt="ask-0-zzzzzz", aborted=False)  # stale
        ext.send(wire.SETTLED, step="ask", attempt="ask-1-aaaaaa", aborted=False)
        [remind] = poll(lambda: ext.of(wire.REMIND), 5)
        assert "without an accepted submission" in remind["message"]
        ext.send(wire.SETTLED, step="ask", attempt="ask-1-aaaaaa", aborted=False)
        result = poll(lambda: box.get("r"), 5)
        assert result.outcome == Outcome.FAILED and result.error_code == "agent_no_submission"
        assert len(ext.of(wire.REMIND)) == 1 and [v for v, _ in hooks.prompts] == ["session"] * 2


def test_escape_holds_the_step_without_reminders_until_it_is_delivered_again() -> None:
    hooks = Hooks()
    with session(reminders=3) as (ext, executor, _, _):
        box = start(executor, hooks)
        poll(lambda: ext.of(wire.STEP), 5)
        ext.send(wire.SETTLED, step="ask", attempt="ask-1-aaaaaa", aborted=True)
        ext.send(wire.REDELIVER)
        assert len(poll(lambda: ext.of(wire.STEP)[1:], 5)) == 1
        assert ext.of(wire.REMIND) == [] and "r" not in box
        call(ext, "c1", action="submit", step="ask", attempt="ask-1-aaaaaa",
             output={"answer": "teal"})
        assert poll(lambda: box.get("r"), 5).outcome == Outcome.OK


def test_a_torn_or_garbled_line_is_never_taken_for_a_call() -> None:
    with session() as (ext, executor, _, _):
        box = start(executor, Hooks())
        poll(lambda: ext.of(wire.STEP), 5)
        whole = wire.encode(wire.CALL, callId="c1", action="submit", step="ask",
                            attempt="ask-1-aaaaaa", output={"answer": "teal"})
        ext.raw(whole[:-20] + b"\n")  # a torn call: dropped
        assert poll(lambda: ext.of(wire.VERDICT), 0.5) is None and "r" not in box
        ext.raw(whole)
        assert poll(lambda: box.get("r"), 5).output == {"answer": "teal"}


@pytest.mark.parametrize("ext", [{"version": 2}, {"refuse": "this Pi runs session s2"}])
def test_a_refused_handshake_or_another_version_runs_the_steps_headless(
        ext: dict[str, Any]) -> None:
    hooks = Hooks()
    with session(**ext) as (_, executor, headless, _):
        result = executor.run(REQUEST, hooks, threading.Event())
        assert result.output == {"answer": "headless"} and headless.ran == ["ask-1-aaaaaa"]
        assert executor.run(REQUEST, hooks, threading.Event()).output == {"answer": "headless"}


def test_no_extension_at_all_runs_the_steps_headless() -> None:
    headless = Headless()
    executor = SessionExecutor("/nonexistent/pwc/c.sock", run_id="run-1", workflow="w",
                               session="s1", reminders=1, headless=lambda: headless,
                               park=lambda: None)
    assert executor.run(REQUEST, Hooks(), threading.Event()).output == {"answer": "headless"}


def test_pi_going_away_mid_step_asks_the_worker_to_park_and_stop_ends_the_step() -> None:
    stop = threading.Event()
    with session() as (ext, executor, _, parks):
        box = start(executor, Hooks(), stop)
        poll(lambda: ext.of(wire.STEP), 5)
        assert ext.conn is not None
        ext.conn.close()  # Pi was closed or killed
        poll(lambda: parks, 10)
        assert "r" not in box  # no verdict of its own: the park decides
        stop.set()  # the worker's watch stops the node
        result = poll(lambda: box.get("r"), 5)
        assert result.outcome == Outcome.CANCELLED
