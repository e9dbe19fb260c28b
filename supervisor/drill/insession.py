"""In-session runs: a real Pi session, with the pi-workflows extension, that runs its own run.

Owns starting ``pi --mode rpc -e <extension>`` in the drill's project (the
drill's environment with the scripted model's agent directory,
``PI_WORKFLOWS_BIN`` set to this installation's ``pi-workflows``, sessions
persisted under ``DIR/.drill/pi-sessions``), the prompt that makes the
drill's model start a workflow there (``pienv.drill_reply`` then submits the
step when its step message arrives in that conversation), following what
Pi prints on stdout (the start's run id, the step message, the model's
submit or cancel, a deferred turn delivered: the moments the
``pi_session_kill9`` fault waits for), ``kill -9``
of a Pi, reopening a session on its file, and closing every Pi it started.
Imports ``protocol`` and the drill's scratch and pienv; never the worker, never
``e2e`` or tests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ...protocol.spawn import PIPE, Popen, TimeoutExpired, spawn
from .pienv import CANCEL_WORDS, START_WORDS
from .scratch import Scratch

# Everything the Pi must not pick up from the machine (as the e2e kit's Pis).
RPC_FLAGS = ("--mode", "rpc", "--offline", "--no-extensions", "--no-skills",
             "--no-prompt-templates", "--no-themes", "--no-context-files")
# supervisor/piext/pi_workflows.ts: the extension shipped beside the wings (a file).
EXTENSION = Path(__file__).resolve().parents[1] / "piext" / "pi_workflows.ts"
# The phases of an in-session run, as its Pi shows them, in order.
PHASES = ("opening", "launched", "step", "submitted", "turn")
READY_S = 60.0
# A session that knows of no run this long after it opened is closed (``retire``).
STALE_STARTED_S, STALE_REOPENED_S = 90.0, 20.0


def pi_workflows_bin() -> str | None:
    """This installation's ``pi-workflows`` executable (what the extension runs)."""
    beside = Path(sys.executable).with_name("pi-workflows")
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("pi-workflows")


def start_prompt(workflow: str, cancel: bool = False) -> str:
    return f"{START_WORDS} `{workflow}` in this session" + (
        f", {CANCEL_WORDS}." if cancel else ".")


def _custom_kind(event: dict[str, Any]) -> str | None:
    message = event.get("message") or {}
    if message.get("role") != "custom":
        return None
    return str((message.get("details") or {}).get("kind") or "")


