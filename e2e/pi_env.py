"""An isolated Pi for a test: its agent directory, its environment, its binary, its process.

Owns what a test needs to run the pinned Pi (``node_modules/.bin/pi``) against a
scripted model and nothing else: ``make_pi_env`` writes a private agent directory
(``models.json`` with one custom ``openai-completions`` provider and model,
``settings.json`` that makes it the default and turns every retry off) and builds
the child's environment (``PI_CODING_AGENT_DIR``, ``PI_OFFLINE=1``, a private
``TMPDIR``, loopback exempt from proxies, no proxy variables, no caller ``PI_*``
settings or provider API keys); ``pi_binary`` finds the pinned Pi and fails (never
skips) when it is missing or another version; ``PiRpc`` runs ``pi --mode rpc``,
reads its stdout split on ``\\n`` only, matches responses by id, and shuts it down
the safe way (SIGTERM, wait, then stdin EOF, then SIGKILL of its group). Imports
the standard library and the agent-directory files of ``supervisor.model.pienv``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pi_workflows.supervisor.model.pienv import models_config, settings_config

REPO = Path(__file__).resolve().parents[1]
PI_PACKAGE = "@mariozechner/pi-coding-agent"
# Everything a test's Pi must not pick up from the machine: discovery of extensions,
# skills, prompt templates, themes and AGENTS.md files, and any network at startup.
RPC_FLAGS = ("--mode", "rpc", "--offline", "--no-extensions", "--no-skills",
             "--no-prompt-templates", "--no-themes", "--no-context-files")
PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy", "ftp_proxy",
                        "no_proxy", "npm_config_proxy", "npm_config_https_proxy"})


class PiNotInstalled(AssertionError):
    """The pinned Pi is missing or another version (an AssertionError: tests fail, not skip)."""


class PiError(AssertionError):
    """A Pi child that did not answer or misbehaved within a deadline."""


# ---- the binary --------------------------------------------------------------------


def pinned_pi_version(repo: Path = REPO) -> str:
    """The Pi version ``package.json`` pins."""
    deps = json.loads((repo / "package.json").read_text())["dependencies"]
    return str(deps[PI_PACKAGE])


def pi_binary(repo: Path = REPO) -> Path:
    """``node_modules/.bin/pi`` of ``repo``, checked to be the pinned version."""
    binary = repo / "node_modules" / ".bin" / "pi"
    installed = repo / "node_modules" / PI_PACKAGE / "package.json"
    pinned = pinned_pi_version(repo)
    hint = f"run `npm install --no-audit --no-fund` in {repo} (package.json pins {pinned})"
    if not os.access(binary, os.X_OK) or not installed.is_file():
        raise PiNotInstalled(f"Pi is not installed: no executable {binary}; {hint}")
    version = json.loads(installed.read_text()).get("version")
    if version != pinned:
        raise PiNotInstalled(f"{PI_PACKAGE} {version} is installed, not the pinned"
                             f" {pinned}; {hint}")
    return binary


# ---- the agent directory and the environment -------------------------------------------


def pi_child_env(agent_dir: Path, tmp_dir: Path,
                 base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a Pi child: ``base`` (default: ours) without proxies, caller
    ``PI_*`` settings or provider API keys, plus the isolation variables."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k.lower() not in PROXY_VARS and not k.startswith("PI_")
           and not k.endswith("_API_KEY")}
    env.update({
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        # Pi writes its extension transpile cache and bash logs here: one per instance.
        "TMPDIR": str(tmp_dir),
        # Pi sends all HTTP through *_PROXY if one is set, loopback included; none is
        # left, and this keeps loopback direct should a proxy come back.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    })
    return env


@dataclass(frozen=True)
class PiEnv:
    """Where one isolated Pi keeps its config and scratch, and the environment it gets."""

    root: Path
    agent_dir: Path  # PI_CODING_AGENT_DIR: models.json, settings.json, sessions
    tmp_dir: Path  # TMPDIR
    cwd: Path  # an empty working directory: no project .pi/settings.json, no AGENTS.md
    env: dict[str, str]
    provider: str
    model_id: str

    def argv(self, *extra: str, session: bool = False, binary: Path | None = None) -> list[str]:
        """``pi --mode rpc`` with the isolation flags; ``--no-session`` unless ``session``."""
        return [str(binary or pi_binary()), *RPC_FLAGS,
                *(() if session else ("--no-session",)), *extra]


def make_pi_env(root: Path, base_url: str, *, model_id: str = "scripted-model",
                provider: str = "scripted", api_key: str = "scripted-key",
                settings: Mapping[str, Any] | None = None,
                base_env: Mapping[str, str] | None = None) -> PiEnv:
    """Write an agent directory under ``root`` for a Pi talking to ``base_url`` only.

    ``settings`` entries replace the defaults' top-level keys.
    """
    agent_dir, tmp_dir, cwd = root / "agent", root / "tmp", root / "work"
    for path in (agent_dir, tmp_dir, cwd):
        path.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps(models_config(
        base_url, provider=provider, model_id=model_id, api_key=api_key), indent=2))
    (agent_dir / "settings.json").write_text(json.dumps(
        {**settings_config(provider=provider, model_id=model_id), **(settings or {})},
        indent=2))
    return PiEnv(root, agent_dir, tmp_dir, cwd, pi_child_env(agent_dir, tmp_dir, base_env),
                 provider, model_id)


# ---- the process -------------------------------------------------------------------


def _slim(event: dict[str, Any]) -> dict[str, Any]:
    """A ``message_update`` without its two copies of the whole partial message."""
    if event.get("type") != "message_update":
        return event
    inner = event.get("assistantMessageEvent") or {}
    return {"type": "message_update",
            "assistantMessageEvent": {k: v for k, v in inner.items() if k != "partial"}}


class PiRpc:
    """One ``pi --mode rpc`` child: commands in, events and responses out, with deadlines.

    Events (everything but responses) are kept in order, ``message_update`` slimmed to
    its delta; ``next_event``/``read_until`` consume them from a cursor. Responses are
    matched by the ``id`` ``request`` gives; a response without an id (Pi's answer to an
    unknown command or unparsable line) goes to the events, where it can be matched by
    ``command``. Stderr goes to ``root/pi-stderr.log``.
    """

    _ids = itertools.count(1)

    def __init__(self, pi_env: PiEnv, *extra: str, session: bool = False,
                 binary: Path | None = None) -> None:
        self.pi_env = pi_env
        self.argv = pi_env.argv(*extra, session=session, binary=binary)
        self.stderr_path = pi_env.root / "pi-stderr.log"
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._responses: dict[str, dict[str, Any]] = {}
        self._recent: deque[str] = deque(maxlen=20)  # raw lines, for failure messages
        self._cursor = 0
        self._eof = False
        with open(self.stderr_path, "ab") as err:  # the child keeps its own descriptor
            self.spawned_at = time.monotonic()
            self.proc = subprocess.Popen(self.argv, cwd=pi_env.cwd, env=pi_env.env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._reader = threading.Thread(target=self._pump, args=(self.proc.stdout,),
                                        name=f"pi-rpc:{self.proc.pid}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- reading --

    def _pump(self, stdout: IO[bytes]) -> None:
        buffer = b""
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stdout.fileno(), 65536):
                buffer += chunk
                # Only "\n" ends a record: JSON strings may hold U+2028/U+2029.
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._take(line)
        if buffer.strip():
            self._take(buffer)
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _take(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            return
        try:
            message = json.loads(text)
        except ValueError:
            message = {"type": "unparsed", "line": text}
        with self._cond:
            self._recent.append(text[:300])
            if message.get("type") == "response" and message.get("id") is not None:
                self._responses[str(message["id"])] = message
            else:
                self._events.append(self._keep(_slim(message)))
            self._cond.notify_all()

    def _keep(self, event: dict[str, Any]) -> dict[str, Any]:
        """The event as kept (a subclass may stamp it)."""
        return event

    def _wait(self, ready: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = ready()
                if value is not None:
                    return value
                if self._eof:
                    raise PiError(f"Pi exited (code {self.proc.poll()}) before {what}"
                                  f"\n{self.diagnose()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PiError(f"no {what} from Pi after {timeout:g} s\n{self.diagnose()}")
                self._cond.wait(left)

    def next_event(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next event after the cursor."""
        def ready() -> dict[str, Any] | None:
            if self._cursor < len(self._events):
                self._cursor += 1
                return self._events[self._cursor - 1]
            return None
        return dict(self._wait(ready, timeout, "event"))

    def read_until(self, until: str | Callable[[dict[str, Any]], bool],
                   timeout: float = 30.0) -> list[dict[str, Any]]:
        """Events from the cursor up to and including the first that matches ``until``
        (an event type or a predicate)."""
        match = (lambda e: e.get("type") == until) if isinstance(until, str) else until
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PiError(f"no event matching {until!r} after {timeout:g} s; saw"
                              f" {[e.get('type') for e in seen][-30:]}\n{self.diagnose()}")
            event = self.next_event(left)
            seen.append(event)
            if match(event):
                return seen

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event so far (cursor or not)."""
        with self._cond:
            return list(self._events)

    # -- writing --

    def send(self, command: Mapping[str, Any]) -> None:
        """Write one command line (no waiting for its response)."""
        line = json.dumps(command, ensure_ascii=False).encode() + b"\n"
        try:
            self._stdin.write(line)
            self._stdin.flush()
        except (BrokenPipeError, ValueError) as err:
            raise PiError(f"Pi's stdin is closed ({err})\n{self.diagnose()}") from err

    def request(self, command: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        """Send ``command`` with a fresh id; its response."""
        rid = f"t{next(self._ids)}"
        self.send({**command, "id": rid})
        return dict(self._wait(lambda: self._responses.pop(rid, None), timeout,
                               f"response to {command.get('type')!r}"))

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Seconds from spawn to Pi's first answer (``get_state``): Pi sends no ready event."""
        response = self.request({"type": "get_state"}, timeout)
        if not response.get("success"):
            raise PiError(f"get_state failed: {response}\n{self.diagnose()}")
        return time.monotonic() - self.spawned_at

    # -- ending --

    def close(self, timeout: float = 10.0) -> int:
        """Stop Pi the safe way; its exit code (negative: killed by that signal).

        SIGTERM first and wait: Pi then kills the commands its bash tool started (they
        run in their own sessions). Only then stdin EOF, since Pi drops its SIGTERM
        handler once it sees EOF. SIGKILL of its group as the last resort.
        """
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()
        if self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2.0)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout)
        self._reader.join(timeout)
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        return int(self.proc.returncode)

    def __enter__(self) -> PiRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def diagnose(self) -> str:
        with self._cond:
            recent = list(self._recent)
        return ("--- last stdout lines\n" + "\n".join(recent)
                + "\n--- stderr\n" + self.stderr_text()[-3000:])
