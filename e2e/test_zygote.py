"""Zygote drills: forked workers keep every process invariant; a dead zygote is replaced.

A worker forked by the zygote is in its own session, carries its run's
marker in ``/proc/PID/environ``, has its own random state, and is the
zygote's child (never the host's); a ``kill -9`` of the zygote leaves runs
in flight alone and the host forks again from a new one, spawning cold
workers meanwhile; with the zygote off every worker is the host's child.
The zygote's spare (one worker forked ahead) serves the next run, is
replaced after it does or dies, never outlives its host, and is off with
``PI_WORKFLOWS_ZYGOTE_SPARE=false``.
"""

from __future__ import annotations

import json
import os
import signal

import psutil
import pytest
from pi_workflows.protocol.paths import project_key
from pi_workflows.protocol.wire import MARKER_ENV

from .harness import HostProcess, Project, alive, wait_for
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

RANDOM = HOLD + """
import json, os, random
from pi_workflows import define_workflow, compute, edge

def draw(ctx):
    with open(ctx.project_dir / "draws.txt", "a") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "x": random.random()}) + "\\n")
    return {}

workflow = define_workflow(start_at="draw", nodes=[compute("draw", draw),
                           compute("hold", hold("hold"))], edges=[edge("draw", "hold")])
"""


def _title(proc: psutil.Process) -> str:
    """What ``ps`` shows (setproctitle pads the original command line with NULs)."""
    return " ".join(proc.cmdline()).strip()


def _zygote(host_pid: int, key: str) -> psutil.Process | None:
    for child in psutil.Process(host_pid).children():
        try:
            if _title(child) == f"pi-workflows zygote {key}":
                return child
        except psutil.Error:
            continue
    return None


def _spare(zygote: psutil.Process, key: str) -> psutil.Process | None:
    for child in zygote.children():
        try:
            if _title(child) == f"pi-workflows worker {key} spare":
                return child
        except psutil.Error:
            continue
    return None


def _host_with_zygote(project: Project, *extra: str) -> tuple[HostProcess, str, psutil.Process]:
    """A host of ``project`` running ``draw``: (host, project key, its booted zygote)."""
    project.write_workflow("draw", RANDOM)
    host = project.start_host(*extra)
    key = project_key(project.root)
    return host, key, wait_for(lambda: _zygote(host.pid, key), what="the zygote")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _worker_pids(project: Project, runs: list[str]) -> dict[str, int]:
    return {r: p["pid"] for r in runs for p in project.state_processes(r)
            if p["role"] == "worker"}


def _raw_marker(pid: int) -> str:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        entries = fh.read().split(b"\0")
    prefix = MARKER_ENV.encode() + b"="
    return next(e[len(prefix):].decode() for e in entries if e.startswith(prefix))


@pytest.mark.timeout(90)
def test_forked_workers_keep_the_invariants_and_draw_different_randoms(
        project: Project) -> None:
    project.write_workflow("draw", RANDOM)
    host = project.start_host("--concurrency", "2")
    key = project_key(project.root)
    zygote = wait_for(lambda: _zygote(host.pid, key), what="the zygote's title in ps")
    assert os.getpgid(zygote.pid) == zygote.pid and os.getsid(zygote.pid) == zygote.pid
    runs = [project.detach("draw") for _ in range(2)]
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="both runs holding")
    workers = _worker_pids(project, runs)
    for run_id, pid in workers.items():
        proc = psutil.Process(pid)
        assert proc.ppid() == zygote.pid  # forked, not booted: never the host's child
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid
        assert _raw_marker(pid) == f"{key}/{host.runner_id}/{run_id}"
        assert proc.environ()[MARKER_ENV] == f"{key}/{host.runner_id}/{run_id}"
        assert _title(proc) == f"pi-workflows worker {key} {run_id} node=hold"
    draws = [json.loads(line) for line in project.lines("draws.txt")]
    assert {d["pid"] for d in draws} == set(workers.values())
    assert draws[0]["x"] != draws[1]["x"]
    project.release()
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), what="runs done")
    assert host.poll() is None


