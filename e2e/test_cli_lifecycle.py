"""CLI lifecycle through a live host: answer a checkpoint, cancel, status, bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.helpers.processes import reap

from .harness import LineReader, Project, wait_for
from .snippets import HOLD, ONE_NODE, REVIEW

pytestmark = pytest.mark.slow  # real processes: an e2e drill


@pytest.mark.timeout(90)
def test_answer_starts_a_continuation_that_carries_outputs(project: Project) -> None:
    project.write_workflow("review", REVIEW)
    project.start_host()
    run_id = json.loads(project.cli("run", "review", "the", "docs", "--detach",
                                    "--json").stdout)["runId"]
    wait_for(lambda: project.state(run_id).get("status") == "waiting", what="checkpoint")
    status = json.loads(project.cli("status", run_id, "--json").stdout)
    assert status["queueState"] == "done" and status["runStatus"] == "waiting"
    assert status["waitingOn"] == "approve" and status["summary"] == "approve v1 of the docs?"
    parent_before = sorted((p.name, p.read_bytes()) for p in
                           (project.paths.runs_dir / run_id).iterdir() if p.is_file())
    child = json.loads(project.cli("answer", run_id, "ship", "it", "--json").stdout)["runId"]
    wait_for(lambda: project.row(child).state == "done", what="continuation done")
    final = json.loads(project.cli("status", child, "--json").stdout)
    assert final["parentRunId"] == run_id
    assert final["finalOutput"] == {"published": "v1 of the docs", "answer": "ship it"}
    parent_after = sorted((p.name, p.read_bytes()) for p in
                          (project.paths.runs_dir / run_id).iterdir() if p.is_file())
    assert parent_after == parent_before  # the parent bundle never changes
    again = project.cli("answer", run_id, "no", check=False)
    assert again.returncode == 2 and f"its continuation is {child}" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


HOLDING = HOLD + """
from pi_workflows import define_workflow, compute
workflow = define_workflow(start_at="hold", nodes=[compute("hold", hold("hold"))])
"""


@pytest.mark.timeout(90)
def test_cancel_a_running_and_a_queued_run(project: Project) -> None:
    project.write_workflow("holding", HOLDING)
    project.start_host("--concurrency", "1")
    running = project.detach("holding")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node running")
    queued = project.detach("holding")
    assert project.row(queued).state == "queued"
    out = json.loads(project.cli("cancel", queued, "--json").stdout)
    assert out["state"] == "cancelled"
    out = json.loads(project.cli("cancel", running, "--no-wait", "--json").stdout)
    assert out["cancelRequested"] is True
    wait_for(lambda: project.row(running).state == "cancelled", what="running run cancelled")
    assert project.state(running)["status"] == "cancelled"
    assert [e["type"] for e in project.events(running)][-1] == "run_cancelled"
    assert len(project.lines("hold.started")) == 1  # the cancelled queued run never started


@pytest.mark.timeout(90)
def test_bad_input_is_one_line_and_leaves_no_row(project: Project) -> None:
    project.write_workflow("review", REVIEW)
    cases = [
        (["run", "review", "--detach", "--input-json", "{not json"], "not valid JSON"),
        (["run", "nosuch", "--detach"], "no workflow named 'nosuch'"),
        (["status", "../etc"], "invalid run id"),
        (["run", "review", "x", "--detach", "--input-json", "{}"], "not both"),
    ]
    for args, message in cases:
        proc = project.cli(*args, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr
    listing = project.cli("list", "--json")
    assert json.loads(listing.stdout) == {"runs": []}


@pytest.mark.timeout(120)
def test_cancel_a_parked_run_settles_its_bundle_too(project: Project) -> None:
    project.write_workflow("holding", HOLDING)
    project.write_workflow("quick", ONE_NODE)
    host = project.start_host("--concurrency", "2")
    runs = [project.detach("holding") for _ in range(2)]
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="both runs holding")
    host.send_signal(signal.SIGTERM)
    assert host.wait(30) == 0
    assert all(project.row(r).state == "parked" for r in runs)
    # A host with one slot resumes one run; the other stays parked while that
    # host runs and could claim it the moment a slot frees up.
    project.start_host("--concurrency", "1", log="host2.log")
    wait_for(lambda: len(project.lines("hold.started")) == 3
             and sorted(project.row(r).state for r in runs) == ["parked", "running"],
             what="one run resumed, the other parked", diag=lambda: project.diagnose(runs))
    resumed, parked = sorted(runs, key=lambda r: project.row(r).state != "running")
    out = json.loads(project.cli("cancel", parked, "--json").stdout)
    assert out["state"] == "cancelled"
    state = project.state(parked)
    assert state["status"] == "cancelled" and state["error"]["code"] == "cancelled"
    events = project.events(parked)
    assert events[-1]["type"] == "run_cancelled"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    project.release()
    # Runs are claimed oldest first, one per free slot: once a run enqueued
    # after the cancel is done, the host has had its chance at the cancelled one.
    later = project.detach("quick")
    wait_for(lambda: project.row(resumed).state == "done" and project.row(later).state == "done",
             what="the resumed run and a later one done", diag=lambda: project.diagnose(runs))
    assert project.row(parked).state == "cancelled"
    assert project.events(parked) == events and project.state(parked) == state
    assert len(project.lines("hold.started")) == 3  # the cancelled run never ran again


@pytest.mark.timeout(120)
def test_an_edited_workflow_blocks_the_resume_until_forced(project: Project) -> None:
    path = project.write_workflow("holding", HOLDING)
    host = project.start_host()
    run_id = project.detach("holding")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node running")
    host.send_signal(signal.SIGTERM)
    assert host.wait(30) == 0
    path.write_text(path.read_text() + "\n# edited while the run was parked\n")
    project.release()
    project.start_host(log="host2.log")
    wait_for(lambda: project.row(run_id).error_code == "source_changed",
             what="the resume refused", diag=lambda: project.diagnose([run_id]))
    row = project.row(run_id)
    assert row.state == "parked" and project.state(run_id)["status"] == "running"
    refused = project.cli("resume", run_id, check=False)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    out = json.loads(project.cli("resume", run_id, "--force", "--json").stdout)
    assert out["state"] == "parked" and out["forced"] is True
    wait_for(lambda: project.row(run_id).state == "done", what="forced resume completes",
             diag=lambda: project.diagnose([run_id]))
    events = project.events(run_id)
    repinned = [e for e in events if e["type"] == "source_repinned"]
    assert len(repinned) == 1 and repinned[0]["payload"]["forced"] is True
    mismatch = repinned[0]["payload"]["sourceMismatch"]
    assert mismatch["expectedSha256"] != mismatch["actualSha256"]
    assert events[-1]["type"] == "run_completed"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


@pytest.mark.timeout(90)
def test_watch_follows_a_run_live_and_exits_with_its_outcome(project: Project) -> None:
    project.write_workflow("review", REVIEW)
    project.write_workflow("holding", HOLDING)
    project.start_host()
    run_id = project.detach("review", {"task": "the docs"})
    proc = project.cli("watch", run_id, check=False, timeout=60)
    assert proc.returncode == 3, proc.stderr  # waiting at a checkpoint
    lines = proc.stdout.splitlines()
    assert any("draft: started (step 1)" in line for line in lines)
    assert any("draft: done -> approve" in line for line in lines)
    assert "waiting at approve: approve v1 of the docs?" in lines[-1]
    child = json.loads(project.cli("answer", run_id, "ok", "--json").stdout)["runId"]
    done = project.cli("watch", child, check=False, timeout=60)
    assert done.returncode == 0 and "completed:" in done.stdout.splitlines()[-1]
    # Watching is view-only: a watcher killed mid-run changes nothing.
    held = project.detach("holding")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node running")
    viewer = subprocess.Popen([sys.executable, "-m", "pi_workflows", "watch", held,
                               "--project", str(project.root)], env=project.env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert viewer.stdout is not None
        output = LineReader(viewer.stdout)
        assert "run_started" in output.next(30, "the watcher's run_started line")
        assert "hold: started (step 1)" in output.next(30, "the watcher's node line")
    finally:
        reap(viewer)
    project.release()
    wait_for(lambda: project.row(held).state == "done", what="run done without its watcher")
    missing = project.cli("watch", "20990101T000000Z-none-00000000", check=False)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
