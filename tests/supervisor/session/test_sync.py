"""The sync snapshot: each notification and follow-up exactly once, and what a person reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.supervisor.session import sync

from tests.helpers.clocks import FakeClock

pytestmark = pytest.mark.timeout(30)
SOURCE = RunSource("flow", "/p/.pi/workflows/flow.workflow.py", "ab" * 32, "sha256:x")


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock[int]) -> Store:
    return Store(tmp_path / "store.sqlite3", clock=clock, lease_ms=10_000)


def _note(store: Store, idx: int) -> None:
    store.add_notification("s1", "r1", "tell", idx, "progress",
                           {"message": f"step {idx}", "workflow": "flow"})


def test_a_notification_is_delivered_once_and_again_only_if_the_delivery_died(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    store.enqueue_detached("r1", SOURCE, {}, notify_session="s1")
    _note(store, 1)
    died = sync.take(store, tmp_path, "s1")
    assert [n.payload["message"] for n in died.notifications] == ["step 1"]
    # The process died after showing it and before marking it: within the
    # lease nobody else gets it; after the lease it comes once more.
    assert sync.take(store, tmp_path, "s1").notifications == []
    clock.advance(10_001)
    retry = sync.take(store, tmp_path, "s1")
    assert [n.id for n in retry.notifications] == [n.id for n in died.notifications]
    sync.delivered(store, retry)
    clock.advance(10_001)
    assert sync.take(store, tmp_path, "s1").notifications == []
    assert sync.take(store, tmp_path, "other").notifications == []  # addressed to s1 only


def test_a_follow_up_is_shown_once_with_the_seeds_text(store: Store, tmp_path: Path) -> None:
    store.reserve("r1", SOURCE, {}, "s1")
    token = store.claim_by_id("r1", "me", session="s1").token
    store.fail("r1", token, "source_changed", "the workflow file changed; start it again.")
    snapshot = sync.take(store, tmp_path, "s1")
    assert sync.lines(snapshot)[-1] == (
        "follow-up: Workflow flow failed to start (run r1): the workflow file changed; start"
        " it again. Inspect the error and call workflow start again only after you correct"
        " the cause.")
    shown = snapshot.as_json()
    assert shown["followUps"][0]["errorCode"] == "source_changed"
    assert shown["runs"][0]["change"] == "failed" and shown["session"] == "s1"
    sync.delivered(store, snapshot)
    assert sync.take(store, tmp_path, "s1").empty


def test_lines_say_what_to_do(store: Store, tmp_path: Path) -> None:
    store.enqueue_detached("r1", SOURCE, {})
    claim = store.claim_by_id("r1", "me")
    store.mark_running("r1", claim.token)
    store.park("r1", claim.token)
    snapshot = sync.take(store, tmp_path, "s1")  # first sync: the project's parked run
    assert snapshot.runs[0]["change"] == "parked" and snapshot.runs[0]["hostRunning"] is False
    assert "no host is running: start `pi-workflows host --background`" in sync.lines(snapshot)[0]
    info = {"runId": "r2", "workflow": "flow", "change": "waiting", "waitingOn": "ask",
            "summary": "deploy?"}
    assert sync.run_line(info).endswith(
        "waiting at ask: deploy?; answer with `pi-workflows answer r2`")
    info["summary"] = "deploy\nto prod?"
    info["answerCommand"] = "pi-workflows answer r2 TEXT... --session s1"
    assert sync.run_line(info).endswith(
        "waiting at ask: deploy to prod?; answer with"
        " `pi-workflows answer r2 TEXT... --session s1`")


def test_a_large_final_output_is_bounded(tmp_path: Path) -> None:
    value, cut = sync._bounded({"text": "x" * 10_000})
    assert cut and isinstance(value, str) and len(value) <= sync.MAX_OUTPUT_CHARS + 1
    assert sync._bounded({"ok": True}) == ({"ok": True}, False)


def test_a_paused_run_is_a_change_of_its_own_with_its_resume_command(
        store: Store, tmp_path: Path) -> None:
    store.enqueue_detached("r1", SOURCE, {})
    claim = store.claim_by_id("r1", "me")
    store.mark_running("r1", claim.token)
    def seen() -> sync.Snapshot:
        snapshot = sync.take(store, tmp_path, "s1")
        sync.delivered(store, snapshot)  # shown, so the next sync starts after it
        return snapshot

    seen()  # caught up while it runs
    store.request_pause("r1")
    asked = seen()
    assert asked.runs[0]["change"] == "running" and asked.runs[0]["pauseRequested"] is True
    store.park("r1", claim.token, code="paused", message="paused by request")
    held = seen()
    assert held.runs[0]["change"] == "paused"
    assert held.runs[0]["resumeCommand"] == "pi-workflows resume r1"
    assert sync.lines(held)[0] == "r1  flow  paused; `pi-workflows resume r1` continues it"
    store.unpause("r1")
    assert seen().runs[0]["change"] == "parked"


def _model_run(store: Store, run_id: str = "r1") -> str:
    store.reserve(run_id, SOURCE, {}, "s1", by_agent=True)
    token = store.claim_by_id(run_id, "me", session="s1").token
    store.mark_running(run_id, token)
    return token


def test_each_deferred_turn_says_what_happened_and_a_presentation_is_hidden(
        store: Store, tmp_path: Path) -> None:
    store.fail("r1", _model_run(store), "node_timed_out", "the node did not finish within 5 s.",
               run_status="timed_out")
    token = _model_run(store, "r2")
    store.request_cancel("r2", by_session="s1")
    store.cancel("r2", token)
    store.owe_claim_lost_turn("s1", "r3", "plan", "a-1", workflow="flow")
    store.enqueue_detached("r4", SOURCE, {}, notify_session="s1")
    claim = store.claim_by_id("r4", "me")
    store.mark_running("r4", claim.token)
    store.finish("r4", claim.token, "completed", presentation="PROMPT AND FENCED DATA")
    snapshot = sync.take(store, tmp_path, "s1", hold_follow_ups=True)
    shown = {f["runId"]: f for f in snapshot.as_json()["followUps"]}
    assert shown["r1"]["message"] == (
        "Workflow flow (run r1), which you started, timed out after it started"
        " [node_timed_out]: the node did not finish within 5 s. Inspect it (workflow tool,"
        " action status) and tell the user; start it again only after you correct the cause.")
    assert shown["r2"]["message"] == ("Workflow flow (run r2), which you cancelled, has now"
                                      " stopped: it ended cancelled and nothing of it runs any"
                                      " more.")
    assert "step plan (attempt a-1) is not yours to answer" in shown["r3"]["message"]
    assert shown["r4"]["message"] == "PROMPT AND FENCED DATA"
    assert [shown[r]["kind"] for r in ("r1", "r2", "r3", "r4")] == [
        "run_failed", "agent_cancelled", "claim_lost", "presentation"]
    assert [shown[r]["hidden"] for r in ("r1", "r2", "r3", "r4")] == [False, False, False, True]
    assert all(f["token"] == snapshot.held_token for f in shown.values())
    assert "follow-up: the presentation of run r4 (flow)" in sync.lines(snapshot)
