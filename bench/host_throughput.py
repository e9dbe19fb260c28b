"""Host bench phase 2: throughput of one host.

Owns pushing ``runs`` detached runs of an ``nodes``-node compute chain
through one host at one concurrency and fsync policy, sampling host and
worker memory while they run, and printing runs/s, nodes/s and where a
run's time goes. Every time comes from the store's events, the bundles'
``processes.json`` and traces (``bench.host_common.timelines``). Imports
``bench.host_common``, ``e2e.harness`` and ``pi_workflows.protocol``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pi_workflows.protocol.states import TERMINAL, QueueState
from pi_workflows.protocol.store import QueueRow

from .host_common import (
    CHAIN,
    MB,
    Timeline,
    bench_project,
    children,
    diagnose,
    host_running,
    rss,
    span,
    summary,
    timelines,
    wait_zygote,
)


def throughput(base: Path, home: Path, fsync: str, concurrency: int, runs: int,
               nodes: int, timeout: float) -> dict[str, Any]:
    project = bench_project(base, f"tp-{fsync}-c{concurrency}", home, fsync)
    project.write_workflow("chain", CHAIN.format(nodes=nodes))
    result: dict[str, Any] = {"fsync": fsync, "concurrency": concurrency, "runs": runs}
    with project.store() as store, host_running(project, concurrency, "host.log") as host:
        # Idle means its zygote is booted: the figure includes it.
        wait_zygote(host)
        result["host_idle_rss"] = rss(host.pid)
        begin = time.perf_counter()
        ids = project.enqueue(store, "chain", runs)
        result["enqueue_s"] = time.perf_counter() - begin
        host_peak, worker_peak, most = 0, 0, 0
        deadline = time.monotonic() + max(timeout, runs * 2.0)
        rows: list[QueueRow] = []
        while True:
            rows = store.list_runs(limit=runs + 100)
            settled = [r for r in rows if r.state in TERMINAL]
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
            time.sleep(0.2)  # the memory sampling interval, not a wait for an event
        result.update(host_peak_rss=host_peak, worker_peak_rss=worker_peak, most_children=most)
        result["not_done"] = {r.run_id: r.state for r in rows if r.state != QueueState.DONE}
        tl = timelines(project, store, ids)
    result["timelines"] = tl
    # From the first run's "queued" to the last one's terminal queue event.
    start = min((t.enqueued for t in tl if t.enqueued is not None), default=None)
    end = max((t.finished for t in tl if t.finished is not None), default=None)
    elapsed = max(1, (end or 0) - (start or 0)) / 1000 if start and end else float("nan")
    done = len(ids) - len(result["not_done"])
    result.update(elapsed_s=elapsed, runs_per_s=done / elapsed, nodes_per_s=done * nodes / elapsed)
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
    print(f"    per run: claim -> done          {summary(span(tl, 'claimed', 'finished'))}")
    print(f"      claim -> worker ready         {summary(span(tl, 'claimed', 'ready'))}"
          "  (forked by the zygote)")
    print(f"      first node_started -> run_completed ({nodes} nodes)"
          f" {summary(span(tl, 'node_started', 'completed'))}")
    print(f"    host RSS idle {(r['host_idle_rss'] or 0) / MB:.1f} MB,"
          f" peak {r['host_peak_rss'] / MB:.1f} MB; most host children at once"
          f" {r['most_children']} (workers + zygote); worker RSS peak seen"
          f" {r['worker_peak_rss'] / MB:.1f} MB")
