"""The drill's loop: iterations of seeded work and faults, a check after each, a
settle, and the final check.

Owns the order of things. Each iteration makes sure a host runs, draws its
faults and launches from the seed, injects the faults from a thread while it
launches (an in-session run in a Pi of its own, detached runs, a session run
on a pty, a deferred launch, answers, a sync), waits for the host to catch
up a little, then checks the runs that are not yet known good (and every controller resource:
the drill's controller gets applies, spec changes, deletes and nudges). At the end it
stops injecting, lets every run end (answering checkpoints, activating
sessions' launches), closes every Pi session (reopening one that still owes
a deferred turn until it delivered it), syncs every session, drains the host,
and checks everything once more, processes and all. Imports the drill's
modules and ``protocol``; never the worker.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...protocol.bundle import Bundle
from ...protocol.states import TERMINAL, TERMINAL_STATUSES, QueueState, RunStatus
from ...protocol.store import QueueRow, Store
from ..model.pienv import scrub_env, write_agent_dir
from ..model.scripted import ScriptedModel
from .checker import Marks, Violation, check, resource_marks
from .clockstep import ClockStepper
from .ctlwork import CtlLauncher, write_controllers
from .durable import collect, marked_processes
from .faults import NEEDS_MOUNT, Injector, plan
from .hosts import Hosts
from .insession import InSession, pi_workflows_bin
from .pienv import drill_reply
from .report import Report
from .scratch import DRILL_SETTINGS, Scratch
from .workload import DETACHED, Launcher, write_workflows

ACTIVE = {QueueState.QUEUED, QueueState.STARTING, QueueState.RUNNING, QueueState.PARKED}
PTY_SESSIONS, NOTIFY_SESSIONS = ("p0", "p1", "p2"), ("n0",)
DEFERRED_SESSIONS = ("d0", "d1", "d2", "d3")
SETTLE_S = 180.0
# How often an iteration starts an in-session run, how many may be open at once, and
# how often its model cancels the run instead of submitting (a deferred turn follows).
IN_SESSION_CHANCE, IN_SESSION_LIVE, IN_SESSION_CANCEL = 0.3, 2, 0.4


@dataclass(frozen=True)
class Options:
    iterations: int
    seed: int
    project: Path
    report: Path
    faults: frozenset[str] = frozenset()  # only these kinds (``--faults``); empty: all


def pi_binary() -> str | None:
    """``PI_WORKFLOWS_PI_BIN`` if it names a file, else the checkout's pinned Pi."""
    configured = os.environ.get("PI_WORKFLOWS_PI_BIN")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    from ...protocol import pibin

    local = Path(pibin.__file__).resolve().parents[1] / "node_modules" / ".bin" / "pi"
    return str(local) if os.access(local, os.X_OK) else None


