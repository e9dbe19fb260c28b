"""Host benchmark (issue 4): real ``pi-workflows host`` processes, figures only.

Measured against real subprocesses in a temporary project and
``PI_WORKFLOWS_HOME`` (never ``~/.pi``), with the product's default lease,
renewal and poll settings:

1. Worker start-up: spawn of the real worker (``--standby``, as the host
   starts it) until it is booted and waits for a claim; its RSS/USS; a bare
   interpreter and the worker's imports for reference.
2. Throughput: ``--runs`` detached runs of a ``--nodes``-node compute chain
   through one host, per ``--concurrency`` and per ``--fsync`` policy
   (runs/s, nodes/s, and where a run's time goes).
3. Latency queued -> first ``node_started`` with the host idle (one run at a
   time, the host's standby worker booted), split into wake + claim,
   hand-off, worker start-up left on the hot path, bundle creation and
   engine start.
4. Recovery: ``--recovery-runs`` runs held in a blocking node, ``kill -9`` of
   the host, a new host started at once, (a) with the workers free to park
   (``PR_SET_PDEATHSIG``) and (b) with them frozen so the new host must reap
   them and take their claims over; seconds until every run has a
   ``run_resumed`` written after the kill and until its node runs again, and
   which queue transitions moved the runs.
5. Memory: RSS/USS of the workers blocked in that node and of the idle
   standby; host RSS idle and with ``--recovery-runs`` workers.

Runs are enqueued in-process (``prepare_run`` + ``Store.enqueue_detached``)
and the host is poked through its wakeup socket, as ``run --detach`` does.
Timestamps are epoch ms on one clock: the bundle's ``at``, the store's
event ``at``, ``processes.json``'s ``recordedAt`` and the host log's
millisecond time. Nothing is asserted; every wait has a deadline and a
timed-out wait is printed, not raised. Every host started here is stopped
(SIGTERM, SIGKILL if needed) and any process left with this project's run
marker is killed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.clock import now_ms
from pi_workflows.protocol.discovery import Catalog, discover_for
from pi_workflows.protocol.launch import prepare_run
from pi_workflows.protocol.settings import load_settings, project_key, resolve_paths
from pi_workflows.protocol.store import TERMINAL_STATES, QueueRow, RunEvent, Store, open_store
from pi_workflows.protocol.wakeup import poke
from pi_workflows.supervisor.reaper import find_orphans, kill_processes

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

SPAWN_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \S+\s+host\[\d+\] "
                      r"run (\S+) -> worker pid (\d+)")
STARTUP_RE = re.compile(r"reaped (\d+) orphan process\(es\); took over (\d+) run\(s\)")
MB = 1024 * 1024
PROJECTS: list[Project] = []  # every project made here, for the final clean-up


# ---- small helpers -----------------------------------------------------------


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


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """The predicate's first truthy value, or None once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def log_ms(stamp: str) -> int:
    """The host log's local ``YYYY-MM-DD HH:mm:ss.SSS`` as epoch ms."""
    return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp() * 1000)


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


def children(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children())
    except psutil.Error:
        return []


def all_events(store: Store, after: int = 0) -> list[RunEvent]:
    out: list[RunEvent] = []
    while True:
        batch = store.events_since(after, limit=1000)
        if not batch:
            return out
        out.extend(batch)
        after = batch[-1].seq


def trace(runs_dir: Path, run_id: str) -> list[dict[str, Any]]:
    return list(Bundle(runs_dir, run_id).scan().events)


def worker_recorded_at(runs_dir: Path, run_id: str) -> list[int]:
    """``recordedAt`` of every worker entry in the run's ``processes.json``."""
    entries = Bundle(runs_dir, run_id).processes().get("processes", [])
    return sorted(int(e["recordedAt"]) for e in entries if e.get("role") == "worker")


def first(events: list[dict[str, Any]], kind: str, after: int = 0) -> int | None:
    return next((int(e["at"]) for e in events if e["type"] == kind and int(e["at"]) >= after),
                None)


