"""The faults a drill injects, and where it finds their targets.

Owns choosing an iteration's faults from the seed (kind and delay, drawn
in the main thread so a seed always asks for the same faults; which
process is hit depends on what runs at that moment) and applying them:
``kill -9`` of the host (restarted at once), of a worker, of a Pi child, of
a session command, of the Pi of an in-session run at a drawn moment of its step
(``pi_session_kill9``, reopened on its session file half the time); a SIGTERM
drain of the host (restarted once it exited); SIGSTOP of a worker past its
lease, then SIGCONT; the store's write lock held by another process
(``BEGIN IMMEDIATE`` in a child) for a few seconds;
``kill -9`` of the host's zygote, or of the spare worker it keeps; the
wall clock of every product process stepped (``clockstep``); the
runs directory's own small tmpfs filled to the last byte for a few seconds
(``runs_disk_full``; left out, with the reason in the report, where no
tmpfs could be mounted).
Workers and Pi children are found through the ``processes.json`` of running
runs and proven by pid and start time before any signal; the zygote and its
spare by their titles among the host's children; a controller worker
(``controller_worker_kill9``) by its run marker, a reconciling one first
by its title. Imports
``protocol`` and the drill's ctlwork, hosts, insession, scratch and workload; never the
worker.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from ...protocol.bundle import Bundle
from ...protocol.liveness import is_same_process
from ...protocol.spawn import PIPE, spawn
from ...protocol.states import QueueState
from ...protocol.store import Store
from ...protocol.wire import MARKER_ENV
from .clockstep import ClockStepper
from .ctlwork import busy, controller_workers
from .hosts import Hosts
from .insession import InSession
from .scratch import Scratch
from .smalldisk import fill, free
from .workload import Launcher

KINDS: dict[str, float] = {  # kind -> weight
    "host_kill9": 1.4, "host_drain": 0.6, "worker_kill9": 2.0, "pi_kill9": 1.0,
    "session_kill9": 1.0, "worker_stop": 0.8, "store_lock": 0.8,
    "zygote_kill9": 0.5, "spare_kill9": 0.5,
    "clock_step": 0.5,
    "runs_disk_full": 0.4,
    "pi_session_kill9": 1.0,
    "controller_worker_kill9": 1.2,
}
# Faults of agent steps: drawn only where Pi is installed.
NEEDS_PI = frozenset({"pi_kill9", "pi_session_kill9"})
# Where an in-session run is when ``pi_session_kill9`` kills its Pi, by the fault's
# ``pick``: (phase reached, upper bound of ``pick``, seconds after it at most). The
# phases are what the Pi showed: started; its start answered with a run id (the step
# message not there yet); the step message in the conversation (the model is thinking
# or streaming its submit); the model's submit call begun (judged, or just accepted),
# or its cancel of the run; the deferred turn that follows a cancel delivered into the
# conversation (its intent not yet resolved, perhaps). A session that submits has no
# deferred turn: ``turn`` aims at ``submitted`` there; in a session that cancels,
# ``submitted`` aims at ``turn`` (a Pi killed in its cancel call cancels nothing: the
# call's first CLI command is still starting).
MOMENTS = (("opening", 0.15, 2.0), ("launched", 0.3, 0.8), ("step", 0.65, 0.35),
           ("submitted", 0.85, 0.25), ("turn", 1.0, 0.4))
PHASE_WAIT_S, REOPENED_WAIT_S = 45.0, 3.0
# Faults that need something the machine may not allow (a tmpfs of the runs' own).
NEEDS_MOUNT = frozenset({"runs_disk_full"})
# How long the runs directory stays full beyond the drawn hold: long enough for
# every running worker to meet it and for the host to back off at least once.
FULL_EXTRA_S = 2.0
# A child that holds the store's write lock, then lets go (sqlite3 is imported only
# there: the product's modules leave SQLite to the store).
LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


@dataclass(frozen=True)
class Planned:
    kind: str
    delay: float  # seconds after the iteration's launches
    pick: float  # which target, as a fraction of the sorted candidates
    hold: float  # seconds a lock or a stop lasts


def plan(rng: random.Random, agents: bool, *, only: frozenset[str] = frozenset(),
         without: frozenset[str] = frozenset()) -> list[Planned]:
    """One or two faults for an iteration, drawn from ``rng``.

    ``only``: the kinds a caller forced (``drill --faults``); ``without``:
    kinds this machine cannot inject.
    """
    kinds = {k: w for k, w in KINDS.items() if agents or k not in NEEDS_PI}
    if only:
        kinds = {k: w for k, w in kinds.items() if k in only}
    kinds = {k: w for k, w in kinds.items() if k not in without} or kinds
    count = 1 if rng.random() < 0.7 else 2
    names = rng.choices(list(kinds), weights=list(kinds.values()), k=count)
    return [Planned(name, round(rng.uniform(0.2, 1.6), 3), rng.random(),
                    round(rng.uniform(1.0, 2.5), 3)) for name in names]


def moment_of(pick: float) -> tuple[str, float]:
    """The phase ``pick`` aims at, and how many seconds after its start (``MOMENTS``)."""
    low = 0.0
    for phase, high, window in MOMENTS:
        if pick < high:
            return phase, (pick - low) / (high - low) * window
        low = high
    phase, _, window = MOMENTS[-1]
    return phase, window


@dataclass
class Injector:
    scratch: Scratch
    hosts: Hosts
    launcher: Launcher
    clock: ClockStepper | None = None  # None: clock_step left out of the drill
    insession: InSession | None = None  # None: no Pi, no in-session runs
    started: float = field(default_factory=time.monotonic)
    injected: list[dict[str, Any]] = field(default_factory=list)

    def _record(self, iteration: int, kind: str, target: str | None, note: str = "") -> None:
        self.injected.append({"iteration": iteration, "kind": kind,
                              "at": round(time.monotonic() - self.started, 3),
                              "target": target, "applied": target is not None,
                              **({"note": note} if note else {})})

    def run(self, iteration: int, faults: list[Planned]) -> None:
        """Apply ``faults`` in order, each after its delay (from now)."""
        begin = time.monotonic()
        for fault in sorted(faults, key=lambda f: f.delay):
            time.sleep(max(0.0, begin + fault.delay - time.monotonic()))
            try:
                target, note = getattr(self, f"_{fault.kind}")(fault)
            except Exception as exc:  # a fault that could not be applied is reported
                target, note = None, f"{type(exc).__name__}: {exc}"
            self._record(iteration, fault.kind, target, note)

    # -- targets --

    def _processes(self, role: str) -> list[tuple[str, int, float]]:
        """(run id, pid, start time) of live ``role`` processes of running runs."""
        found = []
        with Store(self.scratch.paths.store_file, lease_ms=self.scratch.lease_ms) as store:
            rows = store.list_runs(QueueState.RUNNING, limit=100_000)
        for row in rows:
            entries = Bundle(self.scratch.paths.runs_dir, row.run_id).processes()
            for entry in entries.get("processes", []):
                pid, start = entry.get("pid"), entry.get("startTime")
                if entry.get("role") == role and isinstance(pid, int) \
                        and isinstance(start, (int, float)) and is_same_process(pid, start):
                    found.append((row.run_id, pid, float(start)))
        return sorted(found)

    def _pick(self, fault: Planned, role: str) -> tuple[str, int, float] | None:
        """One live ``role`` process (waiting up to 1.5 s for one to exist)."""
        deadline = time.monotonic() + 1.5
        while True:
            found = self._processes(role)
            if found:
                return found[min(int(fault.pick * len(found)), len(found) - 1)]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def _signal_one(self, fault: Planned, role: str, sig: int) -> tuple[str | None, str]:
        picked = self._pick(fault, role)
        if picked is None:
            return None, f"no live {role} process"
        run_id, pid, start = picked
        if not is_same_process(pid, start):
            return None, f"{role} {pid} exited before the signal"
        os.kill(pid, sig)
        return f"{role} {pid} of {run_id}", ""

    # -- the faults --

    def _host_kill9(self, fault: Planned) -> tuple[str | None, str]:
        pid = self.hosts.kill9()
        self.hosts.ensure()
        return (f"host {pid}", "") if pid else (None, "no host running")

    def _host_drain(self, fault: Planned) -> tuple[str | None, str]:
        pid, code = self.hosts.drain()
        self.hosts.ensure()
        if pid is None:
            return None, "no host running"
        return f"host {pid}", f"exit {code}" if code is not None else "killed after 20 s"

    def _worker_kill9(self, fault: Planned) -> tuple[str | None, str]:
        return self._signal_one(fault, "worker", signal.SIGKILL)

    def _controller_worker_kill9(self, fault: Planned) -> tuple[str | None, str]:
        """``kill -9`` of a controller worker, one that reconciles if one does within
        3 s (its title names the resource), else an idle one."""
        deadline = time.monotonic() + 3.0
        found = controller_workers(self.scratch)
        while not any(busy(title) for _, _, title in found) and time.monotonic() < deadline:
            time.sleep(0.05)
            found = controller_workers(self.scratch)
        candidates = [w for w in found if busy(w[2])] or found
        if not candidates:
            return None, "no controller worker running"
        pid, start, title = candidates[min(int(fault.pick * len(candidates)),
                                           len(candidates) - 1)]
        if not is_same_process(pid, start):
            return None, f"controller worker {pid} exited before the signal"
        os.kill(pid, signal.SIGKILL)
        return f"controller worker {pid}", title.split(" ", 3)[-1] if busy(title) else "idle"

    def _pi_kill9(self, fault: Planned) -> tuple[str | None, str]:
        return self._signal_one(fault, "pi", signal.SIGKILL)

    def _session_kill9(self, fault: Planned) -> tuple[str | None, str]:
        live = sorted(self.launcher.live_session_processes(), key=lambda sp: sp[1].pid)
        if not live:
            return None, "no session command running"
        session, proc = live[min(int(fault.pick * len(live)), len(live) - 1)]
        worker = None
        if fault.hold > 1.75:  # half the time a crash of the machine's kind: the worker
            with contextlib.suppress(psutil.Error):  # cannot park, a host must take over
                worker = next((c for c in psutil.Process(proc.pid).children()
                               if MARKER_ENV in c.environ()), None)
        if worker is not None:
            with contextlib.suppress(psutil.Error):
                worker.send_signal(signal.SIGSTOP)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        if worker is not None:
            with contextlib.suppress(psutil.Error):
                worker.kill()
            return f"session {session} pid {proc.pid}", f"its worker {worker.pid} frozen, killed"
        return f"session {session} pid {proc.pid}", ""

    def _pi_session_kill9(self, fault: Planned) -> tuple[str | None, str]:
        """``kill -9`` of the Pi of an in-session run at a drawn moment of its step;
        half the time (``hold``) the session is reopened on its file right after."""
        if self.insession is None:
            return None, "no in-session runs (no Pi)"
        waited = time.monotonic() + 10.0
        while not (candidates := self.insession.fresh()) and time.monotonic() < waited:
            time.sleep(0.1)
        candidates = candidates or self.insession.live()
        if not candidates:
            return None, "no Pi session running"
        target = candidates[-1]
        target.hit = True
        phase, offset = moment_of(fault.pick)
        if target.cancel and phase == "submitted":
            phase = "turn"  # a cut-off cancel call cancels nothing: aim at what follows
        elif phase == "turn" and not target.cancel:
            phase = "submitted"
        # A reopened session starts no run: it shows a step only if it resumes one here.
        wait_s = REOPENED_WAIT_S if target.reopened else PHASE_WAIT_S
        reached = target.wait(lambda: target.moment(phase), wait_s)
        if reached is not None:
            time.sleep(max(0.0, reached + offset - time.monotonic()))
        shown, run = target.phase(), target.run_id()
        if not target.alive():
            return None, f"the Pi of {run or 'a session'} exited before the signal"
        target.kill9()
        note = f"aimed at {phase}+{offset:.2f}s, at {shown}"
        if reached is None:
            note += f" ({phase} not reached in {wait_s:g} s)"
        if target.reopened:
            note += ", a reopened session"
        if fault.hold > 1.75:
            reopened = self.insession.reopen(target)
            note += "; reopened" if reopened is not None else "; no session file to reopen"
        return f"pi session {target.proc.pid} of {run or 'no run yet'}", note

    def _worker_stop(self, fault: Planned) -> tuple[str | None, str]:
        picked = self._pick(fault, "worker")
        if picked is None or not is_same_process(picked[1], picked[2]):
            return None, "no live worker process"
        run_id, pid, start = picked
        os.kill(pid, signal.SIGSTOP)
        # Past the lease: the host must see it hung, kill it and take the run back.
        stopped = self.scratch.lease_ms / 1000 + fault.hold
        time.sleep(stopped)
        if is_same_process(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        return f"worker {pid} of {run_id}", f"stopped {stopped:.1f} s"

    def _clock_step(self, fault: Planned) -> tuple[str | None, str]:
        """The wall clock of every product process an hour ahead, then behind, then
        right; no live worker may be killed or lose its claim for it."""
        if self.clock is None:
            return None, "the drill's clock offset is not installed"
        return "the clock of every product process", self.clock.step(fault.hold)

    def _zygote(self) -> psutil.Process | None:
        """The current host's zygote (its title names it), if it has one."""
        pid = self.hosts.pid()
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(pid).children() if pid else []:
                with contextlib.suppress(psutil.Error):
                    if _title(child).startswith("pi-workflows zygote "):
                        return child
        return None

    def _zygote_kill9(self, fault: Planned) -> tuple[str | None, str]:
        """Its workers run on; the host forks cold meanwhile and starts another."""
        zygote = self._zygote()
        if zygote is None:
            return None, "no zygote running"
        zygote.kill()
        return f"zygote {zygote.pid}", ""

    def _spare_kill9(self, fault: Planned) -> tuple[str | None, str]:
        """A worker with no run yet: the zygote reaps it and forks another."""
        zygote = self._zygote()
        spare = None
        with contextlib.suppress(psutil.Error):
            spare = next((c for c in (zygote.children() if zygote else [])
                          if _title(c).endswith(" spare")), None)
        if spare is None:
            return None, "no spare waiting"
        with contextlib.suppress(psutil.Error):
            spare.kill()
        return f"spare {spare.pid}", ""

    def _runs_disk_full(self, fault: Planned) -> tuple[str | None, str]:
        """Fill the runs directory's tmpfs, hold it full, then free it.

        Every worker that writes meanwhile must park its run ``disk_full``
        (no crash, no traceback), the host must stay up and start nothing,
        and all of it goes on by itself once the filler is gone.
        """
        disk = self.scratch.runs_disk
        if disk is None:
            return None, self.scratch.small_runs_skipped or "the runs are on no tmpfs of theirs"
        filler = disk / "filler"
        held = fault.hold + FULL_EXTRA_S
        try:
            filled = fill(filler)
            time.sleep(held)
        finally:
            free(filler)
        return f"runs tmpfs {disk}", f"{filled // 1024} KiB filled, full {held:.1f} s"

    def _store_lock(self, fault: Planned) -> tuple[str | None, str]:
        proc = spawn([sys.executable, "-c", LOCKER, str(self.scratch.paths.store_file),
                      str(fault.hold)], env=self.scratch.env, drop_env=self.scratch.drop(),
                     stdout=PIPE)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        proc.wait(60)
        if line != "locked":
            return None, "the lock was not taken"
        return f"store lock pid {proc.pid}", f"held {fault.hold:.1f} s"


def _title(proc: psutil.Process) -> str:
    """What ``ps`` shows (a title pads the original command line with NULs)."""
    return " ".join(proc.cmdline()).strip()
