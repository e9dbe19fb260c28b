"""One headless Pi child (``pi --mode rpc``) and the JSON-lines protocol to it.

Owns the Pi child's command line and environment (isolated from
whatever else is installed; see docs/agents.md), starting it from a
long-lived thread so ``PR_SET_PDEATHSIG`` follows the worker rather than a
node's thread, reading its stdout (split on ``\\n`` only: JSON strings may
hold U+2028) into an event queue, sending commands, and the safe shutdown
order from the Pi notes (SIGTERM, wait, then close stdin, then kill the
group). Imports ``protocol`` only.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..protocol.limits import safe_error_message
from ..protocol.pibin import PiUnavailable
from ..protocol.spawn import PIPE, Popen, TimeoutExpired, signal_group, spawn
from ..protocol.tempdirs import owned_tempdir

BRIDGE = Path(__file__).with_name("bridge") / "workflow_tool.ts"
# Discovery of the user's extensions, skills, templates and themes is off, so
# a run does not depend on what else is installed; context files stay on.
ISOLATION = ("--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes")
STDERR_TAIL_BYTES = 4096
TERM_WAIT_S = 3.0


@dataclass(frozen=True)
class PiOptions:
    binary: str
    cwd: Path
    session_file: Path
    args: Sequence[str] = ()
    agent_dir: str | None = None
    env: dict[str, str] | None = None  # added to the worker's (the run marker is there)


def command_line(options: PiOptions, bridge: Path = BRIDGE) -> list[str]:
    return [options.binary, "--mode", "rpc", "--offline", *ISOLATION, "-e", str(bridge),
            "--session", str(options.session_file), *options.args]


def child_env(options: PiOptions, tmp: str) -> dict[str, str]:
    env = {"PI_OFFLINE": "1", "TMPDIR": tmp}
    # Pi sends every request through *_PROXY, loopback included.
    no_proxy = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
    env["NO_PROXY"] = env["no_proxy"] = ",".join(
        p for p in (no_proxy, "127.0.0.1", "localhost", "::1") if p)
    if options.agent_dir:
        env["PI_CODING_AGENT_DIR"] = options.agent_dir
    env.update(options.env or {})
    return env


class PiProcess:
    """A running Pi child: send commands, take events, stop it safely."""

    def __init__(self, options: PiOptions, *, on_spawn: Callable[[int], None] | None = None,
                 spawner: Callable[[Callable[[], Popen[bytes]]], Popen[bytes]] | None = None
                 ) -> None:
        self.options = options
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        # Owned (pid, start time): a kill -9 of the worker leaves it to the host's sweep.
        self._tmp = owned_tempdir("pi-workflows-pi-")
        self._stderr = bytearray()
        self._write_lock = threading.Lock()
        self._next_id = 0

        def start() -> Popen[bytes]:
            # umask 077: Pi writes its session file into the bundle (and rewrites it after a
            # turn), so it must be born 0600; tightening it afterwards left a window.
            return spawn(command_line(options), cwd=options.cwd, env=child_env(options, self._tmp),
                         stdin=PIPE, stdout=PIPE, stderr=PIPE, pdeathsig=signal.SIGTERM,
                         umask=0o077)

        try:
            self.proc = spawner(start) if spawner is not None else start()
        except OSError as exc:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise PiUnavailable(f"pi could not be started: {exc.strerror or exc}") from None
        if on_spawn is not None:
            try:
                on_spawn(self.proc.pid)  # recorded before it is used, or not used at all
            except BaseException:
                self.close()
                raise
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True,
                         name="pi-workflows-pi-out").start()
        self._err_reader = threading.Thread(target=self._read_err, args=(self.proc.stderr,),
                                            daemon=True, name="pi-workflows-pi-err")
        self._err_reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, stream: IO[bytes]) -> None:
        pending = b""
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                line = line.rstrip(b"\r")
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not protocol output (Pi prints nothing else on stdout)
                if isinstance(event, dict):
                    self.events.put(event)
        self.events.put(None)  # EOF: Pi exited

    def _read_err(self, stream: IO[bytes]) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            self._stderr.extend(chunk)
            del self._stderr[:-STDERR_TAIL_BYTES]

    def exit_status(self, wait_s: float = 2.0) -> int | None:
        """Pi's exit status once its stdout ended, with its stderr read to the end."""
        with contextlib.suppress(TimeoutExpired):
            self.proc.wait(wait_s)
        self._err_reader.join(wait_s)  # stdout's EOF can come before stderr's last lines
        return self.proc.poll()

    def stderr_tail(self) -> str:
        """The end of what Pi wrote to stderr, redacted and bounded, for an error."""
        text = self._stderr.decode(errors="replace").strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return safe_error_message(" / ".join(lines[-3:]), fallback="no error output")

    def send(self, command: dict[str, Any]) -> str:
        """Write one command; returns its id (responses echo it)."""
        with self._write_lock:
            self._next_id += 1
            cid = f"pw{self._next_id}"
            line = json.dumps({"id": cid, **command}, separators=(",", ":")) + "\n"
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(line.encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # Pi is gone; its EOF is already on the event queue
            return cid

    def exited(self) -> int | None:
        return self.proc.poll()

    def close(self) -> None:
        """SIGTERM first (Pi stops its bash commands), wait, then EOF, then KILL the group."""
        try:
            if self.proc.poll() is None:
                signal_group(self.proc, signal.SIGTERM)
                with contextlib.suppress(TimeoutExpired):
                    self.proc.wait(TERM_WAIT_S)
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.proc.stdin.close()
            signal_group(self.proc, signal.SIGKILL)
            with contextlib.suppress(TimeoutExpired):
                self.proc.wait(TERM_WAIT_S)
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
