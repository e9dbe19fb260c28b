"""Queueing work with no host running says so (the run would wait silently otherwise)."""

from __future__ import annotations

import json

import pytest

from .harness import Project

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FLOW = """
from pi_workflows import define_workflow, compute

workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: {"a": 1})])
"""
# Called from outside the project: the command names it.
WARNING = ("pi-workflows: queued; no host is running for this project: start one with"
           " `pi-workflows host --background --project {root}`\n")


@pytest.mark.timeout(90)
def test_run_detach_warns_without_a_host_and_not_with_one(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    alone = project.cli("run", "flow", "--detach", "--json")
    assert alone.stderr == WARNING.format(root=project.root)
    assert json.loads(alone.stdout)["state"] == "queued"  # stdout stays machine-readable
    project.start_host()
    hosted = project.cli("run", "flow", "--detach")
    assert "no host is running" not in hosted.stderr


ASK = """
from pi_workflows import define_workflow, checkpoint

workflow = define_workflow(start_at="ask", nodes=[checkpoint("ask", summary="ship it?")])
"""


@pytest.mark.timeout(90)
def test_answer_and_resume_warn_without_a_host(project: Project) -> None:
    project.write_workflow("ask", ASK)
    project.write_workflow("flow", FLOW)
    waiting = project.cli("run", "ask", "--json", check=False)
    assert waiting.returncode == 3, waiting.stderr
    answered = project.cli("answer", json.loads(waiting.stdout)["runId"], "yes")
    assert answered.stderr == WARNING.format(root=project.root)
    with project.store() as store:  # a run some runner parked
        (run,) = project.enqueue(store, "flow")
        claim = store.claim_by_id(run, "gone-runner")
        store.mark_running(run, claim.token)
        store.park(run, claim.token)
    assert project.cli("resume", run).stderr == WARNING.format(root=project.root)


@pytest.mark.timeout(90)
def test_status_without_a_run_lists_runs_waiting_for_an_answer(project: Project) -> None:
    project.write_workflow("ask", ASK)
    waiting = project.cli("run", "ask", check=False)
    assert waiting.returncode == 3, waiting.stderr
    out = project.cli("status").stdout
    assert "waiting at ask" in out and "no unfinished runs" not in out


@pytest.mark.timeout(90)
def test_activate_json_reports_the_sessions_run(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    project.cli("start", "flow", "--session", "s1")
    out = project.cli("activate", "--session", "s1", "--json")
    data = json.loads(out.stdout)  # no live lines mixed in
    assert data["session"] == "s1" and data["run"]["runStatus"] == "completed"
    none = json.loads(project.cli("activate", "--session", "s2", "--json").stdout)
    assert none == {"session": "s2", "run": None}
