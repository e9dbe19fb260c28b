"""What the host bench's phases share: workflows, projects, figures and run timelines.

Owns the bench's workflows (a compute chain, a node that blocks), making
a bench project (``e2e.harness.Project`` with the product's default
lease/renew/poll settings, remembered for the final clean-up), percentile
summaries, process memory probes, and a run's timeline built only from
what the product records: the store's ``run_events``, the bundle's
``processes.json`` and its trace. Imports ``e2e.harness``,
``pi_workflows.protocol`` and psutil.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.states import TERMINAL
from pi_workflows.protocol.store import QueueRow, Store

from e2e.harness import HostProcess, Project, all_events, clean_env, poll

CHAIN = """
from pi_workflows import define_workflow, compute, edge

NODES = {nodes}


def step(i):
    def fn(ctx):
        return {{"step": i}}
    return fn


workflow = define_workflow(
    start_at="n0",
    nodes=[compute(f"n{{i}}", step(i)) for i in range(NODES)],
    edges=[edge(f"n{{i}}", f"n{{i + 1}}") for i in range(NODES - 1)],
)
"""

HOLD = """
from pi_workflows import define_workflow, compute, edge


def hold(ctx):
    # Block until the bench creates the release file; stop on park or cancel.
    import time
    release = ctx.project_dir / "release"
    while not release.exists():
        if ctx.cancelled():
            raise RuntimeError("stopped")
        time.sleep(0.02)
    return {"held": True}


workflow = define_workflow(
    start_at="hold",
    nodes=[compute("hold", hold), compute("after", lambda ctx: {"after": True})],
    edges=[edge("hold", "after")],
)
"""

MB = 1024 * 1024
# The host's booted zygote (the fork server its workers come from).
ZYGOTE_TITLE = "pi-workflows zygote "
PROJECTS: list[Project] = []  # every project made here, for the final clean-up


def bench_project(base: Path, name: str, home: Path, fsync: str) -> Project:
    """A project under ``base`` with default settings but ``fsync``, sharing ``home``."""
    root = base / name
    root.mkdir(parents=True)
    env = clean_env(home, PI_WORKFLOWS_FSYNC=fsync)
    # An installed package has its bytecode: hosts, zygotes and cold workers
    # must not compile every module on every start because this shell says so.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    project = Project(root, env)
    PROJECTS.append(project)
    return project


@contextlib.contextmanager
def host_running(project: Project, concurrency: int, log: str) -> Iterator[HostProcess]:
    host = project.start_host("--concurrency", str(concurrency), log=log)
    try:
        yield host
    finally:
        if host.poll() is None:
            seconds, code = project.stop_host(host)
            if code != 0:
                print(f"    ! host {log}: SIGTERM stop took {seconds:.1f} s, exit {code}")


# ---- figures ---------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with fewer than 100 samples p99 is the maximum)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary(values: list[float], unit: str = "ms", digits: int = 0) -> str:
    if not values:
        return "no samples"
    return (f"p50 {pct(values, 0.5):.{digits}f} {unit}  p99 {pct(values, 0.99):.{digits}f} {unit}"
            f"  mean {statistics.fmean(values):.{digits}f} {unit}  max {max(values):.{digits}f}"
            f" {unit}  (n={len(values)})")


def secs(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "TIMEOUT"


# ---- processes -----------------------------------------------------------------------


def rss(pid: int) -> int | None:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return None


def rss_uss(proc: psutil.Process) -> tuple[int, int] | None:
    try:
        info = proc.memory_full_info()
        return int(info.rss), int(info.uss)
    except psutil.Error:
        return None


def children(pid: int, *, recursive: bool = False) -> list[psutil.Process]:
    """``pid``'s children (``recursive``: with the workers its zygote forked)."""
    try:
        return list(psutil.Process(pid).children(recursive=recursive))
    except psutil.Error:
        return []


def has_spare(zygote: psutil.Process) -> bool:
    """The zygote has forked its spare (the next run's worker, booted ahead)."""
    for child in children(zygote.pid):
        try:
            if " ".join(child.cmdline()).strip().endswith(" spare"):
                return True
        except psutil.Error:
            continue
    return False


def is_zygote(proc: psutil.Process) -> bool:
    """The host's zygote has booted (imports done): its title says so."""
    try:
        title = " ".join(proc.cmdline()).strip()
    except psutil.Error:
        return False
    return title.startswith(ZYGOTE_TITLE)


def wait_zygote(host: HostProcess, timeout: float = 10.0,
                besides: frozenset[int] = frozenset()) -> bool:
    """Until one of the host's children other than ``besides`` is its booted zygote."""
    return bool(poll(lambda: any(is_zygote(p) for p in children(host.pid)
                                 if p.pid not in besides), timeout, 0.01))


# The names of the pre-booted standby worker the zygote replaced.
is_booted_standby = is_zygote
wait_standby = wait_zygote