@pytest.mark.timeout(120)
def test_a_killed_zygote_leaves_runs_alone_and_is_replaced(project: Project) -> None:
    project.write_workflow("draw", RANDOM)
    host = project.start_host("--concurrency", "3")
    key = project_key(project.root)
    first = wait_for(lambda: _zygote(host.pid, key), what="the zygote")
    held = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="a run holding")
    worker = _worker_pids(project, [held])[held]
    os.kill(first.pid, signal.SIGKILL)
    # The next run does not wait for a new zygote: it gets a cold worker, or a forked
    # one if the new zygote is already up.
    second_run = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="the next run holding")
    new = wait_for(lambda: (z := _zygote(host.pid, key)) and z.pid != first.pid and z,
                   what="a new zygote")
    assert alive(worker) and project.row(held).state == "running"  # in flight: untouched
    third = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 3, what="a third run holding")
    assert psutil.Process(_worker_pids(project, [third])[third]).ppid() == new.pid
    project.release()
    runs = [held, second_run, third]
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), what="runs done",
             diag=lambda: project.diagnose(runs))
    # The orphaned worker's exit was never reported: its settled run made it clean.
    assert "crashed" not in host.log_text()
    assert host.poll() is None


@pytest.mark.timeout(90)
def test_with_the_zygote_off_workers_are_cold_children_of_the_host(project: Project) -> None:
    project.env["PI_WORKFLOWS_ZYGOTE"] = "false"
    project.write_workflow("draw", RANDOM)
    host = project.start_host()
    run_id = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the run holding")
    pid = _worker_pids(project, [run_id])[run_id]
    assert psutil.Process(pid).ppid() == host.pid
    assert _zygote(host.pid, project_key(project.root)) is None
    assert _raw_marker(pid) == f"{project_key(project.root)}/{host.runner_id}/{run_id}"
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", what="run done")


@pytest.mark.timeout(90)
def test_the_spare_is_booted_ahead_and_becomes_the_next_worker(project: Project) -> None:
    host, key, zygote = _host_with_zygote(project, "--concurrency", "2")
    first = wait_for(lambda: _spare(zygote, key), what="a spare beside the zygote")
    assert os.getpgid(first.pid) == first.pid and os.getsid(first.pid) == first.pid
    assert _raw_marker(first.pid) == f"{key}/{host.runner_id}/zygote"  # no run yet
    run_id = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the run holding")
    # The spare became the run's worker, with the run's marker and title ...
    assert _worker_pids(project, [run_id])[run_id] == first.pid
    assert _raw_marker(first.pid) == f"{key}/{host.runner_id}/{run_id}"
    assert _title(first) == f"pi-workflows worker {key} {run_id} node=hold"
    # ... and another was forked for the run after it.
    second = wait_for(lambda: (s := _spare(zygote, key)) and s.pid != first.pid and s,
                      what="a new spare")
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", what="run done")
    # A graceful stop takes the spare with it: it has no run to park.
    _, code = project.stop_host(host)
    assert code == 0
    assert _gone(second.pid) and _gone(zygote.pid)


@pytest.mark.timeout(90)
def test_a_spare_dies_with_its_host(project: Project) -> None:
    host, key, zygote = _host_with_zygote(project)
    spare = wait_for(lambda: _spare(zygote, key), what="a spare")
    os.kill(host.pid, signal.SIGKILL)
    wait_for(lambda: _gone(spare.pid), 10, what="the spare to follow its host")


@pytest.mark.timeout(120)
def test_spares_that_keep_dying_are_replaced_then_given_up(project: Project) -> None:
    host, key, zygote = _host_with_zygote(project)
    killed: list[int] = []
    for _ in range(3):
        spare = wait_for(lambda: (s := _spare(zygote, key)) and s.pid not in killed and s,
                         what="a (new) spare")
        os.kill(spare.pid, signal.SIGKILL)
        killed.append(spare.pid)
    wait_for(lambda: "spares in a row died" in host.log_text(), what="the zygote giving up")
    assert _spare(zygote, key) is None
    # Runs do not notice: the zygote forks each worker when it is asked.
    run_id = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the run holding")
    worker = psutil.Process(_worker_pids(project, [run_id])[run_id])
    assert worker.ppid() == zygote.pid and worker.pid not in killed
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", what="run done")
    assert zygote.is_running() and host.poll() is None
    assert "crashed" not in host.log_text()  # a spare's death is no run's crash


@pytest.mark.timeout(90)
def test_with_the_spare_off_each_worker_is_forked_on_request(project: Project) -> None:
    project.env["PI_WORKFLOWS_ZYGOTE_SPARE"] = "false"
    _, _, zygote = _host_with_zygote(project)
    run_id = project.detach("draw")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the run holding")
    worker = _worker_pids(project, [run_id])[run_id]
    assert [c.pid for c in zygote.children()] == [worker]  # no spare beside it
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", what="run done")
    wait_for(lambda: zygote.children() == [], what="no child left beside the zygote")
