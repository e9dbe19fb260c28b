"""The views of a composed run: the mount path of a node, and the include events in
``watch``/``logs`` lines and in the live view (a real run through the harness)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from pi_workflows.supervisor.views.follower import TraceFollower, describe
from pi_workflows.supervisor.views.live import LiveView
from pi_workflows.supervisor.views.mounts import mount_line, mount_note
from pi_workflows.supervisor.views.status import where_text
from rich.console import Console

from tests.helpers.engine import Harness, assert_well_formed

pytestmark = pytest.mark.timeout(60)
ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_mount_note_names_the_include_of_a_node() -> None:
    assert mount_note("review/score") == " (in include review)"
    assert mount_note("outer/inner/score") == " (in include outer/inner)"
    assert mount_note("draft") == "" and mount_note(None) == ""
    info = {"currentNode": "review/score", "queueState": "running"}
    assert where_text(info) == "at review/score (in include review)"
    waiting = {"waitingOn": "review/ask", "queueState": "done"}  # a decision in the child
    assert where_text(waiting) == "at review/ask (in include review)"
    event = {"type": "run_waiting", "at": 0, "seq": 5,
             "payload": {"waitingNode": "review/ask", "output": {"summary": "ok?"}}}
    assert describe(event).endswith(" waiting at review/ask (in include review): ok?")
    from pi_workflows.supervisor.session.sync import run_line
    line = run_line({"runId": "r1", "workflow": "wf", "change": "waiting",
                     "waitingOn": "review/ask", "summary": "ok?", "answerCommand": "x"})
    assert "waiting at review/ask (in include review): ok?" in line


def test_include_events_read_as_one_line_each() -> None:
    entered = {"type": "include_entered", "nodeId": "review", "at": 0, "seq": 3,
               "payload": {"mount": "review", "workflow": "review-step",
                           "next": "review/score"}}
    exited = {"type": "include_exited", "nodeId": "review.approved", "at": 0, "seq": 9,
              "payload": {"mount": "review", "exit": "approved", "next": "publish"}}
    assert mount_line(entered) == ("review: entered include (workflow review-step) ->"
                                   " review/score")
    assert mount_line(exited) == "review: left include by exit approved -> publish"
    assert describe(entered).endswith(mount_line(entered) or "?")
    assert describe(exited).endswith("left include by exit approved -> publish")
    started = {"type": "node_started", "nodeId": "review/score", "at": 0, "seq": 4,
               "payload": {"step": 2, "rerun": False}}
    assert describe(started).endswith("review/score: started (step 2) (in include review)")
    assert mount_line(started) is None


def test_the_live_view_shows_the_mount_path_and_passes_entries_and_exits(h: Harness) -> None:
    for name in ("compose", "review-step"):
        shutil.copy(EXAMPLES / f"{name}.workflow.py", h.workflows / f"{name}.workflow.py")
    run_id = h.launch("compose", {"text": "a note with more than five words"})
    assert h.execute(run_id).outcome == "completed"
    assert_well_formed(h.bundle(run_id))
    out = io.StringIO()
    view = LiveView(console=Console(file=out, force_terminal=True, width=200,
                                    color_system=None, highlight=False))
    follower = TraceFollower(h.bundle(run_id))
    view.show(follower)
    view.end(follower, h.row(run_id))
    text = ESC.sub("", out.getvalue()).replace("\r", "")
    assert "review: entered include (workflow review-step) -> review/score" in text
    assert "review: left include by exit approved -> publish" in text
    rows = {w[1]: w[2] for w in (line.split() for line in text.splitlines()) if len(w) >= 3}
    assert rows["review/score"] == "done" and rows["review"] == "done"
    assert rows["review.approved"] == "done" and rows["review.rejected"] == "skipped"
