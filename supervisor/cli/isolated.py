"""Importing a workflow file in a forked child, so the file cannot end the command.

Owns loading files for the commands that look at many of them (``workflows``,
``controllers``) or at one the user names (``validate``, ``controller
apply``): each import runs in a child forked
from the CLI, which sends back a summary as JSON and exits. A file that calls
``os._exit()``, dies of a signal or hangs past the load bound takes only its
child with it and becomes one error entry; the command goes on with the
other files. Linux/POSIX ``fork``; the CLI has no threads at this point.
Imports ``protocol`` only; never the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from ...protocol.controllers.define import initial_status
from ...protocol.controllers.loading import ControllerLoadError, load_controller_file
from ...protocol.definitions.discovery import WorkflowLoadError, load_timeout, load_workflow_file
from ...protocol.definitions.graph import snapshot as definition_snapshot

# The child enforces the bound itself (a clear message); the parent kills it
# this much later, for a file stuck where no signal handler runs.
KILL_MARGIN_S = 1.0


def _summary(path: str, timeout_s: float, *, with_snapshot: bool = False) -> dict[str, Any]:
    try:
        loaded = load_workflow_file(path, timeout_s=timeout_s)
    except WorkflowLoadError as exc:
        return {"ok": False, "error": exc.reason, "problems": list(exc.problems),
                "traceback": exc.debug_traceback}
    out = {"ok": True, "name": loaded.name, "digest": loaded.digest,
           "path": loaded.source.path, "sourceSha256": loaded.source.sha256,
           "description": loaded.workflow.description}
    if with_snapshot:  # `graph`: the definition itself, as `workflow.json` holds it
        out["snapshot"] = definition_snapshot(loaded.workflow)
    return out


def snapshot_summary(path: str, timeout_s: float) -> dict[str, Any]:
    """``_summary`` with the definition's snapshot (``summarize=`` of ``load_summary``)."""
    return _summary(path, timeout_s, with_snapshot=True)


def controller_summary(path: str, timeout_s: float, spec: Any = None,
                       with_status: bool = False) -> dict[str, Any]:
    """A controller file's summary; with ``with_status``, the status a new resource
    of ``spec`` starts with (``initial_status(spec)``, the file's code)."""
    try:
        loaded = load_controller_file(path, timeout_s=timeout_s)
    except ControllerLoadError as exc:
        return {"ok": False, "error": exc.reason, "problems": list(exc.problems),
                "traceback": None}
    out: dict[str, Any] = {"ok": True, "name": loaded.name, "path": loaded.path,
                           "sourceSha256": loaded.sha256, "timeout": loaded.controller.timeout,
                           "description": loaded.controller.description}
    if with_status:
        try:
            status = initial_status(loaded.controller, spec)
            json.dumps(status)
        except Exception as exc:
            reason = f"initial_status(spec) failed: {type(exc).__name__}: {exc}"
            return {"ok": False, "error": reason, "problems": [reason], "traceback": None}
        out["initialStatus"] = status
    return out


def _child(path: str, timeout_s: float, write_fd: int,
           summarize: Callable[[str, float], dict[str, Any]] = _summary) -> None:
    code = 0
    try:
        os.setsid()  # its own group: whatever the file starts at import is stopped with it
        body = json.dumps(summarize(path, timeout_s)).encode()
        # Length first: a process the file started may hold the pipe open past our exit.
        view = memoryview(len(body).to_bytes(8, "big") + body)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _read_reply(fd: int, deadline: float) -> bytes | None:
    """The child's length-prefixed reply: ``b""`` if it ended without one, None if too late."""
    data = b""
    while len(data) < 8 or len(data) < 8 + int.from_bytes(data[:8], "big"):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""  # it ended (os._exit, a signal) before a whole reply
        data += chunk
    return data[8:8 + int.from_bytes(data[:8], "big")]


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def load_summary(path: str, timeout_s: float | None = None,
                 summarize: Callable[[str, float], dict[str, Any]] = _summary) -> dict[str, Any]:
    """``{"ok": True, name, digest, path, sourceSha256, description}`` or
    ``{"ok": False, error, problems, traceback}``; never raises for the file's sake."""
    bound = load_timeout() if timeout_s is None else timeout_s
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which never returns
        os.close(read_fd)
        _child(path, bound, write_fd, summarize)
    os.close(write_fd)
    try:
        data = _read_reply(read_fd, time.monotonic() + bound + KILL_MARGIN_S)
    finally:
        os.close(read_fd)
    if data is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)  # our own child: never another reaper's
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # anything the file left running in its group
    if data is None:
        reason = (f"importing it took longer than {bound:g} s (does it wait or loop at"
                  " import time?)")
        return {"ok": False, "error": reason, "problems": [reason], "traceback": None}
    try:
        result: dict[str, Any] = json.loads(data)
        return result
    except ValueError:
        reason = f"importing it ended the process ({_describe(status)}; does it call os._exit?)"
        return {"ok": False, "error": reason, "problems": [reason], "traceback": None}
