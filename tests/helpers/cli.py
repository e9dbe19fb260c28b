"""``pi-workflows ARGS`` called in this process, for tests of a command's output and exit code.

Owns ``run_cli``: it calls ``pi_workflows.supervisor.cli.main.main(argv)``
(the console script's entry, fast path included) as a fresh process would
see it, and gives back what ``subprocess.run(..., capture_output=True,
text=True)`` would: the exit code and the text written to file descriptors
1 and 2 (so a forked child's output is caught too). Everything the call may
change is put back afterwards: the environment (``env`` replaces it for the
call, as ``subprocess`` does; ``--debug`` sets ``PI_WORKFLOWS_DEBUG``),
``sys.argv``, the working directory, the standard streams, signal handlers
and the interval timer (a workflow file's load bound uses ``SIGALRM``,
which pytest-timeout relies on too, so the test's own timeout is re-armed).

A test about a process (what a fresh interpreter imports, signals, a
background host, a terminal or stdin) still starts one. Imports the
standard library and the CLI's entry point only: never pytest, a conftest
or a test module.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The handlers a command may install (the session runner's stop signals, the
# host's wakeups, a workflow file's load bound): restored after every call.
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGALRM,
            signal.SIGCHLD, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2)


@dataclass(frozen=True)
class CliResult:
    """What the command did: ``subprocess.CompletedProcess``'s names, so tests read alike."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check_returncode(self) -> None:
        if self.returncode != 0:
            raise subprocess.CalledProcessError(self.returncode, self.args, self.stdout,
                                                self.stderr)


def run_cli(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
            stdin: bytes = b"", check: bool = False, errors: str = "strict") -> CliResult:
    """Run ``pi-workflows ARGS`` in process: its exit code, stdout and stderr.

    ``env`` is the whole environment for the call (None: this process's);
    ``stdin`` what the command reads there; ``errors`` how the output bytes
    are decoded (as ``subprocess.run(errors=...)``); ``check`` raises
    ``CalledProcessError`` for a non-zero exit.
    """
    from pi_workflows.supervisor.cli.main import main

    argv = list(args)
    saved_env = dict(os.environ)
    saved_argv = sys.argv
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    saved_timer = signal.getitimer(signal.ITIMER_REAL)
    began = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        for stream in saved_streams[1:]:
            stream.flush()
        saved_fds = os.dup(1), os.dup(2)
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = _text(1, "strict")
            sys.stderr = _text(2, "backslashreplace")
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
            sys.argv = ["pi-workflows", *argv]
            if env is not None:
                os.environ.clear()
                os.environ.update(env)
            if cwd is not None:
                os.chdir(cwd)
            code = _exit_code(main, argv)
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            for fd in saved_fds:
                os.close(fd)
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            for sig, handler in saved_handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)
            _rearm(saved_timer, time.monotonic() - began)
        out.seek(0)
        err.seek(0)
        result = CliResult(["pi-workflows", *argv], code,
                           out.read().decode("utf-8", errors), err.read().decode("utf-8", errors))
    if check:
        result.check_returncode()
    return result


def _text(fd: int, errors: str) -> io.TextIOWrapper:
    """A text stream on ``fd`` that leaves the descriptor open when it is dropped."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors=errors,
                            write_through=True)


def _exit_code(main: Any, argv: list[str]) -> int:
    """``main(argv)``'s return value, or the code of the ``SystemExit`` it raised (click's
    shell completion exits that way), printed as the interpreter would."""
    try:
        return int(main(argv))
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1


def _rearm(saved: tuple[float, float], elapsed: float) -> None:
    """Put the interval timer back as it was before the call, less the time it took."""
    delay, interval = saved
    if delay > 0:
        signal.setitimer(signal.ITIMER_REAL, max(delay - elapsed, 0.001), interval)
    else:
        signal.setitimer(signal.ITIMER_REAL, 0)
