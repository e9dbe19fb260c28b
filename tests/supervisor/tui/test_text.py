"""The viewer's words for a real run document: the inspector and replay without a screen.

A recorded run's document from the real stream; the agent conversation
records are added in the shape the worker's capture writes (an agent step
needs a Pi, which the e2e drills have), to read how the inspector says them.
"""

from __future__ import annotations

import pytest
from pi_workflows.supervisor.tui.replay import Replay
from pi_workflows.supervisor.tui.text import inspector_text

from .recorded import Recorded

pytestmark = pytest.mark.timeout(60)


def test_the_inspector_shows_output_streams_error_and_conversation(
        recorded: Recorded) -> None:
    doc = recorded.stream().run_doc(recorded.shipped)
    (build,) = [s for s in doc["steps"] if s["nodeId"] == "build"]
    attempt = build["attemptId"]
    doc["conversation"] = [
        {"at": 1, "attemptId": attempt, "nodeId": "build", "kind": "text", "text": "on it"},
        {"at": 2, "attemptId": attempt, "nodeId": "build", "kind": "tool_start",
         "tool": "bash", "args": {"command": "ls"}},
        {"at": 3, "attemptId": attempt, "nodeId": "build", "kind": "tool_end",
         "tool": "bash", "isError": True, "result": "no such file"},
        {"at": 4, "attemptId": attempt, "nodeId": "build", "kind": "message_end"},
        {"at": 5, "attemptId": "other", "nodeId": "fetch", "kind": "text", "text": "not mine"},
    ]
    text = inspector_text(doc, build)
    assert text.startswith("build · shell · ok")
    assert "stdout:\nbuilding" in text and "stderr:\nwarn" in text
    assert ('conversation:\nagent: on it\n→ bash {"command": "ls"}\n'
            "← bash failed: no such file") in text
    assert "not mine" not in text and "message_end" not in text
    broken = recorded.stream().run_doc(recorded.broken)
    (explode,) = [s for s in broken["steps"] if s["nodeId"] == "explode"]
    assert "the build is broken" in inspector_text(broken, explode)


def test_replay_walks_every_event_and_returns_to_live(recorded: Recorded) -> None:
    doc = recorded.stream().run_doc(recorded.shipped)
    replay = Replay()
    total = len(doc["trace"])
    seen = []
    for _ in range(total + 2):  # past the first event it stays there
        replay.back(doc)
        seen.append(replay.states(doc).get("report", "pending"))
    assert replay.pos == 1 and seen[0] == "done" and seen[-1] == "pending"
    assert replay.steps(doc) == []  # nothing had started at the first event
    for _ in range(total - 1):
        replay.forward(doc)
    assert replay.live and replay.states(doc) == doc["nodes"]
