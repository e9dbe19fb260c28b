"""Host drills: concurrency with titled workers, worker kill -9, second host, drain, crash loop."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from pi_workflows.protocol.paths import project_key

from .harness import Project, alive, wait_for
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

PIPELINE = HOLD + """
from pi_workflows import define_workflow, compute, shell, edge

workflow = define_workflow(
    start_at="first",
    nodes=[
        shell("first", "echo $PPID >> first.txt"),
        compute("hold", hold("hold")),
        shell("last", "echo done >> last.txt"),
    ],
    edges=[edge("first", "hold"), edge("hold", "last")],
)
"""


def _worker_titles() -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.startswith("pi-workflows worker")]


@pytest.mark.timeout(90)
def test_three_runs_in_parallel_with_titled_workers(project: Project) -> None:
    project.write_workflow("pipeline", PIPELINE)
    project.start_host("--concurrency", "3")
    runs = [project.detach("pipeline") for _ in range(3)]
    wait_for(lambda: len(project.lines("hold.started")) == 3, what="three held nodes")
    titles = _worker_titles()
    key = project_key(project.root)
    for run_id in runs:
        assert sum(f"pi-workflows worker {key} {run_id} node=hold" in t
                   for t in titles) == 1, titles
    project.release()
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), what="runs done")
    assert all(project.state(r)["status"] == "completed" for r in runs)
    assert len(project.lines("first.txt")) == 3 and len(project.lines("last.txt")) == 3


@pytest.mark.timeout(90)
def test_worker_kill9_resumes_without_repeating_finished_nodes(project: Project) -> None:
    project.write_workflow("pipeline", PIPELINE)
    project.start_host()
    run_id = project.detach("pipeline")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node hold running")
    worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
    os.kill(worker["pid"], signal.SIGKILL)
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="hold rerun after restart")
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", what="run done")
    assert project.lines("first.txt").__len__() == 1  # finished node not repeated
    assert len(project.lines("last.txt")) == 1
    types = [e["type"] for e in project.events(run_id)]
    assert types.count("run_resumed") == 1 and types[-1] == "run_completed"
    seqs = [e["seq"] for e in project.events(run_id)]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.timeout(90)
def test_second_host_is_refused_and_first_keeps_working(project: Project) -> None:
    project.write_workflow("pipeline", PIPELINE)
    first = project.start_host()
    run_id = project.detach("pipeline")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node hold running")
    worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
    second = project.cli("host", check=False, timeout=30)
    assert second.returncode == 2
    assert f"pid {first.pid}" in second.stderr and len(second.stderr.strip().splitlines()) == 1
    os.kill(worker["pid"], 0)  # still alive: the refused host touched nothing
    assert first.poll() is None
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", what="run done")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_sigterm_drain_parks_and_a_new_host_completes(project: Project, sig: int) -> None:
    project.write_workflow("pipeline", PIPELINE)
    host = project.start_host("--concurrency", "2")
    runs = [project.detach("pipeline") for _ in range(2)]
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="both runs holding")
    host.send_signal(sig)
    assert host.wait(30) == 0
    for run_id in runs:
        assert project.row(run_id).state == "parked"
        state = project.state(run_id)
        assert state["status"] == "running" and state["currentNode"] == "hold"
        assert not any(e["type"].startswith("run_") and e["type"] not in ("run_started",
                       "run_resumed", "run_paused") for e in project.events(run_id))
    assert json.loads(project.paths.host_lock.read_text() or "{}") == {}
    project.release()
    project.start_host("--concurrency", "2", log="host2.log")
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), what="runs done")
    assert len(project.lines("first.txt")) == 2 and len(project.lines("last.txt")) == 2


CRASHER = """
import os
from pi_workflows import define_workflow, compute

def boom(ctx):
    with open(ctx.project_dir / "crash.txt", "a") as fh:
        fh.write("x\\n")
    os._exit(1)

workflow = define_workflow(start_at="boom", nodes=[compute("boom", boom)])
"""

QUICK = """
from pi_workflows import define_workflow, compute
workflow = define_workflow(start_at="one", nodes=[compute("one", lambda ctx: {"ok": 1})])
"""


@pytest.mark.timeout(90)
def test_crash_loop_fails_the_run_and_the_host_keeps_serving(project: Project) -> None:
    project.write_workflow("crasher", CRASHER)
    project.write_workflow("quick", QUICK)
    host = project.start_host()
    bad = project.detach("crasher")
    wait_for(lambda: project.row(bad).state == "failed", what="crash loop detected")
    row = project.row(bad)
    assert row.error_code == "worker_crash_loop"
    assert "crashed 3 times" in (row.error_message or "")
    assert len(project.lines("crash.txt")) == 3
    good = project.detach("quick")
    wait_for(lambda: project.row(good).state == "done", what="other run done")
    assert host.poll() is None


QUIET_EXIT = """
import os
from pi_workflows import define_workflow, compute

def bye(ctx):
    with open(ctx.project_dir / "exit0.txt", "a") as fh:
        fh.write("x\\n")
    os._exit(0)  # looks like a clean exit, but the run was never settled

workflow = define_workflow(start_at="bye", nodes=[compute("bye", bye)])
"""


@pytest.mark.timeout(90)
def test_a_clean_looking_exit_that_left_the_claim_counts_as_a_crash(project: Project) -> None:
    project.write_workflow("quiet", QUIET_EXIT)
    project.start_host()
    run_id = project.detach("quiet")
    wait_for(lambda: project.row(run_id).state == "failed", what="crash loop detected")
    assert project.row(run_id).error_code == "worker_crash_loop"
    assert len(project.lines("exit0.txt")) == 3


LONG_SHELL = """
from pi_workflows import define_workflow, shell
workflow = define_workflow(start_at="s", nodes=[
    shell("s", "echo $$ >> shell.pid; exec sleep 300", idempotent=True)])
"""


@pytest.mark.timeout(90)
def test_a_killed_workers_shell_command_is_reaped_before_the_node_reruns(
        project: Project) -> None:
    project.write_workflow("long", LONG_SHELL)
    project.start_host()
    run_id = project.detach("long")
    wait_for(lambda: len(project.lines("shell.pid")) == 1, what="command started")
    first = int(project.lines("shell.pid")[0])
    worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
    os.kill(worker["pid"], signal.SIGKILL)
    wait_for(lambda: len(project.lines("shell.pid")) == 2, what="node rerun")
    # The first command (in a session of its own) was killed before the rerun.
    assert not alive(first)
    second = int(project.lines("shell.pid")[1])
    assert alive(second)
    project.cli("cancel", run_id)
    wait_for(lambda: project.row(run_id).state == "cancelled", what="cancelled")
    wait_for(lambda: not alive(second), what="the rerun's command stopped with the run")