class Drill:
    def __init__(self, options: Options, say: Callable[[str], None]) -> None:
        self.options, self.say = options, say
        self.rng = random.Random(options.seed)
        wanted = options.faults or NEEDS_MOUNT
        self.scratch = Scratch.create(options.project, options.seed,
                                      small_runs="runs_disk_full" in wanted)
        try:
            self._set_up(options, say)
        except BaseException:
            self.scratch.release()  # no tmpfs outlives a drill that could not start
            raise

    def _set_up(self, options: Options, say: Callable[[str], None]) -> None:
        self.pi = pi_binary()
        self.model: ScriptedModel | None = None
        self.insession: InSession | None = None
        # In-session starts are drawn from a random stream of their own, so a seed's
        # other launches and faults stay what they were before there were any.
        self.rng_session = random.Random(options.seed * 1_000_003 + 22)
        self.report = Report(options.seed, options.iterations, str(self.scratch.root),
                             agents=self.pi is not None, settings=dict(DRILL_SETTINGS))
        if self.pi is None:
            self.report.skipped.append("agent steps: no Pi (set PI_WORKFLOWS_PI_BIN or run"
                                       " scripts/setup)")
        else:
            self.model = ScriptedModel(drill_reply).start()
            agent_dir = write_agent_dir(self.scratch.work / "pi-agent", self.model.base_url)
            self.scratch.env["PI_WORKFLOWS_PI_AGENT_DIR"] = str(agent_dir)
            self.scratch.env["PI_WORKFLOWS_PI_BIN"] = self.pi
            scrub_env(self.scratch.env)
            binary = pi_workflows_bin()
            if binary is None:
                self.report.skipped.append("in-session runs: no pi-workflows executable for"
                                           " the Pi extension (PI_WORKFLOWS_BIN)")
            else:
                self.insession = InSession(self.scratch, self.pi, binary, agent_dir)
        # Faults this machine cannot inject are left out of the draw, and said.
        self.without: frozenset[str] = frozenset()
        if self.scratch.small_runs_skipped is not None:
            self.without = NEEDS_MOUNT
            why = f"runs_disk_full: {self.scratch.small_runs_skipped}"
            self.report.skipped.append(why)
            print(f"drill: skipped {why}", file=sys.stderr)
        self.names = write_workflows(self.scratch, agents=self.pi is not None)
        write_controllers(self.scratch)
        # Controller launches too have a random stream of their own (see rng_session).
        self.rng_ctl = random.Random(options.seed * 1_000_003 + 24)
        self.ctl = CtlLauncher(self.scratch)
        self.marks: Marks = {}  # each resource's last seen observed generation, version
        self.hosts = Hosts(self.scratch)
        self.launcher = Launcher(self.scratch)
        # Before any child starts: every product process reads the stepped clock.
        clock = None
        if not options.faults or "clock_step" in options.faults:
            clock = ClockStepper.install(self.scratch, self.hosts)
        self.injector = Injector(self.scratch, self.hosts, self.launcher, clock=clock,
                                 insession=self.insession)
        self.watermarks: dict[str, int] = {}
        self.good: set[str] = set()  # settled runs already checked clean
        self.seen: set[tuple[str, str | None, str]] = set()
        self.doomed = 0  # launches made to fail at activation, for their follow-ups
        self.resources: list[dict[str, Any]] = []  # as the last check read them

    # -- reading --

    def rows(self) -> list[QueueRow]:
        with Store(self.scratch.paths.store_file, lease_ms=self.scratch.lease_ms) as store:
            return store.list_runs(limit=1_000_000)

    def waiting(self, rows: list[QueueRow]) -> list[str]:
        """Runs waiting at a checkpoint with no live continuation."""
        children = {r.parent_run_id for r in rows
                    if r.parent_run_id and r.state not in (QueueState.FAILED,
                                                           QueueState.CANCELLED)}
        out = []
        for row in rows:
            if row.state == QueueState.DONE and row.run_id not in children:
                try:
                    status = Bundle(self.scratch.paths.runs_dir, row.run_id).raw_state()
                except Exception:
                    continue
                if status.get("status") == RunStatus.WAITING:
                    out.append(row.run_id)
        return out

    def check(self, final: bool) -> None:
        durable = collect(self.scratch.paths, self.launcher.launched, self.scratch.work,
                          self.scratch.ledger, processes=final,
                          only=None if final else self._unsettled(),
                          pi_sessions=self.scratch.work / "pi-sessions")
        # Reported again at each check; the report keeps each violation once.
        durable.host_exits = [{"pid": pid, "code": code}
                              for pid, code in self.hosts.exited_by_themselves()]
        found = check(durable, final=final, watermarks=self.watermarks, marks=self.marks)
        self.marks = resource_marks(durable, self.marks)
        self.resources = durable.resources
        if self.injector.clock is not None:  # what the clock_step fault saw
            found += self.injector.clock.violations
        bad = {v.run_id for v in found}
        for violation in found:
            key = (violation.kind, violation.run_id, violation.evidence)
            if key not in self.seen:
                self.seen.add(key)
                self.report.violations.append(violation)
        for session, seq in durable.watermarks.items():
            self.watermarks[session] = max(seq, self.watermarks.get(session, 0))
        for run in durable.runs.values():
            if run.row and run.row["state"] in TERMINAL and run.run_id not in bad \
                    and run.state is not None \
                    and run.state.get("status") in TERMINAL_STATUSES:
                self.good.add(run.run_id)

    def _unsettled(self) -> set[str]:
        return {r.run_id for r in self.rows()} - self.good | set(self.launcher.launched) \
            - self.good

    # -- one iteration --

    def launch_in_session(self) -> None:
        """Sometimes (each iteration when ``pi_session_kill9`` is forced) a Pi session
        of the drill's own starts ``think`` (sometimes to cancel it at its step); at most
        ``IN_SESSION_LIVE`` run at once."""
        if self.insession is None:
            return
        forced = "pi_session_kill9" in self.options.faults
        if self.rng_session.random() < (1.0 if forced else IN_SESSION_CHANCE) and \
                len(self.insession.live()) < IN_SESSION_LIVE:
            cancel = self.rng_session.random() < IN_SESSION_CANCEL
            self.insession.start("think", cancel=cancel)
            self.report.launches["insession:think" + (":cancel" if cancel else "")] += 1

    def launch(self) -> None:
        rng, launcher = self.rng, self.launcher
        self.launch_in_session()  # first: a Pi takes a few seconds to reach its step
        self.ctl.launch(self.rng_ctl)  # early: a fault finds its reconciles running
        busy = launcher.busy_sessions()
        if rng.random() < 0.5:  # first, so a session kill finds it running
            session = rng.choice(PTY_SESSIONS)
            name = rng.choice(("notes", "chain"))
            if session not in busy:
                launcher.session_run(name, session)
                self.report.launches[f"session:{name}"] += 1
        detached = list(DETACHED) + (["think", "think"] if self.pi else []) + ["notes"]
        for _ in range(rng.choice((1, 2, 2, 3))):
            name = rng.choice(detached)
            told = NOTIFY_SESSIONS[0] if name == "notes" else None
            if launcher.detach(name, told):
                self.report.launches[f"detached:{name}"] += 1
        if rng.random() < 0.3:
            session = rng.choice(DEFERRED_SESSIONS)
            name = rng.choice(("chain", "loop", "notes"))
            if session not in busy and launcher.deferred(name, session):
                self.report.launches[f"deferred:{name}"] += 1
        if rng.random() < 0.15:
            session = rng.choice(DEFERRED_SESSIONS)
            if session not in busy | launcher.busy_sessions():
                self.doomed += 1
                if launcher.doomed(session, self.doomed):
                    self.report.launches["doomed"] += 1
        if rng.random() < 0.7:
            for run_id in self.waiting(self.rows())[:1]:
                if launcher.answer(run_id):
                    self.report.launches["answer"] += 1
        if rng.random() < 0.6:
            launcher.sync(rng.choice(PTY_SESSIONS + DEFERRED_SESSIONS + NOTIFY_SESSIONS))

    def iteration(self, number: int) -> None:
        self.hosts.ensure()
        if self.insession is not None:
            ended = {r.run_id for r in self.rows() if r.state in TERMINAL}
            self.insession.retire(lambda run: run in ended)
        faults = plan(self.rng, self.pi is not None, only=self.options.faults,
                      without=self.without)
        thread = threading.Thread(target=self.injector.run, args=(number, faults),
                                  name="drill-faults", daemon=True)
        thread.start()
        self.launch()
        thread.join()
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            active = [r for r in self.rows() if r.state in ACTIVE and not (
                r.origin_session and r.state == QueueState.QUEUED)]
            if len(active) <= 4:
                break
            time.sleep(0.2)
        self.check(final=False)

    # -- the end --

    def resources_settled(self) -> bool:
        """Every resource observed its generation and is Ready, none is being deleted."""
        with Store(self.scratch.paths.store_file, lease_ms=self.scratch.lease_ms) as store:
            for res in store.list_resources(limit=100_000):
                ready: dict[str, Any] = next((c for c in res.status.get("conditions") or []
                                              if c.get("type") == "Ready"), {})
                if res.deletion_requested or ready.get("status") != "true" or \
                        res.status.get("observed_generation") != res.generation:
                    return False
        return True

    def settle(self) -> bool:
        """Let every run end and every resource settle; True once every queue row is
        terminal and every resource is (no nudge: one that needs it is stuck)."""
        deadline = time.monotonic() + SETTLE_S
        nudged: dict[str, float] = {}
        while time.monotonic() < deadline:
            self.hosts.ensure()
            rows = self.rows()
            for run_id in self.waiting(rows):
                self.launcher.answer(run_id)
            busy = self.launcher.busy_sessions()
            if self.insession is not None:  # its own Pi activates a live session's run
                busy |= {p.session_id for p in self.insession.live() if p.session_id}
            for row in rows:
                session = row.origin_session
                if session and row.state in (QueueState.QUEUED, QueueState.STARTING) \
                        and session not in busy and nudged.get(session, 0) < time.monotonic():
                    self.launcher.activate(session)
                    nudged[session] = time.monotonic() + self.scratch.lease_ms / 1000 + 1
                    busy.add(session)
                if row.state == QueueState.PARKED and row.error_code \
                        and nudged.get(row.run_id, 0) < time.monotonic():
                    self.launcher._cli("resume", row.run_id)  # parked blocked: let it go on
                    self.report.refused[f"blocked:{row.error_code}"] = \
                        self.report.refused.get(f"blocked:{row.error_code}", 0) + 1
                    nudged[row.run_id] = time.monotonic() + 5
            if all(r.state in TERMINAL for r in rows) and not self.waiting(rows) \
                    and self.resources_settled():
                return True
            time.sleep(0.5)
        return False

    def finish_in_session(self) -> None:
        """Close every Pi session; then reopen each one that has a turn intent still
        to deliver (a Pi killed with a deferred turn pending) until it delivered it."""
        if self.insession is None:
            return
        self.insession.close_all()
        self.launcher.launched += [r for r in self.insession.run_ids()
                                   if r not in self.launcher.launched]
        files = {p.session_id: p.session_file for p in self.insession.pis
                 if p.session_id and p.session_file}
        for session_id, path in sorted(files.items()):
            if not self._pending_intents(session_id):
                continue
            reopened = self.insession.open_file(path)
            deadline = time.monotonic() + 30
            while reopened is not None and self._pending_intents(session_id) and \
                    time.monotonic() < deadline:
                time.sleep(0.2)
            if reopened is not None:
                reopened.close()

    def _pending_intents(self, session_id: str) -> bool:
        with Store(self.scratch.paths.store_file, lease_ms=self.scratch.lease_ms) as store:
            return any(t.session_id == session_id and t.state != "resolved"
                       for t in store.list_turn_intents())

    def finish(self) -> None:
        self.report.settled = self.settle()
        self.finish_in_session()
        for session in PTY_SESSIONS + DEFERRED_SESSIONS + NOTIFY_SESSIONS:
            for _ in range(20):  # a sync hands out a bounded batch of follow-ups
                data = self.launcher.sync(session)
                if not data or not data.get("followUps"):
                    break
        for _, proc in self.launcher.live_session_processes():
            try:
                proc.wait(15)
            except Exception:
                proc.kill()
                proc.wait()
        self.launcher.busy_sessions()  # collects the pty runs' ids
        self.hosts.drain()
        deadline = time.monotonic() + 15
        while marked_processes(self.scratch.root) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.check(final=True)

    def run(self) -> Report:
        begin = time.monotonic()
        try:
            for number in range(self.options.iterations):
                self.iteration(number)
                if (number + 1) % 10 == 0:
                    print(f"drill: iteration {number + 1}/{self.options.iterations},"
                          f" {len(self.injector.injected)} fault(s),"
                          f" {len(self.report.violations)} violation(s)", file=sys.stderr)
            self.finish()
        finally:
            self.cleanup()
        rows = self.rows()
        self.report.runs.update(str(r.state) for r in rows)
        for row in rows:
            if row.error_code:
                self.report.errors[row.error_code] += 1
            try:
                status = Bundle(self.scratch.paths.runs_dir, row.run_id).raw_state()
                self.report.statuses[str(status.get("status"))] += 1
            except Exception:
                self.report.statuses["none"] += 1
        self.report.faults = list(self.injector.injected)
        self.report.refused.update(self.launcher.refused)
        self.report.refused.update(self.ctl.refused)
        self.report.launches.update(self.ctl.launches)
        self.report.resources = len(self.resources)
        self.report.resources_ready = sum(
            any(c.get("type") == "Ready" and c.get("status") == "true"
                for c in (r["status"] or {}).get("conditions") or [])
            for r in self.resources)
        self.report.hosts_started = self.hosts.started
        self.report.wall_s = time.monotonic() - begin
        return self.report

    def cleanup(self) -> None:
        """Nothing of the drill's may outlive it (after the final check looked)."""
        if self.insession is not None:
            self.insession.close_all()
        for proc in self.hosts.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for _, proc in self.launcher.live_session_processes():
            proc.kill()
            proc.wait()
        if self.model is not None:
            self.model.stop()
        from ..procs.reaper import kill_processes

        kill_processes([__import__("psutil").Process(p["pid"])
                        for p in marked_processes(self.scratch.root)], timeout=5)


def run_drill(options: Options, say: Callable[[str], None]) -> Report:
    drill = Drill(options, say)
    try:
        report = drill.run()
    finally:
        drill.scratch.release()  # after the report's last read of the bundles
    report.write(options.report)
    return report


__all__ = ["Options", "Violation", "run_drill"]
