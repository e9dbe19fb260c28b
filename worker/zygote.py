"""The zygote: a booted worker interpreter that forks one worker per request.

Owns the fork server side of the runner's control socket (see
``protocol.wire``: fork requests in, fork answers and exit reports out),
the warm-up it pays once for every child, and its spare: one child forked
ahead of the next request (``worker.spare``), which has booted what no run
decides by the time a run is claimed, so the request only hands it over.
A child gets its own session and random state, writes its marker into the
environment block in place (so ``/proc/PID/environ`` names its run), and
closes the control socket and its siblings' descriptors. The zygote holds
no store connection, lock or thread; it reaps only the children it forked
(one pidfd each, never ``waitpid(-1)``) and dies with its runner
(``PR_SET_PDEATHSIG``). Imports ``protocol`` and ``worker.process``/``spare``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import random
import select
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..protocol.definitions import discovery
from ..protocol.limits import validate_run_id
from ..protocol.paths import project_key
from ..protocol.store.db import expected_layout
from ..protocol.titles import set_title, zygote_title
from ..protocol.wire import (
    ZYGOTE_RUN,
    ForkRequest,
    exit_message,
    forked_message,
    marker_value,
)
from .envslot import EnvSlot
from .process import die_with_parent
from .spare import become_worker, run_spare

MAX_MESSAGE = 1 << 20
# Spares that die before their run, in a row, before the zygote stops forking them.
MAX_SPARE_DEATHS = 3


def warm_up() -> None:
    """Pay, once and here, what every forked worker would pay on its first run.

    SQLite's library start-up and the store's expected layout (an in-memory
    database, closed again), the patterns that run ids and workflow loading
    compile on first use, and a built-in definition's load. Only memory
    stays behind: no file, connection or lock is left open.
    """
    expected_layout()
    validate_run_id("20260101T000000Z-warm-0123abcd")
    discovery.warm_up()


def _in_child(body: Callable[[], int]) -> NoReturn:
    """Run a forked child's ``body``; never return into the zygote's loop."""
    code = 1
    try:
        code = body()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a cold worker would print it and exit 1 too
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


class _Spare:
    """The zygote's end of its spare: pid, pidfd, and the socket its request goes down."""

    def __init__(self, pid: int, pidfd: int, sock: socket.socket) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.sock = sock


