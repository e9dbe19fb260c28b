"""The watch view's event lines, including events it does not know."""

from __future__ import annotations

from pathlib import Path

from pi_workflows.supervisor.views.follower import describe


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


def test_a_replaced_agent_output_reads_as_a_line_of_its_node() -> None:
    line = describe(_event("agent_output_replaced", {"by": "validate"}, "name"))
    assert line.endswith(" name: submission accepted as the value validate returned (Replace)")


def test_long_outputs_are_cut_and_unknown_events_are_named() -> None:
    line = describe(_event("node_finished", {"next": None, "output": "x" * 1000}, "a"))
    assert len(line) < 140 and line.endswith("…")
    assert describe(_event("from_the_future", {"whatever": 1}, "n")).endswith(
        "from_the_future n")
    assert describe({"seq": 1}).endswith("#1 ?")


def test_watch_returns_when_the_queue_ended_a_run_whose_bundle_is_missing(
        tmp_path: Path) -> None:
    from pi_workflows.protocol.errors import ExitCode
    from pi_workflows.protocol.store import RunSource, Store
    from pi_workflows.supervisor.views.watch import watch

    with Store(tmp_path / "store.sqlite3") as store:
        store.enqueue_detached("r1", RunSource("w", "/w.py", "ab" * 32, "sha256:x"), {})
        claim = store.claim_by_id("r1", "me")
        store.mark_running("r1", claim.token)
        store.finish("r1", claim.token, "completed")  # but no bundle exists
        said: list[str] = []
        code = watch(store, tmp_path / "runs", "r1", echo=said.append, poll_s=0.01)
    assert code == ExitCode.RUN_FAILED
    assert said == ["done, but the run's bundle is missing or unreadable; see"
                    " `pi-workflows status r1`"]
