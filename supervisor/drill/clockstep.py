"""The drill's ``clock_step`` fault: the wall clock of every product process stepped.

Owns stepping the wall clock the way an NTP step or a resumed VM does:
every process the drill starts gets ``PI_WORKFLOWS_DRILL_CLOCK_OFFSET``
naming a file this module rewrites (``+3600``, ``-3600``, ``+0``), whose
seconds ``protocol.clock.now_ms`` adds (the clock of leases and every
store timestamp); the monotonic clock is left alone, as a real step
leaves it. libfaketime would step ``time.time`` itself, but the version
Debian ships (0.9.10) makes ``time.sleep`` fail with EINVAL on Python
3.11 once it leaves the monotonic clock alone (its issue 426), so the
product reads the offset itself, and only when the variable is set.
Also owns the fault's invariant, ``clock_step_restart``: a run whose
worker (one of the current host's) was live when the clock stepped is
not resumed, because nothing but the clock happened to it. Imports
``protocol``, the drill's checker, hosts and scratch; never the worker.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...protocol.bundle import Bundle
from ...protocol.clock import OFFSET_ENV
from ...protocol.liveness import is_same_process
from ...protocol.states import CLAIMED
from ...protocol.store import Store
from .checker import Violation, parse_trace
from .hosts import Hosts
from .scratch import Scratch, write_private

STEP_S = 3600


def set_offset(path: Path, seconds: int) -> None:
    """Replace the offset file at once: a reader sees the old step or the new one."""
    fresh = path.with_name(path.name + ".new")
    write_private(fresh, f"{seconds:+d}\n")
    os.replace(fresh, path)


@dataclass(frozen=True)
class Watched:
    """A run whose worker was live when the clock stepped."""

    run_id: str
    pid: int
    resumes: int  # ``run_resumed`` boundaries in its trace then


@dataclass
class ClockStepper:
    scratch: Scratch
    hosts: Hosts
    offset_file: Path
    violations: list[Violation] = field(default_factory=list)

    @classmethod
    def install(cls, scratch: Scratch, hosts: Hosts) -> ClockStepper:
        """Every later child of the drill's reads its wall clock through the file."""
        offset = scratch.work / "clock-offset"
        set_offset(offset, 0)
        scratch.env[OFFSET_ENV] = str(offset)
        return cls(scratch, hosts, offset)

    def step(self, hold: float) -> str:
        """Forward an hour, then back an hour behind, then right: each held for a
        lease and ``hold`` seconds; then a lease more for any harm to show."""
        lease_s = self.scratch.lease_ms / 1000
        deadline = time.monotonic() + 1.5  # as other faults do: wait a little for a target
        while not (watched := self._watch()) and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            for offset in (STEP_S, -STEP_S):
                set_offset(self.offset_file, offset)
                time.sleep(lease_s + hold)
        finally:
            set_offset(self.offset_file, 0)
        time.sleep(lease_s * 1.5)
        self._judge(watched)
        return (f"+{STEP_S} s then -{STEP_S} s, {lease_s + hold:.1f} s each;"
                f" {len(watched)} live worker(s) watched")

    def _host_runner(self) -> str | None:
        """The current host's runner id, from the store's runners (its pid names it)."""
        pid = self.hosts.pid()
        with Store(self.scratch.paths.store_file, lease_ms=self.scratch.lease_ms) as store:
            rows = store.list_runners()
        return next((r.runner_id for r in rows if r.kind == "host" and r.pid == pid), None)

    def _watch(self) -> list[Watched]:
        """Runs of the current host with a live worker: only the clock may touch them."""
        host = self._host_runner()
        with Store(self.scratch.paths.store_file, lease_ms=self.scratch.lease_ms) as store:
            rows = [r for r in store.list_runs(limit=100_000)
                    if r.state in CLAIMED and host is not None and r.runner_id == host]
        watched = []
        for row in rows:
            bundle = Bundle(self.scratch.paths.runs_dir, row.run_id)
            for entry in bundle.processes().get("processes", []):
                pid, start = entry.get("pid"), entry.get("startTime")
                if entry.get("role") == "worker" and isinstance(pid, int) \
                        and isinstance(start, (int, float)) and is_same_process(pid, start):
                    watched.append(Watched(row.run_id, pid, _resumes(bundle)))
        return watched

    def _judge(self, watched: list[Watched]) -> None:
        for run in watched:
            now = _resumes(Bundle(self.scratch.paths.runs_dir, run.run_id))
            if now > run.resumes:
                self.violations.append(Violation(
                    "clock_step_restart", run.run_id,
                    f"resumed {now - run.resumes} time(s) while only the clock stepped"
                    f" (its worker {run.pid} was live)"))


def _resumes(bundle: Bundle) -> int:
    """``run_resumed`` boundaries in the trace (a restart of the run, not a pause)."""
    try:
        events, _ = parse_trace(bundle.trace_path.read_bytes())
    except OSError:
        return 0
    return sum(1 for e in events if e is not None and e.get("type") == "run_resumed"
               and (e.get("payload") or {}).get("boundary") is True)
