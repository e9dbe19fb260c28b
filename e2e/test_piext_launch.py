"""The Pi extension in a real Pi (RPC mode, the scripted model): seed 002's end-to-end
test of a model-started durable launch that fails and is corrected, duplicate
boundary events that start a run once, a cancel during `starting` that gives no
follow-up, and no engine activity while a turn is active."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .harness import Project, wait_for
from .piext_kit import (
    BIN,
    STEP_S,
    activations,
    extension_drill,
    follow_ups,
    session_file,
    session_id,
    start,
    steps,
    text_of,
    wait_status,
)
from .scripted_model import Reply, Request, Stall, Text, ToolCalls
from .sessions_kit import QUICK, SLOW_LOAD, query

pytestmark = pytest.mark.slow  # real processes: an e2e drill

SECRET = "hunter2-private-input"


def _tool_ends(pi: Any) -> list[dict[str, Any]]:
    return [e for e in pi.events if e.get("type") == "tool_execution_end"]


def _ran(project: Project, name: str = "quick.ran") -> list[str]:
    path = project.root / name
    return path.read_text().split() if path.exists() else []


@pytest.mark.timeout(150)
def test_seed_002_a_failed_launch_gets_one_follow_up_and_the_model_starts_again(
        project: Project, tmp_path: Path) -> None:
    source = project.write_workflow("quick", QUICK)
    during_turn: dict[str, Any] = {}

    def change_source(request: Request) -> Reply:
        # The tool has returned, the initiating turn has not settled: the run is
        # durable and queued, nothing ran; now the source changes under it.
        rows = query(project, "SELECT run_id, state FROM workflow_run_queue")
        during_turn["rows"] = [(r["run_id"], r["state"]) for r in rows]
        during_turn["bundles"] = sorted(p.name for p in project.paths.runs_dir.glob("*")) \
            if project.paths.runs_dir.exists() else []
        source.write_text(source.read_text() + "\n# changed while the turn was active\n")
        return Text("The workflow is queued.")

    def correct(request: Request) -> Reply:
        during_turn["follow_up_request"] = request
        return ToolCalls(start("quick", task="second try"))

    def after_preflight_error(request: Request) -> Reply:
        during_turn["preflight_error"] = request.texts("tool")[-1]
        return ToolCalls(start("quick", task=f"use {SECRET}"))

    script = steps(
        ToolCalls(start("nope")),  # a preflight error: corrected in the same turn
        after_preflight_error,
        change_source,
        correct,
        Text("Started it again."),
    )
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "run quick"})["success"]
        drill.model.wait_for_requests(4, STEP_S)
        # The second run starts and reaches its first step.
        wait_for(lambda: len(_ran(project)) == 1, STEP_S, what="the second run's step",
                 diag=pi.diagnose)
        wait_status(pi, lambda s: "completed" in s, what="the second run completed")

        refused, *ends = _tool_ends(pi)
        assert refused["isError"] and "no workflow named 'nope'" in \
            during_turn["preflight_error"]
        assert "quick" in during_turn["preflight_error"]  # it names the known ones
        assert len(ends) == 2, ends
        first, second = (e["result"]["details"] for e in ends)
        run1, run2 = first["runId"], second["runId"]
        assert first == {"action": "start", "workflow": "quick", "runId": run1,
                         "queued": True}
        assert ends[0]["result"]["content"][0]["text"] == \
            f"Workflow quick queued (run {run1})."
        assert not ends[0]["isError"]
        # Durable before the turn settled, and nothing ran while it was active.
        assert during_turn["rows"] == [(run1, "queued")]
        assert during_turn["bundles"] == []

        # Exactly one follow-up model turn, with the safe error, no raw input.
        fu = follow_ups(pi)
        assert len(fu) == 1, fu
        text = text_of(fu[0])
        assert text.startswith(f"Workflow quick failed to start (run {run1}): ")
        assert "Inspect the error and call workflow start again" in text
        assert SECRET not in text and "Traceback" not in text
        assert fu[0]["details"]["runId"] == run1
        sent = during_turn["follow_up_request"]
        assert any(text in t for t in sent.texts("user")), sent.texts("user")
        assert not any(SECRET in t for t in sent.texts("user")[1:])

        # The first run stays inspectable by id; the second pins the new source.
        status1 = json.loads(project.cli("status", run1, "--json").stdout)
        assert (status1["queueState"], status1["errorCode"]) == ("failed",
                                                                 "source_changed")
        assert _ran(project) == [run2]
        intents = query(project, "SELECT run_id, state FROM workflow_turn_intents")
        assert [(r["run_id"], r["state"]) for r in intents] == [(run1, "resolved")]
        assert len(drill.model.completions) == 5  # no extra turn after the second run
        drill.check()


@pytest.mark.timeout(180)
def test_duplicate_boundaries_start_once_and_nothing_runs_while_a_turn_is_active(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("quick", QUICK)
    stall = Stall("still ", after=("thinking.",), timeout=STEP_S)
    stall2 = Stall("never ", timeout=STEP_S)
    script = steps(
        ToolCalls(start("quick")),
        stall,  # the initiating turn stays active after the tool returned
        Text("second prompt answered"),
        ToolCalls(start("quick", task="two")),
        stall2,  # Pi is killed during this one
    )

    def starts(run: str) -> int:
        rows = query(project, "SELECT type FROM run_events WHERE run_id = ?", (run,))
        return [r["type"] for r in rows].count("starting")

    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "run quick"})["success"]
        stall.wait_reached(STEP_S)
        # The model's next request can reach the server before Pi's event reaches us.
        wait_for(lambda: len(_tool_ends(pi)) >= 1, STEP_S, what="the start's tool end")
        run = _tool_ends(pi)[0]["result"]["details"]["runId"]
        # The turn is active: the run stays queued and nothing of it runs.
        assert pi.request({"type": "prompt", "message": "/workflow status"})["success"]
        wait_for(lambda: any(e.get("method") == "notify" for e in pi.events), STEP_S,
                 what="the /workflow status answer")
        state = query(project, "SELECT state FROM workflow_run_queue")
        assert [r["state"] for r in state] == ["queued"]
        assert _ran(project) == [] and not project.paths.runs_dir.joinpath(run).exists()
        # A second prompt queued behind the active turn: two agent_end events in a row.
        assert pi.request({"type": "prompt", "message": "and then?",
                           "streamingBehavior": "followUp"})["success"]
        stall.release()
        wait_for(lambda: _ran(project) == [run], STEP_S, what="the run's step",
                 diag=pi.diagnose)
        wait_status(pi, lambda s: "completed" in s, what="the run completed")
        assert starts(run) == 1

        # Another start, and Pi is killed before that turn settles: the run stays queued.
        assert pi.request({"type": "prompt", "message": "again"})["success"]
        stall2.wait_reached(STEP_S)
        wait_for(lambda: len(_tool_ends(pi)) >= 2, STEP_S, what="the second start's tool end")
        run2 = _tool_ends(pi)[1]["result"]["details"]["runId"]
        session = session_file(pi)
        pi.proc.kill()
        pi.close()
        assert [r["state"] for r in query(project, "SELECT state FROM workflow_run_queue"
                                          " WHERE run_id = ?", (run2,))] == ["queued"]
        # Two Pis reopen the session at once: two session_start boundaries race.
        twins = [drill.reopen(session, ready=False) for _ in range(2)]
        wait_for(lambda: run2 in _ran(project), STEP_S, what="the second run's step",
                 diag=twins[0].diagnose)
        wait_for(lambda: not activations(project), STEP_S, what="the activations to end")
        assert _ran(project) == [run, run2]
        assert starts(run2) == 1


@pytest.mark.timeout(120)
def test_a_cancel_during_starting_gives_no_follow_up(project: Project, tmp_path: Path) -> None:
    project.write_workflow("slow", SLOW_LOAD)

    def block(request: Request) -> Reply:
        (project.root / "block-load").write_text("")  # after start's preflight load
        return Text("Queued it.")

    script = steps(ToolCalls(start("slow")), block)
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "run slow"})["success"]
        wait_for(lambda: (project.root / "load.started").exists(), STEP_S,
                 what="the worker loading the workflow", diag=pi.diagnose)
        run = _tool_ends(pi)[0]["result"]["details"]["runId"]
        rows = query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                     (run,))
        assert [r["state"] for r in rows] == ["starting"]
        assert pi.request({"type": "prompt",
                           "message": f"/workflow cancel {run}"})["success"]
        wait_status(pi, lambda s: "cancelled" in s, what="the cancelled status")
        (project.root / "release-load").write_text("")
        # The extension synced past the cancel once its activation ended (a
        # follow-up would have come with that sync); nothing asks for a turn.
        sid = session_id(pi)

        def synced_past_cancel() -> bool:
            head = query(project, "SELECT max(seq) AS s FROM run_events WHERE"
                                  " run_id = ?", (run,))[0]["s"]
            mark = query(project, "SELECT seq FROM session_watermarks WHERE"
                                  " session_id = ? AND pending_from IS NULL", (sid,))
            return bool(mark) and mark[0]["seq"] >= head

        wait_for(synced_past_cancel, STEP_S, what="the extension's sync",
                 diag=pi.diagnose)
        wait_for(lambda: not activations(project), STEP_S, what="activate to end")
        assert follow_ups(pi) == []
        assert query(project, "SELECT * FROM workflow_turn_intents") == []
        assert len(drill.model.completions) == 2
        assert not (project.root / "one.ran").exists()
        drill.check()


@pytest.mark.timeout(150)
def test_a_crash_between_delivery_and_resolution_never_sends_the_follow_up_twice(
        project: Project, tmp_path: Path) -> None:
    """Pi is killed (-9) by the first `resolve-follow-up` call, right after the follow-up
    reached the session: the reopened session finds it in its branch and only resolves."""
    source = project.write_workflow("quick", QUICK)
    wrapper = tmp_path / "pi-workflows-crashing"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = resolve-follow-up ] && [ ! -e "{tmp_path}/crashed" ]; then\n'
        f'  touch "{tmp_path}/crashed"; kill -9 "$PPID"; exit 1\n'
        "fi\n"
        f'exec "{BIN}" "$@"\n')
    wrapper.chmod(0o700)

    def change_source(request: Request) -> Reply:
        source.write_text(source.read_text() + "\n# changed\n")
        return Text("Queued.")

    script = steps(ToolCalls(start("quick")), change_source, Text("I will look into it."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        drill.pi_env.env["PI_WORKFLOWS_BIN"] = str(wrapper)
        pi = drill.open()
        session = session_file(pi)
        assert pi.request({"type": "prompt", "message": "run quick"})["success"]
        wait_for(lambda: (tmp_path / "crashed").exists(), STEP_S, what="the crash",
                 diag=pi.diagnose)
        assert pi.proc.wait(STEP_S) == -9
        pi.close()
        [intent] = query(project, "SELECT * FROM workflow_turn_intents")
        assert intent["state"] == "pending"
        # Reopen once the dead Pi's lease on the follow-up has run out.
        wait_for(lambda: intent["claim_expires_at"] < time.time() * 1000, STEP_S,
                 what="the lease to expire")
        drill.pi_env.env["PI_WORKFLOWS_BIN"] = str(BIN)
        before = len(drill.model.completions)  # 3 if the follow-up turn got out before the kill
        reopened = drill.reopen(session, ready=False)
        wait_for(lambda: query(project, "SELECT 1 FROM workflow_turn_intents"
                                        " WHERE state = 'resolved'"), STEP_S,
                 what="the follow-up resolved", diag=reopened.diagnose)
        assert len(follow_ups(reopened)) == 1
        assert len(drill.model.completions) == before  # the reopened session sent nothing
        drill.check()
