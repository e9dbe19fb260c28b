"""In-session agent steps: the ``AgentExecutor`` whose conversation is the user's Pi session.

Owns a worker's end of the conversation protocol (``protocol.conversation``):
one connection to the socket of the Pi extension whose session runs this
run, the step message sent into that conversation, the ``workflow`` tool's
calls judged here exactly as in headless steps (``worker.submission``), a
bounded number of reminders when a turn settles without a submission, a
step held (no reminders) after the user pressed Escape until the extension
delivers it again, and the hand-over: the connection closing mid-step
(Pi closed or killed) asks the worker to park, so a host or the reopened
session resumes the node with a new attempt. A refused or missing
connection falls back to the headless executor for the rest of the run.
Compute, shell and every other node never come here. Imports ``protocol``
and the worker's agent interface.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..protocol import conversation as wire
from ..protocol.states import Outcome
from .agent import AgentExecutor, AgentHooks, AgentRequest, AgentResult
from .submission import REMINDER, Submission

CONNECT_TIMEOUT_S = 5.0
POLL_S = 0.05
# Pi gone, yet no park reached this step: the runner normally asks within
# moments of its own lifeline closing; past this the worker parks itself.
GONE_GRACE_S = 3.0
Message = dict[str, Any]


class ConversationRefused(Exception):
    """The extension is not there, or will not take this worker; the text says why."""


class Connection:
    """One open conversation: a reader thread feeding ``inbox``; ``None`` there is EOF."""

    def __init__(self, sock: socket.socket, session: str) -> None:
        self.sock = sock
        self.session = session
        self.inbox: queue.Queue[Message | None] = queue.Queue()
        self.closed = threading.Event()
        self._send_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name="pi-workflows-conversation").start()

    @classmethod
    def open(cls, address: str, hello: Message, timeout: float = CONNECT_TIMEOUT_S) -> Connection:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.sendall(wire.encode(wire.HELLO, **hello))
            reader = wire.LineReader()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConversationRefused("the Pi session closed the conversation")
                for message in reader.feed(chunk):
                    if isinstance(message, wire.ProtocolError):
                        raise ConversationRefused(f"the Pi extension answered badly: {message}")
                    if message["type"] == wire.REFUSED:
                        raise ConversationRefused(str(message.get("reason") or "refused"))
                    if message["type"] == wire.WELCOME:
                        sock.settimeout(None)
                        return cls(sock, str(message.get("session") or ""))
            raise ConversationRefused("the Pi extension did not answer the handshake")
        except (OSError, ConversationRefused) as exc:
            sock.close()
            if isinstance(exc, ConversationRefused):
                raise
            raise ConversationRefused(f"cannot reach the Pi session ({exc})") from None

    def _read(self) -> None:
        reader = wire.LineReader()
        try:
            while chunk := self.sock.recv(65536):
                for message in reader.feed(chunk):
                    if isinstance(message, wire.ProtocolError):
                        # Never acted on: half a call must not count as a submission.
                        sys.stderr.write(f"pi-workflows worker: conversation: {message}\n")
                    else:
                        self.inbox.put(message)
        except OSError:
            pass
        finally:
            self.closed.set()
            self.inbox.put(None)

    def send(self, kind: str, **fields: Any) -> bool:
        """Send one message; False once the other end is gone."""
        try:
            data = wire.encode(kind, **fields)
        except wire.ProtocolError as exc:
            sys.stderr.write(f"pi-workflows worker: conversation: {exc}\n")
            return False
        with self._send_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class SessionExecutor:
    """Agent steps in the Pi session named by ``address``; headless when it cannot be reached."""

    def __init__(self, address: str, *, run_id: str, workflow: str | None, session: str | None,
                 reminders: int, headless: Callable[[], AgentExecutor],
                 park: Callable[[], None],
                 delivered: Callable[[], None] = lambda: None) -> None:
        self.address = address
        self.hello: Message = {"runId": run_id, "workflow": workflow, "session": session,
                               "pid": os.getpid()}
        self.reminders = reminders
        self._make_headless = headless
        self._headless: AgentExecutor | None = None
        self._park = park
        self._delivered = delivered  # a step message reached the session: a natural turn
        self._conn: Connection | None = None
        self._gone: str | None = None  # why in-session steps are off for this run
        self._lock = threading.Lock()
        # The step delivered into the conversation and not (yet) judged: if the
        # claim is lost meanwhile, the session is owed a turn saying so.
        self.pending: tuple[str, str] | None = None

    def _connection(self) -> Connection | None:
        with self._lock:
            if self._conn is None and self._gone is None:
                try:
                    self._conn = Connection.open(self.address, self.hello)
                except ConversationRefused as exc:
                    self._gone = str(exc)
                    sys.stderr.write(f"pi-workflows worker: agent steps run headless: {exc}\n")
            return self._conn

    def warm(self) -> None:
        threading.Thread(target=self._connection, daemon=True, name="pi-workflows-warm").start()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            headless = self._headless
        close = getattr(headless, "close", None)
        if callable(close):
            close()

    def run(self, request: AgentRequest, hooks: AgentHooks,
            stop: threading.Event) -> AgentResult:
        conn = self._connection()
        if conn is None or conn.closed.is_set():
            if self._headless is None:
                self._headless = self._make_headless()
            return self._headless.run(request, hooks, stop)
        self.pending = (request.node_id, request.attempt_id)
        with contextlib.suppress(Exception):  # bookkeeping only: never the step's failure
            self._delivered()
        result = _Step(conn, request, hooks, self.reminders, self._park).run(stop)
        if result.outcome != Outcome.CANCELLED:
            self.pending = None  # judged: accepted, or failed for want of a submission
        return result


class _Step:
    """One node attempt delivered into the conversation, followed to its verdict."""

    def __init__(self, conn: Connection, request: AgentRequest, hooks: AgentHooks,
                 reminders: int, park: Callable[[], None]) -> None:
        self.conn, self.request, self.hooks = conn, request, hooks
        self.submission = Submission(request, hooks)
        self.reminders_left = reminders
        self.reminders = reminders
        self.park = park
        self.ids = {"runId": request.run_id, "step": request.node_id,
                    "attempt": request.attempt_id}

    def _deliver(self, kind: str, message: str) -> None:
        self.hooks.prompt_sent(message, via="session")
        self.conn.send(kind, message=message, **self.ids)

    def _done(self, outcome: str) -> None:
        self.conn.send(wire.STEP_DONE, outcome=outcome, **self.ids)

    def run(self, stop: threading.Event) -> AgentResult:
        self._deliver(wire.STEP, self.request.prompt)
        while not stop.is_set():
            try:
                message = self.conn.inbox.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if message is None:  # Pi closed or was killed mid-step: hand the step over
                if not stop.wait(GONE_GRACE_S):
                    self.park()  # the watch sees it and stops the node: the run parks here
                    stop.wait()
                break
            result = self._handle(message)
            if result is not None:
                return result
        self._done("stopped")
        return AgentResult(Outcome.CANCELLED, error="stopped")

    def _handle(self, message: Message) -> AgentResult | None:
        kind = message["type"]
        if kind == wire.CALL:
            ok, text = self.submission.verdict(message)
            self.conn.send(wire.VERDICT, callId=message.get("callId"), ok=ok, message=text)
            if self.submission.accepted:
                self._done("accepted")
                return AgentResult(Outcome.OK, output=self.submission.output)
            return None
        if kind == wire.SETTLED:
            if self.submission.accepted or message.get("step") != self.request.node_id or (
                    message.get("attempt") != self.request.attempt_id):
                return None  # a turn of an earlier attempt (or of an accepted one) ending
            if message.get("aborted"):
                return None  # Escape: held, no reminders; the node's timeout still runs
            if self.reminders_left > 0:
                self.reminders_left -= 1
                self._deliver(wire.REMIND, REMINDER.format(step=self.request.node_id,
                                                           attempt=self.request.attempt_id))
                return None
            self._done("failed")
            return AgentResult(Outcome.FAILED, error_code="agent_no_submission",
                               error="the agent ended its turn without an accepted submission"
                                     f" ({self.reminders} reminder(s) sent)")
        if kind == wire.REDELIVER:
            self._deliver(wire.STEP, self.request.prompt)
        return None
