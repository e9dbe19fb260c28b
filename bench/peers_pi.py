"""The peer bench's pi-workflows side: one real ``pi-workflows host`` per figure.

Owns the three figures the peer comparison needs from pi-workflows, each
in a fresh project under ``base`` (``bench.host_common.bench_project``):
throughput (``bench.host_throughput.throughput``, the host bench's own
measurement: first ``queued`` to last terminal store event), idle latency
queued -> first ``node_started`` (``bench.host_latency.latency``), and
the ``kill -9`` drill: ``runs`` runs held in a blocking node, ``kill -9``
of the host, a new host at once, and the time until every run has a
``node_started`` after the kill. Imports ``bench.host_*`` and
``e2e.harness``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from pi_workflows.protocol.clock import now_ms
from pi_workflows.protocol.states import QueueState

from e2e.harness import Project, poll

from .host_common import HOLD, bench_project, first, span
from .host_latency import latency as host_latency
from .host_throughput import throughput as host_throughput


def throughput(base: Path, home: Path, fsync: str, concurrency: int, runs: int,
               steps: int, timeout: float) -> dict[str, Any]:
    r = host_throughput(base, home, fsync, concurrency, runs, steps, timeout)
    if r.get("timeout") or r["not_done"]:
        r["error"] = f"timeout={r.get('timeout')} not done={len(r['not_done'])}"
    return r


def latency(base: Path, home: Path, fsync: str, samples: int, steps: int,
            timeout: float) -> dict[str, Any]:
    r = host_latency(base, home, fsync, samples, steps, timeout)
    return {"first_ms": span(r["timelines"], "enqueued", "node_started"),
            "done_ms": span(r["timelines"], "enqueued", "finished"),
            "error": f"{r['unfinished']} unfinished" if r["unfinished"] else None}


def _back(project: Project, ids: list[str], since: int) -> list[int] | None:
    """Each run's first ``node_started`` at or after ``since``, once every run has one."""
    starts = [first(project.events(r), "node_started", since) for r in ids]
    return [s for s in starts if s is not None] if None not in starts else None


def recovery(base: Path, home: Path, fsync: str, runs: int,
             timeout: float) -> dict[str, Any]:
    """kill -9 of the host with ``runs`` runs in their node -> all back in it (s)."""
    project = bench_project(base, f"rec-{fsync}", home, fsync)
    project.write_workflow("hold", HOLD)
    out: dict[str, Any] = {"running_s": float("nan"), "from_start_s": float("nan")}
    conc = str(runs)
    with project.store() as store:
        host = project.start_host("--concurrency", conc, log="host1.log")
        ids = project.enqueue(store, "hold", runs)
        if not poll(lambda: _back(project, ids, 0), timeout, 0.02):
            out["error"] = "not every run reached the blocking node"
        else:
            killed = now_ms()
            os.kill(host.pid, signal.SIGKILL)
            host.wait()
            host = project.start_host("--concurrency", conc, log="host2.log")
            back = poll(lambda: _back(project, ids, killed), timeout, 0.02)
            if back:
                out["running_s"] = (max(back) - killed) / 1000
                out["from_start_s"] = (max(back) - host.spawned_at) / 1000
                out["first_back_s"] = (min(back) - killed) / 1000
                out["host_startup_s"] = host.startup_s
            else:
                out["error"] = "not every run came back to its node"
        project.release()
        poll(lambda: all((r := store.get(i)) is not None and r.state == QueueState.DONE
                         for i in ids), timeout, 0.05)
        project.stop_host(host)
    project.cleanup()
    return out
