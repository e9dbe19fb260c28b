"""`pi-workflows run NAME` in a terminal: owned from birth, shown live, parked on close."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from .harness import Project, alive, wait_for
from .sessions_kit import FLOW

pytestmark = pytest.mark.slow  # real processes: an e2e drill


def _attached(project: Project, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pi_workflows", "run", "flow", *args,
                             "--project", str(project.root)], env=project.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("task", "code", "last"), [
    ("done", 0, "completed: {\"ok\": true}"),
    ("ask", 3, "waiting at ask: go on?"),
    ("fail", 1, "failed [node_error] node 'boom': RuntimeError: no luck today"),
])
def test_an_attached_run_shows_its_steps_and_exits_with_its_outcome(
        project: Project, task: str, code: int, last: str) -> None:
    project.write_workflow("flow", FLOW)
    proc = _attached(project, task)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    lines = out.splitlines()
    assert lines[0].startswith("run ") and "pick: started (step 1)" in out
    assert lines[-1].endswith(last)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["ctrl-c", "kill-9"])
def test_closing_the_terminal_parks_the_run_and_a_host_finishes_it(
        project: Project, how: str) -> None:
    project.write_workflow("flow", FLOW)
    proc = _attached(project, "hold")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node running")
    run_id = json.loads(project.cli("list", "--json").stdout)["runs"][0]["runId"]
    if how == "ctrl-c":
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 4 and "parked" in out.splitlines()[-1]
    else:
        worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
        proc.kill()  # the terminal dies; its worker sees it (PDEATHSIG) and parks
        proc.communicate(timeout=30)
        wait_for(lambda: not alive(worker["pid"]), what="the worker to park")
    assert project.row(run_id).state == "parked"
    state = project.state(run_id)
    assert state["status"] == "running" and state["currentNode"] == "hold"
    project.release()
    project.start_host()
    wait_for(lambda: project.row(run_id).state == "done", what="host finished the run")
    assert project.state(run_id)["finalOutput"] == {"ok": True}
    assert len(project.lines("hold.started")) == 2


@pytest.mark.timeout(90)
def test_one_active_run_per_session_and_json_output(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    first = _attached(project, "hold", "--session", "s1")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="first run holding")
    second = project.cli("run", "flow", "done", "--session", "s1", check=False)
    assert second.returncode == 2 and "already has an active run" in second.stderr
    other = project.cli("run", "flow", "done", "--session", "s2", "--json")
    assert json.loads(other.stdout)["runStatus"] == "completed"
    project.release()
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and out.splitlines()[-1].endswith('completed: {"ok": true}')


@pytest.mark.timeout(120)
def test_a_running_host_takes_over_a_dead_terminals_run_without_waiting_for_the_lease(
        project: Project) -> None:
    project.env["PI_WORKFLOWS_LEASE_MS"] = "600000"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "100000"
    project.write_workflow("flow", FLOW)
    project.start_host()
    proc = _attached(project, "hold")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node running")
    run_id = json.loads(project.cli("list", "--json").stdout)["runs"][0]["runId"]
    worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
    os.kill(worker["pid"], signal.SIGSTOP)  # it cannot park: its claim stays behind
    proc.kill()
    proc.wait(30)  # (the frozen worker still holds the inherited output pipes)
    project.release()
    wait_for(lambda: project.row(run_id).state == "done", timeout=60,
             what="the host took the run over", diag=lambda: project.diagnose([run_id]))
    assert not alive(worker["pid"])  # the frozen worker was killed, not left behind
    with project.store() as store:
        reasons = [e.payload.get("reason") for e in store.events_since(0, run_id=run_id)
                   if e.type == "claim_taken_over"]
    assert reasons == ["runner_dead"]  # by proof, long before the 600 s lease


SLOW_SHELL = """
from pi_workflows import define_workflow, shell

workflow = define_workflow(
    start_at="deploy",
    nodes=[shell("deploy", "echo started >> deploy.started; sleep 60")],
)
"""


@pytest.mark.timeout(120)
def test_a_second_ctrl_c_says_the_step_was_cut_short_and_what_fork_will_do(
        project: Project) -> None:
    project.write_workflow("slow", SLOW_SHELL)
    log = project.root / "terminal.txt"
    with open(log, "w") as terminal:
        proc = subprocess.Popen([sys.executable, "-m", "pi_workflows", "run", "slow",
                                 "--project", str(project.root)], env=project.env,
                                stdout=terminal, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: len(project.lines("deploy.started")) == 1,
                     what="the shell step running")
            proc.send_signal(signal.SIGINT)  # the step may finish first: it sleeps a minute
            # Two signals sent at once arrive as one: the second waits for the first's word.
            wait_for(lambda: "Ctrl-C again" in log.read_text(), what="the first Ctrl-C's word")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(60) == 4, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    out = log.read_text()
    run_id = json.loads(project.cli("list", "--json").stdout)["runs"][0]["runId"]
    assert "Ctrl-C again stops at once: a shell or action step cut short is then not run" \
           " again by itself" in out
    assert (f"stopped at once: step deploy was cut short, so its effect is indeterminate"
            f" and the run will not repeat it by itself; once the run has ended,"
            f" `pi-workflows fork {run_id} --from deploy --project {project.root}` runs it"
            " again") in out  # started from elsewhere: the command names its project
    assert project.row(run_id).state == "parked"
