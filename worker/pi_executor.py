"""Agent steps in a real Pi: the ``AgentExecutor`` over one ``pi --mode rpc`` per run.

Owns running an agent node's conversation: Pi is started on the first agent
node (from a long-lived thread, recorded in ``processes.json`` before it is
used) and kept for the run's later agent nodes, in one conversation whose
session file lives in the bundle, so a resumed run continues it. Each node
sends its prompt with the step contract; the bridge's calls are judged here
(step and attempt must match, the output must pass ``expected_output`` and
``validate``); an agent turn that ends without an accepted submission gets a
bounded number of reminders. A timeout, cancel or park aborts the turn. Pi
exiting, or a provider error, fails the node with a safe message. Imports
``protocol`` and the worker's agent interface.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol.limits import safe_error_message
from ..protocol.pibin import SESSION_FILE, PiUnavailable, find_pi
from ..protocol.spawn import Popen
from ..protocol.states import Outcome
from .agent import AgentHooks, AgentRequest, AgentResult
from .bridge_server import BridgeServer
from .capture import Capture
from .pi_rpc import PiOptions, PiProcess
from .submission import REMINDER, Submission

ABORT_WAIT_S = 5.0
RETRY_GRACE_S = 0.5
POLL_S = 0.05


@dataclass(frozen=True)
class PiSettings:
    binary: str | None
    args: tuple[str, ...]
    agent_dir: str | None
    reminders: int


class _Spawner:
    """A thread that lives as long as the executor: the Pi child's PDEATHSIG parent."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Popen[bytes]], queue.Queue[Any]] | None] = (
            queue.Queue())
        threading.Thread(target=self._loop, daemon=True, name="pi-workflows-spawner").start()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, reply = job
            try:
                reply.put((True, fn()))
            except BaseException as exc:
                reply.put((False, exc))
        # Returning would end the thread and fire PDEATHSIG: only after close.

    def __call__(self, fn: Callable[[], Popen[bytes]]) -> Popen[bytes]:
        reply: queue.Queue[Any] = queue.Queue()
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        self._jobs.put(None)


