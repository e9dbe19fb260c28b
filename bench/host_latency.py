"""Host bench phase 3: latency queued -> first ``node_started`` with the host idle.

Owns enqueueing one run at a time into an idle host (nothing queued, no
run worker, its zygote booted and, unless ``spare=False``, its spare
forked), waiting for each to settle, and printing
the split: wake + claim (store events), claim -> worker ready (the
hand-off and the worker start-up left on the hot path, to
``processes.json``), bundle creation and engine start (trace). Imports
``bench.host_common``, ``e2e.harness`` and ``pi_workflows.protocol``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from pi_workflows.protocol.states import TERMINAL
from pi_workflows.protocol.store import Store

from e2e.harness import HostProcess, poll

from .host_common import (
    CHAIN,
    Timeline,
    bench_project,
    children,
    has_spare,
    host_running,
    is_zygote,
    span,
    summary,
    timelines,
)


def _idle_with_zygote(host: HostProcess, spare: bool) -> bool:
    """Only one child, the booted zygote (its title says so), and its spare if on."""
    kids = children(host.pid)
    return len(kids) == 1 and is_zygote(kids[0]) and (not spare or has_spare(kids[0]))


def _settled(store: Store, run_id: str) -> bool:
    row = store.get(run_id)
    return row is not None and row.state in TERMINAL


def latency(base: Path, home: Path, fsync: str, samples: int, nodes: int,
            timeout: float, *, spare: bool = True) -> dict[str, Any]:
    project = bench_project(base, f"lat-{fsync}" + ("" if spare else "-nospare"), home, fsync)
    if not spare:
        project.env["PI_WORKFLOWS_ZYGOTE_SPARE"] = "false"
    project.write_workflow("chain", CHAIN.format(nodes=nodes))
    result: dict[str, Any] = {"samples": samples, "no_zygote_seen": 0, "unfinished": 0}
    with project.store() as store, host_running(project, 2, "host.log") as host:
        ids: list[str] = []
        for _ in range(samples):
            # The host is idle: nothing queued, no run worker alive, its zygote booted.
            if not poll(lambda: _idle_with_zygote(host, spare), 10, 0.01):
                result["no_zygote_seen"] += 1
            run_id = project.enqueue(store, "chain")[0]
            ids.append(run_id)
            if not poll(lambda run_id=run_id: _settled(store, run_id), timeout, 0.02):
                result["unfinished"] += 1
        result["timelines"] = timelines(project, store, ids)
    project.cleanup()
    return result


def print_latency(r: dict[str, Any], nodes: int, boot: list[float]) -> None:
    tl: list[Timeline] = r["timelines"]
    total = span(tl, "enqueued", "node_started")
    print(f"  queued -> first node_started     {summary(total)}")
    print(f"    enqueue -> claimed (wake+claim) {summary(span(tl, 'enqueued', 'claimed'))}")
    hot = span(tl, "claimed", "ready")
    print(f"    claimed -> worker ready         {summary(hot)}"
          "   <- hand-over (spare) or fork + worker start-up on the hot path"
          " (target p50 <= 10 ms)")
    print(f"    worker ready -> run_started     {summary(span(tl, 'ready', 'run_started'))}")
    print(f"    run_started -> node_started     {summary(span(tl, 'run_started', 'node_started'))}")
    print(f"  {r['no_zygote_seen']} of {len(tl)} runs enqueued before a booted zygote"
          " (and its spare, if on) was seen")
    if total and hot:
        share = statistics.median(hot) / statistics.median(total)
        print(f"  fork + worker start-up on the hot path is {share:.0%} of the median"
              " latency", end="")
        if boot:
            print(f";\n  a cold worker boot ([1]) is p50 {statistics.median(boot):.0f} ms,"
                  " which the zygote's fork takes off this path")
        else:
            print()
    print(f"  queued -> done ({nodes} nodes)         {summary(span(tl, 'enqueued', 'finished'))}")
    if r["unfinished"]:
        print(f"    ! {r['unfinished']} of {r['samples']} runs did not finish in time")
