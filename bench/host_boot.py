"""Host bench phase 1: worker start-up, no host running.

Owns timing the two ways a host starts a worker, each for a queued run
with a token that is not its claim's (so the worker boots, opens the
store, checks the claim and exits ``CLAIM_LOST``: everything of a boot but
the first writes):
a cold spawn with the command line (``protocol.wire.worker_argv``), run
marker and handed settings the host gives it; the real zygote
(``supervisor.procs.zygote``) the host keeps, handing the request to its spare
(booted while the host was idle) and, with the spare off, forking on
request; the zygote's own boot and memory; and a bare interpreter and the
worker's imports for reference.
Imports ``bench.host_common``, ``pi_workflows.protocol`` and the zygote.
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
from pi_workflows.protocol.wire import ForkRequest, marker_value, worker_argv, worker_env
from pi_workflows.protocol.workerconfig import WorkerConfig
from pi_workflows.supervisor.procs.zygote import start_zygote

from e2e.harness import poll

from .host_common import CHAIN, MB, bench_project, has_spare, is_zygote, rss_uss, summary

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
    """Start -> claim checked and exited, cold and forked, for a claim that is not ours."""
    project = bench_project(base, "boot", home, "node")
    project.write_workflow("chain", CHAIN.format(nodes=1))
    with project.store() as store:
        run_id = project.enqueue(store, "chain")[0]  # queued, never claimed
    key = project_key(project.root)
    config = WorkerConfig.from_settings(project.settings, project.paths).to_json()
    marker = marker_value(key, RUNNER, run_id)
    env = {**project.env, **worker_env(marker, config_json=config, token="t")}
    cold: list[float] = []
    for _ in range(reps):
        begin = time.perf_counter()
        subprocess.run(worker_argv(project.root, RUNNER, os.getpid(), run_id=run_id,
                                   claim_state="starting"),
                       env=env, cwd=project.root, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       start_new_session=True, check=False)
        cold.append((time.perf_counter() - begin) * 1000)
    request = ForkRequest(run_id, "starting", "t", marker, config, os.getpid())
    zygote_boot, mem, forked = _through_zygote(project, key, config, request, reps, spare=True)
    _, _, on_request = _through_zygote(project, key, config, request, reps, spare=False)
    return {"cold_ms": cold, "forked_ms": forked, "forked_on_request_ms": on_request,
            "zygote_boot_ms": zygote_boot, "zygote_mem": mem,
            "reference": boot_reference(max(3, reps // 2))}


def _through_zygote(project: Any, key: str, config: str, request: ForkRequest, reps: int, *,
                    spare: bool) -> tuple[float | None, tuple[int, int] | None, list[float]]:
    """(zygote boot ms, its RSS/USS, request -> worker exited ms per rep)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(project.env)  # the zygote inherits the environment, as from a host
    try:
        begin = time.perf_counter()
        zygote = start_zygote(project=project.root, project_key=key, runner_id=RUNNER,
                              config_json=config, spare=spare)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    handle = psutil.Process(zygote.pid)
    booted = poll(lambda: is_zygote(handle), 30, 0.002)
    zygote_boot = (time.perf_counter() - begin) * 1000 if booted else None
    mem = rss_uss(handle)
    times: list[float] = []
    try:
        for _ in range(reps):
            if spare:
                # An idle host: the spare forked after the last request is there.
                poll(lambda: has_spare(handle), 10, 0.002)
            begin = time.perf_counter()
            zygote.fork(request).wait(30)
            times.append((time.perf_counter() - begin) * 1000)
    finally:
        zygote.stop()
    return zygote_boot, mem, times


def print_boot(r: dict[str, Any]) -> None:
    print(f"  cold worker: spawn -> claim checked, exited    {summary(r['cold_ms'])}")
    print(f"  the zygote's spare: request -> same            {summary(r['forked_ms'])}")
    print(f"  forked on request (spare off): request -> same {summary(r['forked_on_request_ms'])}")
    boot = r["zygote_boot_ms"]
    print(f"  the zygote itself: spawn -> booted             "
          f"{'TIMEOUT' if boot is None else f'{boot:.0f} ms'}")
    if r["zygote_mem"] is not None:
        rss_b, uss_b = r["zygote_mem"]
        print(f"  booted zygote RSS {rss_b / MB:.1f} MB, USS {uss_b / MB:.1f} MB")
    for label, times in r["reference"].items():
        print(f"  reference: {label:<46} {summary(times)}")
