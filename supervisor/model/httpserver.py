"""The scripted model's HTTP side: the server thread's sockets and the handler.

Owns ``ModelServer`` (a threading HTTP server that keeps each connection's socket
and thread so ``ScriptedModel.stop`` can end them) and ``_Handler`` (routing of
``GET /v1/models`` and ``POST /v1/chat/completions``, the request log entry
without credentials, plain and refused answers, and playing each reply kind:
delays, stalls, resets), with the paths and headers they go by. The script,
the log and the problems stay with ``ScriptedModel``; the handler reaches
them through ``requestlog.ModelBackend``. Imports the standard library,
``replies``, ``requestlog`` and ``sse``; never ``scripted`` or the
worker.
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
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .replies import Close, HttpError, Reply, Stall, Text, ToolCalls
from .requestlog import ModelBackend, Request
from .sse import Disconnected, EventStream

COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
# Headers never written to the request log: they carry credentials.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key",
                            "cookie"})
# How often a blocked stream looks at its release flag and the server's shutdown;
# a client disconnect wakes it at once (select on the socket).
WAKE_S = 0.05


class ModelServer(ThreadingHTTPServer):
    """The HTTP server, keeping each connection's socket and thread so ``stop`` can end them."""

    daemon_threads = True
    block_on_close = False  # close_connections joins with a deadline instead

    def __init__(self, address: tuple[str, int], model: ModelBackend) -> None:
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
        self.model.record_problem(f"handler error: {traceback.format_exc(limit=5)}")

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
    server: ModelServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record; stderr noise would only hide failures

    @property
    def model(self) -> ModelBackend:
        return self.server.model

    # -- routing --

    def do_GET(self) -> None:
        request = self._log(None)
        if self.path.split("?")[0] == MODELS_PATH:
            self._json(200, {"object": "list", "data": [
                {"id": self.model.model_id, "object": "model", "created": 0,
                 "owned_by": "scripted"}]})
            self.model.mark_finished(request, "models", "complete")
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
        reply = self.model.next_reply(request)
        if reply is None:
            self._refuse(request, 500, f"script exhausted: request #{request.index}"
                         f" ({len(request.messages)} messages) has no scripted reply",
                         reply="exhausted")
            return
        try:
            self._answer(request, reply)
        except Disconnected:
            self.model.mark_finished(request, type(reply).__name__, "disconnected")

    # -- reading and logging --

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ValueError("chunked request bodies are not supported")
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _log(self, body: Any) -> Request:
        headers = {k.lower(): v for k, v in self.headers.items()
                   if k.lower() not in SECRET_HEADERS}
        return self.model.log_request(self.command, self.path, headers, body)

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
            raise Disconnected from err
        self.close_connection = True

    def _refuse(self, request: Request, status: int, text: str, reply: str = "") -> None:
        """An answer that is a problem on the server's side: recorded, and said plainly."""
        self.model.record_problem(f"{request.describe().split(' -> ')[0]}: {text}")
        with contextlib.suppress(Disconnected):
            self._json(status, {"error": {"message": f"scripted model: {text}",
                                          "type": "scripted_model_error"}})
        self.model.mark_finished(request, reply or f"refused({status})", "complete")

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
                self.model.mark_finished(request, name, waited)
                return
        if isinstance(reply, HttpError):
            self.model.mark_chosen(request, f"HttpError({reply.status})")
            self._plain(reply.status, reply.payload(),
                        {"Content-Type": "application/json", **reply.headers})
            self.model.mark_finished(request, f"HttpError({reply.status})", "complete")
            return
        if isinstance(reply, Close):
            if reply.headers:
                stream = EventStream(self, request, self.model.model_id)
                stream.begin()
                for delta in reply.deltas:
                    stream.content(delta)
            self._reset()
            self.model.mark_finished(request, name, "reset")
            return
        self.model.mark_chosen(request, name)
        stream = EventStream(self, request, self.model.model_id)
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
        self.model.mark_finished(request, name, "complete")

    def _stall(self, request: Request, stream: EventStream, stall: Stall) -> None:
        try:
            for delta in stall.before:
                stream.content(delta)
        except Disconnected:
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
                self.model.mark_finished(request, "Stall", "released")
            elif stall.outcome == "disconnected":
                self.model.mark_finished(request, "Stall", "disconnected")
            else:
                self.model.record_problem(f"request #{request.index}: stall ended by"
                                          f" {stall.outcome} without a release or a disconnect")
                self._reset()
                self.model.mark_finished(request, "Stall", stall.outcome)
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
            if self.model.stopping.is_set():
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
                return "stopped" if self.model.stopping.is_set() else "disconnected"

    def _reset(self) -> None:
        """Drop the connection with a TCP reset (SO_LINGER 0), no orderly end."""
        with contextlib.suppress(OSError):
            self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True
