"""What the agent-step drills share: a scripted model wired into a project, the step
contract read back from what the model was sent, a terminal on a real pty, and the
project's processes found by their run marker.

``Brain`` answers each model request by calling the test's ``decide(turn)`` with the
step in progress (node, attempt, which attempt of that node it is, which request of
that attempt) read from the prompt the worker sent, so a test scripts "what the model
does at step S, attempt N" instead of counting requests. ``use_brain`` starts the
server and points the project's runs at it through ``PI_WORKFLOWS_PI_AGENT_DIR`` (an
isolated agent dir from ``e2e.pi_env``). Imports ``e2e.harness``, ``e2e.pi_env``,
``e2e.scripted_model`` and the package's ``protocol``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.paths import project_key
from pi_workflows.protocol.pibin import SESSION_FILE
from pi_workflows.protocol.wire import MARKER_ENV, parse_marker
from pi_workflows.supervisor.model.pienv import ATTEMPT, scrub_env

from .harness import HarnessError, Project, poll, read_json, wait_for
from .pi_env import PiEnv, make_pi_env, pi_binary
from .scripted_model import Reply, Request, ScriptedModel, ToolCall, call, message_text
from .sessions_kit import on_pty

# What a terminal shows without its escape sequences (CSI, and OSC such as links).
ESCAPES = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                     r"|\x1b[()][0-9A-Za-z]")
# Deadlines: a Pi step takes ~1 s on an idle machine, other suites may share the cores.
STEP_S = 45.0


# ---- the step contract, as the model saw it ----------------------------------------


def node_of(attempt: str) -> str:
    return attempt.rsplit("-", 2)[0]


def attempts_seen(request: Request) -> list[str]:
    """Every attempt id named in the user messages of ``request``, first seen first."""
    seen: list[str] = []
    for message in request.messages:
        if message.get("role") != "user":
            continue
        for found in ATTEMPT.findall(message_text(message)):
            if found not in seen:
                seen.append(found)
    return seen


def submit(attempt: str, output: Any) -> ToolCall:
    return call("workflow", {"action": "submit", "step": node_of(attempt), "attempt": attempt,
                             "output": output})


def update(attempt: str, text: str) -> ToolCall:
    return call("workflow", {"action": "update", "step": node_of(attempt), "attempt": attempt,
                             "update": text})


def tool_results(request: Request) -> list[str]:
    return request.texts("tool")


def all_text(request: Request) -> str:
    """Every message's text and tool-call arguments, for "the model saw X" checks."""
    parts = []
    for message in request.messages:
        parts.append(message_text(message))
        for tool_call in message.get("tool_calls") or []:
            arguments = str((tool_call.get("function") or {}).get("arguments", ""))
            with contextlib.suppress(ValueError):  # spelled one way, however Pi spaced it
                arguments = json.dumps(json.loads(arguments))
            parts.append(arguments)
    return "\n".join(parts)


# ---- the scripted brain ------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One model request, placed in the workflow: ``n`` is which attempt of ``node``
    (1 = its first), ``index`` which request of that attempt (0 = the first)."""

    node: str
    attempt: str
    n: int
    index: int
    request: Request


@dataclass
class Brain:
    decide: Callable[[Turn], Reply | None]
    turns: list[Turn] = field(default_factory=list)
    model: ScriptedModel | None = None
    pi_env: PiEnv | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Request) -> Reply | None:
        seen = attempts_seen(request)
        if not seen:
            return None  # not a workflow step: the server answers 500 and records it
        attempt = seen[-1]  # the newest prompt (or reminder) names the step in progress
        node = node_of(attempt)
        with self._lock:
            mine = [t for t in self.turns if t.node == node]
            tries = list(dict.fromkeys(t.attempt for t in mine))
            n = tries.index(attempt) + 1 if attempt in tries else len(tries) + 1
            turn = Turn(node, attempt, n, sum(t.attempt == attempt for t in mine), request)
            self.turns.append(turn)
        return self.decide(turn)

    def of(self, node: str, n: int | None = None) -> list[Turn]:
        with self._lock:
            return [t for t in self.turns if t.node == node and (n is None or t.n == n)]

    def describe(self) -> str:
        with self._lock:
            turns = list(self.turns)
        lines = [f"{t.node} attempt {t.n} ({t.attempt}) request {t.index}:"
                 f" {t.request.describe()}" for t in turns]
        if self.model is not None:
            lines += [f"problem: {p}" for p in self.model.problems]
        return "\n".join(lines) or "(no model requests)"


@contextlib.contextmanager
def use_brain(project: Project, tmp: Path,
              decide: Callable[[Turn], Reply | None]) -> Iterator[Brain]:
    """A scripted model answering through ``decide``, and the project's runs using it."""
    pi_binary()  # the pinned Pi must be installed: fail (never skip) with the fix
    brain = Brain(decide)
    with ScriptedModel(brain) as model:
        brain.model = model
        brain.pi_env = make_pi_env(tmp / "pi", model.base_url, model_id=model.model_id)
        project.env["PI_WORKFLOWS_PI_AGENT_DIR"] = str(brain.pi_env.agent_dir)
        scrub_env(project.env)
        yield brain


