"""Agent steps when things break: the host killed -9 while Pi's bash tool runs a command
(the worker, Pi and the command are reaped or stop, and the run resumes), and a
missing Pi, a Pi that exits at once and a provider error each failing only their node,
with a safe message, while the host goes on with the next run."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from .agents_kit import (
    STEP_S,
    Turn,
    all_text,
    gone,
    marked,
    of_type,
    roles,
    stop_hosts_and_check_nothing_left,
    submit,
    use_brain,
    wait_queue,
)
from .harness import Project, wait_for
from .scripted_model import HttpError, Reply, ToolCalls, call

pytestmark = pytest.mark.slow  # real processes: an e2e drill

BUILD = """
from pi_workflows import define_workflow, agent, compute, edge

workflow = define_workflow(
    start_at="build",
    nodes=[agent("build", "Run the slow build and report the result"),
           compute("end", lambda ctx: {"build": ctx.outputs["build"]})],
    edges=[edge("build", "end")],
)
"""


def commands(project: Project, text: str) -> list[psutil.Process]:
    """The project's marked processes whose command line holds ``text``."""
    found = []
    for proc in marked(project):
        try:
            if text in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.timeout(240)
@pytest.mark.parametrize("worker", ["frozen", "live"])
def test_host_kill9_while_pi_runs_a_bash_command(project: Project, tmp_path: Path,
                                                  worker: str) -> None:
    """frozen: the worker cannot react, so the new host must reap the worker, Pi and the
    command (found by pid and start time, and by marker) before it takes the run over.
    live: the worker notices its host died and parks, stopping Pi and the command."""
    # A lease far longer than the test: a takeover must come from proof of death.
    project.env["PI_WORKFLOWS_LEASE_MS"] = "600000"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "100000"
    project.write_workflow("build", BUILD)

    def decide(turn: Turn) -> Reply | None:
        if turn.node != "build" or turn.index != 0:
            return None
        if turn.n == 1:
            return ToolCalls(call("bash", {"command": "sleep 300"}))
        return ToolCalls(submit(turn.attempt, "built"))

    with use_brain(project, tmp_path, decide) as brain:
        host = project.start_host()
        run_id = project.detach("build")
        sleepers = wait_for(lambda: commands(project, "sleep 300"), timeout=STEP_S,
                            what="Pi's bash tool running sleep 300",
                            diag=lambda: project.diagnose([run_id]) + brain.describe())
        (worker_entry,) = roles(project, run_id, "worker")
        (pi_entry,) = roles(project, run_id, "pi")
        procs = {"worker": psutil.Process(worker_entry["pid"]),
                 "pi": psutil.Process(pi_entry["pid"]),
                 **{f"bash command {p.pid}": p for p in sleepers}}
        # The bash command left Pi's session: only its marker (or pid) finds it.
        assert all(os.getsid(p.pid) != pi_entry["pid"] for p in sleepers)

        if worker == "frozen":
            os.kill(worker_entry["pid"], signal.SIGSTOP)
        os.kill(host.pid, signal.SIGKILL)
        host.wait()
        if worker == "frozen":
            for name, proc in procs.items():
                assert not gone(proc), f"{name} died with the host; nothing left to reap"
            assert project.row(run_id).state == "running"
        else:
            for name, proc in procs.items():
                wait_for(lambda proc=proc: gone(proc), timeout=STEP_S,
                         what=f"the {name} to stop when its worker parks")
            wait_queue(project, run_id, "parked", timeout=STEP_S)

        new = project.start_host(log="host2.log")
        for name, proc in procs.items():
            wait_for(lambda proc=proc: gone(proc), timeout=STEP_S, what=f"{name} reaped",
                     diag=new.log_text)
        wait_queue(project, run_id, "done", brain=brain)
        if worker == "frozen":
            wait_for(lambda: "took over" in new.log_text(), timeout=10,
                     what="the start-up report")
            assert f"reaped {len(procs)} orphan process(es); took over 1 run(s)" in \
                new.log_text(), new.log_text()
            with project.store() as store:
                reasons = [e.payload.get("reason") for e in store.events_since(0, run_id=run_id)
                           if e.type == "claim_taken_over"]
            assert reasons == ["runner_dead"]

        state = project.state(run_id)
        assert state["status"] == "completed" and state["finalOutput"] == {"build": "built"}
        (resumed,) = of_type(project.events(run_id), "run_resumed")
        assert resumed["payload"]["resumePoint"] == "build"
        first, again = brain.of("build", 1), brain.of("build", 2)
        assert len(first) == 1 and len(again) == 1, brain.describe()
        # The re-prompt continues the conversation that asked for the command.
        assert '"command": "sleep 300"' in all_text(again[0].request)
        assert [p["runnerId"] for p in roles(project, run_id, "pi")] == \
            [pi_entry["runnerId"], new.runner_id]
        assert not commands(project, "sleep 300")
        stop_hosts_and_check_nothing_left(project)


