"""The host as a background process: ``host --background`` and ``host --stop``.

Owns finding the host of a project (its lock file names the holder's pid
and process start time, so a recycled pid is never taken for it), starting
one detached from the terminal (a new session, stdin from /dev/null, its
output appended to ``<logDir>/host.log``, 0600) and waiting, bounded, until
its lock file says that very process is ready, or reporting the error line
it exited with; and stopping one (SIGTERM, which drains, then waiting for it
to exit). Signals go through a pidfd where the kernel has them, so the
process that was checked is the one signalled. Imports ``protocol``,
``supervisor.host.lock`` and ``views.wording`` (the commands it names); never
the worker.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...protocol.errors import ExitCode, PiWorkflowsError
from ...protocol.liveness import is_same_process
from ...protocol.paths import Paths, ensure_private_dir
from ...protocol.spawn import DEVNULL, spawn
from ..views.wording import cli
from .lock import HostLock, HostLockHeld

HOST_LOG = "host.log"
LOG_ROTATE_BYTES = 10 * 1024 * 1024  # checked when a background host starts
START_TIMEOUT_S = 60.0  # start-up reaps orphans and takes runs over: allow a loaded machine
STOP_MARGIN_S = 15.0  # beyond the drain grace and the kill delay of a hung worker
POLL_S = 0.02
ERROR_PREFIX = "pi-workflows: error: "
MAX_REASON_CHARS = 1000


class HostDidNotStart(PiWorkflowsError):
    """The background host exited before it was ready, or was not ready in time."""

    code = "host_not_started"
    exit_code = ExitCode.RUN_FAILED

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code in {int(c) for c in ExitCode} and exit_code != ExitCode.OK:
            self.exit_code = ExitCode(exit_code)


class HostDidNotStop(PiWorkflowsError):
    code = "host_not_stopped"
    exit_code = ExitCode.RUN_FAILED


@dataclass(frozen=True)
class RunningHost:
    pid: int
    start_time: float
    ready: bool
    runner_id: str | None


def find_host(paths: Paths) -> RunningHost | None:
    """The live host of this project, proven by pid and process start time; else None.

    A host that was killed leaves its details in the file; they name a pid
    that is gone or now belongs to another process, so they prove nothing.
    """
    info = HostLock(paths.host_lock).holder()
    pid, start = info.get("pid"), info.get("pidStartTime")
    if not isinstance(pid, int) or not isinstance(start, (int, float)):
        return None
    if not is_same_process(pid, float(start)):
        return None
    runner = info.get("runnerId")
    return RunningHost(pid, float(start), info.get("ready") is True,
                       runner if isinstance(runner, str) else None)


def host_argv(project: Path, concurrency: int | None, pi_args: Sequence[str],
              ui: bool = False) -> list[str]:
    """The command line of the background host: the foreground one, in a child."""
    argv = [sys.executable, "-m", "pi_workflows", "host", "--project", str(project)]
    if concurrency is not None:
        argv += ["--concurrency", str(concurrency)]
    if ui:
        argv.append("--ui")
    return [*argv, "--", *pi_args] if pi_args else argv


def _open_log(log_dir: Path) -> tuple[int, Path]:
    ensure_private_dir(log_dir)
    path = log_dir / HOST_LOG
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(f"{HOST_LOG}.1"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have been made with another mode
    return fd, path


def _reason(log: Path, offset: int, code: int) -> str:
    """The error line the host wrote since ``offset``, else its last line, else its code."""
    try:
        with open(log, "rb") as fh:
            fh.seek(max(offset, os.path.getsize(log) - 64 * 1024))
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        lines = []
    lines = [ln for ln in lines if ln]
    errors = [ln[len(ERROR_PREFIX):] for ln in lines if ln.startswith(ERROR_PREFIX)]
    how = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
    reason = errors[-1] if errors else (f"{lines[-1]} ({how})" if lines else how)
    return reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"


def start_background(paths: Paths, argv: Sequence[str], *,
                     timeout: float = START_TIMEOUT_S) -> tuple[RunningHost, Path]:
    """Start the host detached from this terminal; return once it is ready.

    Raises ``HostLockHeld`` when a host already runs, ``HostDidNotStart``
    (with the host's own exit code) when it exits first or is not ready in
    ``timeout`` seconds; it is then left running, and the message says so.
    """
    if (running := find_host(paths)) is not None:
        raise HostLockHeld(f"a host is already running for this project (pid {running.pid});"
                           f" stop it with `{cli(paths.project, 'host', '--stop')}`")
    fd, log = _open_log(paths.log_dir)
    try:
        offset = os.fstat(fd).st_size
        os.write(fd, f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} pi-workflows host --background"
                     f" (started by pid {os.getpid()})\n".encode())
        # A session of its own: no controlling terminal, so closing this one
        # (SIGHUP to its jobs) or killing this process group never reaches it.
        proc = spawn(argv, stdin=DEVNULL, stdout=fd, stderr=fd)
    except OSError as exc:  # EAGAIN, EMFILE, ENOMEM: said in one line like any failure
        raise HostDidNotStart(f"could not start the host: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    lock = HostLock(paths.host_lock)
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise HostDidNotStart(f"the host did not start: {_reason(log, offset, code)}"
                                  f" (log: {log})", exit_code=code)
        info = lock.holder()
        # A host killed earlier leaves its own pid (and ready) in the file.
        if info.get("pid") == proc.pid and info.get("ready") is True:
            found = find_host(paths)
            if found is not None and found.pid == proc.pid:
                return found, log
        if time.monotonic() >= deadline:
            raise HostDidNotStart(
                f"the host (pid {proc.pid}) is not ready after {timeout:g} s and is left"
                f" running; see {log}, or stop it with"
                f" `{cli(paths.project, 'host', '--stop')}`")
        time.sleep(POLL_S)


def _pidfd(host: RunningHost) -> int | None:
    """A descriptor for exactly this process (None where the kernel has no pidfds).

    Opened before the identity check: if the pid was recycled in between,
    the check fails; after it, the descriptor names the checked process.
    """
    try:
        fd = os.pidfd_open(host.pid)
    except (AttributeError, OSError):
        return None
    if not is_same_process(host.pid, host.start_time):
        os.close(fd)
        raise ProcessLookupError(host.pid)
    return fd


def _signal(host: RunningHost, pidfd: int | None, sig: int) -> None:
    if pidfd is not None:
        signal.pidfd_send_signal(pidfd, sig)
    elif is_same_process(host.pid, host.start_time):
        os.kill(host.pid, sig)
    else:
        raise ProcessLookupError(host.pid)


def _exited(host: RunningHost, pidfd: int | None, timeout: float) -> bool:
    if pidfd is not None:  # readable once the process has exited
        readable, _, _ = select.select([pidfd], [], [], max(timeout, 0.0))
        return bool(readable)
    deadline = time.monotonic() + timeout
    while is_same_process(host.pid, host.start_time):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def stop_host(paths: Paths, *, timeout: float) -> RunningHost | None:
    """SIGTERM the project's host (it drains) and wait for it to exit.

    None when no host runs. Raises ``HostDidNotStop`` when it is still
    running after ``timeout`` seconds.
    """
    host = find_host(paths)
    if host is None:
        return None
    try:
        pidfd = _pidfd(host)
    except ProcessLookupError:
        return None  # it exited between the two checks
    try:
        try:
            _signal(host, pidfd, signal.SIGTERM)
        except ProcessLookupError:
            return host
        if not _exited(host, pidfd, timeout):
            raise HostDidNotStop(
                f"the host (pid {host.pid}) is still running {timeout:g} s after SIGTERM"
                f" (draining?); `{cli(paths.project, 'host', '--stop')}` again stops it at once,"
                f" or `kill -KILL {host.pid}` (its runs resume later)")
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return host
