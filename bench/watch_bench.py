"""Watch benchmark: a trace event appended -> its line shown by ``pi-workflows watch``.

A real ``pi-workflows host`` (concurrency 1, default settings) runs, one
at a time, runs of a paced compute chain: a first node that sleeps
``--lead`` seconds (so the watcher is up before the rest is written), then
``--nodes`` nodes that each sleep a random 20-250 ms, so events land at
random points of the watcher's poll. For each run a ``pi-workflows watch
RUN --json`` subprocess is started at once and its stdout is read through
a pipe by a thread that stamps each line on arrival (``bench.sync_bench``'s
``Stamped``). The figure for one event is the line's arrival (epoch ms)
minus the event's own ``at`` (the trace records it just before the append):
the append, the watcher's poll, its formatting and the pipe. Events written
before the watcher's first line (its catch-up) are left out. Figures only;
nothing is asserted. Every wait has a deadline; the host and watchers are
stopped and the temporary directory removed at the end. Imports
``bench.host_common``, ``bench.sync_bench`` and ``e2e.harness``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.harness import HarnessError, Project

from .host_common import PROJECTS, bench_project, finish_bench, host_running, load_average, summary
from .sync_bench import Stamped

PACED = """
import random
import time

from pi_workflows import compute, define_workflow, edge

NODES = {nodes}


def lead(ctx):
    time.sleep({lead})  # the watcher starts meanwhile
    return {{}}


def paced(i):
    def fn(ctx):
        time.sleep(random.uniform(0.02, 0.25))  # events at random points of the poll
        return {{"step": i}}
    return fn


workflow = define_workflow(
    start_at="lead",
    nodes=[compute("lead", lead)] + [compute(f"n{{i}}", paced(i)) for i in range(NODES)],
    edges=[edge("lead", "n0")] + [edge(f"n{{i}}", f"n{{i + 1}}") for i in range(NODES - 1)],
)
"""


def watch_one(project: Project, run_id: str, timeout: float) -> tuple[list[float], str | None]:
    """Latencies (ms) of the live events of one run under ``watch RUN --json``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_workflows", "watch", run_id, "--json", "--project",
         str(project.root)], env=project.env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    lines = Stamped(proc.stdout)
    out: list[float] = []
    first: float | None = None
    error = None
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:
            got = lines.until(lambda line: line.startswith("{"), left)
            if got is None:
                break  # the watcher ended (the run settled) or the deadline passed
            arrived, _, text = got
            event = json.loads(text)
            if first is None:
                first = arrived
            elif int(event["at"]) > first:  # written after the watcher was showing
                out.append(arrived - int(event["at"]))
        else:
            error = f"watch of {run_id} did not end in {timeout:g} s"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return out, error


def measure(base: Path, home: Path, runs: int, nodes: int, lead: float,
            timeout: float) -> dict[str, Any]:
    """``runs`` runs one at a time, each watched: every live event's latency (ms)."""
    project = bench_project(base, f"watch-{len(list(base.glob('watch-*')))}", home, "node")
    project.write_workflow("paced", PACED.format(nodes=nodes, lead=lead))
    result: dict[str, Any] = {"latency_ms": [], "errors": []}
    with project.store() as store, host_running(project, 1, "host.log"):
        for _ in range(runs):
            run_id = project.enqueue(store, "paced")[0]
            got, error = watch_one(project, run_id, timeout)
            result["latency_ms"].extend(got)
            if error:
                result["errors"].append(error)
    project.cleanup()
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench watch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python -m bench watch --runs 5")
    parser.add_argument("--runs", type=int, default=5, help="runs watched, one at a time")
    parser.add_argument("--nodes", type=int, default=10, help="paced nodes per run")
    parser.add_argument("--lead", type=float, default=0.8,
                        help="seconds the first node sleeps while the watcher starts")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of each wait (s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-watch-bench-"))
    print(f"watch bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average"
          f" {load_average()}; dir {base}")
    try:
        r = measure(base, base / "home", args.runs, args.nodes, args.lead, args.timeout)
        print(f"  trace event appended -> its line from `watch RUN --json`, {args.runs} runs"
              f" x {args.nodes} paced nodes (nearest-rank percentiles)")
        print(f"    {summary(r['latency_ms'])}")
        for line in r["errors"]:
            print(f"    ! {line}")
    except HarnessError as exc:
        print(f"  ! {exc}")
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
