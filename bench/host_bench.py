"""Host benchmark (issue 4): real ``pi-workflows host`` processes, figures only.

Measured against real subprocesses in a temporary project and
``PI_WORKFLOWS_HOME`` (never ``~/.pi``), with the product's default lease,
renewal and poll settings:

1. Worker start-up (``bench.host_boot``): a cold spawn of the real worker
   (with the marker and handed settings the host gives it) and a fork by
   the real zygote, each until it has checked its claim and exited; the
   zygote's boot and RSS/USS; a bare interpreter and the worker's imports
   for reference.
2. Throughput (``bench.host_throughput``): ``--runs`` detached runs of a
   ``--nodes``-node compute chain through one host, per ``--concurrency``
   and per ``--fsync`` policy (runs/s, nodes/s, and where a run's time goes).
3. Latency (``bench.host_latency``): queued -> first ``node_started`` with
   the host idle (one run at a time, the host's zygote booted),
   split into wake + claim, the fork and worker start-up left on the hot
   path, bundle creation and engine start.
4. Recovery (``bench.host_recovery``): ``--recovery-runs`` runs held in a
   blocking node, ``kill -9`` of the host, a new host started at once,
   (a) with the workers free to park (``PR_SET_PDEATHSIG``) and (b) with
   them frozen so the new host must reap them and take their claims over;
   seconds until every run has a ``run_resumed`` written after the kill and
   until its node runs again, and which queue transitions moved the runs.
5. Memory: RSS/USS of the workers blocked in that node and of the
   zygote; host RSS idle and with ``--recovery-runs`` workers.

Runs are enqueued in-process (``prepare_run`` + ``Store.enqueue_detached``)
and the host is poked through its wakeup socket, as ``run --detach`` does.
Hosts are ready when their lock file says so. Every time comes from what
the product records, in epoch ms on one clock: the store's ``run_events``
``at``, ``processes.json``'s ``recordedAt`` and ``startTime``, the trace's
``at`` and the host lock's ``readyAt``; never from the host's log. Nothing
is asserted; every wait has a deadline and a timed-out wait is printed,
not raised. Every host started here is stopped (SIGTERM, SIGKILL if
needed) and any process left with a bench project's run marker is killed
at the end. This module owns the command line and the order of the
phases; the harness is ``e2e.harness`` (shared with the e2e drills).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from .host_boot import print_boot, worker_boot
from .host_common import PROJECTS, comma_words, finish_bench, load_average
from .host_latency import latency, print_latency
from .host_recovery import print_memory, print_recovery, recovery
from .host_throughput import print_throughput, throughput


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]



def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench host", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=60,
                        help="runs per throughput setting (issue 4 asks for 200)")
    parser.add_argument("--nodes", type=int, default=10, help="compute nodes per run")
    parser.add_argument("--concurrency", type=_ints, default=[2, 4],
                        help="comma list of host concurrency levels (default 2,4)")
    parser.add_argument("--fsync", type=comma_words, default=["node", "never"],
                        help="comma list of fsync policies for throughput (default node,never)")
    parser.add_argument("--compare-runs", type=int, default=30,
                        help="runs per throughput setting for the fsync policies after the"
                             " first (0 skips them)")
    parser.add_argument("--boot-runs", type=int, default=10)
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--recovery-runs", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of each wait (s)")
    parser.add_argument("--skip", type=comma_words, default=[],
                        help="phases to skip: boot,throughput,latency,recovery")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-host-bench-"))
    home = base / "home"
    print(f"host bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average"
          f" {load_average()}; dir {base}; default lease/renew/poll settings")
    boot: list[float] = []
    try:
        if "boot" not in args.skip:
            print(f"\n[1] worker start-up, {args.boot_runs} spawns one at a time, no host running")
            booted = worker_boot(base, home, args.boot_runs)
            print_boot(booted)
            boot = booted["cold_ms"]
        if "throughput" not in args.skip:
            for i, fsync in enumerate(args.fsync):
                runs = args.runs if i == 0 else args.compare_runs
                if runs <= 0:
                    continue  # --compare-runs 0: only the first policy
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
            print("\n[3b] the same with the zygote's spare off (PI_WORKFLOWS_ZYGOTE_SPARE=false):"
                  " each worker forked on request")
            print_latency(latency(base, home, "node", args.latency_runs, args.nodes,
                                  args.timeout, spare=False), args.nodes, [])
        if "recovery" not in args.skip:
            print(f"\n[4] recovery: {args.recovery_runs} runs blocked in a node, host at"
                  f" concurrency {args.recovery_runs}, kill -9 of the host, fsync=node")
            rec = recovery(base, home, "node", args.recovery_runs, args.timeout)
            print_recovery(rec)
            print(f"\n[5] memory with {len(rec.get('worker_rss', []))} run workers blocked in"
                  " a node (psutil)")
            print_memory(rec, args.recovery_runs)
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0
