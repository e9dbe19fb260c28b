"""Sync benchmark (issue 8): catch-up on a big store, and feed -> ``sync --follow`` latency.

(a) ``sync`` time with ``--runs`` runs in the store (10,000 by default) of
which ``--changed`` (100) changed since the session's watermark: in-process
(``supervisor.session.sync.take``, then ``delivered``: what the command does around
its printing) and end to end (``pi-workflows sync --json`` as a subprocess,
next to ``pi-workflows paths --json``, which opens no store: the start-up
of the interpreter and the CLI).

How the store is built: ``--runs`` minus ``--changed`` old runs are written
in-process with the store API as a history without bundles (a fake source
path; ``insert_and_claim``, ``mark_running`` and ``finish``, so each has the
four feed events a real run has: ``queued``, ``starting``, ``running``,
``done``). One in 500 is left parked and one in 500 waiting at a
checkpoint (the first sync shows those), one in 50 failed and one in 50
cancelled. Filling uses ``synchronous=OFF``: it is not what is measured.
Then every session timed here syncs once (its first sync, timed too), and
then the ``--changed`` runs of a three-node compute workflow are executed
in-process (``worker.runner.execute_claim``: real bundles, which the sync
reads). Each sample uses its own session, so every sample catches up on
the same changes.

(b) Latency from a feed append to the line a running ``pi-workflows sync
--follow --session S`` subprocess prints, read through a pipe with a
thread that stamps each line: (b1) one store event appended in-process to
an existing run of the big store (``append_run_event``); (b2) a run
finishing under a real ``pi-workflows host`` in a small project, from the
``at`` of its ``done`` feed event to its ``completed`` line. Before each
sample the bench waits a random fraction of the follower's poll interval,
so the samples do not fall in step with it. Also: the CPU an idle follower
uses.

Figures only; nothing is asserted. Every wait has a deadline, and a wait
that runs out is printed, not raised. Followers and the host are stopped,
marked leftovers killed and the temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil
from pi_workflows.protocol.definitions.discovery import discover_for
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.supervisor.cli.commands.sync import FOLLOW_POLL_S
from pi_workflows.supervisor.session import sync as catchup
from pi_workflows.supervisor.session.launch import prepare_run
from pi_workflows.worker.runner import execute_claim

from e2e.harness import HarnessError, Project, clean_env

from .host_common import finish_bench, load_average, summary

TINY = """
from pi_workflows import compute, define_workflow, edge

workflow = define_workflow(
    start_at="plan",
    nodes=[compute("plan", lambda ctx: {"n": 3}),
           compute("work", lambda ctx: {"done": ctx.outputs["plan"]["n"]}),
           compute("report", lambda ctx: {"summary": "three steps"})],
    edges=[edge("plan", "work"), edge("work", "report")],
)
"""
OLD = RunSource("bench-old", "/nonexistent/bench-old.workflow.py", "ab" * 32,
                "sha256:" + "0" * 64)
RUNNER = "bench-runner"
PROJECTS: list[Project] = []



def _project(base: Path, name: str, home: Path) -> Project:
    root = base / name
    root.mkdir(parents=True)
    project = Project(root, clean_env(home))
    PROJECTS.append(project)
    return project


# ---- a follower's output, stamped as it arrives --------------------------------------


class Stamped:
    """Lines of a child's stdout with the wall-clock ms and monotonic s of their arrival."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[tuple[float, float, str] | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                self._lines.put((time.time() * 1000, time.perf_counter(), line.rstrip("\n")))
        self._lines.put(None)

    def until(self, match: Callable[[str], bool],
              timeout: float) -> tuple[float, float, str] | None:
        """The first line (from now on) that ``match``es, or None after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = self._lines.get(timeout=left)
            except queue.Empty:
                return None
            if item is None:
                self._lines.put(None)
                return None
            if match(item[2]):
                return item
        return None

    def drain(self, quiet_s: float, timeout: float) -> int:
        """Read until nothing came for ``quiet_s`` (at most ``timeout`` s); lines read."""
        count, deadline = 0, time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                item = self._lines.get(timeout=quiet_s)
            except queue.Empty:
                return count
            if item is None:
                self._lines.put(None)
                return count
            count += 1
        return count


@contextlib.contextmanager
def follower(project: Project, session: str) -> Iterator[tuple[subprocess.Popen[str], Stamped]]:
    """``pi-workflows sync --follow --session S`` with SIGINT at its default (Ctrl-C)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_workflows", "sync", "--follow", "--session", session,
         "--project", str(project.root)], env=project.env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    try:
        yield proc, Stamped(proc.stdout)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # Ctrl-C: exits 0
            try:
                code: int | None = proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = None
            if code != 0:
                print(f"    ! the follower of {session} exited {code} on SIGINT")