class _Server:
    """The zygote's loop: fork requests in; fork answers and exit reports out."""

    def __init__(self, args: argparse.Namespace, slot: EnvSlot, host_pidfd: int,
                 ctl: socket.socket, *, spares: bool) -> None:
        self.args = args
        self.slot = slot
        self.host_pidfd = host_pidfd
        self.ctl = ctl
        self.children: dict[int, int] = {}  # pidfd -> pid, of the workers it reports
        self.spare: _Spare | None = None
        self.spares = spares
        self.spare_deaths = 0  # in a row, without one serving a run
        self.poller = select.poll()
        self.poller.register(ctl.fileno(), select.POLLIN)

    def _inherited(self) -> list[int]:
        """Descriptors a new child must close: they are the zygote's alone."""
        fds = [self.ctl.fileno(), *self.children]
        if self.spare is not None:
            fds += [self.spare.pidfd, self.spare.sock.fileno()]
        return fds

    def _fork(self, body: Callable[[], int]) -> tuple[int, int]:
        """(pid, pidfd) of a new child running ``body`` after closing what it inherits."""
        inherited = self._inherited()
        pid = os.fork()
        if pid == 0:
            def child() -> int:
                for fd in inherited:
                    os.close(fd)
                return body()
            _in_child(child)
        try:
            return pid, os.pidfd_open(pid)  # it cannot be reaped before we wait for it
        except OSError:
            # Out of descriptors: a child we could not watch must not run at all.
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise

    def _new_spare(self) -> None:
        if not self.spares or self.spare is not None:
            return
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            return  # no spare this time (out of descriptors): requests fork as asked

        def body() -> int:
            ours.close()
            return run_spare(self.args, self.slot.write, self.host_pidfd, theirs)

        try:
            pid, pidfd = self._fork(body)
        except OSError:
            ours.close()
            return  # no spare this time: the next request forks its worker itself
        finally:
            theirs.close()
        self.spare = _Spare(pid, pidfd, ours)
        self.poller.register(pidfd, select.POLLIN)

    def _drop_spare(self) -> None:
        """Reap a spare that died, or could not be handed its request, before it had
        a run (it reports to nobody); one still alive is killed first, so the wait
        cannot hang the zygote."""
        spare, self.spare = self.spare, None
        if spare is None:
            return
        self.poller.unregister(spare.pidfd)
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(spare.pidfd, signal.SIGKILL)
        os.close(spare.pidfd)
        spare.sock.close()
        os.waitpid(spare.pid, 0)
        self.spare_deaths += 1
        if self.spare_deaths >= MAX_SPARE_DEATHS:
            # Something kills them as they boot: fork each worker when asked instead.
            self.spares = False
            sys.stderr.write(f"pi-workflows zygote: {self.spare_deaths} spares in a row died"
                             " before their run; forking each worker on request\n")

    def _assign(self, data: bytes) -> tuple[int, int] | None:
        """Hand the request to the spare: (pid, pidfd) of the worker it now is."""
        spare = self.spare
        if spare is None:
            return None
        if _readable(spare.pidfd):
            self._drop_spare()
            return None
        try:
            spare.sock.sendall(data)
        except OSError:
            self._drop_spare()
            return None
        self.spare = None
        spare.sock.close()
        self.spare_deaths = 0
        return spare.pid, spare.pidfd

    def _fork_worker(self, req: ForkRequest) -> tuple[int, int]:
        def body() -> int:
            os.setsid()
            random.seed()  # a forked copy of the zygote's generator would repeat its siblings'
            return become_worker(req, self.args, self.slot.write, self.host_pidfd)
        pid, pidfd = self._fork(body)
        self.poller.register(pidfd, select.POLLIN)
        return pid, pidfd

    def _reap(self, pidfd: int) -> bool:
        pid = self.children.pop(pidfd)
        self.poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        return _send(self.ctl, exit_message(pid, os.waitstatus_to_exitcode(status)))

    def _serve_request(self, data: bytes) -> bool:
        req = ForkRequest.decode(data)
        try:
            forked = self._assign(data) or self._fork_worker(req)
        except OSError as exc:
            return _send(self.ctl, forked_message(None, str(exc)))
        pid, pidfd = forked
        self.children[pidfd] = pid
        if not _send(self.ctl, forked_message(pid), [pidfd]):
            return False
        self._new_spare()  # after the answer: the run it serves does not wait for it
        return True

    def serve(self) -> int:
        self._new_spare()
        try:
            while True:
                for fd, _ in self.poller.poll():
                    if fd != self.ctl.fileno() and not _readable(fd):
                        continue  # closed and reused since this poll: not the one that fired
                    if self.spare is not None and fd == self.spare.pidfd:
                        self._drop_spare()
                        self._new_spare()
                    elif fd in self.children:
                        if not self._reap(fd):
                            return 0
                    elif fd == self.ctl.fileno():
                        try:
                            data = self.ctl.recv(MAX_MESSAGE)
                        except OSError:
                            return 0
                        # Empty: the runner closed its end (or died): nothing more to fork.
                        if not data or not self._serve_request(data):
                            return 0
        finally:
            self._end_spare()

    def _end_spare(self) -> None:
        """A spare does not outlive its zygote's loop: it has no run to lose."""
        spare, self.spare = self.spare, None
        if spare is not None:
            with contextlib.suppress(OSError):
                os.kill(spare.pid, signal.SIGKILL)
            spare.sock.close()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(spare.pid, 0)
            os.close(spare.pidfd)


def _readable(fd: int) -> bool:
    poller = select.poll()  # not select(): a descriptor may be past FD_SETSIZE
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def serve_zygote(args: argparse.Namespace) -> int:
    key = project_key(Path(args.project))
    slot = EnvSlot()
    slot.write(marker_value(key, args.runner, ZYGOTE_RUN))
    set_title(zygote_title(key))
    # The runner kills it by dying; its workers follow the host through a pidfd.
    die_with_parent(signal.SIGKILL)
    ctl = socket.socket(fileno=args.zygote)
    if args.parent_pid is None or os.getppid() != args.parent_pid:
        return 0
    host_pidfd = os.pidfd_open(args.parent_pid)
    if os.getppid() != args.parent_pid:  # it died between the check and the open
        return 0
    assert threading.active_count() == 1, "the zygote must fork from a single thread"
    warm_up()
    # Everything loaded so far lives as long as every worker: out of the
    # collector's sight, a child's collections never walk (and so never copy)
    # the pages it shares with the zygote.
    gc.freeze()
    return _Server(args, slot, host_pidfd, ctl, spares=not args.no_spare).serve()


def _send(ctl: socket.socket, data: bytes, fds: list[int] | None = None) -> bool:
    try:
        if fds:
            socket.send_fds(ctl, [data], fds)
        else:
            ctl.sendall(data)
    except OSError:
        return False
    return True