ONE_AGENT = """
from pi_workflows import define_workflow, agent, compute, edge

workflow = define_workflow(
    start_at="ask",
    nodes=[agent("ask", "Answer the question"), compute("end", lambda ctx: {"ok": True})],
    edges=[edge("ask", "end")],
)
"""
PLAIN = """
from pi_workflows import define_workflow, compute

workflow = define_workflow(start_at="only", nodes=[compute("only", lambda ctx: {"plain": 1})])
"""
EXITS = """#!/bin/sh
echo "Debugger listening" >&2
echo "pi: cannot load the model registry: token=sk-test-4f1e2d broken" >&2
exit 1
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("trouble", ["missing", "exits", "http_500"])
def test_a_broken_pi_or_provider_fails_the_node_safely_and_the_host_goes_on(
        project: Project, tmp_path: Path, trouble: str) -> None:
    project.write_workflow("ask", ONE_AGENT)
    project.write_workflow("plain", PLAIN)
    if trouble == "missing":
        project.env["PI_WORKFLOWS_PI_BIN"] = "/nonexistent"
    elif trouble == "exits":
        script = tmp_path / "broken-pi"
        script.write_text(EXITS)
        script.chmod(0o755)
        project.env["PI_WORKFLOWS_PI_BIN"] = str(script)
    error_body = {"error": {"message": "upstream overloaded (api_key=sk-live-99aa)",
                            "type": "server_error"}}

    def decide(turn: Turn) -> Reply | None:
        return HttpError(500, error_body) if turn.node == "ask" and turn.index == 0 else None

    with use_brain(project, tmp_path, decide) as brain:
        host = project.start_host("--concurrency", "1")
        agent_run = project.detach("ask")
        plain_run = project.detach("plain")  # queued behind it: one slot
        wait_queue(project, agent_run, "failed", "done", brain=brain)
        wait_queue(project, plain_run, "done", brain=brain)
        assert host.poll() is None

        status = json.loads(project.cli("status", agent_run, "--json").stdout)
        assert (status["queueState"], status["runStatus"]) == ("failed", "failed"), status
        expected = {"missing": "agent_unavailable", "exits": "agent_exited",
                    "http_500": "agent_provider_error"}[trouble]
        (failed,) = of_type(project.events(agent_run), "node_failed")
        assert failed["nodeId"] == "ask"
        result = failed["payload"]["result"]
        assert (result["outcome"], result["errorCode"]) == ("failed", expected), result
        message = result["error"]
        # The run says which node failed, with the node's message.
        assert (status["errorCode"], status["error"]) == (expected, f"node 'ask': {message}")
        assert "\n" not in message and len(message) < 600
        if trouble == "missing":
            assert message == "pi not found at /nonexistent (PI_WORKFLOWS_PI_BIN)"
        elif trouble == "exits":
            # Pi's exit status and the tail of its stderr, redacted.
            assert message == ("pi exited (status 1) during the step: Debugger listening /"
                               " pi: cannot load the model registry: token=[redacted] broken")
        else:
            assert message.startswith("the model provider failed: 500 upstream overloaded")
            assert "sk-live-99aa" not in message and "api_key=[redacted]" in message
        # The node failed, not the worker: one worker, never restarted.
        assert len(roles(project, agent_run, "worker")) == 1, project.diagnose([agent_run])
        assert not of_type(project.events(agent_run), "run_resumed")
        assert brain.model is not None
        assert len(brain.model.completions) == (1 if trouble == "http_500" else 0)
        assert project.state(plain_run)["finalOutput"] == {"plain": 1}
        # One slot: the host took the plain run only once the agent run had failed.
        assert project.events(plain_run)[0]["at"] >= project.events(agent_run)[-1]["at"]
        stop_hosts_and_check_nothing_left(project)
