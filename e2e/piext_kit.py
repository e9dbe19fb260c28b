"""What the Pi extension drills share: a real Pi in RPC mode with the pi-workflows
extension loaded, pointed at a scripted model and at a test project.

``extension_drill`` is a drill's frame: a scripted model, a Pi environment
pointed at it, and every Pi the scenario opens, all closed (and the project's
activations killed) on the way out, also when the test fails midway. Its
``open`` starts ``pi --mode rpc -e <extension>`` isolated and offline
(``e2e.pi_env``), with the project's ``PI_WORKFLOWS_*`` settings and
``PI_WORKFLOWS_BIN`` set to this checkout's ``pi-workflows``, in the project
directory, with a persisted session (``reopen`` opens it again). The helpers read
what the extension did from Pi's own stdout: ``extension_ui_request`` events
(footer status, widget, notifications) and the custom messages in
``get_messages``. ``activations`` finds the extension's ``activate`` children
by their environment, for clean-up and for the kill -9 drill. Imports
``e2e.harness``, ``e2e.pi_env`` and ``e2e.scripted_model``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from .agents_kit import all_text, submit
from .harness import Project, wait_for
from .pi_env import PiEnv, PiRpc, make_pi_env
from .scripted_model import Reply, Request, Script, ScriptedModel, ToolCall, ToolCalls, call

BIN = Path(sys.executable).with_name("pi-workflows")
STEP_S = 45.0  # a deadline for one step of a drill; other suites share the two cores


def extension_path() -> Path:
    out = subprocess.run([str(BIN), "pi-extension", "--json"], capture_output=True, text=True,
                         timeout=60, check=True)
    return Path(json.loads(out.stdout)["path"])


def pi_env_for(project: Project, model: ScriptedModel, root: Path) -> PiEnv:
    env = make_pi_env(root, model.base_url, model_id=model.model_id)
    env.env.update({k: v for k, v in project.env.items() if k.startswith("PI_WORKFLOWS_")})
    env.env["PI_WORKFLOWS_BIN"] = str(BIN)
    env.env["PATH"] = f"{BIN.parent}{os.pathsep}{env.env.get('PATH', '')}"
    return PiEnv(env.root, env.agent_dir, env.tmp_dir, project.root, env.env, env.provider,
                 env.model_id)


@dataclass
class ExtensionDrill:
    """A scripted model, a Pi environment pointed at it, and every Pi opened on it."""

    project: Project
    model: ScriptedModel
    pi_env: PiEnv  # a scenario may change its ``env`` before the next ``open``
    pis: list[PiRpc] = field(default_factory=list)

    def open(self) -> PiRpc:
        """A Pi with the extension on a new persisted session, ready."""
        return self._start("--session-dir", str(self.pi_env.agent_dir / "sessions"))

    def reopen(self, session: str, *, ready: bool = True) -> PiRpc:
        """A Pi on the session file ``session``; ``ready=False`` returns at once (Pis
        that must start together, or a start the scenario waits on in its own way)."""
        return self._start("--session", session, ready=ready)

    def close(self) -> None:
        """Close every Pi opened (closing one again is harmless), then kill the project's
        activations; each step runs even if one before it raised."""
        with contextlib.ExitStack() as stack:
            stack.callback(kill_activations, self.project)
            for pi in self.pis:
                stack.callback(pi.close)

    def check(self) -> None:
        """The scenario's end: ``close``, then the model's ``check``."""
        self.close()
        self.model.check()

    def _start(self, *args: str, ready: bool = True) -> PiRpc:
        pi = PiRpc(self.pi_env, "-e", str(extension_path()), *args, session=True)
        self.pis.append(pi)
        if ready:
            pi.wait_ready(STEP_S)
        return pi


@contextlib.contextmanager
def extension_drill(project: Project, script: Script, root: Path) -> Iterator[ExtensionDrill]:
    """``with extension_drill(project, steps(...), tmp_path / "pi") as drill``: the Pi
    environment lives under ``root``; leaving closes every Pi and kills the activations."""
    with ScriptedModel(script) as model:
        drill = ExtensionDrill(project, model, pi_env_for(project, model, root))
        try:
            yield drill
        finally:
            drill.close()


def steps(*script: Reply | Callable[[Request], Reply]) -> Callable[[Request], Reply | None]:
    """A function script: step i answers completion request i (a reply, or a function of
    the request that returns one, run when the request arrives)."""
    count = [0]
    lock = threading.Lock()

    def answer(request: Request) -> Reply | None:
        with lock:
            i = count[0]
            count[0] += 1
        if i >= len(script):
            return None
        step = script[i]
        return step(request) if callable(step) else step

    return answer


def start(workflow: str, **fields: Any) -> ToolCall:
    return call("workflow", {"action": "start", "workflow": workflow, **fields})


# The step contract's own line names the attempt that counts (a retry's note names the
# interrupted one after it).
CONTRACT = re.compile(r"step [\w-]+, attempt ([\w-]+)\.")


def step_attempt(request: Request) -> str:
    """The attempt the newest step contract in ``request`` names."""
    found = CONTRACT.findall(all_text(request))
    assert found, request.describe()
    return str(found[-1])


def submit_step(output: Any) -> Callable[[Request], Reply]:
    """A scripted reply: submit ``output`` for the step the request is about."""
    def reply(request: Request) -> Reply:
        return ToolCalls(submit(step_attempt(request), output))

    return reply


def started_run(pi: PiRpc) -> str | None:
    """The run the model's (first) ``start`` queued, once its tool call has ended."""
    for e in pi.events:
        if e.get("type") == "tool_execution_end":
            run = ((e.get("result") or {}).get("details") or {}).get("runId")
            if run:
                return str(run)
    return None