# ---- a project with its hosts ---------------------------------------------------


@dataclass
class HostProc:
    proc: subprocess.Popen[bytes]
    log: Path
    started_s: float  # spawn -> "took over" banner

    @property
    def pid(self) -> int:
        return self.proc.pid

    def banner(self) -> tuple[int, int] | None:
        match = STARTUP_RE.search(self.log.read_text(errors="replace"))
        return (int(match[1]), int(match[2])) if match else None


class Project:
    def __init__(self, base: Path, name: str, home: Path, fsync: str) -> None:
        self.root = base / name
        self.root.mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PI_WORKFLOWS_")}
        self.env.update({"PI_WORKFLOWS_HOME": str(home), "PI_WORKFLOWS_FSYNC": fsync})
        self.settings = load_settings(home=home, fsync=fsync)
        self.paths = resolve_paths(self.settings, self.root)
        self.hosts: list[HostProc] = []
        self._catalog: Catalog | None = None
        PROJECTS.append(self)

    def write_workflow(self, name: str, body: str) -> None:
        path = self.root / ".pi" / "workflows" / f"{name}.workflow.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
        self._catalog = None

    def store(self) -> Store:
        return open_store(self.settings, self.paths.store_file)

    def start_host(self, concurrency: int, log: str) -> HostProc:
        path = self.root / log
        begin = time.monotonic()
        with open(path, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pi_workflows", "host", "--project", str(self.root),
                 "--concurrency", str(concurrency)],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        host = HostProc(proc, path, 0.0)
        self.hosts.append(host)
        wait_for(lambda: b"took over" in path.read_bytes() or proc.poll() is not None, 60)
        host.started_s = time.monotonic() - begin
        if proc.poll() is not None or b"took over" not in path.read_bytes():
            raise RuntimeError(f"host did not start:\n{path.read_text()[-3000:]}")
        return host

    def stop_host(self, host: HostProc, timeout: float = 30.0) -> tuple[float, int | None]:
        """SIGTERM (drain); SIGKILL of the group after ``timeout``. Seconds and exit code."""
        begin = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            host.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = host.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(host.pid, signal.SIGKILL)
            host.proc.wait()
            code = None
        return time.monotonic() - begin, code

    def enqueue(self, workflow: str, count: int, store: Store) -> list[tuple[str, int]]:
        """``count`` detached runs; (run id, epoch ms just before its enqueue). Pokes once."""
        if self._catalog is None:
            self._catalog = discover_for(self.settings, self.root)
        out = []
        for _ in range(count):
            prepared = prepare_run(self._catalog, workflow, {})
            at = now_ms()
            store.enqueue_detached(prepared.run_id, prepared.source, prepared.input)
            out.append((prepared.run_id, at))
        poke(self.paths.state_dir)
        return out

    def spawn_log(self) -> dict[str, list[tuple[int, int]]]:
        """run id -> [(epoch ms, worker pid)] from every host log of this project."""
        found: dict[str, list[tuple[int, int]]] = {}
        for host in self.hosts:
            for line in host.log.read_text(errors="replace").splitlines():
                match = SPAWN_RE.match(line)
                if match:
                    found.setdefault(match[2], []).append((log_ms(match[1]), int(match[3])))
        return found

    def cleanup(self) -> int:
        """Kill every host still alive and every process carrying this project's marker."""
        for host in self.hosts:
            if host.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(host.pid, signal.SIGKILL)
                host.proc.wait()
        return int(kill_processes(find_orphans(self.paths.runs_dir, project_key(self.root),
                                               set()), timeout=5))


@contextlib.contextmanager
def host_running(project: Project, concurrency: int, log: str) -> Iterator[HostProc]:
    host = project.start_host(concurrency, log)
    try:
        yield host
    finally:
        if host.proc.poll() is None:
            seconds, code = project.stop_host(host)
            if code != 0:
                print(f"    ! host {log}: SIGTERM stop took {seconds:.1f} s, exit {code}")


