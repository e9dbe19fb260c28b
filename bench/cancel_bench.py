"""Cancel benchmark (issue 11): `pi-workflows cancel` -> run `cancelled` while a node runs.

A real host with the product's default lease and renewal (10 s), one run at
a time held in a blocking node; then the real CLI `cancel RUN --no-wait`.
Printed: the store's ``cancel_requested`` -> ``cancelled`` events (the
worker learning of the request and writing the terminal event), and the
CLI's start -> ``cancelled`` (including CLI start-up), and how many runs
stopped only after a full renewal interval (the nudge missed). The goal is
p50 under 1 s. Times come from the store's ``run_events`` ``at`` and one
wall clock; nothing is asserted. Imports ``bench.host_common`` and
``e2e.harness``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pi_workflows.protocol.store import Store

from e2e.harness import Project, poll

from .host_common import HOLD, bench_project, finish_bench, host_running, load_average, summary


def _event_at(store: Store, run_id: str, kind: str) -> int | None:
    for event in store.events_since(0, run_id=run_id):
        if event.type == kind:
            return event.at
    return None


def _node_running(project: Project, run_id: str) -> bool:
    try:
        events = project.events(run_id)
    except Exception:
        return False
    return any(e["type"] == "node_started" for e in events)


def sample(project: Project, store: Store, timeout: float) -> tuple[float, float] | None:
    run_id = project.enqueue(store, "hold")[0]
    if not poll(lambda: _node_running(project, run_id), timeout, 0.01):
        print(f"  ! {run_id}: its node never started")
        return None
    began = time.time()
    subprocess.run([sys.executable, "-m", "pi_workflows", "cancel", run_id, "--no-wait",
                    "--project", str(project.root)], env=project.env, capture_output=True,
                   check=False, timeout=timeout)
    if not poll(lambda: (r := store.get(run_id)) is not None and r.state == "cancelled",
                timeout, 0.005):
        print(f"  ! {run_id}: not cancelled within {timeout:g} s")
        return None
    asked, ended = _event_at(store, run_id, "cancel_requested"), _event_at(store, run_id,
                                                                           "cancelled")
    if asked is None or ended is None:
        return None
    return float(ended - asked), ended - began * 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench cancel", description=__doc__)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pwf-bench-cancel-"))
    project = bench_project(base, "cancel", base / "home", "node")
    project.write_workflow("hold", HOLD)
    print(f"cancel while a node runs: {args.samples} samples, default lease/renewal"
          f" (load average {load_average()})")
    inner: list[float] = []
    outer: list[float] = []
    with project.store() as store, host_running(project, 1, "host.log"):
        for _ in range(args.samples):
            got = sample(project, store, args.timeout)
            if got is not None:
                inner.append(got[0])
                outer.append(got[1])
    print(f"  cancel_requested -> cancelled (store)   {summary(inner)}")
    print(f"  `cancel` CLI start -> cancelled          {summary(outer)}   <- goal p50 < 1 s")
    late = sum(1 for v in inner if v >= 10_000)
    print(f"  stopped only after a renewal interval:  {late}/{len(inner)}")
    finish_bench([project], base, keep=args.keep, began=began)
    return 0