def ui(pi: PiRpc, method: str) -> list[dict[str, Any]]:
    return [e for e in pi.events
            if e.get("type") == "extension_ui_request" and e.get("method") == method]


def statuses(pi: PiRpc) -> list[str]:
    return [str(e.get("statusText")) for e in ui(pi, "setStatus") if e.get("statusText")]


def wait_status(pi: PiRpc, predicate: Callable[[str], bool], timeout: float = STEP_S,
                what: str = "a footer status") -> str:
    found: str = wait_for(lambda: next((s for s in statuses(pi) if predicate(s)), None),
                          timeout, what=what)
    return found


def messages(pi: PiRpc) -> list[dict[str, Any]]:
    response = pi.request({"type": "get_messages"}, STEP_S)
    assert response.get("success"), response
    return list(response["data"]["messages"])


def custom(pi: PiRpc) -> list[dict[str, Any]]:
    """The extension's messages in the conversation, in order."""
    return [m for m in messages(pi)
            if m.get("role") == "custom" and m.get("customType") == "pi-workflows"]


def follow_ups(pi: PiRpc) -> list[dict[str, Any]]:
    return [m for m in custom(pi) if (m.get("details") or {}).get("intentId")]


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def session_id(pi: PiRpc) -> str:
    response = pi.request({"type": "get_state"}, STEP_S)
    return str(response["data"]["sessionId"])


def session_file(pi: PiRpc) -> str:
    response = pi.request({"type": "get_state"}, STEP_S)
    return str(response["data"]["sessionFile"])


def activations(project: Project) -> list[psutil.Process]:
    """The live session runners of this project's home: ``pi-workflows activate``, and
    ``resume --session`` (a reopened session resuming its parked run)."""
    home = project.env["PI_WORKFLOWS_HOME"]
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            cmdline = proc.cmdline()
            runner = "activate" in cmdline or ("resume" in cmdline and "--session" in cmdline)
            if runner and proc.environ().get(
                    "PI_WORKFLOWS_HOME") == home:
                found.append(proc)
    return found


def kill_activations(project: Project) -> None:
    for proc in activations(project):
        with contextlib.suppress(psutil.Error):
            proc.kill()
