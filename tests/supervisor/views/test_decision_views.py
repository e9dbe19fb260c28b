"""A human decision's request as status, watch, the trace lines and sync show it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pi_workflows.supervisor.session import sync
from pi_workflows.supervisor.views.decisions import (
    answered_text,
    request_line,
    request_lines,
    status_fields,
)
from pi_workflows.supervisor.views.follower import TraceFollower, describe
from pi_workflows.supervisor.views.status import run_status

from tests.helpers.cli import run_cli
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

SHIP = """
from pi_workflows import human_decision, human_decision_edge, choice, text_input
workflow = define_workflow(
    start_at="ship",
    nodes=[
        human_decision("ship", question="Ship   release\\n1.2?", audience="release managers",
                       summary="the notes are ready",
                       choices=[choice("approve", description="ship it"), choice("reject"),
                                text_input("other", "say what to change", max_length=50)],
                       on_timeout="reject", timeout=60),
        compute("done", lambda ctx: ctx.outputs["ship"]),
    ],
    edges=[human_decision_edge("ship", {"approve": "done", "reject": "done",
                                        "other": "done"})],
)
"""
ANSWERS = "approve | reject | other TEXT (1-50 characters)"


def _waiting(h: Harness) -> str:
    h.write("ship", SHIP)
    run = h.launch("ship", {})
    assert h.execute(run).outcome == "waiting"
    return run


def test_status_json_and_the_person_lines_show_the_question_and_the_answers(
        cli: Harness) -> None:
    h = cli
    run = _waiting(h)
    info = run_status(h.row(run), h.runs)
    request = info["request"]
    assert request["question"] == "Ship   release\n1.2?" and request["onTimeout"] == "reject"
    due = request["dueAt"]
    lines = request_lines(request)
    assert lines[:3] == ["    Ship release 1.2?", "    who should answer: release managers",
                         "    answers:"]
    assert lines[3:6] == ["      approve - ship it", "      reject",
                          "      other TEXT (1-50 characters) - say what to change"]
    assert lines[6].startswith("    unanswered by 20") and lines[6].endswith(
        " UTC, the host answers reject")
    one = request_line(request)
    assert one.startswith(f'asks "Ship release 1.2?" (of release managers): {ANSWERS};'
                          " unanswered by ") and one.endswith(": reject")
    assert str(due)  # recorded in ms on the wall clock
    shown = run_cli("status", run, "--project", str(h.project), cwd=h.root)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "waiting for an answer at ship" in text
    assert "    the notes are ready" in text and "      other TEXT (1-50 characters)" in text
    assert f"  answer it with one of the answers above: pi-workflows answer {run} ANSWER" in text
    assert '"your answer"' not in text


def test_watch_prints_the_request_of_a_waiting_decision(cli: Harness) -> None:
    h = cli
    run = _waiting(h)
    watched = run_cli("watch", run, "--project", str(h.project), cwd=h.root)
    assert watched.returncode == 3, watched.stderr
    assert "Ship release 1.2?" in watched.stdout
    assert "approve | reject | other TEXT (1-50 characters); unanswered by" in watched.stdout


def test_the_trace_line_of_run_waiting_names_the_answers(h: Harness) -> None:
    run = _waiting(h)
    [event] = [e for e in h.bundle(run).events() if e["type"] == "run_waiting"]
    line = describe(event)
    asks = request_line(h.state(run)["waitingOutput"]["request"])
    assert line.endswith(f"waiting at ship: the notes are ready; {asks}")


def test_sync_names_the_question_the_answers_and_the_answer_form(h: Harness) -> None:
    run = _waiting(h)
    snapshot = sync.take(h.store, h.runs, "s1")
    [info] = [r for r in snapshot.as_json()["runs"] if r["runId"] == run]
    assert info["request"]["choices"][0]["label"] == "approve"
    assert info["answerCommand"] == f"pi-workflows answer {run} ANSWER --session s1"
    [line] = [line for line in sync.lines(snapshot) if line.startswith(run)]
    assert 'waiting at ship: the notes are ready; asks "Ship release 1.2?"' in line
    assert ANSWERS in line and "\n" not in line


def test_a_continuation_says_who_answered_but_never_the_text(cli: Harness) -> None:
    h = cli
    run = _waiting(h)
    child = h.answer(run, "other keep it secret")
    assert h.execute(child).outcome == "completed"
    info = run_status(h.row(child), h.runs)
    assert info["answeredWith"] == "other" and info["answeredBy"] == "person"
    assert "request" not in info
    assert answered_text(info) == "answered by a person with other"
    assert "secret" not in json.dumps(status_fields(h.state(child), False))
    shown = run_cli("status", child, "--project", str(h.project), cwd=h.root).stdout
    assert "  answered by a person with other" in shown


def test_a_plain_checkpoint_has_no_request(h: Harness) -> None:
    h.write("plain", """