def diagnose(project: Project, host: HostProc, rows: list[QueueRow]) -> list[str]:
    """What the unsettled runs and the host's children look like (printed on a timeout)."""
    lines = [f"{r.run_id} queue={r.state} runner={r.runner_id} bundle="
             f"{Bundle(project.paths.runs_dir, r.run_id).exists()}"
             for r in rows if r.state not in TERMINAL_STATES][:10]
    for proc in children(host.pid):
        try:
            wchan = sorted({Path(f"/proc/{proc.pid}/task/{t.id}/wchan").read_text()
                            for t in proc.threads()})
            lines.append(f"child {proc.pid} {' '.join(proc.cmdline())!r} {proc.status()}"
                         f" cpu={sum(proc.cpu_times()[:2]):.2f}s wchan={wchan}")
        except (psutil.Error, OSError) as exc:
            lines.append(f"child {proc.pid}: {exc}")
    lines.append(f"host log tail: {host.log.read_text(errors='replace')[-600:]!r}")
    return lines


# ---- per-run timeline -------------------------------------------------------


@dataclass
class Timeline:
    """One run's milestones, epoch ms (None when not seen)."""

    run_id: str
    enqueued: int | None = None
    claimed: int | None = None  # the store's first "starting" event
    handed: int | None = None  # host log "run X -> worker pid N" (spawn or standby hand-off)
    created: int | None = None  # the worker process's create time (processes.json startTime)
    ready: int | None = None  # the worker's processes.json entry (recordedAt): booted, verified
    run_started: int | None = None
    node_started: int | None = None
    completed: int | None = None
    finished: int | None = None  # queue finished_at

    @property
    def standby(self) -> bool | None:
        """Was the worker a pre-booted standby (created before the claim)?"""
        if self.created is None or self.claimed is None:
            return None
        # create_time has clock-tick (10 ms) resolution; a cold spawn forks after the claim.
        return self.created < self.claimed - 20


def timelines(project: Project, store: Store, ids: list[str],
              enqueued: dict[str, int] | None = None) -> list[Timeline]:
    claimed: dict[str, int] = {}
    for event in all_events(store):
        if event.type == "starting":
            claimed.setdefault(event.run_id, event.at)
    handed = project.spawn_log()
    out = []
    for run_id in ids:
        t = Timeline(run_id, (enqueued or {}).get(run_id), claimed.get(run_id))
        if run_id in handed:
            t.handed = handed[run_id][0][0]
        entries = [e for e in Bundle(project.paths.runs_dir, run_id).processes()
                   .get("processes", []) if e.get("role") == "worker"]
        if entries:
            entry = min(entries, key=lambda e: int(e["recordedAt"]))
            t.ready = int(entry["recordedAt"])
            t.created = int(float(entry["startTime"]) * 1000)
        events = trace(project.paths.runs_dir, run_id)
        t.run_started = first(events, "run_started")
        t.node_started = first(events, "node_started")
        t.completed = first(events, "run_completed")
        row = store.get(run_id)
        t.finished = row.finished_at if row is not None else None
        out.append(t)
    return out


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


# ---- 1. throughput -----------------------------------------------------------


