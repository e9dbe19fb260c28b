"""Node states from a run's projection and trace (``views.graph.states``)."""

from __future__ import annotations

from pi_workflows.supervisor.views.graph.states import node_states


def ev(kind: str, node: str) -> dict[str, object]:
    return {"type": kind, "nodeId": node}


def test_a_running_run() -> None:
    events = [ev("node_started", "a"), ev("node_finished", "a"), ev("node_started", "b")]
    raw = {"status": "running", "currentNode": "b", "currentAttempt": "b-2-abc", "results": {
        "a": {"outcome": "ok"}}}
    assert node_states(raw, events, nodes=["a", "b", "c"]) == {
        "a": "done", "b": "running", "c": "pending"}


def test_waiting_failed_and_skipped() -> None:
    raw = {"status": "waiting", "waitingNode": "ask", "currentNode": "ask"}
    events = [ev("node_started", "ask"), ev("run_waiting", "ask")]
    assert node_states(raw, events) == {"ask": "waiting"}
    failed = {"status": "failed", "currentNode": "b", "results": {"a": {"outcome": "ok"},
                                                                   "b": {"outcome": "failed"}}}
    events = [ev("node_started", "a"), ev("node_finished", "a"), ev("node_started", "b"),
              ev("node_failed", "b")]
    assert node_states(failed, events, nodes=["a", "b", "c"]) == {
        "a": "done", "b": "failed", "c": "skipped"}


def test_a_loop_and_a_cancelled_attempt() -> None:
    events = [ev("node_started", "a"), ev("node_finished", "a"), ev("node_started", "a")]
    assert node_states({"status": "cancelled", "currentNode": "a"}, events) == {"a": "cancelled"}
    assert node_states({"status": "running", "currentNode": "a", "currentAttempt": "x"},
                       events) == {"a": "running"}


def test_include_entries_and_other_events() -> None:
    events = [ev("include_entered", "review"), {"type": "node_note", "nodeId": "x"},
              {"type": "node_started"}]
    assert node_states({"status": "completed"}, events) == {"review": "done"}
