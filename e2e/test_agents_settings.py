"""Whose agent settings a detached run uses: the agent dir of the shell that queued it
(recorded with the run, whichever host runs it), provider variables from the host; and
the one line `run --detach` prints when the host's side differs from the caller's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .agents_kit import Turn, submit, use_brain, wait_queue
from .harness import Project
from .scripted_model import Reply, ToolCalls

pytestmark = pytest.mark.slow  # real host, worker and Pi

ASK = """
from pi_workflows import define_workflow, agent

workflow = define_workflow(start_at="ask", nodes=[agent("ask", "Answer the question")])
"""
NOTE = "pi-workflows: note: agent settings differ from host"


def detach(project: Project, env: dict[str, str]) -> tuple[str, str]:
    """(run id, stderr) of `run ask --detach` from a shell with ``env``."""
    saved = project.env
    project.env = env
    try:
        proc = project.cli("run", "ask", "--detach")
    finally:
        project.env = saved
    return proc.stdout.strip(), proc.stderr


@pytest.mark.timeout(180)
def test_a_detached_run_uses_the_callers_agent_dir_and_says_when_the_host_differs(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)

    def decide(turn: Turn) -> Reply | None:
        return ToolCalls(submit(turn.attempt, {"answer": 42})) if turn.index == 0 else None

    with use_brain(project, tmp_path, decide) as brain:
        caller = dict(project.env)  # has PI_WORKFLOWS_PI_AGENT_DIR: the scripted model
        agent_dir = caller["PI_WORKFLOWS_PI_AGENT_DIR"]
        del project.env["PI_WORKFLOWS_PI_AGENT_DIR"]  # the host has none
        host = project.start_host()
        assert host.lock["agentDir"] is None and host.lock["providerEnv"] == []

        run_id, err = detach(project, {**caller, "SCRIPTED_TEST_API_KEY": "sk-secret-9f8e"})
        # One line: the recorded agent dir and the key the host lacks, by name only.
        (line,) = [ln for ln in err.splitlines() if ln.startswith(NOTE)]
        assert f"this run uses agent dir {agent_dir}, recorded from here" in line
        assert "lacks SCRIPTED_TEST_API_KEY" in line and "sk-secret" not in err
        status = json.loads(project.cli("status", run_id, "--json").stdout)
        assert (status["agentDir"], status["agentDirFrom"]) == (agent_dir, "run")

        # Without the recorded dir the host's Pi has no provider: "No API key found".
        wait_queue(project, run_id, "done", "failed", brain=brain)
        state = project.state(run_id)
        assert state["status"] == "completed", (state.get("error"), host.log_text()[-2000:])
        assert state["finalOutput"] == {"answer": 42}
        assert len(brain.of("ask")) == 1
        # Nothing of the secret reached the store or the bundle.
        assert "sk-secret" not in project.paths.store_file.read_bytes().decode(errors="replace")
        project.stop_host(host)

        # A host with the caller's settings: no note.
        project.env["PI_WORKFLOWS_PI_AGENT_DIR"] = agent_dir
        host = project.start_host(log="host2.log")
        again, err = detach(project, caller)
        assert NOTE not in err, err
        wait_queue(project, again, "done", brain=brain)
        project.stop_host(host)
