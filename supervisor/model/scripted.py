"""A scripted OpenAI-compatible model server: the drill's model, and the tests'.

Owns an HTTP server on 127.0.0.1 (a free port) in a background thread that
answers ``POST /v1/chat/completions`` (``stream: true``) from a script, the
way Pi's ``openai-completions`` provider expects: ``text/event-stream``
chunks of ``chat.completion.chunk`` objects (text deltas or ``tool_calls``
deltas), a chunk with ``finish_reason``, a usage chunk, then ``data: [DONE]``.
It also answers ``GET /v1/models``. Every request is logged (path, headers
without credentials, the parsed JSON body) so a caller can assert what the
model saw. It lives in the product so ``pi-workflows drill`` can run agent
steps through the real Pi without any network; ``e2e/scripted_model.py``
re-exports it for the unit tests, the e2e drills and the bench. This module
is the scripting API (``ScriptedModel``, ``Request``, ``message_text``; the
reply kinds are ``replies``, re-exported here); the HTTP side is
``httpserver``, the stream's encoding ``sse``, the request log's
record ``requestlog`` (with ``ModelBackend``, the calls the HTTP side makes on
this class). Imports the standard library and those modules only (never the
worker); none of them imports this one.

Scripting a conversation
------------------------
A script is a queue of replies, one per model request, in order; or a
function of the logged ``Request`` that returns a reply (None: no reply).
A reply is one of:

- ``Text("Hel", "lo")``: text, one delta per argument;
- ``ToolCalls(call("read", {"path": "a.txt"}), text="")``: one or more tool
  calls, their JSON arguments streamed in pieces, ``finish_reason: tool_calls``;
- ``HttpError(500, body)``: an HTTP error instead of a stream;
- ``Stall("Hel", after=("lo",))``: send some deltas, then block until the test
  calls ``release()`` (the stream then finishes normally), the client
  disconnects (an abort), or the stall's deadline passes (recorded as a
  problem, and the connection is reset); keep it to ``wait_reached()``,
  ``release()`` and ``wait_done()`` (its outcome) from the test;
- ``Close("Hel")``: send some deltas (or, with ``headers=False``, nothing at
  all), then reset the connection.

Every reply takes ``delay=`` seconds to wait before the response starts.
A function script decides from what the model was sent, for example
``lambda r: Text("done") if r.texts("tool") else ToolCalls(call("bash", {...}))``.
When the script runs out the server answers HTTP 500 naming the problem and
records it in ``problems``; ``check()`` raises if any problem was recorded.

    from e2e.pi_env import PiRpc, make_pi_env
    from pi_workflows.supervisor.model.scripted import ScriptedModel, Text, ToolCalls, call

    script = [ToolCalls(call("read", {"path": "notes.txt"})),  # answers request 1
              Text("The notes say ", "hello.")]                # answers request 2
    with ScriptedModel(script) as model:
        env = make_pi_env(tmp_path, model.base_url, model_id=model.model_id)
        (env.cwd / "notes.txt").write_text("hello")
        with PiRpc(env) as pi:
            pi.request({"type": "prompt", "message": "read my notes"})
            events = pi.read_until("agent_end")
        first, second = model.completions
        assert "read" in first.tool_names
        assert second.messages[-1]["role"] == "tool"  # the model saw the tool result
        model.check()  # no unscripted request, no server-side error

Each HTTP response closes its connection (``Connection: close``), so no idle
keep-alive connection outlives a request and ``stop()`` ends every handler.
Streams use chunked transfer encoding: a reset mid-stream is a protocol error
for the client, not a quietly short body.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .httpserver import COMPLETIONS_PATH, MODELS_PATH, SECRET_HEADERS, WAKE_S, ModelServer
from .replies import Close, HttpError, Reply, Stall, Text, ToolCall, ToolCalls, call
from .requestlog import Request, message_text

__all__ = ["COMPLETIONS_PATH", "MODELS_PATH", "SECRET_HEADERS", "WAKE_S", "Close", "HttpError",
           "Reply", "Request", "Script", "ScriptedModel", "Stall", "Text", "ToolCall",
           "ToolCalls", "call", "message_text"]

Script = Iterable[Reply] | Callable[[Request], Reply | None]


class ScriptedModel:
    """The server: ``with ScriptedModel(script) as model`` (or ``start()``/``stop()``)."""

    def __init__(self, script: Script = (), *, model_id: str = "scripted-model",
                 host: str = "127.0.0.1", port: int = 0, max_log: int | None = None) -> None:
        self.model_id = model_id
        self._host = host
        self._port = port  # 0: a free one
        # Requests kept in the log (None: all): a long-lived server keeps the newest only.
        self._max_log = max_log
        self._received = 0
        self._completion_count = 0
        self._lock = threading.Condition()
        self._function: Callable[[Request], Reply | None] | None = None
        self._queue: deque[Reply] = deque()
        if callable(script):
            self._function = script
        else:
            self._queue.extend(script)
        self._requests: list[Request] = []
        self._problems: list[str] = []
        self.stopping = threading.Event()
        self._httpd: ModelServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> ScriptedModel:
        if self._httpd is not None:
            raise RuntimeError("ScriptedModel already started")
        self._httpd = ModelServer((self._host, self._port), self)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": WAKE_S},
                                        name=f"scripted-model:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, end every open stream (stalls included), join the threads.

        A handler still running after ``timeout`` is recorded as a problem.
        """
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.stopping.set()  # wakes delays and stalls
        httpd.shutdown()
        httpd.server_close()
        left = httpd.close_connections(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
        if left:
            self.record_problem(f"{left} connection handler(s) still running {timeout:g} s"
                                " after stop")

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedModel is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What Pi's ``models.json`` needs as ``baseUrl``."""
        return f"http://{self._host}:{self.port}/v1"

    # -- the script (``next_reply`` and the recording calls below are ``ModelBackend``) --

    def add(self, *replies: Reply) -> None:
        """Append replies to a queue script."""
        if self._function is not None:
            raise RuntimeError("this ScriptedModel is scripted by a function, not a queue")
        with self._lock:
            self._queue.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies not used yet (0 for a function script)."""
        with self._lock:
            return len(self._queue)

    def next_reply(self, request: Request) -> Reply | None:
        if self._function is not None:
            return self._function(request)
        with self._lock:
            return self._queue.popleft() if self._queue else None

    # -- the log --

    @property
    def requests(self) -> list[Request]:
        """Every request received, in order (a copy of the list)."""
        with self._lock:
            return list(self._requests)

    @property
    def completions(self) -> list[Request]:
        """The ``POST /v1/chat/completions`` requests, in order."""
        return [r for r in self.requests if r.method == "POST" and r.path == COMPLETIONS_PATH]

    @property
    def completion_count(self) -> int:
        """How many completion requests arrived in all (the log may keep fewer)."""
        with self._lock:
            return self._completion_count

    @property
    def problems(self) -> list[str]:
        """What went wrong on the server's side: script exhausted, bad requests, ..."""
        with self._lock:
            return list(self._problems)

    def wait_for_requests(self, count: int, timeout: float) -> list[Request]:
        """Block until ``count`` completion requests arrived; all of them so far."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                done = [r for r in self._requests if r.path == COMPLETIONS_PATH]
                if len(done) >= count:
                    return done
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(done)} of {count} model requests after"
                                         f" {timeout:g} s:\n{self.describe()}")
                self._lock.wait(left)

    def wait_answered(self, request: Request, timeout: float) -> str:
        """Block until ``request``'s answer ended (its handler records the outcome after
        the last byte is sent, so a client may read the whole body first); the outcome."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not request.outcome:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"request #{request.index} unanswered after"
                                         f" {timeout:g} s")
                self._lock.wait(left)
            return request.outcome

    def check(self) -> None:
        """Raise AssertionError if the server recorded any problem."""
        problems = self.problems
        if problems:
            raise AssertionError("scripted model problems:\n  " + "\n  ".join(problems)
                                 + f"\n{self.describe()}")

    def describe(self) -> str:
        """One line per request, for failure messages."""
        lines = [r.describe() for r in self.requests]
        return "\n".join(lines) if lines else "(no requests)"

    def log_request(self, method: str, path: str, headers: dict[str, str], body: Any) -> Request:
        with self._lock:
            request = Request(self._received, method, path, headers, body, time.monotonic())
            self._received += 1
            self._completion_count += method == "POST" and path == COMPLETIONS_PATH
            self._requests.append(request)
            if self._max_log is not None and len(self._requests) > self._max_log:
                del self._requests[0]
            self._lock.notify_all()
        return request

    def mark_chosen(self, request: Request, reply: str) -> None:
        """Name the reply before it is sent: a client may look as soon as it has it."""
        with self._lock:
            request.reply = reply

    def mark_finished(self, request: Request, reply: str, outcome: str) -> None:
        with self._lock:
            request.reply, request.outcome = reply, outcome
            self._lock.notify_all()

    def record_problem(self, text: str) -> None:
        with self._lock:
            self._problems.append(text)
            self._lock.notify_all()
