"""The watch view's event lines, including events it does not know."""

from __future__ import annotations

from pi_workflows.supervisor.watch import describe


def _event(kind: str, payload: dict[str, object], node: str | None = None) -> dict[str, object]:
    event: dict[str, object] = {"seq": 7, "at": 0, "type": kind, "payload": payload}
    if node:
        event["nodeId"] = node
    return event


def test_failures_show_outcome_code_and_route() -> None:
    line = describe(_event("node_failed", {"next": "recover", "result": {
        "outcome": "timed_out", "errorCode": "node_timed_out", "error": "took too long"}}, "a"))
    assert line.endswith("a: timed_out [node_timed_out] took too long -> recover")
    line = describe(_event("run_failed", {"error": {"code": "max_steps_exceeded",
                                                    "message": "too many"}}))
    assert line.endswith("failed [max_steps_exceeded] too many")


def test_long_outputs_are_cut_and_unknown_events_are_named() -> None:
    line = describe(_event("node_finished", {"next": None, "output": "x" * 1000}, "a"))
    assert len(line) < 140 and line.endswith("…")
    assert describe(_event("from_the_future", {"whatever": 1}, "n")).endswith(
        "from_the_future n")
    assert describe({"seq": 1}).endswith("#1 ?")