@dataclass
class PiSession:
    """One ``pi --mode rpc`` with the extension; what it printed, timed."""

    proc: Popen[bytes]
    reopened: bool
    started: float = field(default_factory=time.monotonic)
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    cond: threading.Condition = field(default_factory=threading.Condition)
    session_file: str | None = None
    session_id: str | None = None
    cancel: bool = False  # its model cancels the run at its step (a deferred turn follows)
    run: str | None = None  # a reopened session's run (it starts none itself)
    hit: bool = False  # a pi_session_kill9 chose it
    killed: bool = False
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def pump(self) -> None:
        """Read stdout (records end with ``\\n`` only) until Pi closes it."""
        assert self.proc.stdout is not None
        buffer = b""
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(self.proc.stdout.fileno(), 65536):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    self._take(line)
        with self.cond:
            self.cond.notify_all()

    def _take(self, raw: bytes) -> None:
        try:
            event = json.loads(raw)
        except ValueError:
            return
        if not isinstance(event, dict) or event.get("type") == "message_update":
            return  # deltas: nothing the drill waits for
        with self.cond:
            if event.get("type") == "response" and event.get("id") is not None:
                self.responses[str(event["id"])] = event
            else:
                self.events.append((time.monotonic(), event))
            self.cond.notify_all()

    def send(self, command: dict[str, Any]) -> str:
        rid = f"d{next(self._ids)}"
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write((json.dumps({**command, "id": rid}) + "\n").encode())
            self.proc.stdin.flush()
        return rid

    def request(self, command: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        rid = self.send(command)
        found = self.wait(lambda: self.responses.pop(rid, None), timeout)
        return found if isinstance(found, dict) else None

    def wait(self, ready: Callable[[], Any], timeout: float) -> Any:
        """``ready()``'s first true value within ``timeout`` (None: not in time, or Pi
        gone)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = ready()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return ready() or None
                self.cond.wait(min(left, 0.2))

    def ready(self, timeout: float = READY_S) -> bool:
        """Pi answered ``get_state`` (it sends no ready event); its session is known."""
        response = self.request({"type": "get_state"}, timeout)
        data = (response or {}).get("data") or {}
        if not (response or {}).get("success"):
            return False
        self.session_file = data.get("sessionFile")
        self.session_id = data.get("sessionId")
        return True

    # -- what it shows --

    def _first(self, match: Callable[[dict[str, Any]], bool]) -> float | None:
        for at, event in self.events:
            if match(event):
                return at
        return None

    def run_id(self) -> str | None:
        """The run the model's ``start`` queued (once its tool call ended)."""
        with self.cond:
            for _, event in self.events:
                if event.get("type") == "tool_execution_end":
                    run = ((event.get("result") or {}).get("details") or {}).get("runId")
                    if run:
                        return str(run)
        return self.run

    def moment(self, phase: str) -> float | None:
        """When the run reached ``phase`` in this Pi (monotonic), None: not yet."""
        with self.cond:
            if phase == "opening":
                return self.started
            if phase == "launched":
                return self._first(lambda e: e.get("type") == "tool_execution_end" and bool(
                    ((e.get("result") or {}).get("details") or {}).get("runId")))
            if phase == "step":
                return self._first(lambda e: e.get("type") in ("message_start", "message_end")
                                   and _custom_kind(e) in ("step", "remind"))
            if phase == "submitted":  # the step's submit (or the agent's cancel) begun
                return self._first(lambda e: e.get("type") == "tool_execution_start"
                                   and e.get("toolName") == "workflow"
                                   and (e.get("args") or {}).get("action")
                                   in ("submit", "cancel"))
            if phase == "turn":  # a deferred turn delivered into the conversation
                return self._first(lambda e: e.get("type") in ("message_start", "message_end")
                                   and _custom_kind(e) is not None and bool(
                                       ((e.get("message") or {}).get("details") or {})
                                       .get("intentId")))
        raise ValueError(phase)

    def phase(self) -> str:
        """The last phase reached."""
        reached = [p for p in PHASES if self.moment(p) is not None]
        return reached[-1]

    def alive(self) -> bool:
        return self.proc.poll() is None

    # -- ending --

    def kill9(self) -> None:
        """SIGKILL of Pi alone (not its group): the runner it spawned sees its end."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._close_pipes()

    def close(self, timeout: float = 10.0) -> None:
        """SIGTERM and wait (Pi then shuts its session down), stdin EOF, then SIGKILL of
        its group."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutExpired):
                self.proc.wait(timeout)
        self._close_pipes()
        if self.proc.poll() is None:
            with contextlib.suppress(TimeoutExpired):
                self.proc.wait(2.0)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def _close_pipes(self) -> None:
        stream: IO[bytes] | None
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()


@dataclass
class InSession:
    """Every Pi session of the drill: started for a run, or reopened after a kill."""

    scratch: Scratch
    pi: str  # the Pi binary
    bin: str  # pi-workflows, for the extension
    agent_dir: Path
    pis: list[PiSession] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def session_dir(self) -> Path:
        return self.scratch.work / "pi-sessions"

    def env(self) -> dict[str, str]:
        """The drill's environment (its ``PI_WORKFLOWS_*`` settings and all) with Pi's
        isolation: the scripted agent directory, offline, a private TMPDIR."""
        tmp = self.scratch.work / "pi-tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        env = {k: v for k, v in self.scratch.env.items()
               if not k.startswith("PI_") or k.startswith("PI_WORKFLOWS_")}
        env.update({"PI_CODING_AGENT_DIR": str(self.agent_dir), "PI_OFFLINE": "1",
                    "PI_SKIP_VERSION_CHECK": "1", "TMPDIR": str(tmp),
                    "PI_WORKFLOWS_BIN": self.bin,
                    "PATH": f"{Path(self.bin).parent}{os.pathsep}{env.get('PATH', '')}"})
        return env

    def _spawn(self, *args: str, reopened: bool) -> PiSession:
        self.session_dir.mkdir(mode=0o700, exist_ok=True)
        env = self.env()
        with open(self.scratch.work / "pi-session.log", "ab") as err:
            os.chmod(err.name, 0o600)
            proc = spawn([self.pi, *RPC_FLAGS, "-e", str(EXTENSION), *args],
                         cwd=self.scratch.root, env=env,
                         drop_env=[k for k in os.environ if k not in env],
                         stdin=PIPE, stdout=PIPE, stderr=err)
        session = PiSession(proc, reopened)
        threading.Thread(target=session.pump, name="drill-pi-session", daemon=True).start()
        with self.lock:
            self.pis.append(session)
        return session

    def start(self, workflow: str, cancel: bool = False) -> PiSession:
        """A new session whose model starts ``workflow`` (and, with ``cancel``, cancels it
        when its step arrives); in a thread: returns at once."""
        session = self._spawn("--session-dir", str(self.session_dir), reopened=False)
        session.cancel = cancel

        def tell() -> None:
            if session.ready():
                session.send({"type": "prompt", "message": start_prompt(workflow, cancel)})

        threading.Thread(target=tell, name="drill-pi-prompt", daemon=True).start()
        return session

    def reopen(self, killed: PiSession) -> PiSession | None:
        """The killed session opened again (None: Pi never wrote its file)."""
        if not killed.session_file:
            return None
        return self.open_file(killed.session_file, killed.run_id())

    def open_file(self, path: str, run: str | None = None) -> PiSession | None:
        """A Pi on the session file ``path`` (None: there is no such file)."""
        if not os.path.isfile(path):
            return None
        session = self._spawn("--session", path, reopened=True)
        session.run = run
        threading.Thread(target=session.ready, name="drill-pi-ready", daemon=True).start()
        return session

    def live(self) -> list[PiSession]:
        with self.lock:
            return [p for p in self.pis if p.alive()]

    def fresh(self) -> list[PiSession]:
        """Live sessions started for a run and not chosen by a fault yet, oldest first."""
        return [p for p in self.live() if not p.reopened and not p.hit]

    def run_ids(self) -> list[str]:
        with self.lock:
            return [r for p in self.pis if (r := p.run_id())]

    def session_ids(self) -> set[str]:
        with self.lock:
            return {p.session_id for p in self.pis if p.session_id}

    def retire(self, done: Callable[[str], bool]) -> None:
        """Close the live sessions whose run ended (``done(run_id)``), and those that
        know of no run long after they opened (a start that never came back, a session
        reopened after a kill before its start returned): each counts against
        ``IN_SESSION_LIVE``."""
        for session in self.live():
            run = session.run_id()
            age = time.monotonic() - session.started
            if (run is not None and done(run)) or (run is None and age > (
                    STALE_REOPENED_S if session.reopened else STALE_STARTED_S)):
                session.close()

    def close_all(self) -> None:
        for session in self.live():
            session.close()