def throughput(base: Path, home: Path, fsync: str, concurrency: int, runs: int,
               nodes: int, timeout: float) -> dict[str, Any]:
    project = Project(base, f"tp-{fsync}-c{concurrency}", home, fsync)
    project.write_workflow("chain", CHAIN.format(nodes=nodes))
    result: dict[str, Any] = {"fsync": fsync, "concurrency": concurrency, "runs": runs}
    with project.store() as store, host_running(project, concurrency, "host.log") as host:
        time.sleep(0.3)
        result["host_idle_rss"] = rss(host.pid)
        t0 = now_ms()
        enqueued = project.enqueue("chain", runs, store)
        result["enqueue_s"] = (now_ms() - t0) / 1000
        host_peak, worker_peak, most = 0, 0, 0
        deadline = time.monotonic() + max(timeout, runs * 2.0)
        rows: list[QueueRow] = []
        while True:
            rows = store.list_runs(limit=runs + 100)
            settled = [r for r in rows if r.state in TERMINAL_STATES]
            host_peak = max(host_peak, rss(host.pid) or 0)
            kids = children(host.pid)
            most = max(most, len(kids))
            for proc in kids:
                worker_peak = max(worker_peak, (rss(proc.pid) or 0))
            if len(settled) >= runs:
                break
            if time.monotonic() > deadline:
                result["timeout"] = f"{len(settled)}/{runs} settled"
                result["diag"] = diagnose(project, host, rows)
                break
            time.sleep(0.2)
        result.update(host_peak_rss=host_peak, worker_peak_rss=worker_peak, most_children=most)
        done = [r for r in rows if r.state == "done"]
        result["not_done"] = {r.run_id: r.state for r in rows if r.state != "done"}
        end = max((r.finished_at or 0) for r in rows) if rows else t0
        elapsed = max(1, end - t0) / 1000
        result.update(elapsed_s=elapsed, runs_per_s=len(done) / elapsed,
                      nodes_per_s=len(done) * nodes / elapsed)
        result["timelines"] = timelines(project, store, [r for r, _ in enqueued],
                                        dict(enqueued))
    result["leftover"] = project.cleanup()
    return result


def print_throughput(r: dict[str, Any], nodes: int) -> None:
    tl: list[Timeline] = r["timelines"]
    print(f"  fsync={r['fsync']:<5} concurrency={r['concurrency']}: {r['runs']} runs x {nodes}"
          f" nodes in {r['elapsed_s']:.1f} s -> {r['runs_per_s']:.2f} runs/s,"
          f" {r['nodes_per_s']:.1f} nodes/s (enqueue took {r['enqueue_s']:.2f} s)")
    if r.get("timeout") or r["not_done"]:
        print(f"    ! timeout={r.get('timeout')} not done={list(r['not_done'].items())[:5]}")
        for line in r.get("diag", []):
            print(f"    ! {line}")
    warm = sum(map(is_standby, tl))
    print(f"    per run: claim -> done          {summary(span(tl, 'claimed', 'finished'))}")
    print(f"      claim -> worker ready         {summary(span(tl, 'claimed', 'ready'))}")
    print(f"      hand-off -> worker ready      {summary(span(tl, 'handed', 'ready'))}"
          f"  ({warm}/{len(tl)} workers were spawned as the standby before their claim)")
    print(f"      first node_started -> run_completed ({nodes} nodes)"
          f" {summary(span(tl, 'node_started', 'completed'))}")
    print(f"    host RSS idle {r['host_idle_rss'] / MB:.1f} MB, peak {r['host_peak_rss'] / MB:.1f}"
          f" MB; most host children at once {r['most_children']} (workers + standby);"
          f" worker RSS peak seen {r['worker_peak_rss'] / MB:.1f} MB")


# ---- 2. latency ----------------------------------------------------------------


def _idle_with_standby(host: HostProc) -> bool:
    """Only one child, the booted standby worker (its title says so)."""
    kids = children(host.pid)
    if len(kids) != 1:
        return False
    try:
        return " ".join(kids[0].cmdline()).strip() == "pi-workflows worker standby"
    except psutil.Error:
        return False


def _settled(store: Store, run_id: str) -> bool:
    row = store.get(run_id)
    return row is not None and row.state in TERMINAL_STATES


