"""The wall clock of real product processes stepped an hour forward, then back (the
drill's ``clock_step`` offset file, read by ``protocol.clock``): a host, its workers
and a terminal's attached run go on, and no run fails or reruns a node; a stopped
worker is still recovered a lease after its last renewal."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pi_workflows.protocol.clock import OFFSET_ENV
from pi_workflows.supervisor.drill.clockstep import set_offset

from .harness import Project, wait_for
from .snippets import ONCE_HELD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

HOUR = 3600
FLOW = ONCE_HELD
PROBE = ("import json, time; from pi_workflows.protocol.clock import now_ms;"
         " time.sleep(0.01); print(json.dumps([now_ms() / 1000, time.monotonic()]))")


def _stepped(env: dict[str, str], offset: Path) -> dict[str, str]:
    set_offset(offset, 0)
    return {**env, OFFSET_ENV: str(offset)}


@pytest.mark.timeout(60)
def test_the_offset_steps_a_childs_wall_clock_but_not_its_monotonic_clock(
        project: Project, tmp_path: Path) -> None:
    offset = tmp_path / "offset"
    env = _stepped(project.env, offset)
    for step in (HOUR, -HOUR, 0):
        set_offset(offset, step)
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                             text=True, timeout=30, check=True).stdout
        wall, mono = json.loads(out)
        assert abs(wall - time.time() - step) < 30
        assert abs(mono - time.monotonic()) < 30  # the same clock as ours: not stepped


@pytest.mark.timeout(150)
def test_runs_go_on_through_a_wall_clock_step_either_way(project: Project,
                                                         tmp_path: Path) -> None:
    offset = tmp_path / "offset"
    project.env.update(_stepped(project.env, offset))
    lease_s = project.settings.lease_ms / 1000
    project.write_workflow("flow", FLOW)
    host = project.start_host("--concurrency", "3")
    runs = [project.detach("flow") for _ in range(3)]
    with open(tmp_path / "attached.log", "wb") as out:  # another runner: a terminal
        attached = subprocess.Popen(
            [sys.executable, "-m", "pi_workflows", "run", "flow", "--project",
             str(project.root)], env=project.env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: len(project.lines("hold.started")) == 4, 60,
                 what="every run in its held node")
        for step in (HOUR, -HOUR):
            set_offset(offset, step)
            time.sleep(2 * lease_s)  # two leases: renewals, takeovers, hung checks all run
        set_offset(offset, 0)
        time.sleep(lease_s)
        project.release()
        assert attached.wait(60) == 0, (tmp_path / "attached.log").read_text()
        wait_for(lambda: all(project.row(r).state == "done" for r in runs), 60,
                 what="the detached runs to finish", diag=lambda: project.diagnose(runs))
    finally:
        if attached.poll() is None:
            attached.kill()
            attached.wait()
    # No node ran twice: one effect line and one held attempt per run.
    assert len(project.lines("hold.started")) == 4
    assert len(project.lines("first.txt")) == 4 and len(project.lines("last.txt")) == 4
    for run in runs:
        resumed = [e for e in project.events(run) if e["type"] == "run_resumed"]
        assert resumed == [], resumed
    assert "stopped renewing" not in host.log_text()
    assert not any("stopped renewing" in line or "crashed" in line
                   for line in project.log_lines())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("step", [-HOUR, HOUR], ids=["back", "forward"])
def test_a_stopped_worker_is_still_recovered_a_lease_later_after_a_step(
        project: Project, tmp_path: Path, step: int) -> None:
    """The worker_stop drill fault's meaning holds whatever the clock did: hung after
    a lease of the host's monotonic time, killed, its run resumed."""
    offset = tmp_path / "offset"
    project.env.update(_stepped(project.env, offset))
    lease_s = project.settings.lease_ms / 1000
    project.write_workflow("flow", FLOW)
    project.start_host()
    run = project.detach("flow")
    wait_for(lambda: len(project.lines("hold.started")) == 1, 60, what="the held node")
    worker = next(p["pid"] for p in project.state_processes(run) if p.get("role") == "worker")
    set_offset(offset, step)
    os.kill(worker, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        wait_for(lambda: len(project.lines("hold.started")) == 2, 6 * lease_s,
                 what="the run resumed by a new worker", diag=lambda: project.diagnose([run]))
        waited = time.monotonic() - stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGCONT)
    # A lease after its last renewal, which came up to a renewal interval before the
    # stop; a step that judged the lease by the wall clock would act at once.
    assert lease_s / 2 <= waited < 4 * lease_s
    set_offset(offset, 0)
    project.release()
    wait_for(lambda: project.row(run).state == "done", 60, what="the run to finish",
             diag=lambda: project.diagnose([run]))
    assert len(project.lines("first.txt")) == 1 and len(project.lines("last.txt")) == 1
