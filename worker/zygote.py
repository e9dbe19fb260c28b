"""The zygote: a booted worker interpreter that forks one worker per request.

Owns the fork server side of the runner's control socket (see
``protocol.wire``: fork requests in, fork answers and exit reports out) and
what a forked child does before it runs the cold worker's code path: its
own session, its own random state, its marker written into the environment
block in place (so ``/proc/PID/environ`` names its run), the control socket
and its siblings' pidfds closed. The zygote holds no store connection, lock
or thread; it reaps only the children it forked (one pidfd each, never
``waitpid(-1)``) and dies with its runner (``PR_SET_PDEATHSIG``). Imports
``protocol`` and ``worker.process``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import random
import select
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path

from ..protocol.paths import project_key
from ..protocol.titles import set_title, zygote_title
from ..protocol.wire import (
    CONFIG_ENV,
    MARKER_ENV,
    TOKEN_ENV,
    ZYGOTE_RUN,
    ForkRequest,
    exit_message,
    forked_message,
    forked_worker_args,
    marker_value,
)
from . import process
from .process import die_with_parent

MAX_MESSAGE = 1 << 20


class EnvSlot:
    """The marker's bytes in the environment block that ``/proc/PID/environ`` shows.

    ``os.environ`` changes do not reach that block (putenv points elsewhere),
    so a forked worker overwrites the zygote's padded value in place; the
    marker is the block's last entry, so the NUL padding ends the listing.
    """

    def __init__(self) -> None:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        addr = libc.getenv(MARKER_ENV.encode())
        value = os.environb.get(MARKER_ENV.encode(), b"")
        self.addr: int | None = addr if addr and _in_env_block(addr, len(value)) else None
        self.room = len(value)

    def write(self, marker: str) -> bool:
        data = marker.encode()
        os.environ[MARKER_ENV] = marker  # what the worker's own children inherit
        if self.addr is None or len(data) > self.room:
            return False
        ctypes.memmove(self.addr, data + b"\0" * (self.room - len(data)), self.room)
        return True


def _in_env_block(addr: int, size: int) -> bool:
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    # Fields 50 and 51 of stat(5) (env_start, env_end); the list starts at field 3.
    start, end = int(fields[47]), int(fields[48])
    return start <= addr and addr + size <= end


def _child(req: ForkRequest, args: argparse.Namespace, slot: EnvSlot, host_pidfd: int,
           ctl: socket.socket, close: list[int]) -> int:
    ctl.close()  # the runner's socket and the siblings' pidfds are the zygote's alone
    for fd in close:
        os.close(fd)
    os.setsid()
    random.seed()  # a forked copy of the zygote's generator would repeat its siblings'
    slot.write(req.marker)
    os.environ[CONFIG_ENV] = req.config_json
    os.environ[TOKEN_ENV] = req.token  # popped again by the worker's boot
    worker = forked_worker_args(Path(args.project), args.runner, req.parent_pid,
                                run_id=req.run_id, claim_state=req.claim_state, force=req.force)
    return process.run_worker(worker, host_pidfd=host_pidfd)


def _run_child(req: ForkRequest, args: argparse.Namespace, slot: EnvSlot, host_pidfd: int,
               ctl: socket.socket, close: list[int]) -> None:
    """The forked child: never returns into the zygote's loop."""
    code = 1
    try:
        code = _child(req, args, slot, host_pidfd, ctl, close)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a cold worker would print it and exit 1 too
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


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
    # Everything loaded so far lives as long as every worker: out of the
    # collector's sight, a child's collections never walk (and so never copy)
    # the pages it shares with the zygote.
    gc.freeze()
    children: dict[int, int] = {}  # pidfd -> pid, of the workers this zygote forked
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd != ctl.fileno():
                pid = children.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                if not _send(ctl, exit_message(pid, os.waitstatus_to_exitcode(status))):
                    return 0
                continue
            try:
                data = ctl.recv(MAX_MESSAGE)
            except OSError:
                return 0
            if not data:
                return 0  # the runner closed its end (or died): nothing more to fork
            req = ForkRequest.decode(data)
            try:
                pid = os.fork()
            except OSError as exc:
                if not _send(ctl, forked_message(None, str(exc))):
                    return 0
                continue
            if pid == 0:
                _run_child(req, args, slot, host_pidfd, ctl, list(children))
            pidfd = os.pidfd_open(pid)  # it cannot be reaped before we wait for it
            children[pidfd] = pid
            poller.register(pidfd, select.POLLIN)
            if not _send(ctl, forked_message(pid), [pidfd]):
                return 0


def _send(ctl: socket.socket, data: bytes, fds: list[int] | None = None) -> bool:
    try:
        if fds:
            socket.send_fds(ctl, [data], fds)
        else:
            ctl.sendall(data)
    except OSError:
        return False
    return True