def latency(base: Path, home: Path, fsync: str, samples: int, nodes: int,
            timeout: float) -> dict[str, Any]:
    project = Project(base, f"lat-{fsync}", home, fsync)
    project.write_workflow("chain", CHAIN.format(nodes=nodes))
    result: dict[str, Any] = {"samples": samples, "no_standby_seen": 0, "unfinished": 0}
    with project.store() as store, host_running(project, 2, "host.log") as host:
        enqueued: list[tuple[str, int]] = []
        for _ in range(samples):
            # The host is idle: nothing queued, no run worker alive, its standby booted.
            if not wait_for(lambda: _idle_with_standby(host), 10, 0.01):
                result["no_standby_seen"] += 1
            run_id, at = project.enqueue("chain", 1, store)[0]
            enqueued.append((run_id, at))
            if not wait_for(functools.partial(_settled, store, run_id), timeout, 0.02):
                result["unfinished"] += 1
        result["timelines"] = timelines(project, store, [r for r, _ in enqueued],
                                        dict(enqueued))
    project.cleanup()
    return result


def print_latency(r: dict[str, Any], nodes: int, boot: list[float]) -> None:
    tl: list[Timeline] = r["timelines"]
    total = span(tl, "enqueued", "node_started")
    print(f"  queued -> first node_started     {summary(total)}")
    print(f"    enqueue -> claimed (wake+claim) {summary(span(tl, 'enqueued', 'claimed'))}")
    print(f"    claimed -> handed to a worker   {summary(span(tl, 'claimed', 'handed'))}")
    print(f"    handed -> worker ready          {summary(span(tl, 'handed', 'ready'))}"
          "   <- worker start-up on the hot path")
    print(f"    worker ready -> run_started     {summary(span(tl, 'ready', 'run_started'))}")
    print(f"    run_started -> node_started     {summary(span(tl, 'run_started', 'node_started'))}")
    warm = sum(map(is_standby, tl))
    print(f"  the pre-booted standby worker took {warm}/{len(tl)} runs"
          f" ({r['no_standby_seen']} enqueued before a booted standby was seen)")
    hot = span(tl, "handed", "ready")
    if total and hot:
        share = statistics.median(hot) / statistics.median(total)
        print(f"  worker start-up on the hot path is {share:.0%} of the median latency", end="")
        if boot:
            print(f";\n  a cold worker boot ([1]) is p50 {statistics.median(boot):.0f} ms,"
                  " which the idle host's standby worker takes off this path")
        else:
            print()
    print(f"  queued -> done ({nodes} nodes)         {summary(span(tl, 'enqueued', 'finished'))}")
    if r["unfinished"]:
        print(f"    ! {r['unfinished']} of {r['samples']} runs did not finish in time")


# ---- 3. recovery and RSS ------------------------------------------------------


def _held(project: Project, ids: list[str], since: int) -> bool:
    """Every run has a ``node_started`` at or after ``since``."""
    return all(first(trace(project.paths.runs_dir, r), "node_started", since) is not None
               for r in ids)


def _resumed_at(project: Project, ids: list[str], since: int) -> dict[str, int]:
    out = {}
    for run_id in ids:
        at = first(trace(project.paths.runs_dir, run_id), "run_resumed", since)
        if at is not None:
            out[run_id] = at
    return out


