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
re-exports it for the unit tests, the e2e drills and the bench. Imports the
standard library only (never the worker).

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
    from pi_workflows.supervisor.drill.model import ScriptedModel, Text, ToolCalls, call

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

import contextlib
import json
import select
import socket
import struct
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
# Headers never written to the request log: they carry credentials.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key",
                            "cookie"})
# How often a blocked stream looks at its release flag and the server's shutdown;
# a client disconnect wakes it at once (select on the socket).
WAKE_S = 0.05


# ---- replies -----------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A text reply, one delta per argument; ``finish`` is the final ``finish_reason``."""

    deltas: tuple[str, ...]
    delay: float = 0.0
    finish: str = "stop"
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens; None: estimated

    def __init__(self, *deltas: str, delay: float = 0.0, finish: str = "stop",
                 usage: tuple[int, int] | None = None) -> None:
        object.__setattr__(self, "deltas", deltas)
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "finish", finish)
        object.__setattr__(self, "usage", usage)

    @property
    def text(self) -> str:
        return "".join(self.deltas)


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``arguments`` is sent as JSON (a str is sent as is, even if it is
    not valid JSON), split into ``pieces`` argument deltas."""

    name: str
    arguments: Mapping[str, Any] | str
    id: str = ""  # "": call_<request>_<index>
    pieces: int = 3

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


def call(name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str = "",
         pieces: int = 3) -> ToolCall:
    """A ``ToolCall`` (``arguments`` defaults to ``{}``)."""
    return ToolCall(name, {} if arguments is None else arguments, id, pieces)


@dataclass(frozen=True)
class ToolCalls:
    """One or more tool calls, after optional ``text``; ``finish_reason: tool_calls``."""

    calls: tuple[ToolCall, ...]
    text: str = ""
    delay: float = 0.0
    usage: tuple[int, int] | None = None

    def __init__(self, *calls: ToolCall, text: str = "", delay: float = 0.0,
                 usage: tuple[int, int] | None = None) -> None:
        if not calls:
            raise ValueError("ToolCalls needs at least one call")
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "usage", usage)


@dataclass(frozen=True)
class HttpError:
    """An HTTP error response; ``body`` (a str, or JSON for anything else) defaults to an
    OpenAI-style error object."""

    status: int = 500
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0

    def payload(self) -> bytes:
        body = self.body
        if body is None:
            body = {"error": {"message": f"scripted HTTP {self.status}",
                              "type": "scripted_error", "code": self.status}}
        return (body if isinstance(body, str) else json.dumps(body)).encode()


class Stall:
    """Send ``before`` deltas, then block until ``release()``, a client disconnect, the
    server stopping, or ``timeout`` seconds; once released, send ``after`` and finish.

    ``outcome`` says which: "released", "disconnected", "stopped" or "timeout" (the
    last two are recorded as problems). One ``Stall`` answers one request.
    """

    def __init__(self, *before: str, after: Sequence[str] = (), delay: float = 0.0,
                 timeout: float = 60.0) -> None:
        self.before = before
        self.after = tuple(after)
        self.delay = delay
        self.timeout = timeout
        self.outcome: str | None = None
        self._released = threading.Event()
        self._reached = threading.Event()  # the ``before`` deltas are written
        self._done = threading.Event()  # ``outcome`` is set

    def release(self) -> None:
        self._released.set()

    @property
    def released(self) -> bool:
        return self._released.is_set()

    def wait_reached(self, timeout: float) -> None:
        """Block until the stall is in effect (its ``before`` deltas were sent)."""
        if not self._reached.wait(timeout):
            raise AssertionError(f"no request reached the stall within {timeout:g} s")

    def wait_done(self, timeout: float) -> str:
        """Block until the stall ended; its outcome."""
        if not self._done.wait(timeout):
            raise AssertionError(f"the stall did not end within {timeout:g} s")
        assert self.outcome is not None
        return self.outcome

    def __repr__(self) -> str:
        return f"Stall(before={self.before!r}, after={self.after!r}, outcome={self.outcome!r})"


@dataclass(frozen=True)
class Close:
    """Send the response headers and ``deltas`` (with ``headers=False``: nothing), then
    reset the connection: no finish chunk, no ``[DONE]``, no end of the chunked body."""

    deltas: tuple[str, ...]
    headers: bool = True
    delay: float = 0.0

    def __init__(self, *deltas: str, headers: bool = True, delay: float = 0.0) -> None:
        if deltas and not headers:
            raise ValueError("Close cannot send deltas without headers")
        object.__setattr__(self, "deltas", deltas)
        object.__setattr__(self, "headers", headers)
        object.__setattr__(self, "delay", delay)


Reply = Text | ToolCalls | HttpError | Stall | Close
Script = Iterable[Reply] | Callable[["Request"], Reply | None]


# ---- the request log -------------------------------------------------------------------


@dataclass
class Request:
    """One request as the server received it, and how it was answered."""

    index: int  # 0-based, over every request the server received
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names, credentials left out
    body: Any  # the parsed JSON body; None without one
    received_at: float  # time.monotonic()
    reply: str = ""  # what answered it: "Text", "ToolCalls", "HttpError(500)", "exhausted", ...
    outcome: str = ""  # how the answer ended: "complete", "disconnected", "reset", ...

    @property
    def messages(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        return list(body.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        return list(body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return [str(tool.get("function", {}).get("name")) for tool in self.tools]

    def texts(self, role: str) -> list[str]:
        """The text of every message with ``role``, in order."""
        return [message_text(m) for m in self.messages if m.get("role") == role]

    def describe(self) -> str:
        return f"#{self.index} {self.method} {self.path} -> {self.reply or '?'}" \
               f" ({self.outcome or 'unfinished'})"


def message_text(message: Mapping[str, Any]) -> str:
    """A chat message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content
                       if isinstance(part, dict) and part.get("type") == "text")
    return ""


