"""The runner's side of the zygote: start it, ask it to fork, learn exit statuses.

Owns ``Zygote`` (one running fork server: its process, our end of its
control socket, the exit statuses it reported), ``ForkedChild`` (the
``Proc`` of a worker it forked: the status comes from the zygote's report,
or is ``WorkerExit.UNKNOWN`` when the zygote died first and the worker's
pidfd says it is gone) and ``ZygoteKeeper`` (keeps one running, restarts a
dead one with a growing pause, and answers None while there is none, so
the caller spawns a cold worker). The zygote is started with
``PR_SET_PDEATHSIG`` (SIGKILL): it dies with the host. Never calls
``waitpid`` on anything but the zygote itself. Imports ``protocol`` and
``procs.workers``; never the worker package or another wing.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from loguru import logger

from ...protocol.spawn import Popen, TimeoutExpired, spawn
from ...protocol.wire import (
    ForkRequest,
    WorkerExit,
    decode_zygote_message,
    worker_env,
    zygote_argv,
    zygote_marker,
)
from .workers import Proc

MAX_MESSAGE = 1 << 16
# Covers the zygote's own boot (the first request waits for it) on a loaded machine.
FORK_REPLY_S = 10.0
RESTART_PAUSE_S = 0.5
MAX_RESTART_PAUSE_S = 30.0


class ZygoteFailed(OSError):
    """The zygote did not fork: it died, hung, or the fork itself failed."""


class ForkUncertain(ZygoteFailed):
    """The request reached the zygote and no answer came (it hung, or died after
    reading it): a worker for the claim may be running, unknown to us."""


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


class Zygote:
    """One running zygote (a real child of this process)."""

    def __init__(self, popen: Popen[bytes], sock: socket.socket) -> None:
        self.popen = popen
        self.sock = sock
        self.exits: dict[int, int] = {}  # pid -> status, reported and not yet collected
        self.closed = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def fileno(self) -> int | None:
        return None if self.closed else self.sock.fileno()

    def alive(self) -> bool:
        if not self.closed:
            self.pump()
        return not self.closed and self.popen.poll() is None

    def _recv(self, block: bool) -> dict[str, object] | None:
        """One message; None if none is waiting (or the socket closed: ``closed``)."""
        if self.closed or (not block and not _readable(self.sock.fileno())):
            return None
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            self.closed = True
            self.sock.close()
            return None
        message = decode_zygote_message(data)
        if fds:
            message["pidfd"] = fds[0]
            for extra in fds[1:]:
                os.close(extra)
        return message

    def _note(self, message: dict[str, object]) -> None:
        if "exit" in message:
            self.exits[int(str(message["exit"]))] = int(str(message["code"]))
        elif isinstance(fd := message.get("pidfd"), int):
            os.close(fd)  # a fork answer nobody waits for any more

    def pump(self) -> None:
        """Take in every waiting report, without blocking."""
        while (message := self._recv(block=False)) is not None:
            self._note(message)

    def fork(self, request: ForkRequest, timeout: float = FORK_REPLY_S) -> ForkedChild:
        if self.closed:
            raise ZygoteFailed("the zygote is gone")
        try:
            self.sock.sendall(request.encode())
        except OSError as exc:
            raise ZygoteFailed(f"the zygote is gone ({exc})") from exc
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise ForkUncertain(f"the zygote did not answer within {timeout:g} s")
            message = self._recv(block=True)
            if message is None:
                raise ForkUncertain("the zygote died before it answered")
            if "forked" not in message:
                self._note(message)
                continue
            pid, pidfd = message["forked"], message.get("pidfd")
            if not isinstance(pid, int) or not isinstance(pidfd, int):
                raise ZygoteFailed(f"the zygote could not fork: {message.get('error')}")
            return ForkedChild(self, pid, pidfd)

    def stop(self, timeout: float = 2.0) -> None:
        """Close our end (the zygote exits on EOF); kill it if it outstays ``timeout``."""
        if not self.closed:
            self.closed = True
            self.sock.close()
        try:
            self.popen.wait(timeout)
        except TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class ForkedChild:
    """A worker the zygote forked: the leader of its own session and group."""

    def __init__(self, zygote: Zygote, pid: int, pidfd: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self._pidfd: int | None = pidfd
        self.code: int | None = None

    def poll(self) -> int | None:
        if self.code is not None:
            return self.code
        self.zygote.pump()
        code = self.zygote.exits.pop(self.pid, None)
        if code is None and self.zygote.closed and self._pidfd is not None \
                and _readable(self._pidfd):
            code = WorkerExit.UNKNOWN  # gone, and its reaper with it: the claim decides
        if code is not None:
            self.code = code
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutExpired(f"worker {self.pid}", timeout or 0)
            fds = [fd for fd in (self.zygote.fileno(), self._pidfd) if fd is not None]
            select.select(fds, [], [], 0.5 if left is None else min(left, 0.5))
        return code

    def send(self, sig: int) -> bool:
        """Signal the worker alone, through its pidfd (no pid reuse can misdirect it)."""
        if self._pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except ProcessLookupError:
            return False
        return True

    def send_group(self, sig: int) -> bool:
        try:
            os.killpg(self.pid, sig)
            return True
        except ProcessLookupError:
            return False


def start_zygote(*, project: Path, project_key: str, runner_id: str,
                 config_json: str, spare: bool = True) -> Zygote:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        env = worker_env(zygote_marker(project_key, runner_id), config_json=config_json)
        popen = spawn(zygote_argv(project, runner_id, os.getpid(), theirs.fileno(), spare=spare),
                      cwd=project, env=env, pass_fds=[theirs.fileno()],
                      pdeathsig=signal.SIGKILL)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return Zygote(popen, ours)


class Forker(Protocol):
    """What the keeper needs of a zygote (a real one, or a test's fake)."""

    @property
    def pid(self) -> int: ...
    def alive(self) -> bool: ...
    def fileno(self) -> int | None: ...
    def fork(self, request: ForkRequest, timeout: float = ...) -> Proc: ...
    def stop(self, timeout: float = ...) -> None: ...


class ZygoteKeeper:
    """At most one zygote, restarted after a growing pause when it dies."""

    def __init__(self, start: Callable[[], Forker], *, monotonic: Callable[[], float],
                 enabled: bool = True) -> None:
        self._start = start
        self._monotonic = monotonic
        self.enabled = enabled
        self.zygote: Forker | None = None
        self._pause = RESTART_PAUSE_S
        self._not_before = 0.0

    def keep(self) -> None:
        if not self.enabled:
            return
        if self.zygote is not None:
            if self.zygote.alive():
                return
            self._lost(f"the zygote (pid {self.zygote.pid}) died")
        if self._monotonic() < self._not_before:
            return
        try:
            self.zygote = self._start()
        except OSError as exc:
            self._lost(f"could not start the zygote: {exc}")

    def _lost(self, why: str) -> None:
        if self.zygote is not None:
            with contextlib.suppress(OSError):
                self.zygote.stop(0.5)
        self.zygote = None
        self._not_before = self._monotonic() + self._pause
        logger.warning("{}; cold workers for {:.1f} s, then a new zygote", why, self._pause)
        self._pause = min(self._pause * 2, MAX_RESTART_PAUSE_S)

    def fork(self, request: ForkRequest) -> Proc | None:
        """A worker forked for ``request``; None (spawn it cold) if there is no zygote.

        Raises ``ForkUncertain`` when a worker for the claim may be running
        anyway: the caller must not start another before it has made sure.
        """
        if self.zygote is None:
            return None
        try:
            child = self.zygote.fork(request)
        except ForkUncertain as exc:
            self._lost(str(exc))
            raise
        except ZygoteFailed as exc:
            self._lost(str(exc))
            return None
        self._pause = RESTART_PAUSE_S
        return child

    def fds(self) -> list[int]:
        fd = None if self.zygote is None else self.zygote.fileno()
        return [] if fd is None else [fd]

    def stop(self) -> None:
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.stop()