def _mechanism(store: Store, after_seq: int, ids: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in all_events(store, after_seq):
        if event.run_id not in ids:
            continue
        key = event.type
        if event.type == "starting":
            key = f"claimed from {event.payload.get('from')}"
        elif event.type == "claim_taken_over":
            key = f"claim_taken_over ({event.payload.get('reason')})"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _run_workers(project: Project, ids: list[str], host: HostProc) -> dict[int, str]:
    """pid -> run id of the live workers of ``host`` (from processes.json)."""
    kids = {p.pid for p in children(host.pid)}
    out = {}
    for run_id in ids:
        for entry in Bundle(project.paths.runs_dir, run_id).processes().get("processes", []):
            if entry.get("role") == "worker" and entry.get("pid") in kids:
                out[int(entry["pid"])] = run_id
    return out


def _kill_and_recover(project: Project, store: Store, host: HostProc, ids: list[str],
                      concurrency: int, log: str, freeze: bool,
                      timeout: float) -> tuple[HostProc, dict[str, Any]]:
    out: dict[str, Any] = {}
    before = store.last_event_seq()
    workers = _run_workers(project, ids, host)
    out["workers"] = len(workers)
    if freeze:
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)  # hung workers: they cannot park when the host dies
    kill_at = now_ms()
    os.kill(host.pid, signal.SIGKILL)
    host.proc.wait()
    new = project.start_host(concurrency, log)
    out["host_startup_s"] = new.started_s
    out["banner"] = new.banner()
    resumed = wait_for(lambda: len(r := _resumed_at(project, ids, kill_at)) == len(ids) and r,
                       timeout, 0.05)
    out["resumed_s"] = (max(resumed.values()) - kill_at) / 1000 if resumed else None
    out["resumed_first_s"] = (min(resumed.values()) - kill_at) / 1000 if resumed else None
    held = wait_for(lambda: _held(project, ids, kill_at), timeout, 0.05)
    out["running_s"] = (max(first(trace(project.paths.runs_dir, r), "node_started", kill_at)
                            or 0 for r in ids) - kill_at) / 1000 if held else None
    runner = re.search(r"runner (\S+) \(pid", new.log.read_text(errors="replace"))
    out["owned_by_new_host"] = sum(
        (r := store.get(i)) is not None and runner is not None and r.runner_id == runner[1]
        and r.state == "running" for i in ids)
    out["old_workers_alive"] = sum(psutil.pid_exists(p) and psutil.Process(p).status()
                                   != psutil.STATUS_ZOMBIE for p in workers)
    out["mechanism"] = _mechanism(store, before, set(ids))
    parked = [e.at for e in all_events(store, before) if e.type == "parked" and e.run_id in ids]
    out["parked"] = (len(parked), (max(parked) - kill_at) / 1000 if parked else None)
    return new, out


def recovery(base: Path, home: Path, fsync: str, runs: int, timeout: float) -> dict[str, Any]:
    project = Project(base, f"rec-{fsync}", home, fsync)
    project.write_workflow("hold", HOLD)
    out: dict[str, Any] = {"runs": runs}
    with project.store() as store:
        host = project.start_host(runs, "host1.log")
        time.sleep(1.0)  # let the standby boot: the idle figure includes it
        out["host_idle_rss"] = rss(host.pid)
        t0 = now_ms()
        ids = [r for r, _ in project.enqueue("hold", runs, store)]
        ready = wait_for(lambda: _held(project, ids, 0), timeout, 0.05)
        out["ramp_s"] = (max(first(trace(project.paths.runs_dir, r), "node_started") or 0
                             for r in ids) - t0) / 1000 if ready else None
        time.sleep(0.5)
        workers = _run_workers(project, ids, host)
        samples = [s for pid in workers if (s := rss_uss(psutil.Process(pid))) is not None]
        out["worker_rss"] = [s[0] for s in samples]
        out["worker_uss"] = [s[1] for s in samples]
        others = [p for p in children(host.pid) if p.pid not in workers]
        out["standby"] = [s for p in others if (s := rss_uss(p)) is not None]
        out["host_loaded_rss"] = rss(host.pid)
        if not ready:
            out["error"] = "not every run reached the blocking node"
            project.cleanup()
            return out
        host, out["at_once"] = _kill_and_recover(project, store, host, ids, runs, "host2.log",
                                                 False, timeout)
        host, out["frozen"] = _kill_and_recover(project, store, host, ids, runs, "host3.log",
                                                True, timeout)
        (project.root / "release").write_text("go\n")
        done = wait_for(lambda: all((r := store.get(i)) is not None and r.state == "done"
                                    for i in ids), timeout, 0.05)
        out["finished"] = bool(done)
        out["final_states"] = sorted({s.state for i in ids if (s := store.get(i)) is not None})
        out["stop"] = project.stop_host(host)
    out["leftover"] = project.cleanup()
    return out


