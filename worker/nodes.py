"""Running one node attempt: callables in a thread, shell commands in a group.

Owns timeouts that hold even for a callable that ignores cancellation (it is
abandoned after a grace period), stopping on park or cancel, and the shell
node's subprocess with bounded output. Knows nothing about bundles or the
store. Imports ``protocol``, ``worker.control`` and ``worker.tracebacks``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol.limits import safe_error_message
from ..protocol.spawn import DEVNULL, PIPE, TimeoutExpired, signal_group, spawn
from ..protocol.states import Outcome
from .control import Control
from .tracebacks import traceback_record

if TYPE_CHECKING:
    from .lines import OutputTap

# How long a stopped node gets to finish by itself before it is abandoned (a
# callable) or its process group is killed (a shell command).
STOP_GRACE_S = 2.0
POLL_S = 0.02


@dataclass
class NodeOutcome:
    outcome: Outcome
    output: Any = None
    error_code: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Where the exception was raised (``worker.tracebacks``): for the bundle
    # only, never routed on or copied into the queue's error.
    traceback: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """The result record routed on with ``$result.``."""
        return {"outcome": self.outcome, "errorCode": self.error_code, "error": self.error,
                **self.extra}


def error_outcome(exc: BaseException, code: str = "node_error") -> NodeOutcome:
    # The error is the exception's type and redacted message; its frames (no
    # locals) go to the bundle apart, for `logs` and `status --debug`.
    return NodeOutcome(Outcome.FAILED, error_code=code,
                       error=safe_error_message(f"{type(exc).__name__}: {exc}"),
                       traceback=traceback_record(exc))


class Watch:
    """Decides, while a node runs, whether and why it must stop.

    Time comes from ``monotonic`` (tests pass a fake one), and
    ``stop_grace_s`` is how long the node then gets to stop by itself.
    """

    def __init__(self, control: Control, stop: threading.Event, timeout_s: float | None, *,
                 effectful: bool, park_grace_s: float, stop_grace_s: float = STOP_GRACE_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self.stop = stop
        self.monotonic = monotonic
        self.stop_grace_s = stop_grace_s
        start = monotonic()
        self.deadline = None if timeout_s is None else start + timeout_s
        self.effectful = effectful
        self.park_grace_s = park_grace_s
        self._park_seen: float | None = None
        self.reason: str | None = None

    def check(self) -> str | None:
        """Return ``timed_out`` or ``cancelled`` once the node must stop."""
        if self.reason:
            return self.reason
        now = self.monotonic()
        if self.control.cancel_requested:
            self.reason = Outcome.CANCELLED
        elif self.control.park_requested:
            # An effect in flight is given a grace period to finish, so a
            # graceful park does not leave it indeterminate.
            if self._park_seen is None:
                self._park_seen = now
            if not self.effectful or now - self._park_seen >= self.park_grace_s:
                self.reason = Outcome.CANCELLED
        if self.reason is None and self.deadline is not None and now >= self.deadline:
            self.reason = Outcome.TIMED_OUT
        if self.reason:
            self.stop.set()
        return self.reason


def _stopped(reason: str, timeout_s: float | None) -> NodeOutcome:
    if reason == Outcome.TIMED_OUT:
        return NodeOutcome(Outcome.TIMED_OUT, error_code="node_timed_out",
                           error=f"the node did not finish within {timeout_s:g} s")
    return NodeOutcome(Outcome.CANCELLED, error_code="cancelled", error="the node was stopped")


def run_callable(fn: Callable[[], Any], watch: Watch, timeout_s: float | None) -> NodeOutcome:
    """Run ``fn`` in a daemon thread; stop waiting on timeout, park or cancel."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="pi-workflows-node", daemon=True).start()
    while not done.wait(POLL_S):
        reason = watch.check()
        if reason:
            # Give a cooperative callable a moment; a stubborn one is abandoned.
            done.wait(watch.stop_grace_s)
            return _stopped(reason, timeout_s)
    if "error" in box:
        return error_outcome(box["error"])
    return NodeOutcome(Outcome.OK, output=box.get("value"))


def _reader(stream: Any, limit: int, out: dict[str, Any], key: str,
            live: OutputTap | None) -> None:
    kept = bytearray()
    total = 0
    # read1: whatever the pipe holds now, so a line printed before a pause is seen at once.
    while chunk := stream.read1(65536):
        total += len(chunk)
        if live is not None:
            live.feed(key, chunk)
        if len(kept) < limit:
            kept.extend(chunk[: limit - len(kept)])
    out[key] = bytes(kept)
    out[key + "_total"] = total


def run_shell(argv: list[str], *, cwd: str | None, env: dict[str, str] | None,
              stdin: str | None, max_output_bytes: int, allow_nonzero_exit: bool,
              watch: Watch, timeout_s: float | None,
              live: OutputTap | None = None) -> NodeOutcome:
    """Run a command in its own process group; kill the group when it must stop.

    ``live`` gets a copy of the output as it is produced (``worker.stream``).
    """
    try:
        proc = spawn(argv, cwd=cwd, env=env,
                     stdin=PIPE if stdin is not None else DEVNULL,
                     stdout=PIPE, stderr=PIPE)
    except OSError as exc:
        return error_outcome(exc, "shell_spawn_failed")
    out: dict[str, Any] = {}
    readers = [threading.Thread(target=_reader, args=(s, max_output_bytes, out, k, live),
                                daemon=True)
               for s, k in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
    for t in readers:
        t.start()
    if stdin is not None and proc.stdin is not None:
        def feed() -> None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(stdin.encode())
                proc.stdin.close()
            except OSError:
                pass  # the command exited without reading all of its input
        threading.Thread(target=feed, daemon=True).start()
    reason = None
    while proc.poll() is None:
        reason = watch.check()
        if reason:
            signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(watch.stop_grace_s)
            except TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait()
            break
        if live is not None:
            live.tick()
        time.sleep(POLL_S)
    # Background children that kept the pipes open must not hold the node.
    signal_group(proc, signal.SIGKILL)
    for t in readers:
        t.join(watch.stop_grace_s)
    if live is not None:
        live.close()
    if reason:
        return _stopped(reason, timeout_s)
    code = proc.returncode
    output = {
        "exitCode": code,
        "stdout": out.get("stdout", b"").decode(errors="replace"),
        "stderr": out.get("stderr", b"").decode(errors="replace"),
        "truncated": out.get("stdout_total", 0) > max_output_bytes
        or out.get("stderr_total", 0) > max_output_bytes,
    }
    if code != 0 and not allow_nonzero_exit:
        return NodeOutcome(Outcome.FAILED, output=output, error_code="shell_nonzero_exit",
                           error=f"the command exited with status {code}",
                           extra={"exitCode": code})
    return NodeOutcome(Outcome.OK, output=output, extra={"exitCode": code})


def shell_argv(command: str | list[str]) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return [str(part) for part in command]


def shell_env(extra: dict[str, str] | None) -> dict[str, str] | None:
    return None if extra is None else {str(k): str(v) for k, v in extra.items()}


def default_cwd(cwd: str | os.PathLike[str] | None, project_dir: str) -> str:
    return str(cwd) if cwd is not None else project_dir
