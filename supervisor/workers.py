"""Worker subprocess handles: spawning one worker per claimed run.

Owns starting workers with the command line and environment that
``protocol.wire`` defines, the standby hand-off, and the per-child handle a
runner reaps with (``Popen.poll``: never a catch-all ``waitpid(-1)``).
Imports ``protocol``; never the worker package.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.spawn import signal_group, spawn
from ..protocol.store import Claim
from ..protocol.wire import STANDBY_RUN, Assignment, marker_value, worker_argv, worker_env


@dataclass
class WorkerHandle:
    claim: Claim
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    term_sent: float | None = None
    released: float | None = None  # when the run's claim was seen released

    @property
    def run_id(self) -> str:
        return self.claim.run_id

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def signal(self, sig: int) -> bool:
        return signal_group(self.proc, sig)

    def terminate(self) -> None:
        if self.term_sent is None:
            self.term_sent = time.monotonic()
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)


def spawn_worker(claim: Claim, *, project: Path, project_key: str, runner_id: str,
                 config_json: str = "") -> WorkerHandle:
    argv = worker_argv(project, runner_id, os.getpid(), run_id=claim.run_id,
                       claim_state=claim.state)
    env = worker_env(marker_value(project_key, runner_id, claim.run_id),
                     config_json=config_json, token=claim.token)
    # The project is the worker's working directory: relative paths in shell
    # nodes resolve against it.
    return WorkerHandle(claim, spawn(argv, cwd=project, env=env))


def spawn_standby(*, project: Path, project_key: str, runner_id: str,
                  config_json: str = "") -> subprocess.Popen[bytes]:
    """A worker that boots now and waits on stdin for a claim: start-up off the hot path."""
    env = worker_env(marker_value(project_key, runner_id, STANDBY_RUN), config_json=config_json)
    return spawn(worker_argv(project, runner_id, os.getpid(), standby=True), cwd=project,
                 env=env, stdin=subprocess.PIPE)


def assign(standby: subprocess.Popen[bytes], claim: Claim) -> WorkerHandle | None:
    """Hand ``claim`` to a booted standby worker; None if it is no longer usable."""
    if standby.poll() is not None or standby.stdin is None:
        return None
    try:
        standby.stdin.write(Assignment(claim.run_id, claim.state, claim.token).encode())
        standby.stdin.close()
    except OSError:
        return None
    return WorkerHandle(claim, standby)


class Standby:
    """At most one booted worker waiting for a claim (off the hot path)."""

    def __init__(self, *, project: Path, project_key: str, runner_id: str,
                 config_json: str = "", enabled: bool = True) -> None:
        self.project, self.project_key = project, project_key
        self.runner_id = runner_id
        self.config_json = config_json
        self.enabled = enabled
        self.proc: subprocess.Popen[bytes] | None = None
        self._not_before = 0.0

    def keep(self) -> None:
        if not self.enabled:
            return
        if self.proc is not None:
            if self.proc.poll() is None:
                return
            # It died while idle: do not respawn in a tight loop.
            self._not_before = time.monotonic() + 1.0
            self.proc = None
        if time.monotonic() >= self._not_before:
            self.proc = spawn_standby(project=self.project, project_key=self.project_key,
                                      runner_id=self.runner_id,
                                      config_json=self.config_json)

    def take(self, claim: Claim) -> WorkerHandle | None:
        proc, self.proc = self.proc, None
        return None if proc is None else assign(proc, claim)

    def drop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()  # EOF: the standby exits without doing anything
        try:
            proc.wait(1)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