def _secs(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "TIMEOUT"


def print_recovery(r: dict[str, Any]) -> None:
    print(f"  {r['runs']} runs enqueued -> all in their node: {_secs(r.get('ramp_s'))}"
          " (cold workers booting concurrently)")
    if r.get("error"):
        print(f"  ! {r['error']}")
        return
    for key, title in (("at_once", "(a) kill -9, new host started at once"),
                       ("frozen", "(b) workers frozen (SIGSTOP) so they cannot park, kill -9,"
                                  " new host at once")):
        x = r[key]
        print(f"  {title}:")
        banner = x["banner"] or ("?", "?")
        print(f"    new host start-up (spawn -> ready banner) {x['host_startup_s']:.2f} s;"
              f" it reaped {banner[0]} orphan process(es), took over {banner[1]} run(s)")
        print(f"    kill -> first run_resumed {_secs(x['resumed_first_s'])}, all run_resumed"
              f" {_secs(x['resumed_s'])}, all back in their node {_secs(x['running_s'])}")
        print(f"    running under the new host: {x['owned_by_new_host']}/{r['runs']};"
              f" old workers still alive: {x['old_workers_alive']}/{x['workers']}")
        if x["parked"][0]:
            print(f"    {x['parked'][0]} run(s) parked by their own workers after the host died"
                  f" (PR_SET_PDEATHSIG), the last {_secs(x['parked'][1])} after the kill")
        mech = ", ".join(f"{k} x{v}" for k, v in sorted(x["mechanism"].items()))
        print(f"    queue events after the kill: {mech}")
    stop = r["stop"]
    print(f"  released: all done={r.get('finished')} final states={r.get('final_states')};"
          f" SIGTERM stop of the last host {stop[0]:.2f} s, exit {stop[1]}")


def print_memory(r: dict[str, Any], runs: int) -> None:
    print(f"  worker RSS {summary([v / MB for v in r.get('worker_rss', [])], 'MB', 1)}")
    print(f"  worker USS {summary([v / MB for v in r.get('worker_uss', [])], 'MB', 1)}")
    for rss_b, uss_b in r.get("standby", []):
        print(f"  idle standby worker RSS {rss_b / MB:.1f} MB, USS {uss_b / MB:.1f} MB")
    if r.get("host_idle_rss") and r.get("host_loaded_rss"):
        print(f"  host RSS idle {r['host_idle_rss'] / MB:.1f} MB, with {runs} workers"
              f" {r['host_loaded_rss'] / MB:.1f} MB")


# ---- worker start-up ------------------------------------------------------------


def boot_reference(reps: int) -> dict[str, list[float]]:
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import pi_workflows.worker.process'":
            [sys.executable, "-c", "import pi_workflows.worker.process"],
    }
    out: dict[str, list[float]] = {}
    for label, argv in commands.items():
        times = []
        for _ in range(reps):
            begin = time.perf_counter()
            subprocess.run(argv, check=False, stdout=subprocess.DEVNULL)
            times.append((time.perf_counter() - begin) * 1000)
        out[label] = times
    return out