workflow = define_workflow(start_at="ask", nodes=[checkpoint("ask", summary="go?")])
""")
    run = h.launch("plain", {})
    assert h.execute(run).outcome == "waiting"
    info = run_status(h.row(run), h.runs)
    assert "request" not in info and info["summary"] == "go?"
    assert request_lines(None) == [] and request_line(None) == ""


@pytest.mark.timeout(20)
def test_the_live_view_shows_the_request_when_the_run_waits(tmp_path: Path) -> None:
    from tests.helpers.clocks import FakeClock
    from tests.supervisor.views.test_live import Run, _text, _view

    request = {"kind": "human_decision", "question": "Ship it?", "audience": "ops",
               "choices": [{"label": "yes", "description": "go"},
                           {"label": "why", "text": {"prompt": "p", "minLength": 2,
                                                     "maxLength": 9}}],
               "onTimeout": None, "dueAt": None}
    output = {"summary": "ready", "request": request}
    run, clock = Run(tmp_path), FakeClock(0)
    view, out = _view(clock)
    follower = TraceFollower(run.bundle)
    run.event("run_started", 0, workflow="wf")
    run.event("node_started", 0, "ask", step=1)
    run.event("run_waiting", 10, "ask", waitingNode="ask", output=output)
    run.state({"status": "waiting", "waitingNode": "ask", "updatedAt": 10,
               "waitingOutput": output})
    view.end(follower, None)
    text = _text(out)
    assert "? waiting for an answer at ask" in text and "ready" in text
    assert "Ship it?" in text and "who should answer: ops" in text
    assert "  yes - go" in text and "  why TEXT (2-9 characters) - p" in text
    assert "answer it with one of the answers above: pi-workflows answer r1 ANSWER" in text
    assert '"your answer"' not in text


def test_logs_of_the_waiting_step_show_the_request(cli: Harness) -> None:
    h = cli
    run = _waiting(h)
    shown = run_cli("logs", run, "ship", "--project", str(h.project), cwd=h.root)
    assert shown.returncode == 0, shown.stderr
    assert "waiting for an answer: the notes are ready" in shown.stdout
    assert "  answers:" in shown.stdout and "    reject" in shown.stdout


def test_a_long_question_reads_as_text_in_watch_and_logs_not_as_an_artifact(
        h: Harness) -> None:
    from pi_workflows.supervisor.cli.commands.logs import body
    from pi_workflows.supervisor.views.steplogs import read_steps

    # Over 4 KiB, the question is kept in the bundle's artifacts/ like any long string.
    h.write("long", """
from pi_workflows import human_decision, choice
workflow = define_workflow(start_at="ask", nodes=[human_decision(
    "ask", question=lambda ctx: "Publish this note? " + "word " * 1200,
    choices=[choice("yes"), choice("no")])])
""")
    run = h.launch("long", {})
    assert h.execute(run).outcome == "waiting"
    (waiting,) = [line for line in TraceFollower(h.bundle(run)).lines() if "waiting at" in line]
    assert 'asks "Publish this note? word word' in waiting and "$artifact" not in waiting
    (step,) = read_steps(h.bundle(run))
    shown = body(step)
    assert "  Publish this note? word word" in shown and "$artifact" not in shown