# ---- (a) building the store and timing sync ------------------------------------------


def fill(store: Store, count: int) -> dict[str, int]:
    """``count`` old runs without bundles, each with the feed events of its ending."""
    kinds = {"completed": 0, "parked": 0, "waiting": 0, "failed": 0, "cancelled": 0}
    for i in range(count):
        run_id = f"old-{i:06d}"
        if i % 50 == 3:
            store.enqueue_detached(run_id, OLD, {"task": "old"})
            store.cancel(run_id)
            kinds["cancelled"] += 1
            continue
        claim = store.insert_and_claim(run_id, OLD, {"task": "old"}, RUNNER)
        store.mark_running(run_id, claim.token)
        if i % 500 == 0:
            store.park(run_id, claim.token)
            kinds["parked"] += 1
        elif i % 500 == 1:
            store.finish(run_id, claim.token, "waiting")
            kinds["waiting"] += 1
        elif i % 50 == 2:
            store.fail(run_id, claim.token, "node_error", "node 'work': RuntimeError: no luck")
            kinds["failed"] += 1
        else:
            store.finish(run_id, claim.token, "completed")
            kinds["completed"] += 1
    return kinds


def run_changed(project: Project, store: Store, count: int) -> list[str]:
    """``count`` runs of ``tiny`` executed here, to completion, with real bundles."""
    catalog = discover_for(project.settings, project.root)
    ids = []
    for _ in range(count):
        prepared = prepare_run(catalog, "tiny", {})
        store.enqueue_detached(prepared.run_id, prepared.source, prepared.input)
        claim = store.claim_by_id(prepared.run_id, RUNNER)
        execute_claim(store, claim, runs_dir=project.paths.runs_dir, project_dir=project.root,
                      fsync="never")
        ids.append(prepared.run_id)
    return ids


def timed_sync(store: Store, runs_dir: Path, session: str) -> tuple[float, float, int, int]:
    """(take ms, delivered ms, runs shown, notifications shown) for one sync."""
    t0 = time.perf_counter()
    snapshot = catchup.take(store, runs_dir, session)
    t1 = time.perf_counter()
    catchup.delivered(store, snapshot)
    t2 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t1) * 1000, len(snapshot.runs), len(snapshot.notifications)


def _row(label: str, values: list[float], digits: int = 2) -> str:
    return f"    {label:<42} {summary(values, digits=digits)}"


