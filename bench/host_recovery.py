"""Host bench phases 4 and 5: kill -9 recovery, and memory with workers blocked in a node.

Owns holding ``runs`` runs in a blocking node under one host, sampling
worker, zygote and host memory there, then ``kill -9`` of the host and a
new host at once, (a) with the workers free to park (``PR_SET_PDEATHSIG``)
and (b) frozen (SIGSTOP) so the new host must reap them and take their
claims over. Times come from the trace (``run_resumed``, ``node_started``),
the store's events (claims, parks, takeovers) and the new host's lock file
(``readyAt``, ``runnerId``). How each old worker ended (parked by itself,
or killed by the new host's orphan reaping) is its exit status: the bench
makes itself the subreaper of its descendants, so a killed host's workers
become its children. Imports ``bench.host_common``, ``e2e.harness`` and
``pi_workflows.protocol``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.clock import now_ms
from pi_workflows.protocol.states import QueueState
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.wire import WorkerExit

from e2e.harness import HostProcess, Project, alive, all_events, poll

from .host_common import (
    HOLD,
    MB,
    bench_project,
    children,
    first,
    rss,
    rss_uss,
    secs,
    summary,
    wait_zygote,
)

PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def adopting_orphans() -> Iterator[bool]:
    """This process adopts its orphaned descendants (Linux), so it can read their exit status.

    Without it a killed host's workers go to init, and how they ended (parked
    by themselves or killed by the new host) would be known only from the
    new host's own report.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    try:
        yield ok
    finally:
        if ok:
            libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def how_ended(pid: int) -> str:
    """An adopted old worker's end, from its exit status (reaping it)."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return "unknown (not adopted)"
    if got == 0:
        return "still running"
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.WEXITSTATUS(status)
    known = {int(e): e.name.lower() for e in WorkerExit}
    return f"exit {code} ({known[code]})" if code in known else f"exit {code}"


def _held(project: Project, ids: list[str], since: int) -> bool:
    """Every run has a ``node_started`` at or after ``since``."""
    return all(first(project.events(r), "node_started", since) is not None for r in ids)


def _last_node_started(project: Project, ids: list[str], since: int) -> int:
    return max(first(project.events(r), "node_started", since) or 0 for r in ids)


def _resumed_at(project: Project, ids: list[str], since: int) -> dict[str, int]:
    out = {}
    for run_id in ids:
        at = first(project.events(run_id), "run_resumed", since)
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


def _run_workers(project: Project, ids: list[str], host: HostProcess) -> dict[int, str]:
    """pid -> run id of the live workers of ``host`` (from processes.json)."""
    kids = {p.pid for p in children(host.pid, recursive=True)}
    out = {}
    for run_id in ids:
        for entry in project.state_processes(run_id):
            if entry.get("role") == "worker" and entry.get("pid") in kids:
                out[int(entry["pid"])] = run_id
    return out


def _kill_and_recover(project: Project, store: Store, host: HostProcess, ids: list[str],
                      concurrency: int, log: str, freeze: bool,
                      timeout: float) -> tuple[HostProcess, dict[str, Any]]:
    out: dict[str, Any] = {}
    before = store.last_event_seq()
    workers = _run_workers(project, ids, host)
    out["workers"] = len(workers)
    if freeze:
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)  # hung workers: they cannot park when the host dies
    kill_at = now_ms()
    os.kill(host.pid, signal.SIGKILL)
    host.wait()
    new = project.start_host("--concurrency", str(concurrency), log=log)
    out["host_startup_s"] = new.startup_s
    ready_at = int(new.lock.get("readyAt") or now_ms())
    out["taken_at_startup"] = sum(
        1 for e in all_events(store, before) if e.type == "claim_taken_over"
        and e.payload.get("runnerId") == new.runner_id and e.at <= ready_at)
    resumed = poll(lambda: len(r := _resumed_at(project, ids, kill_at)) == len(ids) and r,
                   timeout, 0.05)
    out["resumed_s"] = (max(resumed.values()) - kill_at) / 1000 if resumed else None
    out["resumed_first_s"] = (min(resumed.values()) - kill_at) / 1000 if resumed else None
    held = poll(lambda: _held(project, ids, kill_at), timeout, 0.05)
    out["running_s"] = (_last_node_started(project, ids, kill_at) - kill_at) / 1000 \
        if held else None
    out["owned_by_new_host"] = sum(
        (r := store.get(i)) is not None and r.runner_id == new.runner_id
        and r.state == QueueState.RUNNING for i in ids)
    out["old_workers_alive"] = sum(alive(p) for p in workers)
    # Nothing but the new host kills them (frozen ones cannot even park).
    out["old_workers_ended"] = Counter(how_ended(p) for p in workers)
    out["mechanism"] = _mechanism(store, before, set(ids))
    parked = [e.at for e in all_events(store, before) if e.type == "parked" and e.run_id in ids]
    out["parked"] = (len(parked), (max(parked) - kill_at) / 1000 if parked else None)
    return new, out


def recovery(base: Path, home: Path, fsync: str, runs: int, timeout: float) -> dict[str, Any]:
    project = bench_project(base, f"rec-{fsync}", home, fsync)
    project.write_workflow("hold", HOLD)
    out: dict[str, Any] = {"runs": runs}
    with adopting_orphans(), project.store() as store:
        host = project.start_host("--concurrency", str(runs), log="host1.log")
        wait_zygote(host)  # the idle figure includes its booted zygote
        out["host_idle_rss"] = rss(host.pid)
        ids = project.enqueue(store, "hold", runs)
        ready = poll(lambda: _held(project, ids, 0), timeout, 0.05)
        queued = [e.at for e in all_events(store) if e.type == "queued" and e.run_id in ids]
        out["ramp_s"] = (_last_node_started(project, ids, 0) - min(queued)) / 1000 \
            if ready and queued else None
        workers = _run_workers(project, ids, host)
        samples = [s for pid in workers if (s := rss_uss(psutil.Process(pid))) is not None]
        out["worker_rss"] = [s[0] for s in samples]
        out["worker_uss"] = [s[1] for s in samples]
        others = [p for p in children(host.pid) if p.pid not in workers]
        out["zygote"] = [s for p in others if (s := rss_uss(p)) is not None]
        out["host_loaded_rss"] = rss(host.pid)
        if not ready:
            out["error"] = "not every run reached the blocking node"
            project.cleanup()
            return out
        host, out["at_once"] = _kill_and_recover(project, store, host, ids, runs, "host2.log",
                                                 False, timeout)
        host, out["frozen"] = _kill_and_recover(project, store, host, ids, runs, "host3.log",
                                                True, timeout)
        project.release()
        done = poll(lambda: all((r := store.get(i)) is not None and r.state == QueueState.DONE
                                for i in ids), timeout, 0.05)
        out["finished"] = bool(done)
        out["final_states"] = sorted({row.state for i in ids if (row := store.get(i)) is not None})
        out["stop"] = project.stop_host(host)
    out["leftover"] = project.cleanup()
    return out


def print_recovery(r: dict[str, Any]) -> None:
    print(f"  {r['runs']} runs enqueued -> all in their node: {secs(r.get('ramp_s'))}"
          " (cold workers booting concurrently)")
    if r.get("error"):
        print(f"  ! {r['error']}")
        return
    for key, title in (("at_once", "(a) kill -9, new host started at once"),
                       ("frozen", "(b) workers frozen (SIGSTOP) so they cannot park, kill -9,"
                                  " new host at once")):
        x = r[key]
        print(f"  {title}:")
        print(f"    new host start-up (spawn -> lock file ready) {secs(x['host_startup_s'])};"
              f" it took over {x['taken_at_startup']} run(s) before it was ready")
        print(f"    kill -> first run_resumed {secs(x['resumed_first_s'])}, all run_resumed"
              f" {secs(x['resumed_s'])}, all back in their node {secs(x['running_s'])}")
        print(f"    running under the new host: {x['owned_by_new_host']}/{r['runs']};"
              f" old workers still alive: {x['old_workers_alive']}/{x['workers']}")
        ended = ", ".join(f"{k} x{v}" for k, v in sorted(x["old_workers_ended"].items()))
        reaped = any(k.startswith("killed") for k in x["old_workers_ended"])
        print(f"    how the old workers ended: {ended}"
              + ("; a kill is the new host's orphan reaping" if reaped else ""))
        if x["parked"][0]:
            print(f"    {x['parked'][0]} run(s) parked by their own workers after the host died"
                  f" (PR_SET_PDEATHSIG), the last {secs(x['parked'][1])} after the kill")
        mech = ", ".join(f"{k} x{v}" for k, v in sorted(x["mechanism"].items()))
        print(f"    queue events after the kill: {mech}")
    stop = r["stop"]
    print(f"  released: all done={r.get('finished')} final states={r.get('final_states')};"
          f" SIGTERM stop of the last host {stop[0]:.2f} s, exit {stop[1]}")


def print_memory(r: dict[str, Any], runs: int) -> None:
    print(f"  worker RSS {summary([v / MB for v in r.get('worker_rss', [])], 'MB', 1)}")
    print(f"  worker USS {summary([v / MB for v in r.get('worker_uss', [])], 'MB', 1)}")
    for rss_b, uss_b in r.get("zygote", []):
        print(f"  zygote RSS {rss_b / MB:.1f} MB, USS {uss_b / MB:.1f} MB")
    if r.get("host_idle_rss") and r.get("host_loaded_rss"):
        print(f"  host RSS idle {r['host_idle_rss'] / MB:.1f} MB, with {runs} workers"
              f" {r['host_loaded_rss'] / MB:.1f} MB")
