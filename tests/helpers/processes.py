"""Child processes for the tests: start them, hear from them, wait for them, clean up.

Owns the ``spawn`` multiprocessing context every multi-process test uses,
starting a child (with or without a pipe back), receiving from it with a
deadline, waiting for it to exit, and the one clean-up that kills whatever
a test left running (``reap``, for ``subprocess.Popen`` and
``multiprocessing`` children alike). The child bodies are
``tests.helpers.children``. Imports the standard library and psutil only:
never pytest, ``pi_workflows``, a conftest or a test module.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import psutil

CTX = multiprocessing.get_context("spawn")


def start(target: Callable[..., None], *args: Any) -> BaseProcess:
    """``target(*args)`` in a fresh interpreter (a daemon: it dies with the test)."""
    proc = CTX.Process(target=target, args=args, daemon=True)
    proc.start()
    return proc


def start_with_pipe(target: Callable[..., None], *args: Any) -> tuple[BaseProcess, Connection]:
    """``target(*args, conn)`` in a fresh interpreter; our end of the pipe to ``conn``."""
    parent, child = CTX.Pipe()
    proc = start(target, *args, child)
    child.close()
    return proc, parent


def recv(conn: Connection, timeout_s: float = 30.0) -> Any:
    """The child's next message; fails if it does not come within ``timeout_s``."""
    assert conn.poll(timeout_s), "the child did not answer in time"
    return conn.recv()


def stop(proc: BaseProcess, timeout_s: float = 30.0) -> None:
    """Wait for the child to exit on its own; kill it and fail after ``timeout_s``."""
    proc.join(timeout_s)
    if proc.is_alive():
        reap(proc)
        raise AssertionError("the child did not exit in time")


def join_all(procs: Iterable[BaseProcess], timeout_s: float = 50.0) -> None:
    """Wait for every child; each must exit 0 before the deadline."""
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            reap(proc)
            raise AssertionError(f"child {proc.name} did not finish in time")
        assert proc.exitcode == 0, f"child {proc.name} exited with {proc.exitcode}"


def reap(*procs: subprocess.Popen[Any] | BaseProcess, timeout_s: float = 10.0) -> None:
    """Clean-up: SIGKILL each child that still runs, then wait for it (bounded)."""
    for proc in procs:
        if isinstance(proc, subprocess.Popen):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            proc.wait(timeout_s)
        else:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout_s)


def ctrl_c_default() -> None:
    """A child's ``preexec_fn``: SIGINT back to its default, so Ctrl-C works as in a terminal.

    A test run started as a background job of a non-interactive shell inherits
    SIGINT ignored, and a child that never installs a handler would then sit
    through the Ctrl-C a test sends it.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed orphan may linger unreaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
