"""The one place pi-workflows starts child processes.

Every child gets its own session and process group (so a group kill reaches
it and nothing else), the caller's environment plus what it adds (the run
marker, see ``protocol.wire``), and closed file descriptors. Imports nothing
from the package.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# The rest of the package uses these names from here, never ``subprocess``
# itself (an import contract holds every spawn to this module).
_PR_SET_PDEATHSIG = 1
_SIG_IGN = 1  # the C library's SIG_IGN, as a handler pointer
PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
Popen = subprocess.Popen
TimeoutExpired = subprocess.TimeoutExpired


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    pass_fds: Sequence[int] = (),
    drop_env: Sequence[str] = (),
    pdeathsig: int | None = None,
    umask: int = -1,
    new_session: bool = True,
    ignore_signals: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session and process group.

    ``new_session=False``: in the caller's session and group instead, for an
    interactive child that must keep the caller's terminal (``chat``'s Pi).

    ``umask``: the child's file mode creation mask (-1: inherited), for a
    child that creates files of its own in a private place.

    ``pdeathsig``: Linux sends the child this signal when the spawning
    *thread* exits, so a caller that wants it spawns from a long-lived thread.

    ``ignore_signals``: set to ``SIG_IGN`` in the child before it execs (an
    ignored disposition survives ``exec``), so a signal its parent sends
    before the child installed its own handler is dropped instead of
    ending it with the default action.
    """
    full_env = dict(os.environ)
    if env:
        for name in env:  # what the caller adds comes last, in its order
            full_env.pop(name, None)
        full_env.update(env)
    for name in drop_env:
        full_env.pop(name, None)
    preexec = None
    deathsig = int(pdeathsig) if pdeathsig is not None and sys.platform.startswith("linux") \
        else None
    ignored = tuple(int(s) for s in ignore_signals)
    if deathsig is not None or ignored:
        libc = ctypes.CDLL(None, use_errno=True)  # looked up before the fork, not in it
        set_disposition = libc.signal
        set_disposition.argtypes = [ctypes.c_int, ctypes.c_void_p]
        set_disposition.restype = ctypes.c_void_p

        def preexec() -> None:
            if deathsig is not None:
                libc.prctl(_PR_SET_PDEATHSIG, deathsig, 0, 0, 0)
            for sig in ignored:
                set_disposition(sig, _SIG_IGN)

    return subprocess.Popen(
        list(argv), cwd=cwd, env=full_env, stdin=stdin, stdout=stdout, stderr=stderr,
        start_new_session=new_session, close_fds=True, pass_fds=tuple(pass_fds),
        # preexec_fn is unsafe with threads in general; lone prctl/signal calls are not.
        preexec_fn=preexec, umask=umask,
    )


def signal_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> bool:
    """Signal the child's whole group; False if the group is gone.

    Also after the leader exited: its background children keep the group
    (and so the pgid) alive, and Linux does not hand out a pid that is
    still some group's id.
    """
    try:
        os.killpg(proc.pid, sig)
        return True
    except ProcessLookupError:
        return False