def worker_boot(base: Path, home: Path, reps: int) -> dict[str, Any]:
    """Spawn -> booted of the real worker in ``--standby`` mode, as the host starts it.

    Booted = its title turns to ``pi-workflows worker standby``: interpreter,
    imports, settings, logging, store open; only the claim check and the
    ``processes.json`` write remain (the hand-off figure in [2]/[3]).
    """
    project = Project(base, "boot", home, "node")
    times: list[float] = []
    mem: list[tuple[int, int]] = []
    for _ in range(reps):
        begin = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pi_workflows.worker", "--project", str(project.root),
             "--runner", "bench-boot", "--parent-pid", str(os.getpid()), "--standby"],
            env=project.env, cwd=project.root, stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        handle = psutil.Process(proc.pid)

        def booted(handle: psutil.Process = handle) -> bool:
            try:
                return " ".join(handle.cmdline()).strip() == "pi-workflows worker standby"
            except psutil.Error:
                return False
        if wait_for(booted, 30, 0.002):
            times.append((time.perf_counter() - begin) * 1000)
            if (sample := rss_uss(handle)) is not None:
                mem.append(sample)
        assert proc.stdin is not None
        proc.stdin.close()  # EOF: "not needed", the standby exits
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"boot_ms": times, "rss": [m[0] for m in mem], "uss": [m[1] for m in mem],
            "reference": boot_reference(max(3, reps // 2))}


def print_boot(r: dict[str, Any]) -> None:
    print(f"  worker spawn -> booted (standby)  {summary(r['boot_ms'])}")
    print(f"  booted idle worker RSS {summary([v / MB for v in r['rss']], 'MB', 1)}")
    print(f"  booted idle worker USS {summary([v / MB for v in r['uss']], 'MB', 1)}")
    for label, times in r["reference"].items():
        print(f"  reference: {label:<46} {summary(times)}")


# ---- main ----------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _words(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench host", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=60,
                        help="runs per throughput setting (issue 4 asks for 200)")
    parser.add_argument("--nodes", type=int, default=10, help="compute nodes per run")
    parser.add_argument("--concurrency", type=_ints, default=[2, 4],
                        help="comma list of host concurrency levels (default 2,4)")
    parser.add_argument("--fsync", type=_words, default=["node", "never"],
                        help="comma list of fsync policies for throughput (default node,never)")
    parser.add_argument("--compare-runs", type=int, default=30,
                        help="runs per throughput setting for the fsync policies after the first")
    parser.add_argument("--boot-runs", type=int, default=10)
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--recovery-runs", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of each wait (s)")
    parser.add_argument("--skip", type=_words, default=[],
                        help="phases to skip: boot,throughput,latency,recovery")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-host-bench-"))
    home = base / "home"
    print(f"host bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average"
          f" {_load()}; dir {base}; default lease/renew/poll settings")
    boot: list[float] = []
    try:
        if "boot" not in args.skip:
            print(f"\n[1] worker start-up, {args.boot_runs} spawns one at a time, no host running")
            booted = worker_boot(base, home, args.boot_runs)
            print_boot(booted)
            boot = booted["boot_ms"]
        if "throughput" not in args.skip:
            for i, fsync in enumerate(args.fsync):
                runs = args.runs if i == 0 else args.compare_runs
                print(f"\n[2] throughput: {runs} detached runs of a {args.nodes}-node compute"
                      f" chain, fsync={fsync}")
                for concurrency in args.concurrency:
                    print_throughput(throughput(base, home, fsync, concurrency, runs,
                                                args.nodes, args.timeout), args.nodes)
        if "latency" not in args.skip:
            print(f"\n[3] latency, host idle (concurrency 2), {args.latency_runs} runs one at"
                  " a time, fsync=node (nearest-rank percentiles)")
            print_latency(latency(base, home, "node", args.latency_runs, args.nodes,
                                  args.timeout), args.nodes, boot)
        if "recovery" not in args.skip:
            print(f"\n[4] recovery: {args.recovery_runs} runs blocked in a node, host at"
                  f" concurrency {args.recovery_runs}, kill -9 of the host, fsync=node")
            rec = recovery(base, home, "node", args.recovery_runs, args.timeout)
            print_recovery(rec)
            print(f"\n[5] memory with {len(rec.get('worker_rss', []))} run workers blocked in"
                  " a node (psutil)")
            print_memory(rec, args.recovery_runs)
    finally:
        leftover = 0
        for project in PROJECTS:
            try:
                leftover += project.cleanup()
            except Exception as exc:  # report, and go on cleaning the others
                print(f"  ! clean-up of {project.root}: {exc}")
        if args.keep:
            print(f"\nkept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
        print(f"\nleftover processes killed at the end: {leftover}; load average now"
              f" {_load()}; bench took {time.monotonic() - began:.0f} s")
    return 0