# ---- a run's bundle ------------------------------------------------------------------


def bundle(project: Project, run_id: str) -> Bundle:
    return Bundle(project.paths.runs_dir, run_id)


def session_file(project: Project, run_id: str) -> Path:
    return bundle(project, run_id).session_dir / SESSION_FILE


def captured(project: Project, run_id: str) -> list[dict[str, Any]]:
    """``session/events.ndjson``: the capture of the run's agent conversation."""
    path = bundle(project, run_id).session_dir / "events.ndjson"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == kind]


def roles(project: Project, run_id: str, role: str) -> list[dict[str, Any]]:
    """The run's ``processes.json`` entries with ``role`` (worker, pi)."""
    return [p for p in project.state_processes(run_id) if p.get("role") == role]


def only_run_id(project: Project) -> str:
    runs = json.loads(project.cli("list", "--json").stdout)["runs"]
    assert len(runs) == 1, runs
    return str(runs[0]["runId"])


def wait_queue(project: Project, run_id: str, *states: str, timeout: float = 90.0,
               brain: Brain | None = None) -> str:
    def diag() -> str:
        text = project.diagnose([run_id])
        return text + ("\n--- model\n" + brain.describe() if brain is not None else "")

    return str(wait_for(lambda: project.row(run_id).state in states and project.row(run_id).state,
                        timeout, what=f"run {run_id} to be {'/'.join(states)}", interval=0.1,
                        diag=diag))


# ---- processes by marker -------------------------------------------------------------


def marked(project: Project) -> list[psutil.Process]:
    """Every live process carrying this project's run marker (any runner, any run)."""
    key = project_key(project.root)
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if parse_marker(proc.environ().get(MARKER_ENV), key) is not None:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def describe_procs(procs: list[psutil.Process]) -> str:
    lines = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            lines.append(f"{proc.pid} {' '.join(proc.cmdline())[:160]}")
    return "; ".join(lines) or "(none)"


def gone(proc: psutil.Process) -> bool:
    """Exited (or a zombie): ``is_running`` checks the create time, so a reused pid is gone."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def stop_hosts_and_check_nothing_left(project: Project, timeout: float = 30.0) -> None:
    """Stop the project's hosts the normal way; then no marked process may be left.

    Runs before the fixture's clean-up (which kills leftovers), so a leak fails here.
    """
    for host in project.hosts:
        if host.poll() is None:
            project.stop_host(host)
    left = marked(project)
    if left:
        poll(lambda: all(gone(p) for p in left), timeout, interval=0.1)
        left = [p for p in left if not gone(p)]
    assert not left, f"processes with the project's marker left behind: {describe_procs(left)}"


def pi_children(project: Project) -> list[tuple[int, float]]:
    """(pid, create time) of every marked Pi process now: it has the bridge's address
    in its environment and calls itself ``pi`` (Pi sets its process title)."""
    out = []
    for proc in marked(project):
        with contextlib.suppress(psutil.Error, OSError):
            if "PI_WORKFLOWS_BRIDGE" in proc.environ() and proc.cmdline()[:1] == ["pi"]:
                out.append((proc.pid, proc.create_time()))
    return out


def host_lock(project: Project) -> dict[str, Any]:
    return read_json(project.paths.host_lock)


# ---- a terminal --------------------------------------------------------------------



class Terminal:
    """A CLI command on a real pty, as a person runs it in a terminal window.

    The pty is its controlling terminal; ``hang_up`` closes our (the terminal
    emulator's) end, so the kernel hangs the terminal up and sends SIGHUP to the
    command, as closing the window does.
    """

    def __init__(self, project: Project, *args: str) -> None:
        self.proc, master = on_pty(project, *args)
        self._master: int | None = master
        self._out = bytearray()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._pump, daemon=True, name="pty-reader")
        self._reader.start()

    def _pump(self) -> None:
        fd = self._master
        assert fd is not None
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the other side is gone
                return
            if not chunk:
                return
            with self._cond:
                self._out.extend(chunk)
                self._cond.notify_all()

    def text(self) -> str:
        """What the terminal showed, escape sequences left out."""
        with self._cond:
            raw = self._out.decode(errors="replace")
        return ESCAPES.sub("", raw).replace("\r\n", "\n")

    def wait_text(self, text: str, timeout: float = STEP_S) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while text not in ESCAPES.sub("", self._out.decode(errors="replace")):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HarnessError(f"no {text!r} on the terminal after {timeout:g} s;"
                                       f" it shows:\n{self.text()[-3000:]}")
                self._cond.wait(left)

    def hang_up(self) -> None:
        """Close the terminal: the command gets SIGHUP from the kernel."""
        self._stop.set()
        self._reader.join(5)
        if self._master is not None:
            os.close(self._master)
            self._master = None

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self._master is not None:
            self.hang_up()