class PiExecutor:
    def __init__(self, settings: PiSettings, *, project_dir: Path, session_dir: Path,
                 record_process: Callable[[int], None],
                 capture: Capture | None = None) -> None:
        self.settings = settings
        self.project_dir = project_dir
        self.session_file = session_dir / SESSION_FILE
        self.record_process = record_process
        self.capture = capture
        self._pi: PiProcess | None = None
        self._bridge: BridgeServer | None = None
        self._spawner: _Spawner | None = None
        self._lock = threading.Lock()

    # ---- the child ---------------------------------------------------------

    def _ensure(self) -> tuple[PiProcess, BridgeServer]:
        with self._lock:
            if self._pi is not None and self._pi.exited() is None and self._bridge is not None:
                return self._pi, self._bridge
            self._stop_child()
            binary = find_pi(self.settings.binary)
            self._bridge = self._bridge or BridgeServer()
            self._spawner = self._spawner or _Spawner()
            options = PiOptions(binary, self.project_dir, self.session_file,
                                self.settings.args, self.settings.agent_dir,
                                {"PI_WORKFLOWS_BRIDGE": self._bridge.address})
            self._pi = PiProcess(options, on_spawn=self.record_process, spawner=self._spawner)
            return self._pi, self._bridge

    def warm(self) -> None:
        """Start Pi now, in the background, so the first agent node finds it up."""
        def start() -> None:
            with contextlib.suppress(Exception):  # the node itself reports a failure
                self._ensure()

        threading.Thread(target=start, daemon=True, name="pi-workflows-warm").start()

    def _stop_child(self) -> None:
        if self._pi is not None:
            self._pi.close()
            self._pi = None

    def close(self) -> None:
        with self._lock:
            self._stop_child()
            if self._bridge is not None:
                self._bridge.close()
                self._bridge = None
            if self._spawner is not None:
                self._spawner.close()
                self._spawner = None

    def _tighten(self) -> None:
        # Pi writes its session file 0644; the bundle keeps everything private.
        with contextlib.suppress(OSError):
            if self.session_file.exists() and self.session_file.stat().st_mode & 0o077:
                os.chmod(self.session_file, 0o600)

    # ---- one node attempt --------------------------------------------------

    def run(self, request: AgentRequest, hooks: AgentHooks,
            stop: threading.Event) -> AgentResult:
        try:
            pi, bridge = self._ensure()
        except PiUnavailable as exc:
            return AgentResult(Outcome.FAILED, error_code="agent_unavailable", error=str(exc))
        step = Submission(request, hooks)
        bridge.set_handler(step.verdict)
        try:
            message = request.prompt
            for reminder in range(self.settings.reminders + 1):
                hooks.prompt_sent(message)  # each prompt, reminders too, leaves its digest
                ended = self._turn(pi, message, stop, request)
                self._tighten()
                if step.accepted:
                    return AgentResult(Outcome.OK, output=step.output)
                if ended is not None:
                    return ended
                if reminder < self.settings.reminders:
                    message = REMINDER.format(step=request.node_id, attempt=request.attempt_id)
            return AgentResult(Outcome.FAILED, error_code="agent_no_submission",
                               error="the agent ended its turn without an accepted submission"
                                     f" ({self.settings.reminders} reminder(s) sent)")
        finally:
            bridge.set_handler(None)
            if self.capture is not None:
                self.capture.flush()

    def _turn(self, pi: PiProcess, message: str, stop: threading.Event,
              request: AgentRequest) -> AgentResult | None:
        """Prompt once and follow the turn to ``agent_end``; a result only if it must stop."""
        prompt_id = pi.send({"type": "prompt", "message": message})
        provider_error: str | None = None
        aborted_at: float | None = None
        ended_at: float | None = None
        while True:
            if stop.is_set() and aborted_at is None:
                pi.send({"type": "abort"})
                aborted_at = time.monotonic()
            if aborted_at is not None and time.monotonic() - aborted_at > ABORT_WAIT_S:
                self._restart_after_hang()
                return AgentResult(Outcome.CANCELLED, error="stopped")
            try:
                event = pi.events.get(timeout=POLL_S)
            except queue.Empty:
                if self.capture is not None:
                    self.capture.tick(request)  # text that paused mid-reply shows up
                if ended_at is not None and time.monotonic() - ended_at > RETRY_GRACE_S:
                    return AgentResult(Outcome.FAILED, error_code="agent_provider_error",
                                       error=f"the model provider failed: {provider_error}")
                continue
            if event is None:
                code = pi.exit_status()
                return AgentResult(Outcome.FAILED, error_code="agent_exited", error=(
                    f"pi exited (status {code}) during the step: {pi.stderr_tail()}"))
            kind = event.get("type")
            if self.capture is not None:
                self.capture.event(request, event)
            if kind == "response" and event.get("id") == prompt_id and not event.get("success"):
                return AgentResult(Outcome.FAILED, error_code="agent_prompt_refused",
                                   error=safe_error_message(f"pi refused the prompt:"
                                                            f" {event.get('error')}"))
            if kind == "message_end":
                msg = event.get("message") or {}
                if msg.get("role") == "assistant" and msg.get("stopReason") == "error":
                    provider_error = safe_error_message(msg.get("errorMessage") or "unknown")
            if kind == "auto_retry_start":
                provider_error = None  # Pi retries the provider itself: the turn goes on
                ended_at = None
            if kind == "agent_end":
                if aborted_at is not None:
                    return AgentResult(Outcome.CANCELLED, error="stopped")
                if provider_error is None:
                    return None
                # With the user's retry setting on, Pi follows a failed turn's end
                # with auto_retry_start; give it a moment before calling it final.
                ended_at = time.monotonic()
            if ended_at is not None and time.monotonic() - ended_at > RETRY_GRACE_S:
                return AgentResult(Outcome.FAILED, error_code="agent_provider_error",
                                   error=f"the model provider failed: {provider_error}")

    def _restart_after_hang(self) -> None:
        """Pi did not end an aborted turn in time: the next step gets a fresh child."""
        with self._lock:
            self._stop_child()
