"""Human decisions through the command line and a real host (issue 23, item 3).

``examples/approve.workflow.py`` runs as shipped: its waiting run shows the
question and the answers in ``status``; ``answer`` refuses anything else with
one line (exit 2, both command-line paths, nothing queued); a valid answer
routes on its label; a text input's bounds hold; and ``on_timeout`` is
answered by the host exactly once across ``kill -9`` of two hosts.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.clock import now_ms

from .harness import Project, wait_for
from .sessions_kit import query

pytestmark = pytest.mark.slow  # real processes: an e2e drill

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "approve.workflow.py"
ANSWERS = "publish, drop, revise TEXT (3-500 characters)"


def _install(project: Project) -> None:
    target = project.root / ".pi" / "workflows" / "approve.workflow.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(EXAMPLE, target)


def _waiting_run(project: Project, payload: Any) -> str:
    run = json.loads(project.cli("run", "approve", "--input-json", json.dumps(payload),
                                 "--detach", "--json").stdout)["runId"]
    wait_for(lambda: project.state(run).get("status") == "waiting", 60, what="the decision")
    return str(run)


def _children(project: Project, run: str) -> list[str]:
    rows = query(project, "SELECT run_id FROM workflow_run_queue WHERE parent_run_id = ?",
                 (run,))
    return [str(r["run_id"]) for r in rows]


def _status(project: Project, run: str) -> dict[str, Any]:
    return dict(json.loads(project.cli("status", run, "--json").stdout))


@pytest.mark.timeout(180)
def test_the_example_asks_refuses_other_answers_and_routes_on_the_label(
        project: Project) -> None:
    _install(project)
    project.start_host()
    run = _waiting_run(project, {"change": "fixed the login bug"})
    status = _status(project, run)
    request = status["request"]
    assert request["question"].startswith("Publish this release note?")
    assert request["audience"] == "the release manager"
    assert [c["label"] for c in request["choices"]] == ["publish", "drop", "revise"]
    assert request["onTimeout"] == "drop" and request["dueAt"] > now_ms() + 3_600_000
    human = project.cli("status", run).stdout
    assert "who should answer: the release manager" in human
    assert "revise TEXT (3-500 characters) - what should change in the note" in human
    assert "the host answers drop" in human

    # Refused, by the fast path and by the typer app alike: the same one line, exit 2.
    for given in (["maybe"], ["publish", "now"], ["revise", "no"], ["revise", "x" * 501]):
        fast = project.cli("answer", run, *given, "--json", check=False)
        project.env["PI_WORKFLOWS_NO_FAST_CLI"] = "1"
        try:
            typer = project.cli("answer", run, *given, "--json", check=False)
        finally:
            del project.env["PI_WORKFLOWS_NO_FAST_CLI"]
        assert fast.returncode == typer.returncode == 2, (fast.stderr, typer.stderr)
        assert fast.stderr == typer.stderr and fast.stdout == typer.stdout == ""
        [line] = fast.stderr.splitlines()
        assert line.startswith("pi-workflows: error: ") and line.endswith(
            f"run {run} takes one of: {ANSWERS}"), line
        assert "x" * 20 not in line and "maybe" not in line
    assert _children(project, run) == []  # nothing queued

    out = json.loads(project.cli("answer", run, "revise", "mention", "the", "error", "page",
                                 "--json").stdout)
    assert out["choice"] == "revise" and out["parentRunId"] == run
    child = out["runId"]
    wait_for(lambda: project.row(child).state == "done", 60, what="the continuation")
    final = _status(project, child)
    assert final["finalOutput"]["message"] == "to revise: mention the error page"
    assert final["answeredWith"] == "revise" and final["answeredBy"] == "person"

    second = _waiting_run(project, {"change": "new logo"})
    out = json.loads(project.cli("answer", second, "PUBLISH", "--json").stdout)
    assert out["choice"] == "publish"
    wait_for(lambda: project.row(out["runId"]).state == "done", 60, what="the publish")
    assert _status(project, out["runId"])["finalOutput"]["message"].startswith("published ")
    assert list((project.root / "release-notes").iterdir())


@pytest.mark.timeout(240)
def test_on_timeout_is_answered_once_by_the_host_across_kill_9(project: Project) -> None:
    _install(project)
    first = project.start_host()
    run = _waiting_run(project, {"change": "fixed the login bug", "wait_s": 5})
    due = project.state(run)["waitingOutput"]["request"]["dueAt"]
    first.send_signal(signal.SIGKILL)  # before the deadline: nobody is there when it passes
    first.wait(10)
    wait_for(lambda: now_ms() > due + 200, 30, what="the deadline to pass")
    assert _children(project, run) == []

    second = project.start_host()
    child = wait_for(lambda: _children(project, run), 60, what="the timeout's answer")[0]
    wait_for(lambda: project.row(child).state == "done", 60, what="the continuation")
    status = _status(project, child)
    assert status["finalOutput"]["message"] == "not published (nobody answered in time)"
    assert status["answeredWith"] == "drop" and status["answeredBy"] == "timeout"
    assert "answered by timeout with drop" in project.cli("status", child).stdout
    assert "answered by timeout" in second.log_text()

    # Killed after it answered: the next host does not answer again.
    second.send_signal(signal.SIGKILL)
    second.wait(10)
    project.start_host()
    # A run the new host takes proves its passes ran (the deadline step precedes claims).
    marker = _waiting_run(project, {"change": "marker"})
    assert marker
    assert _children(project, run) == [child]


@pytest.mark.timeout(120)
def test_a_running_host_answers_on_timeout_when_the_deadline_passes(project: Project) -> None:
    _install(project)
    host = project.start_host()
    run = _waiting_run(project, {"change": "fixed the login bug", "wait_s": 2})
    due = project.state(run)["waitingOutput"]["request"]["dueAt"]
    child = wait_for(lambda: _children(project, run), 60, what="the timeout's answer")[0]
    assert project.row(child).created_at >= due
    wait_for(lambda: project.row(child).state == "done", 60, what="the continuation")
    assert _status(project, child)["answeredBy"] == "timeout"
    assert f"run {run}: answered by timeout with 'drop'" in host.log_text()