def cli_ms(project: Project, *args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = project.cli(*args, timeout=60).stdout
    return (time.perf_counter() - t0) * 1000, out


@dataclass
class BigStore:
    """The big store of (a), built once: its project and what the build printed."""

    project: Project
    kinds: dict[str, int]
    filled_s: float
    ran_s: float
    events_before: int
    events_after: int
    first: list[tuple[float, float, int, int]]  # the first sync of every session


def build_big(base: Path, home: Path, runs: int, changed: int, sessions: list[str],
              notes: list[str]) -> BigStore:
    """``runs`` runs, of which ``changed`` changed after every session's first sync.

    ``notes`` sessions are also given 50 notifications each to deliver.
    """
    project = _project(base, "big", home)
    project.write_workflow("tiny", TINY)
    began = time.perf_counter()
    with Store(project.paths.store_file, synchronous="OFF") as filler:
        kinds = fill(filler, runs - changed)
    filled = time.perf_counter() - began
    runs_dir = project.paths.runs_dir
    with project.store() as store:
        events = store.last_event_seq()
        first = [timed_sync(store, runs_dir, s) for s in sessions + notes]
        began = time.perf_counter()
        ids = run_changed(project, store, changed)
        ran = time.perf_counter() - began
        for k, session in enumerate(notes):  # the per-call limit of notifications
            for j, run_id in enumerate(ids[:50]):
                store.add_notification(session, run_id, "report", 1000 * k + j, "final",
                                       {"message": f"note {j}", "workflow": "tiny"})
        after = store.last_event_seq()
    return BigStore(project, kinds, filled, ran, events, after, first)


def syncs(big: BigStore, sessions: list[str]) -> list[tuple[float, float, int, int]]:
    """One in-process sync per session: (take ms, delivered ms, runs, notifications)."""
    with big.project.store() as store:
        return [timed_sync(store, big.project.paths.runs_dir, s) for s in sessions]


def cli_syncs(project: Project, sessions: list[str]) -> tuple[list[float], set[int]]:
    """``pi-workflows sync --json`` once per session: (wall ms, runs shown)."""
    ends, counts = [], set()
    for session in sessions:
        ms, out = cli_ms(project, "sync", "--json", "--session", session)
        ends.append(ms)
        counts.add(len(json.loads(out)["runs"]))
    return ends, counts


def bench_sync(base: Path, home: Path, args: argparse.Namespace) -> Project:
    inproc = [f"inproc-{i:02d}" for i in range(args.samples)]
    cli = [f"cli-{i:02d}" for i in range(args.cli_samples)]
    notes = [f"notes-{i}" for i in range(args.note_sessions)]
    big = build_big(base, home, args.runs, args.changed, inproc + cli, notes)
    project, first = big.project, big.first
    print(f"  store: {args.runs - args.changed:,} old runs without bundles in"
          f" {big.filled_s:.1f} s ({', '.join(f'{v} {k}' for k, v in big.kinds.items())}),"
          f" {big.events_before:,} feed events")
    print(f"  then {args.changed} runs of a 3-node compute workflow executed in-process"
          f" ({big.ran_s:.1f} s, real bundles): {args.runs:,} runs,"
          f" {big.events_after:,} feed events")
    print(f"\n  first sync of a session ({len(first)} sessions; it shows"
          f" {first[0][2]} parked and waiting runs)")
    print(_row("take + delivered", [a + b for a, b, _, _ in first]))
    samples = syncs(big, inproc)
    shown = sorted({n for _, _, n, _ in samples})
    print(f"\n  sync with {args.changed} changed since the watermark, in-process"
          f" ({len(samples)} sessions; runs shown: {shown})")
    print(_row("take (read, watermark moved, leases)", [a for a, _, _, _ in samples]))
    print(_row("delivered (watermark confirmed)", [b for _, b, _, _ in samples]))
    print(_row("take + delivered", [a + b for a, b, _, _ in samples]))
    again = syncs(big, inproc)
    print("  the next sync of those sessions: nothing new (what one --follow poll costs)")
    print(_row("take + delivered", [a + b for a, b, _, _ in again]))
    noted = syncs(big, notes)
    if noted:
        print(f"  sync with {args.changed} changed and 50 notifications to deliver"
              f" ({len(noted)} sessions; shown {sorted({m for _, _, _, m in noted})})")
        print(_row("take", [a for a, _, _, _ in noted]))
        print(_row("delivered (each one marked)", [b for _, b, _, _ in noted]))
    paths = [cli_ms(project, "paths", "--json")[0] for _ in cli]
    ends, counts = cli_syncs(project, cli)
    print(f"\n  end to end, one subprocess each ({len(cli)} sessions;"
          f" runs shown: {sorted(counts)})")
    print(_row("pi-workflows sync --json", ends, 0))
    print(_row("pi-workflows paths --json", paths, 0) + "  <- start-up, no store")
    return project


# ---- (b) feed append -> a line of `sync --follow` --------------------------------------


def _line_of(run_id: str, word: str = "") -> Callable[[str], bool]:
    """A sync line about ``run_id`` (that says ``word``)."""
    return lambda line: line.startswith(run_id) and word in line


def latency_appended(project: Project, args: argparse.Namespace) -> None:
    """(b1): one ``append_run_event`` on an old run -> that run's line."""
    targets = [f"old-{i:06d}" for i in range(5, 5 + 50 * args.latency_samples, 50)]
    lat: list[float] = []
    missed = 0
    with project.store() as store, follower(project, "follow-append") as (proc, lines):
        if lines.until(lambda line: True, args.timeout) is None:
            print("    ! the follower printed nothing")
            return
        lines.drain(0.5, args.timeout)
        for run_id in targets:
            time.sleep(random.uniform(0, FOLLOW_POLL_S))
            t0 = time.perf_counter()
            store.append_run_event(run_id, "bench_probe", {})
            got = lines.until(_line_of(run_id), args.timeout)
            if got is None:
                missed += 1
                continue
            lat.append((got[1] - t0) * 1000)
        cpu = idle_cpu(proc, args.idle_s)
    print("  (b1) one store event appended in-process, on the big store")
    print(_row("append -> the run's line", lat, 0))
    if missed:
        print(f"    ! {missed} lines did not arrive in {args.timeout:g} s")
    print(f"  an idle follower (nothing changing) used {cpu:.1f}% of one CPU over"
          f" {args.idle_s:g} s (it polls every {FOLLOW_POLL_S * 1000:.0f} ms;"
          " CPU time ticks in 10 ms)")


def idle_cpu(proc: subprocess.Popen[str], seconds: float) -> float:
    try:
        p = psutil.Process(proc.pid)
        before = sum(p.cpu_times()[:2])
        time.sleep(seconds)
        return 100 * (sum(p.cpu_times()[:2]) - before) / seconds
    except psutil.Error:
        return float("nan")


def latency_host(base: Path, home: Path, args: argparse.Namespace) -> None:
    """(b2): a run finishing under a real host -> its ``completed`` line."""
    project = _project(base, "hosted", home)
    project.write_workflow("tiny", TINY)
    lat: list[float] = []
    whole: list[float] = []
    missed = 0
    host = project.start_host("--concurrency", "1", timeout=args.timeout)
    try:
        with project.store() as store, follower(project, "follow-host") as (_, lines):
            if lines.until(lambda line: True, args.timeout) is None:
                print("    ! the follower printed nothing")
                return
            for _ in range(args.latency_samples):
                time.sleep(random.uniform(0, FOLLOW_POLL_S))
                run_id = project.enqueue(store, "tiny")[0]
                got = lines.until(_line_of(run_id, "completed"), args.timeout)
                events = {e.type: e.at for e in store.events_since(0, run_id=run_id)}
                if got is None or "done" not in events:
                    missed += 1
                    continue
                lat.append(got[0] - events["done"])
                whole.append(got[0] - events["queued"])
    finally:
        seconds, code = project.stop_host(host)
        if code != 0:
            print(f"    ! host stop took {seconds:.1f} s, exit {code}")
    print("  (b2) a run of a 3-node workflow finishing under a real host, one at a time")
    print(_row("its `done` event -> its `completed` line", lat, 0))
    print(_row("queued -> its `completed` line", whole, 0))
    if missed:
        print(f"    ! {missed} runs did not show as completed in {args.timeout:g} s")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench sync", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the store")
    parser.add_argument("--changed", type=int, default=100,
                        help="of them, changed since the watermark")
    parser.add_argument("--samples", type=int, default=20, help="in-process syncs timed")
    parser.add_argument("--cli-samples", type=int, default=10, help="CLI syncs timed")
    parser.add_argument("--note-sessions", type=int, default=5,
                        help="sessions given 50 notifications each")
    parser.add_argument("--latency-samples", type=int, default=20)
    parser.add_argument("--idle-s", type=float, default=5.0,
                        help="seconds the idle follower's CPU is measured")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline of each wait (s)")
    parser.add_argument("--skip", default="",
                        help="phases to skip: big ([a] and [b1], which share the big store),"
                             " host ([b2])")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-sync-bench-"))
    home = base / "home"
    print(f"sync bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average"
          f" {load_average()}; dir {base}; synchronous NORMAL, default lease settings")
    try:
        big = None
        if "big" not in skip:
            print(f"\n[a] sync with {args.runs:,} runs in the store, {args.changed} changed"
                  " since the watermark (nearest-rank percentiles)")
            big = bench_sync(base, home, args)
        print(f"\n[b] feed append -> the line of a running `sync --follow`,"
              f" {args.latency_samples} samples each")
        if big is not None:
            latency_appended(big, args)
        if "host" not in skip:
            latency_host(base, home, args)
    except HarnessError as exc:
        print(f"  ! {exc}")
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0

