"""examples/compose.workflow.py runs end to end: its included review-step routes a
long note to publish and a short one to revise; the child also runs on its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.engine import Harness, assert_well_formed

pytestmark = pytest.mark.timeout(60)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _copy(h: Harness) -> None:
    for name in ("compose", "review-step"):
        shutil.copy(EXAMPLES / f"{name}.workflow.py", h.workflows / f"{name}.workflow.py")


def test_a_long_note_leaves_by_the_approved_exit(h: Harness) -> None:
    _copy(h)
    run_id = h.launch("compose", {"task": "ship  the new parser on monday morning"})
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["finalOutput"] == {"published": "ship the new parser on monday morning",
                                    "words": 7}
    assert state["outputs"]["review/score"] == {"words": 7, "verdict": "good"}
    kinds = [(e["type"], e.get("nodeId")) for e in assert_well_formed(h.bundle(run_id))
             if e["type"].startswith("include_")]
    assert kinds == [("include_entered", "review"), ("include_exited", "review.approved")]
    assert [f["mount"] for f in h.bundle(run_id).manifest()["includes"]] == ["review"]


def test_a_short_note_leaves_by_the_rejected_exit(h: Harness) -> None:
    _copy(h)
    run_id = h.launch("compose", {"text": "too short"})
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["outputs"]["revise"] == {"revise": True, "exit": "rejected",
                                          "why": "2 words; a draft needs at least 5"}
    assert state["finalOutput"]["message"] == (
        "needs another pass: 2 words; a draft needs at least 5")
    assert "publish" not in state["outputs"]


def test_the_included_child_runs_on_its_own(h: Harness) -> None:
    _copy(h)
    run_id = h.launch("review-step", {"task": "one two three four five"})
    assert h.execute(run_id).outcome == "completed"
    assert h.state(run_id)["finalOutput"] == {"text": "one two three four five", "words": 5}
