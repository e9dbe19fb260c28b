"""``pi-workflows model serve``: the scripted model, served until a stop signal.

Owns starting the scripted model (``model.scripted``) on 127.0.0.1 with
a script (``model.script``), writing a Pi agent directory that points
at it (``model.pienv``; an existing directory is used only if it holds no
``models.json`` or ``settings.json`` of someone else's), printing what to
set (the URL, the agent directory and ``PI_WORKFLOWS_PI_AGENT_DIR``, the
``models.json`` entry for a Pi setup of your own), and waiting for SIGINT or
SIGTERM (recorded by a wakeup fd, nothing else) to stop it cleanly. Imports
``protocol.errors``, ``protocol.paths`` and the other ``supervisor.model`` modules; never
the worker.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...protocol.errors import UsageError
from ...protocol.paths import ensure_private_dir
from .pienv import MODEL_ID, PROVIDER, models_config, write_agent_dir
from .script import load_script, serve_script
from .scripted import ScriptedModel

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
AGENT_DIR_NAME = "offline-pi-agent"
MAX_PORT = 65535
KEPT_REQUESTS = 20  # a playground may run for hours: its request log stays small
READY = "pi-workflows model serve: serving"  # the first line, once requests are answered


def _ours(path: Path, check: Callable[[Any], bool]) -> bool:
    try:
        return check(json.loads(path.read_text()))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False


def _users_pi_dirs() -> set[Path]:
    """The agent directories a plain ``pi`` of this user reads (``~/.pi/agent``, its override)."""
    found = {Path.home() / ".pi" / "agent"}
    if os.environ.get("PI_CODING_AGENT_DIR"):
        found.add(Path(os.environ["PI_CODING_AGENT_DIR"]).expanduser())
    return {p.resolve() for p in found}


def check_agent_dir(agent_dir: Path) -> None:
    """Refuse a directory whose Pi settings are not ours: never overwrite a real Pi setup."""
    if agent_dir.exists() and not agent_dir.is_dir():
        raise UsageError(f"--agent-dir {agent_dir}: not a directory")
    models_ok = _ours(agent_dir / "models.json",
                      lambda d: isinstance(d, dict) and set(d.get("providers") or {}) == {PROVIDER})
    settings_ok = _ours(agent_dir / "settings.json",
                        lambda d: isinstance(d, dict) and d.get("defaultProvider") == PROVIDER)
    written = all((agent_dir / name).is_file() for name in ("models.json", "settings.json"))
    if agent_dir.resolve() in _users_pi_dirs() and not (written and models_ok and settings_ok):
        # Written there, the scripted model would become every Pi session's default (a
        # directory an earlier serve wrote, such as PI_CODING_AGENT_DIR=~/pi-offline, is ours).
        raise UsageError(f"--agent-dir {agent_dir}: that is your own Pi's agent directory,"
                         " which every `pi` reads; give another directory")
    if not (models_ok and settings_ok):
        raise UsageError(f"--agent-dir {agent_dir}: it holds Pi settings of its own (a"
                         " models.json or settings.json not written by `model serve`);"
                         " give another directory")


def _start(script: Path | None, port: int) -> ScriptedModel:
    replies = [] if script is None else load_script(script)
    if not 0 <= port <= MAX_PORT:
        raise UsageError(f"--port {port}: give a port from 1 to {MAX_PORT} (0: any free one)")
    model = ScriptedModel(serve_script(replies), model_id=MODEL_ID, port=port,
                          max_log=KEPT_REQUESTS)
    try:
        return model.start()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"--port {port}: 127.0.0.1:{port} is in use; pick another port"
                             " (or 0 for any free one)") from None
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None


def describe(model: ScriptedModel, agent_dir: Path) -> list[str]:
    """What ``serve`` prints: where it listens, and what to set to use it."""
    entry = json.dumps(models_config(model.base_url, provider=PROVIDER, model_id=MODEL_ID,
                                     api_key="scripted-key"), indent=2)
    return [
        f"{READY} {model.base_url} (an OpenAI-compatible scripted model; Ctrl-C stops it)",
        f"Pi agent directory for it: {agent_dir} (models.json, settings.json)",
        "",
        "Use it for the runs you start from a shell:",
        f"  export PI_WORKFLOWS_PI_AGENT_DIR={agent_dir}",
        "",
        f"Or add this provider to your own Pi's models.json and pick it with"
        f" PI_WORKFLOWS_PI_ARGS='--provider {PROVIDER} --model {MODEL_ID}':",
        *("  " + line for line in entry.splitlines()),
    ]


class _StopSignals:
    """SIGINT, SIGTERM and SIGHUP recorded by a wakeup fd from the moment it is entered."""

    def __enter__(self) -> _StopSignals:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {sig: signal.signal(sig, lambda *_: None) for sig in STOP_SIGNALS}
        return self

    def wait(self) -> int:
        """Block until a stop signal arrives (or arrived since entering); which one."""
        while True:
            with contextlib.suppress(InterruptedError):
                select.select([self._read], [], [])
            for number in os.read(self._read, 64):
                if number in STOP_SIGNALS:
                    return int(number)

    def __exit__(self, *exc: object) -> None:
        signal.set_wakeup_fd(self._previous_fd)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        os.close(self._read)
        os.close(self._write)


def serve(*, script: Path | None, port: int, agent_dir: Path,
          echo: Callable[[str], None]) -> int:
    """Serve until SIGINT/SIGTERM/SIGHUP; how many completion requests it received."""
    check_agent_dir(agent_dir)
    with _StopSignals() as stops:  # a Ctrl-C from now on is a clean stop
        model = _start(script, port)
        try:
            ensure_private_dir(agent_dir)
            write_agent_dir(agent_dir, model.base_url)
            for line in describe(model, agent_dir):
                echo(line)
            stops.wait()
        finally:
            model.stop()
    return model.completion_count