def boot_clock_offset_s() -> float:
    """Seconds to add to a psutil create time to put it on the wall clock.

    psutil dates processes from the boot time in ``/proc/stat``, which is in
    whole seconds, so its create times run up to a second early; the boot
    time from ``/proc/uptime`` is good to 10 ms.
    """
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return (time.time() - uptime) - psutil.boot_time()


def diagnose(project: Project, host: HostProcess, rows: list[QueueRow]) -> list[str]:
    """What the unsettled runs and the host's children look like (printed on a timeout)."""
    lines = [f"{r.run_id} queue={r.state} runner={r.runner_id} bundle="
             f"{Bundle(project.paths.runs_dir, r.run_id).exists()}"
             for r in rows if r.state not in TERMINAL][:10]
    for proc in children(host.pid):
        try:
            wchan = sorted({Path(f"/proc/{proc.pid}/task/{t.id}/wchan").read_text()
                            for t in proc.threads()})
            lines.append(f"child {proc.pid} {' '.join(proc.cmdline())!r} {proc.status()}"
                         f" cpu={sum(proc.cpu_times()[:2]):.2f}s wchan={wchan}")
        except (psutil.Error, OSError) as exc:
            lines.append(f"child {proc.pid}: {exc}")
    lines.append(f"host log tail: {host.log_text()[-600:]!r}")
    return lines


# ---- a run's timeline --------------------------------------------------------------


def first(events: list[dict[str, Any]], kind: str, after: int = 0) -> int | None:
    """``at`` of the first trace event of ``kind`` at or after ``after`` (epoch ms)."""
    return next((int(e["at"]) for e in events if e["type"] == kind and int(e["at"]) >= after),
                None)


@dataclass
class Timeline:
    """One run's milestones, epoch ms (None when not seen), and where each comes from."""

    run_id: str
    enqueued: int | None = None  # store event "queued"
    claimed: int | None = None  # store event "starting" (the first claim)
    created: int | None = None  # the worker process's start (processes.json startTime)
    ready: int | None = None  # the worker's processes.json entry (recordedAt): booted, verified
    run_started: int | None = None  # trace
    node_started: int | None = None  # trace, the first node
    completed: int | None = None  # trace run_completed
    finished: int | None = None  # store event of the terminal queue state

    @property
    def standby(self) -> bool | None:
        """Was the worker started before its claim? (Never, since the zygote forks on claim.)"""
        if self.created is None or self.claimed is None:
            return None
        # Process start times tick every 10 ms (and the boot-clock fix is good
        # to 10 ms); a cold spawn forks after the claim.
        return self.created < self.claimed - 30


def timelines(project: Project, store: Store, ids: list[str]) -> list[Timeline]:
    seen: dict[str, Timeline] = {run_id: Timeline(run_id) for run_id in ids}
    for event in all_events(store):
        t = seen.get(event.run_id)
        if t is None:
            continue
        if event.type == "queued" and t.enqueued is None:
            t.enqueued = event.at
        elif event.type == "starting" and t.claimed is None:
            t.claimed = event.at
        elif event.type in TERMINAL and t.finished is None:
            t.finished = event.at
    offset_ms = boot_clock_offset_s() * 1000
    for run_id, t in seen.items():
        entries = [e for e in project.state_processes(run_id) if e.get("role") == "worker"]
        if entries:
            entry = min(entries, key=lambda e: int(e["recordedAt"]))
            t.ready = int(entry["recordedAt"])
            t.created = round(float(entry["startTime"]) * 1000 + offset_ms)
        events = project.events(run_id)
        t.run_started = first(events, "run_started")
        t.node_started = first(events, "node_started")
        t.completed = first(events, "run_completed")
    return [seen[run_id] for run_id in ids]


def span(items: list[Timeline], a: str, b: str, where: Callable[[Timeline], bool] | None = None
         ) -> list[float]:
    """``b - a`` (ms) for every timeline that has both (and passes ``where``)."""
    out: list[float] = []
    for t in items:
        x, y = getattr(t, a), getattr(t, b)
        if x is not None and y is not None and (where is None or where(t)):
            out.append(float(y - x))
    return out


def is_standby(t: Timeline) -> bool:
    return t.standby is True


def is_cold(t: Timeline) -> bool:
    return t.standby is False


def comma_words(text: str) -> list[str]:
    """An option's comma-separated list."""
    return [x.strip() for x in text.split(",") if x.strip()]


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def finish_bench(projects: list[Project], base: Path, *, keep: bool, began: float,
                 leftover: int = 0) -> None:
    """The end of every bench: clean up its projects, its directory, and say so."""
    for project in projects:
        try:
            leftover += project.cleanup()
        except Exception as exc:  # report, and go on cleaning the others
            print(f"  ! clean-up of {project.root}: {exc}")
    if keep:
        print(f"\nkept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nleftover processes killed at the end: {leftover}; load average now"
          f" {load_average()}; bench took {time.monotonic() - began:.0f} s")
