"""Host bench phase 1: worker start-up, no host running.

Owns spawning the real worker in ``--standby`` mode with the command line
(``protocol.wire.worker_argv``), run marker and handed settings the host
gives it, timing spawn -> booted (its title turns to the standby title),
its RSS/USS, and a bare interpreter and the worker's imports for
reference. Imports ``bench.host_common`` and ``pi_workflows.protocol``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.settings import project_key
from pi_workflows.protocol.wire import STANDBY_RUN, marker_value, worker_argv, worker_env
from pi_workflows.protocol.workerconfig import WorkerConfig

from e2e.harness import poll

from .host_common import MB, bench_project, is_booted_standby, rss_uss, summary

RUNNER = "bench-boot"


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

    Booted = its title turns to ``pi-workflows worker <key> standby``: interpreter,
    imports, handed settings, store open; only the claim check and the
    ``processes.json`` write remain (the claim -> ready figure in [2]/[3]).
    """
    project = bench_project(base, "boot", home, "node")
    settings, paths = project.settings, project.paths
    # What the host adds to its own environment: the standby marker and its
    # resolved settings as JSON (so the worker boots without pydantic).
    env = {**project.env, **worker_env(
        marker_value(project_key(project.root), RUNNER, STANDBY_RUN),
        config_json=WorkerConfig.from_settings(settings, paths).to_json())}
    times: list[float] = []
    mem: list[tuple[int, int]] = []
    for _ in range(reps):
        begin = time.perf_counter()
        proc = subprocess.Popen(worker_argv(project.root, RUNNER, os.getpid(), standby=True),
                                env=env, cwd=project.root, stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        handle = psutil.Process(proc.pid)
        if poll(lambda handle=handle: is_booted_standby(handle), 30, 0.002):
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
