"""The command line's error contract: one line on stderr and a documented exit code.

Owns turning an exception that reached a command's top into that line and
code, for the typer app (``supervisor.cli.app``) and the fast path
(``supervisor.cli.main``) alike, so both fail the same way. A traceback only
with ``--debug``. Imports ``protocol.errors`` and ``protocol.diskfull`` only
(the fast path loads them).
"""

from __future__ import annotations

import contextlib
import os
import sys

from ...protocol.diskfull import is_disk_full
from ...protocol.errors import ExitCode, PiWorkflowsError, UsageError

INTERRUPTED = 130
READER_GONE = 141  # what a shell reports for a death by SIGPIPE: whoever read our output left


def fail(message: str, code: int) -> int:
    # The terminal may be gone (a closed window): the exit code still tells.
    with contextlib.suppress(OSError):
        sys.stderr.write(f"pi-workflows: error: {message}\n")
    return code


def _trace() -> None:
    import traceback

    traceback.print_exc()


def exit_for(exc: BaseException, *, debug: bool) -> int:
    """The line and exit code for ``exc``: ours by its code, anything else is a bug."""
    if isinstance(exc, KeyboardInterrupt):
        return fail("interrupted", INTERRUPTED)
    if isinstance(exc, BrokenPipeError):
        # The reader of our output went away (a pipe's `head`, a caller that stopped
        # waiting): not a bug, and nothing to say to a reader that is gone. Output
        # still buffered goes nowhere, so the interpreter's last flush cannot fail too.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return READER_GONE
    if debug:
        _trace()
    if isinstance(exc, PiWorkflowsError):
        return fail(exc.message, exc.exit_code)
    if isinstance(exc, OSError) and is_disk_full(exc):
        # A bundle write (cancelling a parked run, say) that did not fit: not a bug,
        # and nothing half-done (every bundle write is atomic or a whole line).
        where = f" writing {exc.filename}" if exc.filename else ""
        return fail(f"the disk is full ({exc.strerror or 'no space'}{where}): free some"
                    " space, then try again", ExitCode.STORE_UNAVAILABLE)
    # A bug: still one line unless --debug.
    return fail(f"internal error ({type(exc).__name__}); rerun with --debug for details",
                ExitCode.INTERNAL)


def session_required(command: str) -> UsageError:
    """The error of a session command given no session (both command lines raise it)."""
    return UsageError(f"`{command}` acts for a session: give --session ID or set"
                      " PI_WORKFLOWS_SESSION", code="session_required")