# ---- the server --------------------------------------------------------------------


class _Disconnected(Exception):
    """The client went away while we were writing or waiting."""


class ScriptedModel:
    """The server: ``with ScriptedModel(script) as model`` (or ``start()``/``stop()``)."""

    def __init__(self, script: Script = (), *, model_id: str = "scripted-model",
                 host: str = "127.0.0.1") -> None:
        self.model_id = model_id
        self._host = host
        self._lock = threading.Condition()
        self._function: Callable[[Request], Reply | None] | None = None
        self._queue: deque[Reply] = deque()
        if callable(script):
            self._function = script
        else:
            self._queue.extend(script)
        self._requests: list[Request] = []
        self._problems: list[str] = []
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> ScriptedModel:
        if self._httpd is not None:
            raise RuntimeError("ScriptedModel already started")
        self._httpd = _Server((self._host, 0), self)
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
        self._stopping.set()  # wakes delays and stalls
        httpd.shutdown()
        httpd.server_close()
        left = httpd.close_connections(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
        if left:
            self._problem(f"{left} connection handler(s) still running {timeout:g} s after stop")

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

    # -- the script --

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

    def _next_reply(self, request: Request) -> Reply | None:
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

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> Request:
        with self._lock:
            request = Request(len(self._requests), method, path, headers, body,
                              time.monotonic())
            self._requests.append(request)
            self._lock.notify_all()
        return request

    def _chosen(self, request: Request, reply: str) -> None:
        """Name the reply before it is sent: a client may look as soon as it has it."""
        with self._lock:
            request.reply = reply

    def _finish(self, request: Request, reply: str, outcome: str) -> None:
        with self._lock:
            request.reply, request.outcome = reply, outcome
            self._lock.notify_all()

    def _problem(self, text: str) -> None:
        with self._lock:
            self._problems.append(text)
            self._lock.notify_all()


class _Server(ThreadingHTTPServer):
    """The HTTP server, keeping each connection's socket and thread so ``stop`` can end them."""

    daemon_threads = True
    block_on_close = False  # close_connections joins with a deadline instead

    def __init__(self, address: tuple[str, int], model: ScriptedModel) -> None:
        self.model = model
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._serve_one, args=(request, client_address),
                                  name="scripted-model-conn", daemon=True)
        with self._conns_lock:
            self._conns[thread] = request
        thread.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._conns_lock:
                self._conns.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that resets its connection is not news; any other exception in a
        # handler is this module's bug: make the test see it instead of stderr.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        self.model._problem(f"handler error: {traceback.format_exc(limit=5)}")

    def close_connections(self, timeout: float) -> int:
        """Shut down every open connection, join its thread; how many are left running."""
        with self._conns_lock:
            conns = dict(self._conns)
        for sock in conns.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in conns:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(thread.is_alive() for thread in conns)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record; stderr noise would only hide failures

    @property
    def model(self) -> ScriptedModel:
        return self.server.model

    # -- routing --

    def do_GET(self) -> None:
        request = self._log(None)
        if self.path.split("?")[0] == MODELS_PATH:
            self._json(200, {"object": "list", "data": [
                {"id": self.model.model_id, "object": "model", "created": 0,
                 "owned_by": "scripted"}]})
            self.model._finish(request, "models", "complete")
            return
        self._refuse(request, 404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        try:
            raw = self._read_body()
        except ValueError as err:
            self._refuse(self._log(None), 400, str(err))
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._refuse(self._log(raw.decode(errors="replace")), 400,
                         "request body is not JSON")
            return
        request = self._log(body)
        if self.path.split("?")[0] != COMPLETIONS_PATH:
            self._refuse(request, 404, f"no route for POST {self.path}")
            return
        if not isinstance(body, dict) or body.get("stream") is not True:
            self._refuse(request, 400, f"request #{request.index} is not a streaming chat"
                         " completion (the scripted model only streams)")
            return
        reply = self.model._next_reply(request)
        if reply is None:
            self._refuse(request, 500, f"script exhausted: request #{request.index}"
                         f" ({len(request.messages)} messages) has no scripted reply",
                         reply="exhausted")
            return
        try:
            self._answer(request, reply)
        except _Disconnected:
            self.model._finish(request, type(reply).__name__, "disconnected")

    # -- reading and logging --

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ValueError("chunked request bodies are not supported")
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _log(self, body: Any) -> Request:
        headers = {k.lower(): v for k, v in self.headers.items()
                   if k.lower() not in SECRET_HEADERS}
        return self.model._record(self.command, self.path, headers, body)

    # -- plain responses --

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self._plain(status, data, {"Content-Type": "application/json"})

    def _plain(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as err:
            raise _Disconnected from err
        self.close_connection = True

    def _refuse(self, request: Request, status: int, text: str, reply: str = "") -> None:
        """An answer that is a problem on the server's side: recorded, and said plainly."""
        self.model._problem(f"{request.describe().split(' -> ')[0]}: {text}")
        with contextlib.suppress(_Disconnected):
            self._json(status, {"error": {"message": f"scripted model: {text}",
                                          "type": "scripted_model_error"}})
        self.model._finish(request, reply or f"refused({status})", "complete")

    # -- scripted answers --

    def _answer(self, request: Request, reply: Reply) -> None:
        name = type(reply).__name__
        if reply.delay > 0:
            waited = self._wait(None, reply.delay)
            if waited != "timeout":
                # The client left (or the server is stopping) before the response began.
                if isinstance(reply, Stall):
                    reply.outcome = waited
                    reply._done.set()
                self.model._finish(request, name, waited)
                return
        if isinstance(reply, HttpError):
            self.model._chosen(request, f"HttpError({reply.status})")
            self._plain(reply.status, reply.payload(),
                        {"Content-Type": "application/json", **reply.headers})
            self.model._finish(request, f"HttpError({reply.status})", "complete")
            return
        if isinstance(reply, Close):
            if reply.headers:
                stream = _Stream(self, request)
                stream.begin()
                for delta in reply.deltas:
                    stream.content(delta)
            self._reset()
            self.model._finish(request, name, "reset")
            return
        self.model._chosen(request, name)
        stream = _Stream(self, request)
        stream.begin()
        if isinstance(reply, Text):
            for delta in reply.deltas:
                stream.content(delta)
            stream.end(reply.finish, reply.usage)
        elif isinstance(reply, ToolCalls):
            if reply.text:
                stream.content(reply.text)
            for i, tool_call in enumerate(reply.calls):
                stream.tool_call(i, tool_call)
            stream.end("tool_calls", reply.usage)
        elif isinstance(reply, Stall):
            self._stall(request, stream, reply)
            return
        else:  # pragma: no cover - the Reply union is closed
            raise TypeError(f"not a reply: {reply!r}")
        self.model._finish(request, name, "complete")

    def _stall(self, request: Request, stream: _Stream, stall: Stall) -> None:
        try:
            for delta in stall.before:
                stream.content(delta)
        except _Disconnected:
            stall.outcome = "disconnected"
            stall._done.set()
            raise
        stall._reached.set()
        outcome = self._wait(stall._released, stall.timeout)
        stall.outcome = "released" if outcome == "set" else outcome
        try:
            if stall.outcome == "released":
                for delta in stall.after:
                    stream.content(delta)
                stream.end("stop", None)
                self.model._finish(request, "Stall", "released")
            elif stall.outcome == "disconnected":
                self.model._finish(request, "Stall", "disconnected")
            else:
                self.model._problem(f"request #{request.index}: stall ended by {stall.outcome}"
                                    " without a release or a disconnect")
                self._reset()
                self.model._finish(request, "Stall", stall.outcome)
        finally:
            stall._done.set()

    def _wait(self, event: threading.Event | None, timeout: float) -> str:
        """Block until ``event`` is set ("set"), the client disconnects ("disconnected"),
        the server stops ("stopped"), or ``timeout`` passes ("timeout")."""
        deadline = time.monotonic() + timeout
        sock = self.connection
        while True:
            if event is not None and event.is_set():
                return "set"
            if self.model._stopping.is_set():
                return "stopped"
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            try:
                readable, _, _ = select.select([sock], [], [], min(WAKE_S, left))
                # The request is fully read: readable now means EOF or a reset.
                gone = bool(readable) and not sock.recv(1, socket.MSG_PEEK)
            except (OSError, ValueError):
                gone = True
            if gone:
                # stop() shuts our socket down too: that is the server stopping.
                return "stopped" if self.model._stopping.is_set() else "disconnected"

    def _reset(self) -> None:
        """Drop the connection with a TCP reset (SO_LINGER 0), no orderly end."""
        with contextlib.suppress(OSError):
            self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True


class _Stream:
    """One SSE response of ``chat.completion.chunk`` objects in a chunked HTTP body."""

    def __init__(self, handler: _Handler, request: Request) -> None:
        self._handler = handler
        self._id = f"chatcmpl-scripted-{request.index}"
        self._index = request.index
        body = request.body if isinstance(request.body, dict) else {}
        self._model = str(body.get("model") or handler.model.model_id)
        self._created = int(time.time())
        self._prompt_chars = len(json.dumps(body.get("messages") or []))
        self._sent_chars = 0

    def begin(self) -> None:
        h = self._handler
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Cache-Control", "no-cache")
            h.send_header("Transfer-Encoding", "chunked")
            h.send_header("Connection", "close")
            h.end_headers()
        except OSError as err:
            raise _Disconnected from err
        h.close_connection = True
        self._chunk({"role": "assistant", "content": ""})

    def content(self, text: str) -> None:
        self._sent_chars += len(text)
        self._chunk({"content": text})

    def tool_call(self, index: int, tool_call: ToolCall) -> None:
        call_id = tool_call.id or f"call_{self._index}_{index}"
        self._chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                     "function": {"name": tool_call.name, "arguments": ""}}]})
        args = tool_call.arguments_json
        self._sent_chars += len(args)
        for piece in _split(args, tool_call.pieces):
            self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

    def end(self, finish: str, usage: tuple[int, int] | None) -> None:
        self._chunk({}, finish)
        prompt, completion = usage or (max(1, self._prompt_chars // 4),
                                       max(1, self._sent_chars // 4))
        self._event({"id": self._id, "object": "chat.completion.chunk",
                     "created": self._created, "model": self._model, "choices": [],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}})
        self._write(b"data: [DONE]\n\n")
        self._write(b"", last=True)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
        self._event({"id": self._id, "object": "chat.completion.chunk",
                     "created": self._created, "model": self._model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _event(self, payload: dict[str, Any]) -> None:
        self._write(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _write(self, data: bytes, last: bool = False) -> None:
        # One HTTP chunk per SSE event, flushed, so the client sees each delta as it is sent.
        frame = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        if last:
            frame += b"0\r\n\r\n"
        try:
            self._handler.wfile.write(frame)
            self._handler.wfile.flush()
        except OSError as err:
            raise _Disconnected from err


def _split(text: str, pieces: int) -> list[str]:
    """``text`` in up to ``pieces`` consecutive non-empty parts (at least one part)."""
    if not text or pieces <= 1:
        return [text]
    size = -(-len(text) // pieces)
    return [text[i:i + size] for i in range(0, len(text), size)]
